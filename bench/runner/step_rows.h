/* step_rows.h: what the sweeps that time a whole training step built from
 * a bench_step_spec (resnet, model) do alike for each row: an
 * implementation's float64 check in one precision, made at its first row
 * and shared by its rows, and a row's preparation after it. */
#ifndef DG_BENCH_STEP_ROWS_H
#define DG_BENCH_STEP_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/check/step_check.h"
#include "runner/runner.h"

/* One implementation's check in one precision */
typedef struct bench_step_rows_check {
    bool      done;
    dg_status st;        /* DG_OK: the check ran (ok says how it went)    */
    char      why[256];  /* st's message, or a failed check's errors     */
    double    err;       /* the check's largest relative error            */
    bool      ok;
    double    warm_ms;   /* CPU: one more run of the checked step, warm:
                          * the first rate its --cpu-cap predictions use */
} bench_step_rows_check;

/* out (once: done): the step of spec at batch (x, y its examples) on be
 * with opts, checked against ref (made at its first use), then on the CPU
 * (gpu false) timed once more warm; a failure to build or run is kept in
 * out->st and out->why, not returned */
void bench_step_rows_check_run(bench_step_rows_check *out, dg_backend *be, bool gpu, const bench_step_spec *spec,
                               int batch, const float *x, const int32_t *y, const dg_plan_opts *opts,
                               bench_step_ref *ref);

/* A row after its implementation's check chk: a failed check is the row's
 * status "wrong" with wrong_note (untimed: DG_OK and no work); else the
 * full-batch step s (row->batch examples x, y) built and run once, a loss
 * that is not finite "wrong" too (its note written into why, why_n
 * bytes), the plan's memory into the row and its replay as the work. */
dg_status bench_step_rows_prepare(const bench_step_rows_check *chk, const char *wrong_note, bench_step *s,
                                  dg_backend *be, bool gpu, const bench_step_spec *spec, const float *x,
                                  const int32_t *y, const dg_plan_opts *opts, bench_row *row, char *why, size_t why_n,
                                  bench_work *work);

#endif
