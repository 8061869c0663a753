/* timing.h: warm-up, repeat to a minimum time and count, robust statistics.
 * Queued work is timed with the backend's events (CUDA events on the GPU:
 * device time, no launch gaps between reps counted; the monotonic clock on
 * the CPU); host work and transfer-inclusive regions with CLOCK_MONOTONIC
 * around a synchronised region. */
#ifndef DG_BENCH_TIMING_H
#define DG_BENCH_TIMING_H

#include <math.h>
#include <signal.h>
#include <stdbool.h>

#include "core/backend.h"

typedef struct bench_timing {
    int    warmup;       /* untimed runs first: at least this many   */
    double warmup_s;     /* and at least this long                   */
    int    min_reps;     /* at least this many timed runs            */
    int    max_reps;     /* at most; it ends a row before min_time_s */
    double min_time_s;   /* and at least this much timed time        */
    double max_cv_pct;   /* above: measure again (0: never)          */
    int    max_retries;  /* at most this many times, then "noisy"    */
    double run_cap_s;    /* a run longer than this ends the row after it:
                          * the warm-up stops and that run is the one
                          * timed sample (a CPU row whose prediction
                          * missed: --cpu-cap); 0: no cap */
    bool   cold;         /* empty the caches before every run: the GPU's L2
                          * for a GPU's work, the host's (host_cache.h) for
                          * the CPU's */
} bench_timing;

typedef struct bench_stats {
    double        median_ms, min_ms, max_ms, cv_pct;
    int           reps;
    const double *samples; /* reps timed runs in ms, in the order run; owned by
                            * timing.c, valid until the next bench_time call */
    int           retries; /* measured again this many times (cv_pct too high) */
    bool          capped;  /* max_reps ended it before min_time_s     */
    bool          cold;    /* every timed run followed a flush (t->cold) */
    bool          over_cap;  /* a run passed t->run_cap_s: timed once    */
    bool          cut_short; /* bench_interrupted ended it before its
                              * runs were all done                       */
} bench_stats;

/* nothing measured */
#define BENCH_NO_STATS ((bench_stats){NAN, NAN, NAN, NAN, 0, NULL, 0, false, false, false, false})

typedef dg_status (*bench_fn)(void *arg);

/* Set by the CLI's SIGINT/SIGTERM handler to the signal's number:
 * bench_time stops after the run under way, and the sweeps after the row
 * under way. */
extern volatile sig_atomic_t bench_interrupted;

/* be: the backend whose work fn queues (NULL: host-only work).
 * events: time with be's events (dg_event_*); otherwise the host clock
 * with be synchronised before and after each run.
 * Warm-up runs until both t->warmup runs and t->warmup_s seconds are done;
 * timed runs until both t->min_reps and t->min_time_s are reached, or
 * t->max_reps (out->capped). When the coefficient of variation is above
 * t->max_cv_pct the whole measurement is taken again, at most
 * t->max_retries times, and the attempt with the smallest one is kept
 * (out->retries). A run longer than t->run_cap_s (when set) ends the
 * warm-up, or the timed runs after it, and no retry follows (out->over_cap).
 * t->cold: before each run, outside the timed region,
 * a GPU backend's L2 is flushed; for a CPU backend's work or the host's
 * (be NULL) the host's caches are emptied (host_cache.h), and
 * t->min_time_s then counts the flushes' time too; out->cold says so. When bench_interrupted is set the statistics are those of the runs
 * done so far (out->reps, 0 if it came during the warm-up; out->cut_short). */
dg_status bench_time(dg_backend *be, bool events, bench_fn fn, void *arg, const bench_timing *t,
                     bench_stats *out);

/* median / min / max / coefficient of variation of v[0..n) (sorts v) */
bench_stats bench_stats_of(double *v, int n);
double      bench_now_s(void);

#endif
