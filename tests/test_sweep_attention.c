/* test_sweep_attention.c: the attention and transformer sweeps. Through the
 * CLI on the CPU: checked rows with the FLOPs of core/ops.c's convention
 * and the plans' arena (composed quadratic, fused linear in T), an `oom`
 * row (DG_BENCH_MEM_LIMIT) instead of a crash, bad --sizes refused with
 * exit 2, the summary with PyTorch's rows beside duograd's. In process: a
 * CPU backend whose allocations above a size fail (the oom row of a plan
 * actually tried), and kernels made wrong on purpose (an attention output
 * 0.1% off, a last query row wrong only beyond the reduced check's T, an
 * entry left NaN, an Adam update 10% too large): wrong rows, none timed.
 * Precisions (--dtype): the bf16 and fp16 rows of both sweeps measured on
 * the CPU and checked at their tolerances, what the CPU has no path for
 * (tf32) skipped with the reason, and
 * every 16-bit product 2% off making the bf16 rows wrong.
 * `bench train --model charlm`: bad options exit 2, a file that is not
 * text exits 1, a short run writes its curve. The CLI tests skip, saying
 * why, where the bench binary is missing. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/check/attention_check.h"
#include "core/backend_impl.h"
#include "core/status_internal.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_lowp.h"
#include "writers/csv.h"
#include "charts/gnuplot.h"
#include "held.h"
#include "shell_util.h"
#include "runner/sweep.h"
#include "sweeps/attention/sweep_attention.h"
#include "sweeps/transformer/sweep_transformer.h"
#include "test_util.h"

/* rows, backends, files and folders a failed assertion leaves: released */
TestSuite(attention_sweep, .fini = held_release);
TestSuite(attention_check, .fini = held_release);
TestSuite(transformer_sweep, .fini = held_release);
TestSuite(charlm_cli, .fini = held_release);

static void need_bench(void) {
    if (access(DG_BENCH_PATH, X_OK) != 0)
        cr_skip_test("bench binary missing: %s (build the bench target first)", DG_BENCH_PATH);
}

/* the convention, written out independently of the bench */
static double convention_flops(double b, double h, double t, double dh, bool causal, bool backward) {
    return (backward ? 14.0 : 4.0) * b * h * t * t * dh * (causal ? (t + 1) / (2 * t) : 1.0);
}

static const csv_rec *find(const csv_rec *r, int n, const char *name, const char *impl, long long m) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].name, name) && !strcmp(r[i].impl, impl) && r[i].m == m) return &r[i];
    cr_assert_fail("no row %s %s T=%lld", name, impl, m);
    return NULL;
}

static csv_rec *read_rows(const char *dir, const char *sweep, int *n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.csv", dir, sweep);
    csv_rec *r = held_ptr(bench_csv_read(path, n));
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

/* one run a row, and no --cpu-cap skip (its largest value): what a row
 * shows must not depend on how fast the build is (the sanitizer build once
 * had a row skipped by the default cap of 3 s) */
#define FAST "--reps 1 --warmup 0 --min-time 0 --max-cv 0 --cpu-cap 86400"

Test(attention_sweep, cpu_rows_are_checked_with_the_flop_convention_and_memory) {
    need_bench();
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[1 << 15];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep attention --backends cpu --sizes attention=64,130 --quick --case full,causal "
             FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 16, "2 lengths x 2 masks x 4 implementations, got %d rows", n);
    for (int i = 0; i < n; i++) {
        const csv_rec *x = &r[i];
        bool causal = !strcmp(x->name, "causal"), backward = strstr(x->impl, "fwdbwd") != NULL;
        cr_assert_str_eq(x->status, "ok", "%s %s T=%lld: %s (%s)", x->name, x->impl, x->m, x->status, x->note);
        cr_assert_str_eq(x->check, x->m == 64 ? "f64-rows+ref@1x2x64 tol 0.0001" : "f64-rows+ref@1x2x128 tol 0.0001");
        cr_assert(x->max_rel_err >= 0 && x->max_rel_err <= ATT_CHECK_TOL, "%s %s: error %g", x->name, x->impl,
                  x->max_rel_err);
        cr_assert(x->n == x->m && x->k == 64 && x->batch == 16 * 8 && x->reps >= 1 && !strcmp(x->backend, "cpu"));
        double flops = x->gflops * x->median_ms * 1e6, want = convention_flops(16, 8, (double)x->m, 64, causal, backward);
        cr_assert(fabs(flops - want) <= 1e-4 * want, "%s %s T=%lld: %.6g FLOPs, the convention %.6g", x->name, x->impl,
                  x->m, flops, want);
        cr_assert(x->arena_bytes > 0 && x->live_bytes > 0 && x->arena_bytes >= x->live_bytes);
    }
    /* the scores make the composed plan quadratic in T, the fused one linear */
    for (int pass = 0; pass < 2; pass++) {
        char c[32], f[32];
        snprintf(c, sizeof c, "cpu-composed-%s", att_passes[pass]);
        snprintf(f, sizeof f, "cpu-fused-%s", att_passes[pass]);
        double c64 = (double)find(r, n, "full", c, 64)->arena_bytes, c130 = (double)find(r, n, "full", c, 130)->arena_bytes;
        double f64 = (double)find(r, n, "full", f, 64)->arena_bytes, f130 = (double)find(r, n, "full", f, 130)->arena_bytes;
        cr_assert(c130 > f130, "%s: composed %g bytes, fused %g at T=130", att_passes[pass], c130, f130);
        cr_assert(c130 / c64 > 3.5 && f130 / f64 < 2.5, "%s: composed x%.2f, fused x%.2f from T=64 to 130",
                  att_passes[pass], c130 / c64, f130 / f64);
    }
    held_free(r);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "## Attention: composed") && strstr(sum, "### causal mask, forward + backward") &&
              strstr(sum, "| 130 | "), "%s", sum);
    held_free(sum);
}

