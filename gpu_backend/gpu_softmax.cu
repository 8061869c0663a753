/* gpu_softmax.cu: row-wise softmax, log-softmax, softmax cross-entropy and
 * their backward ops (cpu_softmax.c's counterpart). A row is the last axis;
 * a warp owns a row.
 *
 * Rows of c <= 1024 floats with c % 4 == 0 and 16-byte aligned starts (the
 * common case) are held in registers: each lane loads V float4 (c <= 128 V,
 * V = 1, 2, 4 or 8), the row is read from memory once, its max and its sum
 * of exponentials are two warp reductions over registers, and the outputs
 * are written from the same registers. Other rows take two passes: one
 * keeps a running max and a rescaled running sum (online softmax), the
 * second writes.
 *
 * softmax, log_softmax and their backward ops carry dg_attr_softmax: y =
 * softmax(scale x) and, when causal, row i of each [R, C] matrix keeps only
 * its columns j <= i (R the second-last axis); the masked columns are not
 * read, cost no exponential and come out 0 (log_softmax -inf), their
 * gradient 0. Scale 1 without the mask takes the plain register kernels
 * unchanged; the others take their _ex forms (or the two-pass kernels,
 * which take the scale and the mask as arguments).
 *
 * Softmax cross-entropy writes one loss per row into the backend's scratch
 * buffer, then one block sums them in a fixed order: deterministic without
 * atomics, and every row's work spread over the whole GPU. It also saves
 * each row's log-sum-exp (its side output), so its backward reads it
 * instead of reducing the row again.
 *
 * Labels outside [0, c) are refused before they reach these kernels, by
 * dg_plan_set on the host (core/plan.c), which names the first: a flag
 * raised here would need a read back, a synchronisation, after every run
 * (and every replay of a captured graph), where the host check is one pass
 * over ints the caller hands in. Should one arrive otherwise (a gather on
 * the device), the kernels still read only inside the row and make the
 * loss NaN.
 *
 * softmax and log_softmax take bf16 and f16 too (the input's dtype in and
 * out; their backward ops read y in it, dy and dx float32): the same
 * kernels templated on the storage type, each element widened as it is
 * loaded (four 16-bit values an 8-byte load in the register kernels) and
 * rounded to nearest even as it is stored, every statistic in float32. */
#include "gpu_common.cuh"
#include "gpu_lowp.cuh"

#define WARPS_PER_BLOCK 8
#define MAX_V 8 /* float4 a lane holds: rows up to 32 * 4 * MAX_V = 1024 floats */

/* combine (max, sum) pairs across the warp */
__device__ __forceinline__ void warp_max_sum(float &m, float &s) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mx = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mx));
        m = mx;
    }
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* log-sum-exp of scale * xr[j] over the row's first n columns, computed by
 * the whole warp */
template <typename T>
__device__ __forceinline__ float row_lse_n(const T *xr, long long n, float scale, int lane) {
    float m = -INFINITY, s = 0.0f;
    for (long long j = lane; j < n; j += 32) {
        float v = scale * ld(xr, j);
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
        else s += __expf(v - m);
    }
    warp_max_sum(m, s);
    return m + logf(s);
}

/* log-sum-exp of a row, computed by the whole warp */
__device__ __forceinline__ float row_lse(const float *xr, long long c, int lane) { return row_lse_n(xr, c, 1.0f, lane); }

/* columns of flat row r that the causal mask keeps (all c when r_per is 0:
 * no mask); r_per: rows of one [R, C] matrix */
__device__ __forceinline__ long long row_keep(long long r, long long c, long long r_per) {
    if (!r_per) return c;
    long long i = r % r_per + 1;
    return i < c ? i : c;
}

#define FOR_EACH_ROW(rows)                                                                      \
    int lane = threadIdx.x & 31;                                                                \
    long long warps = (long long)gridDim.x * (blockDim.x / 32);                                 \
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < (rows); r += warps)

/* ---- rows in registers: v[i] is float4 number lane + 32 i of the row ---- */

