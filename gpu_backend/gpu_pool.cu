/* gpu_pool.cu: max and average pooling over NCHW planes and their backward
 * ops (cpu_pool.c's counterpart), geometry from core/layout.h
 * (dg_conv_dims_of; the pools' channels map one to one, o = c). A thread
 * per output element in the forward; the backward gathers, a thread per
 * input element summing what the windows that hold it send it: no
 * atomics, so results are deterministic.
 *   max_pool2d (x) -> y, side output argmax (int32 h*W + w of each max)
 *   max_pool2d_backward (dy, argmax) -> dx
 *   avg_pool2d (x) -> y: the taps inside x over kh*kw (padding counts)
 *   avg_pool2d_backward (dy) -> dx */
#include <limits.h>

#include "gpu_common.cuh"

#define BLOCK 256

/* Every kernel loops over the taps inside x alone (taps_inside,
 * taps_reaching), clamped whatever the node's attributes say. */

/* The maximum of the window's taps inside x (the pools' padding is at most
 * half the window, so every window has one; one without gives 0 and
 * argmax -1, which the backward skips). Ties keep the first tap in
 * (ki, kj) order; a NaN replaces any number, so the first NaN wins. */
__global__ void k_max_pool(const float *__restrict__ x, float *__restrict__ y, int *__restrict__ argmax,
                           dg_conv_dims d) {
    GRID_STRIDE(i, d.n * d.c * d.cols) {
        long long ox = i % d.ow, oy = i / d.ow % d.oh, plane = i / d.cols;
        const float *xp = x + plane * d.h * d.w;
        float best = 0.0f;
        long long at = -1;
        long long y0 = oy * d.sh - d.ph, x0 = ox * d.sw - d.pw;
        tap_range ry = taps_inside(y0, d.dh, d.kh, d.h), rx = taps_inside(x0, d.dw, d.kw, d.w);
        for (long long ki = ry.k0; ki < ry.k1; ki++) {
            long long iy = y0 + ki * d.dh;
            for (long long kj = rx.k0; kj < rx.k1; kj++) {
                long long ix = x0 + kj * d.dw;
                float v = xp[iy * d.w + ix];
                if (at < 0 || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    at = iy * d.w + ix;
                }
            }
        }
        y[i] = best;
        argmax[i] = (int)at;
    }
}

/* dx[plane][p] = the sum of dy over the windows holding p whose argmax is
 * p; a block row of one plane: blockIdx.x the plane, the positions p
 * along blockIdx.y. I: int where the plane's positions and the windows'
 * extents fit one (int_math_fits: a 64-bit division costs several times
 * a 32-bit one, and this kernel divides a dozen times a value), else long
 * long. */
template <class I>
__global__ void k_max_pool_backward(const float *__restrict__ dy, const int *__restrict__ argmax,
                                    float *__restrict__ dx, dg_conv_dims d) {
    const I w = (I)d.w, hw = (I)(d.h * d.w), oh = (I)d.oh, ow = (I)d.ow;
    long long plane = blockIdx.x;
    const float *dyp = dy + plane * d.cols;
    const int *amp = argmax + plane * d.cols;
    for (I p = (I)blockIdx.y * blockDim.x + threadIdx.x; p < hw; p += (I)gridDim.y * blockDim.x) {
        I iy = p / w, ix = p - iy * w;
        float acc = 0.0f;
        tap_range_of<I> ry = taps_reaching<I>(iy, (I)d.sh, (I)d.ph, (I)d.dh, (I)d.kh, oh);
        tap_range_of<I> rx = taps_reaching<I>(ix, (I)d.sw, (I)d.pw, (I)d.dw, (I)d.kw, ow);
        for (I ki = ry.k0; ki < ry.k1; ki++) {
            I oy = window_at<I>(iy, ki, (I)d.sh, (I)d.ph, (I)d.dh, oh);
            if (oy < 0) continue;
            for (I kj = rx.k0; kj < rx.k1; kj++) {
                I ox = window_at<I>(ix, kj, (I)d.sw, (I)d.pw, (I)d.dw, ow);
                I o = oy * ow + ox;
                if (ox >= 0 && amp[o] == p) acc += dyp[o];
            }
        }
        dx[plane * d.h * d.w + p] = acc;
    }
}

__global__ void k_avg_pool(const float *__restrict__ x, float *__restrict__ y, dg_conv_dims d) {
    float taps = (float)(d.kh * d.kw);
    GRID_STRIDE(i, d.n * d.c * d.cols) {
        long long ox = i % d.ow, oy = i / d.ow % d.oh, plane = i / d.cols;
        const float *xp = x + plane * d.h * d.w;
        float acc = 0.0f;
        long long y0 = oy * d.sh - d.ph, x0 = ox * d.sw - d.pw;
        tap_range ry = taps_inside(y0, d.dh, d.kh, d.h), rx = taps_inside(x0, d.dw, d.kw, d.w);
        for (long long ki = ry.k0; ki < ry.k1; ki++)
            for (long long kj = rx.k0; kj < rx.k1; kj++) acc += xp[(y0 + ki * d.dh) * d.w + x0 + kj * d.dw];
        y[i] = acc / taps;
    }
}