/* T = 1: dq and dk are exactly zero in float64 (a softmax over one key
 * does not move); the float32 rounding left there is no `wrong` (it read
 * 1.18e+293 against a floor of 1e-300; core/check/error.h) */
Test(attention_sweep, one_position_is_checked_against_the_inputs_scale) {
    need_bench();
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[1 << 14];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep attention --sizes attention=1 --impl 'cpu-*-fwdbwd' --backends cpu "
             FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 4, "2 masks x composed and fused, got %d rows", n);
    for (int i = 0; i < n; i++)
        cr_assert(!strcmp(r[i].status, "ok") && r[i].max_rel_err <= ATT_CHECK_TOL, "%s %s T=1: %s, error %g (%s)",
                  r[i].name, r[i].impl, r[i].status, r[i].max_rel_err, r[i].note);
}

/* --dtype: the bf16 and fp16 rows, composed and fused, are measured on
 * the CPU, each checked against float64 at its precision's tolerance
 * (named in the check column), with an error above fp32's (the roundings
 * are real), the composed ones with the products' implementation in the
 * note; what the CPU has no path for is skipped with its reason: tf32 (no
 * TF32 on the CPU). */
Test(attention_sweep, sixteen_bit_rows_are_measured_and_checked_and_missing_paths_skipped) {
    need_bench();
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[1 << 15];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep attention --backends cpu --sizes attention=64 --case causal --dtype "
             "fp32,tf32,bf16,fp16 " FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 16, "4 precisions x 4 implementations, got %d rows", n);
    for (int i = 0; i < n; i++) {
        const csv_rec *x = &r[i];
        bool fused = strstr(x->impl, "fused") != NULL;
        dg_precision p = x->precision;
        if (p == DG_PREC_TF32) {
            cr_assert(!strcmp(x->status, "skipped") && strstr(x->note, "no TF32 on the CPU") && x->reps == 0,
                      "%s tf32: %s (%s)", x->impl, x->status, x->note);
        } else {
            char check[48];
            snprintf(check, sizeof check, "f64-rows+ref@1x2x64 tol %.2g", att_tol(p));
            cr_assert_str_eq(x->status, "ok", "%s %s: %s (%s)", x->impl, dg_precision_name(p), x->status, x->note);
            cr_assert_str_eq(x->check, check);
            cr_assert(x->reps >= 1 && x->max_rel_err <= att_tol(p), "%s %s: error %g", x->impl, dg_precision_name(p),
                      x->max_rel_err);
            if (p != DG_PREC_FP32) {
                /* the dtype's roundings show (measured 7e-4.. bf16, 8e-5.. fp16): a
                 * row that silently ran float32 reads 1e-6 at most */
                cr_assert(x->max_rel_err > ATT_CHECK_TOL * (p == DG_PREC_BF16 ? 1 : 0.1), "%s %s: error %g",
                          x->impl, dg_precision_name(p), x->max_rel_err);
                if (!fused)
                    cr_assert(strstr(x->note, "products: cpu-") && strstr(x->note, p == DG_PREC_BF16 ? "bf16" : "f16"),
                              "%s", x->note);
            }
        }
    }
    held_free(r);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "### causal mask, forward + backward (bf16)") && strstr(sum, "| torch-flash |") &&
              strstr(sum, "| causal | fwdbwd | fp16 |"), "%s", sum);
    held_free(sum);
}