/* the row's float4 lane + 32 i for i < V, `fill` past its c4 float4 (of
 * a float32, bf16 or f16 row: gpu_lowp.cuh's ld4 and st4) */
template <int V, typename T>
__device__ __forceinline__ void load_row(float4 (&v)[V], const T *__restrict__ xr, int c4, int lane, float fill) {
#pragma unroll
    for (int i = 0; i < V; i++) {
        int j = lane + 32 * i;
        v[i] = j < c4 ? ld4(xr, j) : make_float4(fill, fill, fill, fill);
    }
}

template <int V, typename T>
__device__ __forceinline__ void store_row(T *__restrict__ yr, const float4 (&v)[V], int c4, int lane) {
#pragma unroll
    for (int i = 0; i < V; i++) {
        int j = lane + 32 * i;
        if (j < c4) st4(yr, j, v[i]);
    }
}

/* log-sum-exp of a row held in registers (the padding is -inf); SKIP: the
 * float4s from n4 on are wholly masked and cost no exponential */
template <int V, bool SKIP = false>
__device__ __forceinline__ float reg_lse(const float4 (&v)[V], int lane = 0, int n4 = 0) {
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < V; i++) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < V; i++)
        if (!SKIP || lane + 32 * i < n4)
            s += (__expf(v[i].x - m) + __expf(v[i].y - m)) + (__expf(v[i].z - m) + __expf(v[i].w - m));
    return m + logf(warp_sum(s));
}

template <int V, typename T>
__global__ void k_softmax_reg(const T *__restrict__ x, T *__restrict__ y, long long rows, int c, bool log_out) {
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        float4 v[V];
        load_row(v, x + r * c, c4, lane, -INFINITY);
        float lse = reg_lse(v);
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (log_out) v[i] = make_float4(v[i].x - lse, v[i].y - lse, v[i].z - lse, v[i].w - lse);
            else v[i] = make_float4(__expf(v[i].x - lse), __expf(v[i].y - lse), __expf(v[i].z - lse),
                                    __expf(v[i].w - lse));
        }
        store_row(y + r * c, v, c4, lane);
    }
}

/* dx = y (dy - <dy, y>) (softmax) or dy - exp(y) sum(dy) (log-softmax) */
template <int V, typename T>
__global__ void k_softmax_backward_reg(const float *__restrict__ dy, const T *__restrict__ y,
                                       float *__restrict__ dx, long long rows, int c, bool log_out) {
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        float4 g[V], p[V];
        load_row(g, dy + r * c, c4, lane, 0.0f);
        load_row(p, y + r * c, c4, lane, 0.0f);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++)
            dot += log_out ? (g[i].x + g[i].y) + (g[i].z + g[i].w)
                           : (g[i].x * p[i].x + g[i].y * p[i].y) + (g[i].z * p[i].z + g[i].w * p[i].w);
        dot = warp_sum(dot);
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (log_out) g[i] = make_float4(g[i].x - __expf(p[i].x) * dot, g[i].y - __expf(p[i].y) * dot,
                                            g[i].z - __expf(p[i].z) * dot, g[i].w - __expf(p[i].w) * dot);
            else g[i] = make_float4(p[i].x * (g[i].x - dot), p[i].y * (g[i].y - dot), p[i].z * (g[i].z - dot),
                                    p[i].w * (g[i].w - dot));
        }
        store_row(dx + r * c, g, c4, lane);
    }
}

/* v's components at columns j0, j0+1, j0+2, j0+3 where < n, fill elsewhere */
__device__ __forceinline__ float4 keep4(float4 v, int j0, int n, float fill) {
    return make_float4(j0 < n ? v.x : fill, j0 + 1 < n ? v.y : fill, j0 + 2 < n ? v.z : fill,
                       j0 + 3 < n ? v.w : fill);
}

/* k_softmax_reg with a scale and (CAUSAL) the mask, r_per the rows of one
 * matrix: the row's first n columns are kept; float4 wholly past them are
 * neither read nor exponentiated */
