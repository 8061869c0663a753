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

#define DG_MODEL_MAX_PARAMS 128
#define DG_MODEL_MAX_UPDATES 32   /* running-statistics updates of one forward */

typedef struct dg_model dg_model;

/* How a forward runs. Evaluation (NULL or training false): batch norm uses
 * the running statistics. Training: batch norm uses the batch's statistics
 * and the forward appends the update of each layer's running statistics to
 * updates[], which the training step's plan must run beside the optimizer's
 * (dg_train_step outputs them). */
typedef struct dg_forward_mode {
    bool     training;
    dg_node *updates[DG_MODEL_MAX_UPDATES];
    int      n_updates;
    /* The dtype of the matmuls' and convolutions' operands
     * (dg_model_matmul, dg_model_conv): DG_F32 (the zero value) keeps
     * float32; DG_BF16 or DG_F16 is a mixed-precision step's policy
     * (train_step.h). */
    dg_dtype compute;
} dg_forward_mode;

/* x [batch, in_shape...] -> logits [batch, classes] (a language model's:
 * [batch, targets, classes]); mode may be NULL */
typedef dg_node *(*dg_forward_fn)(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode);

struct dg_model {
    const char   *name;       /* "mlp", "logreg", "cnn", ...                 */
    dg_shape      in_shape;   /* one example: [784] for a flat image         */
    dg_dtype      in_dtype;   /* DG_F32 (0) for images, DG_I32 for ids        */
    int           targets;    /* labels per example: 0 or 1 for a classifier
                                 (labels [batch]), T for a language model
                                 (labels [batch, T], logits [batch, T, V])   */
    int           classes;
    dg_forward_fn forward;
    int64_t       settings[4]; /* what the forward reads beside the shapes
                                 (charlm: heads, layers, composed)          */
    int           n_params;
    dg_node      *params[DG_MODEL_MAX_PARAMS]; /* in the model's fixed order */
    int           n_state;    /* persistent non-trained tensors (running
                                 statistics), in the model's fixed order    */
    dg_node      *state[DG_MODEL_MAX_PARAMS];
    const void   *source;     /* what the forward reads beside the fields
                                 above: an imported model's graph
                                 (core/onnx/onnx.h); NULL for the built-in */
};

/* Makes a model's parameters on g (seeded: the same values on every
 * backend) from a configuration the model defines (dg_mlp_cfg, ...). */
typedef dg_status (*dg_model_new_fn)(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

/* [batch, in_shape...]; false when that has more than DG_MAX_DIMS axes, or
 * for NULL (the builders check the sizes) */
static inline bool dg_model_input_shape(const dg_model *m, int64_t batch, dg_shape *out) {
    if (!m || !out || m->in_shape.ndim < 0 || m->in_shape.ndim + 1 > DG_MAX_DIMS) return false;
    /* field by field, no compound literal: the header compiles as C++ too */
    out->ndim = m->in_shape.ndim + 1;
    out->d[0] = batch;
    for (int i = 1; i < DG_MAX_DIMS; i++) out->d[i] = i <= m->in_shape.ndim ? m->in_shape.d[i - 1] : 0;
    return true;
}

/* NULL, and g in an error state, for a model without a forward; mode NULL
 * is evaluation */
dg_node *dg_model_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode);

/* A model's product op(a) op(b) in its forward's precision: a and b cast
 * to mode->compute (none for a NULL mode or DG_F32) before dg_matmul, which
 * accumulates in float32 and returns float32; the casts' gradients reach
 * float32 a and b as float32. Every model's matmuls (linear layers, the
 * composed attention's products) go through it, so a step's precision
 * policy reaches every model from this one place. */
dg_node *dg_model_matmul(dg_graph *g, const dg_forward_mode *mode, dg_node *a, dg_node *b, bool trans_a,
                         bool trans_b);

/* A model's dense layer x W + b (x [..., in], W [in, out], b [out]) in its
 * forward's precision. float32 (a NULL mode or DG_F32): dg_matmul and a
 * float32 bias sum. bf16 or f16: the policy keeps the activations between
 * products in 16 bits, as autocast does: x and W cast to mode->compute (no
 * node for an x already in it), the product accumulated in float32 and
 * stored in 16 bits (dg_matmul_ex), b rounded and added in 16 bits. The
 * layers after it read that 16-bit value as it is: elementwise ops,
 * permutes and the next dg_model_linear keep 16 bits (half the bytes of
 * float32 and no cast before the next product); a float32 layer takes it
 * directly where the graph allows mixing (the residual sum: float32 +
 * 16-bit is float32) and through a dg_cast elsewhere (layer norm's
 * statistics, the loss). Its gradient is 16-bit too (autodiff.c). A layer
 * whose output is logits for the loss uses dg_model_matmul and a float32
 * bias instead. The transformer's and the char-LM's layers go through it. */
dg_node *dg_model_linear(dg_graph *g, const dg_forward_mode *mode, dg_node *x, dg_node *w, dg_node *b);

/* A model's fused attention (dg_attention) in its forward's precision: q,
 * k and v cast to mode->compute (none for a NULL mode, DG_F32, or an
 * operand already in it), the output in that dtype (16 bits between
 * products, as dg_model_linear's); the log-sum-exp and the softmax inside
 * stay float32. The transformer's and the char-LM's fused attention go
 * through it. */
dg_node *dg_model_attention(dg_graph *g, const dg_forward_mode *mode, dg_node *q, dg_node *k, dg_node *v,
                            float scale, bool causal);

/* A model's convolution (no bias) in its forward's precision: x and w
 * cast to mode->compute (none for a NULL mode or DG_F32) before
 * dg_conv2d, which sums in float32 and returns the operands' dtype; a
 * 16-bit result is cast back to float32 for the float32 layers after it
 * (batch norm, pools, the residual sums). The casts' gradients reach
 * float32 x and w as float32. The CNN's and ResNet-18's convolutions go
 * through it, as every model's products go through dg_model_matmul. */
dg_node *dg_model_conv(dg_graph *g, const dg_forward_mode *mode, dg_node *x, dg_node *w, dg_conv2d_opts o);

/* The number of trainable values: the sum of the parameters' sizes. */
static inline int64_t dg_model_param_count(const dg_model *m) {
    int64_t total = 0;
    for (int i = 0; m && i < m->n_params; i++) total += dg_node_numel(m->params[i]);
    return total;
}

#ifdef __cplusplus
}
#endif
#endif
