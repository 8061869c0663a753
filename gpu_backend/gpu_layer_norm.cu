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
 * fill the GPU and fit the scratch; one slice writes the result directly).
 *
 * x, scale, shift and y may be bf16 or f16 (all of one dtype; the stats,
 * dy and the gradients float32): the same kernels templated on the storage
 * type T (gpu_lowp.cuh), each element widened as it is loaded (four 16-bit
 * values an 8-byte load in registers), the statistics float32, y rounded
 * to nearest even as it is stored. */
#include "gpu_common.cuh"
#include "gpu_lowp.cuh"

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

template <int V, int G, typename T>
__global__ void __launch_bounds__(BLOCK) k_layer_norm_reg(const T *__restrict__ x, const T *__restrict__ scale,
                                                          const T *__restrict__ shift, T *__restrict__ y,
                                                          float *__restrict__ stats, long long rows, int d, float eps) {
    const int d4 = d / 4;
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const T *xr = x + r * d;
        float4 v[V];
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            v[i] = j < d4 ? ld4(xr, j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
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
        T *yr = y + r * d;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            if (j >= d4 || !live) continue;
            float4 g = ld4(scale, j), b = ld4(shift, j);
            st4(yr, j, make_float4((v[i].x - mean) * rstd * g.x + b.x, (v[i].y - mean) * rstd * g.y + b.y,
                                   (v[i].z - mean) * rstd * g.z + b.z, (v[i].w - mean) * rstd * g.w + b.w));
        }
        if (t == 0 && live) {
            stats[r] = mean;
            stats[rows + r] = rstd;
        }
    }
}

