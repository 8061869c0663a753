/* gpu_gemm_wgmma.cu: the own TF32 GEMM on Hopper's warpgroup tensor-core
 * instructions (wgmma.mma_async), row-major C[m,n] = op(A) op(B), batched
 * by strides; gpu_gemm_tf32.cu sends large products here on a compute
 * capability 9.0 device. Compiled for sm_90a only (wgmma is not part of
 * the portable sm_90 target): CMake builds this file alone for it.
 *
 * The kernel shape:
 *
 *   block      BM x BN of C (128 x 256 or 128 x 128), two warpgroups of
 *              128 threads, each owning 64 rows x BN (BN/2 accumulators a
 *              thread: wgmma's m64nBNk8 fragment, rows 16w + g and
 *              16w + g + 8 of warp w, columns 8j + 2t and 8j + 2t + 1);
 *   k loop     BK = 32 at a time, STAGES k-tiles of both operands in
 *              shared memory, filled by cp.async from all 256 threads two
 *              tiles ahead of the one multiplied; each warpgroup issues
 *              four m64nBNk8 wgmmas per k-tile and keeps one group in
 *              flight while the next tile's copies go out;
 *   shared     each tile K-major (wgmma reads TF32 operands only K-major),
 *              a row of 32 floats = 128 bytes, its 16-byte chunks swizzled
 *              (chunk c of row r at c ^ (r % 8): the hardware's 128-byte
 *              swizzle, which the descriptors name), so the tensor cores
 *              read without bank conflicts.
 *
 * Operands stored K-major in global memory (A as stored, B transposed)
 * arrive in 16-byte copies. The others (A transposed, B as stored) are
 * transposed first into the caller's scratch (k_transpose), or where there
 * is none, on the way in by 4-byte copies, a warp taking 8 rows x 4 k per
 * instruction (32-byte global segments, 32 distinct banks): four times the
 * copy instructions, which on an H100 cost 40% of the kernel's rate. Edges:
 * copies outside the matrices read nothing and zero-fill (cp.async's
 * src-size), stores to C are bounds-checked.
 *
 * Rounding: wgmma reads the fp32 bit patterns as TF32, keeping the top
 * 10 mantissa bits (truncation, not round-to-nearest as the mma.sync
 * kernel's cvt.rna): each input is off by less than 2^-10 relative. */
#include <limits.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_tiles.cuh"
#include "gpu_wgmma.cuh"

#define WG_BK 32
#define WG_BM 128       /* two warpgroups of 64 rows */
#define WG_THREADS 256
#define WG_STAGES 4
#define WG_GROUP_M 8    /* tile rows visited together (L2 reuse) */

struct wg_args {
    int m, n, k, lda, ldb, ldc;
    long long sa, sb, sc; /* batch strides, in floats */
    const float *A, *B;
    float *C;
};

/* One operand's k-tile of R rows (m for A, n for B) x 32 k into the
 * swizzled tile at byte address S. KC: k-contiguous in global memory. */
template <int R, bool KC, bool VEC>
static __device__ __forceinline__ void wg_load(uint32_t S, const float *__restrict__ X, int ld, int x0, int xdim,
                                               int k0, int kdim) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (KC && VEC) { /* 16-byte chunks: a warp covers 4 rows x 8 chunks */
#pragma unroll
        for (int q = 0; q < R * 8 / WG_THREADS; q++) {
            int i = threadIdx.x + q * WG_THREADS, r = i / 8, c = i % 8;
            int x = x0 + r, k = k0 + 4 * c, left = kdim - k;
            int valid = x < xdim ? (left < 4 ? (left > 0 ? left : 0) : 4) : 0;
            cp_async16(S + wg_chunk(r, c), valid ? X + (long long)x * ld + k : X, 4 * valid);
        }
    } else if (KC) { /* 4-byte copies along k: a warp covers one row's 32 k */
#pragma unroll 4
        for (int r = warp; r < R; r += WG_THREADS / 32) {
            int x = x0 + r, k = k0 + lane;
            bool in = x < xdim && k < kdim;
            cp_async4(S + wg_chunk(r, lane / 4) + 4 * (lane % 4), in ? X + (long long)x * ld + k : X, in ? 4 : 0);
        }
    } else { /* transposed on the way in: a warp covers 8 rows x 4 k */
        int e = lane % 4, j = lane / 4;
#pragma unroll 4
        for (int b = warp; b < R; b += WG_THREADS / 32) { /* R/8 row groups x 8 chunks: block b is rows
                                                             8 (b / 8).., k 4 (b % 8).. */
            int r = (b / 8) * 8 + j, c = b % 8;
            int x = x0 + r, k = k0 + 4 * c + e;
            bool in = x < xdim && k < kdim;
            cp_async4(S + wg_chunk(r, c) + 4 * e, in ? X + (long long)k * ld + x : X, in ? 4 : 0);
        }
    }
}

template <int N> struct wg_mma;

