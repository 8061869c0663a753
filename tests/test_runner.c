/* The sweep runner (bench/runner/runner.h) driven by a toy sweep declared
 * here and nowhere else: its rows are written once each in point x
 * implementation order, filtered, skipped by prediction, interrupted, and
 * failed or wrong with the right status, each with the columns its sweep
 * knows before running it, through the runner alone. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "cli/options.h"
#include "core/status_internal.h"
#include "cpu_backend/cpu_backend.h"
#include "runner/eta.h"
#include "runner/runner.h"
#include "shell_util.h"
#include "test_util.h"

/* what the toy's callbacks saw */
static struct {
    int setups, teardowns, prepares, releases, runs;
    int interrupt_at;           /* prepare number that sets bench_interrupted; 0: none */
    const char *fail_setup_of;  /* a case whose setup fails                           */
    dg_status fail_setup_with;
    bool wrong_check, wrong_prepare;
    bool check_fails;           /* the check cannot read the result back          */
    bool cubic;                 /* toy-slow sleeps 2 ms x m^3: a rate from m = 1
                                 * predicts the larger rows short                 */
    int  interrupt_in_run;      /* run number that sets bench_interrupted; 0: none */
    int  setup_precision;       /* the precision of the point last set up         */
    int  precision_mismatches;  /* rows prepared in another precision than that   */
    int  slow_runs_at_4;        /* toy-slow's runs at m = 4                        */
} toy;

static const bench_impl toy_impls[] = {
    {.name = "toy-fast"},
    {.name = "toy-slow"},
    {.name = "toy-gpu", .gpu = true}, /* no GPU backend in these contexts: never a row */
    {.name = "toy-none"},             /* applies nowhere                               */
};

/* cases a and b at sizes 1, 2, 4: flops = size */
static void toy_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)ctx; (void)arg;
    static const char *const cases[] = {"a", "b"};
    for (int c = 0; c < 2; c++)
        for (int s = 1; s <= 4; s *= 2)
            bench_points_add(out, (bench_point){.name = cases[c], .m = s, .n = 1, .k = 1, .batch = 1,
                                                .flops = 1e6 * s});
}

static bool toy_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx; (void)pt;
    return strcmp(im->name, "toy-none") != 0;
}

/* the scratch of every row: 1000 bytes per unit of m */
static void toy_columns(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row) {
    (void)ctx; (void)im;
    row->scratch_bytes = 1000 * pt->m;
}

static dg_status toy_setup(bench_ctx *ctx, const bench_point *pt, void **state) {
    (void)ctx;
    toy.setups++;
    toy.setup_precision = (int)pt->precision;
    if (toy.fail_setup_of && !strcmp(pt->name, toy.fail_setup_of))
        return toy.fail_setup_with == DG_ERR_OOM ? dg__fail(DG_ERR_OOM, "no room for the toy")
                                                 : dg__fail(DG_ERR_BACKEND, "the toy broke");
    *state = &toy;
    return DG_OK;
}

static void toy_teardown(void *state) {
    cr_assert_eq(state, &toy);
    toy.teardowns++;
}

/* toy-slow sleeps 2 ms per unit of m; toy-fast does nothing */
static dg_status toy_run(void *arg) {
    (void)arg;
    toy.runs++;
    if (toy.interrupt_in_run && toy.runs == toy.interrupt_in_run) bench_interrupted = SIGINT;
    return DG_OK;
}
static dg_status toy_sleep(void *arg) {
    int64_t m = *(const int64_t *)arg;
    toy.runs++;
    if (toy.interrupt_in_run && toy.runs == toy.interrupt_in_run) bench_interrupted = SIGINT;
    toy.slow_runs_at_4 += m == 4;
    struct timespec ts = {0, 2000000L * (long)(toy.cubic ? m * m * m : m)};
    nanosleep(&ts, NULL);
    return DG_OK;
}

static int64_t toy_m;
static dg_status toy_prepare(bench_ctx *ctx, void *state, const bench_impl *im, bench_row *row, bench_work *work) {
    (void)ctx; (void)state;
    toy.prepares++;
    toy.precision_mismatches += (int)row->precision != toy.setup_precision;
    if (toy.interrupt_at && toy.prepares == toy.interrupt_at) bench_interrupted = 1;
    if (toy.wrong_prepare) {
        row->max_rel_err = 1;
        row->status = "wrong";
        return DG_OK;
    }
    toy_m = row->m;
    *work = (bench_work){.fn = strcmp(im->name, "toy-slow") ? toy_run : toy_sleep, .arg = &toy_m};
    return DG_OK;
}

