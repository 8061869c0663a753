/* ref.c: the float64 reference, written from each op's definition.
 * OpenMP only over independent outputs; every sum stays in one thread, in
 * order, so the reference is deterministic. */
#include "ref.h"

#include "../attrs.h"
#include "../autodiff.h"
#include "../dtype_convert.h"
#include "ref_attention.h"
#include "../status_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* multi-index of flat element i in shape s */
static void unravel(int64_t i, dg_shape s, int64_t *idx) {
    for (int a = s.ndim - 1; a >= 0; a--) { idx[a] = i % s.d[a]; i /= s.d[a]; }
}
static int64_t ravel(const int64_t *idx, dg_shape s) {
    int64_t i = 0;
    for (int a = 0; a < s.ndim; a++) i = i * s.d[a] + idx[a];
    return i;
}
/* flat index in `in` of the element that broadcasting maps to output index idx */
static int64_t bcast_src(const int64_t *idx, dg_shape out, dg_shape in) {
    int64_t j[DG_MAX_DIMS];
    for (int a = 0; a < in.ndim; a++) j[a] = idx[out.ndim - in.ndim + a] % in.d[a];
    return ravel(j, in);
}

static double gelu(double x) {
    double c = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}
static double gelu_grad(double x) {
    double c = sqrt(2.0 / M_PI), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

static double unary(dg_op op, double x, double c) {
    switch (op) {
    case DG_OP_NEG:        return -x;
    case DG_OP_ADD_SCALAR: return x + c;
    case DG_OP_MUL_SCALAR: return x * c;
    case DG_OP_POW_SCALAR: return pow(x, c);
    case DG_OP_EXP:        return exp(x);
    case DG_OP_LOG:        return log(x);
    case DG_OP_SQRT:       return sqrt(x);
    case DG_OP_ABS:        return fabs(x);
    case DG_OP_RELU:       return x > 0 ? x : 0;
    case DG_OP_LEAKY_RELU: return x > 0 ? x : c * x;
    case DG_OP_SIGMOID:    return 1.0 / (1.0 + exp(-x));
    case DG_OP_TANH:       return tanh(x);
    case DG_OP_GELU:       return gelu(x);
    case DG_OP_ERF:        return erf(x);
    case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return NAN; /* not a unary op */
}

static double unary_backward(dg_op op, double dy, double v, double c) {
    switch (op) {
    case DG_OP_RELU_BACKWARD:       return v > 0 ? dy : 0;
    case DG_OP_LEAKY_RELU_BACKWARD: return v > 0 ? dy : c * dy;
    case DG_OP_ABS_BACKWARD:        return v > 0 ? dy : v < 0 ? -dy : 0;
    case DG_OP_SIGMOID_BACKWARD:    return dy * v * (1 - v);
    case DG_OP_TANH_BACKWARD:       return dy * (1 - v * v);
    case DG_OP_GELU_BACKWARD:       return dy * gelu_grad(v);
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return NAN; /* not a unary op's backward */
}

static double binary(dg_op op, double x, double z) {
    switch (op) {
    case DG_OP_ADD: return x + z;
    case DG_OP_SUB: return x - z;
    case DG_OP_MUL: return x * z;
    case DG_OP_DIV: return x / z;
    case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return NAN; /* not a binary op */
}

static void matmul(const dg_node *n, const double *A, const double *B, double *C) {
    const dg_node *a = n->in[0], *b = n->in[1];
    int r = n->shape.ndim - 2;
    int64_t batch = r ? n->shape.d[0] : 1, M = n->shape.d[r], N = n->shape.d[r + 1];
    const bool ta = dg_attr_matmul_of(n).trans_a, tb = dg_attr_matmul_of(n).trans_b;
    int64_t K = ta ? a->shape.d[r] : a->shape.d[r + 1];
    int64_t ac = a->shape.d[r + 1], bc = b->shape.d[r + 1];
#pragma omp parallel for collapse(2)
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? A[t * M * K + k * ac + i] : A[t * M * K + i * ac + k];
                    double y = tb ? B[t * K * N + j * bc + k] : B[t * K * N + k * bc + j];
                    acc += x * y;
                }
                C[t * M * N + i * N + j] = acc;
            }
}

static double row_lse(const double *x, int64_t c) {
    double mx = x[0], s = 0;
    for (int64_t j = 1; j < c; j++) mx = fmax(mx, x[j]);
    for (int64_t j = 0; j < c; j++) s += exp(x[j] - mx);
    return mx + log(s);
}

/* The optimizer updates from their documented rules (ops.h, autodiff.h).
 * Like the backends, they write the parameter and their state in place
 * (the inputs their op-table row marks as written), so evaluating a
 * training step's graph again with the same vals runs the next step; the
 * node's own value is the new parameter (its output is the parameter's
 * storage on a backend). Adam reads the step counter from its in[4], the
 * adam_step node, whose value is the counter after this step's increment.
 * with g = dw + weight_decay w (w before this step):
 *   sgd:      w -= lr g
 *   momentum: v = mu v + g;  w -= lr v                 (mu: attribute beta1)
 *   adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *             w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) */
/* The loss-scaling ops (ops.h): found + 1 when an x holds an inf or NaN;
 * the scale halved on an overflow (clean zeroed) to no less than
 * DG_LOSS_SCALE_MIN, else one more clean step, the scale doubled at the
 * growth interval where float32 holds the double. */
static void loss_scale_ref(const dg_node *n, double **vals, double *y) {
    if (n->op == DG_OP_FOUND_INF) {
        bool bad = false;
        for (int j = 1; j < n->n_in; j++) {
            const double *x = vals[n->in[j]->id];
            for (int64_t i = 0, k = dg_node_numel(n->in[j]); i < k; i++) bad |= !isfinite(x[i]);
        }
        y[0] = vals[n->in[0]->id][0] + (bad ? 1 : 0);
        return;
    }
    double *scale = vals[n->in[0]->id], *clean = vals[n->in[1]->id];
    if (vals[n->in[2]->id][0] != 0) {
        scale[0] = fmax(scale[0] / 2, DG_LOSS_SCALE_MIN);
        clean[0] = 0;
    } else if ((clean[0] += 1) >= dg_attr_scalar_of(n).value) {
        if (scale[0] * 2 <= FLT_MAX) scale[0] *= 2; /* float32's finite range, as the backends */
        clean[0] = 0;
    }
    y[0] = scale[0];
}

static dg_status optim_update(const dg_node *n, double **vals, double *y) {
    if (n->op == DG_OP_FOUND_INF || n->op == DG_OP_LOSS_SCALE_UPDATE) {
        loss_scale_ref(n, vals, y);
        return DG_OK;
    }
    /* a skip flag past the row's inputs (dg_optim_apply_ex): nothing moves;
     * then the gradient scale, dividing dw */
    const int n_row = dg_op_info_get(n->op)->n_in;
    if (n->n_in > n_row && vals[n->in[n_row]->id][0] != 0) {
        memcpy(y, vals[n->in[0]->id], (size_t)dg_node_numel(n) * sizeof *y);
        return DG_OK;
    }
    const double gs = n->n_in > n_row + 1 ? vals[n->in[n_row + 1]->id][0] : 1.0;
    const dg_attr_optim o = dg_attr_optim_of(n);
    const double lr = o.lr, b1 = o.beta1, b2 = o.beta2, eps = o.eps, wd = o.weight_decay;
    int64_t numel = dg_node_numel(n);
    double *w = vals[n->in[0]->id];
    const double *dw = n->n_in > 1 ? vals[n->in[1]->id] : NULL;
    double *g = NULL; /* dw / gs + wd w, read before w moves */
    if (dw) {
        g = malloc((size_t)numel * sizeof *g);
        if (!g) return dg__fail(DG_ERR_OOM, "ref: out of memory for '%s'", n->name);
        for (int64_t i = 0; i < numel; i++) g[i] = dw[i] / gs + wd * w[i];
    }
    switch (n->op) {
    case DG_OP_SGD_UPDATE:
        for (int64_t i = 0; i < numel; i++) w[i] -= lr * g[i];
        break;
    case DG_OP_MOMENTUM_UPDATE: {
        double *v = vals[n->in[2]->id];
        for (int64_t i = 0; i < numel; i++) {
            v[i] = b1 * v[i] + g[i];
            w[i] -= lr * v[i];
        }
        break;
    }
    case DG_OP_ADAM_STEP: w[0] += 1; break;
    case DG_OP_FOUND_INF: case DG_OP_LOSS_SCALE_UPDATE: /* loss_scale_ref's */
        break;
    case DG_OP_ADAM_UPDATE: {
        double *m = vals[n->in[2]->id], *v = vals[n->in[3]->id], t = vals[n->in[4]->id][0];
        double c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
        for (int64_t i = 0; i < numel; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            w[i] -= lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps);
        }
        break;
    }
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break; /* not an update: eval_node sends only DG_OPS_OPTIM here */
    }
    free(g);
    memcpy(y, w, (size_t)numel * sizeof *y);
    return DG_OK;
}

/* ---- convolutional networks (NCHW, row-major) ----
 * A windowed op's geometry, read from its shapes and attributes whichever
 * form the node is: x [N,C,H,W], y [N,O,OH,OW]; the convolutions' weight
 * is [O,C/groups,KH,KW]; the pools have O = C and one group. Output (oy, ox)
 * reads tap (ki, kj) at row oy*sh - ph + ki*dh, column ox*sw - pw + kj*dw. */
typedef struct window {
    int64_t N, C, H, W, O, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, cg, og;
} window;

static window window_of(const dg_node *n, dg_shape x, dg_shape y) {
    const dg_attr_conv a = dg_attr_conv_of(n);
    window k = {x.d[0], x.d[1], x.d[2], x.d[3], y.d[1], y.d[2], y.d[3],
                a.kernel[0], a.kernel[1], a.stride[0], a.stride[1], a.pad[0], a.pad[1],
                a.dilation[0], a.dilation[1], 0, 0};
    k.cg = k.C / a.groups;
    k.og = k.O / a.groups;
    return k;
}

/* y[n,o,oy,ox] = sum over ci < cg, ki, kj of x[n, g*cg + ci, iy, ix] w[o,ci,ki,kj],
 * g = o / og, taps outside x counting as 0 */
static void conv2d(const window *k, const double *x, const double *w, double *y) {
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t o = 0; o < k->O; o++)
            for (int64_t oy = 0; oy < k->OH; oy++)
                for (int64_t ox = 0; ox < k->OW; ox++) {
                    int64_t g = o / k->og;
                    double acc = 0;
                    for (int64_t ci = 0; ci < k->cg; ci++)
                        for (int64_t ki = 0; ki < k->kh; ki++)
                            for (int64_t kj = 0; kj < k->kw; kj++) {
                                int64_t iy = oy * k->sh - k->ph + ki * k->dh, ix = ox * k->sw - k->pw + kj * k->dw;
                                if (iy < 0 || iy >= k->H || ix < 0 || ix >= k->W) continue;
                                acc += x[((n * k->C + g * k->cg + ci) * k->H + iy) * k->W + ix] *
                                       w[((o * k->cg + ci) * k->kh + ki) * k->kw + kj];
                            }
                    y[((n * k->O + o) * k->OH + oy) * k->OW + ox] = acc;
                }
}

