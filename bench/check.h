/* check.h: references for training-step results. */
#ifndef DG_BENCH_CHECK_H
#define DG_BENCH_CHECK_H

#include "train_util.h"

/* float64 loss of the step graph t for inputs x, y (parameters from their
 * init specs: the values of a fresh plan) */
double bench_ref_loss(const train_graph *t, const float *x, const int32_t *y);

/* One Adam training step of an MLP (seed 1) planned on a backend, inputs
 * uploaded, already run once and checked. */
typedef struct bench_step {
    train_graph t;
    dg_plan    *p;
} bench_step;

/* Builds the step on be with inputs x [batch, w[0]] and y [batch], runs it
 * once and compares its loss with the float64 reference: *rel_err =
 * |loss - ref| / |ref|. *want caches the reference across backends (NAN:
 * compute it). The plan is then ready to be timed. */
dg_status bench_step_new(bench_step *s, dg_backend *be, const int *w, int nw, int batch, const float *x,
                         const int32_t *y, double *want, double *rel_err);
void      bench_step_free(bench_step *s);

#endif
