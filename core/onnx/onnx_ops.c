/* onnx_ops.c: each supported ONNX operator as duograd builders, and the
 * operator table (onnx_internal.h). Shapes follow the ONNX operator
 * specification; where duograd lacks a case (asymmetric padding,
 * ceil_mode) the node is refused by name. */
#include <string.h>

#include "../graph_internal.h"
#include "onnx_internal.h"

#define IN(i) dg__onnx_in_node(c, i)
#define FAIL(...) (dg__onnx_fail(c, __VA_ARGS__), false)

static bool unary(ox_ctx *c, ox_value *out, dg_node *(*f)(dg_graph *, dg_node *)) {
    return (out->node = f(c->g, IN(0))) != NULL;
}
static bool binary(ox_ctx *c, ox_value *out, dg_node *(*f)(dg_graph *, dg_node *, dg_node *)) {
    dg_node *a = IN(0);
    return a && (out->node = f(c->g, a, IN(1))) != NULL;
}

static bool op_add(ox_ctx *c, ox_value *o) { return binary(c, o, dg_add); }
static bool op_sub(ox_ctx *c, ox_value *o) { return binary(c, o, dg_sub); }
static bool op_mul(ox_ctx *c, ox_value *o) { return binary(c, o, dg_mul); }
static bool op_div(ox_ctx *c, ox_value *o) { return binary(c, o, dg_div); }
static bool op_relu(ox_ctx *c, ox_value *o) { return unary(c, o, dg_relu); }
static bool op_sigmoid(ox_ctx *c, ox_value *o) { return unary(c, o, dg_sigmoid); }
static bool op_tanh(ox_ctx *c, ox_value *o) { return unary(c, o, dg_tanh); }
static bool op_exp(ox_ctx *c, ox_value *o) { return unary(c, o, dg_exp); }
static bool op_log(ox_ctx *c, ox_value *o) { return unary(c, o, dg_log); }
static bool op_sqrt(ox_ctx *c, ox_value *o) { return unary(c, o, dg_sqrt); }
static bool op_erf(ox_ctx *c, ox_value *o) { return unary(c, o, dg_erf); }

/* Gelu (opset 20): approximate "tanh" is duograd's gelu; "none" (the
 * default) the exact x/2 (1 + erf(x / sqrt 2)), as PyTorch's exports
 * spell out with Erf */
static bool op_gelu(ox_ctx *c, ox_value *o) {
    bool ok = true;
    const char *ap = dg__onnx_attr_string(c, "approximate", "none", &ok);
    dg_node *x = ok ? IN(0) : NULL;
    if (!x) return false;
    if (!strcmp(ap, "tanh")) return (o->node = dg_gelu(c->g, x)) != NULL;
    if (strcmp(ap, "none")) return FAIL("approximate must be 'none' or 'tanh'");
    dg_node *e = dg_erf(c->g, dg_mul_scalar(c->g, x, 0.70710678f));
    return (o->node = dg_mul(c->g, x, dg_mul_scalar(c->g, dg_add_scalar(c->g, e, 1.0f), 0.5f))) != NULL;
}

/* Identity, and Dropout at inference (its ratio is never applied: the
 * imported graph is a model's forward, as the built-in ones have none) */
static bool op_identity(ox_ctx *c, ox_value *o) {
    const ox_tensor *own = dg__onnx_init(c->o, o->name); /* load's copy of an initializer (onnx_load.c) */
    if (own && own->identity_copy) {
        o->k = own;
        return true;
    }
    ox_value *v = dg__onnx_in_value(c, 0);
    if (!v) return false;
    o->node = v->node;
    o->k = v->node ? NULL : v->k; /* a constant stays one: Identity sits in shape chains */
    return true;
}

static bool op_leaky_relu(ox_ctx *c, ox_value *o) {
    bool ok = true;
    float alpha = dg__onnx_attr_float(c, "alpha", 0.01f, &ok);
    return ok && (o->node = dg_leaky_relu(c->g, IN(0), alpha)) != NULL;
}

