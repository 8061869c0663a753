/* check.h: references for training-step results. */
#ifndef DG_BENCH_CHECK_H
#define DG_BENCH_CHECK_H

#include "train_util.h"

/* float64 loss of the step graph t for inputs x, y (parameters from their
 * init specs: the values of a fresh plan) */
double bench_ref_loss(const train_graph *t, const float *x, const int32_t *y);

/* Runs one Adam training step of an MLP (seed 1) on be and compares its loss
 * with the float64 reference: *rel_err = |loss - ref| / |ref|. */
dg_status bench_check_first_step(dg_backend *be, const int *widths, int nw, int batch, const float *x,
                                 const int32_t *y, double *rel_err);

#endif