static bool toy_check(void *state, const bench_impl *im, bench_row *row) {
    (void)state; (void)im;
    if (toy.check_fails) {
        row->status = bench_status_word(DG_ERR_BACKEND);
        row->note = "the toy's result could not be read back";
        return false;
    }
    row->max_rel_err = toy.wrong_check ? 0.5 : 1e-9;
    return !toy.wrong_check;
}

static void toy_release(void *state, const bench_impl *im, bench_work *work) {
    (void)state; (void)im; (void)work;
    toy.releases++;
}

static const bench_sweep_spec toy_spec = {
    .name = "toy", .check_word = "toy-check", .impls = toy_impls, .n_impls = 4, .points = toy_points,
    .applies = toy_applies, .columns = toy_columns, .setup = toy_setup, .teardown = toy_teardown,
    .prepare = toy_prepare, .check = toy_check, .release = toy_release,
};

static dg_status run_toy(bench_ctx *ctx) { return bench_run_spec(ctx, &toy_spec); }
static const sweep_def toy_def = {.name = "toy", .what = "a sweep of the tests", .run = run_toy};

/* runs the toy sweep through bench_run_sweep into dir/toy.csv, returns its rows */
/* runs sweep def on a one-thread CPU backend into dir/toy.csv, with ctx's
 * filters, cap (default 30 s) and timing (default 2 runs); its rows */
static csv_rec *run_def(bench_ctx *ctx, const sweep_def *def, const char *dir, int *n) {
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 1));
    ctx->out_dir = dir;
    ctx->cpu = cpu;
    ctx->threads = 1;
    if (!ctx->timing.max_reps) ctx->timing = (bench_timing){.min_reps = 2, .max_reps = 2};
    if (!ctx->cpu_cap_s) ctx->cpu_cap_s = 30;
    bench_run_sweep(ctx, def);
    dg_backend_free(cpu);
    char path[256];
    snprintf(path, sizeof path, "%s/toy.csv", dir);
    csv_rec *r = bench_csv_read(path, n);
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

static csv_rec *run(bench_ctx *ctx, const char *dir, int *n) { return run_def(ctx, &toy_def, dir, n); }

static void reset(void) {
    memset(&toy, 0, sizeof toy);
    bench_interrupted = 0;
}

/* every row once, in point x implementation order, checked and timed;
 * one setup, one teardown a point; one release a row; the progress total
 * is the rows written */
Test(runner, writes_every_row_once_in_order) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {0};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 12, "2 cases x 3 sizes x 2 implementations, got %d", n);
    static const char *const order[] = {"a", "a", "a", "a", "a", "a", "b", "b", "b", "b", "b", "b"};
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].name, order[i]);
        cr_assert_eq(r[i].m, 1LL << (i % 6 / 2), "row %d m %lld", i, r[i].m);
        cr_assert_str_eq(r[i].impl, i % 2 ? "toy-slow" : "toy-fast");
        cr_assert_str_eq(r[i].sweep, "toy");
        cr_assert_str_eq(r[i].check, "toy-check");
        cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "row %d: %s", i, r[i].status);
        cr_assert(r[i].max_rel_err == 1e-9 && r[i].reps == 2 && r[i].median_ms >= 0);
        cr_assert_eq(r[i].scratch_bytes, 1000 * r[i].m);
    }
    cr_assert_eq(toy.setups, 6);
    cr_assert_eq(toy.teardowns, 6);
    cr_assert_eq(toy.releases, 12);
    cr_assert_eq(ctx.planned, 12);
    free(r);
    remove_dir(dir);
}

/* The precision axis: points x precisions (in --dtype's order, those the
 * spec declares) x implementations, one setup per (point, precision), the
 * row's precision the one set up, written in the dtype column; a
 * precision the spec lacks has no rows. */
static dg_status run_toy_bf16(bench_ctx *ctx) {
    bench_sweep_spec spec = toy_spec;
    spec.precisions = BENCH_PREC(DG_PREC_FP32) | BENCH_PREC(DG_PREC_BF16);
    return bench_run_spec(ctx, &spec);
}
static const sweep_def toy_bf16_def = {.name = "toy", .what = "the toy in fp32 and bf16", .run = run_toy_bf16};

