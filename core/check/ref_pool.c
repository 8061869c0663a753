/* ref_pool.c: the pools in float64, every piece of the family in one file:
 * the forward ops and their side outputs (ref_eval), the backward ops
 * (ref_eval), and the vector-Jacobian products of the forward ops
 * (case_ref_own_grad), each written from its definition. ref.c and
 * ref_grad.c send the family here (DG_OPS_POOL), so a new pool is added
 * here alone. Planes are NCHW, row-major: N*C planes of H*W, y's of OH*OW;
 * output (oy, ox) reads tap (ki, kj) at row oy*sh - ph + ki, column
 * ox*sw - pw + kj (the pools are dense: no dilation, no groups). */
#include "ref.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../attrs.h"

typedef struct pool_window {
    int64_t planes, H, W, OH, OW; /* planes: N*C */
    int64_t kh, kw, sh, sw, ph, pw;
} pool_window;

static pool_window window_of(const dg_node *n, dg_shape x, dg_shape y) {
    const dg_attr_conv a = dg_attr_conv_of(n);
    return (pool_window){x.d[0] * x.d[1], x.d[2], x.d[3], y.d[2], y.d[3],
                         a.kernel[0], a.kernel[1], a.stride[0], a.stride[1], a.pad[0], a.pad[1]};
}

/* The maximum of window (oy, ox) over one plane of x among its taps inside
 * the plane (padding taps are ignored), and its index iy*W + ix in *arg.
 * A tap is taken when it is larger than the best so far, so a tie keeps
 * the first in (ki, kj) order, or when it is NaN and the best is not, so
 * the first NaN wins and propagates. */
static double window_max(const pool_window *k, const double *plane, int64_t oy, int64_t ox, int64_t *arg) {
    double best = 0;
    *arg = -1;
    for (int64_t ki = 0; ki < k->kh; ki++)
        for (int64_t kj = 0; kj < k->kw; kj++) {
            int64_t iy = oy * k->sh - k->ph + ki, ix = ox * k->sw - k->pw + kj;
            if (iy < 0 || iy >= k->H || ix < 0 || ix >= k->W) continue;
            double v = plane[iy * k->W + ix];
            if (*arg < 0 || v > best || (isnan(v) && !isnan(best))) {
                best = v;
                *arg = iy * k->W + ix;
            }
        }
    return best;
}

/* max_pool2d's output (argmax NULL) or its side output, the argmax (y NULL) */
static void max_pool2d(const pool_window *k, const double *x, double *y, double *argmax) {
#pragma omp parallel for collapse(2)
    for (int64_t p = 0; p < k->planes; p++)
        for (int64_t oy = 0; oy < k->OH; oy++)
            for (int64_t ox = 0; ox < k->OW; ox++) {
                int64_t arg, i = (p * k->OH + oy) * k->OW + ox;
                double v = window_max(k, x + p * k->H * k->W, oy, ox, &arg);
                if (y) y[i] = v;
                if (argmax) argmax[i] = (double)arg;
            }
}

/* dx[n,c,q] = sum of dy[n,c,oy,ox] over the windows whose argmax is q */
static void max_pool2d_backward(const pool_window *k, const double *dy, const double *argmax, double *dx) {
    memset(dx, 0, (size_t)(k->planes * k->H * k->W) * sizeof *dx);
#pragma omp parallel for
    for (int64_t p = 0; p < k->planes; p++)
        for (int64_t j = 0; j < k->OH * k->OW; j++)
            dx[p * k->H * k->W + (int64_t)argmax[p * k->OH * k->OW + j]] += dy[p * k->OH * k->OW + j];
}

/* avg_pool2d: y = (sum of the window's taps inside x) / (kh*kw), padding
 * counting in the divisor. Its backward adds dy / (kh*kw) to every tap of
 * the window inside x. */
static void avg_pool2d(const pool_window *k, const double *x, double *y) {
#pragma omp parallel for collapse(2)
    for (int64_t p = 0; p < k->planes; p++)
        for (int64_t oy = 0; oy < k->OH; oy++)
            for (int64_t ox = 0; ox < k->OW; ox++) {
                double acc = 0;
                for (int64_t ki = 0; ki < k->kh; ki++)
                    for (int64_t kj = 0; kj < k->kw; kj++) {
                        int64_t iy = oy * k->sh - k->ph + ki, ix = ox * k->sw - k->pw + kj;
                        if (iy >= 0 && iy < k->H && ix >= 0 && ix < k->W) acc += x[(p * k->H + iy) * k->W + ix];
                    }
                y[(p * k->OH + oy) * k->OW + ox] = acc / (double)(k->kh * k->kw);
            }
}

