/* graph_conv.c: the builders of convolutional networks: conv2d, the pools,
 * batch normalisation and its running statistics, flatten. Shape errors
 * name the op, the shapes and the attribute that does not fit. */
#include <stdio.h>

#include "attrs.h"
#include "graph.h"
#include "graph_internal.h"

static const char *hw(const int v[2], char *buf, size_t n) {
    snprintf(buf, n, "%dx%d", v[0], v[1]);
    return buf;
}

/* Attribute arithmetic is done in 64 bits: every attribute is an int up to
 * INT_MAX, so 2*pad and dilation*(k-1)+1 overflow an int (undefined, and a
 * check on the wrapped value passes) but not an int64_t. */
static int64_t span_of(int k, int dilation) { return (int64_t)dilation * ((int64_t)k - 1) + 1; }

/* The output extent of one spatial axis, or -1 when the (dilated) window
 * does not fit in the padded input. */
static int64_t out_extent(int64_t in, int k, int stride, int pad, int dilation) {
    int64_t span = span_of(k, dilation), padded = in + 2 * (int64_t)pad;
    if (padded < span) return -1;
    return (padded - span) / stride + 1;
}

/* Checks the attributes every windowed op shares and computes OH, OW.
 * Returns false with g in an error state. */
static bool window_fits(dg_graph *g, const char *op, const dg_node *x, dg_attr_conv a, int64_t *oh, int64_t *ow) {
    char sx[96], b1[32], b3[32];
    dg_shape_str(x->shape, sx, sizeof sx);
    if (x->shape.ndim != 4) {
        dg__graph_fail(g, DG_ERR_SHAPE, "%s: input %s must have 4 axes [N,C,H,W]", op, sx);
        return false;
    }
    const struct { const char *name; const int *v; int least; } attrs[] = {
        {"kernel", a.kernel, 1}, {"stride", a.stride, 1}, {"padding", a.pad, 0}, {"dilation", a.dilation, 1}};
    for (int i = 0; i < 4; i++)
        if (attrs[i].v[0] < attrs[i].least || attrs[i].v[1] < attrs[i].least) {
            dg__graph_fail(g, DG_ERR_SHAPE, "%s: %s %s (input %s) must be >= %d in both axes", op, attrs[i].name,
                           hw(attrs[i].v, b1, sizeof b1), sx, attrs[i].least);
            return false;
        }
    *oh = out_extent(x->shape.d[2], a.kernel[0], a.stride[0], a.pad[0], a.dilation[0]);
    *ow = out_extent(x->shape.d[3], a.kernel[1], a.stride[1], a.pad[1], a.dilation[1]);
    if (*oh < 1 || *ow < 1) {
        dg__graph_fail(g, DG_ERR_SHAPE, "%s: kernel %s (dilated %lldx%lld) is larger than the padded input "
                       "%lldx%lld (input %s, padding %s)", op, hw(a.kernel, b1, sizeof b1),
                       (long long)span_of(a.kernel[0], a.dilation[0]), (long long)span_of(a.kernel[1], a.dilation[1]),
                       (long long)(x->shape.d[2] + 2 * (int64_t)a.pad[0]),
                       (long long)(x->shape.d[3] + 2 * (int64_t)a.pad[1]), sx, hw(a.pad, b3, sizeof b3));
        return false;
    }
    return true;
}

dg_conv2d_opts dg_node_conv2d_opts(const dg_node *n) {
    dg_conv2d_opts o = {{0, 0}, {0, 0}, {0, 0}, 0};
    if (!n || (n->op != DG_OP_CONV2D && n->op != DG_OP_CONV2D_BACKWARD_DATA && n->op != DG_OP_CONV2D_BACKWARD_WEIGHT))
        return o;
    dg_attr_conv a = dg_attr_conv_of(n);
    for (int i = 0; i < 2; i++) {
        o.stride[i] = a.stride[i];
        o.pad[i] = a.pad[i];
        o.dilation[i] = a.dilation[i];
    }
    o.groups = a.groups;
    return o;
}

/* x and w both f32, both bf16 or both f16 (io in 16 bits, sums in float32,
 * as cuDNN's and oneDNN's 16-bit convolutions): y has their dtype. The
 * bias stays float32, so a 16-bit y plus a bias is a float32 sum. */