Test(runner, crosses_points_with_the_precisions_the_spec_declares) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.n_precisions = 3, .precisions = {DG_PREC_BF16, DG_PREC_FP16, DG_PREC_FP32}};
    int n;
    csv_rec *r = run_def(&ctx, &toy_bf16_def, dir, &n);
    cr_assert_eq(n, 24, "2 cases x 3 sizes x (bf16, fp32) x 2 implementations, got %d", n);
    for (int i = 0; i < n; i++) {
        dg_precision want = i % 4 < 2 ? DG_PREC_BF16 : DG_PREC_FP32; /* point, then precision, then impl */
        cr_assert_eq(r[i].precision, want, "row %d: %s", i, dg_precision_name(r[i].precision));
        cr_assert_eq(r[i].m, 1LL << (i % 12 / 4), "row %d m %lld", i, r[i].m);
        cr_assert_str_eq(r[i].impl, i % 2 ? "toy-slow" : "toy-fast");
        cr_assert_eq(r[i].tf32, 0);
    }
    cr_assert_eq(toy.setups, 12, "one setup per point and precision: %d", toy.setups);
    cr_assert_eq(toy.teardowns, 12);
    cr_assert_eq(toy.precision_mismatches, 0, "rows prepared in another precision than their setup's");
    cr_assert_eq(ctx.precisions_run, BENCH_PREC(DG_PREC_FP32) | BENCH_PREC(DG_PREC_BF16));
    free(r);
    remove_dir(dir);
}

/* A spec that declares no precision runs in fp32 alone: --dtype bf16,fp32
 * gives its fp32 rows, --dtype bf16 none (the sweep keeps no file). */
Test(runner, a_spec_without_precisions_runs_fp32_alone) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.n_precisions = 2, .precisions = {DG_PREC_BF16, DG_PREC_FP32}};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 12);
    for (int i = 0; i < n; i++) cr_assert_eq(r[i].precision, DG_PREC_FP32);
    free(r);
    remove_dir(dir);
    reset();
    char dir2[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir2);
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 1));
    bench_ctx only = {.n_precisions = 1, .precisions = {DG_PREC_BF16}, .out_dir = dir2, .cpu = cpu, .threads = 1,
                      .timing = {.min_reps = 2, .max_reps = 2}, .cpu_cap_s = 30};
    bench_run_sweep(&only, &toy_def);
    dg_backend_free(cpu);
    cr_assert_eq(only.rows, 0);
    cr_assert_eq(toy.setups, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/toy.csv", dir2);
    cr_assert_neq(access(path, F_OK), 0, "a sweep without rows wrote %s", path);
    remove_dir(dir2);
}

/* --case and --impl: only their rows; a point with none is never set up */
Test(runner, filters_by_case_and_impl) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.case_filter = "b", .impl_filter = "toy-f*"};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 3);
    for (int i = 0; i < n; i++) cr_assert(!strcmp(r[i].name, "b") && !strcmp(r[i].impl, "toy-fast"));
    cr_assert_eq(toy.setups, 3);
    cr_assert_eq(ctx.planned, 3);
    free(r);
    remove_dir(dir);
}

/* a CPU row predicted above --cpu-cap from the last row of its
 * implementation is skipped with the prediction, and never prepared; it
 * has the columns its sweep fills before running a row */
Test(runner, skips_what_the_last_rate_predicts_too_slow) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.impl_filter = "toy-slow", .case_filter = "a", .cpu_cap_s = 0.003};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(r[0].status, "ok"); /* m = 1: 2 ms, no rate yet */
    for (int i = 1; i < 3; i++) {
        cr_assert_str_eq(r[i].status, "skipped", "m %lld: %s", r[i].m, r[i].status);
        cr_assert(strstr(r[i].note, "--cpu-cap") != NULL, "%s", r[i].note);
        cr_assert_eq(r[i].scratch_bytes, 1000 * r[i].m, "m %lld: scratch %lld", r[i].m, r[i].scratch_bytes);
    }
    cr_assert_eq(toy.prepares, 1);
    free(r);
    remove_dir(dir);
}

/* Ctrl-C during a row: that row is the last written, and the point under
 * way is torn down */
