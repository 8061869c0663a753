/* test_sweep_ops.c: the ops and autodiff sweeps in every precision. The
 * ops sweep's bf16 and fp16 rows run on 2-byte storage (their GB/s counts
 * 2-byte elements, their error shows the dtype's rounding), the check's
 * bound (sweeps/ops/ops_dtype.h) passes the CPU kernels and fails planted
 * bugs (a truncating store, a neighbour read, the bound without the
 * dtype's roundoff), the summary tables the rows per dtype; the autodiff
 * sweep's graph step runs in each precision and its manual step says it has
 * none but fp32. The GPU variants skip where no CUDA device answers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check/ref_grad.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "shell_util.h"
#include "sweeps/ops/ops_dtype.h"
#include "writers/csv.h"

#define ASSERT_OK(x) cr_assert_eq((x), DG_OK, "%s: %s", #x, dg_last_error())

static void bench_or_skip(void) {
    if (access(DG_BENCH_PATH, X_OK) != 0) cr_skip_test("bench binary missing: %s", DG_BENCH_PATH);
}

static const csv_rec *find_row(const csv_rec *r, int n, const char *c, const char *impl, const char *dt) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].sweep, "ops") && !strcmp(r[i].name, c) && !strcmp(r[i].impl, impl) &&
            !strcmp(dg_precision_name(r[i].precision), dt))
            return &r[i];
    return NULL;
}

/* The bytes the node of `c` a row times moves at N elements: add reads
 * two inputs and writes one, all in the dtype (e bytes); relu's backward
 * reads x and dy and writes dx, all in the dtype (a 16-bit node's gradient
 * is 16-bit); the row sums read N and write N / 1024 */
static double bytes_of(const char *c, const char *impl, long long N, double e) {
    if (!strcmp(c, "add")) return 3 * e * N;
    if (!strcmp(c, "relu")) return strstr(impl, "bwd") ? 3 * e * N : 2 * e * N;
    if (!strcmp(c, "sum_rows")) return e * (N + N / 1024);
    if (!strcmp(c, "transpose")) return 2 * e * N;
    return NAN;
}

/* bench --sweep ops --dtype all on one backend at 4096 elements: fp32, bf16
 * and fp16 rows, none in tf32 (said once, with the reason); the 16-bit rows
 * ok, their dtype set, their error the dtype's rounding (a bf16 row that ran
 * in fp32 would be 1e-7 off), their GB/s from 2-byte elements (a 16-bit
 * transpose moving 4-byte elements would show twice the bytes); softmax_ce
 * (a float32 op in the graph) and sum_rows's float32 backward (a broadcast)
 * have no 16-bit rows, each said once; add_bcast's backward (the 16-bit
 * gradient's column sums) has. Then bench plot: the summary's ops table
 * has a line per op and dtype. */
