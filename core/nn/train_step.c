/* train_step.c: forward, loss, gradients and updates of one step. */
#include "train_step.h"

#include "../graph_internal.h"

static dg_node *all_reduce_ready(dg_graph *g, int i, dg_node *grad, void *arg) {
    (void)i;
    (void)arg;
    return dg_all_reduce(g, grad);
}

dg_status dg_train_step_build(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, dg_train_step *out) {
    return dg_train_step_build_ex(g, m, batch, o, false, out);
}

dg_status dg_train_step_build_ex(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, bool all_reduce,
                                 dg_train_step *out) {
    if (!g || !m || !o || !out)
        return dg__fail(DG_ERR_INVALID, "train step: NULL %s", !g ? "graph" : !m ? "model" : !o ? "optimizer" : "out");
    *out = (dg_train_step){0};
    if (batch < 1) return dg__fail(DG_ERR_INVALID, "train step: batch %d, < 1", batch);
    /* grads[] and outputs[] hold DG_MODEL_MAX_PARAMS */
    if (m->n_params < 0 || m->n_params > DG_MODEL_MAX_PARAMS)
        return dg__fail(DG_ERR_INVALID, "train step: model '%s' has %d parameters (0 to %d)", m->name ? m->name : "?",
                        m->n_params, DG_MODEL_MAX_PARAMS);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "train step");
    dg_shape xs;
    if (!dg_model_input_shape(m, batch, &xs))
        return dg__fail(DG_ERR_SHAPE, "train step: examples of %d dims do not fit", m->in_shape.ndim);
    out->x = m->in_dtype == DG_I32 ? dg_input_i32(g, "x", xs) : dg_input(g, "x", xs);
    out->y = dg_input_i32(g, "y", m->targets > 1 ? DG_SHAPE(batch, m->targets) : DG_SHAPE(batch));
    dg_forward_mode mode = {.training = true};
    out->logits = out->x ? dg_model_forward(g, m, out->x, &mode) : NULL;
    out->loss = dg_softmax_cross_entropy(g, out->logits, out->y);
    if (!out->loss) return dg_graph_status(g);
    out->first_backward_id = dg_graph_size(g);
    dg_status st = dg_grad_ex(g, out->loss, m->params, m->n_params, out->grads, all_reduce ? all_reduce_ready : NULL,
                              NULL);
    if (st != DG_OK) return st;
    out->outputs[0] = out->loss;
    out->first_optimizer_id = dg_graph_size(g);
    if ((st = dg_optim_apply(g, o, m->params, out->grads, m->n_params, out->outputs + 1)) != DG_OK) return st;
    out->n_outputs = 1 + m->n_params;
    for (int i = 0; i < mode.n_updates; i++) out->outputs[out->n_outputs++] = mode.updates[i];
    return DG_OK;
}