/* A plan predicted above DG_BENCH_MEM_LIMIT is an oom row, not tried: the
 * composed form's is a finding (exit 0), a fused one's a failure (exit 1). */
Test(attention_sweep, a_memory_limit_gives_oom_rows) {
    need_bench();
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[1 << 14];
    tmp_dir(dir);
    held_dir(dir);
    /* T=130 forward: q, k, v 12.8 MB; arena composed 17.3 MB, fused 4.3 MB */
    snprintf(cmd, sizeof cmd, "env DG_BENCH_MEM_LIMIT=20000000 %s --sweep attention --backends cpu --sizes "
             "attention=64,130 --case full --impl 'cpu-*-fwd' " FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "a composed oom is no failure: %s", out);
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 4, "%d rows", n);
    const csv_rec *oom = find(r, n, "full", "cpu-composed-fwd", 130);
    cr_assert_str_eq(oom->status, "oom", "%s: %s", oom->status, oom->note);
    cr_assert(strstr(oom->note, "DG_BENCH_MEM_LIMIT") && strstr(oom->note, "not tried"), "%s", oom->note);
    cr_assert(oom->reps == 0 && isnan(oom->median_ms) && oom->arena_bytes == 4LL * 16 * 8 * 130 * 130 * 2,
              "arena %lld: the scores and the probabilities, predicted", oom->arena_bytes);
    cr_assert_str_eq(find(r, n, "full", "cpu-composed-fwd", 64)->status, "ok");
    cr_assert_str_eq(find(r, n, "full", "cpu-fused-fwd", 130)->status, "ok");
    held_free(r);
    snprintf(cmd, sizeof cmd, "env DG_BENCH_MEM_LIMIT=15000000 %s --sweep attention --backends cpu --sizes "
             "attention=130 --case full --impl cpu-fused-fwd " FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "a fused oom is a failure: %s", out);
    r = read_rows(dir, "attention", &n);
    cr_assert(n == 1 && !strcmp(r[0].status, "oom"), "%d rows, %s", n, r[0].status);
    held_free(r);
}

Test(attention_sweep, bad_sizes_exit_2) {
    need_bench();
    static const char *const bad[] = {"attention=0", "attention=abc", "attention=64,,128", "attention=-64",
                                      "attention=2147483648", "attention=", "transformer=0", "transformer=64x",
                                      "attentio=64"};
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[4096], path[256];
    tmp_dir(dir);
    held_dir(dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s --sweep attention,transformer --backends cpu --sizes '%s' --out %s", DG_BENCH_PATH,
                 bad[i], dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 2, "--sizes %s: %s", bad[i], out);
        cr_assert(strstr(out, "--sizes"), "--sizes %s: %s", bad[i], out);
    }
    snprintf(cmd, sizeof cmd, "%s --sweep attention --backends cpu --sizes transformer=64 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 2, "a list for a sweep not run: %s", out);
    snprintf(path, sizeof path, "%s/attention.csv", dir);
    cr_assert(access(path, F_OK) != 0, "a refused command line wrote %s", path);
}

/* The report from rows written by hand, with a PyTorch file beside them:
 * the peer's cells in the tables, its series in the time chart, the
 * crossover and the arena ratio. */
static void hand_row(FILE *f, const char *sweep, const char *name, const char *impl, const char *backend, long long t,
                     double ms, long long arena) {
    bench_row r = {.sweep = sweep, .name = name, .impl = impl, .backend = backend, .m = t, .n = t, .k = 64,
                   .batch = 128, .st = {ms, ms, ms, 0, 3, NULL, 0, false},
                   .flops = convention_flops(16, 8, (double)t, 64, !strcmp(name, "causal"), strstr(impl, "fwdbwd")),
                   .arena_bytes = arena, .max_rel_err = 1e-7, .check = "f64", .status = "ok"};
    bench_csv_write(f, &r);
}

