/* runner.h: the loops every sweep shares. A sweep declares its points (the
 * cases crossed with its size axis, in row order), its implementations and
 * a few callbacks; the runner iterates points x precisions (the run's
 * --dtype that the spec declares) x implementations, filters by
 * --case / --impl, counts the rows for the progress line, predicts and
 * skips CPU rows over --cpu-cap, checks for Ctrl-C between rows, times the
 * work the sweep hands it, chooses the status word and emits every row
 * through one site (bench_emit). Google Benchmark's and nvbench's split of
 * benchmark, axes, runner and reporters is the model.
 *
 * For each point, and for each precision in it (pt->precision; the
 * precision names the row's dtype column), in order:
 *   setup(point)                 once, at the first implementation that runs
 *                                (host data rounded to the precision, the
 *                                float64 reference)
 *   for each implementation:
 *     applies(point, impl)       false: no row at all (not this machine's,
 *                                not this shape's)
 *     columns(point, impl, row)  what the row says before anything runs
 *     skip(point, impl)          a reason: a skipped row
 *     prepare(state, impl, row, work)
 *                                the work to time (a plan, device buffers);
 *                                may check first and set row->status "wrong"
 *     bench_time(work)           unless prepare failed or set a status
 *     check(state, impl, row)    after timing: row->max_rel_err, pass or not
 *     release(state, impl, work) what prepare made for this implementation
 *   teardown(state)
 * A sweep never calls bench_emit: the runner writes one row per
 * (point, precision, implementation) that applies. A precision --dtype
 * asked for that the spec does not declare has no rows (the sweep says so
 * once on stderr: bench_note_precisions). */
#ifndef DG_BENCH_RUNNER_H
#define DG_BENCH_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "runner/sweep.h"

/* One point of the sweep's axes: a case at one size. */
typedef struct bench_point {
    const char *name;          /* the case column                              */
    int64_t     m, n, k, batch;
    double      flops, bytes;  /* one run's work: GFLOP/s, GB/s, predictions   */
    const void *data;          /* the sweep's own description of the case      */
    int64_t     index;         /* the sweep's own number (a size's index, say) */
    dg_precision precision;    /* set by the runner: the row's precision (the
                                * sweep's points are listed in fp32)           */
} bench_point;

/* One implementation: a column value of impl, and the sweep's own data. */
typedef struct bench_impl {
    const char *name;          /* the impl column                              */
    bool        gpu;           /* runs on ctx->gpu (backend "gpu"), else ctx->cpu */
    bool        transfer;
    const void *data;
} bench_impl;

/* What prepare hands the runner to time: fn(arg), queued on be (NULL: host
 * work) and timed by its events when `events`. */
typedef struct bench_work {
    bench_fn    fn;
    void       *arg;
    dg_backend *be;
    bool        events;
    bool        finding;       /* a failure status of this row is a finding, not
                                * a failure (the composed attention's oom at long
                                * sequences): the sweep's exit code stays 0 */
    /* the energy meter of the devices the work runs on where that is not
     * its backend's alone (the GPUs of a data-parallel group); NULL: the
     * run's meter of its backend, unless energy_none says why there is
     * none for this work */
    struct bench_energy_meter *energy;
    const char *energy_none;
    bool        no_row;        /* nothing of this implementation to measure here,
                                * found only once set up (an op whose gradient is
                                * a view at this shape): no row is written */
} bench_work;

/* The points in row order: bench_points_add appends one. */
typedef struct bench_points {
    bench_point *p;
    int          n, cap;
    bool         oom;          /* an append failed: the sweep ends with an error */
} bench_points;
void bench_points_add(bench_points *list, bench_point pt);

typedef struct bench_sweep_spec {
    const char       *name;    /* the sweep column                               */
    const char       *check_word; /* the check column of every row (a prepare or check may set another) */
    const bench_impl *impls;
    int               n_impls;
    /* the precisions it has rows in: a mask of BENCH_PREC(p); 0: fp32 alone */
    unsigned          precisions;
    /* NULL, or why it has none in the others (the end of the sweep's note
     * of the precisions --dtype asked for that it lacks) */
    const char       *precisions_why;
    /* NULL, or why the whole sweep cannot run on this machine (written into
     * why, n bytes): then its one row is a skipped row named after the sweep,
     * by its first implementation, and the reason goes to stderr too */
    const char *(*unavailable)(bench_ctx *ctx, char *why, size_t n);
    /* the rows stay hot under --cold (work spread over devices whose caches
     * bench_time cannot empty): their cold column says 0 */
    bool hot;
    /* fills the points in row order; arg: the spec's */
    void (*points)(bench_ctx *ctx, const void *arg, bench_points *out);
    const void *arg;
    /* NULL: every implementation of its backend applies */
    bool (*applies)(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im);
    /* NULL or a reason written into why (n bytes): a skipped row */
    const char *(*skip)(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why, size_t n);
    /* NULL, or fills the columns of im's row at pt that are known before
     * anything runs (the scratch its kernels reserve), in every row of it:
     * skipped and failed rows too, where prepare never comes */
    void (*columns)(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row);
    /* A CPU implementation's rate measured apart: asked when no row of it
     * has run yet, or when the point's work is over 64 times the work its
     * last rate came from; sets *ms for *work (flops, or bytes where the
     * point has no flops), or leaves them 0 to decline (a point no larger
     * than the probe). NULL: predict from the rows alone. */
    void (*probe)(bench_ctx *ctx, const bench_impl *im, const bench_point *pt, double *ms, double *work);
    /* *state for this point's implementations; DG_OK or a failure that
     * becomes every remaining row's `failed` status, with its message */
    dg_status (*setup)(bench_ctx *ctx, const bench_point *pt, void **state);
    void (*teardown)(void *state);
    /* the work to time; may fill columns of row (check, max_rel_err,
     * flops, bytes, scratch/arena/live bytes, note) and set row->status
     * ("wrong" after a check of its own, a failure word with its note), in
     * which case nothing is timed; or set work->no_row */
    dg_status (*prepare)(bench_ctx *ctx, void *state, const bench_impl *im, bench_row *row, bench_work *work);
    /* NULL: prepare checked. Else, after timing: sets row->max_rel_err and
     * returns whether the result passed; may set row->note, and
     * row->status where it could not check at all (a download that
     * failed: bench_status_word of its status, not "wrong") */
    bool (*check)(void *state, const bench_impl *im, bench_row *row);
    /* NULL: nothing to release */
    void (*release)(void *state, const bench_impl *im, bench_work *work);
} bench_sweep_spec;

#define BENCH_PREC(p)   (1u << (p))
#define BENCH_PREC_ALL  ((1u << DG_PREC_COUNT) - 1)

/* Runs every point x precision x implementation of spec, writing its rows into the
 * sweep under way (ctx->csv); DG_OK, or DG_ERR_OOM when the points could
 * not be listed. With ctx->list (bench --list SWEEP) nothing is set up or
 * run: each row that would be written (its backend open, --case and
 * --impl letting it through, the sweep's `applies`) is a line of
 * ctx->list, then the spec's cases and implementations. Nothing is set
 * up, so a listed row may still be skipped when run (a prediction, the
 * memory) or not written (work->no_row, found once its case is built). */
dg_status bench_run_spec(bench_ctx *ctx, const bench_sweep_spec *spec);

/* The predicted seconds of one run of im at pt from the last row of im that
 * ran (or a probe); 0 when nothing predicts it. Exposed for the tests. */
double bench_predict_s(const bench_point *pt, double last_ms, double last_work);

#endif
