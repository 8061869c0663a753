/* onnx_fold.c: the operators that act on constants while the graph is
 * built, never in it: Constant, and the Shape -> Gather -> Unsqueeze ->
 * Concat (-> Cast) chains PyTorch's exporter emits to compute a Reshape's
 * target from a tensor's shape. Shapes are known at build time, so these
 * fold to int64 constants. */
#include <string.h>

#include "../graph_internal.h"
#include "onnx_internal.h"

#define FAIL(...) (dg__onnx_fail(c, __VA_ARGS__), false)

bool dg__onnx_constant(ox_ctx *c, ox_value *o) {
    const Onnx__AttributeProto *a = c->node->n_attribute == 1 ? c->node->attribute[0] : NULL;
    if (!a) return FAIL("needs exactly one of value, value_float(s), value_int(s)");
    const char *n = a->name;
    if (!strcmp(n, "value")) {
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR || !a->t) return FAIL("'value' must be a tensor");
        ox_tensor t;
        if (dg__onnx_tensor(a->t, "its value", &t) != DG_OK) return FAIL("%s", dg_last_error());
        if (t.dtype == OX_OTHER) return FAIL("a %s value (float32 or int64)", dg__onnx_dtype_name(t.onnx_dtype));
        ox_tensor *k = dg__onnx_new_const(c, t.dtype, t.ndim, t.dims);
        if (k) memcpy(t.dtype == OX_F32 ? (void *)k->f : (void *)k->i, t.dtype == OX_F32 ? (void *)t.f : (void *)t.i,
                      (size_t)t.numel * (t.dtype == OX_F32 ? sizeof(float) : sizeof(int64_t)));
        dg__onnx_tensor_clear(&t);
        return (o->k = k) != NULL;
    }
    bool f = !strcmp(n, "value_float") || !strcmp(n, "value_floats"), list = n[strlen(n) - 1] == 's';
    Onnx__AttributeProto__AttributeType want =
        f ? (list ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
          : (list ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a->type != want) return FAIL("attribute '%s' has the wrong type", n);
    int64_t len = list ? (int64_t)(f ? a->n_floats : a->n_ints) : 1;
    ox_tensor *k = dg__onnx_new_const(c, f ? OX_F32 : OX_I64, list ? 1 : 0, &len);
    if (!k) return false;
    for (int64_t i = 0; i < len; i++) {
        if (f) k->f[i] = list ? a->floats[i] : a->f;
        else k->i[i] = list ? a->ints[i] : a->i;
    }
    return (o->k = k) != NULL;
}

/* the shape of a node or a constant, [start, end) of its axes */
bool dg__onnx_shape(ox_ctx *c, ox_value *o) {
    ox_value *v = dg__onnx_in_value(c, 0);
    if (!v) return false;
    int64_t dims[OX_MAX_RANK];
    int r = v->node ? v->node->shape.ndim : v->k->ndim;
    for (int d = 0; d < r; d++) dims[d] = v->node ? v->node->shape.d[d] : v->k->dims[d];
    bool ok = true;
    int64_t start = dg__onnx_attr_int(c, "start", 0, &ok), end = dg__onnx_attr_int(c, "end", r, &ok);
    if (!ok) return false;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    ox_tensor *k = dg__onnx_new_const(c, OX_I64, 1, &n);
    if (k) memcpy(k->i, dims + start, (size_t)n * sizeof *dims);
    return (o->k = k) != NULL;
}

/* Gather of constant data by constant indices along one axis */
bool dg__onnx_gather(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t axis = dg__onnx_attr_int(c, "axis", 0, &ok);
    const ox_tensor *d = ok ? dg__onnx_in_const(c, 0) : NULL, *ix = d ? dg__onnx_in_const(c, 1) : NULL;
    if (!ix) return false;
    if (d->dtype == OX_OTHER || ix->dtype != OX_I64) return FAIL("data float32 or int64, indices int64");
    if (d->ndim < 1) return FAIL("data of 0 axes");
    if (axis < 0) axis += d->ndim;
    if (axis < 0 || axis >= d->ndim) return FAIL("axis out of range (rank %d)", d->ndim);
    if (d->ndim - 1 + ix->ndim > OX_MAX_RANK) return FAIL("more than %d axes", OX_MAX_RANK);
    int64_t dims[OX_MAX_RANK], outer = 1, inner = 1, n = d->dims[axis];
    int r = 0;
    for (int a = 0; a < axis; a++) dims[r++] = d->dims[a];
    for (int a = 0; a < ix->ndim; a++) dims[r++] = ix->dims[a];
    for (int a = (int)axis + 1; a < d->ndim; a++) dims[r++] = d->dims[a];
    /* the result's size is bounded first: the axes around `axis` of an
     * empty table may multiply past int64 */
    ox_tensor *k = dg__onnx_new_const(c, d->dtype, r, dims);
    if (!k) return false;
    if (!k->numel) return (o->k = k) != NULL;
    for (int a = 0; a < axis; a++) outer *= d->dims[a];
    for (int a = (int)axis + 1; a < d->ndim; a++) inner *= d->dims[a];
    for (int64_t a = 0, at = 0; a < outer; a++)
        for (int64_t j = 0; j < ix->numel; j++) {
            int64_t s = ix->i[j] < 0 ? ix->i[j] + n : ix->i[j];
            if (s < 0 || s >= n) return FAIL("index %lld out of range (%lld)", (long long)ix->i[j], (long long)n);
            for (int64_t e = 0; e < inner; e++, at++) {
                int64_t from = (a * n + s) * inner + e;
                if (d->dtype == OX_F32) k->f[at] = d->f[from];
                else k->i[at] = d->i[from];
            }
        }
    return (o->k = k) != NULL;
}

