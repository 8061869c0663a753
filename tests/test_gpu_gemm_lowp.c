/* test_gpu_gemm_lowp.c: the own bf16 and fp16 tensor-core GEMM
 * (gpu_gemm_wgmma_lowp.cu, Hopper's wgmma), which runs a 16-bit matmul
 * whose step has the tiled GEMM: every transpose, sizes off its 128 x 128
 * tile and its k-tile of 64 (1, 7, 63, 64, 65, 129, up to 300), leading
 * dimensions that are and are not multiples of 8 elements (16-byte and
 * 2-byte copies), C float32 and 16-bit, against float64; batched matmul
 * nodes in plans, which must name and run the own kernel, not cuBLAS.
 * Skips where no GPU answers (gpu_util.h), the kernel's tests also where it
 * does not run (dg_gpu_has_tiled16: not compute capability 9.0).
 *
 * The bound, per element of C = A B with operands exactly representable
 * in the dtype (rounded on the host first): their products are exact in
 * float32, the sum over k is float32's (tensor cores may truncate rather
 * than round: at most 2u a step, u = 2^-24), so |C32 - C| <= 2 k u
 * sum|a b|, and the test allows twice that, E = 4 k u sum|a b|. A 16-bit C
 * is C32 rounded once to nearest: within u16 |C32| more (u16 = 2^-8 for
 * bf16, 2^-11 for fp16), plus fp16's subnormal spacing 2^-24 near zero. A
 * transpose read wrong, a k-step dropped, a tile edge read as data instead
 * of zero or an element rounded twice is off by orders of magnitude. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "gpu_backend/gpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

#define GUARD 64           /* elements after C that no store may touch */
#define SENTINEL 0x7e57u   /* a 16-bit pattern no product here makes    */

static float widen(dg_dtype dt, uint16_t v) { return dt == DG_BF16 ? dg__bf16_to_f32(v) : dg__f16_to_f32(v); }
static uint16_t narrow(dg_dtype dt, float v) { return dt == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v); }

/* n values uniform in [-1, 1) rounded to dt: lo the 16-bit bits, x their
 * exact float values */
static void rounded(dg_rng *r, dg_dtype dt, size_t n, uint16_t *lo, float *x) {
    for (size_t i = 0; i < n; i++) {
        lo[i] = narrow(dt, (float)(2 * dg_rng_uniform(r) - 1));
        x[i] = widen(dt, lo[i]);
    }
}

/* R[i][j] = sum_p op(A)(i,p) op(B)(p,j) and S = sum |a b| in float64; A
 * stored [m][lda] ([k][lda] if ta), B [k][ldb] ([n][ldb] if tb) */
static void ref_gemm(bool ta, bool tb, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                     double *R, double *S) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, a = 0;
            for (int p = 0; p < k; p++) {
                double x = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                double y = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                s += x * y;
                a += fabs(x * y);
            }
            R[(size_t)i * n + j] = s, S[(size_t)i * n + j] = a;
        }
}

/* the worst |c - r| over its bound (above): <= 1 passes; NaN counts as inf */
static double worst_ratio(dg_dtype dt, bool out16, int k, double c, double r, double s) {
    double e32 = 4.0 * k * 0x1p-24 * s;
    double u16 = dt == DG_BF16 ? 0x1p-8 : 0x1p-11, sub = dt == DG_F16 ? 0x1p-24 : 0;
    double bound = out16 ? e32 + u16 * (fabs(r) + e32) + sub : e32;
    double e = fabs(c - r) / (bound + 1e-30);
    return isnan(e) ? INFINITY : e;
}

static dg_backend *open_tiled16_or_skip(void) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    char why[256];
    if (!dg_gpu_has_tiled16(gpu, why, sizeof why)) {
        dg_backend_free(gpu);
        cr_skip_test("%s", why);
    }
    return gpu;
}

/* One product by dg_gpu_gemm_ex_tiled into a C poisoned with NaN (f32) or
 * a sentinel (16-bit) whose padding columns (ldc > n) and a guard behind
 * must stay untouched; returns the worst error over its bound. `shift`
 * moves A and B one element off their allocations' 256-byte alignment. */
