/* check.h: float64 references for the training-step sweeps (mlp,
 * autodiff, train): the first step's loss and every parameter's update. */
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

/* The float64 step for one shape and data, computed once and shared by the
 * backends: the loss, and each parameter's change (updated - initial). */
typedef struct bench_step_ref {
    bool    done;
    double  loss;
    int     n_params;
    int64_t numel[DG_MODEL_MAX_PARAMS];
    double *delta[DG_MODEL_MAX_PARAMS];
} bench_step_ref;

/* what a step row's max_rel_err compares (the check column) */
#define BENCH_STEP_CHECK "f64-loss+update"
/* The errors a step row may have and be "ok". The loss agrees to about
 * 1e-7 (tolerance 1e-4). The updates agree to 1e-5..6e-5 (relative L2,
 * measured on a 2-core Xeon and an H100, batch 32..2048) but reach 1e-2 in
 * a few shapes on both backends alike: Adam's first step is
 * lr * g / (|g| + eps), so a gradient that cancels to near zero, whose
 * float32 value differs from the float64 one by rounding, moves its update
 * by up to 2 lr. A wrong rule is far above the tolerance 5e-2: no bias
 * correction is 3x off, momentum as a moving average 10x, a flipped sign 2x. */
#define BENCH_STEP_LOSS_TOL   1e-4
#define BENCH_STEP_UPDATE_TOL 5e-2

/* Evaluates the whole step graph in float64 for inputs x, y, parameters and
 * optimizer state from their init specs (the values of a fresh plan). */
dg_status bench_step_ref_run(const bench_step *s, const float *x, const int32_t *y, bench_step_ref *ref);
void      bench_step_ref_free(bench_step_ref *ref);

/* reads a parameter's current value from wherever a step keeps it */
typedef dg_status (*bench_param_fetch)(void *arg, const dg_node *param, float *host, size_t bytes);

/* The error of a step that ran once from fresh parameters (m: its model,
 * whose parameters fetch reads): the larger of the loss's relative error
 * and the relative L2 error of the parameter updates,
 * || d - d_ref || / || d_ref || over all parameters (the update, not the
 * parameter, is compared: lr * a unit step is 1e-3 of a weight); *ok when
 * each is within its tolerance. */
dg_status bench_step_error(const dg_model *m, bench_param_fetch fetch, void *arg, float loss,
                           const bench_step_ref *ref, double *rel_err, bool *ok);

/* Builds the step on be with inputs x [batch, w[0]] and y [batch], runs it
 * once and compares it with the float64 reference (computed into *ref on
 * the first call for this shape). opts: the plan's options (NULL:
 * defaults). The plan is then ready to be timed (its parameters have moved
 * by one step: later runs time the same work). */
dg_status bench_step_new(bench_step *s, dg_backend *be, const dg_mlp_cfg *w, int batch, const float *x,
                         const int32_t *y, const dg_plan_opts *opts, bench_step_ref *ref, double *rel_err,
                         bool *ok);
void      bench_step_free(bench_step *s);

#endif