/* The adjoint of conv2d in x, gathered per input element: x[n,c,iy,ix]
 * met w[o,ci,ki,kj] (c = g*cg + ci, o in group g) at the output oy with
 * oy*sh = iy + ph - ki*dh, where that has a whole solution in [0, OH),
 * likewise ox:
 *   dx[n,c,iy,ix] = sum over those (o, ki, kj) of dy[n,o,oy,ox] w[o,ci,ki,kj] */
static void conv2d_backward_data(const window *k, const double *dy, const double *w, double *dx) {
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t c = 0; c < k->C; c++)
            for (int64_t iy = 0; iy < k->H; iy++)
                for (int64_t ix = 0; ix < k->W; ix++) {
                    int64_t g = c / k->cg, ci = c % k->cg;
                    double acc = 0;
                    for (int64_t o = g * k->og; o < (g + 1) * k->og; o++)
                        for (int64_t ki = 0; ki < k->kh; ki++)
                            for (int64_t kj = 0; kj < k->kw; kj++) {
                                int64_t ty = iy + k->ph - ki * k->dh, tx = ix + k->pw - kj * k->dw;
                                if (ty < 0 || tx < 0 || ty % k->sh || tx % k->sw) continue;
                                int64_t oy = ty / k->sh, ox = tx / k->sw;
                                if (oy >= k->OH || ox >= k->OW) continue;
                                acc += dy[((n * k->O + o) * k->OH + oy) * k->OW + ox] *
                                       w[((o * k->cg + ci) * k->kh + ki) * k->kw + kj];
                            }
                    dx[((n * k->C + c) * k->H + iy) * k->W + ix] = acc;
                }
}