static double tiled_product(dg_backend *gpu, dg_dtype dt, bool out16, bool ta, bool tb, int m, int n, int k,
                            const uint16_t *lA, int lda, const uint16_t *lB, int ldb, int ldc, bool shift,
                            const double *R, const double *S, const char *name) {
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc + GUARD;
    size_t es = out16 ? 2 : 4;
    void *dA, *dB, *dC;
    ASSERT_OK(dg_backend_alloc(gpu, 2 * (na + 1), &dA));
    ASSERT_OK(dg_backend_alloc(gpu, 2 * (nb + 1), &dB));
    ASSERT_OK(dg_backend_alloc(gpu, es * nc, &dC));
    uint16_t *a = (uint16_t *)dA + shift, *b = (uint16_t *)dB + shift;
    ASSERT_OK(dg_backend_upload(gpu, a, lA, 2 * na));
    ASSERT_OK(dg_backend_upload(gpu, b, lB, 2 * nb));
    void *C = malloc(es * nc);
    cr_assert(C);
    for (size_t i = 0; i < nc; i++) {
        if (out16) ((uint16_t *)C)[i] = SENTINEL;
        else ((float *)C)[i] = i < (size_t)m * ldc && (int)(i % ldc) < n ? NAN : 12345.0f;
    }
    ASSERT_OK(dg_backend_upload(gpu, dC, C, es * nc));
    ASSERT_OK(dg_gpu_gemm_ex_tiled(gpu, dt, out16 ? dt : DG_F32, ta, tb, m, n, k, a, lda, b, ldb, dC, ldc));
    ASSERT_OK(dg_backend_download(gpu, C, dC, es * nc));
    double worst = 0;
    for (size_t i = 0; i < nc; i++) {
        bool in = i < (size_t)m * ldc && (int)(i % ldc) < n;
        if (!in) {
            cr_assert(out16 ? ((uint16_t *)C)[i] == SENTINEL : ((float *)C)[i] == 12345.0f,
                      "%s: a store outside C, element %zu (row %zu, column %zu)", name, i, i / ldc, i % ldc);
            continue;
        }
        size_t r = i / ldc, j = i % ldc;
        double c = out16 ? widen(dt, ((uint16_t *)C)[i]) : ((float *)C)[i];
        double e = worst_ratio(dt, out16, k, c, R[r * n + j], S[r * n + j]);
        worst = e > worst ? e : worst;
    }
    free(C);
    dg_backend_release(gpu, dA);
    dg_backend_release(gpu, dB);
    dg_backend_release(gpu, dC);
    return worst;
}

/* every size x transpose x dtype x output, operands tight (lda = their
 * row, a multiple of 8 or not as the size says, 16-byte aligned) and
 * padded to an odd row (2-byte copies) one element off alignment; blocks
 * 128 wide on small grids, 256 on 2100 x 2200's; k split where a grid of
 * 128 x 128 tiles fills at most a quarter of the SMs and k has 16 tiles of
 * 64 or more (dg__gpu_gemm16_splits; on a 132-SM H200: 96 x 40 x 2000 in 8
 * slices of 4 k-tiles, 257 x 130 x 1100 in 4 of 5, 5, 5 and 3, 130 x 260 x
 * 3000 in 10, the last short), the slices' partials summed into C */
Test(gpu_gemm16, tiled_matches_float64_every_size_transpose_dtype_output, .timeout = 300) {
    dg_backend *gpu = open_tiled16_or_skip();
    /* the last fills a 132- or 144-SM device with 128 x 256 blocks (17 x 9): the wide kernel */
    const int sizes[][3] = {{1, 1, 1},     {7, 7, 7},     {63, 65, 64},  {64, 64, 64},   {65, 63, 129},
                            {129, 1, 65},  {1, 129, 300}, {128, 256, 8}, {200, 136, 72}, {300, 257, 191},
                            {2100, 2200, 40}, {96, 40, 2000}, {257, 130, 1100}, {130, 260, 3000}};
    const dg_dtype dts[] = {DG_BF16, DG_F16};
    uint64_t seed = test_seed();
    dg_rng rng = dg_rng_new(seed);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int d = 0; d < 2; d++)
            for (int t = 0; t < 4; t++)
                for (int pad = 0; pad < 2; pad++) {
                    int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
                    bool ta = t & 1, tb = t & 2;
                    int lda = (ta ? m : k) + (pad ? 3 : 0), ldb = (tb ? k : n) + (pad ? 5 : 0), ldc = n + (pad ? 3 : 0);
                    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb;
                    uint16_t *lA = malloc(2 * na), *lB = malloc(2 * nb);
                    float *A = malloc(4 * na), *B = malloc(4 * nb);
                    double *R = malloc(sizeof(double) * m * n), *S = malloc(sizeof(double) * m * n);
                    cr_assert(lA && lB && A && B && R && S);
                    rounded(&rng, dts[d], na, lA, A);
                    rounded(&rng, dts[d], nb, lB, B);
                    ref_gemm(ta, tb, m, n, k, A, lda, B, ldb, R, S);
                    for (int o = 0; o < 2; o++) {
                        char name[160];
                        snprintf(name, sizeof name, "%s %dx%dx%d ta=%d tb=%d ld %d,%d,%d%s out %s (seed %llu)",
                                 dg_dtype_name(dts[d]), m, n, k, ta, tb, lda, ldb, ldc, pad ? " shifted" : "",
                                 o ? dg_dtype_name(dts[d]) : "f32", (unsigned long long)seed);
                        double w = tiled_product(gpu, dts[d], o, ta, tb, m, n, k, lA, lda, lB, ldb, ldc, pad, R, S,
                                                 name);
                        cr_assert(w <= 1, "%s: error %.3g of the bound", name, w);
                    }
                    free(lA); free(lB); free(A); free(B); free(R); free(S);
                }
    dg_backend_free(gpu);
}