Test(attention_sweep, report_with_the_pytorch_rows) {
    char dir[] = "/tmp/dg-attsweep-XXXXXX", cmd[512], out[8192], path[256];
    tmp_dir(dir);
    held_dir(dir);
    FILE *f = bench_csv_open(dir, "attention", "# by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    /* the GPU (graph replay) faster from T=1024 in the fused fwdbwd */
    hand_row(f, "attention", "causal", "cpu-fused-fwdbwd", "cpu", 512, 10, 1000000);
    hand_row(f, "attention", "causal", "gpu-graph-fused-fwdbwd", "gpu", 512, 20, 1000000);
    hand_row(f, "attention", "causal", "cpu-fused-fwdbwd", "cpu", 1024, 40, 2000000);
    hand_row(f, "attention", "causal", "gpu-graph-fused-fwdbwd", "gpu", 1024, 30, 2000000);
    hand_row(f, "attention", "full", "cpu-composed-fwdbwd", "cpu", 512, 50, 8000000);
    hand_row(f, "attention", "full", "cpu-fused-fwdbwd", "cpu", 512, 40, 2000000);
    ASSERT_OK(bench_csv_finish(f, dir, "attention", true));
    f = bench_csv_open(dir, "torch_attention", "# by hand\n", BENCH_CSV_HEADER);
    hand_row(f, "attention", "causal", "torch-efficient-fwdbwd", "gpu", 512, 1.25, 0);
    hand_row(f, "attention", "causal", "torch-efficient-fwdbwd", "gpu", 1024, 4.5, 0);
    ASSERT_OK(bench_csv_finish(f, dir, "torch_attention", true));
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    if (access(DG_BENCH_PATH, X_OK) != 0) cr_skip_test("bench binary missing: %s", DG_BENCH_PATH);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "torch-*: bench/peers/torch_attention.py"), "%s", sum);
    /* | T | cpu-composed | cpu-fused | gpu-composed | gpu-fused | gpu-graph-composed | gpu-graph-fused | torch-math |
     * torch-efficient | */
    cr_assert(strstr(sum, "| 1024 | - | 40 (") && strstr(sum, "| - | 4.5 ("), "%s", sum);
    cr_assert(strstr(sum, "| causal | fwdbwd | fp32 | n/a (not measured on both) | 1024 |"), "%s", sum);
    cr_assert(strstr(sum, "| 512 | - | - | 8.0 | 2.0 | 4.00 |"), "%s", sum);
    held_free(sum);
    if (bench_gnuplot_found()) {
        snprintf(path, sizeof path, "%s/plot-data/attention_time_causal_fwdbwd.gp", dir);
        char *gp = held_ptr(read_file(path));
        cr_assert(strstr(gp, "'torch-efficient-fwdbwd'") && strstr(gp, "'gpu-graph-fused-fwdbwd'"), "%s", gp);
        held_free(gp);
    }
}

/* ---- in process ---- */

static const dg_backend_i *cpu_iface;
static size_t alloc_limit;

static dg_status limited_alloc(dg_backend *be, size_t bytes, void **out) {
    if (bytes > alloc_limit) return dg__fail(DG_ERR_OOM, "test: allocation of %zu bytes refused", bytes);
    return cpu_iface->alloc(be, bytes, out);
}

typedef enum wrong_kind {
    OFF_BY_A_THOUSANDTH, AT_BATCH_1, LAST_ROW_BEYOND_128, ONE_NAN, ADAM_TEN_PERCENT, LAYER_NORM_DX_0_3_PERCENT,
    LOW_MATMUL_TWO_PERCENT
} wrong_kind;
static wrong_kind wrong;

