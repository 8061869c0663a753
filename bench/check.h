/* check.h: references for training-step results. */
#ifndef DG_BENCH_CHECK_H
#define DG_BENCH_CHECK_H

#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
#include "core/plan.h"

/* One Adam training step of an MLP (seed 1) planned on a backend, inputs
 * uploaded, already run once and checked. */
typedef struct bench_step {
    dg_graph     *g;
    dg_model      model;
    dg_train_step ts;
    dg_plan      *p;
} bench_step;

/* float64 loss of the step graph for inputs x, y (parameters from their
 * init specs: the values of a fresh plan) */
double bench_ref_loss(const bench_step *s, const float *x, const int32_t *y);

/* Builds the step on be with inputs x [batch, w[0]] and y [batch], runs it
 * once and compares its loss with the float64 reference: *rel_err =
 * |loss - ref| / |ref|. *want caches the reference across backends (NAN:
 * compute it). opts: the plan's options (NULL: defaults). The plan is then
 * ready to be timed. */
dg_status bench_step_new(bench_step *s, dg_backend *be, const dg_mlp_cfg *w, int batch, const float *x,
                         const int32_t *y, const dg_plan_opts *opts, double *want, double *rel_err);
void      bench_step_free(bench_step *s);

#endif