static void dtype_all_rows(const char *backend) {
    bench_or_skip();
    char dir[] = "/tmp/dg-sops-XXXXXX", out[8192], err[16384], path[600];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "ops", "--dtype", "all", "--backends", backend, "--sizes", "4096", "--case",
                          "add,add_bcast,relu,sum_rows,softmax,softmax_ce,transpose", "--reps", "2", "--min-time", "0",
                          "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    cr_assert(strstr(err, "no rows in tf32 (--dtype): the sweep runs in fp32, bf16, fp16: tf32 rounds a product's "
                          "operands, and these ops have none"), "%s", err);
    cr_assert(strstr(err, "softmax_ce has no bf16, fp16 rows: softmax_cross_entropy") &&
                  strstr(err, "sum_rows has no bf16, fp16 backward rows") &&
                  !strstr(err, "add_bcast has no"), "%s", err);
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    char fwd[16], bwd[16];
    snprintf(fwd, sizeof fwd, "%s-fwd", backend);
    snprintf(bwd, sizeof bwd, "%s-bwd", backend);
    int low = 0;
    for (int i = 0; i < n; i++) {
        dg_precision p = r[i].precision;
        cr_assert_neq(p, DG_PREC_TF32, "row %d is tf32", i);
        cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "row %d %s %s %s: %s %s", i, r[i].name,
                  r[i].impl, dg_precision_name(p), r[i].status, r[i].note);
        if (p == DG_PREC_FP32) continue;
        low++;
        cr_assert(strcmp(r[i].name, "softmax_ce"), "%s in %s", r[i].name, dg_precision_name(p));
        cr_assert(strcmp(r[i].name, "sum_rows") || strstr(r[i].impl, "fwd"), "sum_rows %s in %s", r[i].impl,
                  dg_precision_name(p));
        double u = p == DG_PREC_BF16 ? 0x1p-8 : 0x1p-11;
        /* relu's and transpose's outputs are their rounded inputs */
        if (strstr(r[i].impl, "fwd") && strcmp(r[i].name, "relu") && strcmp(r[i].name, "transpose"))
            cr_assert(r[i].max_rel_err > u / 4, "%s %s %s: error %g: not rounded to the dtype", r[i].name, r[i].impl,
                      dg_precision_name(p), r[i].max_rel_err);
        double want = bytes_of(r[i].name, r[i].impl, 4096, 2);
        if (!isnan(want))
            cr_assert(fabs(r[i].gbps * r[i].median_ms * 1e6 - want) < 1e-3 * want, "%s %s %s: %g GB/s in %g ms, want "
                      "%g bytes", r[i].name, r[i].impl, dg_precision_name(p), r[i].gbps, r[i].median_ms, want);
    }
    /* add, add_bcast fwd+bwd, relu fwd+bwd, sum_rows fwd, softmax fwd+bwd,
     * transpose fwd+bwd (a 16-bit permute of the gradient): 10 a dtype */
    cr_assert_eq(low, 20, "%d bf16 and fp16 rows", low);
    const csv_rec *a32 = find_row(r, n, "add", fwd, "fp32"), *r16 = find_row(r, n, "relu", bwd, "fp16");
    cr_assert(a32 && r16 && find_row(r, n, "softmax", bwd, "bf16") && find_row(r, n, "softmax_ce", fwd, "fp32") &&
              find_row(r, n, "transpose", fwd, "fp16"));
    cr_assert(fabs(a32->gbps * a32->median_ms * 1e6 - bytes_of("add", fwd, 4096, 4)) < 1e-3 * 3 * 4 * 4096);
    free(r);
    char *sum = plot_summary(dir);
    cr_assert(strstr(sum, "| op | dtype | fwd crossover |") && strstr(sum, "| add | fp32 | ") &&
                  strstr(sum, "| add | bf16 | ") && strstr(sum, "| softmax | fp16 | ") &&
                  strstr(sum, "| softmax_ce | fp32 | ") && !strstr(sum, "| softmax_ce | bf16 | ") &&
                  !strstr(sum, "| tf32 |"), "%s", sum);
    /* fp32's lines first, then bf16's, then fp16's */
    cr_assert(strstr(sum, "| transpose | fp32 |") < strstr(sum, "| add | bf16 |") &&
                  strstr(sum, "| softmax | bf16 |") < strstr(sum, "| add | fp16 |"), "%s", sum);
    free(sum);
    remove_dir(dir);
}

Test(sweep_ops, dtype_all_on_the_cpu_writes_checked_16_bit_rows_and_tables_them) {
    dtype_all_rows("cpu");
}

Test(sweep_ops, dtype_all_on_the_gpu_writes_checked_16_bit_rows_and_tables_them) {
    dg_backend_free(test_backend_open(true)); /* skips without a device */
    dtype_all_rows("gpu");
}

/* bench --list --sweep ops --dtype all: the rows a run would write, bf16
 * and fp16 among them, none in tf32 nor of an op the graph keeps float32 */
Test(sweep_ops, the_list_shows_each_precisions_rows) {
    bench_or_skip();
    char dir[] = "/tmp/dg-sops-XXXXXX", out[8192], err[8192];
    tmp_dir(dir);
    const char *args[] = {"--list", "--sweep", "ops", "--dtype", "all", "--backends", "cpu", "--sizes", "4096",
                          "--case", "add,add_bcast,sum_rows,softmax,softmax_ce,transpose", NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 60), 0, "%s", err);
    cr_assert(strstr(out, "ops add cpu-fwd cpu bf16 m=4096") && strstr(out, "ops softmax cpu-bwd cpu fp16 m=4096") &&
                  strstr(out, "ops softmax_ce cpu-bwd cpu fp32 m=4096") && !strstr(out, "softmax_ce cpu-fwd cpu bf16") &&
                  strstr(out, "transpose cpu-fwd cpu fp16") && strstr(out, "add_bcast cpu-bwd cpu bf16") &&
                  !strstr(out, "sum_rows cpu-bwd cpu bf16") &&
                  !strstr(out, " tf32 "), "%s", out);
    remove_dir(dir);
}

