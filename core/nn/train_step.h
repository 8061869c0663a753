/* train_step.h: one training step of a classifier as graph nodes, built in
 * one place for the trainer, the tests and the bench: logits = model(x),
 * loss = softmax cross-entropy(logits, y), the gradient of every
 * parameter, the optimizer's updates. A plan of `outputs` runs one step. */
#ifndef DG_NN_TRAIN_STEP_H
#define DG_NN_TRAIN_STEP_H

#include "../autodiff.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_train_step {
    dg_node *x;        /* input  [batch, in_shape...] (m->in_dtype)  */
    dg_node *y;        /* labels [batch] (or [batch, targets]), int32 */
    dg_node *logits;   /* [batch, classes] (or [batch, targets, classes]) */
    dg_node *loss;     /* [1]                                        */
    dg_node *grads[DG_MODEL_MAX_PARAMS];       /* of model->params    */
    dg_node *outputs[1 + DG_MODEL_MAX_PARAMS + DG_MODEL_MAX_UPDATES];
                       /* loss, the optimizer's updates, then the
                          running statistics' updates                 */
    int      n_outputs;
    /* The step's phases by node id (ids are creation order): below
     * first_backward_id the forward and the loss (with the running
     * statistics' updates), then the gradient's nodes, and from
     * first_optimizer_id on the optimizer's. */
    int      first_backward_id, first_optimizer_id;
} dg_train_step;

/* Appends the step of model m (its parameters already on g) for a batch.
 * DG_ERR_INVALID for NULL arguments, batch < 1, more than
 * DG_MODEL_MAX_PARAMS parameters, or anything dg_grad and dg_optim_apply
 * refuse (parameters of another graph, an unknown optimizer kind). */
dg_status dg_train_step_build(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, dg_train_step *out);
/* The same with all_reduce: each gradient goes through an all_reduce node
 * as soon as it is complete (dg_grad_ex), so a replica of a data-parallel
 * group (core/nn/data_parallel.h) updates with the mean gradient over the
 * group while its backward goes on. grads[] are then those nodes. */
dg_status dg_train_step_build_ex(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, bool all_reduce,
                                 dg_train_step *out);

#ifdef __cplusplus
}
#endif
#endif
