/* cpu_layer_norm.c: layer normalisation and its backward ops.
 *
 * x [..., D] is read as rows [R, D]; each row is normalised with its own
 * mean and biased variance, then scaled and shifted per column:
 *   y = scale * (x - mean) * rstd + shift,  rstd = 1/sqrt(var + eps).
 * The forward writes the side output stats [2, R]: row 0 the means, row 1
 * the rstd, which the backward ops read instead of recomputing them. Row
 * sums run in double, the variance as a second pass over the deviations
 * (no cancellation), one row per iteration of a parallel loop. The scale
 * gradient is a column sum: parallel over blocks of columns, each column
 * summed over the rows in order (the same bits for any thread count). */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "../core/attrs.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"

#define COL_BLOCK 16 /* columns of one task of the scale gradient: a cache line */

static int64_t row_len(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }

/* (x, scale, shift) -> y; side[0]: stats [2, rows]. x, scale, shift and y
 * of one dtype; a bf16 or f16 row is widened into the thread's part of the
 * scratch (scale, shift, x, y: 4d floats), normalised in float32 with the
 * statistics in double, and rounded on store; the stats stay float32. */
void dg__cpu_layer_norm(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype t = nd->dtype;
    int64_t d = row_len(nd), rows = dg_node_numel(nd) / d;
    double eps = dg_attr_norm_of(nd).eps;
    float *stats = s->side[0];
#pragma omp parallel
    {
        float *buf = t == DG_F32 ? NULL : (float *)s->scratch + (int64_t)omp_get_thread_num() * 4 * d;
        const float *scale = dg__lp_load(t, s->in[1], 0, d, buf);
        const float *shift = dg__lp_load(t, s->in[2], 0, d, buf ? buf + d : NULL);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = dg__lp_load(t, s->in[0], r * d, d, buf ? buf + 2 * d : NULL);
            float *ybuf = buf ? buf + 3 * d : NULL, *yr = dg__lp_dst(t, s->out, r * d, ybuf);
            double sum = 0.0, sq = 0.0;
            for (int64_t j = 0; j < d; j++) sum += xr[j];
            double mean = sum / (double)d;
            for (int64_t j = 0; j < d; j++) sq += (xr[j] - mean) * (xr[j] - mean);
            double rstd = 1.0 / sqrt(sq / (double)d + eps);
            float meanf = (float)mean, rstdf = (float)rstd;
            for (int64_t j = 0; j < d; j++) yr[j] = (xr[j] - meanf) * rstdf * scale[j] + shift[j];
            dg__lp_store(t, s->out, r * d, d, ybuf);
            if (stats) {
                stats[r] = meanf;
                stats[rows + r] = rstdf;
            }
        }
    }
}

/* (dy, x, scale, stats) -> dx = rstd (g - mean(g) - xhat mean(g xhat)),
 * g = dy scale, xhat = (x - mean) rstd, the means over the row. dx and
 * stats are float32; dy, x and scale are read in their dtypes (widened
 * into the thread's scratch: scale, dy, x, 3d floats). */
void dg__cpu_layer_norm_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype tg = nd->in[0]->dtype, tx = nd->in[1]->dtype, ts = nd->in[2]->dtype;
    int64_t d = row_len(nd), rows = dg_node_numel(nd) / d;
    const float *stats = s->in[3];
    float *dx = s->out;
    bool f32 = tg == DG_F32 && tx == DG_F32 && ts == DG_F32;
#pragma omp parallel
    {
        float *buf = f32 ? NULL : (float *)s->scratch + (int64_t)omp_get_thread_num() * 3 * d;
        const float *scale = dg__lp_load(ts, s->in[2], 0, d, buf);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *dyr = dg__lp_load(tg, s->in[0], r * d, d, buf ? buf + d : NULL);
            const float *xr = dg__lp_load(tx, s->in[1], r * d, d, buf ? buf + 2 * d : NULL);
            float *dxr = dx + r * d;
            float mean = stats[r], rstd = stats[rows + r];
            double a = 0.0, b = 0.0;
            for (int64_t j = 0; j < d; j++) {
                float g = dyr[j] * scale[j], xhat = (xr[j] - mean) * rstd;
                a += g;
                b += (double)g * xhat;
            }
            float mean_g = (float)(a / (double)d), mean_gx = (float)(b / (double)d);
            for (int64_t j = 0; j < d; j++) {
                float g = dyr[j] * scale[j], xhat = (xr[j] - mean) * rstd;
                dxr[j] = rstd * (g - mean_g - xhat * mean_gx);
            }
        }
    }
}

/* (dy, x, stats) -> dscale [D] = sum over rows of dy xhat; dy and x read
 * in their dtypes, element by element */
void dg__cpu_layer_norm_backward_scale(const dg_step *s) {
    const dg_node *xn = s->node->in[1];
    dg_dtype tg = s->node->in[0]->dtype, tx = xn->dtype;
    int64_t d = row_len(xn), rows = dg_node_numel(xn) / d;
    const float *stats = s->in[2];
    float *dscale = s->out;
    int64_t blocks = (d + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t j0 = b * COL_BLOCK, nj = d - j0 < COL_BLOCK ? d - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            float mean = stats[r], rstd = stats[rows + r];
            for (int64_t j = 0; j < nj; j++)
                acc[j] += (double)dg__lp_ld(tg, s->in[0], r * d + j0 + j) *
                          ((dg__lp_ld(tx, s->in[1], r * d + j0 + j) - mean) * rstd);
        }
        for (int64_t j = 0; j < nj; j++) dscale[j0 + j] = (float)acc[j];
    }
}