/* dw[o,ci,ki,kj] = sum over n, oy, ox of dy[n,o,oy,ox] x[n, g*cg + ci, iy, ix] */
static void conv2d_backward_weight(const window *k, const double *dy, const double *x, double *dw) {
#pragma omp parallel for collapse(2)
    for (int64_t o = 0; o < k->O; o++)
        for (int64_t ci = 0; ci < k->cg; ci++)
            for (int64_t ki = 0; ki < k->kh; ki++)
                for (int64_t kj = 0; kj < k->kw; kj++) {
                    int64_t c = o / k->og * k->cg + ci;
                    double acc = 0;
                    for (int64_t n = 0; n < k->N; n++)
                        for (int64_t oy = 0; oy < k->OH; oy++)
                            for (int64_t ox = 0; ox < k->OW; ox++) {
                                int64_t iy = oy * k->sh - k->ph + ki * k->dh, ix = ox * k->sw - k->pw + kj * k->dw;
                                if (iy < 0 || iy >= k->H || ix < 0 || ix >= k->W) continue;
                                acc += dy[((n * k->O + o) * k->OH + oy) * k->OW + ox] *
                                       x[((n * k->C + c) * k->H + iy) * k->W + ix];
                            }
                    dw[((o * k->cg + ci) * k->kh + ki) * k->kw + kj] = acc;
                }
}