Test(runner, stops_after_the_row_under_way_when_interrupted) {
    reset();
    toy.interrupt_at = 3;
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {0};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    bench_interrupted = 0;
    cr_assert_eq(n, 3, "rows %d", n);
    cr_assert_str_eq(r[2].status, "interrupted");
    cr_assert_eq(toy.setups, toy.teardowns);
    free(r);
    remove_dir(dir);
}

/* a setup that fails: every row of its point says so (oom or failed),
 * with the message and the columns known before running, and the other
 * points run */
Test(runner, a_failed_setup_fails_its_points_rows) {
    for (int oom = 0; oom < 2; oom++) {
        reset();
        toy.fail_setup_of = "a";
        toy.fail_setup_with = oom ? DG_ERR_OOM : DG_ERR_BACKEND;
        char dir[] = "/tmp/dg-runner-XXXXXX";
        tmp_dir(dir);
        bench_ctx ctx = {0};
        int n;
        csv_rec *r = run(&ctx, dir, &n);
        cr_assert_eq(n, 12);
        for (int i = 0; i < n; i++) {
            bool a = !strcmp(r[i].name, "a");
            cr_assert_str_eq(r[i].status, a ? (oom ? "oom" : "failed") : "ok");
            if (a) cr_assert(strstr(r[i].note, oom ? "no room for the toy" : "the toy broke"), "%s", r[i].note);
            cr_assert_eq(r[i].scratch_bytes, 1000 * r[i].m);
        }
        cr_assert_eq(ctx.failed, 6);
        cr_assert_eq(toy.teardowns, 3, "only the points set up are torn down");
        free(r);
        remove_dir(dir);
    }
}

/* a check that fails after timing, or one prepare made itself, is a
 * wrong row with no time; prepare's own is never timed */
Test(runner, wrong_rows_keep_no_time) {
    for (int in_prepare = 0; in_prepare < 2; in_prepare++) {
        reset();
        toy.wrong_check = !in_prepare;
        toy.wrong_prepare = in_prepare;
        char dir[] = "/tmp/dg-runner-XXXXXX";
        tmp_dir(dir);
        bench_ctx ctx = {.case_filter = "a"};
        int n;
        csv_rec *r = run(&ctx, dir, &n);
        cr_assert_eq(n, 6);
        for (int i = 0; i < n; i++) {
            cr_assert_str_eq(r[i].status, "wrong");
            cr_assert(isnan(r[i].median_ms), "a wrong row has no time");
        }
        cr_assert_eq(toy.runs > 0, !in_prepare, "runs %d", toy.runs);
        free(r);
        remove_dir(dir);
    }
}

/* the prediction: the last rate scaled by the work, flops first, else bytes */
Test(runner, predicts_from_the_last_rate) {
    bench_point flops = {.flops = 4e9}, bytes = {.bytes = 8e9}, none = {0};
    cr_assert_float_eq(bench_predict_s(&flops, 100, 1e9), 0.4, 1e-12);
    cr_assert_float_eq(bench_predict_s(&bytes, 100, 2e9), 0.4, 1e-12);
    cr_assert_eq(bench_predict_s(&none, 100, 1e9), 0);
    cr_assert_eq(bench_predict_s(&flops, 0, 1e9), 0, "no rate: no prediction");
}

/* A planted slow kernel: toy-slow's time grows as m^3 while the prediction
 * scales the last rate by the work (m). m = 2 runs at 4x its prediction
 * (noted as the sweep's worst miss); m = 4's prediction (32 ms) is under
 * the 50 ms cap, but its first run takes 128 ms: the warm-up stops there,
 * one timed run follows, and the row says so, instead of the 2 + 5 runs
 * the timing asks for. */
Test(runner, a_run_past_the_cap_ends_its_row_after_one_timed_run) {
    reset();
    toy.cubic = true;
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.impl_filter = "toy-slow", .case_filter = "a", .cpu_cap_s = 0.05,
                     .timing = {.warmup = 2, .min_reps = 5, .max_reps = 100}};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 3);
    for (int i = 0; i < 2; i++) cr_assert_eq(r[i].reps, 5, "m %lld: %d reps", r[i].m, r[i].reps);
    cr_assert_eq(r[2].m, 4);
    cr_assert_str_eq(r[2].status, "ok", "a correct row, measured once: %s", r[2].status);
    cr_assert_eq(r[2].reps, 1, "the row past the cap: %d timed runs", r[2].reps);
    cr_assert_eq(toy.slow_runs_at_4, 2, "one warm-up run and one timed run, not %d", toy.slow_runs_at_4);
    cr_assert(r[2].note && strstr(r[2].note, "timed once") && strstr(r[2].note, "--cpu-cap"), "%s", r[2].note);
    /* m = 4 ran 4x its prediction (m = 2 as much, where a loaded machine
     * slowed m = 1's sleep less than m = 2's) */
    cr_assert(ctx.worst_miss > 3.5, "the worst miss (128 ms for 32 predicted) is %.2f", ctx.worst_miss);
    cr_assert(strstr(ctx.worst_miss_row, "toy-slow"), "%s", ctx.worst_miss_row);
    free(r);
    remove_dir(dir);
}

