/* train_util.h: a seeded synthetic classification set and an MLP training
 * step graph, for the end-to-end and memory-plan suites (CPU and GPU). */
#ifndef DG_TEST_TRAIN_UTIL_H
#define DG_TEST_TRAIN_UTIL_H

#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
#include "core/plan.h"

/* n points in d dims, c classes: Gaussian blobs around well-separated
 * random centres (radius 4, noise 0.6): separable with high probability. */
typedef struct blobs {
    int      n, d, c;
    float   *x;      /* [n, d] */
    int32_t *y;      /* [n]    */
} blobs;

int  blobs_new(blobs *b, int n, int d, int c, uint64_t seed);
void blobs_free(blobs *b);

/* An MLP's training step on a graph of its own (dg_train_step_build):
 * step.x, step.y, step.loss, step.outputs ...; model.params. */
typedef struct train_graph {
    dg_graph     *g;
    dg_model      model;
    dg_train_step step;
} train_graph;

dg_status train_graph_new(train_graph *t, const int *widths, int n_widths, int batch, const dg_optim *o,
                          uint64_t seed);
void      train_graph_free(train_graph *t);
/* fraction of rows whose argmax logit equals the label */
double    accuracy(const float *logits, const int32_t *y, int n, int c);

#endif
