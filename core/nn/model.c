/* model.c: the model calls that report errors, out of line so that model.h
 * (installed) needs none of the core's internals. */
#include "model.h"

#include "../graph_internal.h"

dg_node *dg_model_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    if (!m || !m->forward) return dg__graph_fail(g, DG_ERR_INVALID, "model: NULL model or forward");
    return m->forward(g, m, x, mode);
}

/* *t: the forward's compute dtype; false, with g failed naming `op`, for
 * one that is no float dtype */
static bool compute_dtype(dg_graph *g, const dg_forward_mode *mode, const char *op, dg_dtype *t) {
    *t = mode ? mode->compute : DG_F32;
    if (*t == DG_F32 || *t == DG_BF16 || *t == DG_F16) return true;
    dg__graph_fail(g, DG_ERR_INVALID, "model: %s dtype %s (f32, bf16 or f16)", op, dg_dtype_name(*t));
    return false;
}

dg_node *dg_model_matmul(dg_graph *g, const dg_forward_mode *mode, dg_node *a, dg_node *b, bool trans_a,
                         bool trans_b) {
    dg_dtype t;
    if (!compute_dtype(g, mode, "matmul", &t)) return NULL;
    return dg_matmul(g, dg_cast(g, a, t), dg_cast(g, b, t), trans_a, trans_b);
}

dg_node *dg_model_linear(dg_graph *g, const dg_forward_mode *mode, dg_node *x, dg_node *w, dg_node *b) {
    dg_dtype t;
    if (!compute_dtype(g, mode, "linear", &t)) return NULL;
    /* float32: the product and the bias sum as they always were; 16-bit:
     * the product stored in t, the bias rounded to t and added in it */
    return dg_add(g, dg_matmul_ex(g, dg_cast(g, x, t), dg_cast(g, w, t), false, false, t), dg_cast(g, b, t));
}

dg_node *dg_model_attention(dg_graph *g, const dg_forward_mode *mode, dg_node *q, dg_node *k, dg_node *v,
                            float scale, bool causal) {
    dg_dtype t;
    if (!compute_dtype(g, mode, "attention", &t)) return NULL;
    return dg_attention(g, dg_cast(g, q, t), dg_cast(g, k, t), dg_cast(g, v, t), scale, causal);
}

dg_node *dg_model_conv(dg_graph *g, const dg_forward_mode *mode, dg_node *x, dg_node *w, dg_conv2d_opts o) {
    dg_dtype t;
    if (!compute_dtype(g, mode, "conv2d", &t)) return NULL;
    return dg_cast(g, dg_conv2d(g, dg_cast(g, x, t), dg_cast(g, w, t), NULL, o), DG_F32);
}