static bool op_pow(ox_ctx *c, ox_value *o) {
    const ox_tensor *e = dg__onnx_in_const(c, 1);
    if (!e) return false;
    if (e->numel != 1 || e->dtype == OX_OTHER)
        return FAIL("the exponent must be one float32 or int64 constant (%lld elements)", (long long)e->numel);
    float p = e->dtype == OX_F32 ? e->f[0] : (float)e->i[0];
    return (o->node = dg_pow_scalar(c->g, IN(0), p)) != NULL;
}

/* MatMul and Gemm's product: the model's matmul (its precision policy) */
static bool op_matmul(ox_ctx *c, ox_value *o) {
    dg_node *a = IN(0), *b = a ? IN(1) : NULL;
    return b && (o->node = dg_model_matmul(c->g, c->mode, a, b, false, false)) != NULL;
}

/* Y = alpha op(A) op(B) + beta C, A and B 2-D, C broadcast to [M, N]
 * (opset 6's broadcast 0 asks C to be [M, N], which broadcasts alike) */
static bool op_gemm(ox_ctx *c, ox_value *o) {
    bool ok = true;
    float alpha = dg__onnx_attr_float(c, "alpha", 1.0f, &ok), beta = dg__onnx_attr_float(c, "beta", 1.0f, &ok);
    int64_t ta = dg__onnx_attr_int(c, "transA", 0, &ok), tb = dg__onnx_attr_int(c, "transB", 0, &ok);
    dg_node *a = ok ? IN(0) : NULL, *b = a ? IN(1) : NULL;
    if (!b) return false;
    if (a->shape.ndim != 2 || b->shape.ndim != 2) return FAIL("A and B must be 2-D (got %d and %d axes)", a->shape.ndim, b->shape.ndim);
    dg_node *y = dg_model_matmul(c->g, c->mode, a, b, ta != 0, tb != 0);
    if (alpha != 1.0f) y = dg_mul_scalar(c->g, y, alpha);
    if (dg__onnx_has_in(c, 2) && beta != 0.0f) {
        dg_node *bias = IN(2);
        if (beta != 1.0f) bias = dg_mul_scalar(c->g, bias, beta);
        y = dg_add(c->g, y, bias);
    }
    return (o->node = y) != NULL;
}

/* ONNX pads are [begin..., end...]; duograd pads both sides alike. auto_pad
 * SAME_* pads so that out = ceil(in / stride); VALID: none. */
static bool window(ox_ctx *c, const dg_node *x, const int64_t *kernel, int64_t *stride, int64_t *pad,
                   int64_t *dil) {
    bool ok = true;
    const char *ap = dg__onnx_attr_string(c, "auto_pad", "NOTSET", &ok);
    int64_t pads[4] = {0, 0, 0, 0};
    int n_st = dg__onnx_attr_ints(c, "strides", stride, 2), n_pd = dg__onnx_attr_ints(c, "pads", pads, 4),
        n_dl = dg__onnx_attr_ints(c, "dilations", dil, 2);
    if (!ok || n_st == -2 || n_pd == -2 || n_dl == -2) return false;
    if ((n_st >= 0 && n_st != 2) || (n_pd >= 0 && n_pd != 4) || (n_dl >= 0 && n_dl != 2))
        return FAIL("strides, pads and dilations must have 2, 4 and 2 values (2-D windows only)");
    if (n_st < 0) stride[0] = stride[1] = 1;
    if (n_dl < 0) dil[0] = dil[1] = 1;
    if (!strcmp(ap, "?")) return FAIL("attribute 'auto_pad' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    /* before opset 11, SAME_* padded so that out = in (Conv-1, the pools'
     * 1 to 10), from 11 on so that out = ceil(in / stride) */
    if (c->o->opset < 11 && !strncmp(ap, "SAME", 4))
        return FAIL("auto_pad %s before opset 11 (the file's %lld) is not supported", ap, (long long)c->o->opset);
    if (strcmp(ap, "NOTSET") && n_pd >= 0) return FAIL("auto_pad %s with explicit pads", ap);
    for (int d = 0; d < 2; d++) {
        if (stride[d] < 1 || dil[d] < 1 || stride[d] > 1 << 20 || dil[d] > 1 << 20)
            return FAIL("stride %lld and dilation %lld must be 1 to 2^20", (long long)stride[d], (long long)dil[d]);
        if (!strncmp(ap, "SAME", 4)) {
            int64_t in = x->shape.d[2 + d], out = (in + stride[d] - 1) / stride[d];
            int64_t total = (out - 1) * stride[d] + dil[d] * (kernel[d] - 1) + 1 - in;
            pads[d] = pads[d + 2] = total > 0 ? total / 2 : 0;
            if (total > 0 && total % 2) pads[ap[5] == 'U' ? d + 2 : d]++;
        }
        if (pads[d] != pads[d + 2] || pads[d] < 0 || pads[d] > 1 << 20)
            return FAIL("pads %lld (begin) and %lld (end) on axis %d: only equal padding on both sides is supported",
                        (long long)pads[d], (long long)pads[d + 2], d + 2);
        pad[d] = pads[d];
    }
    return true;
}

