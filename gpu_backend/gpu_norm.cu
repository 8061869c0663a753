/* gpu_norm.cu: training-mode batch normalisation, its backward ops and the
 * running statistics update (cpu_norm.c's counterpart). x is [N,C,H,W] or
 * [N,C]; channel c's M = N*H*W values are x[n][c][p] for n < N, p < H*W.
 *   batch_norm (x, scale, shift) -> y, side output stats [2,C]: row 0 the
 *     mean, row 1 invstd = 1/sqrt(var + eps), var biased
 *   batch_norm_backward (dy, x, scale, stats) -> dx
 *     = scale invstd (dy - mean(dy) - xhat mean(dy xhat)), xhat = (x - mean) invstd
 *   batch_norm_backward_scale (dy, x, stats) -> [C]: sum of dy xhat
 *   batch_norm_running (running_mean, running_var, stats): in place,
 *     r = (1 - momentum) r + momentum batch value, the variance unbiased
 *
 * Work split: a channel's values are cut into P slices of whole image
 * planes (slice s: images s, s + P, ...), P chosen so that the C x P
 * blocks give every SM about four (slices_of): a block per channel left
 * most of the device idle where channels are few and planes large (the
 * stem's 64 channels of 112 x 112). A block reduces its slice into the
 * backend's scratch (2 floats a slice); a thread a channel merges its P
 * partials, always in slice order (the same result on every run: no
 * atomics); then an elementwise kernel writes y or dx, a block a plane
 * (no division a value) and 4 floats a thread where the planes allow.
 * Statistics in float, in two passes per slice (its mean, then the
 * squared deviations from it), the slices merged by Chan's pairwise
 * formula, so a large mean does not cancel the variance. */
#include <stdint.h>

#include "gpu_common.cuh"

#define BLOCK 256
#define MAX_SLICES 64

/* n images of c channels of hw values each */
struct channels { long long n, c, hw; };

static channels channels_of(const dg_node *x) {
    channels g;
    g.n = x->shape.d[0];
    g.c = x->shape.d[1];
    g.hw = x->shape.ndim == 4 ? x->shape.d[2] * x->shape.d[3] : 1;
    return g;
}

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

/* values in slice s of P: its planes (images s, s + P, ...) times hw */
__device__ __forceinline__ long long slice_count(const channels &g, int s, int P) {
    return (g.n - s + P - 1) / P * g.hw;
}

/* f(offset) for every value of channel ch in slice s of P, each once, the
 * block's threads splitting them: along the planes' rows where a plane
 * holds a block's worth, else over the slice as one run (a division a
 * value; such planes are small) */
template <class F>
__device__ __forceinline__ void for_slice(const channels &g, long long ch, int s, int P, F f) {
    if (g.hw >= (long long)blockDim.x) {
        for (long long n = s; n < g.n; n += P) {
            long long base = (n * g.c + ch) * g.hw;
            for (long long p = threadIdx.x; p < g.hw; p += blockDim.x) f(base + p);
        }
    } else {
        long long cnt = slice_count(g, s, P);
        for (long long j = threadIdx.x; j < cnt; j += blockDim.x) {
            long long n = s + j / g.hw * P;
            f((n * g.c + ch) * g.hw + j % g.hw);
        }
    }
}

/* part[ch][s] = (the slice's mean, its sum of squared deviations from it);
 * grid (C, P) */
__global__ void k_bn_stats_partial(const float *__restrict__ x, float2 *__restrict__ part, channels g, int P) {
    long long ch = blockIdx.x;
    int s = blockIdx.y;
    float acc = 0.0f;
    for_slice(g, ch, s, P, [&](long long o) { acc += x[o]; });
    float mean = block_sum(acc) / (float)slice_count(g, s, P);
    acc = 0.0f;
    for_slice(g, ch, s, P, [&](long long o) {
        float d = x[o] - mean;
        acc += d * d;
    });
    float m2 = block_sum(acc);
    if (threadIdx.x == 0) part[ch * P + s] = make_float2(mean, m2);
}

