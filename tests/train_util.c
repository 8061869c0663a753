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
    dg_mlp_cfg cfg = {.n_widths = n_widths};
    if (n_widths < 2 || n_widths > DG_MLP_MAX_LAYERS + 1) return DG_ERR_INVALID;
    memcpy(cfg.widths, widths, (size_t)n_widths * sizeof *widths);
    t->g = dg_graph_new();
    if (!t->g) return DG_ERR_OOM;
    dg_status st = dg_mlp_new(t->g, &cfg, seed, &t->model);
    return st != DG_OK ? st : dg_train_step_build(t->g, &t->model, batch, o, &t->step);
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
