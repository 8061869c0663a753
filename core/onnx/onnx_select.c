/* onnx_select.c: Concat, Split and Gather on computed tensors. duograd has
 * no slice or concatenation op; each of these moves whole entries along
 * one axis, which is a product with a 0/1 matrix M [n_in, n_out] (entry
 * src of the axis to entry dst): the axis is permuted last, multiplied by
 * M and permuted back. Every output entry is one input entry times 1 plus
 * zeros, so the values are exact (but for a TF32 plan, which rounds every
 * product's operands, and an inf or NaN, which 0 * spreads along its row);
 * the cost is n_in * n_out multiply-adds per row, small for the channel
 * and feature axes models split and concatenate. The gradient is the
 * product's. Gather of int ids into a float table is dg_embedding. */
#include <string.h>

#include "../graph_internal.h"
#include "onnx_internal.h"

#define IN(i) dg__onnx_in_node(c, i)
#define FAIL(...) (dg__onnx_fail(c, __VA_ARGS__), false)

/* x with its axis `axis` replaced by n_out entries: entry dst[j] is x's
 * entry src[j] (j < n), the others zero. */
static dg_node *along(ox_ctx *c, dg_node *x, int axis, int64_t n_out, const int64_t *src, const int64_t *dst,
                      int64_t n) {
    int r = x->shape.ndim;
    int64_t n_in = x->shape.d[axis];
    int64_t dims[2] = {n_in, n_out};
    ox_tensor *m = dg__onnx_new_const(c, OX_F32, 2, dims);
    if (!m) return NULL;
    for (int64_t j = 0; j < n; j++) m->f[src[j] * n_out + dst[j]] = 1.0f;
    dg_node *mk = dg__onnx_const_leaf(c, m);
    if (!mk) return NULL;
    /* the axis last, the others flattened into rows: [rows, n_in] x M */
    int to_last[DG_MAX_DIMS], back[DG_MAX_DIMS];
    for (int d = 0, k = 0; d < r; d++)
        if (d != axis) to_last[k++] = d;
    to_last[r - 1] = axis;
    for (int d = 0; d < r; d++) back[to_last[d]] = d;
    dg_node *xp = axis == r - 1 ? x : dg_permute(c->g, x, to_last);
    if (!xp) return NULL;
    dg_shape s = xp->shape;
    dg_node *y = dg_matmul(c->g, dg_reshape(c->g, xp, DG_SHAPE(dg_node_numel(xp) / n_in, n_in)), mk, false, false);
    s.d[r - 1] = n_out;
    y = dg_reshape(c->g, y, s);
    return axis == r - 1 ? y : dg_permute(c->g, y, back);
}

static bool axis_of(ox_ctx *c, int64_t axis, int r, int *out) {
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return dg__onnx_fail(c, "axis out of range (rank %d)", r);
    *out = (int)axis;
    return true;
}

/* Concat: all constants fold (shape vectors); otherwise each part placed
 * at its offset of the axis and the placements summed */
bool dg__onnx_concat_nodes(ox_ctx *c, ox_value *o) {
    int count = (int)c->node->n_input;
    bool computed = false;
    for (int i = 0; i < count; i++) {
        ox_value *v = dg__onnx_in_value(c, i);
        if (!v) return false;
        computed |= v->node != NULL;
    }
    if (!computed) return dg__onnx_concat(c, o);
    bool ok = true;
    int64_t a = dg__onnx_attr_int(c, "axis", 0, &ok);
    dg_node *x0 = ok ? IN(0) : NULL;
    int axis = 0;
    if (!x0 || !axis_of(c, a, x0->shape.ndim, &axis)) return false;
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
        dg_node *x = IN(i);
        if (!x) return false;
        bool fits = x->shape.ndim == x0->shape.ndim;
        for (int d = 0; fits && d < x->shape.ndim; d++) fits = d == axis || x->shape.d[d] == x0->shape.d[d];
        if (!fits) return FAIL("input %d's shape differs from input 0's off axis %d", i, axis);
        total += x->shape.d[axis];
    }
    dg_node *y = NULL;
    for (int i = 0, off = 0; i < count; i++) {
        dg_node *x = IN(i);
        int64_t n = x->shape.d[axis];
        int64_t src[OX_MAX_FOLD_AXIS], dst[OX_MAX_FOLD_AXIS];
        if (n > OX_MAX_FOLD_AXIS) return FAIL("input %d has %lld entries on the axis (at most %d)", i, (long long)n,
                                              OX_MAX_FOLD_AXIS);
        for (int64_t j = 0; j < n; j++) src[j] = j, dst[j] = off + j;
        dg_node *p = along(c, x, axis, total, src, dst, n);
        y = y ? dg_add(c->g, y, p) : p;
        off += (int)n;
    }
    return (o->node = y) != NULL;
}

/* Split into the node's outputs: sizes from input 1 (opset 13), the
 * 'split' attribute (before), or equal parts */
