/* nn.h: layers and models built from graph ops. */
#ifndef DG_NN_H
#define DG_NN_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MLP_MAX_LAYERS 8

/* An MLP: widths[0] inputs, widths[n-1] outputs (logits); ReLU between
 * layers. Layer i: y = x W_i + b_i, W_i [widths[i], widths[i+1]], b_i zero.
 * W_i is drawn from N(0, 2/fan_in) (Kaiming, for ReLU) or, for a single
 * layer (logistic regression), N(0, 1/fan_in) (Xavier-like). */
typedef struct dg_mlp {
    int      n_layers;
    dg_node *w[DG_MLP_MAX_LAYERS], *b[DG_MLP_MAX_LAYERS];
} dg_mlp;

dg_status dg_mlp_new(dg_graph *g, dg_mlp *m, const int *widths, int n_widths, uint64_t seed);
/* x [batch, widths[0]] -> logits [batch, widths[n-1]] */
dg_node  *dg_mlp_forward(dg_graph *g, const dg_mlp *m, dg_node *x);
/* the parameters in a fixed order (w0, b0, w1, b1, ...); returns the count */
int       dg_mlp_params(const dg_mlp *m, dg_node **out);
/* "784-256-100-10" -> widths; DG_ERR_INVALID with a message otherwise */
dg_status dg_mlp_parse_widths(const char *spec, int *widths, int *n_widths);

#ifdef __cplusplus
}
#endif
#endif