static dg_status wrong_compute(dg_backend *be, const dg_step *s) {
    const dg_node *nd = s->node;
    int64_t numel = dg_node_numel(nd);
    float *old = NULL;
    if (wrong == ADAM_TEN_PERCENT && nd->op == DG_OP_ADAM_UPDATE) {
        int64_t n = dg_node_numel(nd->in[0]);
        old = malloc((size_t)n * sizeof *old);
        cr_assert_not_null(old);
        memcpy(old, s->inout[0], (size_t)n * sizeof *old);
    }
    dg_status st = cpu_iface->compute(be, s);
    if (st != DG_OK) return st;
    float *o = s->out;
    if (nd->op == DG_OP_ATTENTION) {
        const int64_t t = nd->shape.d[2], dh = nd->shape.d[3];
        if (wrong == OFF_BY_A_THOUSANDTH || (wrong == AT_BATCH_1 && nd->shape.d[0] == 1))
            for (int64_t i = 0; i < numel; i++) o[i] *= 1.001f;
        if (wrong == LAST_ROW_BEYOND_128 && t > 128)
            for (int64_t r = t - 1; r < numel / dh; r += t) o[r * dh] += 0.5f;
        if (wrong == ONE_NAN && t > 128) o[5 * dh + 3] = NAN; /* head 0, query 5: no sampled row */
    }
    /* a product of 16-bit operands 2% off (5 units of bf16 roundoff), its
     * output float32 or 16-bit (a 16-bit activation's gradient): float32
     * products untouched */
    if (wrong == LOW_MATMUL_TWO_PERCENT && nd->op == DG_OP_MATMUL && nd->in[0]->dtype != DG_F32)
        for (int64_t i = 0; i < numel; i++) dg__lp_st(nd->dtype, s->out, i, dg__lp_ld(nd->dtype, s->out, i) * 1.02f);
    if (wrong == LAYER_NORM_DX_0_3_PERCENT && nd->op == DG_OP_LAYER_NORM_BACKWARD)
        for (int64_t i = 0; i < numel; i++) o[i] *= 1.003f;
    if (old) {
        float *w = s->inout[0];
        for (int64_t i = 0; i < dg_node_numel(nd->in[0]); i++) w[i] = old[i] + 1.1f * (w[i] - old[i]);
        free(old);
    }
    return DG_OK;
}

/* a bench context on a CPU backend with iface `it`, rows into dir/SWEEP.csv */
static bench_ctx in_process(dg_backend **be, dg_backend_i *it, const char *dir, const char *sweep, long long *sizes,
                            int n_sizes, const char *cases, const char *impls) {
    ASSERT_OK(dg_cpu_backend_new(be, 2));
    cpu_iface = (*be)->iface;
    held_backend(*be, cpu_iface);
    *it = *(*be)->iface;
    (*be)->iface = it;
    bench_ctx ctx = {.out_dir = dir, .cpu = *be, .threads = 2, .n_size_lists = 1, .case_filter = cases,
                     .impl_filter = impls, .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400,
                     .sweep = sweep};
    for (int i = 0; i < n_sizes; i++) ctx.size_lists[0].v[i] = sizes[i];
    ctx.size_lists[0].n = n_sizes;
    ctx.csv = bench_csv_open(dir, sweep, "# in process\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    return ctx;
}

/* the rows into dir/SWEEP.csv; the backend freed, its own iface first */
static void done(bench_ctx *ctx, dg_backend *be, const char *dir, const char *sweep) {
    held_drop(ctx->csv, true); /* closed by bench_csv_finish, whatever it returns */
    ASSERT_OK(bench_csv_finish(ctx->csv, dir, sweep, true));
    held_free(be);
}

/* The plan actually tried: its arena allocation fails, the row is oom
 * with the allocation's message, and the sweep goes on. */
Test(attention_sweep, a_failing_allocation_is_an_oom_row) {
    char dir[] = "/tmp/dg-attsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    dg_backend *be;
    dg_backend_i it;
    long long sizes[] = {64, 130};
    bench_ctx ctx = in_process(&be, &it, dir, "attention", sizes, 2, "full", "cpu-*-fwd");
    it.alloc = limited_alloc;
    alloc_limit = 15000000; /* T=130: q, k, v 12.8 MB, fused arena 4.3 MB, composed arena 17.3 MB */
    ASSERT_OK(sweep_attention(&ctx));
    cr_assert_eq(ctx.failed, 0, "a composed oom is a finding");
    done(&ctx, be, dir, "attention");
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 4);
    const csv_rec *oom = find(r, n, "full", "cpu-composed-fwd", 130);
    cr_assert(!strcmp(oom->status, "oom") && strstr(oom->note, "allocation of 17305600 bytes refused") &&
              strstr(oom->note, "plan predicted"), "%s: %s", oom->status, oom->note);
    cr_assert(!strcmp(find(r, n, "full", "cpu-fused-fwd", 130)->status, "ok"));
    cr_assert(!strcmp(find(r, n, "full", "cpu-composed-fwd", 64)->status, "ok"));
    held_free(r);
}

