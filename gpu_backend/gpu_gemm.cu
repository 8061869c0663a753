/* gpu_gemm.cu: row-major C = op(A) op(B) three ways.
 *
 * cuBLAS is column-major: a row-major matrix is its transpose seen
 * column-major, so row-major C[m,n] = op(A) op(B) is computed as the
 * column-major C^T[n,m] = op(B)^T op(A)^T, i.e. the operands swap places
 * and keep their own transpose flags and leading dimensions.
 *
 * cuBLAS runs in default (full fp32) math unless the caller allows TF32: a
 * plan's matmul step with DG_STEP_TF32, or dg_gpu_sgemm's tf32 argument.
 *
 * naive: one thread per element of C, k-loop from global memory.
 * tiled: a 128x128 tile of C per block of 256 threads, 8x8 outputs per thread
 * in registers; each k-step of 8 stages an A tile (transposed, so a thread
 * reads its 8 rows contiguously) and a B tile in shared memory. */
#include "gpu_common.cuh"

#define TM 128
#define TN 128
#define TK 8

/* op(X)(r, c) for a row-major X with row stride ld */
__device__ __forceinline__ float at(const float *X, bool t, int ld, int r, int c) {
    return t ? X[(long long)c * ld + r] : X[(long long)r * ld + c];
}

/* acc (8x8 of this thread) += the staged TK-slice: rows ty*8.., cols tx*8.. */
__device__ __forceinline__ void tile_fma(const float (*As)[TM], const float (*Bs)[TN], float (*acc)[8], int tx, int ty) {
#pragma unroll
    for (int p = 0; p < TK; p++) {
        float4 a0 = *(const float4 *)&As[p][ty * 8], a1 = *(const float4 *)&As[p][ty * 8 + 4];
        float4 b0 = *(const float4 *)&Bs[p][tx * 8], b1 = *(const float4 *)&Bs[p][tx * 8 + 4];
        float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

__global__ void k_gemm_naive(bool ta, bool tb, int m, int n, int k, const float *__restrict__ A, int lda,
                             const float *__restrict__ B, int ldb, float *__restrict__ C, int ldc) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++) acc += at(A, ta, lda, row, p) * at(B, tb, ldb, p, col);
    C[(long long)row * ldc + col] = acc;
}

__global__ void __launch_bounds__(256) k_gemm_tiled(bool ta, bool tb, int m, int n, int k, const float *__restrict__ A,
                                                    int lda, const float *__restrict__ B, int ldb,
                                                    float *__restrict__ C, int ldc) {
    __shared__ float As[TK][TM]; /* As[p][r] = op(A)(row0 + r, p0 + p) */
    __shared__ float Bs[TK][TN]; /* Bs[p][c] = op(B)(p0 + p, col0 + c) */
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    float acc[8][8] = {{0.0f}};
    /* loader roles: A: row tid/2, k 4*(tid%2)..+3; B: k tid/32, col 4*(tid%32)..+3 */
    int ar = tid >> 1, ak = (tid & 1) * 4, bk = tid >> 5, bc = (tid & 31) * 4;
    for (int p0 = 0; p0 < k; p0 += TK) {
        for (int q = 0; q < 4; q++) {
            int r = row0 + ar, pa = p0 + ak + q;
            As[ak + q][ar] = (r < m && pa < k) ? at(A, ta, lda, r, pa) : 0.0f;
            int cc = col0 + bc + q, pb = p0 + bk;
            Bs[bk][bc + q] = (cc < n && pb < k) ? at(B, tb, ldb, pb, cc) : 0.0f;
        }
        __syncthreads();
        tile_fma(As, Bs, acc, tx, ty);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int r = row0 + ty * 8 + i;
        if (r >= m) continue;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int cc = col0 + tx * 8 + j;
            if (cc < n) C[(long long)r * ldc + cc] = acc[i][j];
        }
    }
}

/* The same tiling for the common case (no transposes, every dimension a
 * multiple of the tile, rows 16-byte aligned): float4 global loads, and the
 * next k-slice is fetched into registers while the current one is computed,
 * so global-memory latency hides behind the FMAs. */
