/* eta.h: the time a sweep's remaining rows will take, for its progress
 * line. A CPU row whose run time the runner predicts (its FLOPs or bytes
 * at the rate its implementation last showed) is estimated from the timing
 * rules; a row without a prediction (a GPU row, a first row) at the mean
 * wall time such rows took so far. Both are corrected by how far the
 * estimates of the rows already run missed their wall time. */
#ifndef DG_BENCH_ETA_H
#define DG_BENCH_ETA_H

#include "runner/timing.h"

typedef struct bench_eta {
    double est_s, ran_s; /* predicted rows so far: estimated and measured wall seconds */
    double other_s;      /* rows without a prediction: their wall seconds              */
    int    other_n;      /*   and their number                                          */
} bench_eta;

/* the wall seconds of a row whose one run takes run_s under t: its warm-up,
 * then timed runs until t's count and time are both reached (or a run
 * passes t->run_cap_s: timed once) */
double bench_eta_row_s(const bench_timing *t, double run_s);

/* one row ran for wall_s; estimated_s: what bench_eta_row_s said, 0: none */
void bench_eta_record(bench_eta *e, double estimated_s, double wall_s);

/* seconds left for rows estimated at predicted_s in all plus n_unpredicted
 * rows without an estimate; < 0 when nothing is known yet */
double bench_eta_left(const bench_eta *e, double predicted_s, int n_unpredicted);

#endif
