/* test_onednn.c: the CPU backend's oneDNN GEMM (DG_CPU_GEMM_ONEDNN):
 * float32, bf16 and f16 products of every transposition and ragged sizes
 * against the float64 product of the same rounded operands; the primitive
 * cache (made once per shape, right when shapes alternate, past its 16
 * entries); dg_matmul's vendor choice running bf16 by oneDNN, batched.
 * In a build without oneDNN (DG_ONEDNN=OFF) these skip, saying so, but
 * the first, which checks the choice is refused there.
 *
 * Tolerance: the operands are exact once rounded (A and B hold the values
 * the reference multiplies), so the only error is the float32 arithmetic:
 * for a sum of k products in any order, |C - exact| <= gamma * sum |a b|
 * with gamma = (k + 1) u / (1 - (k + 1) u), u = 2^-24 (Higham, Accuracy
 * and Stability, 3.1: k - 1 additions and, for float32 operands, one
 * rounding of each product; bf16 and f16 products are exact in float32).
 * The bound is taken per element against sum |a b| computed alongside the
 * reference, so it holds at k = 1000 without being loose at k = 1. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

#define SKIP_WITHOUT_ONEDNN()                                                                                    \
    do {                                                                                                         \
        if (!dg_cpu_has_onednn()) cr_skip_test("built with DG_ONEDNN=OFF: no oneDNN GEMM to test");              \
    } while (0)

/* n operands of dtype t, uniform in [-1, 1) from seed: `raw` holds them
 * as the GEMM reads them (float32 or 16-bit patterns), `val` their values */
static void fill(dg_dtype t, void *raw, double *val, size_t n, uint64_t seed) {
    dg_rng r = dg_rng_new(seed);
    for (size_t i = 0; i < n; i++) {
        float v = (float)(dg_rng_uniform(&r) * 2 - 1);
        if (t == DG_F32) {
            ((float *)raw)[i] = v;
            val[i] = v;
        } else {
            uint16_t h = t == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v);
            ((uint16_t *)raw)[i] = h;
            val[i] = t == DG_BF16 ? dg__bf16_to_f32(h) : dg__f16_to_f32(h);
        }
    }
}

/* C[b] (m x n, packed) against the float64 op(a[b]) op(b[b]) within the
 * float32 accumulation bound above */
static void assert_product(const char *what, const float *C, const double *a, const double *b, int batch, int m, int n,
                           int k, bool ta, bool tb) {
    const double u = 0x1p-24, gamma = (k + 1) * u / (1 - (k + 1) * u);
    for (int q = 0; q < batch; q++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                const double *aq = a + (size_t)q * m * k, *bq = b + (size_t)q * k * n;
                double want = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double t = aq[ta ? (size_t)p * m + i : (size_t)i * k + p] * bq[tb ? (size_t)j * k + p : (size_t)p * n + j];
                    want += t;
                    mag += fabs(t);
                }
                double got = C[((size_t)q * m + i) * n + j];
                cr_assert(fabs(got - want) <= gamma * mag + 1e-30,
                          "%s %dx%dx%d batch %d ta=%d tb=%d: C[%d][%d,%d] = %.9g, want %.9g (bound %.3g)", what, m, n,
                          k, batch, ta, tb, q, i, j, got, want, gamma * mag);
            }
}

/* one product of dtype t by dg_cpu_gemm_ex (and, for float32, dg_cpu_sgemm
 * too) with oneDNN, checked */
static void check_gemm(dg_backend *be, dg_dtype t, int m, int n, int k, bool ta, bool tb, uint64_t seed) {
    size_t es = t == DG_F32 ? 4 : 2;
    void *A = malloc(es * m * k), *B = malloc(es * k * n);
    double *a = malloc(sizeof *a * m * k), *b = malloc(sizeof *b * k * n);
    float *C = malloc(sizeof *C * m * n);
    cr_assert(A && B && a && b && C);
    fill(t, A, a, (size_t)m * k, seed);
    fill(t, B, b, (size_t)k * n, seed + 1);
    memset(C, 0xff, sizeof *C * m * n); /* NaN: an element left unwritten fails */
    ASSERT_OK(dg_cpu_gemm_ex(be, DG_CPU_GEMM_ONEDNN, t, ta, tb, m, n, k, A, B, C));
    assert_product(dg_dtype_name(t), C, a, b, 1, m, n, k, ta, tb);
    if (t == DG_F32) {
        memset(C, 0xff, sizeof *C * m * n);
        ASSERT_OK(dg_cpu_sgemm(be, DG_CPU_GEMM_ONEDNN, ta, tb, m, n, k, A, B, C));
        assert_product("sgemm", C, a, b, 1, m, n, k, ta, tb);
    }
    free(A); free(B); free(a); free(b); free(C);
}