template <int V, bool CAUSAL, typename T>
__global__ void k_softmax_reg_ex(const T *__restrict__ x, T *__restrict__ y, long long rows, int c,
                                 bool log_out, float scale, long long r_per) {
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        int n = CAUSAL ? (int)row_keep(r, c, r_per) : c, n4 = CAUSAL ? (n + 3) / 4 : c4;
        float4 v[V];
        load_row(v, x + r * c, n4, lane, 0.0f);
#pragma unroll
        for (int i = 0; i < V; i++) { /* scaled, then -inf past the kept columns (and the row) */
            int j = lane + 32 * i;
            float4 z = make_float4(scale * v[i].x, scale * v[i].y, scale * v[i].z, scale * v[i].w);
            if (CAUSAL) v[i] = keep4(z, 4 * j, n, -INFINITY);
            else v[i] = j < c4 ? z : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        }
        float lse = reg_lse<V, CAUSAL>(v, lane, n4);
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (log_out) v[i] = make_float4(v[i].x - lse, v[i].y - lse, v[i].z - lse, v[i].w - lse);
            else if (!CAUSAL || lane + 32 * i < n4)
                v[i] = make_float4(__expf(v[i].x - lse), __expf(v[i].y - lse), __expf(v[i].z - lse),
                                   __expf(v[i].w - lse));
            else v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        store_row(y + r * c, v, c4, lane);
    }
}

/* 2^x, the hardware approximation __expf is built on */
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* k_softmax_reg for a scale > 0 without the mask, as cheap as scale 1: the
 * scale is folded into the exponent's multiply, exp(scale (x - m)) =
 * 2^(k x - k m), k = scale log2(e), m the row's max (scale > 0 keeps it the
 * max of scale x, and the -inf padding -inf) */
template <int V, typename T>
__global__ void k_softmax_reg_scaled(const T *__restrict__ x, T *__restrict__ y, long long rows, int c,
                                     bool log_out, float scale) {
    const int c4 = c / 4;
    const float k = scale * 1.44269504088896341f;
    FOR_EACH_ROW(rows) {
        float4 v[V];
        load_row(v, x + r * c, c4, lane, -INFINITY);
        float m = -INFINITY;
#pragma unroll
        for (int i = 0; i < V; i++) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
        float mk = warp_max(m) * k, s = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++)
            s += (ex2(fmaf(v[i].x, k, -mk)) + ex2(fmaf(v[i].y, k, -mk))) +
                 (ex2(fmaf(v[i].z, k, -mk)) + ex2(fmaf(v[i].w, k, -mk)));
        float b = mk + log2f(warp_sum(s)); /* log2 of the row's sum of exp(scale x) */
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (log_out) /* (k x - b) ln 2 = scale x - lse */
                v[i] = make_float4(fmaf(v[i].x, k, -b) * 0.69314718055994531f, fmaf(v[i].y, k, -b) * 0.69314718055994531f,
                                   fmaf(v[i].z, k, -b) * 0.69314718055994531f, fmaf(v[i].w, k, -b) * 0.69314718055994531f);
            else v[i] = make_float4(ex2(fmaf(v[i].x, k, -b)), ex2(fmaf(v[i].y, k, -b)), ex2(fmaf(v[i].z, k, -b)),
                                    ex2(fmaf(v[i].w, k, -b)));
        }
        store_row(y + r * c, v, c4, lane);
    }
}

/* k_softmax_backward_reg with the scale and the causal mask: dx = scale y
 * (dy - <dy, y>) or scale (dy - exp(y) sum(dy)), sums over the kept
 * columns, 0 at the masked ones */