/* each wrong attention kernel makes the fused rows (fwd, fwdbwd) wrong and
 * untimed; the rows of the composed form, which has no attention node,
 * are the CLI test's */
static void wrong_attention(wrong_kind kind, long long t, const char *what) {
    char dir[] = "/tmp/dg-attsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    dg_backend *be;
    dg_backend_i it;
    long long sizes[] = {t};
    bench_ctx ctx = in_process(&be, &it, dir, "attention", sizes, 1, "causal", "cpu-fused-*");
    it.compute = wrong_compute;
    wrong = kind;
    ASSERT_OK(sweep_attention(&ctx));
    done(&ctx, be, dir, "attention");
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 2);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].status, "wrong", "%s, %s: %s (error %g, %s)", what, r[i].impl, r[i].status,
                         r[i].max_rel_err, r[i].note);
        /* an infinite error (a NaN in the output) reads back as NaN */
        cr_assert(r[i].reps == 0 && isnan(r[i].median_ms) && !(r[i].max_rel_err <= ATT_CHECK_TOL));
    }
    cr_assert_eq(ctx.failed, 2);
    held_free(r);
}

Test(attention_check, an_output_a_thousandth_off_is_wrong) { wrong_attention(OFF_BY_A_THOUSANDTH, 64, "x 1.001"); }
/* wrong only at the reduced check's batch of 1: the full size passes, the
 * reduced check catches it */
Test(attention_check, an_output_wrong_at_the_reduced_shape_is_wrong) { wrong_attention(AT_BATCH_1, 64, "batch 1"); }
/* wrong only at T > 128: the reduced check passes, the sampled rows catch it */
Test(attention_check, a_wrong_last_row_beyond_the_reduced_length_is_wrong) {
    wrong_attention(LAST_ROW_BEYOND_128, 130, "last query row");
}
Test(attention_check, an_entry_left_unwritten_is_wrong) { wrong_attention(ONE_NAN, 130, "one NaN"); }

/* A 16-bit product 2% off makes the composed bf16 rows wrong, untimed,
 * at bf16's tolerance, while the fp32 rows beside them (no 16-bit
 * product) pass */
Test(attention_check, a_sixteen_bit_product_two_percent_off_is_wrong) {
    char dir[] = "/tmp/dg-attsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    dg_backend *be;
    dg_backend_i it;
    long long sizes[] = {64};
    bench_ctx ctx = in_process(&be, &it, dir, "attention", sizes, 1, "full", "cpu-composed-*");
    ctx.precisions[0] = DG_PREC_FP32;
    ctx.precisions[1] = DG_PREC_BF16;
    ctx.n_precisions = 2;
    it.compute = wrong_compute;
    wrong = LOW_MATMUL_TWO_PERCENT;
    ASSERT_OK(sweep_attention(&ctx));
    done(&ctx, be, dir, "attention");
    int n;
    csv_rec *r = read_rows(dir, "attention", &n);
    cr_assert_eq(n, 4, "fwd and fwdbwd in fp32 and bf16: %d rows", n);
    for (int i = 0; i < n; i++) {
        bool low = r[i].precision == DG_PREC_BF16;
        cr_assert_str_eq(r[i].status, low ? "wrong" : "ok", "%s %s: error %g (%s)", r[i].impl,
                         dg_precision_name(r[i].precision), r[i].max_rel_err, r[i].note);
        if (low) cr_assert(r[i].reps == 0 && r[i].max_rel_err > att_tol(DG_PREC_BF16) && strstr(r[i].note, "bf16"),
                           "%s: %d reps, error %g (%s)", r[i].impl, r[i].reps, r[i].max_rel_err, r[i].note);
    }
    cr_assert_eq(ctx.failed, 2);
    held_free(r);
}

/* ---- transformer ---- */

/* 6 T B (12 L C^2 + C V) for the products of the blocks and the head, and
 * the causal attention's 14 B H T^2 Dh (T+1)/(2T) per layer */
static double lm_flops(double b, double t) {
    return 6 * b * t * (12.0 * 4 * 256 * 256 + 256.0 * 96) + 4 * convention_flops(b, 4, t, 64, true, true);
}

