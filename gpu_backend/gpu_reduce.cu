/* gpu_reduce.cu: sum and mean over axes. Deterministic (no atomic adds of values): the
 * same input gives bit-identical output on every run, so a replayed CUDA
 * graph can be compared exactly with plain runs. Work that one block per
 * output cannot spread over the GPU is done in two passes through the
 * backend's fixed scratch buffer: partial sums, then a fixed-order sum of
 * the partials.
 *   suffix axes (row sums), many rows: a warp per row, float4 loads;
 *   suffix axes, few long rows: (row, chunk) partials, then per-row sums;
 *   prefix axes (column sums, e.g. a bias gradient): (column strip, row
 *     slice) partials, and in the same launch the last block of each
 *     strip to finish sums the strip's partials (one pass: a second
 *     launch of one thread a column was a fifth of the char-LM's 16-bit
 *     bias sums, docs/PERF.md);
 *   any other mask: a thread per output element.
 * bf16 and f16: the same kernels templated on the storage types of x and
 * y (gpu_lowp.cuh), each element widened as it is read (16-bit rows a lane
 * an element, not float4), the sums and partials in float32, the result
 * rounded to nearest even as it is stored; y is x's dtype, or float32 for
 * a 16-bit x (dg_sum_ex: a bias copy's gradient). */
#include "../core/layout.h"
#include "gpu_common.cuh"
#include "gpu_lowp.cuh"

#define STRIP 32    /* columns per block in column sums: one warp wide     */
#define SLICE_ROWS 8 /* warps per block in column sums                      */