template <int V, typename T>
__global__ void k_softmax_backward_reg_ex(const float *__restrict__ dy, const T *__restrict__ y,
                                          float *__restrict__ dx, long long rows, int c, bool log_out, float scale,
                                          long long r_per) {
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        int n = (int)row_keep(r, c, r_per), n4 = (n + 3) / 4;
        float4 g[V], p[V];
        load_row(g, dy + r * c, n4, lane, 0.0f);
        load_row(p, y + r * c, n4, lane, 0.0f);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j0 = 4 * (lane + 32 * i);
            g[i] = keep4(g[i], j0, n, 0.0f);
            p[i] = keep4(p[i], j0, n, 0.0f);
            dot += log_out ? (g[i].x + g[i].y) + (g[i].z + g[i].w)
                           : (g[i].x * p[i].x + g[i].y * p[i].y) + (g[i].z * p[i].z + g[i].w * p[i].w);
        }
        dot = warp_sum(dot);
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (lane + 32 * i >= n4) {
                g[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                continue;
            }
            if (log_out) g[i] = make_float4(g[i].x - __expf(p[i].x) * dot, g[i].y - __expf(p[i].y) * dot,
                                            g[i].z - __expf(p[i].z) * dot, g[i].w - __expf(p[i].w) * dot);
            else g[i] = make_float4(p[i].x * (g[i].x - dot), p[i].y * (g[i].y - dot), p[i].z * (g[i].z - dot),
                                    p[i].w * (g[i].w - dot));
            g[i] = keep4(make_float4(scale * g[i].x, scale * g[i].y, scale * g[i].z, scale * g[i].w),
                         4 * (lane + 32 * i), n, 0.0f);
        }
        store_row(dx + r * c, g, c4, lane);
    }
}

/* k_softmax_ce_rows for a row in registers (see there) */
template <int V>
__global__ void k_softmax_ce_rows_reg(const float *__restrict__ x, const int *__restrict__ label,
                                      float *__restrict__ row_loss, float *__restrict__ lse_out, long long rows,
                                      int c) {
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        float4 v[V];
        load_row(v, x + r * c, c4, lane, -INFINITY);
        float lse = reg_lse(v);
        if (lane == 0) {
            int l = label[r];
            lse_out[r] = lse;
            row_loss[r] = (l >= 0 && l < c) ? lse - x[r * c + l] : NAN;
        }
    }
}

/* k_softmax_ce_backward for rows of whole float4 (see there) */
template <int V>
__global__ void k_softmax_ce_backward_reg(const float *__restrict__ dloss, const float *__restrict__ x,
                                          const int *__restrict__ label, const float *__restrict__ lse_in,
                                          float *__restrict__ dx, long long rows, int c) {
    float g = dloss[0] / (float)rows;
    int c4 = c / 4;
    FOR_EACH_ROW(rows) {
        float4 v[V];
        load_row(v, x + r * c, c4, lane, 0.0f);
        float lse = lse_in[r];
        int l = label[r];
#pragma unroll
        for (int i = 0; i < V; i++) {
            int j = 4 * (lane + 32 * i);
            v[i] = make_float4((__expf(v[i].x - lse) - (j == l ? 1.0f : 0.0f)) * g,
                               (__expf(v[i].y - lse) - (j + 1 == l ? 1.0f : 0.0f)) * g,
                               (__expf(v[i].z - lse) - (j + 2 == l ? 1.0f : 0.0f)) * g,
                               (__expf(v[i].w - lse) - (j + 3 == l ? 1.0f : 0.0f)) * g);
        }
        if (lane == 0 && (l < 0 || l >= c)) v[0].x = NAN;
        store_row(dx + r * c, v, c4, lane);
    }
}

/* ---- any row: two passes ---- */

/* softmax(scale x) of each row's first n = row_keep columns, the masked
 * rest 0 (log_softmax: -inf) */
template <typename T>
__global__ void k_softmax(const T *__restrict__ x, T *__restrict__ y, long long rows, long long c, bool log_out,
                          float scale, long long r_per) {
    FOR_EACH_ROW(rows) {
        const T *xr = x + r * c;
        long long n = row_keep(r, c, r_per);
        float lse = row_lse_n(xr, n, scale, lane);
        for (long long j = lane; j < n; j += 32)
            st(y, r * c + j, log_out ? scale * ld(xr, j) - lse : __expf(scale * ld(xr, j) - lse));
        for (long long j = n + lane; j < c; j += 32) st(y, r * c + j, log_out ? -INFINITY : 0.0f);
    }
}