/* channel ch's mean and invstd from its P partials, merged in slice order:
 * (n_a, mean_a, m2_a) + (n_b, mean_b, m2_b) gives mean_a + d n_b / n and
 * m2_a + m2_b + d^2 n_a n_b / n, d = mean_b - mean_a; a thread a channel */
__global__ void k_bn_stats_merge(const float2 *__restrict__ part, float *__restrict__ stats, channels g, int P,
                                 float eps) {
    GRID_STRIDE(ch, g.c) {
        float na = 0.0f, ma = 0.0f, m2a = 0.0f;
        for (int s = 0; s < P; s++) {
            float2 b = part[ch * P + s];
            float nb = (float)slice_count(g, s, P), n = na + nb, d = b.x - ma;
            ma += d * (nb / n);
            m2a += b.y + d * d * (na * nb / n);
            na = n;
        }
        stats[ch] = ma;
        stats[g.c + ch] = 1.0f / sqrtf(m2a / na + eps);
    }
}

/* f(offset, channel) over every value of x, in one of two shapes: PLANES,
 * a block a plane (blockIdx.x = n C + ch) and blockIdx.y striding along
 * it, for planes of a block's worth or more; else one grid-stride run
 * over the tensor, the channel of each value by division: in 32 bits
 * under 2^31 values, where a thread's next index (at most 2^31 + 2^30:
 * grid_for's grid times BLOCK times 4) cannot wrap, else in 64. VEC: 4
 * values a call (hw a multiple of 4, the buffers 16-byte aligned). */
template <bool PLANES, bool VEC, class F>
__device__ __forceinline__ void for_values(const channels &g, F f) {
    constexpr int W = VEC ? 4 : 1;
    if (PLANES) {
        long long base = (long long)blockIdx.x * g.hw, ch = blockIdx.x % g.c;
        long long step = (long long)gridDim.y * blockDim.x * W;
        for (long long p = ((long long)blockIdx.y * blockDim.x + threadIdx.x) * W; p < g.hw; p += step)
            f(base + p, ch);
    } else if (g.n * g.c * g.hw < 0x80000000LL) {
        unsigned hw = (unsigned)g.hw, c = (unsigned)g.c, total = (unsigned)(g.n * g.c * g.hw);
        for (unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * W; i < total; i += gridDim.x * blockDim.x * W)
            f((long long)i, (long long)(i / hw % c));
    } else {
        GRID_STRIDE(q, g.n * g.c * g.hw / W) f(q * W, q * W / g.hw % g.c);
    }
}

/* y = (x - mean) scale invstd + shift, the channel's statistics from stats */
template <bool PLANES, bool VEC>
__global__ void k_bn_apply(const float *__restrict__ x, const float *__restrict__ scale,
                           const float *__restrict__ shift, const float *__restrict__ stats, float *__restrict__ y,
                           channels g) {
    for_values<PLANES, VEC>(g, [&](long long o, long long ch) {
        float mean = stats[ch], k = scale[ch] * stats[g.c + ch], b = shift[ch];
        if (VEC) {
            float4 v = *(const float4 *)(x + o);
            *(float4 *)(y + o) = make_float4((v.x - mean) * k + b, (v.y - mean) * k + b, (v.z - mean) * k + b,
                                             (v.w - mean) * k + b);
        } else {
            y[o] = (x[o] - mean) * k + b;
        }
    });
}

/* part[ch][s] = (the slice's sum of dy, its sum of dy xhat); grid (C, P) */
__global__ void k_bn_grad_partial(const float *__restrict__ dy, const float *__restrict__ x,
                                  const float *__restrict__ stats, float2 *__restrict__ part, channels g, int P) {
    long long ch = blockIdx.x;
    int s = blockIdx.y;
    float mean = stats[ch], invstd = stats[g.c + ch];
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for_slice(g, ch, s, P, [&](long long o) {
        sum_dy += dy[o];
        sum_dy_xhat += dy[o] * (x[o] - mean) * invstd;
    });
    sum_dy = block_sum(sum_dy);
    sum_dy_xhat = block_sum(sum_dy_xhat);
    if (threadIdx.x == 0) part[ch * P + s] = make_float2(sum_dy, sum_dy_xhat);
}