template <int V, int G, typename T>
__global__ void __launch_bounds__(BLOCK)
    k_layer_norm_backward_reg(const float *__restrict__ dy, const T *__restrict__ x, const T *__restrict__ scale,
                              const float *__restrict__ stats, float *__restrict__ dx, long long rows, int d) {
    const int d4 = d / 4;
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float *dyr = dy + r * d;
        const T *xr = x + r * d;
        const float mean = stats[r], rstd = stats[rows + r];
        float4 g[V], h[V]; /* dy scale, xhat */
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = t + G * i;
            if (j < d4) {
                float4 u = ld4(dyr, j), w = ld4(xr, j), sc = ld4(scale, j);
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

template <int G, typename T>
__global__ void __launch_bounds__(BLOCK) k_layer_norm(const T *__restrict__ x, const T *__restrict__ scale,
                                                      const T *__restrict__ shift, T *__restrict__ y,
                                                      float *__restrict__ stats, long long rows, long long d,
                                                      float eps) {
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const T *xr = x + r * d;
        float s = 0.0f, c = 0.0f, q = 0.0f;
        for (long long j = t; j < d; j += G) s += ld(xr, j);
        float m1 = group_sum<G>(s) / fd;
        for (long long j = t; j < d; j += G) {
            float e = ld(xr, j) - m1;
            c += e;
            q += e * e;
        }
        group_sum2<G>(c, q);
        float mean, rstd;
        row_stats(m1, c, q, fd, eps, mean, rstd);
        for (long long j = t; j < d && live; j += G)
            st(y, r * d + j, (ld(xr, j) - mean) * rstd * ld(scale, j) + ld(shift, j));
        if (t == 0 && live) {
            stats[r] = mean;
            stats[rows + r] = rstd;
        }
    }
}

template <int G, typename T>
__global__ void __launch_bounds__(BLOCK)
    k_layer_norm_backward(const float *__restrict__ dy, const T *__restrict__ x, const T *__restrict__ scale,
                          const float *__restrict__ stats, float *__restrict__ dx, long long rows, long long d) {
    const float fd = (float)d;
    FOR_EACH_ROW_OF(G, rows) {
        ROW_OF(rows);
        const float *dyr = dy + r * d;
        const T *xr = x + r * d;
        const float mean = stats[r], rstd = stats[rows + r];
        float a = 0.0f, b = 0.0f;
        for (long long j = t; j < d; j += G) {
            float g = dyr[j] * ld(scale, j);
            a += g;
            b += g * ((ld(xr, j) - mean) * rstd);
        }
        group_sum2<G>(a, b);
        float ma = a / fd, mb = b / fd;
        for (long long j = t; j < d && live; j += G)
            dx[r * d + j] = rstd * (dyr[j] * ld(scale, j) - ma - (ld(xr, j) - mean) * rstd * mb);
    }
}

/* ---- the scale gradient ---- */

/* out[s * d + j] = sum over the rows of slice s of dy xhat in column j:
 * blocks of STRIP columns x SLICE_ROWS warps, grid (strips, slices); each
 * warp reads STRIP consecutive floats of a row, the warps combined in order */
template <typename T>
__global__ void k_layer_norm_dscale_partial(const float *__restrict__ dy, const T *__restrict__ x,
                                            const float *__restrict__ stats, float *__restrict__ out, long long rows,
                                            long long d, long long slices) {
    __shared__ float acc_s[SLICE_ROWS][STRIP];
    long long j = blockIdx.x * (long long)STRIP + threadIdx.x;
    long long len = (rows + slices - 1) / slices, s = blockIdx.y;
    long long r0 = s * len, r1 = r0 + len < rows ? r0 + len : rows;
    float acc = 0.0f;
    if (j < d)
        for (long long r = r0 + threadIdx.y; r < r1; r += SLICE_ROWS)
            acc += dy[r * d + j] * ((ld(x, r * d + j) - stats[r]) * stats[rows + r]);
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

/* every base aligned to four of its elements (ld4, st4): 16 bytes for
 * float32, 8 for bf16 and f16 */
static bool aligned4(const void *a, size_t ea, const void *b, size_t eb, const void *c, size_t ec, const void *d,
                     size_t ed) {
    return !(((uintptr_t)a & (4 * ea - 1)) || ((uintptr_t)b & (4 * eb - 1)) || ((uintptr_t)c & (4 * ec - 1)) ||
             ((uintptr_t)d & (4 * ed - 1)));
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

/* x, scale, shift, y of storage type T */
template <typename T> static dg_status layer_norm_t(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    long long d = last_dim(nd), rows = dg_node_numel(nd) / d;
    /* a plan always gives the side output storage; this guards a step made
     * without one */
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (layer_norm): the step gives no storage for its side "
                        "output (the row statistics)", nd->name);
    float eps = dg_attr_norm_of(nd).eps;
    const T *x = (const T *)s->in[0], *scale = (const T *)s->in[1], *shift = (const T *)s->in[2];
    T *y = (T *)s->out;
    float *stats = (float *)s->side[0];
    const size_t e = sizeof(T);
    ln_plan p = ln_plan_of(d, aligned4(x, e, scale, e, shift, e, y, e));
    if (p.v) LN_LAUNCH(k_layer_norm_reg, p, rows, x, scale, shift, y, stats, rows, (int)d, eps);
    else LN_LAUNCH_LOOPS(k_layer_norm, p, rows, x, scale, shift, y, stats, rows, d, eps);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_layer_norm(gpu_ctx *c, const dg_step *s) {
    switch (s->node->dtype) { /* x's, scale's, shift's and y's (graph.c) */
    case DG_BF16: return layer_norm_t<__nv_bfloat16>(c, s);
    case DG_F16:  return layer_norm_t<__half>(c, s);
    case DG_F32:  return layer_norm_t<float>(c, s);
    case DG_I32:  break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s of %s", s->node->name, dg_dtype_name(s->node->dtype));
}

/* x and scale of storage type T; dy, stats and dx float32 */
template <typename T> static dg_status layer_norm_backward_t(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    long long d = last_dim(nd), rows = dg_node_numel(nd) / d;
    const float *dy = (const float *)s->in[0], *stats = (const float *)s->in[3];
    const T *x = (const T *)s->in[1], *scale = (const T *)s->in[2];
    float *dx = (float *)s->out;
    ln_plan p = ln_plan_of(d, aligned4(dy, sizeof(float), x, sizeof(T), scale, sizeof(T), dx, sizeof(float)));
    if (p.v) LN_LAUNCH(k_layer_norm_backward_reg, p, rows, dy, x, scale, stats, dx, rows, (int)d);
    else LN_LAUNCH_LOOPS(k_layer_norm_backward, p, rows, dy, x, scale, stats, dx, rows, d);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* the dtypes of (dy, x, scale) a backward node of the layer norm reads:
 * dy float32, x and scale (the forward's inputs) of one of the three */
static dg_status refuse_backward(const dg_step *s) {
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s: dy %s, x %s (dy f32; x and scale of one dtype)", s->node->name,
                    dg_dtype_name(s->node->in[0]->dtype), dg_dtype_name(s->node->in[1]->dtype));
}

dg_status dg__gpu_layer_norm_backward(gpu_ctx *c, const dg_step *s) {
    dg_dtype tx = s->node->in[1]->dtype;
    if (s->node->in[0]->dtype != DG_F32 || s->node->in[2]->dtype != tx) return refuse_backward(s);
    if (tx == DG_BF16) return layer_norm_backward_t<__nv_bfloat16>(c, s);
    if (tx == DG_F16) return layer_norm_backward_t<__half>(c, s);
    if (tx == DG_F32) return layer_norm_backward_t<float>(c, s);
    return refuse_backward(s);
}

static long long clampll(long long v, long long lo, long long hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Slices of rows: enough blocks to fill the GPU, at least 64 rows each, as
 * many partial rows as fit the scratch (one slice, written straight to
 * dscale, needs none) */
template <typename T> static dg_status layer_norm_backward_scale_t(gpu_ctx *c, const dg_step *s) {
    const dg_node *xn = s->node->in[1];
    long long d = last_dim(xn), rows = dg_node_numel(xn) / d;
    const float *dy = (const float *)s->in[0], *stats = (const float *)s->in[2];
    const T *x = (const T *)s->in[1];
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

/* x of storage type T; dy, stats and dscale float32 */
dg_status dg__gpu_layer_norm_backward_scale(gpu_ctx *c, const dg_step *s) {
    dg_dtype tx = s->node->in[1]->dtype;
    if (s->node->in[0]->dtype != DG_F32) return refuse_backward(s);
    if (tx == DG_BF16) return layer_norm_backward_scale_t<__nv_bfloat16>(c, s);
    if (tx == DG_F16) return layer_norm_backward_scale_t<__half>(c, s);
    if (tx == DG_F32) return layer_norm_backward_scale_t<float>(c, s);
    return refuse_backward(s);
}
