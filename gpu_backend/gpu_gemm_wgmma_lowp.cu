/* gpu_gemm_wgmma_lowp.cu: the own bf16 and fp16 GEMM on Hopper's warpgroup
 * tensor-core instructions (wgmma.mma_async), row-major C[m,n] = op(A)
 * op(B), A and B of one 16-bit dtype, float32 accumulation, C float32 or
 * the operands' dtype (rounded once, to nearest even, as it is stored),
 * batched by strides: the tiled GEMM's answer for a matmul of bf16 or f16
 * operands on a compute capability 9.0 device (gpu_gemm.cu). Compiled for
 * sm_90a alone, as gpu_gemm_wgmma.cu (CMake).
 *
 * The kernel shape:
 *
 *   block      128 x BN of C (BN 256 where a grid of such tiles has a block
 *              for every SM, else 128: lp_block_n), two warpgroups of 128
 *              threads, each owning 64 rows x BN (BN/2 accumulators a
 *              thread: wgmma's m64nBN fragment, rows 16w + g and
 *              16w + g + 8 of warp w, columns 8j + 2t and 8j + 2t + 1 for
 *              lane 4g + t);
 *   k loop     BK = 64 at a time, 4 stages of both operands' k-tiles in
 *              shared memory ((128 + BN) x 128 bytes a stage), filled by
 *              all 256 threads two tiles ahead of the one multiplied; each
 *              warpgroup issues four m64nBNk16 wgmmas per k-tile, then the
 *              copies of a later tile, and keeps one group of wgmmas in
 *              flight;
 *   shared     128-byte rows in 1024-byte swizzle atoms (gpu_wgmma.cuh),
 *              each operand in its global orientation, so every copy moves
 *              16 bytes that are contiguous in global memory:
 *                K-major (A as stored, B transposed): row r = m or n, its
 *                64 k in one row; the descriptor's transpose bit 0;
 *                MN-major (A transposed, B as stored): atom (j, q) holds
 *                m or n 64j .. 64j+63 (one row) x k 8q .. 8q+7 (8 rows),
 *                atoms along k 1024 bytes apart (SBO), along m or n 8192
 *                (LBO); transpose bit 1: wgmma reads the 16-bit operand
 *                MN-major itself, no transpose pass.
 *
 * Copies: 16-byte cp.async where the operand allows it (16-byte aligned
 * base, leading dimension and batch stride multiples of 8 elements), the
 * bytes past the matrix's edge zero-filled (src-size). An operand that
 * does not is packed first into the caller's scratch, rows padded to
 * multiples of 8 (k_pack16: one pass over it), or where the scratch is too
 * small read by eight 2-byte loads a chunk, zeros past the edge, one
 * 16-byte shared store: slower (the loads hold the thread until they
 * arrive, which is why the copies go out after the tile's wgmmas), as
 * correct. Stores to C are bounds-checked, in pairs where C's alignment
 * allows.
 *
 * Split k: a grid of 128 x 128 tiles (times the batch) that fills at most
 * a quarter of the SMs leaves most of the device idle for the whole k loop (one
 * row of tiles of a skinny product: 4096 x 128 x 4096 is 32 blocks on 132
 * SMs). There block (tile, slice) sums only its slice of the k-tiles
 * (blockIdx.y; dg__gpu_gemm16_splits says how many) into float32 partials
 * in the scratch, [slice][batch][m][n], and k_splitk_sum adds the slices
 * in their order (the same sum on every run: no atomics) and rounds into
 * C. Without the partials' room in the scratch the grid stays unsplit.
 *
 * Numerics: products of bf16 or fp16 values are exact in float32; the
 * tensor cores sum them in float32 (truncating, not rounding, within an
 * instruction's k = 16), the sums across k-steps in the float32
 * accumulators: as cuBLAS's CUBLAS_COMPUTE_32F. A 16-bit C is rounded
 * once from those sums. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_tiles.cuh"
#include "gpu_wgmma.cuh"

#define LP_BM 128
#define LP_BK 64        /* 64 16-bit values: one 128-byte row              */
#define LP_THREADS 256  /* two warpgroups of 64 rows                       */
#define LP_STAGES 4
#define LP_GROUP_M 8    /* tile rows visited together (L2 reuse)           */
#define LP_A_TILE 16384 /* bytes of A's k-tile: 128 x 64 x 2 (B's: BN x 128) */
#define LP_ATOMS_MN 8192 /* MN-major: bytes from one 64-wide atom column to
                            the next (8 atoms of 8 k, 1024 bytes each)     */

