/* layers.c: batch norm in both modes, and parameter initialisation. */
#include "layers.h"

#include <math.h>
#include <stdio.h>

#include "../graph_internal.h"

static dg_node *add_param(dg_graph *g, dg_model *m, dg_node *p) {
    if (!p) return NULL;
    if (m->n_params == DG_MODEL_MAX_PARAMS)
        return dg__graph_fail(g, DG_ERR_INVALID, "model '%s': more than %d parameters", m->name,
                              DG_MODEL_MAX_PARAMS);
    return m->params[m->n_params++] = p;
}

static dg_node *add_state(dg_graph *g, dg_model *m, const char *name, dg_shape s, float value) {
    dg_node *x = dg_state(g, name, s, (dg_init){DG_INIT_FILL, value, 0, 0});
    if (!x) return NULL;
    if (m->n_state == DG_MODEL_MAX_PARAMS)
        return dg__graph_fail(g, DG_ERR_INVALID, "model '%s': more than %d state tensors", m->name,
                              DG_MODEL_MAX_PARAMS);
    return m->state[m->n_state++] = x;
}

dg_node *dg_kaiming_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, int64_t fan_in, uint64_t seed) {
    float std = (float)sqrt(2.0 / (double)fan_in);
    return add_param(g, m, dg_param(g, name, s, (dg_init){DG_INIT_NORMAL, 0.0f, std, seed}));
}

dg_node *dg_normal_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, float std, uint64_t seed) {
    return add_param(g, m, dg_param(g, name, s, (dg_init){DG_INIT_NORMAL, 0.0f, std, seed}));
}

dg_node *dg_fill_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, float value) {
    return add_param(g, m, dg_param(g, name, s, (dg_init){DG_INIT_FILL, value, 0, 0}));
}

dg_status dg_bn_layer_new(dg_graph *g, dg_model *m, const char *name, int64_t c, dg_bn_layer *out) {
    char n[32];
    snprintf(n, sizeof n, "%.24s.scale", name);
    out->scale = dg_fill_param(g, m, n, DG_SHAPE(c), 1.0f);
    snprintf(n, sizeof n, "%.24s.shift", name);
    out->shift = dg_fill_param(g, m, n, DG_SHAPE(c), 0.0f);
    snprintf(n, sizeof n, "%.25s.mean", name);
    out->mean = add_state(g, m, n, DG_SHAPE(c), 0.0f);
    snprintf(n, sizeof n, "%.26s.var", name);
    out->var = add_state(g, m, n, DG_SHAPE(c), 1.0f);
    return dg_graph_status(g);
}

dg_node *dg_bn_layer_apply(dg_graph *g, const dg_bn_layer *l, dg_node *x, dg_forward_mode *mode) {
    if (!mode || !mode->training) return dg_batch_norm_eval(g, x, l->scale, l->shift, l->mean, l->var, DG_BN_EPS);
    dg_node *y = dg_batch_norm(g, x, l->scale, l->shift, DG_BN_EPS);
    if (!y) return NULL;
    if (mode->n_updates == DG_MODEL_MAX_UPDATES)
        return dg__graph_fail(g, DG_ERR_INVALID, "forward: more than %d running-statistics updates",
                              DG_MODEL_MAX_UPDATES);
    dg_node *u = dg_batch_norm_running(g, y, l->mean, l->var, DG_BN_MOMENTUM);
    if (!u) return NULL;
    mode->updates[mode->n_updates++] = u;
    return y;
}
