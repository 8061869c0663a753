/* cpu_pool.c: max and average pooling and their backward ops, the pool
 * family (DG_OPS_POOL) of the CPU dispatch, entered at dg__cpu_pool.
 *
 * x and dx [N,C,H,W], y and dy [N,C,OH,OW] (core/layout.h, dg_conv_dims):
 * a KH x KW window moved by the stride over x padded by ph rows and pw
 * columns on each side. Padding taps are never read: window_of clamps each
 * window to x, whatever the attributes say. The builder keeps the padding
 * at most half the window, so every window holds a tap of x; one that held
 * none (a node made otherwise) would give 0 and argmax -1, as on the GPU,
 * which the backward skips. Every
 * loop runs in parallel over the N*C planes, so the backward ops scatter
 * into their plane of dx with no atomics, and sum in a fixed order.
 *
 * max_pool2d also writes its side output argmax [N,C,OH,OW] (int32): the
 * index iy*W + ix of the tap taken in its plane of x, the first maximum in
 * (ki, kj) order, where a NaN beats a number (so NaN propagates).
 * avg_pool2d divides by KH*KW, padding included. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../core/layout.h"
#include "cpu_kernels.h"

/* The taps of x inside the window of output (oy, ox): rows [y0, y1),
 * columns [x0, x1). */
typedef struct window { int64_t y0, y1, x0, x1; } window;

static window window_of(const dg_conv_dims *d, int64_t oy, int64_t ox) {
    int64_t y0 = oy * d->sh - d->ph, x0 = ox * d->sw - d->pw;
    int64_t y1 = y0 + d->kh, x1 = x0 + d->kw;
    return (window){y0 < 0 ? 0 : y0, y1 > d->h ? d->h : y1, x0 < 0 ? 0 : x0, x1 > d->w ? d->w : x1};
}

/* The tap of window wd taken by the rules above (the first maximum in
 * (ki, kj) order, a NaN beating a number), for outputs at the border of a
 * padded x; *at gets its index, -1 for a window without taps. */
static float window_max(const dg_conv_dims *d, const float *xp, window wd, int64_t *at) {
    float best = 0.0f;
    *at = -1;
    for (int64_t iy = wd.y0; iy < wd.y1; iy++)
        for (int64_t ix = wd.x0; ix < wd.x1; ix++) {
            float v = xp[iy * d->w + ix];
            if (*at < 0 || v > best || (isnan(v) && !isnan(best))) {
                best = v;
                *at = iy * d->w + ix;
            }
        }
    return best;
}

#define OX_BLOCK 256 /* outputs of a row taken tap by tap together */

/* One tap of n windows sw apart, the first at r (index first in the
 * plane): each output takes it when it is greater than the held value,
 * or a NaN where the held value is not (selects, no branch). */
static inline void take_taps(const float *r, int64_t first, int64_t n, int64_t sw, float *restrict best,
                             int32_t *restrict at) {
    for (int64_t j = 0; j < n; j++) {
        float v = r[j * sw], b = best[j];
        int take = (v > b) | ((v != v) & (b == b));
        best[j] = take ? v : b;
        at[j] = take ? (int32_t)(first + j * sw) : at[j];
    }
}

/* Outputs ox0 .. ox0 + n - 1 of a row, whose windows lie inside x along
 * the row (no column clamped) and span rows y0 .. y1 - 1 (y0 < y1):
 * tap by tap over the block, a select per output instead of a branch, so
 * random data costs no mispredictions. The same rules as window_max: the
 * first tap seeds each output, a later one replaces it when greater, or
 * when it is a NaN and the held value is not. */
static void max_pool_block(const dg_conv_dims *d, const float *xp, int64_t y0, int64_t y1, int64_t ox0, int64_t n,
                           float *y, int32_t *argmax) {
    float best[OX_BLOCK];
    int32_t at[OX_BLOCK];
    const int64_t sw = d->sw, col0 = ox0 * sw - d->pw; /* the block's first window's first column */
    for (int64_t j = 0; j < n; j++) {
        best[j] = xp[y0 * d->w + col0 + j * sw];
        at[j] = (int32_t)(y0 * d->w + col0 + j * sw);
    }
    for (int64_t iy = y0; iy < y1; iy++)
        for (int64_t kj = iy == y0 ? 1 : 0; kj < d->kw; kj++) {
            const int64_t first = iy * d->w + col0 + kj;
            /* strides 1 and 2 (nearly every pool) as constants: loops
             * the compiler vectorizes */
            switch (sw) {
            case 1:  take_taps(xp + first, first, n, 1, best, at); break;
            case 2:  take_taps(xp + first, first, n, 2, best, at); break;
            default: take_taps(xp + first, first, n, sw, best, at); break;
            }
        }
    memcpy(y, best, (size_t)n * sizeof *y);
    memcpy(argmax, at, (size_t)n * sizeof *argmax);
}

