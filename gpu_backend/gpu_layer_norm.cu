/* gpu_layer_norm.cu: layer normalisation and its backward ops
 * (cpu_layer_norm.c's counterpart). x [..., D] is read as rows [R, D].
 *   layer_norm (x, scale, shift) -> y = scale (x - mean) rstd + shift,
 *     rstd = 1/sqrt(var + eps), var biased; side output stats [2, R]: row 0
 *     the means, row 1 the rstd
 *   layer_norm_backward (dy, x, scale, stats) -> dx
 *     = rstd (g - mean(g) - xhat mean(g xhat)), g = dy scale, xhat = (x - mean) rstd
 *   layer_norm_backward_scale (dy, x, stats) -> dscale [D] = sum over rows of dy xhat
 *
 * A group of threads owns a row: 16 for D <= 64, a warp for D <= 1024, a
 * block of 8 warps beyond. Rows of D % 4 == 0 with 16-byte aligned tensors
 * (D <= 8192) are held in registers, each thread V float4 of them: the row
 * is read once, and its statistics are group reductions over registers:
 * the mean, then over the deviations from it their sum (which corrects the
 * mean for its rounding) and their sum of squares (corrected two-pass: no
 * cancellation). y is written from the same registers. Other rows take the
 * same steps as loops over memory (the later passes hit the cache). Sums in
 * float, combined in a fixed order: deterministic, no atomics.
 *
 * The scale gradient is a column sum: blocks of 32 columns x 8 warps, each
 * block summing one slice of the rows into the backend's scratch, then one
 * thread per column adds the slices in order (the slices are as many as
 * fill the GPU and fit the scratch; one slice writes the result directly). */
#include "gpu_common.cuh"

#define BLOCK 256           /* threads: 8 warps                              */
#define MAX_V 8             /* float4 a thread holds                         */
#define STRIP 32            /* columns of a block of the scale gradient      */
#define SLICE_ROWS 8        /* warps of a block of the scale gradient        */

/* the rows of groups of G threads (16, 32 or the block of BLOCK): t the
 * thread's index in its row's group. Groups smaller than a warp must meet
 * in its shuffles, so the loop runs over the rows padded to whole warps;
 * ROW_OF then gives r, the row (a group past the end repeats the last one),
 * and live, whether it is the group's own (only then does it write). */
#define FOR_EACH_ROW_OF(G, rows)                                                                   \
    const int t = threadIdx.x % (G);                                                               \
    const long long groups_ = (long long)gridDim.x * (blockDim.x / (G));                           \
    const long long padded_ = (G) < 32 ? ((rows) + 32 / (G) - 1) / (32 / (G)) * (32 / (G)) : (rows); \
    for (long long rp_ = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / (G); rp_ < padded_; rp_ += groups_)

#define ROW_OF(rows)                  \
    const bool live = rp_ < (rows);   \
    const long long r = live ? rp_ : (rows) - 1

/* the sums of a and b over a group of G threads, in every thread of it, in
 * a fixed order; every thread of the group must call it (G > 32: the group
 * is the block) */
template <int G>
__device__ __forceinline__ void group_sum2(float &a, float &b) {
#pragma unroll
    for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if (G <= 32) return;
    constexpr int W = G / 32 > 0 ? G / 32 : 1;
    __shared__ float part[2][W];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* the previous call's readers are done with part */
    if (lane == 0) {
        part[0][warp] = a;
        part[1][warp] = b;
    }
    __syncthreads();
    a = 0.0f;
    b = 0.0f;
#pragma unroll
    for (int w = 0; w < W; w++) {
        a += part[0][w];
        b += part[1][w];
    }
}