struct lp_args {
    int m, n, k, lda, ldb, ldc;
    long long sa, sb, sc; /* batch strides, in elements */
    int kt_per, slices;   /* k-tiles of a k slice, slices (1: all of k)  */
    long long sy;         /* C's stride from one slice to the next       */
    const uint16_t *A, *B;
    void *C;
};

/* One operand's k-tile (R = 128 or 256 along m or n from x0, 64 along k
 * from k0) of X (row stride ld; xdim, kdim its extents) into the stage at
 * byte address S: R x 8 chunks of 8 elements, R / 32 a thread. KM: K-major
 * (k contiguous in global memory): a warp copies 4 rows of 128 bytes; else
 * MN-major: a warp copies 2 k-rows of 256 bytes (R = 128) or one of 512. */
template <int R, bool KM, bool VEC>
static __device__ __forceinline__ void lp_load(uint32_t S, const uint16_t *__restrict__ X, int ld, int x0, int xdim,
                                               int k0, int kdim) {
#pragma unroll
    for (int q = 0; q < R * LP_BK / 8 / LP_THREADS; q++) {
        int i = threadIdx.x + q * LP_THREADS, left, valid;
        const uint16_t *src;
        uint32_t off;
        if (KM) {
            int r = i / 8, c = i % 8, x = x0 + r, k = k0 + 8 * c;
            left = kdim - k;
            valid = x < xdim ? left : 0;
            src = X + (long long)x * ld + k;
            off = wg_chunk(r, c);
        } else {
            int kk = i / (R / 8), c = i % (R / 8), x = x0 + 8 * c, k = k0 + kk;
            left = xdim - x;
            valid = k < kdim ? left : 0;
            src = X + (long long)k * ld + x;
            off = (uint32_t)(c / 8) * LP_ATOMS_MN + wg_chunk(kk, c % 8);
        }
        valid = valid < 0 ? 0 : valid > 8 ? 8 : valid;
        if (VEC) {
            cp_async16(S + off, (const float *)(valid ? src : X), 2 * valid); /* src-size 0 reads nothing */
        } else {
            uint32_t w[4]; /* element 2e in word e's low half (little-endian, as in memory) */
#pragma unroll
            for (int e = 0; e < 4; e++) {
                uint32_t lo = 2 * e < valid ? __ldg((const unsigned short *)src + 2 * e) : 0u;
                uint32_t hi = 2 * e + 1 < valid ? __ldg((const unsigned short *)src + 2 * e + 1) : 0u;
                w[e] = lo | hi << 16;
            }
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(S + off), "r"(w[0]), "r"(w[1]),
                         "r"(w[2]), "r"(w[3]) : "memory");
        }
    }
}

#define LP_D16(i)                                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),    \
        "+f"(d[i + 7]), "+f"(d[i + 8]), "+f"(d[i + 9]), "+f"(d[i + 10]), "+f"(d[i + 11]), "+f"(d[i + 12]),         \
        "+f"(d[i + 13]), "+f"(d[i + 14]), "+f"(d[i + 15])
#define LP_REGS64                                                                                                   \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,"   \
    "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55," \
    "%56,%57,%58,%59,%60,%61,%62,%63"
#define LP_REGS128                                                                                                  \
    LP_REGS64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,"  \
              "%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109," \
              "%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
/* d (64 x N over the warpgroup) += A (64 x 16, descriptor da) B (16 x N,
 * db) in element type TY: the N/2 accumulators are operands %0.. (REGS),
 * da, db, TRA, TRB and the accumulate flag the five after them, named in
 * OPS (P: the flag's operand, which sets the predicate p, true: add into
 * d); TRA, TRB the transpose bits (1: MN-major) */
#define LP_MMA(N, TY, REGS, P, OPS, ...)                                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                                   \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, " OPS ";\n}\n"            \
                 : __VA_ARGS__                                                                                      \
                 : "l"(da), "l"(db), "n"(TRA), "n"(TRB), "r"(1))