/* Whether oneDNN has a bf16 matmul kernel on this CPU: from AVX-512 on
 * (native on AVX512-BF16 and AMX, emulated on plain AVX-512), none on an
 * AVX2 one, where bf16 products are widened for a float32 GEMM. Read off
 * the ISA oneDNN reports, not off the backend's own decision. */
static bool onednn_bf16_native(void) {
    char info[128];
    return strstr(dg_cpu_onednn_info(info, sizeof info), "ISA: avx512_core") != NULL;
}

/* What the build says of oneDNN, and the choice itself: with oneDNN, its
 * version on GCC's OpenMP (Debian's build, the runtime duograd uses) and a
 * product; without, "none" and the choice refused with a message, never
 * run as something else. */
Test(onednn, info_and_choice_follow_the_build) {
    char info[128];
    dg_cpu_onednn_info(info, sizeof info);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    float A[4] = {1, 2, 3, 4}, C[4] = {0};
    dg_status st = dg_cpu_gemm_ex(be, DG_CPU_GEMM_ONEDNN, DG_F32, false, false, 2, 2, 2, A, A, C);
    if (dg_cpu_has_onednn()) {
        cr_assert(strncmp(info, "oneDNN ", 7) == 0 && strstr(info, "CPU runtime: OpenMP"), "%s", info);
        ASSERT_OK(st);
        cr_assert(C[0] == 7 && C[1] == 10 && C[2] == 15 && C[3] == 22, "%g %g %g %g", C[0], C[1], C[2], C[3]);
    } else {
        cr_assert_str_eq(info, "none (built with DG_ONEDNN=OFF: the default convolutions are the own)");
        cr_assert_eq(st, DG_ERR_UNSUPPORTED);
        cr_assert(strstr(dg_last_error(), "DG_ONEDNN=OFF"), "%s", dg_last_error());
    }
    dg_backend_free(be);
}

/* Every dtype and transposition at ragged sizes: 1 (a vector product),
 * 7 (under a vector), 129 (one past a block), 1000 (a long reduction).
 * Catches a transposition flag ignored or applied to the wrong operand,
 * the wrong data type given to oneDNN (bf16 read as f16 or as float32), a
 * stride of the other layout. */
Test(onednn, products_of_every_dtype_and_transposition, .timeout = 120) {
    SKIP_WITHOUT_ONEDNN();
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    const dg_dtype types[] = {DG_F32, DG_BF16, DG_F16};
    const int sizes[][3] = {{1, 1, 1}, {7, 129, 1}, {129, 7, 1000}, {1000, 1, 7}, {1, 1000, 129}, {129, 129, 129}};
    for (int t = 0; t < 3; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int tr = 0; tr < 4; tr++)
                check_gemm(be, types[t], sizes[s][0], sizes[s][1], sizes[s][2], tr & 1, tr & 2, 11 + s * 4 + tr);
    dg_backend_free(be);
}

/* The cache: a shape's primitive made once and run again; two shapes that
 * alternate (same sizes, other transpositions, so that the other's
 * primitive would give wrong numbers) each right every time; past its 16
 * entries the oldest made again, and still right. bf16 products where
 * oneDNN has their kernel, else float32 ones (check_gemm runs each of
 * those twice, by dg_cpu_gemm_ex and dg_cpu_sgemm, through one
 * primitive). Catches a key missing a field (a stale primitive run for
 * another shape), a primitive made on every call, an eviction that frees
 * one still listed. */
Test(onednn, primitive_cache_reused_and_keyed, .timeout = 60) {
    SKIP_WITHOUT_ONEDNN();
    const bool bf16 = onednn_bf16_native();
    const dg_dtype t = bf16 ? DG_BF16 : DG_F32;
    const long per = bf16 ? 1 : 2; /* oneDNN runs a check_gemm */
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    long created, runs;
    dg_cpu_onednn_counts(be, &created, &runs);
    cr_assert(created == 0 && runs == 0, "a new backend: %ld created, %ld runs", created, runs);
    for (int i = 0; i < 6; i++) check_gemm(be, t, 33, 17, 65, i & 1, false, 100 + i);
    dg_cpu_onednn_counts(be, &created, &runs);
    cr_assert(created == 2 && runs == 6 * per, "%s, two shapes alternating 6 times: %ld created, %ld runs",
              dg_dtype_name(t), created, runs);
    for (int i = 0; i < 17; i++) check_gemm(be, t, 5 + i, 3, 9, false, false, 200 + i); /* 17 more shapes */
    dg_cpu_onednn_counts(be, &created, &runs);
    cr_assert(created == 19 && runs == 23 * per, "17 more: %ld created, %ld runs", created, runs);
    check_gemm(be, t, 33, 17, 65, false, false, 300); /* evicted: made again */
    check_gemm(be, t, 21, 3, 9, false, false, 301);   /* the newest: still there */
    dg_cpu_onednn_counts(be, &created, &runs);
    cr_assert(created == 20 && runs == 25 * per, "after eviction: %ld created, %ld runs", created, runs);
    dg_backend_free(be);
}