template <int G>
__device__ __forceinline__ float group_sum(float a) {
    float b = 0.0f;
    group_sum2<G>(a, b);
    return a;
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float dot4(float4 a, float4 b) { return (a.x * b.x + a.y * b.y) + (a.z * b.z + a.w * b.w); }

/* The row's statistics from the sum s of its d values (pass 1) and, over
 * the deviations e = x - s/d, their sum c and sum of squares q (pass 2):
 * the mean corrected by c/d (the rounding of pass 1 undone) and the
 * variance q/d - (c/d)^2 (corrected two-pass) */
__device__ __forceinline__ void row_stats(float m1, float c, float q, float fd, float eps, float &mean,
                                          float &rstd) {
    float mc = c / fd;
    mean = m1 + mc;
    rstd = 1.0f / sqrtf(fmaxf(q / fd - mc * mc, 0.0f) + eps);
}

/* ---- rows in registers: v[i] is float4 number t + G i of the row ---- */

template <int V, int G>
__global__ void __launch_bounds__(BLOCK) k_layer_norm_reg(const float *__restrict__ x, const float *__restrict__ scale,
                                                          const float *__restrict__ shift, float *__restrict__ y,
                                                          float *__restrict__ stats, long long rows, int d, float eps) {
    const int d4 = d / 4;
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float4 *xr = (const float4 *)(x + r * d);
        float4 v[V];
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            v[i] = j < d4 ? __ldg(xr + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            s += sum4(v[i]);
        }
        float m1 = group_sum<G>(s) / fd, c = 0.0f, q = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (t + G * i >= d4) continue;
            float4 e = make_float4(v[i].x - m1, v[i].y - m1, v[i].z - m1, v[i].w - m1);
            c += sum4(e);
            q += dot4(e, e);
        }
        group_sum2<G>(c, q);
        float mean, rstd;
        row_stats(m1, c, q, fd, eps, mean, rstd);
        float4 *yr = (float4 *)(y + r * d);
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            if (j >= d4 || !live) continue;
            float4 g = __ldg((const float4 *)scale + j), b = __ldg((const float4 *)shift + j);
            yr[j] = make_float4((v[i].x - mean) * rstd * g.x + b.x, (v[i].y - mean) * rstd * g.y + b.y,
                                (v[i].z - mean) * rstd * g.z + b.z, (v[i].w - mean) * rstd * g.w + b.w);
        }
        if (t == 0 && live) {
            stats[r] = mean;
            stats[rows + r] = rstd;
        }
    }
}

template <int V, int G>
__global__ void __launch_bounds__(BLOCK)
    k_layer_norm_backward_reg(const float *__restrict__ dy, const float *__restrict__ x,
                              const float *__restrict__ scale, const float *__restrict__ stats,
                              float *__restrict__ dx, long long rows, int d) {
    const int d4 = d / 4;
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float4 *dyr = (const float4 *)(dy + r * d), *xr = (const float4 *)(x + r * d);
        const float mean = stats[r], rstd = stats[rows + r];
        float4 g[V], h[V]; /* dy scale, xhat */
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            if (j < d4) {
                float4 u = __ldg(dyr + j), w = __ldg(xr + j), sc = __ldg((const float4 *)scale + j);
                g[i] = make_float4(u.x * sc.x, u.y * sc.y, u.z * sc.z, u.w * sc.w);
                h[i] = make_float4((w.x - mean) * rstd, (w.y - mean) * rstd, (w.z - mean) * rstd, (w.w - mean) * rstd);
            } else {
                g[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                h[i] = g[i];
            }
            a += sum4(g[i]);
            b += dot4(g[i], h[i]);
        }
        group_sum2<G>(a, b);
        float ma = a / fd, mb = b / fd;
        float4 *dxr = (float4 *)(dx + r * d);
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            if (j >= d4 || !live) continue;
            dxr[j] = make_float4(rstd * (g[i].x - ma - h[i].x * mb), rstd * (g[i].y - ma - h[i].y * mb),
                                 rstd * (g[i].z - ma - h[i].z * mb), rstd * (g[i].w - ma - h[i].w * mb));
        }
    }
}

/* ---- any row: loops over memory ---- */

template <int G>
__global__ void __launch_bounds__(BLOCK) k_layer_norm(const float *__restrict__ x, const float *__restrict__ scale,
                                                      const float *__restrict__ shift, float *__restrict__ y,
                                                      float *__restrict__ stats, long long rows, long long d,
                                                      float eps) {
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float *xr = x + r * d;
        float s = 0.0f, c = 0.0f, q = 0.0f;
        for (long long j = t; j < d; j += G) s += xr[j];
        float m1 = group_sum<G>(s) / fd;
        for (long long j = t; j < d; j += G) {
            float e = xr[j] - m1;
            c += e;
            q += e * e;
        }
        group_sum2<G>(c, q);
        float mean, rstd;
        row_stats(m1, c, q, fd, eps, mean, rstd);
        for (long long j = t; j < d && live; j += G) y[r * d + j] = (xr[j] - mean) * rstd * scale[j] + shift[j];
        if (t == 0 && live) {
            stats[r] = mean;
            stats[rows + r] = rstd;
        }
    }
}