#define LP_OPS64 "%64, %65, p, 1, 1, %66, %67"
#define LP_OPS128 "%128, %129, p, 1, 1, %130, %131"

template <int BN, bool F16, int TRA, int TRB> struct lp_mma;

template <bool F16, int TRA, int TRB> struct lp_mma<128, F16, TRA, TRB> {
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db) {
#ifndef WG_NO_WGMMA
        if (F16)
            LP_MMA(128, "f16", LP_REGS64, "%68", LP_OPS64, LP_D16(0), LP_D16(16), LP_D16(32), LP_D16(48));
        else
            LP_MMA(128, "bf16", LP_REGS64, "%68", LP_OPS64, LP_D16(0), LP_D16(16), LP_D16(32), LP_D16(48));
#endif
    }
};

template <bool F16, int TRA, int TRB> struct lp_mma<256, F16, TRA, TRB> {
    static __device__ __forceinline__ void run(float (&d)[128], uint64_t da, uint64_t db) {
#ifndef WG_NO_WGMMA
        if (F16)
            LP_MMA(256, "f16", LP_REGS128, "%132", LP_OPS128, LP_D16(0), LP_D16(16), LP_D16(32), LP_D16(48),
                   LP_D16(64), LP_D16(80), LP_D16(96), LP_D16(112));
        else
            LP_MMA(256, "bf16", LP_REGS128, "%132", LP_OPS128, LP_D16(0), LP_D16(16), LP_D16(32), LP_D16(48),
                   LP_D16(64), LP_D16(80), LP_D16(96), LP_D16(112));
#endif
    }
};

/* C's element (r, c) from v: float32, or rounded to the 16-bit dtype */
template <bool F16, bool OUT16>
static __device__ __forceinline__ void lp_store1(void *C, long long i, float v) {
    if (!OUT16) ((float *)C)[i] = v;
    else if (F16) ((__half *)C)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)C)[i] = __float2bfloat16_rn(v);
}

/* elements i and i+1 of C, at an address aligned to their pair */
template <bool F16, bool OUT16>
static __device__ __forceinline__ void lp_store2(void *C, long long i, float v0, float v1) {
    if (!OUT16) {
        *(float2 *)((float *)C + i) = make_float2(v0, v1);
    } else if (F16) {
        *(__half2 *)((__half *)C + i) = __floats2half2_rn(v0, v1);
    } else {
        *(__nv_bfloat162 *)((__nv_bfloat16 *)C + i) = __floats2bfloat162_rn(v0, v1);
    }
}

/* C tile of batch item z0 + blockIdx.z; blockIdx.x walks the tiles in
 * groups of LP_GROUP_M tile rows */
