/* test_timing.c: the bench's timing loop and what a row says about it:
 * --min-time honoured up to --max-reps, time-based warm-up, the samples
 * of a row in the order run, a noisy row measured again and then marked,
 * a wrong row without times, the notes and the progress line, and cold
 * runs: the host's caches emptied before every CPU run, outside its time. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <duograd/testing.h>

#include "machine/host_cache.h"
#include "shell_util.h"
#include "runner/sweep.h"

/* a piece of host work whose duration the test chooses, call by call */
typedef struct work {
    int    calls;
    double us[64];   /* the duration of call i % n, microseconds */
    int    n;
    bool   hold;     /* after n calls, keep to the last duration  */
} work;

static void spin_us(double us) {
    double t0 = bench_now_s();
    while (1e6 * (bench_now_s() - t0) < us) {
    }
}

static dg_status timed_work(void *arg) {
    work *w = arg;
    int i = w->hold && w->calls >= w->n ? w->n - 1 : w->calls % w->n;
    w->calls++;
    spin_us(w->us[i]);
    return DG_OK;
}

static bench_timing timing(int warmup, int min_reps, int max_reps, double min_time_s) {
    return (bench_timing){.warmup = warmup, .min_reps = min_reps, .max_reps = max_reps, .min_time_s = min_time_s};
}

Test(timing, min_time_is_honoured_past_hundreds_of_repetitions) {
    work w = {.us = {20}, .n = 1};
    bench_timing t = timing(0, 5, 100000, 0.05);
    bench_stats s;
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    double total = 0;
    for (int i = 0; i < s.reps; i++) total += s.samples[i];
    cr_assert_gt(s.reps, 200, "a 20 us run for 50 ms needs more than 200 runs: %d", s.reps);
    cr_assert_geq(total, 50.0, "the timed runs add up to %.2f ms, below --min-time", total);
    cr_assert(!s.capped);
}

Test(timing, max_reps_ends_a_row_early_and_says_so) {
    work w = {.us = {100}, .n = 1};
    bench_timing t = timing(0, 5, 10, 10.0);
    bench_stats s;
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    cr_assert_eq(s.reps, 10);
    cr_assert(s.capped, "10 runs of 0.1 ms are far from 10 s: capped");
}

Test(timing, warm_up_runs_until_its_time_is_spent) {
    work w = {.us = {1000}, .n = 1};
    bench_timing t = timing(1, 1, 1, 0);
    t.warmup_s = 0.03;
    bench_stats s;
    double t0 = bench_now_s();
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    double warm_ms = 1e3 * (bench_now_s() - t0) - s.samples[0];
    cr_assert_geq(warm_ms, 30.0, "30 ms of warm-up asked, %.1f ms done", warm_ms);
    cr_assert_geq(w.calls - s.reps, 2, "one warm-up run asked, more needed for the time: %d", w.calls - s.reps);
}

Test(timing, samples_are_every_timed_run_in_the_order_run) {
    /* a 1 ms warm-up, then runs of 2, 0.2, 2, 0.2 ... ms */
    work w = {.us = {1000, 2000, 200}, .n = 3};
    bench_timing t = timing(1, 8, 8, 0);
    bench_stats s;
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    cr_assert_eq(s.reps, 8);
    for (int i = 0; i < 8; i++) {
        double want = (i + 1) % 3 == 1 ? 2.0 : (i + 1) % 3 == 2 ? 0.2 : 1.0;
        /* a loaded machine can only make a run longer: sorted samples would fail here */
        cr_assert_geq(s.samples[i], want, "sample %d: %.3f ms, run %.1f ms", i, s.samples[i], want);
    }
    double min = s.samples[0];
    for (int i = 1; i < 8; i++) min = fmin(min, s.samples[i]);
    cr_assert_float_eq(s.min_ms, min, 1e-12, "the statistics are those of the samples");
}

Test(timing, a_noisy_measurement_is_taken_again_and_the_steadiest_kept) {
    /* runs alternate 0.2 and 2 ms: a coefficient of variation near 100% */
    work w = {.us = {200, 2000}, .n = 2};
    bench_timing t = timing(0, 10, 10, 0);
    t.max_cv_pct = 5;
    t.max_retries = 2;
    bench_stats s;
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    cr_assert_eq(s.retries, 2);
    cr_assert_gt(s.cv_pct, 50);
    cr_assert_eq(w.calls, 30, "three measurements of 10 runs: %d calls", w.calls);
    /* one 30 ms run among ten (cv about 300%), then steady: the second
     * attempt is kept (all its runs take at least 0.5 ms) */
    work v = {.us = {100, 100, 100, 100, 30000, 100, 100, 100, 100, 100, 500}, .n = 11, .hold = true};
    t.max_retries = 1;
    cr_assert_eq(bench_time(NULL, false, timed_work, &v, &t, &s), DG_OK);
    cr_assert_eq(s.retries, 1);
    cr_assert_geq(s.min_ms, 0.5, "the steady attempt should be kept: min %.3f ms, cv %.1f%%", s.min_ms, s.cv_pct);
    /* --max-cv 0: never again */
    t.max_cv_pct = 0;
    w.calls = 0;
    cr_assert_eq(bench_time(NULL, false, timed_work, &w, &t, &s), DG_OK);
    cr_assert_eq(s.retries, 0);
    cr_assert_eq(w.calls, 10);
}