/* Batch normalisation's channels: x [N,C] or [N,C,H,W] holds, for each of
 * its N images, C channels of P = H*W (or 1) values; channel c's M = N*P
 * values are x[(n*C + c)*P + q]. */
typedef struct channels { int64_t N, C, P; } channels;

static channels channels_of(dg_shape x) {
    return (channels){x.d[0], x.d[1], dg_shape_numel(x) / (x.d[0] * x.d[1])};
}

#define CH_AT(ch, c, n, q) ((((n) * (ch).C + (c)) * (ch).P) + (q))

/* channel c's mean and invstd = 1/sqrt(var + eps), var = mean((x - mean)^2) */
static void channel_stats(channels ch, const double *x, int64_t c, double eps, double *mean, double *invstd) {
    double m = (double)(ch.N * ch.P), s = 0, ss = 0;
    for (int64_t n = 0; n < ch.N; n++)
        for (int64_t q = 0; q < ch.P; q++) s += x[CH_AT(ch, c, n, q)];
    *mean = s / m;
    for (int64_t n = 0; n < ch.N; n++)
        for (int64_t q = 0; q < ch.P; q++) ss += (x[CH_AT(ch, c, n, q)] - *mean) * (x[CH_AT(ch, c, n, q)] - *mean);
    *invstd = 1 / sqrt(ss / m + eps);
}

