/* gpu_norm.cu: training-mode batch normalisation, its backward ops and the
 * running statistics update (cpu_norm.c's counterpart). x is [N,C,H,W] or
 * [N,C]; channel c's M = N*H*W values are x[n][c][p] for n < N, p < H*W.
 * A block per channel: its threads stride over the M values, then combine
 * through a fixed-order block sum (deterministic, no atomics). Statistics
 * in float, in two passes (the mean, then the mean squared deviation from
 * it), so a large mean does not cancel the variance.
 *   batch_norm (x, scale, shift) -> y, side output stats [2,C]: row 0 the
 *     mean, row 1 invstd = 1/sqrt(var + eps), var biased
 *   batch_norm_backward (dy, x, scale, stats) -> dx
 *     = scale invstd (dy - mean(dy) - xhat mean(dy xhat)), xhat = (x - mean) invstd
 *   batch_norm_backward_scale (dy, x, stats) -> [C]: sum of dy xhat
 *   batch_norm_running (running_mean, running_var, stats): in place,
 *     r = (1 - momentum) r + momentum batch value, the variance unbiased */
#include "gpu_common.cuh"

#define BLOCK 512
#define CHANNEL_BLOCKS (1LL << 20) /* at most; blocks stride over channels beyond */

/* n images of c channels of hw values each */
struct channels { long long n, c, hw; };

static channels channels_of(const dg_node *x) {
    channels g;
    g.n = x->shape.d[0];
    g.c = x->shape.d[1];
    g.hw = x->shape.ndim == 4 ? x->shape.d[2] * x->shape.d[3] : 1;
    return g;
}

/* offset of channel ch's value i (i < n*hw) */
__device__ __forceinline__ long long at(const channels &g, long long ch, long long i) {
    return (i / g.hw * g.c + ch) * g.hw + i % g.hw;
}

#define FOR_EACH_CHANNEL(g) for (long long ch = blockIdx.x; ch < (g).c; ch += gridDim.x)
#define FOR_EACH_VALUE(g) for (long long i = threadIdx.x; i < (g).n * (g).hw; i += blockDim.x)

/* the sum of v over the block, in every thread, in a fixed order; every
 * thread of the block must call it */
__device__ float block_sum(float v) {
    __shared__ float part[32];
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* the previous call's readers are done with part */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    return warp_sum(lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f);
}

__global__ void k_batch_norm(const float *__restrict__ x, const float *__restrict__ scale,
                             const float *__restrict__ shift, float *__restrict__ y, float *__restrict__ stats,
                             channels g, float eps) {
    float m = (float)(g.n * g.hw);
    FOR_EACH_CHANNEL(g) {
        float acc = 0.0f;
        FOR_EACH_VALUE(g) acc += x[at(g, ch, i)];
        float mean = block_sum(acc) / m;
        acc = 0.0f;
        FOR_EACH_VALUE(g) {
            float dev = x[at(g, ch, i)] - mean;
            acc += dev * dev;
        }
        float invstd = 1.0f / sqrtf(block_sum(acc) / m + eps);
        if (threadIdx.x == 0) {
            stats[ch] = mean;
            stats[g.c + ch] = invstd;
        }
        float k = scale[ch] * invstd, b = shift[ch];
        FOR_EACH_VALUE(g) {
            long long o = at(g, ch, i);
            y[o] = (x[o] - mean) * k + b;
        }
    }
}

__global__ void k_batch_norm_backward(const float *__restrict__ dy, const float *__restrict__ x,
                                      const float *__restrict__ scale, const float *__restrict__ stats,
                                      float *__restrict__ dx, channels g) {
    float m = (float)(g.n * g.hw);
    FOR_EACH_CHANNEL(g) {
        float mean = stats[ch], invstd = stats[g.c + ch];
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        FOR_EACH_VALUE(g) {
            long long o = at(g, ch, i);
            sum_dy += dy[o];
            sum_dy_xhat += dy[o] * (x[o] - mean) * invstd;
        }
        float mean_dy = block_sum(sum_dy) / m, mean_dy_xhat = block_sum(sum_dy_xhat) / m;
        float k = scale[ch] * invstd;
        FOR_EACH_VALUE(g) {
            long long o = at(g, ch, i);
            dx[o] = k * (dy[o] - mean_dy - (x[o] - mean) * invstd * mean_dy_xhat);
        }
    }
}

__global__ void k_batch_norm_backward_scale(const float *__restrict__ dy, const float *__restrict__ x,
                                            const float *__restrict__ stats, float *__restrict__ dscale, channels g) {
    FOR_EACH_CHANNEL(g) {
        float mean = stats[ch], invstd = stats[g.c + ch];
        float acc = 0.0f;
        FOR_EACH_VALUE(g) {
            long long o = at(g, ch, i);
            acc += dy[o] * (x[o] - mean) * invstd;
        }
        acc = block_sum(acc);
        if (threadIdx.x == 0) dscale[ch] = acc;
    }
}

/* var = 1/invstd^2 - eps, made unbiased by count/(count - 1) (unbias) */
__global__ void k_batch_norm_running(float *__restrict__ rm, float *__restrict__ rv, const float *__restrict__ stats,
                                     long long c, float momentum, float eps, float unbias) {
    GRID_STRIDE(ch, c) {
        float invstd = stats[c + ch];
        float var = 1.0f / (invstd * invstd) - eps;
        rm[ch] = (1.0f - momentum) * rm[ch] + momentum * stats[ch];
        rv[ch] = (1.0f - momentum) * rv[ch] + momentum * var * unbias;
    }
}

static unsigned channel_grid(const channels &g) {
    return (unsigned)(g.c < CHANNEL_BLOCKS ? g.c : CHANNEL_BLOCKS);
}

dg_status dg__gpu_batch_norm(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    /* guard for a step made without a plan, which gives side outputs storage */
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (batch_norm): the step gives no storage for its side "
                        "output (the statistics)", nd->name);
    channels g = channels_of(nd->in[0]);
    k_batch_norm<<<channel_grid(g), BLOCK, 0, c->stream>>>((const float *)s->in[0], (const float *)s->in[1],
                                                            (const float *)s->in[2], (float *)s->out,
                                                            (float *)s->side[0], g, dg_attr_norm_of(nd).eps);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_batch_norm_backward(gpu_ctx *c, const dg_step *s) {
    channels g = channels_of(s->node->in[1]);
    k_batch_norm_backward<<<channel_grid(g), BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const float *)s->in[1], (const float *)s->in[2], (const float *)s->in[3],
        (float *)s->out, g);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_batch_norm_backward_scale(gpu_ctx *c, const dg_step *s) {
    channels g = channels_of(s->node->in[1]);
    k_batch_norm_backward_scale<<<channel_grid(g), BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const float *)s->in[1], (const float *)s->in[2], (float *)s->out, g);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_batch_norm_running(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    /* both running statistics are written in place (the op table's
     * `writes` mask): a plan hands them writable; this guards a step made
     * without one */
    if (!s->inout[0] || !s->inout[1])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (batch_norm_running): the step gives no writable pointer "
                        "for the running %s", nd->name, !s->inout[0] ? "mean" : "variance");
    dg_attr_norm a = dg_attr_norm_of(nd);
    long long ch = nd->in[0]->shape.d[0];
    float unbias = a.count > 1 ? (float)((double)a.count / (double)(a.count - 1)) : 1.0f;
    k_batch_norm_running<<<grid_for(ch, 256), 256, 0, c->stream>>>((float *)s->inout[0], (float *)s->inout[1],
                                                                   (const float *)s->in[2], ch, a.momentum, a.eps,
                                                                   unbias);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