dg_node *dg_conv2d(dg_graph *g, dg_node *x, dg_node *w, dg_node *bias, dg_conv2d_opts o) {
    dg_node *in[2] = {x, w};
    if (!dg__check_float_inputs(g, "conv2d", 2, in)) return NULL;
    if (bias && !dg__check_f32_inputs(g, "conv2d", 1, &bias)) return NULL;
    char sx[96], sw[96], sb[96];
    dg_shape_str(x->shape, sx, sizeof sx);
    dg_shape_str(w->shape, sw, sizeof sw);
    if (w->shape.ndim != 4)
        return dg__graph_fail(g, DG_ERR_SHAPE, "conv2d: weight %s must have 4 axes [O,C/groups,KH,KW]", sw);
    if (w->shape.d[2] > INT32_MAX || w->shape.d[3] > INT32_MAX)
        return dg__graph_fail(g, DG_ERR_SHAPE, "conv2d: weight %s: kernel too large", sw);
    int groups = o.groups ? o.groups : 1;
    dg_attr_conv a = {{(int)w->shape.d[2], (int)w->shape.d[3]},
                      {o.stride[0] ? o.stride[0] : 1, o.stride[1] ? o.stride[1] : 1},
                      {o.pad[0], o.pad[1]},
                      {o.dilation[0] ? o.dilation[0] : 1, o.dilation[1] ? o.dilation[1] : 1},
                      groups};
    int64_t oh, ow;
    if (!window_fits(g, "conv2d", x, a, &oh, &ow)) return NULL;
    int64_t c = x->shape.d[1], oc = w->shape.d[0];
    if (groups < 1 || c % groups || oc % groups)
        return dg__graph_fail(g, DG_ERR_SHAPE, "conv2d: groups %d must be >= 1 and divide the input channels "
                              "(input %s) and the output channels (weight %s)", groups, sx, sw);
    if (w->shape.d[1] * groups != c)
        return dg__graph_fail(g, DG_ERR_SHAPE, "conv2d: weight %s takes %lld channels per group, x %d groups = "
                              "%lld input channels, but input %s has %lld", sw, (long long)w->shape.d[1], groups,
                              (long long)(w->shape.d[1] * groups), sx, (long long)c);
    if (bias && (bias->shape.ndim != 1 || bias->shape.d[0] != oc))
        return dg__graph_fail(g, DG_ERR_SHAPE, "conv2d: bias %s must be [%lld], one per output channel of weight %s",
                              dg_shape_str(bias->shape, sb, sizeof sb), (long long)oc, sw);
    dg_node *y = dg__node_new(g, DG_OP_CONV2D, DG_SHAPE(x->shape.d[0], oc, oh, ow), 2, in);
    if (!y) return NULL;
    y->dtype = x->dtype;
    dg__attr_conv_set(y, a);
    if (!bias) return y;
    return dg_add(g, y, dg_reshape(g, bias, DG_SHAPE(oc, 1, 1)));
}

static dg_node *pool(dg_graph *g, dg_op op, dg_node *x, dg_pool2d_opts o) {
    const char *name = dg_op_name(op);
    if (!dg__check_f32_inputs(g, name, 1, &x)) return NULL;
    dg_attr_conv a = {{o.kernel[0], o.kernel[1]},
                      {o.stride[0] ? o.stride[0] : o.kernel[0], o.stride[1] ? o.stride[1] : o.kernel[1]},
                      {o.pad[0], o.pad[1]},
                      {1, 1},
                      1};
    int64_t oh, ow;
    if (!window_fits(g, name, x, a, &oh, &ow)) return NULL;
    if (2 * (int64_t)a.pad[0] > a.kernel[0] || 2 * (int64_t)a.pad[1] > a.kernel[1]) {
        char sx[96], b1[32], b2[32];
        return dg__graph_fail(g, DG_ERR_SHAPE, "%s: padding %s of input %s is more than half the window %s", name,
                              hw(a.pad, b1, sizeof b1), dg_shape_str(x->shape, sx, sizeof sx),
                              hw(a.kernel, b2, sizeof b2));
    }
    dg_shape ys = DG_SHAPE(x->shape.d[0], x->shape.d[1], oh, ow);
    dg_node *y = dg__node_new(g, op, ys, 1, &x);
    if (!y) return NULL;
    dg__attr_conv_set(y, a);
    if (op != DG_OP_MAX_POOL2D) return y;
    /* where each maximum came from, for the backward */
    dg_node *argmax = dg__side_new(g, y, ys, "argmax");
    if (!argmax) return NULL;
    argmax->dtype = DG_I32;
    return y;
}

dg_node *dg_max_pool2d(dg_graph *g, dg_node *x, dg_pool2d_opts o) { return pool(g, DG_OP_MAX_POOL2D, x, o); }
dg_node *dg_avg_pool2d(dg_graph *g, dg_node *x, dg_pool2d_opts o) { return pool(g, DG_OP_AVG_POOL2D, x, o); }

dg_node *dg_global_avg_pool2d(dg_graph *g, dg_node *x) {
    if (!dg__check_f32_inputs(g, "global_avg_pool2d", 1, &x)) return NULL;
    if (x->shape.ndim != 4) {
        char sx[96];
        return dg__graph_fail(g, DG_ERR_SHAPE, "global_avg_pool2d: input %s must have 4 axes [N,C,H,W]",
                              dg_shape_str(x->shape, sx, sizeof sx));
    }
    return dg_mean(g, x, 1u << 2 | 1u << 3, false);
}