/* y = scale[c] (x - mean) invstd + shift[c], channel by channel */
static void batch_norm(const dg_node *nd, double **vals, double *y) {
    channels ch = channels_of(nd->shape);
    const double *x = vals[nd->in[0]->id], *scale = vals[nd->in[1]->id], *shift = vals[nd->in[2]->id];
    const double eps = dg_attr_norm_of(nd).eps;
#pragma omp parallel for
    for (int64_t c = 0; c < ch.C; c++) {
        double mean, invstd;
        channel_stats(ch, x, c, eps, &mean, &invstd);
        for (int64_t n = 0; n < ch.N; n++)
            for (int64_t q = 0; q < ch.P; q++)
                y[CH_AT(ch, c, n, q)] = scale[c] * (x[CH_AT(ch, c, n, q)] - mean) * invstd + shift[c];
    }
}

/* (dy, x, scale, stats) -> dx, or with scale_grad (dy, x, stats) -> dscale:
 * xhat = (x - mean) invstd from stats (row 0 mean, row 1 invstd), means
 * over the channel's M values:
 *   dx = scale invstd (dy - mean(dy) - xhat mean(dy xhat));  dscale = sum dy xhat */
static void batch_norm_backward(const dg_node *nd, double **vals, double *y, bool scale_grad) {
    const dg_node *xn = nd->in[1];
    channels ch = channels_of(xn->shape);
    const double *dy = vals[nd->in[0]->id], *x = vals[xn->id];
    const double *scale = scale_grad ? NULL : vals[nd->in[2]->id], *stats = vals[nd->in[scale_grad ? 2 : 3]->id];
    const double m = (double)(ch.N * ch.P);
#pragma omp parallel for
    for (int64_t c = 0; c < ch.C; c++) {
        const double mean = stats[c], invstd = stats[ch.C + c];
        double sum_dy = 0, sum_dy_xhat = 0;
        for (int64_t n = 0; n < ch.N; n++)
            for (int64_t q = 0; q < ch.P; q++) {
                int64_t i = CH_AT(ch, c, n, q);
                sum_dy += dy[i];
                sum_dy_xhat += dy[i] * (x[i] - mean) * invstd;
            }
        if (scale_grad) {
            y[c] = sum_dy_xhat;
            continue;
        }
        for (int64_t n = 0; n < ch.N; n++)
            for (int64_t q = 0; q < ch.P; q++) {
                int64_t i = CH_AT(ch, c, n, q);
                double xhat = (x[i] - mean) * invstd;
                y[i] = scale[c] * invstd * (dy[i] - sum_dy / m - xhat * sum_dy_xhat / m);
            }
    }
}

/* The running statistics move towards the batch's, in place (the inputs
 * its op-table row marks as written), as the optimizer updates do; the
 * node's value is the new running mean. With m = momentum and var =
 * 1/invstd^2 - eps the batch's biased variance:
 *   rm = (1 - m) rm + m mean;  rv = (1 - m) rv + m var count / (count - 1)
 * (count 1: var as it is). */
static void batch_norm_running(const dg_node *nd, double **vals, double *y) {
    const dg_attr_norm a = dg_attr_norm_of(nd);
    const double m = a.momentum, eps = a.eps, count = (double)a.count;
    double *rm = vals[nd->in[0]->id], *rv = vals[nd->in[1]->id];
    const double *stats = vals[nd->in[2]->id];
    int64_t C = dg_node_numel(nd);
    for (int64_t c = 0; c < C; c++) {
        double var = 1 / (stats[C + c] * stats[C + c]) - eps;
        rm[c] = (1 - m) * rm[c] + m * stats[c];
        rv[c] = (1 - m) * rv[c] + m * (a.count > 1 ? var * count / (count - 1) : var);
    }
    memcpy(y, rm, (size_t)C * sizeof *y);
}