/* ---- the check's bound, in-process: a case of the sweep in a dtype run on
 * the CPU and compared as the sweep compares it ---- */

typedef struct checked {
    op_case     c;
    case_graph  cg;
    case_result res;
    case_ref    ref;
    long long   n[2];     /* the timed nodes' reduction lengths */
} checked;

static void run_checked(checked *k, const char *name, dg_precision p, long long N) {
    const op_case *oc = NULL;
    for (int i = 0; i < dg_n_op_cases; i++)
        if (dg_op_cases[i].sweep.name && !strcmp(dg_op_cases[i].sweep.name, name)) oc = &dg_op_cases[i];
    cr_assert_not_null(oc, "no swept case %s", name);
    dg_shape shape[OP_CASE_MAX_IN];
    cr_assert(op_case_shapes_at(oc, N, shape));
    k->c = ops_case_in(oc, p);
    ASSERT_OK(case_graph_new_at(&k->cg, &k->c, shape, 11));
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    ASSERT_OK(case_run(&k->cg, cpu, &k->res));
    ASSERT_OK(case_ref_own_grad(&k->cg, k->ref.grad, &k->ref.out));
    dg_backend_free(cpu);
    const dg_node *b = ops_timed_backward(&k->cg);
    k->n[0] = ops_reduction_length(ops_timed_forward(&k->cg));
    k->n[1] = b ? ops_reduction_length(b) : 1;
}

static void free_checked(checked *k) {
    case_result_free(&k->res);
    case_ref_free(&k->ref);
    case_graph_free(&k->cg);
}

static double tol_of(const checked *k, int d) { return ops_tol(k->c.dtype, k->c.op, k->n[d], d); }

/* the index of the largest jump between neighbours of x (n values) */
static int64_t largest_step(const float *x, int64_t n) {
    int64_t at = 0;
    for (int64_t i = 0; i + 1 < n; i++)
        if (fabsf(x[i + 1] - x[i]) > fabsf(x[at + 1] - x[at])) at = i;
    return at;
}

/* the bf16 value of x truncated toward zero: a store that drops the low
 * 16 bits instead of rounding */
static float trunc_bf16(double x) {
    float f = (float)x;
    uint32_t b;
    memcpy(&b, &f, 4);
    b &= 0xffff0000u;
    memcpy(&f, &b, 4);
    return f;
}

/* The CPU's kernels pass the bound in bf16 and fp16, at 64 rows of 1024,
 * forward and backward; the same results fail it where the bound lacks the
 * dtype's roundoff (a tolerance from fp32's: the forward always, the
 * gradients where the backward reads the rounded output), where one
 * element is its neighbour's (a kernel reading the wrong element), and in
 * bf16 where the forward's store truncates. */
Test(sweep_ops, the_bound_passes_the_cpu_kernels_and_fails_planted_bugs) {
    static const char *const cases[] = {"add", "add_bcast", "exp", "gelu", "sum_rows", "sum_cols", "softmax"};
    for (int p = DG_PREC_BF16; p <= DG_PREC_FP16; p++)
        for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++) {
            checked k;
            run_checked(&k, cases[c], (dg_precision)p, 1 << 16);
            const char *dt = dg_precision_name((dg_precision)p);
            double err[2];
            ops_errors(&k.cg, &k.res, &k.ref, k.c.dtype, err);
            cr_log_info("%s %s: forward %.3g (tol %.3g), gradients %.3g (tol %.3g)", cases[c], dt, err[0],
                        tol_of(&k, 0), err[1], tol_of(&k, 1));
            cr_assert(err[0] <= tol_of(&k, 0) && err[1] <= tol_of(&k, 1), "%s %s: errors %g %g, bounds %g %g",
                      cases[c], dt, err[0], err[1], tol_of(&k, 0), tol_of(&k, 1));
            cr_assert(err[0] > ops_tol(DG_F32, k.c.op, k.n[0], false), "%s %s: forward %g within fp32's bound",
                      cases[c], dt, err[0]);
            if (k.c.op == DG_OP_EXP || k.c.op == DG_OP_SOFTMAX)
                cr_assert(err[1] > ops_tol(DG_F32, k.c.op, k.n[1], true), "%s %s: gradients %g within fp32's bound",
                          cases[c], dt, err[1]);
            /* one output its neighbour's */
            int64_t at = largest_step(k.res.out, k.res.n_out);
            float keep = k.res.out[at];
            k.res.out[at] = k.res.out[at + 1];
            ops_errors(&k.cg, &k.res, &k.ref, k.c.dtype, err);
            cr_assert(err[0] > tol_of(&k, 0), "%s %s: a neighbour read passes (%g)", cases[c], dt, err[0]);
            k.res.out[at] = keep;
            /* one gradient element its neighbour's */
            at = largest_step(k.res.grad[0], k.res.n_grad[0]);
            k.res.grad[0][at] = k.res.grad[0][at + 1];
            ops_errors(&k.cg, &k.res, &k.ref, k.c.dtype, err);
            cr_assert(err[1] > tol_of(&k, 1), "%s %s: a neighbour's gradient passes (%g)", cases[c], dt, err[1]);
            if (p == DG_PREC_BF16) { /* every output stored truncated */
                for (int64_t i = 0; i < k.res.n_out; i++) k.res.out[i] = trunc_bf16(k.ref.out[i]);
                ops_errors(&k.cg, &k.res, &k.ref, k.c.dtype, err);
                cr_assert(err[0] > tol_of(&k, 0), "%s bf16: a truncating store passes (%g)", cases[c], err[0]);
            }
            free_checked(&k);
        }
}