static void avg_pool2d_backward(const pool_window *k, const double *dy, double *dx) {
    memset(dx, 0, (size_t)(k->planes * k->H * k->W) * sizeof *dx);
#pragma omp parallel for
    for (int64_t p = 0; p < k->planes; p++)
        for (int64_t oy = 0; oy < k->OH; oy++)
            for (int64_t ox = 0; ox < k->OW; ox++)
                for (int64_t ki = 0; ki < k->kh; ki++)
                    for (int64_t kj = 0; kj < k->kw; kj++) {
                        int64_t iy = oy * k->sh - k->ph + ki, ix = ox * k->sw - k->pw + kj;
                        if (iy >= 0 && iy < k->H && ix >= 0 && ix < k->W)
                            dx[(p * k->H + iy) * k->W + ix] += dy[(p * k->OH + oy) * k->OW + ox] /
                                                               (double)(k->kh * k->kw);
                    }
}

dg_status ref_pool_eval(const dg_node *n, double **vals) {
    double *y = vals[n->id];
    const double *a = vals[n->in[0]->id], *b = n->n_in > 1 ? vals[n->in[1]->id] : NULL;
    switch (n->op) {
    case DG_OP_MAX_POOL2D: case DG_OP_AVG_POOL2D: { /* (x) -> y */
        pool_window k = window_of(n, n->in[0]->shape, n->shape);
        if (n->op == DG_OP_MAX_POOL2D) max_pool2d(&k, a, y, NULL);
        else avg_pool2d(&k, a, y);
        return DG_OK;
    }
    case DG_OP_MAX_POOL2D_BACKWARD: { /* (dy, argmax) -> dx */
        pool_window k = window_of(n, n->shape, n->in[0]->shape);
        max_pool2d_backward(&k, a, b, y);
        return DG_OK;
    }
    case DG_OP_AVG_POOL2D_BACKWARD: { /* (dy) -> dx */
        pool_window k = window_of(n, n->shape, n->in[0]->shape);
        avg_pool2d_backward(&k, a, y);
        return DG_OK;
    }
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return DG_ERR_UNSUPPORTED; /* not a pool */
}

dg_status ref_pool_side(const dg_node *side, double **vals, double *y) {
    const dg_node *owner = side->in[0];
    switch (owner->op) {
    case DG_OP_MAX_POOL2D: { /* the argmax, from x again (never from the owner's result) */
        pool_window k = window_of(owner, owner->in[0]->shape, owner->shape);
        max_pool2d(&k, vals[owner->in[0]->id], NULL, y);
        return DG_OK;
    }
    /* no side outputs */
    case DG_OP_AVG_POOL2D: case DG_OP_MAX_POOL2D_BACKWARD: case DG_OP_AVG_POOL2D_BACKWARD:
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return DG_ERR_UNSUPPORTED;
}

/* plane by plane:
 *   max: y = x at the window's largest tap inside x (the first of equals),
 *        a selection, so dx there += g and nowhere else;
 *   avg: y = (sum of the window's taps inside x) / (KH*KW), so each of
 *        those taps gets g / (KH*KW).
 * The maximum is found here again from x, not read from the argmax. */
static void vjp_pool2d(const dg_node *y, const double *g, const double *x, double *dx) {
    const pool_window k = window_of(y, y->in[0]->shape, y->shape);
    const bool max = y->op == DG_OP_MAX_POOL2D;
#pragma omp parallel for
    for (int64_t p = 0; p < k.planes; p++) {
        const double *xp = x + p * k.H * k.W;
        double *dxp = dx + p * k.H * k.W;
        for (int64_t oy = 0; oy < k.OH; oy++)
            for (int64_t ox = 0; ox < k.OW; ox++) {
                const double gy = g[(p * k.OH + oy) * k.OW + ox];
                int64_t best = -1;
                for (int64_t ki = 0; ki < k.kh; ki++)
                    for (int64_t kj = 0; kj < k.kw; kj++) {
                        const int64_t iy = oy * k.sh - k.ph + ki, ix = ox * k.sw - k.pw + kj;
                        if (iy < 0 || iy >= k.H || ix < 0 || ix >= k.W) continue;
                        const int64_t i = iy * k.W + ix;
                        if (!max) dxp[i] += gy / (double)(k.kh * k.kw);
                        else if (best < 0 || xp[i] > xp[best]) best = i;
                    }
                if (max) dxp[best] += gy;
            }
    }
}

dg_status ref_pool_vjp(const dg_node *y, double *const *val, double *const *adj) {
    switch (y->op) {
    case DG_OP_MAX_POOL2D: case DG_OP_AVG_POOL2D:
        vjp_pool2d(y, adj[y->id], val[y->in[0]->id], adj[y->in[0]->id]);
        return DG_OK;
    /* backward ops: never on a path from an input to a case's loss */
    case DG_OP_MAX_POOL2D_BACKWARD: case DG_OP_AVG_POOL2D_BACKWARD:
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return DG_ERR_UNSUPPORTED;
}
