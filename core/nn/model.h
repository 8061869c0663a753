/* model.h: what the trainer, the training-step builder, the tests and the
 * bench need of a model, whatever its layers: its parameters (created once
 * on a graph) and a forward that can be applied to several inputs sharing
 * them (a training batch, an evaluation batch). Each model (mlp.h; the CNN
 * and transformer later) provides a constructor filling one. */
#ifndef DG_NN_MODEL_H
#define DG_NN_MODEL_H

#include "../graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MODEL_MAX_PARAMS 64

typedef struct dg_model dg_model;

/* x [batch, in_shape...] -> logits [batch, classes] */
typedef dg_node *(*dg_forward_fn)(dg_graph *g, const dg_model *m, dg_node *x);

struct dg_model {
    const char   *name;       /* "mlp", "logreg", ...                        */
    dg_shape      in_shape;   /* one example: [784] for a flat image         */
    int           classes;
    dg_forward_fn forward;
    int           n_params;
    dg_node      *params[DG_MODEL_MAX_PARAMS]; /* in the model's fixed order */
};

/* Makes a model's parameters on g (seeded: the same values on every
 * backend) from a configuration the model defines (dg_mlp_cfg, ...). */
typedef dg_status (*dg_model_new_fn)(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

/* [batch, in_shape...]; false when that has more than DG_MAX_DIMS axes, or
 * for NULL (the builders check the sizes) */
static inline bool dg_model_input_shape(const dg_model *m, int64_t batch, dg_shape *out) {
    if (!m || !out || m->in_shape.ndim < 0 || m->in_shape.ndim + 1 > DG_MAX_DIMS) return false;
    *out = (dg_shape){.ndim = m->in_shape.ndim + 1, .d = {batch}};
    for (int i = 0; i < m->in_shape.ndim; i++) out->d[i + 1] = m->in_shape.d[i];
    return true;
}

/* NULL, and g in an error state, for a model without a forward */
static inline dg_node *dg_model_forward(dg_graph *g, const dg_model *m, dg_node *x) {
    if (!m || !m->forward) return dg__graph_fail(g, DG_ERR_INVALID, "model: NULL model or forward");
    return m->forward(g, m, x);
}

#ifdef __cplusplus
}
#endif
#endif