/* bench --sweep autodiff --dtype all on one backend: the graph step in every
 * precision, checked (the CPU's tf32 says it is the fp32 step); the manual
 * step in fp32 alone, skipped in the others with its reason */
static void autodiff_rows(const char *backend) {
    bench_or_skip();
    char dir[] = "/tmp/dg-sops-XXXXXX", out[8192], err[8192], path[600];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "autodiff", "--dtype", "all", "--backends", backend, "--sizes", "32", "--reps",
                          "2", "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/autodiff.csv", dir);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    bool gpu = !strcmp(backend, "gpu");
    int graph[DG_PREC_COUNT] = {0}, manual = 0;
    long long live[DG_PREC_COUNT] = {0}; /* the graph row's plan */
    for (int i = 0; i < n; i++) {
        dg_precision p = r[i].precision;
        bool measured = !strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy");
        if (!strcmp(r[i].impl, "manual") && p != DG_PREC_FP32) {
            cr_assert(!strcmp(r[i].status, "skipped") && strstr(r[i].note, "the hand-written step is fp32 alone") &&
                          strstr(r[i].note, dg_precision_name(p)), "manual %s: %s %s", dg_precision_name(p),
                      r[i].status, r[i].note);
            continue;
        }
        cr_assert(measured, "%s %s: %s %s", r[i].impl, dg_precision_name(p), r[i].status, r[i].note);
        if (!strcmp(r[i].impl, "manual")) {
            manual++;
        } else {
            graph[p]++;
            live[p] = r[i].live_bytes;
        }
        if (!gpu && p == DG_PREC_TF32) cr_assert(strstr(r[i].note, "no TF32 on the CPU: the fp32 step"), "%s", r[i].note);
    }
    for (int p = 0; p < DG_PREC_COUNT; p++) /* graph, and on the GPU graph-cuda */
        cr_assert_eq(graph[p], gpu ? 2 : 1, "%s graph rows in %s", backend, dg_precision_name((dg_precision)p));
    cr_assert_eq(manual, 1);
    /* the policy's casts and 16-bit copies change the plan: a bf16 or fp16
     * row that ran the fp32 step would have fp32's arena */
    cr_assert(live[DG_PREC_FP32] > 0 && live[DG_PREC_BF16] != live[DG_PREC_FP32] &&
                  live[DG_PREC_FP16] != live[DG_PREC_FP32], "live bytes fp32 %lld, bf16 %lld, fp16 %lld",
              live[DG_PREC_FP32], live[DG_PREC_BF16], live[DG_PREC_FP16]);
    free(r);
    char *sum = plot_summary(dir);
    char want[64];
    snprintf(want, sizeof want, "| %s | bf16 | 32 | - | ", backend);
    cr_assert(strstr(sum, "| backend | dtype | batch | manual |") && strstr(sum, want), "%s", sum);
    free(sum);
    remove_dir(dir);
}

Test(sweep_autodiff, dtype_all_on_the_cpu_runs_the_graph_step_in_each_precision) {
    autodiff_rows("cpu");
}

Test(sweep_autodiff, dtype_all_on_the_gpu_runs_the_graph_step_in_each_precision) {
    dg_backend_free(test_backend_open(true)); /* skips without a device */
    autodiff_rows("gpu");
}