Test(transformer_sweep, cpu_rows_are_checked) {
    need_bench();
    char dir[] = "/tmp/dg-lmsweep-XXXXXX", cmd[512], out[1 << 14], path[256];
    tmp_dir(dir);
    held_dir(dir);
    /* FAST lifts --cpu-cap: this test is about the checks, not the cap; the
     * cap's prediction comes from one check step, which a loaded 2-core CI
     * machine once ran slowly enough to predict 3.01 s and skip the row */
    snprintf(cmd, sizeof cmd,
             "%s --sweep transformer --backends cpu --quick --sizes transformer=16 " FAST " --out %s",
             DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = read_rows(dir, "transformer", &n);
    cr_assert_eq(n, 2, "fused and composed at batch 8, T=16 (--quick): %d rows", n);
    static const char *const names[2] = {"charlm-fused-b8", "charlm-composed-b8"};
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].name, names[i]);
        cr_assert_str_eq(r[i].status, "ok", "%s: %s (%s)", r[i].name, r[i].status, r[i].note);
        cr_assert_str_eq(r[i].check, "f64-step+grad@b2t16 tol 0.0001/0.05");
        cr_assert(r[i].max_rel_err <= 5e-2, "%s: error %g", r[i].name, r[i].max_rel_err);
        cr_assert(r[i].m == 16 && r[i].batch == 8 && r[i].n == 256 && r[i].k == 96 && r[i].arena_bytes > 0);
        double flops = r[i].gflops * r[i].median_ms * 1e6, want = lm_flops(8, 16);
        cr_assert(fabs(flops - want) <= 1e-4 * want, "%s: %.6g FLOPs, want %.6g", r[i].name, flops, want);
    }
    held_free(r);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "## Transformer (char-LM) training step") && strstr(sum, "| 8 | 16 | ") &&
              strstr(sum, "| fused | fp32 | 8 | n/a (not measured on both) |"), "%s", sum);
    held_free(sum);
}

/* --dtype on the transformer: the bf16-mixed step measured on the CPU and
 * checked against the float64 step at bf16's tolerances (named in the
 * check column), its error that of real roundings; tf32, which the CPU
 * does not have, skipped with the reason */
Test(transformer_sweep, a_bf16_step_is_measured_and_checked_and_tf32_skipped_on_the_cpu) {
    need_bench();
    char dir[] = "/tmp/dg-lmsweep-XXXXXX", cmd[512], out[1 << 14], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep transformer --backends cpu --quick --sizes transformer=16 --case "
             "charlm-composed-b8 --dtype tf32,bf16 " FAST " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = read_rows(dir, "transformer", &n);
    cr_assert_eq(n, 2, "tf32 and bf16 at batch 8, T=16: %d rows", n);
    cr_assert(r[0].precision == DG_PREC_TF32 && !strcmp(r[0].status, "skipped") &&
              strstr(r[0].note, "no TF32 on the CPU") && r[0].reps == 0, "%s (%s)", r[0].status, r[0].note);
    const csv_rec *b = &r[1];
    char check[48];
    snprintf(check, sizeof check, "f64-step+grad@b2t16 tol %.2g/%.2g", lm_grad_tol(DG_PREC_BF16), 0.15);
    cr_assert(b->precision == DG_PREC_BF16 && b->reps >= 1, "%s", dg_precision_name(b->precision));
    cr_assert_str_eq(b->status, "ok", "%s (%s)", b->status, b->note);
    cr_assert_str_eq(b->check, check);
    /* measured 0.077 (the updates); the fp32 step's is 3e-4: bf16 ran */
    cr_assert(b->max_rel_err > 1e-2 && b->max_rel_err <= 0.15 && strstr(b->note, "gradients"), "error %g (%s)",
              b->max_rel_err, b->note);
    held_free(r);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "### composed attention (bf16)") && strstr(sum, "| composed | bf16 | 8 |"), "%s", sum);
    held_free(sum);
}

