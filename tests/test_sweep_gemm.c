/* test_sweep_gemm.c: the gemm sweep's precision axis. Its check
 * (gemm_check.h) in each precision passes the CPU's kernels at the largest
 * k the sweep runs there and fails planted bugs: an element of C left
 * unwritten, and (bf16, fp16) a reference computed from operands rounded
 * another way than the kernel's; and a run with --dtype all writes the rows
 * each precision has, their bytes in the dtype's element size. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/round.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "sweeps/gemm/gemm_check.h"
#include "shell_util.h"
#include "writers/csv.h"
#include "test_util.h"

/* one product of the sweep's kind: A, B uniform in [-1, 1) rounded to p,
 * C by impl, the check's float64 side built from `ref_A` (A itself, or the
 * unrounded values: a planted bug) */
typedef struct product {
    int m, n, k;
    float *A, *B, *A0, *C; /* A0: A before rounding */
    uint16_t *lA, *lB;
    bench_freivalds f;
} product;

static void make_product(product *g, dg_precision p, int m, int n, int k, bool ta, bool tb, dg_backend *cpu,
                         dg_cpu_gemm impl, bool ref_from_unrounded) {
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    *g = (product){.m = m, .n = n, .k = k, .A = malloc(na * 4), .B = malloc(nb * 4), .A0 = malloc(na * 4),
                   .C = malloc((size_t)m * n * 4), .lA = malloc(na * 2), .lB = malloc(nb * 2)};
    cr_assert(g->A && g->B && g->A0 && g->C && g->lA && g->lB);
    dg_rng r = dg_rng_new(7 + (uint64_t)k);
    for (size_t i = 0; i < na; i++) g->A0[i] = g->A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (size_t i = 0; i < nb; i++) g->B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    dg_check_round(dg_precision_dtype(p), g->A, g->lA, na);
    dg_check_round(dg_precision_dtype(p), g->B, g->lB, nb);
    bool lo = dg_precision_dtype(p) != DG_F32;
    ASSERT_OK(dg_cpu_gemm_ex(cpu, impl, dg_precision_dtype(p), ta, tb, m, n, k, lo ? (void *)g->lA : g->A,
                             lo ? (void *)g->lB : g->B, g->C));
    ASSERT_OK(bench_freivalds_new(&g->f, m, n, k, ta, tb, ref_from_unrounded ? g->A0 : g->A, g->B, 99));
}

static void free_product(product *g) {
    free(g->A); free(g->B); free(g->A0); free(g->C); free(g->lA); free(g->lB);
    bench_freivalds_free(&g->f);
}

/* the bug of a kernel that leaves an element of C unwritten (0): the one
 * that weighs most in the test, C's largest in the column of x's largest */
static void drop_an_element(product *g) {
    int j = 0, i = 0;
    for (int q = 1; q < g->n; q++) j = fabs(g->f.x[q]) > fabs(g->f.x[j]) ? q : j;
    for (int q = 1; q < g->m; q++) i = fabsf(g->C[(size_t)q * g->n + j]) > fabsf(g->C[(size_t)i * g->n + j]) ? q : i;
    g->C[(size_t)i * g->n + j] = 0;
}

/* The CPU sweeps 4096 squares (k = 4096, the mlp_layer shape too): the
 * large-k shapes here, 2048 square and k = 4096 and 8192 on a thin C, keep
 * the test short; the tolerance depends on k, not on m and n. */
static const struct { int m, n, k; bool ta, tb; } shapes[] = {
    {2048, 2048, 2048, false, false}, {256, 192, 4096, true, false}, {128, 128, 8192, false, true}};

Test(sweep_gemm, each_precisions_check_passes_the_cpu_kernels_and_fails_planted_bugs, .timeout = 600) {
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int impl = 0; impl < 2; impl++) {
                if (impl && s == 0) continue; /* the own kernel at the thin shapes alone: time */
                dg_cpu_gemm kind = impl ? DG_CPU_GEMM_OWN : DG_CPU_GEMM_OPENBLAS;
                int m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
                const char *name = dg_precision_name((dg_precision)p);
                double tol = bench_gemm_tol((dg_precision)p, k, false);
                product g;
                make_product(&g, (dg_precision)p, m, n, k, shapes[s].ta, shapes[s].tb, cpu, kind, false);
                double ok = bench_freivalds_err(&g.f, g.C);
                cr_log_info("%s %dx%dx%d %s: err %.3g, tolerance %.3g", name, m, n, k, impl ? "own" : "openblas", ok,
                            tol);
                cr_assert(ok <= tol, "%s %dx%dx%d: the correct product fails its check: %.3g > %.3g", name, m, n, k,
                          ok, tol);
                drop_an_element(&g);
                double bad = bench_freivalds_err(&g.f, g.C);
                cr_assert(bad > tol, "%s %dx%dx%d: an element left unwritten passes: %.3g <= %.3g", name, m, n, k,
                          bad, tol);
                free_product(&g);
                if (dg_precision_dtype((dg_precision)p) == DG_F32) continue; /* nothing rounded */
                make_product(&g, (dg_precision)p, m, n, k, shapes[s].ta, shapes[s].tb, cpu, kind, true);
                bad = bench_freivalds_err(&g.f, g.C);
                cr_log_info("%s %dx%dx%d: reference from unrounded A: err %.3g", name, m, n, k, bad);
                cr_assert(bad > tol, "%s %dx%dx%d: a reference from operands rounded another way passes: %.3g <= %.3g",
                          name, m, n, k, bad, tol);
                free_product(&g);
            }
    dg_backend_free(cpu);
}