/* sum of x[lo, hi) by one warp, float4 where the start is aligned */
__device__ __forceinline__ float warp_range_sum(const float *__restrict__ x, long long lo, long long hi, int lane) {
    float acc = 0.0f;
    long long a = lo;
    while (a < hi && ((uintptr_t)(x + a) & 15)) { /* align to 16 bytes */
        if (lane == 0) acc += x[a];
        a++;
    }
    long long n4 = (hi - a) / 4;
    const float4 *x4 = (const float4 *)(x + a);
    for (long long j = lane; j < n4; j += 32) {
        float4 v = x4[j];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (long long j = a + 4 * n4 + lane; j < hi; j += 32) acc += x[j];
    return warp_sum(acc);
}

/* the same of a bf16 or f16 range, an element a lane */
template <typename T>
__device__ __forceinline__ float warp_range_sum(const T *__restrict__ x, long long lo, long long hi, int lane) {
    float acc = 0.0f;
    for (long long j = lo + lane; j < hi; j += 32) acc += ld(x, j);
    return warp_sum(acc);
}

/* y[r] = scale * sum of row r: a warp per row */
template <typename TX, typename TY>
__global__ void k_rows_warp(const TX *__restrict__ x, TY *__restrict__ y, long long rows, long long w, float scale) {
    long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    long long warps = (long long)gridDim.x * blockDim.x / 32;
    int lane = threadIdx.x & 31;
    for (long long r = warp; r < rows; r += warps) {
        float acc = warp_range_sum(x, r * w, (r + 1) * w, lane);
        if (lane == 0) st(y, r, acc * scale);
    }
}

/* part[r * chunks + c] = sum of chunk c of row r: a warp per (row, chunk) */
template <typename T>
__global__ void k_rows_partial(const T *__restrict__ x, float *__restrict__ part, long long rows, long long w,
                               long long chunks) {
    long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    long long warps = (long long)gridDim.x * blockDim.x / 32;
    int lane = threadIdx.x & 31;
    long long len = (w + chunks - 1) / chunks;
    for (long long t = warp; t < rows * chunks; t += warps) {
        long long r = t / chunks, c = t % chunks;
        long long lo = r * w + c * len, hi = r * w + (c + 1 < chunks ? (c + 1) * len : w);
        float acc = lo < hi ? warp_range_sum(x, lo, hi, lane) : 0.0f;
        if (lane == 0) part[t] = acc;
    }
}

/* y[j] = scale * sum over rows of column j of x[rows, w], in one launch.
 * Block (strip b, slice s): STRIP columns x SLICE_ROWS warps; each warp
 * reads STRIP consecutive elements of a row (coalesced), the warps are
 * combined in order into part[s * w + j]. The block then counts itself in
 * arrivals[b]; the last of the strip's `slices` blocks to arrive sums the
 * strip's partials, warp y taking slices y, y + SLICE_ROWS, ..., the warps
 * combined in order: a fixed order whichever block comes last, so the sums
 * are the same bits every run. It sets arrivals[b] back to zero for the
 * next launch. One slice: the block's sum is y's. */
template <typename T, typename TY>
__global__ void k_cols(const T *__restrict__ x, float *__restrict__ part, TY *__restrict__ y,
                       unsigned *__restrict__ arrivals, long long rows, long long w, long long slices, float scale) {
    __shared__ float acc_s[SLICE_ROWS][STRIP];
    __shared__ bool last;
    long long j = blockIdx.x * (long long)STRIP + threadIdx.x;
    long long len = (rows + slices - 1) / slices, s = blockIdx.y;
    long long r0 = s * len, r1 = r0 + len < rows ? r0 + len : rows;
    float acc = 0.0f;
    if (j < w)
        for (long long r = r0 + threadIdx.y; r < r1; r += SLICE_ROWS) acc += ld(x, r * w + j);
    acc_s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < w) {
        float t = 0.0f;
        for (int k = 0; k < SLICE_ROWS; k++) t += acc_s[k][threadIdx.x];
        if (slices == 1) st(y, j, t * scale);
        else part[s * w + j] = t;
        __threadfence(); /* the partial is visible to every block before this one counts itself */
    }
    if (slices == 1) return;
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        last = atomicAdd(&arrivals[blockIdx.x], 1u) == slices - 1;
        if (last) __threadfence(); /* the others' partials are read after their count is seen */
    }
    __syncthreads();
    if (!last) return;
    float t = 0.0f; /* L2 loads: the partials were written by other SMs */
    if (j < w)
        for (long long q = threadIdx.y; q < slices; q += SLICE_ROWS) t += __ldcg(part + q * w + j);
    acc_s[threadIdx.y][threadIdx.x] = t;
    __syncthreads();
    if (threadIdx.y == 0) {
        float u = 0.0f;
        for (int k = 0; k < SLICE_ROWS; k++) u += acc_s[k][threadIdx.x];
        if (j < w) st(y, j, u * scale);
        if (threadIdx.x == 0) arrivals[blockIdx.x] = 0;
    }
}

/* y[j] = scale * sum_s part[s * w + j], in order of s */
template <typename T>
__global__ void k_sum_partials(const float *__restrict__ part, T *__restrict__ y, long long n, long long parts,
                               long long stride_part, long long stride_out, float scale) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
        float t = 0.0f;
        for (long long s = 0; s < parts; s++) t += part[s * stride_part + j * stride_out];
        st(y, j, t * scale);
    }
}

struct red4 { long long st[4], os[4], rs[4]; };

template <typename TX, typename TY>
__global__ void k_general(const TX *__restrict__ x, TY *__restrict__ y, long long n_out, long long n_red, red4 p,
                          float scale) {
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < n_out; o += (long long)gridDim.x * blockDim.x) {
        long long base = 0, t = o;
        for (int i = 3; i >= 0; i--) { base += (t % p.os[i]) * p.st[i]; t /= p.os[i]; }
        float acc = 0.0f;
        for (long long r = 0; r < n_red; r++) {
            long long off = 0, u = r;
            for (int i = 3; i >= 0; i--) { off += (u % p.rs[i]) * p.st[i]; u /= p.rs[i]; }
            acc += ld(x, base + off);
        }
        st(y, o, acc * scale);
    }
}

static long long clampll(long long v, long long lo, long long hi) { return v < lo ? lo : v > hi ? hi : v; }

