#include "runner/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "machine/host_cache.h"
#include <duograd/testing.h>

#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

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
    bench_stats s = BENCH_NO_STATS;
    s.reps = n;
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
    bool        flush;        /* flush be's L2 before the run (cold GPU) */
    bool        flush_host;   /* empty the host's caches first (cold CPU) */
} clock_pair;

/* one timed run, in ms; a cold run's flush comes before the start */
static dg_status run_once(const clock_pair *c, bench_fn fn, void *arg, double *ms) {
    dg_status st;
#ifdef DG_HAVE_CUDA
    if (c->flush && (st = dg_gpu_flush_l2(c->be)) != DG_OK) return st;
#endif
    if (c->flush_host && (st = bench_host_flush()) != DG_OK) return st;
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

/* The samples of the row being measured: bench_stats.samples points here
 * (in run order) until the next bench_time call. */
static struct {
    double *v, *sorted;
    int     cap;
} samples;

static dg_status samples_reserve(int n) {
    if (n <= samples.cap) return DG_OK;
    double *v = realloc(samples.v, (size_t)n * sizeof *v);
    if (v) samples.v = v;
    double *sorted = v ? realloc(samples.sorted, (size_t)n * sizeof *sorted) : NULL;
    if (sorted) samples.sorted = sorted;
    if (!v || !sorted) return dg_fail(DG_ERR_OOM, "bench: out of memory for %d timings", n);
    samples.cap = n;
    return DG_OK;
}

static bool over_run_cap(const bench_timing *t, double ms) { return t->run_cap_s > 0 && ms > 1e3 * t->run_cap_s; }

/* timed runs into v[0..): until min_reps and min_time_s, or max_reps.
 * Where the host's caches are emptied before each run (tens of ms a
 * flush), min_time_s counts the flushes too: a 10 us op would otherwise
 * run max_reps times, 100 s of flushing for one row. */
static dg_status time_reps(const clock_pair *c, bench_fn fn, void *arg, const bench_timing *t, double warm_ms,
                           double *v, bench_stats *out) {
    dg_status st;
    /* a run longer than the whole time budget: 3 reps are enough for a median
     * (no budget, --min-time 0: the --reps asked for) */
    bool long_run = t->min_time_s > 0 && warm_ms > 1e3 * t->min_time_s;
    int min_reps = long_run && t->min_reps > 3 ? 3 : t->min_reps;
    int n = 0;
    double total = 0, spent = 0, ms = 0, t0 = bench_now_s(); /* spent: what --min-time counts, ms */
    bool over_cap = false;
    while (n < t->max_reps && (n < min_reps || spent < 1e3 * t->min_time_s) && !bench_interrupted && !over_cap) {
        if ((st = run_once(c, fn, arg, &ms)) != DG_OK) return st;
        v[n++] = ms;
        total += ms;
        spent = c->flush_host ? 1e3 * (bench_now_s() - t0) : total;
        over_cap = over_run_cap(t, ms);
    }
    memcpy(samples.sorted, v, (size_t)n * sizeof *v);
    *out = bench_stats_of(samples.sorted, n);
    out->capped = n == t->max_reps && spent < 1e3 * t->min_time_s;
    out->over_cap = over_cap;
    /* cut short: the signal ended the loop before its count, its time or
     * --max-reps did */
    out->cut_short = bench_interrupted && !over_cap && n < t->max_reps && (n < min_reps || spent < 1e3 * t->min_time_s);
    return DG_OK;
}

static dg_status measure(const clock_pair *c, bench_fn fn, void *arg, const bench_timing *t, bench_stats *out) {
    dg_status st;
    double ms = 0, t0 = bench_now_s();
    for (int i = 0; (i < t->warmup || bench_now_s() - t0 < t->warmup_s) && !bench_interrupted && !over_run_cap(t, ms);
         i++)
        if ((st = run_once(c, fn, arg, &ms)) != DG_OK) return st;
    if ((st = samples_reserve(2 * t->max_reps)) != DG_OK) return st;
    /* attempt k goes to the half of samples.v the best attempt is not in */
    double *best = samples.v, *next = samples.v + t->max_reps;
    if ((st = time_reps(c, fn, arg, t, ms, best, out)) != DG_OK) return st;
    int retries = 0;
    while (t->max_cv_pct > 0 && out->cv_pct > t->max_cv_pct && retries < t->max_retries && !bench_interrupted &&
           !out->over_cap) {
        bench_stats again;
        if ((st = time_reps(c, fn, arg, t, ms, next, &again)) != DG_OK) return st;
        retries++;
        if (again.reps > 0 && !again.cut_short && again.cv_pct < out->cv_pct) { /* never a cut-short attempt */
            double *tmp = best;
            best = next;
            next = tmp;
            *out = again;
        }
    }
    out->retries = retries;
    out->samples = best;
    return DG_OK;
}

dg_status bench_time(dg_backend *be, bool events, bench_fn fn, void *arg, const bench_timing *t,
                     bench_stats *out) {
    clock_pair c = {be, NULL, NULL, false, false};
#ifdef DG_HAVE_CUDA
    c.flush = t->cold && be && dg_gpu_l2_bytes(be) > 0;
#endif
    c.flush_host = t->cold && (!be || !strcmp(dg_backend_name(be), "cpu")); /* the CPU's work, or the host's */
    dg_status st = DG_OK;
    *out = BENCH_NO_STATS;
    if (be && events && (st = dg_event_new(be, &c.start)) == DG_OK) st = dg_event_new(be, &c.stop);
    if (st == DG_OK) st = measure(&c, fn, arg, t, out);
    out->cold = (c.flush || c.flush_host) && out->reps > 0;
    dg_event_free(c.start);
    dg_event_free(c.stop);
    return st;
}