static bool op_conv(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t group = dg__onnx_attr_int(c, "group", 1, &ok), ks[2], st[2], pd[2], dl[2];
    dg_node *x = ok ? IN(0) : NULL, *w = x ? IN(1) : NULL, *b = w && dg__onnx_has_in(c, 2) ? IN(2) : NULL;
    if (!w || (dg__onnx_has_in(c, 2) && !b)) return false;
    if (x->shape.ndim != 4 || w->shape.ndim != 4) return FAIL("2-D convolutions only (input and weight of 4 axes)");
    int nk = dg__onnx_attr_ints(c, "kernel_shape", ks, 2);
    if (nk == -2) return false;
    if (nk >= 0 && (nk != 2 || ks[0] != w->shape.d[2] || ks[1] != w->shape.d[3]))
        return FAIL("kernel_shape does not match the weight's");
    ks[0] = w->shape.d[2];
    ks[1] = w->shape.d[3];
    if (group < 1 || group > 1 << 20) return FAIL("group %lld (1 to 2^20)", (long long)group);
    if (!window(c, x, ks, st, pd, dl)) return false;
    dg_conv2d_opts co = {{(int)st[0], (int)st[1]}, {(int)pd[0], (int)pd[1]}, {(int)dl[0], (int)dl[1]}, (int)group};
    if (b && (b->shape.ndim != 1 || b->shape.d[0] != w->shape.d[0]))
        return FAIL("bias of %d axes and %lld values: one per output channel (%lld)", b->shape.ndim,
                    (long long)dg_shape_numel(b->shape), (long long)w->shape.d[0]);
    /* the model's convolution (its precision policy: operands cast to the
     * compute dtype, the result back to float32), the bias added in float32
     * as dg_conv2d adds it */
    dg_node *y = dg_model_conv(c->g, c->mode, x, w, co);
    if (y && b) y = dg_add(c->g, y, dg_reshape(c->g, b, DG_SHAPE(w->shape.d[0], 1, 1)));
    return (o->node = y) != NULL;
}

static bool pool(ox_ctx *c, ox_value *o, bool max) {
    bool ok = true;
    int64_t ks[2], st[2], pd[2], dl[2] = {1, 1};
    int64_t ceil_mode = dg__onnx_attr_int(c, "ceil_mode", 0, &ok);
    int64_t incl = max ? 1 : dg__onnx_attr_int(c, "count_include_pad", 0, &ok);
    int64_t order = max ? dg__onnx_attr_int(c, "storage_order", 0, &ok) : 0;
    dg_node *x = ok ? IN(0) : NULL;
    if (!x) return false;
    if (x->shape.ndim != 4) return FAIL("2-D pooling only (an input of 4 axes)");
    if (dg__onnx_attr_ints(c, "kernel_shape", ks, 2) != 2) return FAIL("kernel_shape must have 2 values");
    /* int64 in the file, int in duograd's pool options and window()'s
     * padding arithmetic: bounded like strides and pads */
    for (int d = 0; d < 2; d++)
        if (ks[d] < 1 || ks[d] > 1 << 20) return FAIL("kernel_shape %lld must be 1 to 2^20", (long long)ks[d]);
    if (!window(c, x, ks, st, pd, dl)) return false;
    if (ceil_mode) return FAIL("ceil_mode 1 is not supported");
    if (order) return FAIL("storage_order 1 is not supported");
    if (dl[0] != 1 || dl[1] != 1) return FAIL("dilated pooling is not supported");
    /* duograd's average divides by the whole window, padding included */
    if (!incl && (pd[0] || pd[1])) return FAIL("count_include_pad 0 with padding is not supported");
    dg_pool2d_opts po = {{(int)ks[0], (int)ks[1]}, {(int)st[0], (int)st[1]}, {(int)pd[0], (int)pd[1]}};
    return (o->node = max ? dg_max_pool2d(c->g, x, po) : dg_avg_pool2d(c->g, x, po)) != NULL;
}
static bool op_maxpool(ox_ctx *c, ox_value *o) { return pool(c, o, true); }
static bool op_avgpool(ox_ctx *c, ox_value *o) { return pool(c, o, false); }