/* bench --sweep gemm --dtype all on the CPU: every precision has rows of
 * the implementations with a path in it (cpu-naive fp32 alone), each
 * checked, saying which path ran; bytes (GB/s over GFLOP/s) count 2-byte
 * operands in bf16 and fp16 and a float32 C */
Test(sweep_gemm, dtype_all_writes_each_precisions_rows) {
    char dir[] = "/tmp/dg-sgemm-XXXXXX", out[8192], err[8192], path[600];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "gemm", "--dtype", "all", "--backends", "cpu", "--sizes", "64", "--reps", "2",
                          "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    /* cpu-onednn after cpu-openblas in each precision, in a DG_ONEDNN build */
    static const char *const order[][2] = {
        {"cpu-naive", "fp32"}, {"cpu-omp", "fp32"}, {"cpu-openblas", "fp32"}, {"cpu-onednn", "fp32"},
        {"cpu-omp", "tf32"}, {"cpu-openblas", "tf32"}, {"cpu-onednn", "tf32"},
        {"cpu-omp", "bf16"}, {"cpu-openblas", "bf16"}, {"cpu-onednn", "bf16"},
        {"cpu-omp", "fp16"}, {"cpu-openblas", "fp16"}, {"cpu-onednn", "fp16"}};
    const char *want[13][2];
    int n_want = 0;
    for (int i = 0; i < 13; i++)
        if (strcmp(order[i][0], "cpu-onednn") || dg_cpu_has_onednn()) {
            want[n_want][0] = order[i][0];
            want[n_want++][1] = order[i][1];
        }
    cr_assert_eq(n, n_want, "%d rows, want %d", n, n_want);
    for (int i = 0; i < n; i++) {
        dg_precision p = r[i].precision;
        cr_assert(!strcmp(r[i].impl, want[i][0]) && !strcmp(dg_precision_name(p), want[i][1]), "row %d: %s %s", i,
                  r[i].impl, dg_precision_name(p));
        cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "row %d: %s %s", i, r[i].status,
                  r[i].note);
        cr_assert(r[i].max_rel_err <= bench_gemm_tol(p, 64, false));
        double bytes = (dg_precision_dtype(p) == DG_F32 ? 4.0 : 2.0) * 2 * 64 * 64 + 4.0 * 64 * 64;
        cr_assert(fabs(r[i].gbps / r[i].gflops - bytes / (2.0 * 64 * 64 * 64)) < 1e-4 * bytes / (2.0 * 64 * 64 * 64),
                  "row %d (%s): GB/s %g, GFLOP/s %g", i, dg_precision_name(p), r[i].gbps, r[i].gflops);
        bool onednn_bf16 = !strcmp(r[i].impl, "cpu-onednn") && p == DG_PREC_BF16;
        if (p == DG_PREC_BF16 || p == DG_PREC_FP16)
            cr_assert(strstr(r[i].note, onednn_bf16 ? "oneDNN's bf16 kernel" : "widened to fp32 + sgemm"),
                      "row %d: %s", i, r[i].note);
    }
    free(r);
    remove_dir(dir);
}

/* The gemm report per precision, from a folder of GPU and CPU rows in fp32
 * and bf16 (no GPU here: the rows are written as a GPU run would): the
 * crossover and peak tables have a line per dtype, the bf16 throughput
 * chart draws the bf16 ceilings of ceiling.csv, the fp32 chart the fp32
 * ones. */
