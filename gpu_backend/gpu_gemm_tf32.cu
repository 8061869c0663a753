/* gpu_gemm_tf32.cu: the project's own TF32 tensor-core GEMM, row-major
 * C[m,n] = op(A) op(B) (batched by strides), the tiled kernel's answer when
 * the caller allows TF32 (dg__gpu_sgemm with tf32 and DG_GPU_GEMM_TILED).
 * On an H100 large products go to the wgmma kernel of gpu_gemm_wgmma.cu
 * (tf32_kernel below); this file's mma.sync kernel takes the rest, and
 * every product on devices of compute capability 8.x.
 *
 * The mma.sync kernel's shape, from the outside in:
 *
 *   block   a BM x BN tile of C (128x128, or 64x64 where the larger tile
 *           would leave SMs idle: pick_tf32_tile), WARPS_M x WARPS_N warps;
 *           tiles are visited in groups of GROUP_M tile rows, so the blocks
 *           resident at once share their rows of A and columns of B in L2;
 *   k loop  BK = 32 at a time. Each k-tile of op(A) (BM x 32) and op(B)
 *           (32 x BN) goes global -> shared memory by cp.async, STAGES deep:
 *           while the warps multiply tile t, tiles t+1 .. t+STAGES-2 are in
 *           flight, and one barrier per k-tile frees the stage to refill;
 *   warp    a WM x WN piece of the tile (64x64 or 32x32), as MT x NT
 *           mma.sync.m16n8k8 TF32 products (16x8 of C, k = 8) per k-step of
 *           8, the accumulators (MT*NT*4 floats a thread) in registers;
 *   thread  in a product, lane = 4 g + t holds A(g, t), A(g+8, t),
 *           A(g, t+4), A(g+8, t+4), B(t, g), B(t+4, g) and C(g, 2t),
 *           C(g, 2t+1), C(g+8, 2t), C(g+8, 2t+1) (the PTX fragment layout),
 *           each A and B value rounded to TF32 (cvt.rna) as it is read.
 *
 * Shared memory keeps each operand in its global orientation, so cp.async
 * copies 16-byte runs as they are: a k-contiguous operand (A as stored, or
 * B transposed) as [x][BK + 4], an x-contiguous one as [BK][BX + 8]. The
 * pads put the 32 fragment reads of a warp (x = g + const, k = t + const)
 * in 32 different banks: (4g + t) and (8t + g) mod 32.
 *
 * Edges: a 16-byte run that reaches past the matrix copies only its valid
 * bytes and the rest is zero-filled (cp.async's src-size), runs wholly
 * outside copy none, and C is stored under a bounds check, so every size
 * runs in the fast kernel. Runs are 16-byte copies when the operand allows
 * it (16-byte aligned base, leading dimension and batch stride multiples
 * of 4), four 4-byte copies otherwise.
 *
 * Needs compute capability 8.0 (mma TF32, cp.async). */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_tiles.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TC_OLD_ARCH 1 /* compiled for a device without mma TF32: the kernels trap (never launched) */
#endif

#define TC_BK 32
#define TC_GROUP_M 8

/* A kernel configuration: block tile BM x BN in warp tiles WM x WN, STAGES
 * k-tiles in flight, MINB blocks resident per SM (the register budget). */
template <int BM_, int BN_, int WM_, int WN_, int STAGES_, int MINB_> struct tc_cfg {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, STAGES = STAGES_, MINB = MINB_;
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
};

struct tc_args {
    int m, n, k, lda, ldb, ldc;
    long long sa, sb, sc; /* batch strides, in floats */
    const float *A, *B;
    float *C;
};

/* ---- device helpers ---- */

static __device__ __forceinline__ uint32_t tc_round(float x) {
    uint32_t r;
#ifdef TC_OLD_ARCH
    r = __float_as_uint(x);
#else
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
    return r;
}

static __device__ __forceinline__ void tc_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef TC_OLD_ARCH
    __trap();
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* One operand's k-tile in shared memory: BX along m (A) or n (B), TC_BK
 * along k. KC: k-contiguous in global memory (A not transposed, B
 * transposed), stored [x][BK + 4]; else stored [k][BX + 8]. */