static bool op_gap(ox_ctx *c, ox_value *o) {
    dg_node *y = dg_global_avg_pool2d(c->g, IN(0));
    return y && (o->node = dg_reshape(c->g, y, DG_SHAPE(y->shape.d[0], y->shape.d[1], 1, 1))) != NULL;
}

/* inference: the running statistics; a training forward: the batch's, and
 * the running update (ONNX's momentum weighs the old value: duograd's the
 * new batch). Opset 6's is_test (default 0: the training form, five
 * outputs) and spatial (per-channel statistics) are 9's inference where
 * is_test is 1 and spatial 1. */
static bool op_batchnorm(ox_ctx *c, ox_value *o) {
    bool ok = true;
    float eps = dg__onnx_attr_float(c, "epsilon", 1e-5f, &ok), mom = dg__onnx_attr_float(c, "momentum", 0.9f, &ok);
    if (dg__onnx_attr_int(c, "is_test", c->o->opset < 7 ? 0 : 1, &ok) != 1)
        return FAIL("is_test 0 (opset %lld's training form) is not supported", (long long)c->o->opset);
    if (dg__onnx_attr_int(c, "spatial", 1, &ok) != 1)
        return FAIL("spatial 0 (statistics per activation) is not supported");
    if (dg__onnx_attr_int(c, "training_mode", 0, &ok) != 0) return FAIL("training_mode 1 is not supported (export in "
                                                                         "evaluation mode: duograd trains it itself)");
    dg_node *in[5];
    for (int i = 0; i < 5; i++)
        if (!ok || !(in[i] = IN(i))) return false;
    if (!(eps > 0) || !(mom >= 0 && mom < 1)) return FAIL("epsilon %g (> 0) or momentum %g ([0, 1))", (double)eps, (double)mom);
    if (!c->mode || !c->mode->training) return (o->node = dg_batch_norm_eval(c->g, in[0], in[1], in[2], in[3], in[4], eps)) != NULL;
    dg_node *y = dg_batch_norm(c->g, in[0], in[1], in[2], eps);
    if (!y) return false;
    if (c->mode->n_updates == DG_MODEL_MAX_UPDATES) return FAIL("more than %d running-statistics updates", DG_MODEL_MAX_UPDATES);
    dg_node *u = dg_batch_norm_running(c->g, y, in[3], in[4], 1.0f - mom);
    if (!u) return false;
    c->mode->updates[c->mode->n_updates++] = u;
    return (o->node = y) != NULL;
}

/* over the last axis only (duograd's layer norm); no bias: a zero shift.
 * The optional outputs Mean and InvStdDev (x's shape, the axis 1) are
 * composed where the node names them: mean(x), (var(x) + eps)^-1/2. */