/* a step made wrong on purpose: its rows wrong, untimed */
static void wrong_step_in(wrong_kind kind, const char *what, const char *form, dg_precision p) {
    char dir[] = "/tmp/dg-lmsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    dg_backend *be;
    dg_backend_i it;
    long long sizes[] = {16};
    bench_ctx ctx = in_process(&be, &it, dir, "transformer", sizes, 1, form, "cpu");
    ctx.quick = true;
    ctx.precisions[0] = p;
    ctx.n_precisions = 1;
    it.compute = wrong_compute;
    wrong = kind;
    ASSERT_OK(sweep_transformer(&ctx));
    done(&ctx, be, dir, "transformer");
    int n;
    csv_rec *r = read_rows(dir, "transformer", &n);
    cr_assert(n == 1 && !strcmp(r[0].status, "wrong") && r[0].reps == 0 && r[0].precision == p,
              "%s: %d rows: %s, error %g (%s)", what, n, r[0].status, r[0].max_rel_err, r[0].note);
    held_free(r);
}

static void wrong_step(wrong_kind kind, const char *what) { wrong_step_in(kind, what, "charlm-fused-b8", DG_PREC_FP32); }

/* Every 16-bit product of the bf16-mixed step 2% off (5 units of bf16
 * roundoff, beyond any rounding): its gradients fail bf16's tolerance */
Test(transformer_sweep, a_bf16_step_with_products_two_percent_off_is_wrong) {
    wrong_step_in(LOW_MATMUL_TWO_PERCENT, "16-bit products x 1.02", "charlm-composed-b8", DG_PREC_BF16);
}

/* An Adam update 10% too large fails the step's update check */
Test(transformer_sweep, a_wrong_update_is_wrong) { wrong_step(ADAM_TEN_PERCENT, "Adam x 1.1"); }
/* A layer norm's input gradient 0.3% off moves Adam's first update by a
 * few percent only (about lr * sign(g)): the gradients' check fails it */
Test(transformer_sweep, a_backward_a_few_thousandths_off_is_wrong) {
    wrong_step(LAYER_NORM_DX_0_3_PERCENT, "layer norm dx x 1.003");
}

/* `bench train --model charlm`: bad options exit 2 naming the option, a
 * text that is not text exits 1 naming the file, nothing written either
 * way; a short run writes its curve and reports the unigram entropy, and
 * bench plot draws that curve. */
Test(charlm_cli, bad_input_is_refused_and_a_short_run_writes_its_curve) {
    need_bench();
    char dir[] = "/tmp/dg-charlm-XXXXXX", cmd[1024], out[8192], path[512];
    tmp_dir(dir);
    held_dir(dir);
    static const char *const bad[][2] = {
        {"--heads 3 --width 10", "3 heads do not divide the width 10"},
        {"--attention sparse", "--attention"},
        {"--layers 0", "--layers"},
        {"--steps -5", "--steps"},
        {"--model charlm --unknown", "unknown"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s train --model charlm %s --out %s", DG_BENCH_PATH, bad[i][0], dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 2, "%s: %s", bad[i][0], out);
        cr_assert(strstr(out, bad[i][1]), "%s: '%s' not in: %s", bad[i][0], bad[i][1], out);
    }
    snprintf(path, sizeof path, "%s/binary.txt", dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 100; i++) fputc(i % 2 ? 'x' : 3, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s train --model charlm --text %s --out %s", DG_BENCH_PATH, path, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "not text") && strstr(out, "binary.txt"), "%s", out);
    snprintf(path, sizeof path, "%s/train-charlm-cpu.csv", dir);
    cr_assert(access(path, F_OK) != 0, "a refused run wrote %s", path);
    snprintf(cmd, sizeof cmd, "%s train --model charlm --steps 4 --eval-every 2 --context 16 --width 16 --heads 2 "
             "--layers 1 --batch 4 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "unigram entropy 3.1700") && strstr(out, "first step loss"), "%s", out);
    int n = 0;
    FILE *c = fopen(path, "r");
    cr_assert_not_null(c, "no %s", path);
    char line[512];
    while (fgets(line, sizeof line, c)) n += line[0] != '#';
    fclose(c);
    cr_assert_eq(n, 3, "header and 2 evaluations, got %d lines", n);
    /* the report finds the curve without a sweep beside it: its table
     * names the last step and the text's unigram entropy */
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    c = fopen(path, "r");
    cr_assert_not_null(c, "bench plot wrote no %s", path);
    size_t len = fread(out, 1, sizeof out - 1, c);
    out[len] = '\0';
    fclose(c);
    cr_assert(strstr(out, "## Char-LM training") && strstr(out, "| cpu | 4 |") && strstr(out, "| 3.1700 |"),
              "no char-LM curve table in summary.md:\n%s", out);
}
