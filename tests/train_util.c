#include "train_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

int blobs_new(blobs *b, int n, int d, int c, uint64_t seed) {
    dg_rng r = dg_rng_new(seed);
    *b = (blobs){n, d, c, malloc((size_t)n * d * sizeof(float)), malloc((size_t)n * sizeof(int32_t))};
    float *centre = malloc((size_t)c * d * sizeof(float));
    if (!b->x || !b->y || !centre) { free(centre); blobs_free(b); return -1; }
    for (int i = 0; i < c * d; i++) centre[i] = (float)(4.0 * dg_rng_normal(&r) / sqrt((double)d) * 2.0);
    for (int i = 0; i < n; i++) {
        int k = (int)(dg_rng_u64(&r) % (uint64_t)c);
        b->y[i] = k;
        for (int j = 0; j < d; j++) b->x[i * d + j] = centre[k * d + j] + (float)(0.6 * dg_rng_normal(&r));
    }
    free(centre);
    return 0;
}

void blobs_free(blobs *b) {
    free(b->x);
    free(b->y);
    memset(b, 0, sizeof *b);
}

dg_status train_graph_new(train_graph *t, const int *widths, int n_widths, int batch, const dg_optim *o,
                          uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->g = dg_graph_new();
    if (!t->g) return DG_ERR_OOM;
    dg_graph *g = t->g;
    dg_status st = dg_mlp_new(g, &t->mlp, widths, n_widths, seed);
    if (st != DG_OK) return st;
    t->x = dg_input(g, "x", DG_SHAPE(batch, widths[0]));
    t->y = dg_input_i32(g, "y", DG_SHAPE(batch));
    t->logits = dg_mlp_forward(g, &t->mlp, t->x);
    t->loss = dg_softmax_cross_entropy(g, t->logits, t->y);
    if (!t->loss) return dg_graph_status(g);
    t->n_params = dg_mlp_params(&t->mlp, t->params);
    if ((st = dg_grad(g, t->loss, t->params, t->n_params, t->grads)) != DG_OK) return st;
    t->outputs[0] = t->loss;
    if ((st = dg_optim_apply(g, o, t->params, t->grads, t->n_params, t->outputs + 1)) != DG_OK) return st;
    t->n_outputs = 1 + t->n_params;
    return DG_OK;
}

void train_graph_free(train_graph *t) {
    dg_graph_free(t->g);
    memset(t, 0, sizeof *t);
}

double accuracy(const float *logits, const int32_t *y, int n, int c) {
    int hit = 0;
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int j = 1; j < c; j++)
            if (logits[i * c + j] > logits[i * c + best]) best = j;
        hit += best == y[i];
    }
    return (double)hit / n;
}