static bool op_layer_norm(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t axis = dg__onnx_attr_int(c, "axis", -1, &ok), stash = dg__onnx_attr_int(c, "stash_type", 1, &ok);
    float eps = dg__onnx_attr_float(c, "epsilon", 1e-5f, &ok);
    dg_node *x = ok ? IN(0) : NULL, *scale = x ? IN(1) : NULL;
    if (!scale) return false;
    if (axis != -1 && axis != x->shape.ndim - 1) return FAIL("axis %lld: only the last axis is supported", (long long)axis);
    if (stash != 1) return FAIL("stash_type %lld: statistics in float32 (1) only", (long long)stash);
    if (!(eps > 0)) return FAIL("epsilon %g (> 0)", (double)eps);
    dg_node *shift = dg__onnx_has_in(c, 2)
                         ? IN(2)
                         : dg_const(c->g, "layer_norm.zero", DG_SHAPE(x->shape.d[x->shape.ndim - 1]), 0.0f);
    if (!shift || !(o[0].node = dg_layer_norm(c->g, x, scale, shift, eps))) return false;
    uint32_t last = 1u << (x->shape.ndim - 1);
    bool mean = o[1].name && *o[1].name, inv = o[2].name && *o[2].name;
    dg_node *mu = mean || inv ? dg_mean(c->g, x, last, true) : NULL;
    if (mean) o[1].node = mu;
    if (inv) {
        dg_node *d = dg_sub(c->g, x, mu);
        o[2].node = dg_pow_scalar(c->g, dg_add_scalar(c->g, dg_mean(c->g, dg_mul(c->g, d, d), last, true), eps), -0.5f);
    }
    return (!mean || o[1].node) && (!inv || o[2].node);
}

static bool op_flatten(ox_ctx *c, ox_value *o) {
    bool ok = true;
    int64_t given = dg__onnx_attr_int(c, "axis", 1, &ok);
    dg_node *x = ok ? IN(0) : NULL;
    if (!x) return false;
    int r = x->shape.ndim;
    int64_t axis = given < 0 ? given + r : given; /* the message says the file's value */
    if (axis < 0 || axis > r) return FAIL("axis %lld out of range (rank %d)", (long long)given, r);
    int64_t lead = 1, rest = 1;
    for (int d = 0; d < r; d++) *(d < axis ? &lead : &rest) *= x->shape.d[d];
    return (o->node = dg_reshape(c->g, x, DG_SHAPE(lead, rest))) != NULL;
}

static bool op_reshape(ox_ctx *c, ox_value *o) {
    bool ok = true;
    if (dg__onnx_attr_int(c, "allowzero", 0, &ok)) return FAIL("allowzero 1 is not supported");
    dg_node *x = ok ? IN(0) : NULL;
    const ox_tensor *k = x ? dg__onnx_in_const(c, 1) : NULL;
    if (!k) return false;
    if (k->dtype != OX_I64 || k->ndim != 1 || k->numel < 1 || k->numel > DG_MAX_DIMS)
        return FAIL("the shape must be 1 to %d int64 values", DG_MAX_DIMS);
    dg_shape s = {.ndim = (int)k->numel};
    int64_t known = 1, infer = -1, total = dg_node_numel(x);
    for (int d = 0; d < s.ndim; d++) {
        int64_t v = k->i[d];
        /* a file exported at a fixed batch names it here: the batch is free */
        if (d == 0 && c->o->file_batch > 0 && v == c->o->file_batch && x->shape.d[0] != v) v = x->shape.d[0];
        if (v == 0 && d < x->shape.ndim) v = x->shape.d[d];
        if (v == -1 && infer < 0) infer = d, v = 1;
        else if (v < 1 || v > DG_MAX_NUMEL / known) return FAIL("shape entry %d is %lld", d, (long long)k->i[d]);
        else known *= v;
        s.d[d] = v;
    }
    if (infer >= 0) s.d[infer] = known > 0 && total % known == 0 ? total / known : -1;
    return (o->node = dg_reshape(c->g, x, s)) != NULL;
}

static bool op_transpose(ox_ctx *c, ox_value *o) {
    dg_node *x = IN(0);
    if (!x) return false;
    int64_t p[DG_MAX_DIMS];
    int n = dg__onnx_attr_ints(c, "perm", p, DG_MAX_DIMS), r = x->shape.ndim;
    if (n == -2) return false;
    if (n >= 0 && n != r) return FAIL("perm has %d values for %d axes", n, r);
    int perm[DG_MAX_DIMS];
    for (int d = 0; d < r; d++) perm[d] = n < 0 ? r - 1 - d : (int)(p[d] >= 0 && p[d] < r ? p[d] : -1);
    return (o->node = dg_permute(c->g, x, perm)) != NULL;
}

