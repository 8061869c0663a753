/* scaling_step.h: what the scaling sweep's GPU replicas (sweep_scaling.c)
 * and CPU ranks (sweep_scaling_mpi.c) share: a model's step graph at a
 * batch per replica, all-reduced or not, and a replica's slice of the
 * global batch set as its inputs. */
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
} dp_model;

/* a step graph for `batch` examples per replica */
typedef struct dp_graph { dg_graph *g; dg_model model; dg_train_step ts; } dp_graph;

/* the step of m at `batch` examples, its gradients averaged over the
 * replicas by all_reduce nodes where all_reduce; d->g freed by
 * dp_graph_free also on failure */
dg_status dp_graph_new(dp_graph *d, const dp_model *m, int batch, bool all_reduce);
void      dp_graph_free(dp_graph *d);

/* examples [first, first + count) of the global batch x [.., example], y
 * as p's inputs */
dg_status dp_set_slice(dg_plan *p, const dp_graph *d, const dp_model *m, const void *x, const int32_t *y, int first,
                       int count);

/* the bytes of the model's gradients: what a step all-reduces */
size_t dp_grad_bytes(const dg_model *m);

#endif