template <int BX, bool KC> struct tc_tile {
    static constexpr int LD = KC ? TC_BK + 4 : BX + 8; /* floats per stored row */
    static constexpr int FLOATS = KC ? BX * LD : TC_BK * LD;

    /* (x, kk) of the tile, kk in [0, BK) */
    static __device__ __forceinline__ int at(int x, int kk) { return KC ? x * LD + kk : kk * LD + x; }

    /* Issues the cp.asyncs for the k-tile at k0 of X (row stride ld, xdim
     * rows or columns along x, kdim along k), x from x0, NT threads each
     * taking runs of 4 floats along the contiguous axis. */
    template <int NT, bool VEC>
    static __device__ __forceinline__ void load(float *S, const float *__restrict__ X, int ld, int x0, int xdim,
                                                int k0, int kdim) {
        constexpr int RUNS = BX * TC_BK / 4, PER = RUNS / NT;
        static_assert(PER * NT == RUNS, "a tile's runs must split evenly over the threads");
#pragma unroll
        for (int q = 0; q < PER; q++) {
            int r = threadIdx.x + q * NT;
            int x, kk, valid; /* valid floats of the run in the matrix, 0..4 */
            long long off;
            if (KC) {
                x = r / (TC_BK / 4), kk = (r % (TC_BK / 4)) * 4;
                int left = kdim - (k0 + kk);
                valid = x0 + x < xdim ? (left < 4 ? left : 4) : 0;
                off = (long long)(x0 + x) * ld + k0 + kk;
            } else {
                kk = r / (BX / 4), x = (r % (BX / 4)) * 4;
                int left = xdim - (x0 + x);
                valid = k0 + kk < kdim ? (left < 4 ? left : 4) : 0;
                off = (long long)(k0 + kk) * ld + x0 + x;
            }
            valid = valid < 0 ? 0 : valid;
            float *dst = S + at(x, kk);
            const float *src = valid > 0 ? X + off : X; /* no byte is read at src-size 0 */
            if (VEC) {
                cp_async16(dst, src, 4 * valid);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) cp_async4(dst + e, e < valid ? src + e : X, e < valid ? 4 : 0);
            }
        }
    }
};

/* C tile of batch item z0 + blockIdx.z; blockIdx.x walks the tiles in
 * groups of TC_GROUP_M tile rows. */
template <class CFG, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(CFG::THREADS, CFG::MINB) k_gemm_tf32(tc_args g, int z0) {
    constexpr int BM = CFG::BM, BN = CFG::BN, WM = CFG::WM, WN = CFG::WN, STAGES = CFG::STAGES;
    constexpr int NT = CFG::THREADS, WARPS_N = BN / WN;
    constexpr int MT = WM / 16, NTL = WN / 8; /* products per warp along m and n */
    typedef tc_tile<BM, !TA> tile_a;
    typedef tc_tile<BN, TB> tile_b;
    constexpr int STAGE = tile_a::FLOATS + tile_b::FLOATS;
    extern __shared__ __align__(16) float smem[];

    long long z = z0 + blockIdx.z;
    const float *A = g.A + z * g.sa, *B = g.B + z * g.sb;
    float *C = g.C + z * g.sc;

    int tm, tn;
    grouped_tile(blockIdx.x, (g.m + BM - 1) / BM, (g.n + BN - 1) / BN, TC_GROUP_M, &tm, &tn);
    int row0 = tm * BM, col0 = tn * BN;

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
    int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    float acc[MT][NTL][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    int ktiles = (g.k + TC_BK - 1) / TC_BK;
    /* fill STAGES - 1 stages; a group is committed even when empty, so the
     * count of groups in flight is the same on every iteration */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles) {
            float *S = smem + s * STAGE;
            tile_a::template load<NT, VEC>(S, A, g.lda, row0, g.m, s * TC_BK, g.k);
            tile_b::template load<NT, VEC>(S + tile_a::FLOATS, B, g.ldb, col0, g.n, s * TC_BK, g.k);
        }
        cp_commit();
    }

    for (int t = 0; t < ktiles; t++) {
        cp_wait<STAGES - 2>(); /* this thread's copies of tile t have landed */
        __syncthreads();          /* everyone's have, and tile t-1's stage is free */
        int next = t + STAGES - 1;
        if (next < ktiles) {
            float *S = smem + (next % STAGES) * STAGE;
            tile_a::template load<NT, VEC>(S, A, g.lda, row0, g.m, next * TC_BK, g.k);
            tile_b::template load<NT, VEC>(S + tile_a::FLOATS, B, g.ldb, col0, g.n, next * TC_BK, g.k);
        }
        cp_commit();

        const float *As = smem + (t % STAGES) * STAGE, *Bs = As + tile_a::FLOATS;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 8) {
            uint32_t a[MT][4], b[NTL][2];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                int r = wm0 + i * 16 + gq;
                a[i][0] = tc_round(As[tile_a::at(r, kk + tq)]);
                a[i][1] = tc_round(As[tile_a::at(r + 8, kk + tq)]);
                a[i][2] = tc_round(As[tile_a::at(r, kk + tq + 4)]);
                a[i][3] = tc_round(As[tile_a::at(r + 8, kk + tq + 4)]);
            }
