/* check.h: float64 references for the training-step sweeps (mlp,
 * autodiff, train, resnet): the first step's loss, every parameter's
 * update and every running statistic's update, of any model. */
#ifndef DG_BENCH_CHECK_H
#define DG_BENCH_CHECK_H

#include "../nn/mlp.h"
#include "../nn/resnet.h"
#include "../nn/transformer.h"
#include "../nn/train_step.h"
#include "../plan.h"

/* The errors a checked step may have and be "ok": the loss's relative
 * error, the relative L2 error of the parameter updates and that of the
 * running-statistics updates (bench_step_error). per_tensor: each tensor's
 * update is compared on its own and the largest error counts (a small
 * tensor's wrong update, such as a batch norm's scale without its weight
 * decay, is then not hidden by the large ones); otherwise all parameters
 * form one vector, and all running statistics another. */
typedef struct bench_step_tol {
    double loss, update, state;
    bool   per_tensor;
} bench_step_tol;

/* What a step trains: the model made by `model` from `cfg` (seed 1), the
 * optimizer, and the tolerances of its check. */
typedef struct bench_step_spec {
    dg_model_new_fn model;
    const void     *cfg;
    dg_optim        optim;
    bench_step_tol  tol;
    dg_precision    precision; /* the step's policy (train_step.h); fp32: 0 */
} bench_step_spec;

/* One training step planned on a backend, inputs uploaded. */
typedef struct bench_step {
    dg_graph     *g;
    dg_model      model;
    dg_train_step ts;
    dg_plan      *p;
} bench_step;

/* The float64 step for one shape and data, computed once and shared by the
 * backends: the loss, and each persistent tensor's change (updated -
 * initial): the model's parameters, then its state (running statistics). */
typedef struct bench_step_ref {
    bool    done;
    bool    keep_grads;  /* set by the caller: also keep each parameter's
                            gradient (grad[]), for a check of the gradients */
    double  loss;
    int     n_params, n_state;
    int64_t numel[2 * DG_MODEL_MAX_PARAMS];
    double *delta[2 * DG_MODEL_MAX_PARAMS]; /* [n_params + n_state] */
    double *grad[DG_MODEL_MAX_PARAMS];      /* [n_params] with keep_grads */
} bench_step_ref;

/* what an MLP step row's max_rel_err compares (the check column) */
#define BENCH_STEP_CHECK "f64-loss+update"
/* The errors an MLP Adam step row may have and be "ok". The loss agrees to
 * about 1e-7 (tolerance 1e-4). The updates agree to 1e-5..6e-5 (relative
 * L2, measured on a 2-core Xeon and an H100, batch 32..2048) but reach 1e-2
 * in a few shapes on both backends alike: Adam's first step is
 * lr * g / (|g| + eps), so a gradient that cancels to near zero, whose
 * float32 value differs from the float64 one by rounding, moves its update
 * by up to 2 lr. A wrong rule is far above the tolerance 5e-2: no bias
 * correction is 3x off, momentum as a moving average 10x, a flipped sign 2x.
 * An MLP has no running statistics. */
#define BENCH_STEP_LOSS_TOL   1e-4
#define BENCH_STEP_UPDATE_TOL 5e-2

/* The MLP of cfg trained by Adam (lr 1e-3), checked with the tolerances
 * above: the step of the mlp, autodiff and train sweeps. */
bench_step_spec bench_mlp_step(const dg_mlp_cfg *cfg);

/* The errors a ResNet-18 step row may have and be "ok", each tensor on its
 * own, at batch 2. Measured: the loss agrees to 6e-7, the running
 * statistics to 6e-6 (they depend on the forward only); the parameter
 * updates to 4e-5 in most tensors, but where a ReLU's input lies within
 * float32 rounding of 0 its mask differs in that element and every
 * gradient upstream inherits the difference, and batch norm's backward
 * amplifies rounding where the gradient reaching it is nearly constant per
 * channel (the last stage, after global average pooling): CIFAR stem up
 * to 4.2e-3 (2-core Xeon, OpenBLAS, 6 data seeds), 4.2e-5 (H100); ImageNet
 * stem 2.1e-3 (two Xeons), 1.1e-2 (H100). The update bound 5e-2 stands 5x
 * above the largest of these and far below a wrong rule: an update 2x too
 * large or of the wrong sign is 1 to 2 off, momentum as a moving average
 * (a first step 10x too small) 0.9, a flipped weight decay 15% in a
 * last-stage batch norm's scale (2 * 5e-4 * |scale| = 0.023 against |g| =
 * 0.15), a missing one 7%, just above the bound. per_tensor keeps these
 * visible: as all parameters together they would be 4e-4, below the
 * rounding effects. */