/* over one axis (opset 13): duograd's softmax is over the last, so another
 * axis is swapped with it before and after */
/* Opset 13 on: the softmax along one axis. Before 13 (opsets 1 and 11):
 * the input flattened to 2-D at `axis` (default 1), [d0 .. d(axis-1)] by
 * [d(axis) ..], the softmax along the second, the result reshaped back:
 * built as that reshape around a last-axis softmax. */
static bool softmax(ox_ctx *c, ox_value *o, bool log) {
    bool ok = true, flat = c->o->opset < 13;
    int64_t given = dg__onnx_attr_int(c, "axis", flat ? 1 : -1, &ok);
    dg_node *x = ok ? IN(0) : NULL;
    if (!x) return false;
    int r = x->shape.ndim;
    int64_t axis = given < 0 ? given + r : given; /* the message says the file's value */
    if (axis < 0 || axis >= r) return FAIL("axis %lld out of range (rank %d)", (long long)given, r);
    if (flat && axis < r - 1) {
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < r; d++) *(d < axis ? &outer : &inner) *= x->shape.d[d];
        dg_node *x2 = dg_reshape(c->g, x, DG_SHAPE(outer, inner));
        dg_node *y2 = log ? dg_log_softmax(c->g, x2) : dg_softmax(c->g, x2);
        return (o->node = dg_reshape(c->g, y2, x->shape)) != NULL;
    }
    int swap[DG_MAX_DIMS];
    for (int d = 0; d < r; d++) swap[d] = d == axis ? r - 1 : d == r - 1 ? (int)axis : d;
    dg_node *xs = axis == r - 1 ? x : dg_permute(c->g, x, swap);
    dg_node *y = log ? dg_log_softmax(c->g, xs) : dg_softmax(c->g, xs);
    return (o->node = axis == r - 1 ? y : dg_permute(c->g, y, swap)) != NULL;
}
static bool op_softmax(ox_ctx *c, ox_value *o) { return softmax(c, o, false); }
static bool op_log_softmax(ox_ctx *c, ox_value *o) { return softmax(c, o, true); }

/* axes: the attribute (ReduceMean before opset 18) or input 1 */
static bool reduce(ox_ctx *c, ox_value *o, bool mean) {
    bool ok = true;
    int64_t keep = dg__onnx_attr_int(c, "keepdims", 1, &ok), noop = dg__onnx_attr_int(c, "noop_with_empty_axes", 0, &ok);
    dg_node *x = ok ? IN(0) : NULL;
    if (!x) return false;
    int64_t v[DG_MAX_DIMS];
    int n = dg__onnx_attr_ints(c, "axes", v, DG_MAX_DIMS);
    if (n == -2) return false;
    if (n < 0 && dg__onnx_has_in(c, 1)) {
        const ox_tensor *k = dg__onnx_in_const(c, 1);
        if (!k) return false;
        if (k->dtype != OX_I64 || k->numel > DG_MAX_DIMS) return FAIL("axes must be up to %d int64 values", DG_MAX_DIMS);
        n = (int)k->numel;
        memcpy(v, k->i, (size_t)n * sizeof *v);
    }
    uint32_t mask = DG_ALL_AXES;
    if (n > 0 && !dg__onnx_axes(c, v, n, x->shape.ndim, &mask)) return false;
    if (n <= 0 && noop) return (o->node = x) != NULL;
    if (n <= 0) mask = (1u << x->shape.ndim) - 1;
    return (o->node = mean ? dg_mean(c->g, x, mask, keep != 0) : dg_sum(c->g, x, mask, keep != 0)) != NULL;
}
static bool op_reduce_mean(ox_ctx *c, ox_value *o) { return reduce(c, o, true); }
static bool op_reduce_sum(ox_ctx *c, ox_value *o) { return reduce(c, o, false); }