/* channel ch's sums of dy and dy xhat, its P partials added in slice
 * order: their means over m values into means[ch] (the backward's), or
 * the sum of dy xhat into dscale[ch] (the scale's gradient; means NULL);
 * a thread a channel */
__global__ void k_bn_grad_merge(const float2 *__restrict__ part, float2 *__restrict__ means,
                                float *__restrict__ dscale, long long c, int P, float m) {
    GRID_STRIDE(ch, c) {
        float2 t = make_float2(0.0f, 0.0f);
        for (int s = 0; s < P; s++) t.x += part[ch * P + s].x, t.y += part[ch * P + s].y;
        if (means) means[ch] = make_float2(t.x / m, t.y / m);
        else dscale[ch] = t.y;
    }
}

/* dx = scale invstd (dy - mean(dy) - xhat mean(dy xhat)), the means from k_bn_grad_merge */
template <bool PLANES, bool VEC>
__global__ void k_bn_backward_apply(const float *__restrict__ dy, const float *__restrict__ x,
                                    const float *__restrict__ scale, const float *__restrict__ stats,
                                    const float2 *__restrict__ means, float *__restrict__ dx, channels g) {
    for_values<PLANES, VEC>(g, [&](long long o, long long ch) {
        float mean = stats[ch], invstd = stats[g.c + ch], k = scale[ch] * invstd;
        float2 md = means[ch];
        if (VEC) {
            float4 d = *(const float4 *)(dy + o), v = *(const float4 *)(x + o);
            *(float4 *)(dx + o) = make_float4(k * (d.x - md.x - (v.x - mean) * invstd * md.y),
                                              k * (d.y - md.x - (v.y - mean) * invstd * md.y),
                                              k * (d.z - md.x - (v.z - mean) * invstd * md.y),
                                              k * (d.w - md.x - (v.w - mean) * invstd * md.y));
        } else {
            dx[o] = k * (dy[o] - md.x - (x[o] - mean) * invstd * md.y);
        }
    });
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

/* slices a channel: about 4 blocks an SM over all channels, at most one a
 * plane and MAX_SLICES, and the slices' partials (2 floats each) and the
 * merged sums (2 a channel) in the scratch; 0 where even one slice a
 * channel does not fit there */
static int slices_of(const gpu_ctx *c, const channels &g) {
    long long p = (4LL * c->prop.multiProcessorCount + g.c - 1) / g.c;
    p = p < g.n ? p : g.n;
    p = p < MAX_SLICES ? p : MAX_SLICES;
    while (p > 1 && 2 * (p + 1) * g.c > (long long)c->scratch_floats) p /= 2;
    return 2 * (p + 1) * g.c <= (long long)c->scratch_floats ? (int)p : 0;
}

/* x's channels fit the scratch's partials (one slice each at least): the
 * plan refuses a batch norm of more channels up front (gpu_supports) */
bool dg__gpu_batch_norm_fits(const gpu_ctx *c, const dg_node *n) {
    return slices_of(c, channels_of(n->op == DG_OP_BATCH_NORM ? n->in[0] : n->in[1])) > 0;
}

static dg_status no_room(const dg_node *nd, const channels &g, const gpu_ctx *c) {
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (%s): %lld channels need %lld floats of reduction scratch, "
                    "the backend has %zu", nd->name, dg_op_name(nd->op), g.c, 4 * g.c, c->scratch_floats);
}

/* The elementwise kernels' launch: a block of BLOCK threads a plane where
 * planes hold half a block's worth of calls or more (PLANES), else a
 * grid-stride run; VEC where
 * hw is a multiple of 4 and the buffers 16-byte aligned. */