/* --budget: the rows after the sweep's share of the run's time are skipped
 * and say so; rows estimated past it run lean (one warm-up run, no
 * re-measuring) and say so. Here the share (60 ms) holds case a's rows
 * (toy-slow: 2 x 10, 20, 40 ms) but not case b's. */
Test(runner, rows_past_the_budget_are_skipped_and_say_so) {
    /* Which rows run lean depends on the clock: on a loaded machine the
     * first rows can spend the whole 60 ms share, leaving none to run lean
     * (seen in a CI run). Up to three attempts; every one must skip and
     * say so, and one of them must show a lean row. */
    int lean = 0;
    for (int attempt = 0; attempt < 3 && lean == 0; attempt++) {
        reset();
        char dir[] = "/tmp/dg-runner-XXXXXX";
        tmp_dir(dir);
        bench_ctx ctx = {.budget_s = 0.06, .sweeps_left = 1,
                         .timing = {.warmup = 2, .min_reps = 5, .max_reps = 5, .max_cv_pct = 1e-9, .max_retries = 3}};
        double t0 = bench_now_s();
        int n;
        csv_rec *r = run(&ctx, dir, &n);
        double took = bench_now_s() - t0;
        cr_assert_eq(n, 12);
        int skipped = 0;
        for (int i = 0; i < n; i++) {
            if (!strcmp(r[i].status, "skipped")) {
                skipped++;
                cr_assert(strstr(r[i].note, "--budget"), "%s", r[i].note);
            } else {
                lean += strstr(r[i].note, "lean timing") != NULL;
            }
        }
        /* toy-fast does nothing: five equal clock readings give a cv of 0
         * ("ok"), any spread "noisy" at --max-cv ~0; either way it ran */
        cr_assert(!strcmp(r[0].status, "noisy") || !strcmp(r[0].status, "ok"), "the first row ran: %s (%s)",
                  r[0].status, r[0].note);
        cr_assert(skipped >= 3, "%d rows skipped", skipped);
        cr_assert_lt(took, 1.0, "the sweep took %.2f s on a budget of 0.06", took);
        free(r);
        remove_dir(dir);
    }
    cr_assert(lean >= 1, "no row ran lean in three attempts");
}

/* Ctrl-C inside a row's timed runs: the row keeps the runs done, and is
 * interrupted, not ok or noisy (its figures are of fewer runs than asked) */
Test(runner, a_row_cut_short_is_interrupted) {
    reset();
    toy.interrupt_in_run = 4; /* 2 warm-up runs, then the second of 10 timed runs */
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.impl_filter = "toy-fast", .timing = {.warmup = 2, .min_reps = 10, .max_reps = 10}};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    bench_interrupted = 0;
    cr_assert_eq(n, 1);
    cr_assert_str_eq(r[0].status, "interrupted");
    cr_assert_eq(r[0].reps, 2, "the runs done are kept: %d", r[0].reps);
    free(r);
    remove_dir(dir);
}

/* Ctrl-C in the first run of a re-measurement (cv above --max-cv): the
 * complete first measurement is kept, not the one-run attempt (whose cv of
 * 0 would otherwise win), and the row is not interrupted */
Test(runner, an_interrupted_retry_keeps_the_complete_measurement) {
    reset();
    toy.interrupt_in_run = 2 + 4 + 1; /* warm-up 2, timed 4, then the retry's first run */
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.impl_filter = "toy-slow", .case_filter = "a",
                     .timing = {.warmup = 2, .min_reps = 4, .max_reps = 4, .max_cv_pct = 1e-9, .max_retries = 2}};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    bench_interrupted = 0;
    cr_assert_eq(n, 1, "the sweep stops after the row: %d rows", n);
    cr_assert_eq(r[0].reps, 4, "the complete measurement's 4 runs, not %d", r[0].reps);
    cr_assert_str_eq(r[0].status, "noisy", "a complete measurement (cv above --max-cv): %s", r[0].status);
    free(r);
    remove_dir(dir);
}