#define BENCH_RESNET_LOSS_TOL   1e-4
#define BENCH_RESNET_UPDATE_TOL 5e-2
#define BENCH_RESNET_STATE_TOL  1e-4

/* ResNet-18 of cfg trained by SGD with momentum 0.9, lr 0.1 and weight
 * decay 5e-4, checked with the tolerances above: the resnet sweep's step. */
bench_step_spec bench_resnet_step(const dg_resnet_cfg *cfg);

/* The char-LM of cfg trained by Adam (lr 1e-3), checked with the MLP's
 * tolerances: the transformer sweep's and bench profile's step. */
bench_step_spec bench_charlm_step(const dg_charlm_cfg *cfg);
/* A char-LM batch: ids x [batch, t] and labels y [batch, t], seeded
 * sequences of t + 1 ids uniform over vocab, the labels the ids one
 * position on; the caller frees both (also on failure). */
dg_status bench_charlm_batch(int batch, int t, int vocab, uint64_t seed, int32_t **x, int32_t **y);

/* What a model's step takes per example: example_floats floats and a
 * label in 0..classes-1, or (lm_vocab > 0) a char-LM's lm_context ids. */
typedef struct bench_batch_shape {
    size_t example_floats;
    int    classes;
    int    lm_vocab, lm_context;
} bench_batch_shape;
/* A seeded synthetic batch of that shape: floats uniform in [0, 1) and
 * labels uniform over the classes (a step's time depends on the shapes,
 * not the values), or bench_charlm_batch's ids; x [batch, ...], y. The
 * caller frees both (also on failure). */
dg_status bench_synth_batch(bench_batch_shape s, int batch, uint64_t seed, void **x, int32_t **y);

/* Evaluates the whole step graph in float64 for inputs x (float32, or
 * int32 ids where the model's in_dtype says so), y, and every other leaf
 * (parameters, running statistics, optimizer state) from its init spec
 * (the values of a fresh plan). */
dg_status bench_step_ref_run(const bench_step *s, const void *x, const int32_t *y, bench_step_ref *ref);
void      bench_step_ref_free(bench_step_ref *ref);

/* reads a persistent tensor's current value from wherever a step keeps it */
typedef dg_status (*bench_param_fetch)(void *arg, const dg_node *param, float *host, size_t bytes);

/* The error of a step that ran once from fresh parameters (m: its model,
 * whose parameters and state fetch reads): the largest of the loss's
 * relative error, the relative L2 error of the parameter updates,
 * || d - d_ref || / || d_ref || over all parameters (or the largest over
 * single tensors: tol.per_tensor), and the same of the running statistics
 * (the update, not the value, is compared: lr * a unit step is 1e-3 of a
 * weight); *ok when each is within its tolerance. */
dg_status bench_step_error(const dg_model *m, bench_param_fetch fetch, void *arg, float loss,
                           const bench_step_ref *ref, bench_step_tol tol, double *rel_err, bool *ok);

/* Builds spec's step on be for a batch, inputs x [batch, in_shape...]
 * (floats, or int32 ids for a model whose in_dtype says so) and labels y
 * [batch] or [batch, T] uploaded, not run, under spec->precision's policy
 * (dg_train_step_build_opts; its plan with dg_precision_plan_opts applied
 * to opts, except in fp32, where opts' tf32 stands). opts: the plan's options (NULL: defaults). */
dg_status bench_step_build(bench_step *s, dg_backend *be, const bench_step_spec *spec, int batch, const void *x,
                           const int32_t *y, const dg_plan_opts *opts);
/* Runs a built step once and compares it with the float64 reference
 * (computed into *ref first when it is not done). The plan is then ready
 * to be timed (its parameters have moved by one step: later runs time the
 * same work). */
dg_status bench_step_check(bench_step *s, const bench_step_spec *spec, const void *x, const int32_t *y,
                           bench_step_ref *ref, double *rel_err, bool *ok);
/* bench_step_build, then bench_step_check */
dg_status bench_step_new(bench_step *s, dg_backend *be, const bench_step_spec *spec, int batch, const void *x,
                         const int32_t *y, const dg_plan_opts *opts, bench_step_ref *ref, double *rel_err,
                         bool *ok);
void      bench_step_free(bench_step *s);

#endif