Test(sweep_gemm, the_report_has_each_precisions_crossover_peak_and_ceiling) {
    char dir[] = "/tmp/dg-sgemm-XXXXXX", path[600], cmd[1024], out[1 << 15];
    tmp_dir(dir);
    static const char *const header = "sweep,case,impl,backend,dtype,m,n,k,batch,transfer,tf32,median_ms,min_ms,max_ms,"
                                      "gflops,status\n";
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(header, f);
    /* the GPU 8x faster in bf16 from 256 on, 2x in fp32 from 512 */
    for (int n = 64; n <= 1024; n *= 2) {
        double flop = 2.0 * n * n * n, cpu32 = flop / 100e6, cpu16 = flop / 80e6;
        double gpu32 = n >= 512 ? cpu32 / 2 : cpu32 * 2, gpu16 = n >= 256 ? cpu16 / 8 : cpu16 * 2;
        const struct { const char *impl, *be, *dt; double ms; } rows[] = {
            {"cpu-openblas", "cpu", "fp32", cpu32}, {"gpu-cublas", "gpu", "fp32", gpu32},
            {"cpu-openblas", "cpu", "bf16", cpu16}, {"gpu-cublas", "gpu", "bf16", gpu16}};
        for (int i = 0; i < 4; i++)
            fprintf(f, "gemm,square,%s,%s,%s,%d,%d,%d,1,0,0,%.6g,%.6g,%.6g,%.6g,ok\n", rows[i].impl, rows[i].be,
                    rows[i].dt, n, n, n, rows[i].ms, rows[i].ms, rows[i].ms, flop / rows[i].ms / 1e6);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/ceiling.csv", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(header, f);
    fputs("ceiling,sgemm,cpu-openblas,cpu,fp32,4096,4096,4096,1,0,0,1,1,1,111,ok\n"
          "ceiling,sgemm,cpu-openblas,cpu,bf16,4096,4096,4096,1,0,0,1,1,1,222,ok\n"
          "ceiling,sgemm,gpu-cublas,gpu,fp32,8192,8192,8192,1,0,0,1,1,1,333,ok\n"
          "ceiling,sgemm,gpu-cublas,gpu,bf16,8192,8192,8192,1,0,0,1,1,1,444,ok\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "| CPU | 111.0 | - | 222.0 | - |") && strstr(out, "| GPU | 333.0 | - | 444.0 | - |"), "%s",
              out);
    cr_assert(strstr(out, "| kernels only | fp32 | 512 |") && strstr(out, "| kernels only | bf16 | 256 |"), "%s", out);
    cr_assert(strstr(out, "| gpu-cublas | bf16 | ") && strstr(out, "| cpu-openblas | fp32 | "), "%s", out);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        snprintf(path, sizeof path, "%s/plot-data/gemm_gflops_bf16.gp", dir);
        char *gp = read_file(path);
        cr_assert(strstr(gp, "222 with lines") && strstr(gp, "444 with lines") && strstr(gp, "cuBLAS bf16") &&
                      !strstr(gp, "333 with lines"), "%s", gp);
        free(gp);
        snprintf(path, sizeof path, "%s/plot-data/gemm_gflops.gp", dir);
        gp = read_file(path);
        cr_assert(strstr(gp, "111 with lines") && strstr(gp, "333 with lines") && !strstr(gp, "444 with lines"), "%s",
                  gp);
        free(gp);
        snprintf(path, sizeof path, "%s/plot-data/gemm_speedup.gp", dir);
        gp = read_file(path);
        cr_assert(strstr(gp, "gpu-cublas / cpu-openblas, bf16") && strstr(gp, "gpu-cublas / cpu-openblas, fp32"), "%s",
                  gp);
        free(gp);
    }
    remove_dir(dir);
}

/* The summary's own-kernel table: gpu-tiled's throughput over gpu-cublas's
 * per square n in each precision, a column each (fp32, tf32, bf16, fp16),
 * "-" where a precision has no row at that n; its rows are the n of the
 * tensor-core precision with the most rows (here bf16: 1024 and 4096). */
Test(sweep_gemm, the_report_gives_the_own_kernel_against_cublas_in_each_precision) {
    char dir[] = "/tmp/dg-sgemm-own-XXXXXX", path[600], cmd[1024], out[1 << 15];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("sweep,case,impl,backend,dtype,m,n,k,batch,transfer,tf32,median_ms,min_ms,max_ms,gflops,status\n", f);
    /* dtype, n, gpu-tiled's GFLOP/s, gpu-cublas's */
    const struct { const char *dt; int n; double own, ref; } rows[] = {
        {"fp32", 1024, 20, 40},   {"fp32", 4096, 25, 50},    {"tf32", 4096, 300, 400},
        {"bf16", 1024, 140, 200}, {"bf16", 4096, 490, 700},  {"fp16", 4096, 480, 600}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        int n = rows[i].n;
        double flop = 2.0 * n * n * n;
        for (int own = 0; own < 2; own++) {
            double g = own ? rows[i].own : rows[i].ref, ms = flop / g / 1e6;
            fprintf(f, "gemm,square,%s,gpu,%s,%d,%d,%d,1,0,0,%.6g,%.6g,%.6g,%.6g,ok\n", own ? "gpu-tiled" : "gpu-cublas",
                    rows[i].dt, n, n, n, ms, ms, ms, g);
        }
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "| n | gpu-tiled / gpu-cublas (fp32) | gpu-tiled / gpu-cublas (tf32) | "
                          "gpu-tiled / gpu-cublas (bf16) | gpu-tiled / gpu-cublas (fp16) |\n|---|---|---|---|---|\n"
                          "| 1024 | 50% | - | 70% | - |\n| 4096 | 50% | 75% | 70% | 80% |\n"),
              "%s", out);
    remove_dir(dir);
}