template <template <bool, bool> class K, class... A>
static dg_status launch_values(gpu_ctx *c, const channels &g, bool aligned, A... args) {
    bool vec = g.hw % 4 == 0 && aligned;
    long long calls = vec ? g.hw / 4 : g.hw;
    if (calls >= BLOCK / 2 && g.n * g.c <= 0x7fffffffLL) {
        long long chunks = (calls + BLOCK - 1) / BLOCK;
        dim3 grid((unsigned)(g.n * g.c), (unsigned)(chunks < 65535 ? chunks : 65535));
        if (vec) K<true, true>::launch(grid, BLOCK, c->stream, args...);
        else K<true, false>::launch(grid, BLOCK, c->stream, args...);
    } else {
        unsigned grid = grid_for(g.n * g.c * calls, BLOCK);
        if (vec) K<false, true>::launch(grid, BLOCK, c->stream, args...);
        else K<false, false>::launch(grid, BLOCK, c->stream, args...);
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <bool PLANES, bool VEC> struct bn_apply {
    template <class... A> static void launch(dim3 grid, unsigned block, cudaStream_t st, A... a) {
        k_bn_apply<PLANES, VEC><<<grid, block, 0, st>>>(a...);
    }
};
template <bool PLANES, bool VEC> struct bn_backward_apply {
    template <class... A> static void launch(dim3 grid, unsigned block, cudaStream_t st, A... a) {
        k_bn_backward_apply<PLANES, VEC><<<grid, block, 0, st>>>(a...);
    }
};

static bool aligned16(const void *a, const void *b, const void *d) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)d) & 15) == 0;
}

dg_status dg__gpu_batch_norm(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    /* guard for a step made without a plan, which gives side outputs storage */
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (batch_norm): the step gives no storage for its side "
                        "output (the statistics)", nd->name);
    channels g = channels_of(nd->in[0]);
    int P = slices_of(c, g);
    if (!P) return no_room(nd, g, c);
    const float *x = (const float *)s->in[0];
    float *stats = (float *)s->side[0];
    float2 *part = (float2 *)c->scratch;
    k_bn_stats_partial<<<dim3((unsigned)g.c, (unsigned)P), BLOCK, 0, c->stream>>>(x, part, g, P);
    DG_CUDA_CHECK_LAUNCH();
    k_bn_stats_merge<<<grid_for(g.c, 256), 256, 0, c->stream>>>(part, stats, g, P, dg_attr_norm_of(nd).eps);
    DG_CUDA_CHECK_LAUNCH();
    return launch_values<bn_apply>(c, g, aligned16(x, x, s->out), x, (const float *)s->in[1],
                                   (const float *)s->in[2], (const float *)stats, (float *)s->out, g);
}

/* the partial sums of dy and dy xhat of s's (dy, x, ..., stats), merged
 * into means (in the scratch after the partials; *means is set) or into
 * dscale */
static dg_status grad_sums(gpu_ctx *c, const dg_step *s, const float *stats, channels *g, float2 **means,
                           float *dscale) {
    *g = channels_of(s->node->in[1]);
    int P = slices_of(c, *g);
    if (!P) return no_room(s->node, *g, c);
    float2 *part = (float2 *)c->scratch;
    k_bn_grad_partial<<<dim3((unsigned)g->c, (unsigned)P), BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const float *)s->in[1], stats, part, *g, P);
    DG_CUDA_CHECK_LAUNCH();
    if (means) *means = part + (long long)P * g->c;
    k_bn_grad_merge<<<grid_for(g->c, 256), 256, 0, c->stream>>>(part, means ? *means : NULL, dscale, g->c, P,
                                                                (float)(g->n * g->hw));
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_batch_norm_backward(gpu_ctx *c, const dg_step *s) {
    const float *dy = (const float *)s->in[0], *x = (const float *)s->in[1], *stats = (const float *)s->in[3];
    channels g;
    float2 *means;
    dg_status st = grad_sums(c, s, stats, &g, &means, NULL);
    if (st != DG_OK) return st;
    return launch_values<bn_backward_apply>(c, g, aligned16(dy, x, s->out), dy, x, (const float *)s->in[2], stats,
                                            (const float2 *)means, (float *)s->out, g);
}

dg_status dg__gpu_batch_norm_backward_scale(gpu_ctx *c, const dg_step *s) {
    channels g;
    return grad_sums(c, s, (const float *)s->in[2], &g, NULL, (float *)s->out);
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