template <int BN, bool F16, bool OUT16, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(LP_THREADS, 1) k_gemm_wgmma_lowp(lp_args g, int z0) {
#ifdef WG_NO_WGMMA
    __trap();
#else
    constexpr uint32_t STAGE = LP_A_TILE + BN * 128;
    extern __shared__ __align__(16) unsigned char lp_smem[];
    uint32_t base = ((uint32_t)__cvta_generic_to_shared(lp_smem) + 1023) & ~1023u; /* the atoms' boundary */

    long long z = z0 + blockIdx.z;
    const uint16_t *A = g.A + z * g.sa, *B = g.B + z * g.sb;
    int tm, tn;
    grouped_tile(blockIdx.x, (g.m + LP_BM - 1) / LP_BM, (g.n + BN - 1) / BN, LP_GROUP_M, &tm, &tn);
    int row0 = tm * LP_BM, col0 = tn * BN;
    int wg = threadIdx.x / 128;

    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;

    int kt0 = blockIdx.y * g.kt_per; /* this block's slice of k: tiles kt0 .. kt0 + ktiles - 1 */
    int ktiles = min((g.k + LP_BK - 1) / LP_BK - kt0, g.kt_per);
    /* tiles 0 .. STAGES-3 in flight; a group is committed even when empty,
     * so the count in flight is the same on every iteration */
#pragma unroll
    for (int s = 0; s < LP_STAGES - 2; s++) {
        if (s < ktiles) {
            lp_load<LP_BM, !TA, VEC>(base + s * STAGE, A, g.lda, row0, g.m, (kt0 + s) * LP_BK, g.k);
            lp_load<BN, TB, VEC>(base + s * STAGE + LP_A_TILE, B, g.ldb, col0, g.n, (kt0 + s) * LP_BK, g.k);
        }
        cp_commit();
    }
    for (int t = 0; t < ktiles; t++) {
        cp_wait<LP_STAGES - 3>(); /* this thread's copies of tile t have landed */
        proxy_fence();
        __syncthreads(); /* everyone's have; both warpgroups' wgmmas of tile t-2 are done */
        uint32_t sa = base + (t % LP_STAGES) * STAGE, sb = sa + LP_A_TILE;
        /* this warpgroup's 64 rows of A: rows 64 wg.. (K-major) or atom
         * column wg (MN-major), 8192 bytes in either layout */
        sa += (uint32_t)wg * 8192;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < LP_BK / 16; kk++) { /* k-step kk: 32 bytes into a K-major row, 2 atoms of
                                                     an MN-major column */
            uint64_t da = TA ? wg_desc(sa + 2048 * kk, LP_ATOMS_MN, 1024) : wg_desc(sa + 32 * kk, 16, 1024);
            uint64_t db = TB ? wg_desc(sb + 32 * kk, 16, 1024) : wg_desc(sb + 2048 * kk, LP_ATOMS_MN, 1024);
            lp_mma<BN, F16, TA ? 1 : 0, TB ? 0 : 1>::run(d, da, db);
        }
        wg_commit();
        int next = t + LP_STAGES - 2;
        if (next < ktiles) { /* into tile t-2's stage, free since the barrier */
            uint32_t S = base + (next % LP_STAGES) * STAGE;
            lp_load<LP_BM, !TA, VEC>(S, A, g.lda, row0, g.m, (kt0 + next) * LP_BK, g.k);
            lp_load<BN, TB, VEC>(S + LP_A_TILE, B, g.ldb, col0, g.n, (kt0 + next) * LP_BK, g.k);
        }
        cp_commit();
        wg_wait<1>(); /* tile t-1's wgmmas are done: its stage is free after the next barrier */
    }
    wg_wait<0>();
    cp_wait<0>(); /* no copy may land after the block has gone */

    long long zc = z * g.sc + blockIdx.y * g.sy;
    int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4;
    int r0 = row0 + wg * 64 + w * 16 + lane / 4, c0 = col0 + 2 * (lane % 4);
    /* pairs start at even columns: aligned where C, ldc and the stride are */
    bool pair = ((uintptr_t)g.C & (OUT16 ? 3 : 7)) == 0 && g.ldc % 2 == 0 && (gridDim.z == 1 || g.sc % 2 == 0);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = r0 + 8 * h;
        if (r >= g.m) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            int c = c0 + 8 * j;
            long long i = zc + (long long)r * g.ldc + c;
            float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            if (pair && c + 1 < g.n) {
                lp_store2<F16, OUT16>(g.C, i, v0, v1);
            } else {
                if (c < g.n) lp_store1<F16, OUT16>(g.C, i, v0);
                if (c + 1 < g.n) lp_store1<F16, OUT16>(g.C, i + 1, v1);
            }
        }
    }
#endif
}

/* ---- host side ---- */

template <int BN, bool F16, bool OUT16, bool TA, bool TB, bool VEC>
static dg_status lp_launch_one(gpu_ctx *c, const lp_args &g, int batch) {
    constexpr size_t smem = (size_t)LP_STAGES * (LP_A_TILE + BN * 128) + 1024; /* + alignment slack */
    auto kern = k_gemm_wgmma_lowp<BN, F16, OUT16, TA, TB, VEC>;
    if (smem > c->prop.sharedMemPerBlockOptin)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the wgmma 16-bit GEMM needs %zu bytes of shared memory per block "
                        "(this device: %zu)", smem, (size_t)c->prop.sharedMemPerBlockOptin);
    /* a host-side attribute: allowed during stream capture */
    DG_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    long long tiles = (long long)((g.m + LP_BM - 1) / LP_BM) * ((g.n + BN - 1) / BN);
    if (tiles > INT_MAX)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: wgmma 16-bit GEMM of %d x %d has more tiles than a grid holds",
                        g.m, g.n);
    return launch_z_sliced(kern, (unsigned)tiles, (unsigned)g.slices, LP_THREADS, smem, c->stream, batch, g);
}