/* d (64 x 128 over the warpgroup) += A (64 x 8, descriptor da) B (8 x 128, db) */
template <> struct wg_mma<128> {
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
#ifndef WG_NO_WGMMA
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                         "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
                         "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                         "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                         "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                         "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                         "}, %64, %65, p, 1, 1;\n}\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                           "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                           "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                           "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                           "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                           "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                           "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                           "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                         : "l"(da), "l"(db), "r"(accumulate));
#endif
    }
};

/* d (64 x 256 over the warpgroup) += A (64 x 8, descriptor da) B (8 x 256, db) */
template <> struct wg_mma<256> {
    static __device__ __forceinline__ void run(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
#ifndef WG_NO_WGMMA
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                         "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
                         "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                         "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                         "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                         "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                         "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                         "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
                         "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
                         "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
                         "}, %128, %129, p, 1, 1;\n}\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                           "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                           "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                           "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                           "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                           "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                           "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                           "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                           "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                           "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                           "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                           "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                           "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                           "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                           "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                           "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                         : "l"(da), "l"(db), "r"(accumulate));
#endif
    }
};

template <int BN, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(WG_THREADS, 1) k_gemm_wgmma(wg_args g, int z0) {
#ifdef WG_NO_WGMMA
    __trap();
#else
    constexpr int A_BYTES = WG_BM * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES;
    extern __shared__ float smem_raw[];
    /* the swizzle repeats every 1024 bytes: tiles start on that boundary */
    uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem_raw) + 1023) & ~1023u;

    long long z = z0 + blockIdx.z;
    const float *A = g.A + z * g.sa, *B = g.B + z * g.sb;
    float *C = g.C + z * g.sc;
    int tm, tn;
    grouped_tile(blockIdx.x, (g.m + WG_BM - 1) / WG_BM, (g.n + BN - 1) / BN, WG_GROUP_M, &tm, &tn);
    int row0 = tm * WG_BM, col0 = tn * BN;
    int wg = threadIdx.x / 128;

    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;

    int ktiles = (g.k + WG_BK - 1) / WG_BK;
    /* tiles 0 .. STAGES-3 in flight; a group is committed even when empty,
     * so the count in flight is the same on every iteration */
#pragma unroll
    for (int s = 0; s < WG_STAGES - 2; s++) {
        if (s < ktiles) {
            wg_load<WG_BM, !TA, VEC>(base + s * STAGE, A, g.lda, row0, g.m, s * WG_BK, g.k);
            wg_load<BN, TB, VEC>(base + s * STAGE + A_BYTES, B, g.ldb, col0, g.n, s * WG_BK, g.k);
        }
        cp_commit();
    }
    for (int t = 0; t < ktiles; t++) {
        cp_wait<WG_STAGES - 3>(); /* this thread's copies of tile t have landed */
        proxy_fence();
        __syncthreads(); /* everyone's have; every wgmma of tile t-2 is done */
        int next = t + WG_STAGES - 2;
        if (next < ktiles) { /* into tile t-2's stage */
            uint32_t S = base + (next % WG_STAGES) * STAGE;
            wg_load<WG_BM, !TA, VEC>(S, A, g.lda, row0, g.m, next * WG_BK, g.k);
            wg_load<BN, TB, VEC>(S + A_BYTES, B, g.ldb, col0, g.n, next * WG_BK, g.k);
        }
        cp_commit();
        uint32_t sa = base + (t % WG_STAGES) * STAGE + wg * 64 * 128, sb = base + (t % WG_STAGES) * STAGE + A_BYTES;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WG_BK / 8; kk++) /* k-step kk: 32 bytes further into each K-major row,
                                                  whose 8-row groups are 1024 bytes apart */
            wg_mma<BN>::run(d, wg_desc(sa + 32 * kk, 16, 1024), wg_desc(sb + 32 * kk, 16, 1024), 1);
        wg_commit();
        wg_wait<1>(); /* tile t-1's wgmmas are done: its stage is free after the next barrier */
    }
    wg_wait<0>();
    cp_wait<0>(); /* no copy may land after the block has gone */

    int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4;
    int r0 = row0 + wg * 64 + w * 16 + lane / 4, c0 = col0 + 2 * (lane % 4);
    bool pair = ((uintptr_t)C & 7) == 0 && g.ldc % 2 == 0 && (gridDim.z == 1 || g.sc % 2 == 0);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = r0 + 8 * h;
        if (r >= g.m) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            int c = c0 + 8 * j;
            float *dst = C + (long long)r * g.ldc + c;
            float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            if (pair && c + 1 < g.n) {
                *(float2 *)dst = make_float2(v0, v1);
            } else {
                if (c < g.n) dst[0] = v0;
                if (c + 1 < g.n) dst[1] = v1;
            }
        }
    }
#endif
}

/* ---- host side ---- */

