/* mlp.c: the MLP's parameters and forward. */
#include "mlp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../graph_internal.h"

/* x [batch, widths[0]] -> logits [batch, widths[n-1]]; params in pairs (W_i, b_i) */
static dg_node *mlp_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    /* no batch norm: the same in training and evaluation; mode gives the
     * products' precision */
    int layers = m->n_params / 2;
    for (int i = 0; i < layers; i++) {
        x = dg_add(g, dg_model_matmul(g, mode, x, m->params[2 * i], false, false), m->params[2 * i + 1]);
        if (i + 1 < layers) x = dg_relu(g, x);
    }
    return x;
}

/* The whole configuration is checked before a parameter is made, so a bad
 * one leaves g untouched. */
static dg_status check_cfg(const dg_mlp_cfg *c) {
    if (c->n_widths < 2 || c->n_widths > DG_MLP_MAX_LAYERS + 1)
        return dg__fail(DG_ERR_INVALID, "mlp: %d widths, needs 2 to %d", c->n_widths, DG_MLP_MAX_LAYERS + 1);
    for (int i = 0; i < c->n_widths; i++)
        if (c->widths[i] < 1) return dg__fail(DG_ERR_INVALID, "mlp: width %d is %d, < 1", i, c->widths[i]);
    return DG_OK;
}

dg_status dg_mlp_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out) {
    const dg_mlp_cfg *c = cfg;
    if (!g || !c || !out) return dg__fail(DG_ERR_INVALID, "mlp: NULL %s", !g ? "graph" : !c ? "config" : "model");
    dg_status st = check_cfg(c);
    if (st != DG_OK) return st;
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "mlp");
    int layers = c->n_widths - 1;
    *out = (dg_model){.name = layers == 1 ? "logreg" : "mlp", .in_shape = DG_SHAPE(c->widths[0]),
                      .classes = c->widths[layers], .forward = mlp_forward, .n_params = 2 * layers};
    for (int i = 0; i < layers; i++) {
        const int *w = c->widths;
        double gain = layers == 1 ? 1.0 : 2.0;
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        out->params[2 * i] = dg_param(g, name, DG_SHAPE(w[i], w[i + 1]),
                                      (dg_init){DG_INIT_NORMAL, 0.0f, (float)sqrt(gain / w[i]), seed * 1000u + (uint64_t)i});
        snprintf(name, sizeof name, "b%d", i);
        out->params[2 * i + 1] = dg_param(g, name, DG_SHAPE(w[i + 1]), (dg_init){DG_INIT_FILL, 0, 0, 0});
    }
    return dg_graph_status(g);
}

dg_status dg_mlp_parse_widths(const char *spec, dg_mlp_cfg *cfg) {
    if (!cfg) return dg__fail(DG_ERR_INVALID, "dg_mlp_parse_widths: NULL cfg");
    int n = 0;
    const char *p = spec;
    while (p && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        bool dangling = *end == '-' && !end[1]; /* "784-10-" */
        if (end == p || errno || v < 1 || v > 1000000 || n == DG_MLP_MAX_LAYERS + 1 || (*end && *end != '-') ||
            dangling)
            return dg__fail(DG_ERR_INVALID, "bad layer widths '%s' (2 to %d widths of 1 to 1000000, e.g. "
                            "784-256-100-10)", spec, DG_MLP_MAX_LAYERS + 1);
        cfg->widths[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n < 2) return dg__fail(DG_ERR_INVALID, "bad layer widths '%s': need at least two", spec ? spec : "");
    cfg->n_widths = n;
    return DG_OK;
}
