/* cpu_norm.c: batch normalisation (training mode), its backward ops and
 * the running statistics update.
 *
 * x [N,C,H,W] or [N,C] (then H*W = 1): channel c holds the M = N*H*W values
 * x[n][c][p], p < H*W. The forward writes y (x's shape) and its side output
 * stats [2,C]: row 0 the channel's mean, row 1 its 1/sqrt(var + eps), var
 * biased; the backward ops read stats instead of recomputing them. Sums run
 * in double, one channel per iteration of a parallel loop, each in LANES
 * independent partial sums: one chain of dependent adds waits an add's
 * latency per value (the batch norms of ResNet-18's batch-32 step took
 * 12.8 ms so, docs/PERF.md). Value p of each row goes to lane p % LANES
 * and the lanes are added in order, so the sums do not depend on the
 * thread count. */
#include <math.h>
#include <stdint.h>

#include "../core/attrs.h"
#include "cpu_kernels.h"

/* x viewed as [n, c, hw] */
typedef struct channels { int64_t n, c, hw; } channels;

static channels channels_of(const dg_node *x) {
    int64_t n = x->shape.d[0], c = x->shape.d[1];
    return (channels){n, c, dg_node_numel(x) / (n * c)};
}

/* the loop over channel ch's values, v the index of one of them */
#define FOR_CHANNEL(k, ch, v)                                 \
    for (int64_t n_ = 0; n_ < (k).n; n_++)                    \
        for (int64_t v = (n_ * (k).c + (ch)) * (k).hw, e_ = v + (k).hw; v < e_; v++)

enum { LANES = 8 };

/* STEP over channel ch's values, l the value's lane and i its index: the
 * groups of LANES values of a row as one loop that the compiler
 * vectorises, then the row's rest */
#define FOR_CHANNEL_LANES(k, ch, l, i, STEP)                                    \
    for (int64_t n_ = 0; n_ < (k).n; n_++) {                                  \
        int64_t row_ = (n_ * (k).c + (ch)) * (k).hw, p_ = 0;                  \
        for (; p_ + LANES <= (k).hw; p_ += LANES)                             \
            for (int l = 0; l < LANES; l++) {                                 \
                int64_t i = row_ + p_ + l;                                    \
                STEP;                                                         \
            }                                                                 \
        for (; p_ < (k).hw; p_++) {                                           \
            int l = (int)(p_ % LANES);                                        \
            int64_t i = row_ + p_;                                            \
            STEP;                                                             \
        }                                                                     \
    }

static double lanes_total(const double lane[LANES]) {
    double t = 0.0;
    for (int l = 0; l < LANES; l++) t += lane[l];
    return t;
}

void dg__cpu_batch_norm(const dg_step *s) {
    const dg_node *nd = s->node;
    channels k = channels_of(nd);
    double m = (double)(k.n * k.hw), eps = dg_attr_norm_of(nd).eps;
    const float *x = s->in[0], *scale = s->in[1], *shift = s->in[2];
    float *y = s->out, *stats = s->side[0];
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < k.c; c++) {
        double sum[LANES] = {0}, sq[LANES] = {0};
        FOR_CHANNEL_LANES(k, c, l, i, sum[l] += x[i]);
        double mean = lanes_total(sum) / m;
        FOR_CHANNEL_LANES(k, c, l, i, sq[l] += (x[i] - mean) * (x[i] - mean)); /* two passes: no cancellation */
        double invstd = 1.0 / sqrt(lanes_total(sq) / m + eps);
        float meanf = (float)mean, gain = (float)(scale[c] * invstd), bias = shift[c];
        FOR_CHANNEL(k, c, i) y[i] = (x[i] - meanf) * gain + bias;
        stats[c] = meanf;
        stats[k.c + c] = (float)invstd;
    }
}

/* sum over channel c of dy and of dy * xhat, xhat = (x - mean) * invstd */
static void channel_sums(const float *dy, const float *x, const float *stats, channels k, int64_t c, double *sum_dy,
                         double *sum_dy_xhat) {
    float mean = stats[c], invstd = stats[k.c + c];
    double a[LANES] = {0}, b[LANES] = {0};
    FOR_CHANNEL_LANES(k, c, l, i, a[l] += dy[i]; b[l] += (double)dy[i] * ((x[i] - mean) * invstd));
    *sum_dy = lanes_total(a);
    *sum_dy_xhat = lanes_total(b);
}

/* (dy, x, scale, stats) -> dx = scale*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)),
 * the means over the channel's M values */
void dg__cpu_batch_norm_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    channels k = channels_of(nd);
    double m = (double)(k.n * k.hw);
    const float *dy = s->in[0], *x = s->in[1], *scale = s->in[2], *stats = s->in[3];
    float *dx = s->out;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < k.c; c++) {
        double sum_dy, sum_dy_xhat;
        channel_sums(dy, x, stats, k, c, &sum_dy, &sum_dy_xhat);
        float mean = stats[c], invstd = stats[k.c + c], gain = scale[c] * invstd;
        float mean_dy = (float)(sum_dy / m), mean_dy_xhat = (float)(sum_dy_xhat / m);
        FOR_CHANNEL(k, c, i) dx[i] = gain * (dy[i] - mean_dy - (x[i] - mean) * invstd * mean_dy_xhat);
    }
}

/* (dy, x, stats) -> dscale [C] = sum over the channel of dy * xhat */
void dg__cpu_batch_norm_backward_scale(const dg_step *s) {
    channels k = channels_of(s->node->in[1]);
    const float *dy = s->in[0], *x = s->in[1], *stats = s->in[2];
    float *dscale = s->out;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < k.c; c++) {
        double sum_dy, sum_dy_xhat;
        channel_sums(dy, x, stats, k, c, &sum_dy, &sum_dy_xhat);
        dscale[c] = (float)sum_dy_xhat;
    }
}

/* (running_mean [C], running_var [C], stats), both written in place (the
 * output is a view of running_mean): r = (1 - momentum) r + momentum b, b the
 * batch's mean and its variance made unbiased, var*count/(count - 1), var
 * recovered from stats as 1/invstd^2 - eps */
void dg__cpu_batch_norm_running(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_attr_norm a = dg_attr_norm_of(nd);
    int64_t nc = dg_node_numel(nd->in[0]);
    float *running_mean = s->inout[0], *running_var = s->inout[1];
    const float *stats = s->in[2];
    double mom = a.momentum, unbias = a.count > 1 ? (double)a.count / (double)(a.count - 1) : 1.0;
    for (int64_t c = 0; c < nc; c++) {
        double invstd = stats[nc + c], var = 1.0 / (invstd * invstd) - (double)a.eps;
        running_mean[c] = (float)((1.0 - mom) * running_mean[c] + mom * stats[c]);
        running_var[c] = (float)((1.0 - mom) * running_var[c] + mom * var * unbias);
    }
}