static void max_pool2d(const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *x = s->in[0];
    float *y = s->out;
    int32_t *argmax = s->side[0];
    /* outputs [lo, hi) of a row have windows inside x along it; attributes
     * no builder makes (a stride or window under 1, a negative padding)
     * leave every output to window_max, which clamps whatever they say */
    int64_t lo = 0, hi = 0;
    if (d.sw >= 1 && d.kw >= 1 && d.pw >= 0 && d.w >= d.kw - d.pw) {
        lo = (d.pw + d.sw - 1) / d.sw;
        hi = (d.w + d.pw - d.kw) / d.sw + 1;
        if (hi > d.ow) hi = d.ow;
        if (hi < lo) hi = lo;
    }
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < d.n * d.c; plane++) {
        const float *xp = x + plane * d.h * d.w;
        for (int64_t oy = 0; oy < d.oh; oy++) {
            const int64_t row = plane * d.cols + oy * d.ow;
            window rows = window_of(&d, oy, 0);
            for (int64_t ox = 0; ox < d.ow; ox++) {
                if (ox >= lo && ox < hi && rows.y0 < rows.y1) {
                    int64_t n = hi - ox < OX_BLOCK ? hi - ox : OX_BLOCK;
                    max_pool_block(&d, xp, rows.y0, rows.y1, ox, n, y + row + ox, argmax + row + ox);
                    ox += n - 1;
                    continue;
                }
                int64_t at;
                y[row + ox] = window_max(&d, xp, window_of(&d, oy, ox), &at);
                argmax[row + ox] = (int32_t)at;
            }
        }
    }
}

/* dx[p] = the sum of dy over the windows whose argmax is p */
static void max_pool2d_backward(const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *dy = s->in[0];
    const int32_t *argmax = s->in[1];
    float *dx = s->out;
    int64_t hw = d.h * d.w;
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < d.n * d.c; plane++) {
        float *dxp = dx + plane * hw;
        memset(dxp, 0, (size_t)hw * sizeof(float));
        for (int64_t i = plane * d.cols; i < (plane + 1) * d.cols; i++) {
            int64_t at = argmax[i];
            if (at >= 0 && at < hw) dxp[at] += dy[i]; /* an index max_pool2d never writes stays outside */
        }
    }
}

static void avg_pool2d(const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *x = s->in[0];
    float *y = s->out;
    float taps = (float)(d.kh * d.kw);
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < d.n * d.c; plane++) {
        const float *xp = x + plane * d.h * d.w;
        for (int64_t oy = 0; oy < d.oh; oy++)
            for (int64_t ox = 0; ox < d.ow; ox++) {
                window wd = window_of(&d, oy, ox);
                float sum = 0.0f;
                for (int64_t iy = wd.y0; iy < wd.y1; iy++)
                    for (int64_t ix = wd.x0; ix < wd.x1; ix++) sum += xp[iy * d.w + ix];
                y[plane * d.cols + oy * d.ow + ox] = sum / taps;
            }
    }
}

/* each dy / (KH*KW) added to every tap of its window inside x */
static void avg_pool2d_backward(const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *dy = s->in[0];
    float *dx = s->out;
    float taps = (float)(d.kh * d.kw);
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < d.n * d.c; plane++) {
        float *dxp = dx + plane * d.h * d.w;
        memset(dxp, 0, (size_t)(d.h * d.w) * sizeof(float));
        for (int64_t oy = 0; oy < d.oh; oy++)
            for (int64_t ox = 0; ox < d.ow; ox++) {
                window wd = window_of(&d, oy, ox);
                float g = dy[plane * d.cols + oy * d.ow + ox] / taps;
                for (int64_t iy = wd.y0; iy < wd.y1; iy++)
                    for (int64_t ix = wd.x0; ix < wd.x1; ix++) dxp[iy * d.w + ix] += g;
            }
    }
}

void dg__cpu_pool(const dg_step *s) {
    switch (s->node->op) {
    case DG_OP_MAX_POOL2D:          max_pool2d(s); break;
    case DG_OP_MAX_POOL2D_BACKWARD: max_pool2d_backward(s); break;
    case DG_OP_AVG_POOL2D:          avg_pool2d(s); break;
    case DG_OP_AVG_POOL2D_BACKWARD: avg_pool2d_backward(s); break;
    /* not pools: cpu_compute sends only DG_OPS_POOL here */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}
