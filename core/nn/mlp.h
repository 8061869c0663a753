/* mlp.h: the multi-layer perceptron (and, with one layer, logistic
 * regression) as a dg_model. */
#ifndef DG_NN_MLP_H
#define DG_NN_MLP_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MLP_MAX_LAYERS 8

/* widths[0] inputs, widths[n-1] outputs (logits); ReLU between layers.
 * Layer i: y = x W_i + b_i, W_i [widths[i], widths[i+1]], b_i zero. W_i is
 * drawn from N(0, 2/fan_in) (Kaiming, for ReLU) or, for a single layer
 * (logistic regression), N(0, 1/fan_in) (Xavier-like). */
typedef struct dg_mlp_cfg {
    int widths[DG_MLP_MAX_LAYERS + 1];
    int n_widths;
} dg_mlp_cfg;

/* A dg_model_new_fn: parameters w0, b0, w1, b1, ... in that order; named
 * "logreg" for one layer, "mlp" otherwise. DG_ERR_INVALID, with nothing
 * added to g, for NULL arguments, n_widths outside 2..DG_MLP_MAX_LAYERS + 1
 * or a width < 1; a layer too large for a tensor fails as its dg_param. */
dg_status dg_mlp_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);
/* "784-256-100-10" -> cfg (2 to DG_MLP_MAX_LAYERS + 1 widths, each 1 to
 * 1000000); DG_ERR_INVALID with a message otherwise, or for NULL */
dg_status dg_mlp_parse_widths(const char *spec, dg_mlp_cfg *cfg);

#ifdef __cplusplus
}
#endif
#endif