__global__ void __launch_bounds__(256) k_gemm_tiled_vec(int m, int n, int k, const float *__restrict__ A, int lda,
                                                        const float *__restrict__ B, int ldb, float *__restrict__ C,
                                                        int ldc) {
    __shared__ float As[TK][TM];
    __shared__ float Bs[TK][TN];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    int ar = tid >> 1, ak = (tid & 1) * 4, bk = tid >> 5, bc = (tid & 31) * 4;
    const float *a_src = A + (long long)(row0 + ar) * lda + ak;
    const float *b_src = B + (long long)bk * ldb + col0 + bc;
    float acc[8][8] = {{0.0f}};
    float4 a_next = *(const float4 *)a_src, b_next = *(const float4 *)b_src;
    for (int p0 = 0; p0 < k; p0 += TK) {
        As[ak + 0][ar] = a_next.x; As[ak + 1][ar] = a_next.y; As[ak + 2][ar] = a_next.z; As[ak + 3][ar] = a_next.w;
        *(float4 *)&Bs[bk][bc] = b_next;
        __syncthreads();
        if (p0 + TK < k) { /* prefetch the next slice; used after this one's FMAs */
            a_next = *(const float4 *)(a_src + p0 + TK);
            b_next = *(const float4 *)(b_src + (long long)(p0 + TK) * ldb);
        }
        tile_fma(As, Bs, acc, tx, ty);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float *crow = C + (long long)(row0 + ty * 8 + i) * ldc + col0 + tx * 8;
        *(float4 *)crow = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *(float4 *)(crow + 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The handle's math mode for the next cuBLAS call: TF32 tensor cores only
 * where allowed. The mode is set on the host (so a CUDA-graph capture bakes
 * in the mode of each captured call); it is changed only when it differs. */
static dg_status set_math(gpu_ctx *c, bool tf32) {
    if (c->cublas_tf32 != tf32) {
        DG_CUBLAS_CHECK(cublasSetMathMode(c->cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        c->cublas_tf32 = tf32;
    }
    return DG_OK;
}

dg_status dg__gpu_sgemm(gpu_ctx *c, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                        const float *A, int lda, const float *B, int ldb, float *C, int ldc, int batch,
                        long long sa, long long sb, long long sc) {
    if (impl == DG_GPU_GEMM_CUBLAS) {
        dg_status st = set_math(c, tf32);
        if (st != DG_OK) return st;
        const float one = 1.0f, zero = 0.0f;
        cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (batch == 1)
            DG_CUBLAS_CHECK(cublasSgemm(c->cublas, opb, opa, n, m, k, &one, B, ldb, A, lda, &zero, C, ldc));
        else
            DG_CUBLAS_CHECK(cublasSgemmStridedBatched(c->cublas, opb, opa, n, m, k, &one, B, ldb, sb, A, lda, sa,
                                                      &zero, C, ldc, sc, batch));
        return DG_OK;
    }
    for (int i = 0; i < batch; i++) {
        const float *Ai = A + i * sa, *Bi = B + i * sb;
        float *Ci = C + i * sc;
        if (impl == DG_GPU_GEMM_NAIVE) {
            dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
            k_gemm_naive<<<grid, block, 0, c->stream>>>(ta, tb, m, n, k, Ai, lda, Bi, ldb, Ci, ldc);
        } else {
            dim3 grid((n + TN - 1) / TN, (m + TM - 1) / TM);
            bool vec = !ta && !tb && m % TM == 0 && n % TN == 0 && k % TK == 0 && lda % 4 == 0 && ldb % 4 == 0 &&
                       ldc % 4 == 0 && aligned16(Ai) && aligned16(Bi) && aligned16(Ci);
            if (vec) k_gemm_tiled_vec<<<grid, 256, 0, c->stream>>>(m, n, k, Ai, lda, Bi, ldb, Ci, ldc);
            else k_gemm_tiled<<<grid, 256, 0, c->stream>>>(ta, tb, m, n, k, Ai, lda, Bi, ldb, Ci, ldc);
        }
        DG_CUDA_CHECK_LAUNCH();
    }
    return DG_OK;
}

/* out [batch,]m,n = op(in0) op(in1); dimensions, leading dimensions and
 * batch strides from the core's dg_gemm_dims_of (shared with the CPU) */
dg_status dg__gpu_matmul(gpu_ctx *c, const dg_step *s) {
    dg_gemm_dims g = dg_gemm_dims_of(s->node);
    return dg__gpu_sgemm(c, c->gemm, (s->flags & DG_STEP_TF32) != 0, g.ta, g.tb, g.m, g.n, g.k,
                         (const float *)s->in[0], g.lda, (const float *)s->in[1], g.ldb, (float *)s->out, g.ldc,
                         g.batch, g.stride_a, g.stride_b, g.stride_c);
}
