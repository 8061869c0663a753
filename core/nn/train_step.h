/* train_step.h: one training step of a classifier as graph nodes, built in
 * one place for the trainer, the tests and the bench: logits = model(x),
 * loss = softmax cross-entropy(logits, y), the gradient of every
 * parameter, the optimizer's updates. A plan of `outputs` runs one step.
 *
 * Precision policy (dg_train_step_opts.precision, core/precision.h):
 *   fp32  every node float32 (dg_train_step_build's step).
 *   tf32  the same graph; its plan lets the matmuls use TF32 tensor cores:
 *         dg_precision_plan_opts sets dg_plan_opts.tf32 for it.
 *   bf16, fp16 (mixed precision): the parameters (masters) and the
 *         optimizer state stay float32. Every product of the model's
 *         forward (dg_model_matmul: the MLP's layers, the CNN's dense
 *         layers, ResNet's head, the char-LM's output layer, the composed
 *         attention's two products; dg_model_linear: the transformer's
 *         projections and MLP layers; dg_model_conv: the CNN's and
 *         ResNet-18's convolutions; dg_model_attention) takes its operands
 *         in bf16 or f16, each weight's copy cast from its master each
 *         step. A dg_model_matmul product returns float32; a convolution
 *         returns 16 bits, cast back to float32 at once (batch norm, pools
 *         and residual sums follow in float32); a dg_model_linear layer and
 *         the fused attention keep their outputs in 16 bits, so the
 *         transformer's activations between products (bias sums, the
 *         heads' permutes, GELU, the next product's operand) stay 16-bit
 *         as autocast keeps them, while its residual stream, layer norms,
 *         softmax, cross-entropy, embeddings and the loss stay float32 (a
 *         residual sum reads the 16-bit branch directly). In the backward
 *         a node's gradient has its dtype (autodiff.c): the 16-bit
 *         activations' gradients are 16-bit (their products, sums,
 *         permutes and GELU's backward on 2-byte storage), the residual
 *         stream's float32; a cast's gradient is float32, so each
 *         product writes a weight copy's dW in float32 and every
 *         parameter's gradient is float32.
 *   fp16 adds dynamic loss scaling, as graph nodes (no host round trip);
 *         it guards the backward's gradients, not the forward: a 16-bit
 *         activation that overflows there (f16's largest value is 65504)
 *         makes every step skip, as under autocast:
 *         loss_scale [1] (state, initially opts.loss_scale) multiplies the
 *         loss before the backward, so grads[] are the gradients of
 *         loss * loss_scale; every optimizer update divides its gradient
 *         by the scale as it reads it (dg_optim_apply_ex's grad_scale: no
 *         division node per gradient); a chain of found_inf nodes, each
 *         testing up to seven gradients (dg_found_inf_n), counts the
 *         groups holding an inf or NaN; every optimizer update reads that
 *         count as its skip flag (non-zero: no parameter or optimizer
 *         state changes); loss_scale_update halves
 *         the scale on an overflow and doubles it after opts.scale_interval
 *         clean steps in a row (counted in scale_clean [1], state). */
#ifndef DG_NN_TRAIN_STEP_H
#define DG_NN_TRAIN_STEP_H

#include "../autodiff.h"
#include "../plan.h"
#include "../precision.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_train_step {
    dg_node *x;        /* input  [batch, in_shape...] (m->in_dtype)  */
    dg_node *y;        /* labels [batch] (or [batch, targets]), int32;
                          DG_LOSS_MSE: targets, float32, logits' shape */
    dg_node *logits;   /* [batch, classes] (or [batch, targets, classes]) */
    dg_node *loss;     /* [1]                                        */
    dg_node *grads[DG_MODEL_MAX_PARAMS];       /* of model->params; fp16:
                                                  scaled by loss_scale */
    dg_node *outputs[2 + DG_MODEL_MAX_PARAMS + DG_MODEL_MAX_UPDATES];
                       /* loss, the optimizer's updates, the running
                          statistics' updates, then (fp16) the loss
                          scale's update                              */
    int      n_outputs;
    dg_precision precision;
    /* fp16 only (NULL otherwise): the scale and its clean-step count
     * (state [1]), and the count of gradients that overflowed this step
     * ([1], the updates' skip flag) */
    dg_node *loss_scale, *scale_clean, *found_inf;
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

#define DG_LOSS_SCALE_INIT     65536.0f /* 2^16 */
#define DG_LOSS_SCALE_INTERVAL 2000

/* What the step minimises: softmax cross-entropy of the logits against
 * int32 class labels (the zero value), or the mean squared error of the
 * model's output against float32 targets of its shape, the mean over
 * every element (a regression, or an imported model's output that is no
 * classifier's, core/onnx/onnx.h). */
typedef enum dg_loss_kind { DG_LOSS_CROSS_ENTROPY, DG_LOSS_MSE, DG_LOSS_COUNT } dg_loss_kind;

typedef struct dg_train_step_opts {
    dg_precision precision;  /* DG_PREC_FP32 (the zero value): float32     */
    bool  all_reduce;        /* as dg_train_step_build_ex                  */
    float loss_scale;        /* fp16: the initial scale, finite and
                                >= DG_LOSS_SCALE_MIN (2^-24);
                                0: DG_LOSS_SCALE_INIT                      */
    int   scale_interval;    /* fp16: clean steps before the scale doubles;
                                0: DG_LOSS_SCALE_INTERVAL                  */
    dg_loss_kind loss;       /* DG_LOSS_CROSS_ENTROPY (the zero value)     */
} dg_train_step_opts;

/* The step under opts' precision policy and loss (above); opts NULL is
 * fp32 cross-entropy. DG_ERR_INVALID as dg_train_step_build, and for a
 * precision or loss out of range,
 * a loss scale that is negative or not finite, an interval < 0. */
dg_status dg_train_step_build_opts(dg_graph *g, const dg_model *m, int batch, const dg_optim *o,
                                   const dg_train_step_opts *opts, dg_train_step *out);

/* The plan options precision p asks of a step's plan: tf32 on for
 * DG_PREC_TF32, off for the others; the rest of *opts is left as it is. */
void dg_precision_plan_opts(dg_precision p, dg_plan_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