template <int BN, bool F16, bool OUT16, bool VEC>
static dg_status lp_launch_t(gpu_ctx *c, bool ta, bool tb, const lp_args &g, int batch) {
    if (!ta && !tb) return lp_launch_one<BN, F16, OUT16, false, false, VEC>(c, g, batch);
    if (ta && !tb) return lp_launch_one<BN, F16, OUT16, true, false, VEC>(c, g, batch);
    if (!ta && tb) return lp_launch_one<BN, F16, OUT16, false, true, VEC>(c, g, batch);
    return lp_launch_one<BN, F16, OUT16, true, true, VEC>(c, g, batch);
}

template <int BN, bool F16, bool OUT16>
static dg_status lp_launch_v(gpu_ctx *c, bool ta, bool tb, bool vec, const lp_args &g, int batch) {
    return vec ? lp_launch_t<BN, F16, OUT16, true>(c, ta, tb, g, batch)
               : lp_launch_t<BN, F16, OUT16, false>(c, ta, tb, g, batch);
}

template <bool F16, bool OUT16>
static dg_status lp_launch(gpu_ctx *c, int bn, bool ta, bool tb, bool vec, const lp_args &g, int batch) {
    return bn == 256 ? lp_launch_v<256, F16, OUT16>(c, ta, tb, vec, g, batch)
                     : lp_launch_v<128, F16, OUT16>(c, ta, tb, vec, g, batch);
}

/* The block width: 256 where a grid of 128 x 256 tiles has a block for
 * every SM (half the operand traffic per product of 128 x 128's), else 128,
 * whose grid spreads over twice the blocks (as the TF32 wgmma kernel's
 * choice). */
static int lp_block_n(const gpu_ctx *c, int m, int n, int batch) {
    double rows = (double)((m + LP_BM - 1) / LP_BM) * batch;
    return rows * ((n + 255) / 256) >= c->prop.multiProcessorCount ? 256 : 128;
}

/* C[z] = the sum of the slices' partials P[y][z] (m x n each, y in order),
 * rounded to C's type once */
template <bool F16, bool OUT16>
__global__ void k_splitk_sum(const float *__restrict__ P, int slices, int m, int n, int batch, void *C, int ldc,
                             long long sc) {
    long long mn = (long long)m * n, all = mn * batch;
    GRID_STRIDE(i, all) {
        float s = P[i];
        for (int y = 1; y < slices; y++) s += P[y * all + i];
        long long z = i / mn, r = i % mn / n, col = i % n;
        lp_store1<F16, OUT16>(C, z * sc + r * ldc + col, s);
    }
}

/* The product with k split over g.slices (> 1) blocks a tile: float32
 * partials into P (dg__gpu_gemm16_partial_bytes), then their sum into C */