/* a bench_ctx writing rows into DIR/t.csv */
static void open_ctx(bench_ctx *ctx, const char *dir) {
    *ctx = (bench_ctx){.out_dir = dir, .threads = 1, .timing = {.max_cv_pct = 5, .max_reps = 100}};
    ctx->csv = bench_csv_open(dir, "t", "# test\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx->csv, "%s", dg_last_error());
}

static csv_rec *close_ctx(bench_ctx *ctx, const char *dir, int *n) {
    cr_assert_eq(bench_csv_finish(ctx->csv, dir, "t", true), DG_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    csv_rec *r = bench_csv_read(path, n);
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

Test(timing, rows_say_noisy_wrong_and_why) {
    char dir[] = "/tmp/dg-timing-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx;
    open_ctx(&ctx, dir);
    double v[4] = {1, 1, 1, 1};
    bench_row row = {.sweep = "t", .name = "c", .impl = "cpu-x", .backend = "cpu", .m = 1, .n = 1, .k = 1,
                     .batch = 1, .max_rel_err = 0, .check = "f64-fwd", .status = "ok",
                     .st = {1, 0.5, 2, 4.9, 4, v, 0, false}};
    bench_emit(&ctx, &row); /* steady enough */
    row.st.cv_pct = 30;
    row.st.retries = 2;
    row.st.capped = true;
    bench_emit(&ctx, &row); /* noisy, measured 3 times, capped */
    row.st.cv_pct = 1;
    row.st.retries = 0;
    row.st.capped = false;
    row.status = "wrong";
    row.max_rel_err = 0.5;
    bench_emit(&ctx, &row); /* a time was taken, but the result is wrong */
    cr_assert_eq(ctx.noisy, 1);
    cr_assert_eq(ctx.failed, 1, "a wrong row is a failed row");
    int n;
    csv_rec *r = close_ctx(&ctx, dir, &n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(r[0].status, "ok");
    cr_assert_float_eq(r[0].median_ms, 1.0, 1e-12);
    cr_assert_str_eq(r[0].check, "f64-fwd");
    cr_assert_str_eq(r[1].status, "noisy");
    cr_assert(strstr(r[1].note, "measured 3 times") && strstr(r[1].note, "--max-reps"), "note: %s", r[1].note);
    cr_assert_float_eq(r[1].median_ms, 1.0, 1e-12, "a noisy row keeps its time");
    cr_assert_str_eq(r[2].status, "wrong");
    cr_assert(isnan(r[2].median_ms) && isnan(r[2].min_ms) && isnan(r[2].max_ms) && r[2].reps == 0,
              "a wrong row keeps no time: %g ms, %d reps", r[2].median_ms, r[2].reps);
    cr_assert_float_eq(r[2].max_rel_err, 0.5, 1e-12);
    free(r);
    remove_dir(dir);
}

Test(timing, the_progress_line_shows_done_of_total_and_the_time_left) {
    char dir[] = "/tmp/dg-timing-XXXXXX", path[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/err.txt", dir);
    bench_ctx ctx;
    open_ctx(&ctx, dir);
    ctx.progress = true;
    ctx.t0 = bench_now_s() - 2; /* two seconds in */
    bench_plan_rows(&ctx, 4);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    cr_assert_not_null(freopen(path, "w", stderr));
    double v[1] = {1};
    bench_row row = {.sweep = "t", .name = "c", .impl = "cpu-x", .backend = "cpu", .m = 1, .n = 1, .k = 1,
                     .batch = 1, .status = "ok", .st = {1, 1, 1, 0, 1, v, 0, false}};
    bench_emit(&ctx, &row);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *shown = read_file(path);
    cr_assert(strstr(shown, "1/4 rows"), "progress: %s", shown);
    cr_assert(strstr(shown, "s left"), "no estimate of the time left: %s", shown);
    free(shown);
    int n;
    free(close_ctx(&ctx, dir, &n));
    remove_dir(dir);
}

/* A memory-bound CPU row of 1 MB: hot, its note says it fits in the
 * last-level cache; cold, its data came from memory and the note is not
 * there */
Test(timing, only_a_hot_row_is_said_to_fit_in_a_cache) {
    if (sysconf(_SC_LEVEL3_CACHE_SIZE) < (2 << 20)) cr_skip_test("no last-level cache of 2 MB or more is reported");
    char dir[] = "/tmp/dg-timing-XXXXXX";
    tmp_dir(dir);
    bench_ctx ctx;
    open_ctx(&ctx, dir);
    double v[4] = {1, 1, 1, 1};
    bench_row row = {.sweep = "t", .name = "c", .impl = "cpu-x", .backend = "cpu", .m = 1, .n = 1, .k = 1,
                     .batch = 1, .max_rel_err = 0, .check = "f64-fwd", .status = "ok", .flops = 1e5, .bytes = 1e6,
                     .st = {1, 1, 1, 0, 4, v, 0, false, false}};
    bench_emit(&ctx, &row);
    row.st.cold = true;
    bench_emit(&ctx, &row);
    int n;
    csv_rec *r = close_ctx(&ctx, dir, &n);
    cr_assert_eq(n, 2);
    cr_assert(r[0].note && strstr(r[0].note, "fits in LLC"), "hot note: %s", r[0].note ? r[0].note : "(none)");
    cr_assert_eq(r[1].cold, 1);
    cr_assert(!r[1].note || !strstr(r[1].note, "fits in"), "cold note: %s", r[1].note);
    free(r);
    remove_dir(dir);
}

/* host work that notes how many host flushes came before each call */
typedef struct flush_watch { int calls; long seen[64]; } flush_watch;

static dg_status watch_flushes(void *arg) {
    flush_watch *w = arg;
    if (w->calls < 64) w->seen[w->calls] = bench_host_flushes();
    w->calls++;
    spin_us(50);
    return DG_OK;
}

Test(timing, a_cold_cpu_run_empties_the_host_caches_first_outside_its_time) {
    double flush_ms = INFINITY; /* the flush alone, the fastest of 3 */
    for (int i = 0; i < 3; i++) {
        double t0 = bench_now_s();
        cr_assert_eq(bench_host_flush(), DG_OK, "%s", dg_last_error());
        flush_ms = fmin(flush_ms, 1e3 * (bench_now_s() - t0));
    }
    flush_watch w = {0};
    bench_timing t = timing(2, 10, 10, 0);
    t.cold = true;
    bench_stats s;
    long before = bench_host_flushes();
    cr_assert_eq(bench_time(NULL, false, watch_flushes, &w, &t, &s), DG_OK, "%s", dg_last_error());
    cr_assert_eq(w.calls, 12);
    for (int i = 0; i < w.calls; i++)
        cr_assert_eq(w.seen[i], before + i + 1, "run %d came after %ld flushes, not %d", i, w.seen[i] - before, i + 1);
    cr_assert(s.cold, "the row does not say it was cold");
    /* a 50 us run: a flush inside the timed region would add flush_ms */
    cr_assert_lt(s.median_ms, 0.05 + 0.5 * flush_ms, "median %.3f ms with a %.3f ms flush: the flush is timed",
                 s.median_ms, flush_ms);
    /* --min-time counts the flushes: 50 ms of 50 us runs is a few runs
     * behind flushes, not 1000 runs and 1000 flushes */
    bench_timing budget = timing(0, 5, 100000, 0.05);
    budget.cold = true;
    w.calls = 0;
    cr_assert_eq(bench_time(NULL, false, watch_flushes, &w, &budget, &s), DG_OK);
    cr_assert_lt(s.reps, 5 + 50 / flush_ms + 50, "%d cold runs of 50 us for a 50 ms budget, %.3f ms flushes", s.reps,
                 flush_ms);
    /* capped judges the same budget: 3 runs behind flushes of several ms
     * spend more than 1 ms, though their 0.15 ms of timed runs do not */
    bench_timing three = timing(0, 3, 3, 0.001);
    three.cold = true;
    w.calls = 0;
    cr_assert_eq(bench_time(NULL, false, watch_flushes, &w, &three, &s), DG_OK);
    if (flush_ms > 1) cr_assert(!s.capped, "a cold row that met --min-time by its flushes says capped");
    t.cold = false;
    w.calls = 0;
    before = bench_host_flushes();
    cr_assert_eq(bench_time(NULL, false, watch_flushes, &w, &t, &s), DG_OK);
    cr_assert_eq(bench_host_flushes(), before, "a hot row flushed the caches");
    cr_assert(!s.cold);
    bench_host_flush_free();
}

Test(timing, the_host_flush_writes_every_line_of_its_buffer) {
    bench_host_flush_free();
    for (int i = 0; i < 3; i++) cr_assert_eq(bench_host_flush(), DG_OK, "%s", dg_last_error());
    const unsigned char *buf;
    int64_t bytes = bench_host_flush_view(&buf);
    cr_assert_not_null(buf);
    cr_assert_eq(bytes, bench_host_flush_bytes(bench_host_caches_of(), omp_get_num_procs()));
    for (int64_t i = 0; i < bytes; i += 64) cr_assert_eq(buf[i], 3, "line %lld written %d times, not 3", i / 64, buf[i]);
    bench_host_flush_free();
}

Test(timing, the_host_flush_outgrows_every_cache) {
    int64_t mib = 1 << 20;
    bench_host_caches one = {2 * mib, 105 * mib, 1, 3}, two = {2 * mib, 105 * mib, 2, 3}, none = {0, 0, 1, 0};
    bench_host_caches no_l3 = {mib, mib, 1, 2}; /* a VM that shows L2 as the last level */
    int64_t b1 = bench_host_flush_bytes(one, 16), b2 = bench_host_flush_bytes(two, 16);
    cr_assert_geq(b1, 2 * 105 * mib + 2 * 16 * 2 * mib, "%lld bytes", (long long)b1);
    cr_assert_geq(b2, 2 * 2 * 105 * mib, "two last-level caches: %lld bytes", (long long)b2);
    cr_assert_geq(bench_host_flush_bytes(one, 64), 2 * 105 * mib + 2 * 64 * 2 * mib, "64 threads' L2s");
    cr_assert_geq(bench_host_flush_bytes(none, 16), BENCH_FLUSH_MIN_BYTES, "unknown sizes");
    cr_assert_geq(bench_host_flush_bytes(no_l3, 16), BENCH_FLUSH_MIN_BYTES, "no L3 read");
    cr_assert_eq(b1 % 64, 0);
}

Test(timing, cache_sizes_read_as_sysfs_writes_them) {
    cr_assert_eq(bench_cache_size_of("32K\n"), 32 << 10);
    cr_assert_eq(bench_cache_size_of("36M"), (int64_t)36 << 20);
    cr_assert_eq(bench_cache_size_of("1024"), 1024);
    cr_assert_eq(bench_cache_size_of(""), -1);
    cr_assert_eq(bench_cache_size_of("K"), -1);
    cr_assert_eq(bench_cache_size_of("12Q"), -1);
    cr_assert_eq(bench_cache_size_of("-4K"), -1);
    if (access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK))
        cr_skip_test("this machine has no /sys/devices/system/cpu/cpu0/cache to read");
    bench_host_caches c = bench_host_caches_of();
    cr_assert_gt(c.llc_bytes, 0, "no last-level cache read from sysfs");
    cr_assert_geq(c.llcs, 1);
}

#ifdef DG_HAVE_CUDA
#include "gpu_util.h"

typedef struct copy_arg { dg_backend *be; void *dst, *src; size_t bytes; } copy_arg;
static dg_status device_copy(void *arg) {
    copy_arg *a = arg;
    return dg_gpu_copy(a->be, a->dst, a->src, a->bytes);
}

/* 16 MB copied: 32 MB of traffic, inside the L2 when hot (H100: 50 MB);
 * read from device memory after the flush of --cold */
Test(timing, a_cold_gpu_run_starts_with_an_empty_l2) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t l2 = dg_gpu_l2_bytes(gpu), bytes = 16u << 20;
    if (l2 < 2 * bytes) cr_skip_test("an L2 of %zu bytes holds no 32 MB of copy traffic", l2);
    copy_arg a = {gpu, NULL, NULL, bytes};
    cr_assert_eq(dg_backend_alloc(gpu, bytes, &a.src), DG_OK);
    cr_assert_eq(dg_backend_alloc(gpu, bytes, &a.dst), DG_OK);
    bench_timing t = timing(5, 100, 100, 0);
    bench_stats hot, cold;
    cr_assert_eq(bench_time(gpu, true, device_copy, &a, &t, &hot), DG_OK, "%s", dg_last_error());
    t.cold = true;
    cr_assert_eq(bench_time(gpu, true, device_copy, &a, &t, &cold), DG_OK, "%s", dg_last_error());
    cr_assert_gt(cold.median_ms, hot.median_ms, "cold %.4f ms is not slower than hot %.4f ms", cold.median_ms,
                 hot.median_ms);
    dg_backend_release(gpu, a.src);
    dg_backend_release(gpu, a.dst);
    dg_backend_free(gpu);
}
#endif