/* What the entry point refuses, with the reason. */
Test(gpu_gemm16, tiled_refuses_bad_arguments) {
    dg_backend *gpu = open_tiled16_or_skip();
    void *d;
    ASSERT_OK(dg_backend_alloc(gpu, 4096, &d));
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_BF16, DG_F32, false, false, 4, 4, 4, NULL, 4, d, 4, d, 4),
                 DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_BF16, DG_F32, false, false, 4, 4, 0, d, 4, d, 4, d, 4), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_F16, DG_F32, false, false, 4, 4, 8, d, 7, d, 4, d, 4), DG_ERR_INVALID,
                 "lda 7 below k = 8");
    cr_assert(strstr(dg_last_error(), "leading dimensions"), "%s", dg_last_error());
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_F16, DG_F32, true, false, 8, 4, 4, d, 7, d, 4, d, 4), DG_ERR_INVALID,
                 "lda 7 below m = 8 (A transposed)");
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_F32, DG_F32, false, false, 4, 4, 4, d, 4, d, 4, d, 4),
                 DG_ERR_UNSUPPORTED);
    cr_assert_eq(dg_gpu_gemm_ex_tiled(gpu, DG_BF16, DG_F16, false, false, 4, 4, 4, d, 4, d, 4, d, 4),
                 DG_ERR_UNSUPPORTED, "bf16 operands into an f16 C");
    cr_assert(strstr(dg_last_error(), "bf16") && strstr(dg_last_error(), "f16"), "%s", dg_last_error());
    dg_backend_release(gpu, d);
    dg_backend_free(gpu);
}

/* Batched matmul nodes [B,m,k] x [B,k,n] of bf16 and f16 operands (cast
 * from float32 inputs holding values exact in the dtype), both operands
 * as stored and both transposed, C float32 and 16-bit, in plans on the
 * tiled GEMM (replayed and node by node) and on cuBLAS: where the own
 * kernel runs, the tiled plan names it ("gpu-tiled-bf16") and the cuBLAS
 * plan cuBLAS; elsewhere both name cuBLAS (the fallback). Odd rows (45,
 * 33) are packed into the room the tiled plans reserve; a plan made while
 * the backend's default was cuBLAS reserved none, and run on the tiled
 * default its steps read them 2 bytes at a time. 2 x 100 x 70 x 1500 is 2
 * tiles: k split in 6 slices (the partials in the tiled plans' room; the
 * plan made under cuBLAS has none and runs it unsplit). Every batch item
 * of every plan within the bound. */