/* dx = scale y (dy - <dy, y>) or scale (dy - exp(y) sum(dy)) over each
 * row's kept columns, 0 at the masked ones */
template <typename T>
__global__ void k_softmax_backward(const float *__restrict__ dy, const T *__restrict__ y, float *__restrict__ dx,
                                   long long rows, long long c, bool log_out, float scale, long long r_per) {
    FOR_EACH_ROW(rows) {
        const float *dyr = dy + r * c;
        const T *yr = y + r * c;
        long long n = row_keep(r, c, r_per);
        float dot = 0.0f;
        for (long long j = lane; j < n; j += 32) dot += log_out ? dyr[j] : dyr[j] * ld(yr, j);
        dot = warp_sum(dot);
        for (long long j = lane; j < n; j += 32)
            dx[r * c + j] = scale * (log_out ? dyr[j] - __expf(ld(yr, j)) * dot : ld(yr, j) * (dyr[j] - dot));
        for (long long j = n + lane; j < c; j += 32) dx[r * c + j] = 0.0f;
    }
}

/* x [rows, c], label [rows]: lse_out[r] = logsumexp(x_r) and
 * row_loss[r] = lse_out[r] - x_r[label_r]; a label outside [0, c) gives a
 * NaN loss (its lse is still written). A warp per row. */
__global__ void k_softmax_ce_rows(const float *__restrict__ x, const int *__restrict__ label,
                                  float *__restrict__ row_loss, float *__restrict__ lse_out, long long rows,
                                  long long c) {
    FOR_EACH_ROW(rows) {
        float lse = row_lse(x + r * c, c, lane);
        int l = label[r];
        if (lane == 0) {
            lse_out[r] = lse;
            row_loss[r] = (l >= 0 && l < c) ? lse - x[r * c + l] : NAN;
        }
    }
}

/* dx[r, j] = (exp(x[r, j] - lse[r]) - (j == label[r])) * dloss / rows for
 * x, dx [rows, c], label and lse [rows] (lse saved by the forward); a label
 * outside [0, c) puts NaN in dx[r, 0]. A warp per row, one pass. */
__global__ void k_softmax_ce_backward(const float *__restrict__ dloss, const float *__restrict__ x,
                                      const int *__restrict__ label, const float *__restrict__ lse_in,
                                      float *__restrict__ dx, long long rows, long long c) {
    float g = dloss[0] / (float)rows;
    FOR_EACH_ROW(rows) {
        const float *xr = x + r * c;
        float lse = lse_in[r];
        int l = label[r];
        for (long long j = lane; j < c; j += 32)
            dx[r * c + j] = (__expf(xr[j] - lse) - (j == l ? 1.0f : 0.0f)) * g;
        if (lane == 0 && (l < 0 || l >= c)) dx[r * c] = NAN;
    }
}

/* loss[0] = mean of v[0..n) for a 16-byte aligned v: one block, a fixed
 * summation order; four float4 loads of each thread in flight at a time */
__global__ void k_mean_fixed(const float *__restrict__ v, float *__restrict__ loss, long long n) {
    __shared__ float part[32];
    float acc = 0.0f;
    long long n4 = n / 4;
#pragma unroll 4
    for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 t = __ldg((const float4 *)v + i);
        acc += (t.x + t.y) + (t.z + t.w);
    }
    for (long long i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) acc += v[i];
    acc = warp_sum(acc);
    int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        float t = lane < nwarps ? part[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) loss[0] = t / (float)n;
    }
}

static long long last_dim(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }
static unsigned row_grid(long long rows) { return grid_for(rows, WARPS_PER_BLOCK); }

/* float4 a lane holds for rows of c elements at the given bases, or 0
 * when such rows take the two-pass kernels (c % 4 != 0, c > 1024, a base
 * not aligned to four elements of its size: 16 bytes for float32, 8 for
 * bf16 and f16) */