/* dg_matmul of batched bf16 (f16) operands, cast from float32 parameters,
 * under each GEMM choice: the name its step reports, the scratch it asks
 * for (the operands' float32 copies only where it widens them) and its
 * numbers against float64 of the rounded operands. The backend's default
 * set to oneDNN runs bf16 by its own kernel where the CPU has one (widened
 * for its float32 one elsewhere, into the backend's buffer: the plan
 * expected the kernel), f16 widened for its float32
 * one (oneDNN 2.6 has no f16 matmul on the CPU); the vendor choice takes
 * oneDNN for bf16 only on a CPU with AMX (elsewhere widening for OpenBLAS
 * was measured faster: docs/PERF.md); OWN widens for the own sgemm.
 * Catches the plan's or the backend's choice ignored (a name that does not
 * say what ran), a batch's operands offset wrongly, trans_b dropped on the
 * way, scratch reserved for copies never made. */
Test(onednn, matmul_steps_by_choice, .timeout = 60) {
    SKIP_WITHOUT_ONEDNN();
    const int batch = 3, m = 7, k = 129, n = 20;
    char info[128];
    bool amx = strstr(dg_cpu_onednn_info(info, sizeof info), "ISA: avx512_core_amx") != NULL;
    const char *vendor_bf16 = amx ? "cpu-onednn-bf16" : "cpu-openblas-bf16-widened";
    const char *onednn_bf16 = onednn_bf16_native() ? "cpu-onednn-bf16" : "cpu-onednn-bf16-widened";
    /* set: the backend's default when the plan is made; own_after: then
     * set to the own sgemm before the step runs (made without scratch for
     * copies, the step widens into the backend's buffer instead) */
    const struct { dg_dtype t; dg_gemm_impl gemm; dg_cpu_gemm set; const char *name; bool own_after; } cases[] = {
        {DG_BF16, DG_GEMM_VENDOR, DG_CPU_GEMM_OPENBLAS, vendor_bf16, false},
        {DG_BF16, DG_GEMM_DEFAULT, DG_CPU_GEMM_OPENBLAS, vendor_bf16, false},
        {DG_BF16, DG_GEMM_OWN, DG_CPU_GEMM_OPENBLAS, "cpu-own-bf16-widened", false},
        {DG_F16, DG_GEMM_VENDOR, DG_CPU_GEMM_OPENBLAS, "cpu-openblas-f16-widened", false},
        {DG_F32, DG_GEMM_VENDOR, DG_CPU_GEMM_OPENBLAS, "cpu-openblas", false},
        {DG_BF16, DG_GEMM_DEFAULT, DG_CPU_GEMM_ONEDNN, onednn_bf16, false},
        {DG_F16, DG_GEMM_DEFAULT, DG_CPU_GEMM_ONEDNN, "cpu-onednn-f16-widened", false},
        {DG_BF16, DG_GEMM_VENDOR, DG_CPU_GEMM_ONEDNN, vendor_bf16, false},
        {DG_BF16, DG_GEMM_DEFAULT, DG_CPU_GEMM_ONEDNN, onednn_bf16, true},
    };
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dg_dtype t = cases[c].t;
        dg_cpu_set_gemm(be, cases[c].set);
        dg_graph *g = dg_graph_new();
        dg_node *pa = dg_param(g, "a", DG_SHAPE(batch, m, k), (dg_init){DG_INIT_UNIFORM, -1, 1, 51});
        dg_node *pb = dg_param(g, "b", DG_SHAPE(batch, n, k), (dg_init){DG_INIT_UNIFORM, -1, 1, 52});
        dg_node *a = t == DG_F32 ? pa : dg_cast(g, pa, t), *b = t == DG_F32 ? pb : dg_cast(g, pb, t);
        dg_node *y = dg_matmul(g, a, b, false, true);
        ASSERT_OK(dg_graph_status(g));
        size_t na = (size_t)batch * m * k, nb = (size_t)batch * n * k, nc = (size_t)batch * m * n;
        dg_plan *p;
        dg_node *outs[] = {y, pa, pb};
        ASSERT_OK(dg_plan_new(&p, g, be, outs, 3, &(dg_plan_opts){.gemm = cases[c].gemm}));
        char name[48];
        ASSERT_OK(dg_plan_node_impl(p, y, name, sizeof name));
        cr_assert_str_eq(name, cases[c].name, "%s under choice %d, default %d: %s, want %s", dg_dtype_name(t),
                         (int)cases[c].gemm, (int)cases[c].set, name, cases[c].name);
        /* float32 copies of the operands only where they are widened, but
         * for bf16 under oneDNN (the plan expects its kernel) */
        bool planned_native = t == DG_BF16 && !strncmp(name, "cpu-onednn-bf16", 15);
        size_t wide = strstr(name, "widened") && !planned_native ? (na + nb) * sizeof(float) : 0;
        cr_assert_eq(dg_backend_step_scratch_bytes(be, y, dg_step_flags(&(dg_plan_opts){.gemm = cases[c].gemm})),
                     wide, "%s: scratch", cases[c].name);
        if (cases[c].own_after) dg_cpu_set_gemm(be, DG_CPU_GEMM_OWN);
        ASSERT_OK(dg_plan_run(p));
        float *fa = malloc(na * 4), *fb = malloc(nb * 4), *C = malloc(nc * 4);
        double *da = malloc(na * 8), *db = malloc(nb * 8);
        ASSERT_OK(dg_plan_get(p, pa, fa, na * 4));
        ASSERT_OK(dg_plan_get(p, pb, fb, nb * 4));
        ASSERT_OK(dg_plan_get(p, y, C, nc * 4));
        for (size_t i = 0; i < na; i++)
            da[i] = t == DG_BF16 ? dg__bf16_to_f32(dg__f32_to_bf16(fa[i]))
                    : t == DG_F16 ? dg__f16_to_f32(dg__f32_to_f16(fa[i])) : fa[i];
        for (size_t i = 0; i < nb; i++)
            db[i] = t == DG_BF16 ? dg__bf16_to_f32(dg__f32_to_bf16(fb[i]))
                    : t == DG_F16 ? dg__f16_to_f32(dg__f32_to_f16(fb[i])) : fb[i];
        assert_product(cases[c].name, C, da, db, batch, m, n, k, false, true);
        free(fa); free(fb); free(C); free(da); free(db);
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg_backend_free(be);
}

