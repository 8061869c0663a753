/* layers.h: building blocks the convolutional models share: a batch norm
 * layer that follows the forward mode (batch statistics and a running
 * update in training, running statistics in evaluation), and the seeded
 * initialisations. */
#ifndef DG_NN_LAYERS_H
#define DG_NN_LAYERS_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_BN_EPS      1e-5f  /* PyTorch's defaults */
#define DG_BN_MOMENTUM 0.1f

/* A batch norm layer's tensors, all [C]: scale and shift are parameters,
 * mean and var the running statistics (state). */
typedef struct dg_bn_layer { dg_node *scale, *shift, *mean, *var; } dg_bn_layer;

/* Makes the four tensors of a layer of c channels named "<name>.scale",
 * ... (scale 1, shift 0, mean 0, var 1) and appends them to m's params and
 * state. DG_ERR_INVALID when m has no room left. */
dg_status dg_bn_layer_new(dg_graph *g, dg_model *m, const char *name, int64_t c, dg_bn_layer *out);

/* The layer applied to x [N,C,H,W] or [N,C] in `mode` (NULL: evaluation).
 * In training it appends the running update to mode->updates (NULL and g
 * in an error state when that is full). */
dg_node *dg_bn_layer_apply(dg_graph *g, const dg_bn_layer *l, dg_node *x, dg_forward_mode *mode);

/* A weight drawn from N(0, 2 / fan_in) (Kaiming, for ReLU), appended to
 * m's params; NULL with g in an error state when m has no room left. */
dg_node *dg_kaiming_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, int64_t fan_in, uint64_t seed);
/* A weight drawn from N(0, std^2), appended to m's params. */
dg_node *dg_normal_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, float std, uint64_t seed);
/* A parameter filled with `value`, appended to m's params. */
dg_node *dg_fill_param(dg_graph *g, dg_model *m, const char *name, dg_shape s, float value);

#ifdef __cplusplus
}
#endif
#endif