static int reg_v(long long c, const void *p0, size_t e0, const void *p1, size_t e1, const void *p2, size_t e2) {
    if (c % 4 || c > 128 * MAX_V || ((uintptr_t)p0 & (4 * e0 - 1)) || ((uintptr_t)p1 & (4 * e1 - 1)) ||
        ((uintptr_t)p2 & (4 * e2 - 1)))
        return 0;
    int v = 1;
    while (128 * v < c) v *= 2;
    return v;
}

/* launch KERNEL<V> for the V of v (1, 2, 4 or 8) on the row grid */
#define LAUNCH_V(KERNEL, v, rows, ...)                                                                            \
    do {                                                                                                          \
        unsigned grid_ = row_grid(rows), block_ = 32 * WARPS_PER_BLOCK;                                           \
        if ((v) == 1) KERNEL<1><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                     \
        else if ((v) == 2) KERNEL<2><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                \
        else if ((v) == 4) KERNEL<4><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                \
        else KERNEL<8><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                              \
    } while (0)

/* the node's dg_attr_softmax: its scale, and for a causal mask the rows of
 * one matrix (the second-last axis, 1 for a 1-D tensor), else 0 */
static float softmax_scale(const dg_node *n, long long *r_per) {
    dg_attr_softmax a = dg_attr_softmax_of(n);
    *r_per = a.causal ? (n->shape.ndim >= 2 ? n->shape.d[n->shape.ndim - 2] : 1) : 0;
    return a.scale;
}

/* scale 1 without a mask takes the plain register kernels (tuned against
 * PyTorch), anything else their _ex forms or the two-pass kernels */
/* launch KERNEL<V, B> for the V of v and the flag B */
#define LAUNCH_V2(KERNEL, B, v, rows, ...)                                                                        \
    do {                                                                                                          \
        unsigned grid_ = row_grid(rows), block_ = 32 * WARPS_PER_BLOCK;                                           \
        if ((v) == 1) KERNEL<1, B><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                  \
        else if ((v) == 2) KERNEL<2, B><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                             \
        else if ((v) == 4) KERNEL<4, B><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                             \
        else KERNEL<8, B><<<grid_, block_, 0, c->stream>>>(__VA_ARGS__);                                           \
    } while (0)

