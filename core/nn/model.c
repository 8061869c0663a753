/* model.c: the model calls that report errors, out of line so that model.h
 * (installed) needs none of the core's internals. */
#include "model.h"

#include "../graph_internal.h"

dg_node *dg_model_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    if (!m || !m->forward) return dg__graph_fail(g, DG_ERR_INVALID, "model: NULL model or forward");
    return m->forward(g, m, x, mode);
}

dg_node *dg_model_matmul(dg_graph *g, const dg_forward_mode *mode, dg_node *a, dg_node *b, bool trans_a,
                         bool trans_b) {
    dg_dtype t = mode ? mode->matmul : DG_F32;
    if (t != DG_F32 && t != DG_BF16 && t != DG_F16)
        return dg__graph_fail(g, DG_ERR_INVALID, "model: matmul dtype %s (f32, bf16 or f16)", dg_dtype_name(t));
    return dg_matmul(g, dg_cast(g, a, t), dg_cast(g, b, t), trans_a, trans_b);
}