/* A product of bf16 operands with a bf16 output (dg_matmul_ex: the
 * transformer's layers under the 16-bit policy) runs by oneDNN's own
 * kernel where a float32-output one would (the backend's default at
 * oneDNN, where the CPU has the kernel; the vendor choice where that
 * kernel is AMX's), widened for OpenBLAS's sgemm elsewhere; each stored value is the float64 product of the rounded
 * operands rounded once to bf16 (within bf16's unit roundoff on top of
 * float32's sum bound). A float32-output product of the same operands
 * runs first, so its primitive is in the cache. Catches a 16-bit output
 * sent to the widening path whatever the choice (the name and oneDNN's run
 * count), a primitive cached without its output dtype (the float32 one
 * reused: a float32 C in 2-byte elements), and a wrong rounding. */
Test(onednn, bf16_outputs_by_its_kernel_where_it_runs, .timeout = 60) {
    SKIP_WITHOUT_ONEDNN();
    const int batch = 2, m = 9, k = 67, n = 24;
    char info[128];
    bool amx = strstr(dg_cpu_onednn_info(info, sizeof info), "ISA: avx512_core_amx") != NULL;
    const struct { dg_cpu_gemm set; const char *name; } cases[] = {
        {DG_CPU_GEMM_ONEDNN, onednn_bf16_native() ? "cpu-onednn-bf16" : "cpu-openblas-bf16-widened"},
        {DG_CPU_GEMM_OPENBLAS, amx ? "cpu-onednn-bf16" : "cpu-openblas-bf16-widened"},
        {DG_CPU_GEMM_OWN, "cpu-own-bf16-widened"},
    };
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dg_cpu_set_gemm(be, cases[c].set);
        dg_graph *g = dg_graph_new();
        dg_node *pa = dg_param(g, "a", DG_SHAPE(batch, m, k), (dg_init){DG_INIT_UNIFORM, -1, 1, 71});
        dg_node *pb = dg_param(g, "b", DG_SHAPE(batch, k, n), (dg_init){DG_INIT_UNIFORM, -1, 1, 72});
        dg_node *a16 = dg_cast(g, pa, DG_BF16), *b16 = dg_cast(g, pb, DG_BF16);
        dg_node *y32 = dg_matmul(g, a16, b16, false, false);
        dg_node *y = dg_matmul_ex(g, a16, b16, false, false, DG_BF16);
        ASSERT_OK(dg_graph_status(g));
        dg_plan *p;
        dg_node *outs[] = {y32, y, pa, pb};
        ASSERT_OK(dg_plan_new(&p, g, be, outs, 4, NULL));
        char name[48];
        ASSERT_OK(dg_plan_node_impl(p, y, name, sizeof name));
        cr_assert_str_eq(name, cases[c].name);
        long created, runs0, runs;
        dg_cpu_onednn_counts(be, &created, &runs0);
        ASSERT_OK(dg_plan_run(p));
        dg_cpu_onednn_counts(be, &created, &runs);
        bool onednn = strncmp(name, "cpu-onednn", 10) == 0;
        /* both products by oneDNN's kernel; where the CPU has none, the
         * float32-output one under the oneDNN default still runs oneDNN's
         * float32 kernel on its widened operands */
        long want = onednn ? 2 : cases[c].set == DG_CPU_GEMM_ONEDNN ? 1 : 0;
        cr_assert_eq(runs - runs0, want, "%s: %ld oneDNN runs, want %ld", name, runs - runs0, want);
        size_t na = (size_t)batch * m * k, nb = (size_t)batch * k * n, nc = (size_t)batch * m * n;
        float *fa = malloc(na * 4), *fb = malloc(nb * 4);
        uint16_t *C = malloc(nc * 2);
        cr_assert(fa && fb && C);
        ASSERT_OK(dg_plan_get(p, pa, fa, na * 4));
        ASSERT_OK(dg_plan_get(p, pb, fb, nb * 4));
        ASSERT_OK(dg_plan_get(p, y, C, nc * 2));
        float *C32 = malloc(nc * 4);
        double *da = malloc(na * 8), *db = malloc(nb * 8);
        cr_assert(C32 && da && db);
        ASSERT_OK(dg_plan_get(p, y32, C32, nc * 4));
        for (size_t i = 0; i < na; i++) da[i] = dg__bf16_to_f32(dg__f32_to_bf16(fa[i]));
        for (size_t i = 0; i < nb; i++) db[i] = dg__bf16_to_f32(dg__f32_to_bf16(fb[i]));
        assert_product("the float32 output beside it", C32, da, db, batch, m, n, k, false, false);
        free(C32); free(da); free(db);
        const double gamma = (k + 1) * 0x1p-24;
        for (int q = 0; q < batch; q++)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double want = 0, mag = 0;
                    for (int t = 0; t < k; t++) {
                        double x = dg__bf16_to_f32(dg__f32_to_bf16(fa[((size_t)q * m + i) * k + t])) *
                                   dg__bf16_to_f32(dg__f32_to_bf16(fb[((size_t)q * k + t) * n + j]));
                        want += x;
                        mag += fabs(x);
                    }
                    double got = dg__bf16_to_f32(C[((size_t)q * m + i) * n + j]);
                    cr_assert(fabs(got - want) <= 0x1p-8 * fabs(want) + gamma * mag * (1 + 0x1p-8),
                              "%s: C[%d][%d,%d] = %.9g, want %.9g", name, q, i, j, got, want);
                }
        free(fa); free(fb); free(C);
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg_backend_free(be);
}

/* The backend's own default set to oneDNN: a float32 matmul then runs by
 * oneDNN too, where the plan leaves the choice to the backend. */
Test(onednn, backend_default_runs_float32_by_onednn) {
    SKIP_WITHOUT_ONEDNN();
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_cpu_set_gemm(be, DG_CPU_GEMM_ONEDNN);
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_param(g, "a", DG_SHAPE(9, 31), (dg_init){DG_INIT_UNIFORM, -1, 1, 61});
    dg_node *b = dg_param(g, "b", DG_SHAPE(31, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 62});
    dg_node *y = dg_matmul(g, a, b, false, false);
    ASSERT_OK(dg_graph_status(g));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    char name[32];
    ASSERT_OK(dg_plan_node_impl(p, y, name, sizeof name));
    cr_assert_str_eq(name, "cpu-onednn");
    long created, runs;
    ASSERT_OK(dg_plan_run(p));
    dg_cpu_onednn_counts(be, &created, &runs);
    cr_assert(created == 1 && runs == 1, "%ld created, %ld runs", created, runs);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}