/* dx[plane][p] = the sum of dy / (kh*kw) over the windows holding p */
__global__ void k_avg_pool_backward(const float *__restrict__ dy, float *__restrict__ dx, dg_conv_dims d) {
    float taps = (float)(d.kh * d.kw);
    GRID_STRIDE(i, d.n * d.c * d.h * d.w) {
        long long ix = i % d.w, iy = i / d.w % d.h, base = i / (d.h * d.w) * d.cols;
        float acc = 0.0f;
        tap_range ry = taps_reaching<long long>(iy, d.sh, d.ph, d.dh, d.kh, d.oh);
        tap_range rx = taps_reaching<long long>(ix, d.sw, d.pw, d.dw, d.kw, d.ow);
        for (long long ki = ry.k0; ki < ry.k1; ki++) {
            long long oy = window_at<long long>(iy, ki, d.sh, d.ph, d.dh, d.oh);
            if (oy < 0) continue;
            for (long long kj = rx.k0; kj < rx.k1; kj++) {
                long long ox = window_at<long long>(ix, kj, d.sw, d.pw, d.dw, d.ow);
                if (ox >= 0) acc += dy[base + oy * d.ow + ox] / taps;
            }
        }
        dx[i] = acc;
    }
}

/* every h*W+w of the plane fits the int32 argmax */
static bool argmax_fits(const dg_node *n) {
    dg_conv_dims d = dg_conv_dims_of(n);
    return d.h * d.w <= INT_MAX;
}

static dg_status max_pool2d(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    /* guards for a step made without a plan (supports() declines such a
     * node; a plan gives every side output storage) */
    if (!argmax_fits(nd))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (max_pool2d): a %lldx%lld plane exceeds the int32 argmax",
                        nd->name, (long long)nd->in[0]->shape.d[2], (long long)nd->in[0]->shape.d[3]);
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (max_pool2d): the step gives no storage for its side "
                        "output (the argmax)", nd->name);
    dg_conv_dims d = dg_conv_dims_of(nd);
    k_max_pool<<<grid_for(dg_node_numel(nd), BLOCK), BLOCK, 0, c->stream>>>((const float *)s->in[0],
                                                                             (float *)s->out, (int *)s->side[0], d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* every position, window extent and product k_max_pool_backward forms in
 * its type fits an int with room to spare */
static bool int_math_fits(const dg_conv_dims &d) {
    const long long lim = 1LL << 30;
    return d.h * d.w < lim && d.oh * d.ow < lim && d.h + 2 * d.ph < lim && d.w + 2 * d.pw < lim &&
           d.kh * d.dh < lim && d.kw * d.dw < lim && d.oh * d.sh < lim && d.ow * d.sw < lim;
}

static dg_status max_pool2d_backward(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    long long planes = d.n * d.c, rows = (d.h * d.w + BLOCK - 1) / BLOCK;
    if (planes > INT_MAX)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (max_pool2d_backward): %lld planes, more than a grid "
                        "holds", s->node->name, planes);
    dim3 grid((unsigned)planes, (unsigned)(rows < 65535 ? rows : 65535));
    auto kern = int_math_fits(d) ? k_max_pool_backward<int> : k_max_pool_backward<long long>;
    kern<<<grid, BLOCK, 0, c->stream>>>((const float *)s->in[0], (const int *)s->in[1], (float *)s->out, d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static dg_status avg_pool2d(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    k_avg_pool<<<grid_for(dg_node_numel(s->node), BLOCK), BLOCK, 0, c->stream>>>((const float *)s->in[0],
                                                                                  (float *)s->out, d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static dg_status avg_pool2d_backward(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    k_avg_pool_backward<<<grid_for(dg_node_numel(s->node), BLOCK), BLOCK, 0, c->stream>>>((const float *)s->in[0],
                                                                                           (float *)s->out, d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* the family's entries (DG_OPS_POOL): gpu_backend.cu sends the family here */
bool dg__gpu_pool_fits(const dg_node *n) {
    switch (n->op) {
    case DG_OP_MAX_POOL2D: case DG_OP_MAX_POOL2D_BACKWARD: return argmax_fits(n);
    case DG_OP_AVG_POOL2D: case DG_OP_AVG_POOL2D_BACKWARD: return true;
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return false; /* not a pool */
}

dg_status dg__gpu_pool(gpu_ctx *c, const dg_step *s) {
    switch (s->node->op) {
    case DG_OP_MAX_POOL2D:          return max_pool2d(c, s);
    case DG_OP_MAX_POOL2D_BACKWARD: return max_pool2d_backward(c, s);
    case DG_OP_AVG_POOL2D:          return avg_pool2d(c, s);
    case DG_OP_AVG_POOL2D_BACKWARD: return avg_pool2d_backward(c, s);
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not a pool", dg_op_name(s->node->op));
}