#pragma unroll
            for (int j = 0; j < NTL; j++) {
                int c = wn0 + j * 8 + gq;
                b[j][0] = tc_round(Bs[tile_b::at(c, kk + tq)]);
                b[j][1] = tc_round(Bs[tile_b::at(c, kk + tq + 4)]);
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NTL; j++) tc_mma(acc[i][j], a[i], b[j]);
        }
    }
    cp_wait<0>(); /* no copy may land after the block has gone */

    bool pair = ((uintptr_t)C & 7) == 0 && g.ldc % 2 == 0 && (gridDim.z == 1 || g.sc % 2 == 0);
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = row0 + wm0 + i * 16 + gq + 8 * h;
            if (r >= g.m) continue;
#pragma unroll
            for (int j = 0; j < NTL; j++) {
                int c = col0 + wn0 + j * 8 + 2 * tq;
                float *dst = C + (long long)r * g.ldc + c;
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (pair && c + 1 < g.n) {
                    *(float2 *)dst = make_float2(v0, v1);
                } else {
                    if (c < g.n) dst[0] = v0;
                    if (c + 1 < g.n) dst[1] = v1;
                }
            }
        }
}

/* ---- host side ---- */

/* The block tiles, largest first, with a block's time relative to its
 * area (the smaller tile reads more of A and B per product). The launch
 * cases below add the warp tile and the blocks an SM holds: 128x128 in
 * 64x64 warp tiles (128 accumulators a thread), two blocks an SM; 64x64 in
 * 32x32, four. */
struct tc_config { int bm, bn; double weight; };
static const tc_config tc_configs[] = {{128, 128, 1.0}, {64, 64, 1.5}};
#define N_TC_CONFIGS (int)(sizeof tc_configs / sizeof *tc_configs)

/* As pick_tile in gpu_gemm.cu: the busiest SM's blocks times a block's
 * relative cost. */
static int pick_tf32_tile(const gpu_ctx *c, int m, int n, int batch) {
    int best = 0;
    double best_t = 0, sms = c->prop.multiProcessorCount;
    for (int i = 0; i < N_TC_CONFIGS; i++) {
        const tc_config *t = &tc_configs[i];
        double blocks = (double)((m + t->bm - 1) / t->bm) * ((n + t->bn - 1) / t->bn) * batch;
        double time = ceil(blocks / sms) * t->bm * t->bn * t->weight;
        if (i == 0 || time < best_t) { best = i; best_t = time; }
    }
    return best;
}

template <class CFG, bool TA, bool TB, bool VEC>
static dg_status tc_launch_one(gpu_ctx *c, const tc_args &g, int batch) {
    typedef tc_tile<CFG::BM, !TA> tile_a;
    typedef tc_tile<CFG::BN, TB> tile_b;
    constexpr size_t smem = sizeof(float) * CFG::STAGES * (tile_a::FLOATS + tile_b::FLOATS);
    auto kern = k_gemm_tf32<CFG, TA, TB, VEC>;
    if (smem > c->prop.sharedMemPerBlockOptin)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: TF32 sgemm needs %zu bytes of shared memory per block (this "
                        "device: %zu)", smem, (size_t)c->prop.sharedMemPerBlockOptin);
    /* a host-side attribute: allowed during stream capture */
    DG_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    long long tiles = (long long)((g.m + CFG::BM - 1) / CFG::BM) * ((g.n + CFG::BN - 1) / CFG::BN);
    if (tiles > INT_MAX)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: TF32 sgemm of %d x %d has more tiles than a grid holds", g.m, g.n);
    return launch_z_sliced(kern, (unsigned)tiles, 1, CFG::THREADS, smem, c->stream, batch, g);
}

