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
    int    warmup;       /* untimed runs first                     */
    int    min_reps;     /* at least this many timed runs          */
    int    max_reps;     /* at most                                 */
    double min_time_s;   /* and at least this much timed time       */
} bench_timing;

typedef struct bench_stats {
    double        median_ms, min_ms, max_ms, cv_pct;
    int           reps;
    const double *samples; /* reps timed runs in ms, in the order run; owned by
                            * timing.c, valid until the next bench_time call */
} bench_stats;

/* nothing measured */
#define BENCH_NO_STATS ((bench_stats){NAN, NAN, NAN, NAN, 0, NULL})

typedef dg_status (*bench_fn)(void *arg);

/* Set by the CLI's SIGINT/SIGTERM handler: bench_time stops after the run
 * under way, and the sweeps after the row under way. */
extern volatile sig_atomic_t bench_interrupted;

/* be: the backend whose work fn queues (NULL: host-only work).
 * events: time with be's events (dg_event_*); otherwise the host clock
 * with be synchronised before and after each run. When bench_interrupted
 * is set the statistics are those of the runs done so far (out->reps, 0 if
 * it came during the warm-up). */
dg_status bench_time(dg_backend *be, bool events, bench_fn fn, void *arg, const bench_timing *t,
                     bench_stats *out);

/* median / min / max / coefficient of variation of v[0..n) (sorts v) */
bench_stats bench_stats_of(double *v, int n);
double      bench_now_s(void);

#endif
