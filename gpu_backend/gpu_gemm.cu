/* gpu_gemm.cu: row-major C = op(A) op(B) three ways.
 *
 * cuBLAS is column-major: a row-major matrix is its transpose seen
 * column-major, so row-major C[m,n] = op(A) op(B) is computed as the
 * column-major C^T[n,m] = op(B)^T op(A)^T, i.e. the operands swap places
 * and keep their own transpose flags and leading dimensions.
 *
 * cuBLAS runs in default (full fp32) math unless the caller allows TF32: a
 * plan's matmul step with DG_STEP_TF32, or dg_gpu_sgemm's tf32 argument.
 * TF32 allowed turns the tiled kernel into the own tensor-core kernels of
 * gpu_gemm_tf32.cu: dg__gpu_matmul and dg_gpu_sgemm call them with the
 * room for their transposes; the naive kernel stays fp32. Products of bf16
 * or f16 operands go to cuBLAS's GemmEx, or with the tiled kernel chosen,
 * on a compute capability 9.0 device, to the own wgmma kernel of
 * gpu_gemm_wgmma_lowp.cu.
 *
 * naive: one thread per element of C, k-loop from global memory.
 * tiled: one kernel for every shape, transpose and alignment. A BM x BN tile
 * of C per block (128x128, 128x64 or 64x64, picked per shape so the grid
 * fills the GPU), 8x8 outputs per thread in registers. Each k-step of 8
 * stages op(A)'s BM x 8 and op(B)'s 8 x BN slices in shared memory, both
 * stored k-major, so a thread reads its rows and columns as float4. The
 * slices are double-buffered: the next one is loaded from global memory
 * into registers while the current one is computed, then stored into the
 * other buffer, one barrier per k-step. Loads outside the matrices read as
 * zero and stores outside C are skipped (predicated edge tiles), so a size
 * that is not a multiple of the tile costs only its partly idle edge
 * blocks. Global loads are float4 where the operand's contiguous axis
 * allows it (leading dimension and batch stride multiples of 4, 16-byte
 * aligned base), single floats otherwise. */
#include <stdio.h>

#include "gpu_common.cuh"

#define BK 8   /* k per staged slice                                            */
#define PAD 4  /* floats after each shared row: the k-contiguous operands' scalar
                  stores (8 rows of a slice written at once) hit distinct banks */

/* op(X)(r, c) for a row-major X with row stride ld */
__device__ __forceinline__ float at(const float *X, bool t, int ld, int r, int c) {
    return t ? X[(long long)c * ld + r] : X[(long long)r * ld + c];
}

__global__ void k_gemm_naive(bool ta, bool tb, int m, int n, int k, const float *__restrict__ A, int lda,
                             const float *__restrict__ B, int ldb, float *__restrict__ C, int ldc) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++) acc += at(A, ta, lda, row, p) * at(B, tb, ldb, p, col);
    C[(long long)row * ldc + col] = acc;
}

/* The tiled kernel's arguments: one batch item is blockIdx.z (+ z0). */
struct gemm_args {
    int m, n, k, lda, ldb, ldc;
    long long sa, sb, sc;        /* batch strides, in floats               */
    const float *A, *B;
    float *C;
    bool vec_a, vec_b, vec_c;    /* float4 access allowed on A, B, C       */
};

/* Four consecutive floats from p of which `valid` (possibly <= 0) lie
 * inside the matrix; the rest read as zero. */
__device__ __forceinline__ float4 load4(const float *__restrict__ p, int valid, bool vec) {
    if (vec && valid >= 4) return __ldg((const float4 *)p);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (valid > 0) v.x = __ldg(p);
    if (valid > 1) v.y = __ldg(p + 1);
    if (valid > 2) v.z = __ldg(p + 2);
    if (valid > 3) v.w = __ldg(p + 3);
    return v;
}

/* One operand's BX x BK slice (BX along m for A, along n for B; k from k0),
 * loaded by NT threads as groups of 4 along the operand's contiguous axis:
 * KC (k-contiguous: A not transposed, B transposed) X[x * ld + p], else
 * X[p * ld + x]. Stored k-major: S[p][x]. */