/* the time-left estimate: a row's runs under the timing rules, corrected
 * by how far the estimates of the rows run so far missed */
Test(runner, estimates_the_time_left_from_the_timing_rules) {
    bench_timing t = {.warmup = 2, .min_reps = 5, .max_reps = 100, .min_time_s = 0.1};
    cr_assert_float_eq(bench_eta_row_s(&t, 0.001), 0.002 + 0.1, 1e-12, "short runs: min-time");
    cr_assert_float_eq(bench_eta_row_s(&t, 0.1), 0.2 + 0.5, 1e-12, "long runs: min-reps");
    t.run_cap_s = 1;
    cr_assert_float_eq(bench_eta_row_s(&t, 3), 6, 1e-12, "past the cap: one warm-up, one timed run");
    t = (bench_timing){.warmup = 0, .min_reps = 1, .max_reps = 10, .min_time_s = 1};
    cr_assert_float_eq(bench_eta_row_s(&t, 0.01), 0.1, 1e-12, "max-reps ends it before min-time");
    bench_eta e = {0};
    cr_assert_lt(bench_eta_left(&e, 5, 1), 0, "a row without estimate, and none ran: unknown");
    cr_assert_float_eq(bench_eta_left(&e, 5, 0), 5, 1e-12);
    bench_eta_record(&e, 1, 3);   /* estimated 1 s, took 3 */
    bench_eta_record(&e, 0, 0.5); /* no estimate, took 0.5 */
    cr_assert_float_eq(bench_eta_left(&e, 2, 4), 3 * 2 + 0.5 * 4, 1e-12);
}

static const char *toy_unavailable(bench_ctx *ctx, char *why, size_t n) {
    (void)ctx;
    snprintf(why, n, "no toys on this machine");
    return why;
}

static void never_listed(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)ctx; (void)arg; (void)out;
    cr_assert_fail("an unavailable sweep lists no points");
}

/* a sweep that cannot run here: one skipped row named after it, by its
 * first implementation, with the reason; nothing else is asked of it */
Test(runner, an_unavailable_sweep_is_one_skipped_row) {
    reset();
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .threads = 1};
    ctx.csv = bench_csv_open(dir, "toy", "# in process\n", BENCH_CSV_HEADER);
    bench_sweep_spec spec = toy_spec;
    spec.unavailable = toy_unavailable;
    spec.points = never_listed;
    ASSERT_OK(bench_run_spec(&ctx, &spec));
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "toy", true));
    char path[256];
    snprintf(path, sizeof path, "%s/toy.csv", dir);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_eq(n, 1);
    cr_assert(!strcmp(r[0].name, "toy") && !strcmp(r[0].impl, "toy-fast") && !strcmp(r[0].status, "skipped"));
    cr_assert_str_eq(r[0].note, "no toys on this machine");
    cr_assert_eq(toy.setups, 0);
    free(r);
    remove_dir(dir);
}

static dg_status run_toy_hot(bench_ctx *ctx) {
    bench_sweep_spec spec = toy_spec;
    spec.hot = true;
    return bench_run_spec(ctx, &spec);
}

/* --cold empties the caches before a row's runs unless the sweep's rows
 * stay hot (work on devices bench_time cannot flush): the cold column
 * says which */
Test(runner, hot_sweeps_stay_hot_under_cold) {
    for (int hot = 0; hot < 2; hot++) {
        reset();
        char dir[] = "/tmp/dg-runner-XXXXXX";
        tmp_dir(dir);
        bench_ctx ctx = {.case_filter = "a", .impl_filter = "toy-fast",
                         .timing = {.min_reps = 1, .max_reps = 1, .cold = true}};
        const sweep_def def = {.name = "toy", .run = hot ? run_toy_hot : run_toy};
        int n;
        csv_rec *r = run_def(&ctx, &def, dir, &n);
        cr_assert_eq(n, 3);
        for (int i = 0; i < n; i++) cr_assert_eq(r[i].cold, !hot, "hot %d: row %d cold %d", hot, i, r[i].cold);
        free(r);
        remove_dir(dir);
    }
}

