/* scaling_step.h: what the scaling sweep's GPU replicas (sweep_scaling.c)
 * and CPU ranks (sweep_scaling_mpi.c) share: a model's step in a row's
 * precision, its graph at a batch per replica, all-reduced or not, the
 * plan options of that precision, a replica's slice of the global batch
 * set as its inputs, and the check of the step's policy. */
#ifndef DG_BENCH_SCALING_STEP_H
#define DG_BENCH_SCALING_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check/step_check.h"

/* a model of the sweep: its step (spec) and the shapes of its inputs */
typedef struct dp_model {
    const char       *name;
    int               per_gpu;     /* examples per replica of the weak rows */
    bench_step_spec   spec;
    bench_batch_shape in;          /* its inputs per example               */
    bool              batch_norm;  /* its float64 check takes the tolerances
                                      of a step with batch norm (ResNet's,
                                      bench_step_tol_bn_in)                 */
} dp_model;

/* m in precision p: spec.precision (the CPU's tf32, gpu false: fp32, as
 * the mlp sweep's CPU rows: the CPU has no TF32 mode) and its float64
 * check's tolerances in it (runner/step_tol.h) */
dp_model dp_model_in(const dp_model *m, dg_precision p, bool gpu);

/* the plan options of m's precision (TF32 for tf32, dg_precision_plan_opts) */
dg_plan_opts dp_plan_opts(const dp_model *m);

/* a step graph for `batch` examples per replica */
typedef struct dp_graph { dg_graph *g; dg_model model; dg_train_step ts; } dp_graph;

/* the step of m at `batch` examples under m's precision policy
 * (dg_train_step_build_opts: bf16 and fp16 products, fp16's loss
 * scaling), its gradients averaged over the replicas by all_reduce nodes
 * where all_reduce; d->g freed by dp_graph_free also on failure */
dg_status dp_graph_new(dp_graph *d, const dp_model *m, int batch, bool all_reduce);
void      dp_graph_free(dp_graph *d);

/* examples [first, first + count) of the global batch x [.., example], y
 * as p's inputs */
dg_status dp_set_slice(dg_plan *p, const dp_graph *d, const dp_model *m, const void *x, const int32_t *y, int first,
                       int count);

/* the bytes of the model's gradients: what a step all-reduces */
size_t dp_grad_bytes(const dg_model *m);

/* d's graph carries the policy of a row in precision p on a GPU or the
 * CPU (bench_step_precision, bench_step_policy); else false with what was
 * found in why (n bytes) */
bool dp_policy(const dp_graph *d, dg_precision p, bool gpu, char *why, size_t n);

/* m's step at batch 2 on be against its float64 evaluation
 * (core/check/step_check.h) with m's tolerances: what a one-replica row
 * checks. A char-LM's context is cut to CHECK_CONTEXT (64) where longer:
 * float64 attention over 256 positions takes long. */
dg_status   dp_check_f64(dg_backend *be, const dp_model *m, double *err, bool *ok);
/* dp_check_f64's base word: "f64-step@b2", "f64-step@b2t64" where cut */
const char *dp_f64_base(const dp_model *m);

/* the check column of a row whose check is `base` with tolerance text
 * tol, in m's precision (bench_step_check_word) into buf (n bytes) */
const char *dp_check_word(char *buf, size_t n, const dp_model *m, const char *base, const char *tol);
/* tol as the float64 check states it: "LOSS/UPDATE" (n bytes) */
const char *dp_f64_tol(char *buf, size_t n, const dp_model *m);

#endif