dg_node *dg_flatten(dg_graph *g, dg_node *x) {
    if (!dg__check_f32_inputs(g, "flatten", 1, &x)) return NULL;
    return dg_reshape(g, x, DG_SHAPE(x->shape.d[0], dg_node_numel(x) / x->shape.d[0]));
}

/* x [N,C,...] with scale and shift [C]; false with g in an error state */
static bool channels_fit(dg_graph *g, const char *op, const dg_node *x, dg_node *const *per_channel, int n) {
    char sx[96], sp[96];
    dg_shape_str(x->shape, sx, sizeof sx);
    if (x->shape.ndim != 2 && x->shape.ndim != 4) {
        dg__graph_fail(g, DG_ERR_SHAPE, "%s: input %s must be [N,C] or [N,C,H,W]", op, sx);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (per_channel[i]->shape.ndim != 1 || per_channel[i]->shape.d[0] != x->shape.d[1]) {
            dg__graph_fail(g, DG_ERR_SHAPE, "%s: '%s' %s must be [%lld], one per channel of input %s", op,
                           per_channel[i]->name, dg_shape_str(per_channel[i]->shape, sp, sizeof sp),
                           (long long)x->shape.d[1], sx);
            return false;
        }
    return true;
}

dg_node *dg_batch_norm(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, float eps) {
    dg_node *in[3] = {x, scale, shift};
    if (!dg__check_f32_inputs(g, "batch_norm", 3, in) || !channels_fit(g, "batch_norm", x, in + 1, 2)) return NULL;
    if (!(eps > 0.0f)) return dg__graph_fail(g, DG_ERR_INVALID, "batch_norm: eps %g must be > 0", (double)eps);
    int64_t count = dg_node_numel(x) / x->shape.d[1];
    dg_node *y = dg__node_new(g, DG_OP_BATCH_NORM, x->shape, 3, in);
    if (!y) return NULL;
    dg__attr_norm_set(y, (dg_attr_norm){eps, 0.0f, count});
    return dg__side_new(g, y, DG_SHAPE(2, x->shape.d[1]), "stats") ? y : NULL;
}

dg_node *dg_batch_norm_running(dg_graph *g, dg_node *bn, dg_node *running_mean, dg_node *running_var,
                               float momentum) {
    dg_node *in[3] = {running_mean, running_var, bn};
    if (!dg__check_f32_inputs(g, "batch_norm_running", 3, in)) return NULL;
    if (bn->op != DG_OP_BATCH_NORM)
        return dg__graph_fail(g, DG_ERR_INVALID, "batch_norm_running: '%s' is a %s node, not batch_norm", bn->name,
                              dg_op_name(bn->op));
    if (!channels_fit(g, "batch_norm_running", bn->in[0], in, 2)) return NULL;
    if (!(momentum > 0.0f && momentum <= 1.0f))
        return dg__graph_fail(g, DG_ERR_INVALID, "batch_norm_running: momentum %g must be in (0, 1]",
                              (double)momentum);
    in[2] = bn->side[0];
    dg_node *u = dg__node_new(g, DG_OP_BATCH_NORM_RUNNING, running_mean->shape, 3, in);
    if (!u) return NULL;
    u->view_of = running_mean;
    dg_attr_norm a = dg_attr_norm_of(bn);
    a.momentum = momentum;
    dg__attr_norm_set(u, a);
    return u;
}

dg_node *dg_batch_norm_eval(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, dg_node *running_mean,
                            dg_node *running_var, float eps) {
    dg_node *in[5] = {x, scale, shift, running_mean, running_var};
    if (!dg__check_f32_inputs(g, "batch_norm_eval", 5, in) || !channels_fit(g, "batch_norm_eval", x, in + 1, 4))
        return NULL;
    if (!(eps > 0.0f)) return dg__graph_fail(g, DG_ERR_INVALID, "batch_norm_eval: eps %g must be > 0", (double)eps);
    /* per-channel vectors as [C,1,1] (or [C]) broadcast against x */
    dg_shape cs = x->shape.ndim == 4 ? DG_SHAPE(x->shape.d[1], 1, 1) : DG_SHAPE(x->shape.d[1]);
    dg_node *inv_std = dg_pow_scalar(g, dg_add_scalar(g, running_var, eps), -0.5f);
    dg_node *k = dg_reshape(g, dg_mul(g, scale, inv_std), cs);
    dg_node *centered = dg_sub(g, x, dg_reshape(g, running_mean, cs));
    return dg_add(g, dg_mul(g, centered, k), dg_reshape(g, shift, cs));
}