/* --sweep all and the default sweeps come from the registry (no list kept
 * beside it to drift): all is every sweep not asked by name alone, the
 * default the ones marked so, both in the registry's order */
Test(runner, all_and_the_default_sweeps_come_from_the_registry) {
    for (int all = 0; all < 2; all++) {
        char *argv[] = {"bench", "--sweep", "all", NULL};
        bench_ctx ctx;
        bench_choice ch;
        cr_assert_eq(bench_parse_options(all ? 3 : 1, argv, &ctx, &ch), BENCH_OPTS_RUN);
        int k = 0;
        for (int i = 0; i < bench_n_sweeps; i++) {
            bool in = all ? !bench_sweeps[i].not_in_all : bench_sweeps[i].by_default;
            if (!in) continue;
            cr_assert(k < ch.n_sweeps && ch.sweeps[k] == &bench_sweeps[i], "all %d: %s missing or out of order",
                      all, bench_sweeps[i].name);
            k++;
        }
        cr_assert_eq(k, ch.n_sweeps, "all %d: %d sweeps, the registry says %d", all, ch.n_sweeps, k);
        cr_assert_eq(ctx.extended, all);
    }
    cr_assert(bench_n_sweeps > 4);
    char *empty[] = {"bench", "--sweep", "", NULL};
    bench_ctx ctx;
    bench_choice ch;
    cr_assert_eq(bench_parse_options(3, empty, &ctx, &ch), 2, "an empty --sweep is refused");
}

static int probe_calls;
/* a probe that declines small points and, on large ones, reports a slow
 * rate: 10 s per 1e6 flops */
static void slow_probe(bench_ctx *ctx, const bench_impl *im, const bench_point *pt, double *ms, double *work) {
    (void)ctx; (void)im;
    probe_calls++;
    if (pt->m < 100) return;
    *ms = 1e4;
    *work = 1e6;
}

/* case a at 1e6 flops, then 2e6, then 2e8: the last over 64 times the
 * work of the row before it */
static void far_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)ctx; (void)arg;
    static const int64_t m[] = {1, 2, 200};
    for (int i = 0; i < 3; i++)
        bench_points_add(out, (bench_point){.name = "a", .m = m[i], .n = 1, .k = 1, .batch = 1, .flops = 1e6 * m[i]});
}

static dg_status run_far(bench_ctx *ctx) {
    bench_sweep_spec spec = toy_spec;
    spec.points = far_points;
    spec.probe = slow_probe;
    return bench_run_spec(ctx, &spec);
}

/* The probe is asked where no row of the implementation has run and where
 * the point's work is over 64 times the work of the last rate (a small
 * row's rate predicts a large point poorly); a probe that declines leaves
 * the rate as it was. Here the probe's slow rate skips the large point,
 * which the fast small rows alone would have let run. */
Test(runner, probes_again_where_the_last_rate_is_far_below_the_point) {
    reset();
    probe_calls = 0;
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.impl_filter = "toy-fast", .timing = {.min_reps = 1, .max_reps = 1}};
    const sweep_def def = {.name = "toy", .run = run_far};
    int n;
    csv_rec *r = run_def(&ctx, &def, dir, &n);
    cr_assert_eq(n, 3);
    cr_assert(strcmp(r[0].status, "skipped") && strcmp(r[1].status, "skipped"), "%s %s", r[0].status, r[1].status);
    cr_assert_str_eq(r[2].status, "skipped", "m 200: %s", r[2].note);
    cr_assert(strstr(r[2].note, "predicted 2000.0 s"), "%s", r[2].note);
    cr_assert_eq(probe_calls, 2, "asked with no rate (declined) and at the far point: %d", probe_calls);
    free(r);
    remove_dir(dir);
}

/* a check that could not read the result back says so with its own
 * failure word: the row is an error, not a wrong result */
Test(runner, a_check_that_cannot_check_is_an_error_not_wrong) {
    reset();
    toy.check_fails = true;
    char dir[] = "/tmp/dg-runner-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx = {.case_filter = "a", .impl_filter = "toy-fast"};
    int n;
    csv_rec *r = run(&ctx, dir, &n);
    cr_assert_eq(n, 3);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].status, "error");
        cr_assert_str_eq(r[i].note, "the toy's result could not be read back");
    }
    cr_assert_eq(ctx.failed, 3);
    free(r);
    remove_dir(dir);
}
