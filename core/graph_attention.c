/* graph_attention.c: the builders of attention and language models:
 * layer_norm, embedding and the fused attention op. */
#include "attrs.h"
#include "graph.h"
#include "graph_internal.h"

#include <math.h>

dg_node *dg_layer_norm(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, float eps) {
    dg_node *in[3] = {x, scale, shift};
    if (!dg__check_float_inputs(g, "layer_norm", 3, in)) return NULL;
    if (!(eps > 0.0f)) return dg__graph_fail(g, DG_ERR_INVALID, "layer_norm: eps %g must be > 0", (double)eps);
    int64_t d = x->shape.d[x->shape.ndim - 1];
    char sx[96], sp[96];
    for (int i = 1; i < 3; i++)
        if (in[i]->shape.ndim != 1 || in[i]->shape.d[0] != d)
            return dg__graph_fail(g, DG_ERR_SHAPE, "layer_norm: '%s' %s must be [%lld], one per column of input %s",
                                  in[i]->name, dg_shape_str(in[i]->shape, sp, sizeof sp), (long long)d,
                                  dg_shape_str(x->shape, sx, sizeof sx));
    dg_node *y = dg__node_new(g, DG_OP_LAYER_NORM, x->shape, 3, in);
    if (!y) return NULL;
    y->dtype = x->dtype; /* its stats stay float32 */
    dg__attr_norm_set(y, (dg_attr_norm){eps, 0.0f, d});
    return dg__side_new(g, y, DG_SHAPE(2, dg_node_numel(x) / d), "stats") ? y : NULL;
}

dg_node *dg_embedding(dg_graph *g, dg_node *table, dg_node *ids) {
    if (!dg__check_f32_inputs(g, "embedding", 1, &table)) return NULL;
    if (!ids) return dg__graph_fail(g, DG_ERR_INVALID, "embedding: ids are NULL");
    if (!dg__graph_owns(g, ids)) return dg__graph_fail(g, DG_ERR_INVALID, "embedding: ids belong to another graph");
    char st[96], si[96];
    dg_shape_str(table->shape, st, sizeof st);
    dg_shape_str(ids->shape, si, sizeof si);
    if (table->shape.ndim != 2)
        return dg__graph_fail(g, DG_ERR_SHAPE, "embedding: table '%s' %s must be [V, D]", table->name, st);
    if (ids->dtype != DG_I32 || ids->shape.ndim > 3)
        return dg__graph_fail(g, DG_ERR_SHAPE, "embedding: ids '%s' %s must be int32 with at most 3 axes", ids->name,
                              si);
    if (table->shape.d[0] > INT32_MAX)
        return dg__graph_fail(g, DG_ERR_SHAPE, "embedding: table %s has more rows than an int32 id can name", st);
    dg_shape s = ids->shape;
    s.d[s.ndim++] = table->shape.d[1];
    dg_node *in[2] = {table, ids};
    return dg__node_new(g, DG_OP_EMBEDDING, s, 2, in);
}

/* q, k, v all float32, all bf16 or all f16 (a mix is refused naming the
 * dtypes); the output in their dtype, the log-sum-exp float32 */
dg_node *dg_attention(dg_graph *g, dg_node *q, dg_node *k, dg_node *v, float scale, bool causal) {
    dg_node *in[3] = {q, k, v};
    if (!dg__check_float_inputs(g, "attention", 3, in)) return NULL;
    char sq[96], sk[96], sv[96];
    dg_shape_str(q->shape, sq, sizeof sq);
    if (q->shape.ndim != 4)
        return dg__graph_fail(g, DG_ERR_SHAPE, "attention: q %s must be [B,H,T,Dh]", sq);
    if (!dg_shape_eq(q->shape, k->shape) || !dg_shape_eq(q->shape, v->shape))
        return dg__graph_fail(g, DG_ERR_SHAPE, "attention: q %s, k %s and v %s must have the same shape", sq,
                              dg_shape_str(k->shape, sk, sizeof sk), dg_shape_str(v->shape, sv, sizeof sv));
    if (q->shape.d[3] > DG_ATTENTION_MAX_HEAD)
        return dg__graph_fail(g, DG_ERR_SHAPE, "attention: head size %lld of q %s is more than %d",
                              (long long)q->shape.d[3], sq, DG_ATTENTION_MAX_HEAD);
    if (q->shape.d[2] > INT32_MAX)
        return dg__graph_fail(g, DG_ERR_SHAPE, "attention: sequence length of q %s beyond int32", sq);
    if (!isfinite(scale) || scale == 0.0f)
        return dg__graph_fail(g, DG_ERR_INVALID, "attention: scale %g must be finite and non-zero", (double)scale);
    dg_node *o = dg__node_new(g, DG_OP_ATTENTION, q->shape, 3, in);
    if (!o) return NULL;
    o->dtype = q->dtype;
    dg__attr_attention_set(o, (dg_attr_attention){scale, causal});
    return dg__side_new(g, o, DG_SHAPE(q->shape.d[0], q->shape.d[1], q->shape.d[2]), "lse") ? o : NULL;
}