bool dg__onnx_split(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t a = dg__onnx_attr_int(c, "axis", 0, &ok);
    dg_node *x = ok ? IN(0) : NULL;
    int axis = 0, n_out = (int)c->node->n_output;
    if (!x || !axis_of(c, a, x->shape.ndim, &axis)) return false;
    int64_t sizes[OX_MAX_OUTPUTS], n = x->shape.d[axis];
    int given = dg__onnx_attr_ints(c, "split", sizes, OX_MAX_OUTPUTS);
    int64_t parts = dg__onnx_attr_int(c, "num_outputs", n_out, &ok);
    if (given == -2 || !ok) return false;
    if (parts != n_out) return FAIL("num_outputs %lld for %d outputs", (long long)parts, n_out);
    if (dg__onnx_has_in(c, 1)) {
        const ox_tensor *k = dg__onnx_in_const(c, 1);
        if (!k) return false;
        if (k->dtype != OX_I64 || k->numel > OX_MAX_OUTPUTS) return FAIL("split must be up to %d int64 values",
                                                                         OX_MAX_OUTPUTS);
        given = (int)k->numel;
        memcpy(sizes, k->i, (size_t)given * sizeof *sizes);
    }
    if (given < 0) {
        if (n % n_out) return FAIL("%lld entries do not split into %d equal parts", (long long)n, n_out);
        for (int k = 0; k < n_out; k++) sizes[k] = n / n_out;
        given = n_out;
    }
    /* each size bounded by the axis first: a sum of unchecked sizes can
     * wrap around int64 to the axis' length */
    int64_t sum = 0;
    for (int k = 0; k < given && sum <= n; k++) sum += sizes[k] > 0 && sizes[k] <= n ? sizes[k] : n + 1;
    if (given != n_out || sum != n)
        return FAIL("split sizes must be %d positive values summing to the axis' %lld", n_out, (long long)n);
    if (n > OX_MAX_FOLD_AXIS) return FAIL("%lld entries on the axis (at most %d)", (long long)n, OX_MAX_FOLD_AXIS);
    int64_t src[OX_MAX_FOLD_AXIS], dst[OX_MAX_FOLD_AXIS];
    for (int k = 0, off = 0; k < n_out; k++) {
        for (int64_t j = 0; j < sizes[k]; j++) src[j] = off + j, dst[j] = j;
        if (!(o[k].node = along(c, x, axis, sizes[k], src, dst, sizes[k]))) return false;
        off += (int)sizes[k];
    }
    return true;
}

/* Gather: constants fold; int ids into a float table (an embedding, on
 * axis 0) are dg_embedding; constant indices into a computed tensor pick
 * entries of its axis */
bool dg__onnx_gather_nodes(ox_ctx *c, ox_value *o) {
    ox_value *d = dg__onnx_in_value(c, 0), *ix = d ? dg__onnx_in_value(c, 1) : NULL;
    if (!ix) return false;
    if (!d->node && !ix->node) return dg__onnx_gather(c, o);
    bool ok = true;
    int64_t a = dg__onnx_attr_int(c, "axis", 0, &ok);
    dg_node *x = ok ? IN(0) : NULL;
    int axis = 0;
    if (!x || !axis_of(c, a, x->shape.ndim, &axis)) return false;
    int r = x->shape.ndim;
    if (ix->node) { /* ids computed or fed: the rows of a table */
        dg_node *ids = ix->node;
        if (axis != 0) return FAIL("int ids index axis 0 only (an embedding), not axis %d", axis);
        if (ids->dtype != DG_I32) return FAIL("the indices are not int ids");
        if (ids->shape.ndim + r - 1 > DG_MAX_DIMS) return FAIL("more than %d axes", DG_MAX_DIMS);
        int64_t rest = 1;
        for (int k = 1; k < r; k++) rest *= x->shape.d[k];
        dg_node *table = r == 2 ? x : dg_reshape(c->g, x, DG_SHAPE(x->shape.d[0], rest));
        dg_node *e = dg_embedding(c->g, table, ids);
        if (!e || r == 2) return (o->node = e) != NULL;
        dg_shape s = {.ndim = ids->shape.ndim + r - 1};
        for (int k = 0; k < ids->shape.ndim; k++) s.d[k] = ids->shape.d[k];
        for (int k = 1; k < r; k++) s.d[ids->shape.ndim + k - 1] = x->shape.d[k];
        return (o->node = dg_reshape(c->g, e, s)) != NULL;
    }
    const ox_tensor *k = ix->k;
    int64_t n = x->shape.d[axis];
    if (k->dtype != OX_I64) return FAIL("indices must be int64");
    if (k->numel > OX_MAX_FOLD_AXIS || k->numel < 1)
        return FAIL("%lld indices (1 to %d)", (long long)k->numel, OX_MAX_FOLD_AXIS);
    if (r - 1 + k->ndim > DG_MAX_DIMS) return FAIL("more than %d axes", DG_MAX_DIMS);
    int64_t src[OX_MAX_FOLD_AXIS], dst[OX_MAX_FOLD_AXIS];
    for (int64_t j = 0; j < k->numel; j++) {
        src[j] = k->i[j] < 0 ? k->i[j] + n : k->i[j];
        dst[j] = j;
        if (src[j] < 0 || src[j] >= n) return FAIL("index %lld out of range (%lld)", (long long)k->i[j], (long long)n);
    }
    dg_node *y = along(c, x, axis, k->numel, src, dst, k->numel);
    if (!y) return false;
    /* the axis becomes the indices' axes (none for a scalar index) */
    dg_shape s = {.ndim = r - 1 + k->ndim};
    if (s.ndim == 0) s = (dg_shape){.ndim = 1, .d = {1}};
    else {
        int at = 0;
        for (int q = 0; q < axis; q++) s.d[at++] = x->shape.d[q];
        for (int q = 0; q < k->ndim; q++) s.d[at++] = k->dims[q];
        for (int q = axis + 1; q < r; q++) s.d[at++] = x->shape.d[q];
    }
    return (o->node = dg_reshape(c->g, y, s)) != NULL;
}