/* y[rows] = row sums of x[rows, w] */
template <typename TX, typename TY>
static dg_status sum_rows(gpu_ctx *c, const TX *x, TY *y, long long rows, long long w, float scale) {
    long long want_warps = 8LL * c->prop.multiProcessorCount * 32; /* enough warps to cover the GPU */
    long long chunks = clampll(want_warps / rows, 1, w / 1024 + 1);
    while (chunks > 1 && rows * chunks > (long long)c->scratch_floats) chunks /= 2;
    if (chunks == 1) {
        k_rows_warp<<<grid_for(rows * 32, 256), 256, 0, c->stream>>>(x, y, rows, w, scale);
        DG_CUDA_CHECK_LAUNCH();
        return DG_OK;
    }
    k_rows_partial<<<grid_for(rows * chunks * 32, 256), 256, 0, c->stream>>>(x, c->scratch, rows, w, chunks);
    DG_CUDA_CHECK_LAUNCH();
    k_sum_partials<<<grid_for(rows, 256), 256, 0, c->stream>>>(c->scratch, y, rows, chunks, 1, chunks, scale);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* y[w] = column sums of x[rows, w]; *done = false when slices share out the
 * rows and the strips are more than the arrival counters (the caller falls
 * back to the general kernel) */
template <typename TX, typename TY>
static dg_status sum_cols(gpu_ctx *c, const TX *x, TY *y, long long rows, long long w, float scale, bool *done) {
    long long strips = (w + STRIP - 1) / STRIP;
    long long slices = clampll(4LL * c->prop.multiProcessorCount / strips, 1, (rows + 63) / 64);
    while (slices > 1 && slices * w > (long long)c->scratch_floats) slices /= 2;
    *done = slices == 1 || strips <= GPU_COL_ARRIVALS;
    if (!*done) return DG_OK;
    dim3 block(STRIP, SLICE_ROWS), grid((unsigned)strips, (unsigned)slices);
    k_cols<<<grid, block, 0, c->stream>>>(x, c->scratch, y, c->col_arrivals, rows, w, slices, scale);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* The classification (rows, columns or general) is the core's
 * (dg_reduce_layout_of), shared with the CPU backend; the kernel choice
 * within each class is this file's. x of storage type TX, y of TY. */
template <typename TX, typename TY> static dg_status reduce_t(gpu_ctx *c, const dg_step *s) {
    const TX *x = (const TX *)s->in[0];
    TY *y = (TY *)s->out;
    dg_reduce_layout l = dg_reduce_layout_of(s->node);
    long long n_out = l.n_out, n_red = l.n_red;
    float scale = (float)l.scale;
    if (l.kind == DG_REDUCE_ROWS) return sum_rows(c, x, y, n_out, n_red, scale);
    if (l.kind == DG_REDUCE_COLS) {
        bool done = false;
        dg_status st = sum_cols(c, x, y, n_red, n_out, scale, &done);
        if (st != DG_OK || done) return st;
    }
    red4 p;
    for (int i = 0; i < 4; i++) {
        p.st[i] = l.st.d[i];
        p.os[i] = l.os.d[i];
        p.rs[i] = l.rs.d[i];
    }
    k_general<<<grid_for(n_out, 256), 256, 0, c->stream>>>(x, y, n_out, n_red, p, scale);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_reduce(gpu_ctx *c, const dg_step *s) {
    const dg_dtype tx = s->node->in[0]->dtype, ty = s->node->dtype;
    const bool wide = ty == DG_F32; /* a 16-bit x summed into float32 */
    switch (tx) {
    case DG_BF16: return wide ? reduce_t<__nv_bfloat16, float>(c, s) : reduce_t<__nv_bfloat16, __nv_bfloat16>(c, s);
    case DG_F16:  return wide ? reduce_t<__half, float>(c, s) : reduce_t<__half, __half>(c, s);
    case DG_F32:  return reduce_t<float, float>(c, s);
    case DG_I32:  break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s of %s into %s", s->node->name, dg_dtype_name(tx),
                    dg_dtype_name(ty));
}