/* Squeeze and Unsqueeze (axes: input 1 from opset 13): a reshape of a
 * node, or a constant with new dims (PyTorch's shape chains unsqueeze the
 * batch size before concatenating it) */
static bool squeeze(ox_ctx *c, ox_value *o, bool un) {
    ox_value *v = dg__onnx_in_value(c, 0);
    if (!v) return false;
    const ox_tensor *src = v->node ? NULL : v->k;
    int r = src ? src->ndim : v->node->shape.ndim;
    int64_t in[OX_MAX_RANK], ax[OX_MAX_RANK], dims[OX_MAX_RANK];
    for (int d = 0; d < r; d++) in[d] = src ? src->dims[d] : v->node->shape.d[d];
    int n = -1;
    if (dg__onnx_has_in(c, 1)) {
        const ox_tensor *k = dg__onnx_in_const(c, 1);
        if (!k) return false;
        if (k->dtype != OX_I64 || k->numel > OX_MAX_RANK) return FAIL("axes must be up to %d int64 values", OX_MAX_RANK);
        n = (int)k->numel;
        memcpy(ax, k->i, (size_t)n * sizeof *ax);
    }
    if (un && n < 1) return FAIL("Unsqueeze needs its axes");
    int out_r = un ? r + n : r, nd = 0;
    if (out_r > OX_MAX_RANK) return FAIL("more than %d axes", OX_MAX_RANK);
    uint32_t mask = 0;
    if (n >= 0 && !dg__onnx_axes(c, ax, n, out_r, &mask)) return false;
    for (int d = 0, from = 0; d < out_r; d++) {
        if (un) dims[nd++] = mask >> d & 1 ? 1 : in[from++];
        else if (n < 0 ? in[d] != 1 : !(mask >> d & 1)) dims[nd++] = in[d];
        else if (in[d] != 1) return FAIL("axis %d has size %lld, not 1", d, (long long)in[d]);
    }
    if (src) {
        ox_tensor *k = dg__onnx_new_const(c, src->dtype == OX_F32 ? OX_F32 : OX_I64, nd, dims);
        if (!k) return false;
        if (src->dtype == OX_OTHER) return FAIL("a %s constant", dg__onnx_dtype_name(src->onnx_dtype));
        memcpy(k->f ? (void *)k->f : (void *)k->i, src->f ? (void *)src->f : (void *)src->i,
               (size_t)src->numel * (src->f ? sizeof(float) : sizeof(int64_t)));
        return (o->k = k) != NULL;
    }
    if (nd > DG_MAX_DIMS) return FAIL("more than %d axes", DG_MAX_DIMS);
    dg_shape s = {.ndim = nd ? nd : 1, .d = {1}};
    for (int d = 0; d < nd; d++) s.d[d] = dims[d];
    return (o->node = dg_reshape(c->g, v->node, s)) != NULL;
}
static bool op_squeeze(ox_ctx *c, ox_value *o) { return squeeze(c, o, false); }
static bool op_unsqueeze(ox_ctx *c, ox_value *o) { return squeeze(c, o, true); }

/* the last field: the first opset whose definition of the operator the
 * builder follows (float32 alike: later versions added types, or inputs
 * and attributes the builder reads where present). Lowered after comparing
 * the definitions of python3-onnx 1.12's onnx.defs.get_schema (documents,
 * attributes, inputs, outputs, types): Gemm 7 dropped broadcast (C
 * broadcasts), BatchNormalization 7 and 9 dropped is_test and spatial
 * (op_batchnorm reads 6's where they are 9's); Add, Sub, Mul and Div 6 broadcast
 * only under their attribute broadcast (refused: not read), else took
 * equal shapes, as 7's numpy rule does; MatMul 1 and 9 differ in integer
 * types alone; Constant 9, 11 and 12 added types, sparse_value (refused:
 * not read) and the value_* forms to 1's value; Gather 11 added negative
 * indices (1 reads the others alike); Split 11 added a negative axis (2's
 * split attribute is 11's); Conv 11 and the pools' 11 changed auto_pad
 * SAME_* alone (refused before 11 in window()), MaxPool 8 and 10 added
 * storage_order, Indices, ceil_mode and dilations with defaults that are
 * 1's behaviour, AveragePool 7 count_include_pad whose default 0 is 1's.
 * Softmax and LogSoftmax 1 and 11 flatten the input to 2-D at the axis
 * (default 1), 13 takes one axis (default -1): softmax() builds either. */