/* a side output from its definition, not from its owner's result:
 * softmax_ce's row log-sum-exp, batch_norm's stats, ... (the pools': ref_pool.c) */
static dg_status side_output(const dg_node *n, double **vals, double *y) {
    const dg_node *owner = n->in[0];
    const double *x = vals[owner->in[0]->id];
    switch (owner->op) {
    case DG_OP_SOFTMAX_CE: {
        int64_t C = owner->in[0]->shape.d[owner->in[0]->shape.ndim - 1];
        for (int64_t r = 0; r < dg_node_numel(n); r++) y[r] = row_lse(x + r * C, C);
        return DG_OK;
    }
    case DG_OPS_POOL: return ref_pool_side(n, vals, y);
    case DG_OP_BATCH_NORM: {
        channels ch = channels_of(owner->in[0]->shape);
        for (int64_t c = 0; c < ch.C; c++)
            channel_stats(ch, x, c, dg_attr_norm_of(owner).eps, &y[c], &y[ch.C + c]);
        return DG_OK;
    }
    case DG_OP_LAYER_NORM: ref_layer_norm_stats(owner, vals, y); return DG_OK;
    case DG_OP_ATTENTION: ref_attention(owner, vals, NULL, y); return DG_OK;
    case DG_OP_ATTENTION_BACKWARD: /* dk, dv */
        ref_attention_backward(owner, vals, NULL, dg_attr_side_of(n).index == 0 ? y : NULL,
                               dg_attr_side_of(n).index == 1 ? y : NULL);
        return DG_OK;
    /* no side outputs */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_MATMUL: case DG_OP_PERMUTE: case DG_OP_RESHAPE:
    case DG_OP_SUM: case DG_OP_MEAN: case DG_OP_BROADCAST_TO: case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
    case DG_OP_EMBEDDING: case DG_OP_ALL_REDUCE: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
    case DG_OP_SOFTMAX_CE_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
    case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD:
    case DG_OP_BATCH_NORM_RUNNING: case DG_OP_CAST: case DG_OP_COUNT:
        break;
    }
    return DG_ERR_UNSUPPORTED;
}

/* x as a tensor of dtype t holds it: float32 first (the graph's values
 * are float32 before a cast), then t's rounding */
static double ref_round_to(dg_dtype t, double x) {
    float f = (float)x;
    switch (t) {
    case DG_BF16: return dg__bf16_to_f32(dg__f32_to_bf16(f));
    case DG_F16:  return dg__f16_to_f32(dg__f32_to_f16(f));
    case DG_F32: case DG_I32: break;
    }
    return f;
}