template <int BX, int NT, bool KC> struct slice {
    static constexpr int G = BK * BX / 4 / NT; /* groups per thread */
    static_assert(G >= 1 && BK * BX == 4 * G * NT, "slice must split evenly over the threads");

    __device__ static void load(float4 (&v)[G], const float *__restrict__ X, int ld, int x0, int xdim, int k0,
                                int kdim, bool vec) {
#pragma unroll
        for (int q = 0; q < G; q++) {
            int g = threadIdx.x + NT * q;
            if (KC) {
                int x = x0 + g / (BK / 4), p = k0 + (g % (BK / 4)) * 4;
                v[q] = load4(X + (long long)x * ld + p, x < xdim ? kdim - p : 0, vec);
            } else {
                int p = k0 + g / (BX / 4), x = x0 + (g % (BX / 4)) * 4;
                v[q] = load4(X + (long long)p * ld + x, p < kdim ? xdim - x : 0, vec);
            }
        }
    }

    __device__ static void store(float (*S)[BX + PAD], const float4 (&v)[G]) {
#pragma unroll
        for (int q = 0; q < G; q++) {
            int g = threadIdx.x + NT * q;
            if (KC) {
                int x = g / (BK / 4), p = (g % (BK / 4)) * 4;
                S[p][x] = v[q].x; S[p + 1][x] = v[q].y; S[p + 2][x] = v[q].z; S[p + 3][x] = v[q].w;
            } else {
                *(float4 *)&S[g / (BX / 4)][(g % (BX / 4)) * 4] = v[q];
            }
        }
    }
};

/* Thread (tx, ty) owns rows ty*4.. and BM/2 + ty*4.., columns tx*4.. and
 * BN/2 + tx*4..: the 8 threads of a quarter-warp read 128 consecutive bytes
 * of a B slice row (no bank conflicts), and a warp's float4 stores of C
 * cover whole 128-byte lines. acc[i][j]: row half i/4, column half j/4. */
