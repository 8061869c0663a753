/* gpu_gather.cu: copies through strides or indices (cpu_gather.c's
 * counterpart): broadcast_to (stride 0 along broadcast axes), permute
 * (permuted strides; a swap of the last two axes as a tiled transpose), and
 * the batch assembly behind dg_backend_gather_rows (rows picked by an index
 * vector). Writes are contiguous. The copies are templated on the element
 * (float, or unsigned short for a bf16 or f16 permute: moved, never
 * converted; uint4 for a permute copied in 16-byte units). */
#include "gpu_common.cuh"

#define BLOCK 256

/* y[r, j] = x[offset of (r, j) under strides st] for the 4-D output o seen
 * as rows of its last axis: a block per row, the row's start computed once */
template <typename T>
__global__ void k_strided_copy_rows(const T *__restrict__ x, T *__restrict__ y, long long rows, dg_dims4 o,
                                    dg_dims4 st) {
    long long w = o.d[3];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        long long i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);
        const T *px = x + i0 * st.d[0] + i1 * st.d[1] + i2 * st.d[2];
        for (long long j = threadIdx.x; j < w; j += blockDim.x) y[r * w + j] = px[j * st.d[3]];
    }
}

/* y[i] = x[offset of i under strides st]: a thread per element, for short rows */
template <typename T>
__global__ void k_strided_copy(const T *__restrict__ x, T *__restrict__ y, long long n, dg_dims4 o, dg_dims4 st) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = x[strided(i, o, st)];
}

/* y[b, j, i] = x[b, i, j] for x [batch, R, C]: 32x32 tiles through shared
 * memory (padded against bank conflicts), so reads and writes are both
 * coalesced. */
template <typename T>
__global__ void k_transpose(const T *__restrict__ x, T *__restrict__ y, long long R, long long C) {
    __shared__ T tile[32][33];
    long long b = blockIdx.z;
    const T *xb = x + b * R * C;
    T *yb = y + b * R * C;
    long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        long long r = r0 + k, c = c0 + threadIdx.x;
        if (r < R && c < C) tile[k][threadIdx.x] = xb[r * C + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        long long c = c0 + k, r = r0 + threadIdx.x; /* output row c, column r */
        if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][k];
    }
}

/* dst row i = src row idx[i] for i < n, rows of `words` 4-byte words: a
 * grid-stride loop over the n * words output words */
__global__ void k_gather_rows_by_index(unsigned *dst, const unsigned *src, const int *idx, long long n,
                                       long long words) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n * words;
         t += (long long)gridDim.x * blockDim.x) {
        long long i = t / words, w = t % words;
        dst[t] = src[(long long)idx[i] * words + w];
    }
}

/* y = x read through strides st: a block per row when rows are long */
template <typename T>
static dg_status strided_copy(gpu_ctx *c, const T *x, T *y, dg_dims4 o, dg_dims4 st) {
    long long n = o.d[0] * o.d[1] * o.d[2] * o.d[3];
    if (o.d[3] >= 128)
        k_strided_copy_rows<<<grid_for(n / o.d[3], 1), BLOCK, 0, c->stream>>>(x, y, n / o.d[3], o, st);
    else k_strided_copy<<<grid_for(n, BLOCK), BLOCK, 0, c->stream>>>(x, y, n, o, st);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_broadcast_to(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    return strided_copy(c, (const float *)s->in[0], (float *)s->out, dg_dims4_of(nd->shape),
                        dg_bcast_strides(nd->in[0]->shape, nd->shape));
}

template <typename T>
static dg_status permute(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    dg_attr_permute pa = dg_attr_permute_of(nd);
    int k = nd->shape.ndim;
    bool swap_last2 = k >= 2 && pa.perm[k - 2] == k - 1 && pa.perm[k - 1] == k - 2;
    for (int i = 0; i + 2 < k; i++) swap_last2 = swap_last2 && pa.perm[i] == i;
    if (swap_last2) { /* a (batched) matrix transpose: tiled */
        dg_dims4 in = dg_dims4_of(nd->in[0]->shape);
        long long R = in.d[2], C = in.d[3], batch = in.d[0] * in.d[1];
        if (batch <= 65535 && (R + 31) / 32 <= 65535) {
            dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), (unsigned)batch), block(32, 8);
            k_transpose<T><<<grid, block, 0, c->stream>>>((const T *)s->in[0], (T *)s->out, R, C);
            DG_CUDA_CHECK_LAUNCH();
            return DG_OK;
        }
    }
    return strided_copy(c, (const T *)s->in[0], (T *)s->out, dg_dims4_of(nd->shape),
                        dg_permute_strides(nd->in[0]->shape, pa.perm));
}

/* A permute that keeps the last axis (the heads' split and merge, [B,T,H,Dh]
 * <-> [B,H,T,Dh]) copies whole runs of it: where each run and every
 * outer stride is a multiple of 16 bytes, *o and *st become the output's
 * dims and the input's strides in 16-byte units (one index computation and
 * one vector load per 16 bytes instead of per element). False where it
 * does not apply. */
static bool in_16_byte_units(const dg_node *nd, size_t elem, dg_dims4 *o, dg_dims4 *st) {
    *o = dg_dims4_of(nd->shape);
    *st = dg_permute_strides(nd->in[0]->shape, dg_attr_permute_of(nd).perm);
    long long per = 16 / (long long)elem; /* elements a unit */
    if (st->d[3] != 1 || o->d[3] % per) return false;
    for (int i = 0; i < 3; i++)
        if (st->d[i] % per) return false;
    for (int i = 0; i < 3; i++) st->d[i] /= per;
    o->d[3] /= per;
    return true;
}

/* f32, or the 2-byte bf16 and f16 (graph.c admits no other dtype) */
dg_status dg__gpu_permute(gpu_ctx *c, const dg_step *s) {
    size_t elem = dg_dtype_size(s->node->dtype);
    dg_dims4 o, st;
    if (in_16_byte_units(s->node, elem, &o, &st))
        return strided_copy(c, (const uint4 *)s->in[0], (uint4 *)s->out, o, st);
    return elem == 4 ? permute<float>(c, s) : permute<unsigned short>(c, s);
}

dg_status dg__gpu_gather_rows(gpu_ctx *c, void *dst, const void *src, const int32_t *idx, int n,
                              size_t row_bytes) {
    if (row_bytes % 4) return dg__fail(DG_ERR_INVALID, "gpu: gather_rows needs rows of whole 4-byte words");
    long long words = (long long)(row_bytes / 4);
    k_gather_rows_by_index<<<grid_for((long long)n * words, 256), 256, 0, c->stream>>>(
        (unsigned *)dst, (const unsigned *)src, idx, n, words);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