template <bool F16, bool OUT16>
static dg_status lp_split(gpu_ctx *c, bool ta, bool tb, bool vec, const lp_args &g, int batch, float *P) {
    lp_args p = g;
    p.C = P, p.ldc = g.n, p.sc = (long long)g.m * g.n, p.sy = p.sc * batch;
    dg_status st = lp_launch<F16, false>(c, 128, ta, tb, vec, p, batch);
    if (st != DG_OK) return st;
    k_splitk_sum<F16, OUT16><<<grid_for(p.sy, 256), 256, 0, c->stream>>>(P, g.slices, g.m, g.n, batch, g.C, g.ldc,
                                                                          g.sc);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* Y[z] = X[z], rows x cols: X's rows ld apart and items sx apart, Y's rows
 * ldy apart (a multiple of 8; the pad is never read) and items rows x ldy;
 * blockIdx.z + z0 is the batch item */
__global__ void k_pack16(const uint16_t *__restrict__ X, int rows, int cols, int ld, long long sx,
                         uint16_t *__restrict__ Y, int ldy, int z0) {
    long long z = z0 + blockIdx.z;
    const uint16_t *x = X + z * sx;
    uint16_t *y = Y + z * (long long)rows * ldy;
    GRID_STRIDE(i, (long long)rows * cols) {
        long long r = i / cols, c = i % cols;
        y[r * ldy + c] = x[r * ld + c];
    }
}

/* An operand (rows x cols as stored) that 16-byte copies cannot read,
 * packed into the room at *room (*left bytes) where it fits: then *X, *ld,
 * *stride are the packed copy's and the room shrinks by its bytes. */
static dg_status lp_pack(gpu_ctx *c, const uint16_t **X, int rows, int cols, int *ld, long long *stride, int batch,
                         unsigned char **room, size_t *left) {
    size_t bytes = dg__gpu_gemm16_pack_bytes(rows, cols, batch);
    if (dg__gpu_vec8_ok(*X, *ld, *stride, batch) || !*room || *left < bytes) return DG_OK;
    int ldy = (cols + 7) & ~7;
    uint16_t *Y = (uint16_t *)*room;
    dg_status st = launch_z_sliced(k_pack16, grid_for((long long)rows * cols, 256), 1, 256, 0, c->stream, batch, *X,
                                   rows, cols, *ld, *stride, Y, ldy);
    if (st != DG_OK) return st;
    *X = Y, *ld = ldy, *stride = (long long)rows * ldy;
    *room += bytes, *left -= bytes;
    return DG_OK;
}

dg_status dg__gpu_gemm_wgmma_lowp(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                                  const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch,
                                  long long sa, long long sb, long long sc, void *scratch, size_t scratch_bytes) {
    if (c->prop.major != 9 || c->prop.minor != 0)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the wgmma 16-bit GEMM needs compute capability 9.0 (this device: "
                        "%d.%d)", c->prop.major, c->prop.minor);
    if ((dtype != DG_BF16 && dtype != DG_F16) || (out != DG_F32 && out != dtype))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the wgmma 16-bit GEMM takes bf16 or f16 operands into f32 or their "
                        "own dtype (not %s into %s)", dg_dtype_name(dtype), dg_dtype_name(out));
    if (m <= 0 || n <= 0 || batch <= 0) return DG_OK;
    int ktiles = (k + LP_BK - 1) / LP_BK;
    lp_args g = {m, n, k, lda, ldb, ldc, sa, sb, sc, ktiles, 1, 0, (const uint16_t *)A, (const uint16_t *)B, C};
    unsigned char *room = (unsigned char *)scratch;
    dg_status st = lp_pack(c, &g.A, ta ? k : m, ta ? m : k, &g.lda, &g.sa, batch, &room, &scratch_bytes);
    if (st == DG_OK) st = lp_pack(c, &g.B, tb ? n : k, tb ? k : n, &g.ldb, &g.sb, batch, &room, &scratch_bytes);
    if (st != DG_OK) return st;
    bool vec = dg__gpu_vec8_ok(g.A, g.lda, g.sa, batch) && dg__gpu_vec8_ok(g.B, g.ldb, g.sb, batch);
    bool o16 = out != DG_F32;
    int splits = dg__gpu_gemm16_splits(c, m, n, k, batch);
    if (splits > 1 && room && scratch_bytes >= dg__gpu_gemm16_partial_bytes(splits, m, n, batch)) {
        g.kt_per = (ktiles + splits - 1) / splits;
        g.slices = (ktiles + g.kt_per - 1) / g.kt_per; /* <= splits */
        float *P = (float *)room;
        if (dtype == DG_F16)
            return o16 ? lp_split<true, true>(c, ta, tb, vec, g, batch, P)
                       : lp_split<true, false>(c, ta, tb, vec, g, batch, P);
        return o16 ? lp_split<false, true>(c, ta, tb, vec, g, batch, P)
                   : lp_split<false, false>(c, ta, tb, vec, g, batch, P);
    }
    int bn = lp_block_n(c, m, n, batch);
    if (dtype == DG_F16)
        return o16 ? lp_launch<true, true>(c, bn, ta, tb, vec, g, batch)
                   : lp_launch<true, false>(c, bn, ta, tb, vec, g, batch);
    return o16 ? lp_launch<false, true>(c, bn, ta, tb, vec, g, batch)
               : lp_launch<false, false>(c, bn, ta, tb, vec, g, batch);
}
