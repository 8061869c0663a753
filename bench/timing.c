#include "timing.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

volatile sig_atomic_t bench_interrupted = 0;

double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stats bench_stats_of(double *v, int n) {
    bench_stats s = {NAN, NAN, NAN, NAN, n, NULL};
    if (n < 1) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.min_ms = v[0];
    s.max_ms = v[n - 1];
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += v[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
    s.cv_pct = n > 1 && mean > 0 ? 100.0 * sqrt(var / (n - 1)) / mean : 0.0;
    return s;
}

/* The two clocks of a timed run: the backend's events around the queued
 * work (device time on a GPU), or the host clock around a synchronised
 * region (transfers included). */
typedef struct clock_pair {
    dg_backend *be;
    dg_event   *start, *stop; /* NULL: host clock */
} clock_pair;

/* one timed run, in ms */
static dg_status run_once(const clock_pair *c, bench_fn fn, void *arg, double *ms) {
    dg_status st;
    if (c->start) {
        if ((st = dg_event_record(c->start)) != DG_OK) return st;
        if ((st = fn(arg)) != DG_OK) return st;
        if ((st = dg_event_record(c->stop)) != DG_OK) return st;
        return dg_event_elapsed(c->start, c->stop, ms);
    }
    if (c->be && (st = dg_backend_sync(c->be)) != DG_OK) return st;
    double t0 = bench_now_s();
    if ((st = fn(arg)) != DG_OK) return st;
    if (c->be && (st = dg_backend_sync(c->be)) != DG_OK) return st;
    *ms = 1e3 * (bench_now_s() - t0);
    return DG_OK;
}

static dg_status time_reps(const clock_pair *c, bench_fn fn, void *arg, const bench_timing *t, bench_stats *out) {
    dg_status st;
    double ms = 0;
    for (int i = 0; i < t->warmup && !bench_interrupted; i++)
        if ((st = run_once(c, fn, arg, &ms)) != DG_OK) return st;
    /* a run longer than the whole time budget: 3 reps are enough for a median */
    int min_reps = ms > 1e3 * t->min_time_s && t->min_reps > 3 ? 3 : t->min_reps;
    double *v = malloc((size_t)t->max_reps * sizeof *v);
    if (!v) return dg__fail(DG_ERR_OOM, "bench: out of memory for timings");
    int n = 0;
    double total = 0;
    while (n < t->max_reps && (n < min_reps || total < 1e3 * t->min_time_s) && !bench_interrupted) {
        if ((st = run_once(c, fn, arg, &ms)) != DG_OK) { free(v); return st; }
        v[n++] = ms;
        total += ms;
    }
    *out = bench_stats_of(v, n);
    free(v);
    return DG_OK;
}

dg_status bench_time(dg_backend *be, bool events, bench_fn fn, void *arg, const bench_timing *t,
                     bench_stats *out) {
    clock_pair c = {be, NULL, NULL};
    dg_status st = DG_OK;
    if (be && events && (st = dg_event_new(be, &c.start)) == DG_OK) st = dg_event_new(be, &c.stop);
    if (st == DG_OK) st = time_reps(&c, fn, arg, t, out);
    dg_event_free(c.start);
    dg_event_free(c.stop);
    return st;
}
