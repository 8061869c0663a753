/* train_util.h: a seeded synthetic classification set and an MLP training
 * step graph, for the end-to-end and memory-plan suites (CPU and GPU). */
#ifndef DG_TEST_TRAIN_UTIL_H
#define DG_TEST_TRAIN_UTIL_H

#include "core/autodiff.h"
#include "core/nn.h"
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

/* One training step as one graph: logits = mlp(x); loss = ce(logits, y);
 * grads; optimizer updates. */
typedef struct train_graph {
    dg_graph *g;
    dg_mlp    mlp;
    dg_node  *x, *y, *logits, *loss;
    dg_node  *params[2 * DG_MLP_MAX_LAYERS], *grads[2 * DG_MLP_MAX_LAYERS];
    dg_node  *outputs[2 * DG_MLP_MAX_LAYERS + 1]; /* loss + updates */
    int       n_params, n_outputs;
} train_graph;

dg_status train_graph_new(train_graph *t, const int *widths, int n_widths, int batch, const dg_optim *o,
                          uint64_t seed);
void      train_graph_free(train_graph *t);
/* fraction of rows whose argmax logit equals the label */
double    accuracy(const float *logits, const int32_t *y, int n, int c);

#endif