template <class CFG, bool VEC>
static dg_status tc_launch_vec(gpu_ctx *c, bool ta, bool tb, const tc_args &g, int batch) {
    if (!ta && !tb) return tc_launch_one<CFG, false, false, VEC>(c, g, batch);
    if (ta && !tb) return tc_launch_one<CFG, true, false, VEC>(c, g, batch);
    if (!ta && tb) return tc_launch_one<CFG, false, true, VEC>(c, g, batch);
    return tc_launch_one<CFG, true, true, VEC>(c, g, batch);
}

template <class CFG>
static dg_status tc_launch(gpu_ctx *c, bool ta, bool tb, bool vec, const tc_args &g, int batch) {
    return vec ? tc_launch_vec<CFG, true>(c, ta, tb, g, batch) : tc_launch_vec<CFG, false>(c, ta, tb, g, batch);
}

/* The TF32 kernel for a product: 0 mma.sync, else the wgmma kernel's
 * block width (256 or 128): AUTO takes wgmma on a compute capability 9.0
 * device where a 128 x 256 (or failing that 128 x 128) grid has a block
 * for every SM, since below that mma.sync's 64 x 64 tiles spread further
 * (1024^3 on an H100: 73 TFLOP/s against 62, docs/PERF.md). */
static int tf32_kernel(const gpu_ctx *c, int m, int n, int batch) {
    dg_gpu_tf32_kernel want = c->opts.tf32_kernel;
    if (want == DG_GPU_TF32_MMA_SYNC || (want == DG_GPU_TF32_AUTO && (c->prop.major != 9 || c->prop.minor != 0)))
        return 0;
    double sms = c->prop.multiProcessorCount, rows = ceil(m / 128.0) * batch;
    if (rows * ceil(n / 256.0) >= sms) return 256;
    if (want == DG_GPU_TF32_WGMMA || rows * ceil(n / 128.0) >= sms) return 128;
    return 0;
}

size_t dg__gpu_tf32_scratch_floats(const gpu_ctx *c, bool ta, bool tb, int m, int n, int k, int batch) {
#ifdef DG_HAVE_WGMMA
    if (tf32_kernel(c, m, n, batch)) return dg__gpu_wgmma_transpose_floats(ta, tb, m, n, k, batch);
#else
    (void)c, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)batch;
#endif
    return 0;
}

dg_status dg__gpu_sgemm_tf32(gpu_ctx *c, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                             const float *B, int ldb, float *C, int ldc, int batch, long long sa, long long sb,
                             long long sc, float *scratch, size_t scratch_floats) {
    if (c->prop.major < 8)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the TF32 sgemm needs compute capability 8.0 (this device: %d.%d)",
                        c->prop.major, c->prop.minor);
    if (m <= 0 || n <= 0 || batch <= 0) return DG_OK;
    int bn = tf32_kernel(c, m, n, batch);
    if (bn) {
#ifdef DG_HAVE_WGMMA
        return dg__gpu_sgemm_wgmma(c, bn, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, batch, sa, sb, sc, scratch,
                                   scratch_floats);
#else
        (void)scratch, (void)scratch_floats;
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the wgmma TF32 sgemm is not in this build (its CUDA targets do "
                        "not include compute capability 9.0)");
#endif
    }
    tc_args g = {m, n, k, lda, ldb, ldc, sa, sb, sc, A, B, C};
    bool vec = dg__gpu_vec4_ok(A, lda, sa, batch) && dg__gpu_vec4_ok(B, ldb, sb, batch);
    switch (pick_tf32_tile(c, m, n, batch)) { /* the cases' template arguments are tc_configs' rows */
    case 0: return tc_launch<tc_cfg<128, 128, 64, 64, 3, 2>>(c, ta, tb, vec, g, batch);
    default: return tc_launch<tc_cfg<64, 64, 32, 32, 3, 4>>(c, ta, tb, vec, g, batch);
    }
}