static dg_status eval_node(const dg_node *n, double **vals) {
    double *y = vals[n->id];
    const double *a = n->n_in > 0 ? vals[n->in[0]->id] : NULL;
    const double *b = n->n_in > 1 ? vals[n->in[1]->id] : NULL;
    int64_t numel = dg_node_numel(n), idx[DG_MAX_DIMS];
    double c = dg_attr_scalar_or0(n);
    dg_shape s = n->shape;
    switch (n->op) {
    case DG_OP_LEAF: break;
    case DG_OPS_BINARY:
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            unravel(i, s, idx);
            double x = a[bcast_src(idx, s, n->in[0]->shape)], z = b[bcast_src(idx, s, n->in[1]->shape)];
            y[i] = binary(n->op, x, z);
        }
        break;
    case DG_OPS_UNARY:
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) y[i] = unary(n->op, a[i], c);
        break;
    case DG_OPS_UNARY_BACKWARD:
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) y[i] = unary_backward(n->op, a[i], b[i], c);
        break;
    case DG_OP_MATMUL: matmul(n, a, b, y); break;
    case DG_OP_PERMUTE: {
        const dg_attr_permute pa = dg_attr_permute_of(n);
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            int64_t src[DG_MAX_DIMS];
            unravel(i, s, idx);
            for (int k = 0; k < s.ndim; k++) src[pa.perm[k]] = idx[k];
            y[i] = a[ravel(src, n->in[0]->shape)];
        }
        break;
    }
    case DG_OP_RESHAPE: memcpy(y, a, (size_t)numel * sizeof *y); break;
    case DG_OP_ALL_REDUCE: memcpy(y, a, (size_t)numel * sizeof *y); break; /* one replica: its mean is itself */
    case DG_OP_CAST: /* the float32 value the graph holds, rounded as its kernels round */
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) y[i] = ref_round_to(n->dtype, a[i]);
        break;
    case DG_OP_SUM: case DG_OP_MEAN: {
        dg_shape in = n->in[0]->shape, kept = in;
        uint32_t axes = dg_attr_reduce_of(n).axes;
        for (int k = 0; k < in.ndim; k++)
            if (axes >> k & 1u) kept.d[k] = 1;
        int64_t nin = dg_shape_numel(in);
        memset(y, 0, (size_t)numel * sizeof *y);
        for (int64_t i = 0; i < nin; i++) {
            unravel(i, in, idx);
            for (int k = 0; k < in.ndim; k++)
                if (axes >> k & 1u) idx[k] = 0;
            y[ravel(idx, kept)] += a[i];
        }
        if (n->op == DG_OP_MEAN)
            for (int64_t i = 0; i < numel; i++) y[i] *= (double)numel / (double)nin;
        break;
    }
    case DG_OP_BROADCAST_TO:
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            unravel(i, s, idx);
            y[i] = a[bcast_src(idx, s, n->in[0]->shape)];
        }
        break;
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: {
        /* softmax(scale x) over the columns j <= i of row i when causal */
        dg_attr_softmax sa = dg_attr_softmax_of(n);
        int64_t C = s.d[s.ndim - 1], R = s.ndim > 1 ? s.d[s.ndim - 2] : 1;
#pragma omp parallel for
        for (int64_t r = 0; r < numel / C; r++) {
            int64_t kept = sa.causal ? (r % R + 1 < C ? r % R + 1 : C) : C;
            double *row = y + r * C;
            for (int64_t j = 0; j < kept; j++) row[j] = sa.scale * a[r * C + j];
            double lse = row_lse(row, kept);
            for (int64_t j = 0; j < C; j++)
                row[j] = j >= kept ? 0 : n->op == DG_OP_SOFTMAX ? exp(row[j] - lse) : row[j] - lse;
        }
        break;
    }
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD: {
        double scale = dg_attr_softmax_of(n).scale;
        int64_t C = s.d[s.ndim - 1];
#pragma omp parallel for
        for (int64_t r = 0; r < numel / C; r++) {
            const double *dy = a + r * C, *yy = b + r * C;
            double dot = 0;
            for (int64_t j = 0; j < C; j++) dot += n->op == DG_OP_SOFTMAX_BACKWARD ? dy[j] * yy[j] : dy[j];
            for (int64_t j = 0; j < C; j++)
                y[r * C + j] = scale * (n->op == DG_OP_SOFTMAX_BACKWARD ? yy[j] * (dy[j] - dot)
                                                                        : dy[j] - exp(yy[j]) * dot);
        }
        break;
    }
    case DG_OP_SOFTMAX_CE: {
        dg_shape ls = n->in[0]->shape;
        int64_t C = ls.d[ls.ndim - 1], R = dg_shape_numel(ls) / C;
        double tot = 0;
        for (int64_t r = 0; r < R; r++) tot += row_lse(a + r * C, C) - a[r * C + (int64_t)b[r]];
        y[0] = tot / (double)R;
        break;
    }
    case DG_OP_SIDE_OUTPUT: return side_output(n, vals, y);
    case DG_OP_SOFTMAX_CE_BACKWARD: { /* recomputes lse (in[3]): an independent check */
        const double *x = b, *lab = vals[n->in[2]->id];
        int64_t C = s.d[s.ndim - 1], R = numel / C;
#pragma omp parallel for
        for (int64_t r = 0; r < R; r++) {
            double lse = row_lse(x + r * C, C);
            for (int64_t j = 0; j < C; j++)
                y[r * C + j] = (exp(x[r * C + j] - lse) - (j == (int64_t)lab[r])) * a[0] / (double)R;
        }
        break;
    }
    case DG_OPS_OPTIM: return optim_update(n, vals, y);
    case DG_OP_CONV2D: {
        window k = window_of(n, n->in[0]->shape, s);
        conv2d(&k, a, b, y);
        break;
    }
    case DG_OP_CONV2D_BACKWARD_DATA: { /* (dy, w) -> dx */
        window k = window_of(n, s, n->in[0]->shape);
        conv2d_backward_data(&k, a, b, y);
        break;
    }
    case DG_OP_CONV2D_BACKWARD_WEIGHT: { /* (dy, x) -> dw */
        window k = window_of(n, n->in[1]->shape, n->in[0]->shape);
        conv2d_backward_weight(&k, a, b, y);
        break;
    }
    case DG_OPS_POOL: return ref_pool_eval(n, vals);
    case DG_OP_BATCH_NORM: batch_norm(n, vals, y); break;
    case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
        batch_norm_backward(n, vals, y, n->op == DG_OP_BATCH_NORM_BACKWARD_SCALE);
        break;
    case DG_OP_BATCH_NORM_RUNNING: batch_norm_running(n, vals, y); break;
    case DG_OP_LAYER_NORM: ref_layer_norm(n, vals, y); break;
    case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE:
        ref_layer_norm_backward(n, vals, y, n->op == DG_OP_LAYER_NORM_BACKWARD_SCALE);
        break;
    case DG_OP_EMBEDDING: ref_embedding(n, vals, y); break;
    case DG_OP_EMBEDDING_BACKWARD: ref_embedding_backward(n, vals, y); break;
    case DG_OP_ATTENTION: ref_attention(n, vals, y, NULL); break;
    case DG_OP_ATTENTION_BACKWARD: ref_attention_backward(n, vals, y, NULL, NULL); break;
    case DG_OP_COUNT: return DG_ERR_UNSUPPORTED;
    }
    return DG_OK;
}