/* x and y of storage type T (float, __nv_bfloat16, __half) */
template <typename T> static dg_status softmax_t(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols, r_per;
    float scale = softmax_scale(s->node, &r_per);
    const T *x = (const T *)s->in[0];
    T *y = (T *)s->out;
    bool log_out = s->node->op == DG_OP_LOG_SOFTMAX, plain = scale == 1.0f && !r_per;
    int v = reg_v(cols, x, sizeof(T), y, sizeof(T), y, sizeof(T));
    if (v && plain) LAUNCH_V(k_softmax_reg, v, rows, x, y, rows, (int)cols, log_out);
    else if (v && !r_per && scale > 0.0f && scale <= 1e30f)
        LAUNCH_V(k_softmax_reg_scaled, v, rows, x, y, rows, (int)cols, log_out, scale);
    else if (v && r_per) LAUNCH_V2(k_softmax_reg_ex, true, v, rows, x, y, rows, (int)cols, log_out, scale, r_per);
    else if (v) LAUNCH_V2(k_softmax_reg_ex, false, v, rows, x, y, rows, (int)cols, log_out, scale, r_per);
    else k_softmax<T><<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(x, y, rows, cols, log_out, scale, r_per);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_softmax(gpu_ctx *c, const dg_step *s) {
    switch (s->node->dtype) {
    case DG_BF16: return softmax_t<__nv_bfloat16>(c, s);
    case DG_F16:  return softmax_t<__half>(c, s);
    case DG_F32:  return softmax_t<float>(c, s);
    case DG_I32:  break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s of %s", s->node->name, dg_dtype_name(s->node->dtype));
}

/* y of storage type T; dy and dx float32 */
template <typename T> static dg_status softmax_backward_t(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols, r_per;
    float scale = softmax_scale(s->node, &r_per);
    const float *dy = (const float *)s->in[0];
    const T *y = (const T *)s->in[1];
    float *dx = (float *)s->out;
    bool log_out = s->node->op == DG_OP_LOG_SOFTMAX_BACKWARD, plain = scale == 1.0f && !r_per;
    int v = reg_v(cols, dy, sizeof(float), y, sizeof(T), dx, sizeof(float));
    if (v && plain) LAUNCH_V(k_softmax_backward_reg, v, rows, dy, y, dx, rows, (int)cols, log_out);
    else if (v) LAUNCH_V(k_softmax_backward_reg_ex, v, rows, dy, y, dx, rows, (int)cols, log_out, scale, r_per);
    else k_softmax_backward<T><<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(dy, y, dx, rows, cols, log_out,
                                                                                       scale, r_per);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_softmax_backward(gpu_ctx *c, const dg_step *s) {
    dg_dtype ty = s->node->in[1]->dtype;
    if (s->node->in[0]->dtype == DG_F32 && s->node->dtype == DG_F32) {
        if (ty == DG_BF16) return softmax_backward_t<__nv_bfloat16>(c, s);
        if (ty == DG_F16) return softmax_backward_t<__half>(c, s);
        if (ty == DG_F32) return softmax_backward_t<float>(c, s);
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s: dy %s, y %s, dx %s (dy and dx f32)", s->node->name,
                    dg_dtype_name(s->node->in[0]->dtype), dg_dtype_name(ty), dg_dtype_name(s->node->dtype));
}

/* the per-row losses go through the scratch, one float a row */
bool dg__gpu_softmax_ce_fits(const gpu_ctx *c, const dg_node *n) {
    const dg_node *logits = n->in[0];
    return dg_node_numel(logits) / last_dim(logits) <= (long long)c->scratch_floats;
}

/* (logits [rows, c], labels i32 [rows]) -> loss [1], side[0]: lse [rows] */
dg_status dg__gpu_softmax_ce(gpu_ctx *c, const dg_step *s) {
    const dg_node *logits = s->node->in[0];
    long long cols = last_dim(logits), rows = dg_node_numel(logits) / cols;
    /* guards for a step made without a plan: supports() declines such a
     * node, and a plan always gives a side output storage */
    if (!dg__gpu_softmax_ce_fits(c, s->node))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: softmax_cross_entropy over %lld rows exceeds the %zu-row scratch",
                        rows, c->scratch_floats);
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (softmax_cross_entropy): the step gives no storage for "
                        "its side output (the row log-sum-exp)", s->node->name);
    const float *x = (const float *)s->in[0];
    const int *label = (const int *)s->in[1];
    float *lse = (float *)s->side[0];
    int v = reg_v(cols, x, sizeof(float), x, sizeof(float), x, sizeof(float));
    if (v) LAUNCH_V(k_softmax_ce_rows_reg, v, rows, x, label, c->scratch, lse, rows, (int)cols);
    else k_softmax_ce_rows<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(x, label, c->scratch, lse, rows,
                                                                                   cols);
    DG_CUDA_CHECK_LAUNCH();
    k_mean_fixed<<<1, 1024, 0, c->stream>>>(c->scratch, (float *)s->out, rows);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* (dloss [1], logits [rows, c], labels i32 [rows], lse [rows]) -> dx [rows, c] */
dg_status dg__gpu_softmax_ce_backward(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols;
    const float *dloss = (const float *)s->in[0], *x = (const float *)s->in[1], *lse = (const float *)s->in[3];
    const int *label = (const int *)s->in[2];
    float *dx = (float *)s->out;
    int v = reg_v(cols, x, sizeof(float), dx, sizeof(float), dx, sizeof(float));
    if (v) LAUNCH_V(k_softmax_ce_backward_reg, v, rows, dloss, x, label, lse, dx, rows, (int)cols);
    else k_softmax_ce_backward<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(dloss, x, label, lse, dx, rows,
                                                                                       cols);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