template <int G>
__global__ void __launch_bounds__(BLOCK)
    k_layer_norm_backward(const float *__restrict__ dy, const float *__restrict__ x, const float *__restrict__ scale,
                          const float *__restrict__ stats, float *__restrict__ dx, long long rows, long long d) {
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float *dyr = dy + r * d, *xr = x + r * d;
        const float mean = stats[r], rstd = stats[rows + r];
        float a = 0.0f, b = 0.0f;
        for (long long j = t; j < d; j += G) {
            float g = dyr[j] * scale[j];
            a += g;
            b += g * ((xr[j] - mean) * rstd);
        }
        group_sum2<G>(a, b);
        float ma = a / fd, mb = b / fd;
        for (long long j = t; j < d && live; j += G)
            dx[r * d + j] = rstd * (dyr[j] * scale[j] - ma - (xr[j] - mean) * rstd * mb);
    }
}

/* ---- the scale gradient ---- */

/* out[s * d + j] = sum over the rows of slice s of dy xhat in column j:
 * blocks of STRIP columns x SLICE_ROWS warps, grid (strips, slices); each
 * warp reads STRIP consecutive floats of a row, the warps combined in order */
__global__ void k_layer_norm_dscale_partial(const float *__restrict__ dy, const float *__restrict__ x,
                                            const float *__restrict__ stats, float *__restrict__ out, long long rows,
                                            long long d, long long slices) {
    __shared__ float acc_s[SLICE_ROWS][STRIP];
    long long j = blockIdx.x * (long long)STRIP + threadIdx.x;
    long long len = (rows + slices - 1) / slices, s = blockIdx.y;
    long long r0 = s * len, r1 = r0 + len < rows ? r0 + len : rows;
    float acc = 0.0f;
    if (j < d)
        for (long long r = r0 + threadIdx.y; r < r1; r += SLICE_ROWS)
            acc += dy[r * d + j] * ((x[r * d + j] - stats[r]) * stats[rows + r]);
    acc_s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < d) {
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < SLICE_ROWS; k++) sum += acc_s[k][threadIdx.x];
        out[s * d + j] = sum;
    }
}

/* y[j] = sum_s part[s * d + j], in order of s */
__global__ void k_layer_norm_dscale_sum(const float *__restrict__ part, float *__restrict__ y, long long d,
                                        long long slices) {
    GRID_STRIDE(j, d) {
        float sum = 0.0f;
        for (long long s = 0; s < slices; s++) sum += part[s * d + j];
        y[j] = sum;
    }
}

/* ---- launchers ---- */

static long long last_dim(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }

static bool aligned16(const void *a, const void *b, const void *c, const void *d) {
    return !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15);
}

/* How rows of d floats are laid out over threads: groups of g threads a
 * row (16 for d <= 64, a warp for d <= 1024, the block beyond), v float4 a
 * thread in registers (1, 2, 4 or 8), or v = 0 for the loops over memory */
struct ln_plan { int g, v; };

static ln_plan ln_plan_of(long long d, bool aligned) {
    ln_plan p;
    p.g = d <= 64 ? 16 : d <= 128 * MAX_V ? 32 : BLOCK;
    p.v = 0;
    if (aligned && d % 4 == 0 && d <= 4LL * MAX_V * p.g) {
        p.v = 1;
        while (4LL * p.g * p.v < d) p.v *= 2;
    }
    return p;
}

static unsigned ln_grid(long long rows, int g) { return grid_for(rows, BLOCK / g); }

/* launch KERNEL<V, G> for the plan's v and g */
#define LN_LAUNCH(KERNEL, p, rows, ...)                                                                           \
    do {                                                                                                          \
        unsigned grid_ = ln_grid(rows, (p).g);                                                                    \
        if ((p).g == 16) KERNEL<1, 16><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                              \
        else if ((p).g == 32) {                                                                                   \
            if ((p).v == 1) KERNEL<1, 32><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                            \
            else if ((p).v == 2) KERNEL<2, 32><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                       \
            else if ((p).v == 4) KERNEL<4, 32><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                       \
            else KERNEL<8, 32><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                                       \
        } else {                                                                                                  \
            if ((p).v <= 2) KERNEL<2, BLOCK><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                         \
            else if ((p).v == 4) KERNEL<4, BLOCK><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                    \
            else KERNEL<8, BLOCK><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                                    \
        }                                                                                                         \
    } while (0)