/* nodes [0, upto) in order; stored: each 16-bit node's values rounded to
 * its dtype once computed (a cast rounds itself) */
static dg_status eval_nodes(const dg_graph *g, int upto, double **vals, bool stored) {
    for (int id = 0; id < upto; id++) {
        const dg_node *n = dg_graph_node(g, id);
        if (n->op == DG_OP_LEAF) continue;
        if (!vals[id]) vals[id] = calloc((size_t)dg_node_numel(n), sizeof(double));
        if (!vals[id]) return DG_ERR_OOM;
        dg_status st = eval_node(n, vals);
        if (st != DG_OK) return st;
        if (!stored || n->op == DG_OP_CAST || (n->dtype != DG_BF16 && n->dtype != DG_F16)) continue;
        double *y = vals[id];
        for (int64_t i = 0, cnt = dg_node_numel(n); i < cnt; i++) y[i] = ref_round_to(n->dtype, y[i]);
    }
    return DG_OK;
}

dg_status ref_eval(const dg_graph *g, int upto, double **vals) { return eval_nodes(g, upto, vals, false); }
dg_status ref_eval_stored(const dg_graph *g, int upto, double **vals) { return eval_nodes(g, upto, vals, true); }

void ref_free(double **vals, int n) {
    for (int i = 0; i < n; i++) free(vals[i]);
}