static const ox_op ops[] = {
    {"Add", op_add, "", 0, 0, 1, 6},
    {"Sub", op_sub, "", 0, 0, 1, 6},
    {"Mul", op_mul, "", 0, 0, 1, 6},
    {"Div", op_div, "", 0, 0, 1, 6},
    {"Relu", op_relu, "", 0, 0, 1, 6},
    {"LeakyRelu", op_leaky_relu, "alpha", 0, 0, 1, 6},
    {"Sigmoid", op_sigmoid, "", 0, 0, 1, 6},
    {"Tanh", op_tanh, "", 0, 0, 1, 6},
    {"Exp", op_exp, "", 0, 0, 1, 6},
    {"Log", op_log, "", 0, 0, 1, 6},
    {"Sqrt", op_sqrt, "", 0, 0, 1, 6},
    {"Pow", op_pow, "", 2, 0, 1, 7},
    {"MatMul", op_matmul, "", 0, 0, 1, 1},
    {"Gemm", op_gemm, "alpha beta broadcast transA transB", 0, 0, 1, 6},
    {"Conv", op_conv, "auto_pad dilations group kernel_shape pads strides", 0, 0, 1, 1},
    {"MaxPool", op_maxpool, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides", 0, 0, 1, 1},
    {"AveragePool", op_avgpool, "auto_pad ceil_mode count_include_pad kernel_shape pads strides", 0, 0, 1, 1},
    {"GlobalAveragePool", op_gap, "", 0, 0, 1, 1},
    {"BatchNormalization", op_batchnorm, "epsilon is_test momentum spatial training_mode", 0, 3u << 3, 1, 6},
    {"LayerNormalization", op_layer_norm, "axis epsilon stash_type", 0, 0, 3, 17},
    {"Flatten", op_flatten, "axis", 0, 0, 1, 1},
    {"Reshape", op_reshape, "allowzero", 2, 0, 1, 5},
    {"Transpose", op_transpose, "perm", 0, 0, 1, 1},
    {"Softmax", op_softmax, "axis", 0, 0, 1, 1},
    {"LogSoftmax", op_log_softmax, "axis", 0, 0, 1, 1},
    {"Identity", op_identity, "", 0, 0, 1, 1},
    {"Dropout", op_identity, "seed", 6, 0, 1, 12},
    {"ReduceMean", op_reduce_mean, "axes keepdims noop_with_empty_axes", 2, 0, 1, 11},
    {"ReduceSum", op_reduce_sum, "keepdims noop_with_empty_axes", 2, 0, 1, 13},
    {"Squeeze", op_squeeze, "", 3, 0, 1, 13},
    {"Unsqueeze", op_unsqueeze, "", 3, 0, 1, 13},
    {"Constant", dg__onnx_constant, "value value_float value_floats value_int value_ints", 0, 0, 1, 1},
    {"Shape", dg__onnx_shape, "start end", 1, 0, 1, 1},
    {"Gather", dg__onnx_gather_nodes, "axis", 0, 0, 1, 1},
    {"Concat", dg__onnx_concat_nodes, "axis", 0, 0, 1, 4},
    {"Split", dg__onnx_split, "axis num_outputs split", 2, 0, OX_MAX_OUTPUTS, 2},
    {"Erf", op_erf, "", 0, 0, 1, 9},
    {"Gelu", op_gelu, "approximate", 0, 0, 1, 20},
    {"Cast", dg__onnx_cast, "to", 1, 0, 1, 6},
    {"Slice", dg__onnx_slice, "", 0x1f, 0, 1, 11},
};

const ox_op *dg__onnx_op(const char *name) {
    for (size_t i = 0; name && i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(ops[i].name, name)) return &ops[i];
    return NULL;
}