/* Concat of 1-D constants (shape vectors) */
bool dg__onnx_concat(ox_ctx *c, ox_value *o) {
    int64_t n = 0;
    ox_dtype t = OX_I64;
    int count = (int)c->node->n_input;
    for (int i = 0; i < count; i++) {
        const ox_tensor *k = dg__onnx_in_const(c, i);
        if (!k) return false;
        if (k->ndim != 1 || k->dtype == OX_OTHER || (i && k->dtype != t))
            return FAIL("only 1-D constants of one dtype are concatenated (input %d)", i);
        t = k->dtype;
        n += k->numel;
    }
    ox_tensor *out = dg__onnx_new_const(c, t, 1, &n);
    if (!out) return false;
    for (int i = 0, at = 0; i < count; i++) {
        const ox_tensor *k = dg__onnx_in_const(c, i);
        size_t es = t == OX_F32 ? sizeof(float) : sizeof(int64_t);
        memcpy(t == OX_F32 ? (void *)(out->f + at) : (void *)(out->i + at), t == OX_F32 ? (void *)k->f : (void *)k->i,
               (size_t)k->numel * es);
        at += (int)k->numel;
    }
    return (o->k = out) != NULL;
}

/* Cast of a constant between float32 and int64 */
bool dg__onnx_cast(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t to = dg__onnx_attr_int(c, "to", 0, &ok);
    const ox_tensor *k = ok ? dg__onnx_in_const(c, 0) : NULL;
    if (!k) return false;
    if (k->dtype == OX_OTHER || (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64))
        return FAIL("casts between float32 and int64 only (to %s)", dg__onnx_dtype_name((int)to));
    ox_dtype t = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? OX_F32 : OX_I64;
    ox_tensor *out = dg__onnx_new_const(c, t, k->ndim, k->dims);
    if (!out) return false;
    for (int64_t i = 0; i < k->numel; i++) {
        double v = k->dtype == OX_F32 ? k->f[i] : (double)k->i[i];
        if (t == OX_F32) out->f[i] = (float)v;
        else if (!(v > -9.2e18 && v < 9.2e18)) return FAIL("value %g does not fit int64", v);
        else out->i[i] = (int64_t)v;
    }
    return (o->k = out) != NULL;
}

/* Slice of a 1-D constant (a shape vector): starts, ends, axes (0 only)
 * and steps as constant int64 inputs, clamped as ONNX says */
bool dg__onnx_slice(ox_ctx *c, ox_value *o) {
    const ox_tensor *d = dg__onnx_in_const(c, 0), *k[4] = {NULL, NULL, NULL, NULL};
    if (!d) return false;
    for (int i = 1; i < 5; i++)
        if (dg__onnx_has_in(c, i)) {
            if (!(k[i - 1] = dg__onnx_in_const(c, i))) return false;
            if (k[i - 1]->dtype != OX_I64 || k[i - 1]->numel != 1)
                return FAIL("input %d must be one int64 value (a 1-D slice)", i);
        }
    if (d->ndim != 1 || d->dtype == OX_OTHER) return FAIL("only 1-D float32 or int64 constants are sliced");
    if (!k[0] || !k[1]) return FAIL("needs starts and ends");
    if (k[2] && k[2]->i[0] != 0 && k[2]->i[0] != -1) return FAIL("axes must be 0");
    int64_t n = d->numel, step = k[3] ? k[3]->i[0] : 1, st = k[0]->i[0], en = k[1]->i[0];
    if (step == 0) return FAIL("step 0");
    if (st < 0) st += n;
    if (en < 0) en += n;
    /* clamp: [0, n] going forward, [-1, n-1] going backward */
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    st = st < lo ? lo : st > hi ? hi : st;
    en = en < lo ? lo : en > hi ? hi : en;
    /* the count of st, st + step, ... before en: 1 + (distance - 1) / |step|
     * (no st - en + |step| sum, which overflows for |step| near 2^63) */
    int64_t dist = step > 0 ? en - st : st - en;
    uint64_t mag = step > 0 ? (uint64_t)step : -(uint64_t)step;
    int64_t len = dist > 0 ? 1 + (int64_t)((uint64_t)(dist - 1) / mag) : 0;
    ox_tensor *out = dg__onnx_new_const(c, d->dtype, 1, &len);
    if (!out) return false;
    for (int64_t i = 0; i < len; i++) {
        if (d->dtype == OX_F32) out->f[i] = d->f[st + i * step];
        else out->i[i] = d->i[st + i * step];
    }
    return (o->k = out) != NULL;
}