template <int BN, bool TA, bool TB, bool VEC>
static dg_status wg_launch_one(gpu_ctx *c, const wg_args &g, int batch) {
    constexpr size_t smem = (size_t)WG_STAGES * (WG_BM + BN) * 128 + 1024; /* + alignment slack */
    auto kern = k_gemm_wgmma<BN, TA, TB, VEC>;
    if (smem > c->prop.sharedMemPerBlockOptin)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: wgmma sgemm needs %zu bytes of shared memory per block (this "
                        "device: %zu)", smem, (size_t)c->prop.sharedMemPerBlockOptin);
    DG_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    long long tiles = (long long)((g.m + WG_BM - 1) / WG_BM) * ((g.n + BN - 1) / BN);
    if (tiles > INT_MAX)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: wgmma sgemm of %d x %d has more tiles than a grid holds", g.m, g.n);
    return launch_z_sliced(kern, (unsigned)tiles, 1, WG_THREADS, smem, c->stream, batch, g);
}

template <int BN, bool VEC>
static dg_status wg_launch_vec(gpu_ctx *c, bool ta, bool tb, const wg_args &g, int batch) {
    if (!ta && !tb) return wg_launch_one<BN, false, false, VEC>(c, g, batch);
    if (ta && !tb) return wg_launch_one<BN, true, false, VEC>(c, g, batch);
    if (!ta && tb) return wg_launch_one<BN, false, true, VEC>(c, g, batch);
    return wg_launch_one<BN, true, true, VEC>(c, g, batch);
}

template <int BN>
static dg_status wg_launch(gpu_ctx *c, bool ta, bool tb, const wg_args &g, int batch) {
    bool vec = dg__gpu_vec4_ok(g.A, g.lda, g.sa, batch) && dg__gpu_vec4_ok(g.B, g.ldb, g.sb, batch);
    return vec ? wg_launch_vec<BN, true>(c, ta, tb, g, batch) : wg_launch_vec<BN, false>(c, ta, tb, g, batch);
}

/* Y[z][c][r] = X[z][r][c] (X's rows ld apart, items sx apart; Y packed):
 * 32 x 32 tiles through shared memory, padded a column so the transposed
 * reads hit 32 banks; blockIdx.z + z0 is the batch item. */
__global__ void k_transpose(const float *__restrict__ X, int rows, int cols, int ld, long long sx, float *__restrict__ Y,
                            int z0) {
    __shared__ float tile[32][33];
    long long z = z0 + blockIdx.z;
    const float *x = X + z * sx;
    float *y = Y + z * (long long)rows * cols;
    int c = blockIdx.x * 32 + threadIdx.x, r0 = blockIdx.y * 32;
    for (int i = threadIdx.y; i < 32; i += 8)
        if (r0 + i < rows && c < cols) tile[i][threadIdx.x] = x[(long long)(r0 + i) * ld + c];
    __syncthreads();
    int r = r0 + threadIdx.x, c0 = blockIdx.x * 32;
    for (int i = threadIdx.y; i < 32; i += 8)
        if (c0 + i < cols && r < rows) y[(long long)(c0 + i) * rows + r] = tile[threadIdx.x][i];
}

static dg_status transpose(gpu_ctx *c, const float *X, int rows, int cols, int ld, long long sx, float *Y, int batch) {
    dim3 block(32, 8);
    unsigned gy = (unsigned)((rows + 31) / 32);
    if (gy > 65535) return dg__fail(DG_ERR_UNSUPPORTED, "gpu: transpose of %d rows exceeds the grid", rows);
    return launch_z_sliced(k_transpose, (unsigned)((cols + 31) / 32), gy, block, 0, c->stream, batch, X, rows, cols,
                           ld, sx, Y);
}

size_t dg__gpu_wgmma_transpose_floats(bool ta, bool tb, int m, int n, int k, int batch) {
    return (size_t)batch * ((ta ? (size_t)m * k : 0) + (tb ? 0 : (size_t)k * n));
}

dg_status dg__gpu_sgemm_wgmma(gpu_ctx *c, int bn, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                              const float *B, int ldb, float *C, int ldc, int batch, long long sa, long long sb,
                              long long sc, float *scratch, size_t scratch_floats) {
    if (c->prop.major != 9 || c->prop.minor != 0)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: the wgmma sgemm needs compute capability 9.0 (this device: %d.%d)",
                        c->prop.major, c->prop.minor);
    if (m <= 0 || n <= 0 || batch <= 0) return DG_OK;
    /* with room for them, MN-major operands are made K-major by a transpose
     * first (16-byte copies in the kernel instead of 4-byte ones) */
    if (scratch && scratch_floats >= dg__gpu_wgmma_transpose_floats(ta, tb, m, n, k, batch)) {
        dg_status st;
        if (ta) { /* A [k][m] -> [m][k] */
            if ((st = transpose(c, A, k, m, lda, sa, scratch, batch)) != DG_OK) return st;
            A = scratch, lda = k, sa = (long long)m * k, ta = false;
            scratch += (size_t)batch * m * k;
        }
        if (!tb) { /* B [k][n] -> [n][k] */
            if ((st = transpose(c, B, k, n, ldb, sb, scratch, batch)) != DG_OK) return st;
            B = scratch, ldb = k, sb = (long long)n * k, tb = true;
        }
    }
    wg_args g = {m, n, k, lda, ldb, ldc, sa, sb, sc, A, B, C};
    return bn == 256 ? wg_launch<256>(c, ta, tb, g, batch) : wg_launch<128>(c, ta, tb, g, batch);
}