template <int BM, int BN>
__device__ __forceinline__ void slice_fma(const float (*As)[BM + PAD], const float (*Bs)[BN + PAD], float (&acc)[8][8],
                                          int tx, int ty) {
#pragma unroll
    for (int p = 0; p < BK; p++) {
        float4 a0 = *(const float4 *)&As[p][ty * 4], a1 = *(const float4 *)&As[p][BM / 2 + ty * 4];
        float4 b0 = *(const float4 *)&Bs[p][tx * 4], b1 = *(const float4 *)&Bs[p][BN / 2 + tx * 4];
        float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* C tile (blockIdx.y, blockIdx.x) of batch item z0 + blockIdx.z. MINB
 * blocks per SM keep 16 warps resident (at most 128 registers a thread). */
template <int BM, int BN, int MINB, bool TA, bool TB>
__global__ void __launch_bounds__(BM * BN / 64, MINB) k_gemm_tiled(gemm_args g, int z0) {
    constexpr int NT = BM * BN / 64;
    typedef slice<BM, NT, !TA> slice_a;
    typedef slice<BN, NT, TB> slice_b;
    __shared__ __align__(16) float As[2][BK][BM + PAD];
    __shared__ __align__(16) float Bs[2][BK][BN + PAD];
    long long z = z0 + blockIdx.z;
    const float *A = g.A + z * g.sa, *B = g.B + z * g.sb;
    float *C = g.C + z * g.sc;
    int tx = threadIdx.x % (BN / 8), ty = threadIdx.x / (BN / 8);
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    float4 ra[slice_a::G], rb[slice_b::G];
    slice_a::load(ra, A, g.lda, row0, g.m, 0, g.k, g.vec_a);
    slice_b::load(rb, B, g.ldb, col0, g.n, 0, g.k, g.vec_b);
    slice_a::store(As[0], ra);
    slice_b::store(Bs[0], rb);
    __syncthreads();
    int steps = (g.k + BK - 1) / BK;
    for (int t = 0; t < steps; t++) {
        int cur = t & 1;
        bool next = t + 1 < steps;
        if (next) { /* in flight during this slice's FMAs */
            slice_a::load(ra, A, g.lda, row0, g.m, (t + 1) * BK, g.k, g.vec_a);
            slice_b::load(rb, B, g.ldb, col0, g.n, (t + 1) * BK, g.k, g.vec_b);
        }
        slice_fma<BM, BN>(As[cur], Bs[cur], acc, tx, ty);
        if (next) { /* the other buffer: its last readers passed the previous barrier */
            slice_a::store(As[cur ^ 1], ra);
            slice_b::store(Bs[cur ^ 1], rb);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int r = row0 + (i < 4 ? 0 : BM / 2) + ty * 4 + i % 4;
        if (r >= g.m) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int c = col0 + h * (BN / 2) + tx * 4;
            float *dst = C + (long long)r * g.ldc + c;
            const float *v = &acc[i][4 * h];
            if (g.vec_c && c + 3 < g.n) {
                *(float4 *)dst = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (c + e < g.n) dst[e] = v[e];
            }
        }
    }
}

/* The tile shapes, largest first. `weight`: a block's time relative to its
 * output area (a smaller tile re-reads more of A and B per FMA and meets a
 * barrier more often), from H100 timings of each shape alone on full grids
 * (4096^3: 40.9, 37.2, 36.0 TFLOP/s) and on the 1000-3000 sizes where the
 * choice is close. */
struct tile_shape { int bm, bn; double weight; };
static const tile_shape tile_shapes[] = {{128, 128, 1.0}, {128, 64, 1.1}, {64, 64, 1.35}};
#define N_TILE_SHAPES (int)(sizeof tile_shapes / sizeof *tile_shapes)

/* The shape with the least predicted time: the busiest SM's blocks (a grid
 * of 64 blocks on 132 SMs leaves half of them idle) times a block's cost. */
static int pick_tile(const gpu_ctx *c, int m, int n, int batch) {
    int best = 0;
    double best_t = 0, sms = c->prop.multiProcessorCount;
    for (int i = 0; i < N_TILE_SHAPES; i++) {
        const tile_shape *t = &tile_shapes[i];
        double blocks = (double)((m + t->bm - 1) / t->bm) * ((n + t->bn - 1) / t->bn) * batch;
        double time = ceil(blocks / sms) * t->bm * t->bn * t->weight;
        if (i == 0 || time < best_t) { best = i; best_t = time; }
    }
    return best;
}

template <int BM, int BN, int MINB>
static dg_status launch_tiled(gpu_ctx *c, bool ta, bool tb, const gemm_args &g, int batch) {
    dim3 block(BM * BN / 64);
    unsigned gx = (unsigned)((g.n + BN - 1) / BN), gy = (unsigned)((g.m + BM - 1) / BM);
    if (gy > 65535)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: tiled sgemm with m = %d exceeds the grid (%d rows a block)", g.m, BM);
    void (*kern)(gemm_args, int) = !ta && !tb  ? k_gemm_tiled<BM, BN, MINB, false, false>
                                   : ta && !tb ? k_gemm_tiled<BM, BN, MINB, true, false>
                                   : !ta && tb ? k_gemm_tiled<BM, BN, MINB, false, true>
                                               : k_gemm_tiled<BM, BN, MINB, true, true>;
    return launch_z_sliced(kern, gx, gy, block, 0, c->stream, batch, g);
}

static dg_status sgemm_tiled(gpu_ctx *c, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                             const float *B, int ldb, float *C, int ldc, int batch, long long sa, long long sb,
                             long long sc) {
    if (m <= 0 || n <= 0 || batch <= 0) return DG_OK;
    gemm_args g = {m, n, k, lda, ldb, ldc, sa, sb, sc, A, B, C,
                   dg__gpu_vec4_ok(A, lda, sa, batch), dg__gpu_vec4_ok(B, ldb, sb, batch),
                   dg__gpu_vec4_ok(C, ldc, sc, batch)};
    switch (pick_tile(c, m, n, batch)) {
    case 0: return launch_tiled<128, 128, 2>(c, ta, tb, g, batch);
    case 1: return launch_tiled<128, 64, 4>(c, ta, tb, g, batch);
    default: return launch_tiled<64, 64, 8>(c, ta, tb, g, batch);
    }
}

dg_status dg__gpu_sgemm(gpu_ctx *c, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                        const float *A, int lda, const float *B, int ldb, float *C, int ldc, int batch,
                        long long sa, long long sb, long long sc) {
    if (impl == DG_GPU_GEMM_CUBLAS) {
        dg_status st = dg__gpu_cublas_math(c, tf32);
        if (st != DG_OK) return st;
        const float one = 1.0f, zero = 0.0f;
        cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (batch == 1)
            DG_CUBLAS_CHECK(dg__cublas.sgemm(c->cublas, opb, opa, n, m, k, &one, B, ldb, A, lda, &zero, C, ldc));
        else
            DG_CUBLAS_CHECK(dg__cublas.sgemm_strided_batched(c->cublas, opb, opa, n, m, k, &one, B, ldb, sb, A, lda, sa,
                                                      &zero, C, ldc, sc, batch));
        return DG_OK;
    }
    if (impl == DG_GPU_GEMM_TILED) return sgemm_tiled(c, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, batch, sa, sb, sc);
    for (int i = 0; i < batch; i++) {
        dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
        k_gemm_naive<<<grid, block, 0, c->stream>>>(ta, tb, m, n, k, A + i * sa, lda, B + i * sb, ldb, C + i * sc,
                                                     ldc);
        DG_CUDA_CHECK_LAUNCH();
    }
    return DG_OK;
}

/* TF32: the wgmma kernel's transposes; bf16, f16: the own kernel's packed
 * operands (rows not multiples of 8 elements) */
size_t dg__gpu_matmul_scratch_floats(const gpu_ctx *c, const dg_node *n, dg_gpu_gemm impl) {
    if (impl != DG_GPU_GEMM_TILED) return 0;
    dg_gemm_dims g = dg_gemm_dims_of(n);
    if (n->in[0]->dtype != DG_F32) {
        if (!dg__gpu_has_wgmma_lowp(c, NULL, 0)) return 0;
        return (dg__gpu_gemm16_scratch_bytes(c, g.ta, g.tb, g.m, g.n, g.k, NULL, g.lda, NULL, g.ldb, g.batch, g.stride_a,
                                             g.stride_b) + 3) / 4;
    }
    return dg__gpu_tf32_scratch_floats(c, g.ta, g.tb, g.m, g.n, g.k, g.batch);
}

/* A product of bf16 or f16 operands: cuBLAS's GemmEx, float32 products'
 * sums (CUBLAS_COMPUTE_32F: the tensor cores, whose products of such
 * values are exact). C is float32 (out DG_F32), or the operands' 16-bit type
 * (dg_matmul_ex: the float32 result rounded as cuBLAS stores it).
 * Row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T, as
 * dg__gpu_sgemm does. Shared with dg_gpu_gemm_ex (the gemm sweep's bf16
 * and fp16 cuBLAS rows). */
dg_status dg__gpu_gemm_low(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                           const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch, long long sa,
                           long long sb, long long sc) {
    dg_status st = dg__gpu_cublas_math(c, false);
    if (st != DG_OK) return st;
    cudaDataType_t t = dtype == DG_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    cudaDataType_t tc = out == DG_F32 ? CUDA_R_32F : t;
    const float one = 1.0f, zero = 0.0f;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    DG_CUBLAS_CHECK(dg__cublas.gemm_strided_batched_ex(c->cublas, opb, opa, n, m, k, &one, B, t, ldb, sb, A, t, lda,
                                                       sa, &zero, C, tc, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                                       CUBLAS_GEMM_DEFAULT));
    return DG_OK;
}

bool dg__gpu_has_wgmma_lowp(const gpu_ctx *c, char *why, size_t n) {
#ifdef DG_HAVE_WGMMA
    if (c->prop.major == 9 && c->prop.minor == 0) return true;
    if (why) snprintf(why, n, "the own bf16/fp16 GEMM (wgmma) needs compute capability 9.0 (this device: %d.%d)",
                      c->prop.major, c->prop.minor);
#else
    (void)c;
    if (why) snprintf(why, n, "the own bf16/fp16 GEMM (wgmma) is not in this build (its CUDA targets do not include "
                      "compute capability 9.0)");
#endif
    return false;
}

/* The tiled GEMM's 16-bit products are the own wgmma kernel's; on another
 * device or build they stay cuBLAS's, as every other choice's. */
bool dg__gpu_lowp_own(const gpu_ctx *c, unsigned flags) {
    return dg__gpu_step_gemm(c, flags) == DG_GPU_GEMM_TILED && dg__gpu_has_wgmma_lowp(c, NULL, 0);
}

size_t dg__gpu_gemm16_pack_bytes(int rows, int cols, int batch) {
    return ((size_t)batch * rows * (((size_t)cols + 7) & ~(size_t)7) * 2 + 15) & ~(size_t)15;
}

/* Split k where the grid of 128 x 128 tiles fills at most a quarter of the
 * SMs and every slice keeps at least 4 k-tiles of 64 (the kernel's
 * pipeline is 4 stages deep): as many slices as fill the SMs once, 4 to
 * 16. Two slices did not pay for their partials: 1024^3 (64 tiles on 132
 * SMs) ran 0.024 ms split in two against 0.018 unsplit (docs/PERF.md). */
int dg__gpu_gemm16_splits(const gpu_ctx *c, int m, int n, int k, int batch) {
    long long tiles = (long long)((m + 127) / 128) * ((n + 127) / 128) * batch;
    long long ktiles = (k + 63) / 64, sms = c->prop.multiProcessorCount;
    if (4 * tiles > sms || ktiles < 16) return 1;
    long long s = sms / tiles;
    s = s < ktiles / 4 ? s : ktiles / 4;
    return (int)(s < 16 ? s : 16);
}

size_t dg__gpu_gemm16_partial_bytes(int splits, int m, int n, int batch) {
    return splits > 1 ? ((size_t)splits * batch * m * n * sizeof(float) + 15) & ~(size_t)15 : 0;
}

size_t dg__gpu_gemm16_scratch_bytes(const gpu_ctx *c, bool ta, bool tb, int m, int n, int k, const void *A, int lda,
                                    const void *B, int ldb, int batch, long long sa, long long sb) {
    size_t bytes = dg__gpu_gemm16_partial_bytes(dg__gpu_gemm16_splits(c, m, n, k, batch), m, n, batch);
    if (!dg__gpu_vec8_ok(A, lda, sa, batch)) bytes += dg__gpu_gemm16_pack_bytes(ta ? k : m, ta ? m : k, batch);
    if (!dg__gpu_vec8_ok(B, ldb, sb, batch)) bytes += dg__gpu_gemm16_pack_bytes(tb ? n : k, tb ? k : n, batch);
    return bytes;
}

dg_status dg__gpu_gemm_tiled16(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                               const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch,
                               long long sa, long long sb, long long sc, void *scratch, size_t scratch_bytes) {
#ifdef DG_HAVE_WGMMA
    return dg__gpu_gemm_wgmma_lowp(c, dtype, out, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, batch, sa, sb, sc, scratch,
                                   scratch_bytes);
#else
    (void)dtype, (void)out, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb;
    (void)C, (void)ldc, (void)batch, (void)sa, (void)sb, (void)sc, (void)scratch, (void)scratch_bytes;
    char why[160];
    dg__gpu_has_wgmma_lowp(c, why, sizeof why);
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s", why);
#endif
}

/* the own kernel with the room the plan reserved (dg__gpu_matmul_scratch_floats), or cuBLAS */
static dg_status matmul_low_precision(gpu_ctx *c, const dg_gemm_dims &g, const dg_step *s) {
    dg_dtype dt = s->node->in[0]->dtype, out = s->node->dtype;
    if (dg__gpu_lowp_own(c, s->flags))
        return dg__gpu_gemm_tiled16(c, dt, out, g.ta, g.tb, g.m, g.n, g.k, s->in[0], g.lda, s->in[1], g.ldb, s->out,
                                    g.ldc, g.batch, g.stride_a, g.stride_b, g.stride_c, s->scratch,
                                    s->scratch ? sizeof(float) * dg__gpu_matmul_scratch_floats(c, s->node,
                                                                                                DG_GPU_GEMM_TILED)
                                               : 0);
    return dg__gpu_gemm_low(c, dt, out, g.ta, g.tb, g.m, g.n, g.k, s->in[0], g.lda, s->in[1], g.ldb, s->out, g.ldc,
                            g.batch, g.stride_a, g.stride_b, g.stride_c);
}

/* out [batch,]m,n = op(in0) op(in1); dimensions, leading dimensions and
 * batch strides from the core's dg_gemm_dims_of (shared with the CPU) */
dg_status dg__gpu_matmul(gpu_ctx *c, const dg_step *s) {
    dg_gemm_dims g = dg_gemm_dims_of(s->node);
    if (s->node->in[0]->dtype != DG_F32) return matmul_low_precision(c, g, s);
    dg_gpu_gemm impl = (dg_gpu_gemm)dg__gpu_step_gemm(c, s->flags); /* checked by the dispatch */
    if (impl == DG_GPU_GEMM_TILED && (s->flags & DG_STEP_TF32)) /* with the room the plan reserved */
        return dg__gpu_sgemm_tf32(c, g.ta, g.tb, g.m, g.n, g.k, (const float *)s->in[0], g.lda,
                                  (const float *)s->in[1], g.ldb, (float *)s->out, g.ldc, g.batch, g.stride_a,
                                  g.stride_b, g.stride_c, (float *)s->scratch,
                                  s->scratch ? dg__gpu_matmul_scratch_floats(c, s->node, impl) : 0);
    return dg__gpu_sgemm(c, impl, (s->flags & DG_STEP_TF32) != 0, g.ta, g.tb, g.m, g.n, g.k,
                         (const float *)s->in[0], g.lda, (const float *)s->in[1], g.ldb, (float *)s->out, g.ldc,
                         g.batch, g.stride_a, g.stride_b, g.stride_c);
}