/* launch KERNEL<G> (the loops over memory) for the plan's g */
#define LN_LAUNCH_LOOPS(KERNEL, p, rows, ...)                                                                     \
    do {                                                                                                          \
        unsigned grid_ = ln_grid(rows, (p).g);                                                                    \
        if ((p).g == 16) KERNEL<16><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                                 \
        else if ((p).g == 32) KERNEL<32><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                            \
        else KERNEL<BLOCK><<<grid_, BLOCK, 0, c->stream>>>(__VA_ARGS__);                                          \
    } while (0)

static dg_status layer_norm_f32(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    long long d = last_dim(nd), rows = dg_node_numel(nd) / d;
    /* a plan always gives the side output storage; this guards a step made
     * without one */
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (layer_norm): the step gives no storage for its side "
                        "output (the row statistics)", nd->name);
    float eps = dg_attr_norm_of(nd).eps;
    const float *x = (const float *)s->in[0], *scale = (const float *)s->in[1], *shift = (const float *)s->in[2];
    float *y = (float *)s->out, *stats = (float *)s->side[0];
    ln_plan p = ln_plan_of(d, aligned16(x, scale, shift, y));
    if (p.v) LN_LAUNCH(k_layer_norm_reg, p, rows, x, scale, shift, y, stats, rows, (int)d, eps);
    else LN_LAUNCH_LOOPS(k_layer_norm, p, rows, x, scale, shift, y, stats, rows, d, eps);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* bf16 or f16 storage: the float32 kernels on widened copies (gpu_cast.cu) */
dg_status dg__gpu_layer_norm(gpu_ctx *c, const dg_step *s) {
    return dg__gpu_widens(s->node) ? dg__gpu_widened(c, s, layer_norm_f32) : layer_norm_f32(c, s);
}

static dg_status layer_norm_backward_f32(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    long long d = last_dim(nd), rows = dg_node_numel(nd) / d;
    const float *dy = (const float *)s->in[0], *x = (const float *)s->in[1], *scale = (const float *)s->in[2],
                *stats = (const float *)s->in[3];
    float *dx = (float *)s->out;
    ln_plan p = ln_plan_of(d, aligned16(dy, x, scale, dx));
    if (p.v) LN_LAUNCH(k_layer_norm_backward_reg, p, rows, dy, x, scale, stats, dx, rows, (int)d);
    else LN_LAUNCH_LOOPS(k_layer_norm_backward, p, rows, dy, x, scale, stats, dx, rows, d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* bf16 or f16 storage: the float32 kernels on widened copies (gpu_cast.cu) */
dg_status dg__gpu_layer_norm_backward(gpu_ctx *c, const dg_step *s) {
    return dg__gpu_widens(s->node) ? dg__gpu_widened(c, s, layer_norm_backward_f32) : layer_norm_backward_f32(c, s);
}

static long long clampll(long long v, long long lo, long long hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Slices of rows: enough blocks to fill the GPU, at least 64 rows each, as
 * many partial rows as fit the scratch (one slice, written straight to
 * dscale, needs none) */
static dg_status layer_norm_backward_scale_f32(gpu_ctx *c, const dg_step *s) {
    const dg_node *xn = s->node->in[1];
    long long d = last_dim(xn), rows = dg_node_numel(xn) / d;
    const float *dy = (const float *)s->in[0], *x = (const float *)s->in[1], *stats = (const float *)s->in[2];
    float *dscale = (float *)s->out;
    long long strips = (d + STRIP - 1) / STRIP;
    long long slices = clampll(8LL * c->prop.multiProcessorCount / strips, 1, (rows + 63) / 64);
    slices = clampll(slices, 1, 65535);
    while (slices > 1 && (!c->scratch || slices * d > (long long)c->scratch_floats)) slices /= 2;
    dim3 block(STRIP, SLICE_ROWS), grid((unsigned)strips, (unsigned)slices);
    k_layer_norm_dscale_partial<<<grid, block, 0, c->stream>>>(dy, x, stats, slices > 1 ? c->scratch : dscale, rows,
                                                               d, slices);
    DG_CUDA_CHECK_LAUNCH();
    if (slices > 1) {
        k_layer_norm_dscale_sum<<<grid_for(d, 256), 256, 0, c->stream>>>(c->scratch, dscale, d, slices);
        DG_CUDA_CHECK_LAUNCH();
    }
    return DG_OK;
}

/* bf16 or f16 storage: the float32 kernels on widened copies (gpu_cast.cu) */
dg_status dg__gpu_layer_norm_backward_scale(gpu_ctx *c, const dg_step *s) {
    return dg__gpu_widens(s->node) ? dg__gpu_widened(c, s, layer_norm_backward_scale_f32)
                                   : layer_norm_backward_scale_f32(c, s);
}