Test(gpu_gemm16, batched_plans_pick_the_own_kernel_and_match_float64, .timeout = 200) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    bool own = dg_gpu_has_tiled16(gpu, NULL, 0);
    /* B, m, n, k; the last fills the SMs with 128 x 256 blocks (2 x 2 x 80) */
    const int dims[][4] = {{3, 70, 33, 45}, {2, 129, 136, 64}, {80, 130, 260, 72}, {2, 100, 70, 1500}};
    const dg_dtype dts[] = {DG_BF16, DG_F16};
    uint64_t seed = test_seed();
    dg_rng rng = dg_rng_new(seed);
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++)
        for (int d = 0; d < 2; d++)
            for (int tr = 0; tr < 2; tr++)
                for (int o = 0; o < 2; o++) {
                    int nb = dims[di][0], m = dims[di][1], n = dims[di][2], k = dims[di][3];
                    dg_dtype dt = dts[d];
                    dg_graph *g = dg_graph_new();
                    dg_node *a = dg_input(g, "a", tr ? DG_SHAPE(nb, k, m) : DG_SHAPE(nb, m, k));
                    dg_node *b = dg_input(g, "b", tr ? DG_SHAPE(nb, n, k) : DG_SHAPE(nb, k, n));
                    dg_node *c = dg_matmul_ex(g, dg_cast(g, a, dt), dg_cast(g, b, dt), tr, tr, o ? dt : DG_F32);
                    ASSERT_OK(dg_graph_status(g));
                    size_t na = (size_t)nb * m * k, nbb = (size_t)nb * k * n, nc = (size_t)nb * m * n;
                    uint16_t *lA = malloc(2 * na), *lB = malloc(2 * nbb), *C16 = malloc(2 * nc);
                    float *A = malloc(4 * na), *B = malloc(4 * nbb), *C = malloc(4 * nc);
                    double *R = malloc(sizeof(double) * nc), *S = malloc(sizeof(double) * nc);
                    cr_assert(lA && lB && C16 && A && B && C && R && S);
                    rounded(&rng, dt, na, lA, A);
                    rounded(&rng, dt, nbb, lB, B);
                    for (int z = 0; z < nb; z++)
                        ref_gemm(tr, tr, m, n, k, A + (size_t)z * m * k, tr ? m : k, B + (size_t)z * k * n, tr ? k : n,
                                 R + (size_t)z * m * n, S + (size_t)z * m * n);
                    /* tiled replayed, tiled node by node, cuBLAS, the default made under cuBLAS run tiled */
                    for (int run = 0; run < 4; run++) {
                        dg_plan *p;
                        dg_plan_opts po = {.no_replay = run == 1 || run == 3,
                                           .gemm = run < 2 ? DG_GEMM_OWN : run == 2 ? DG_GEMM_VENDOR : DG_GEMM_DEFAULT};
                        dg_gpu_set_gemm(gpu, DG_GPU_GEMM_CUBLAS);
                        ASSERT_OK(dg_plan_new(&p, g, gpu, &c, 1, &po));
                        char impl[64], want[64];
                        ASSERT_OK(dg_plan_node_impl(p, c, impl, sizeof impl));
                        snprintf(want, sizeof want, "gpu-%s-%s", run < 2 && own ? "tiled" : "cublas",
                                 dg_dtype_name(dt));
                        cr_assert_str_eq(impl, want, "run %d: a plan of a %s matmul (own kernel here: %d)", run,
                                         dg_dtype_name(dt), own);
                        dg_gpu_set_gemm(gpu, DG_GPU_GEMM_TILED);
                        ASSERT_OK(dg_plan_set(p, a, A, dg_node_bytes(a)));
                        ASSERT_OK(dg_plan_set(p, b, B, dg_node_bytes(b)));
                        ASSERT_OK(dg_plan_run(p));
                        ASSERT_OK(dg_plan_run(p)); /* the replayed run, where replay is on */
                        if (o) {
                            ASSERT_OK(dg_plan_get(p, c, C16, dg_node_bytes(c)));
                            for (size_t i = 0; i < nc; i++) C[i] = widen(dt, C16[i]);
                        } else {
                            ASSERT_OK(dg_plan_get(p, c, C, dg_node_bytes(c)));
                        }
                        dg_plan_free(p);
                        for (int z = 0; z < nb; z++) {
                            double worst = 0;
                            for (size_t i = (size_t)z * m * n; i < (size_t)(z + 1) * m * n; i++) {
                                double e = worst_ratio(dt, o, k, C[i], R[i], S[i]);
                                worst = e > worst ? e : worst;
                            }
                            cr_assert(worst <= 1, "%s [%d,%d,%d]x[%d,%d,%d] trans %d out %s item %d, run %d (%s): "
                                      "error %.3g of the bound (seed %llu)", dg_dtype_name(dt), nb, m, k, nb, k, n, tr,
                                      o ? dg_dtype_name(dt) : "f32", z, run, impl, worst, (unsigned long long)seed);
                        }
                    }
                    free(lA); free(lB); free(C16); free(A); free(B); free(C); free(R); free(S);
                    dg_graph_free(g);
                }
    dg_backend_free(gpu);
}
