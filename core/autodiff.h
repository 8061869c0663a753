/* autodiff.h: symbolic reverse mode and optimizer updates as graph nodes.
 *
 * Both builders check their arguments before adding any node: a NULL
 * argument, n < 0, a node of another graph or an unknown optimizer kind is
 * refused with DG_ERR_INVALID and a message, and g is left as it was. On a
 * graph already in an error state they return its status and first error. */
#ifndef DG_AUTODIFF_H
#define DG_AUTODIFF_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Appends to g the nodes computing d(loss)/d(wrt[i]) and stores them in
 * grads[i]. `loss` must be a float32 tensor of one element. Contributions of
 * a node used several times are summed; gradients of broadcast operands are
 * summed back to the operand's shape. A wrt node that does not influence the
 * loss gets a constant zero gradient. Every wrt[i] must be a float node of
 * g (f32, bf16 or f16). A gradient has its node's dtype, as autocast's
 * gradients do, but a cast's (and a reshape's of a cast), which is
 * float32: a float32 node's gradient is float32, a 16-bit activation's
 * 16-bit. */
dg_status dg_grad(dg_graph *g, dg_node *loss, dg_node *const *wrt, int n, dg_node **grads);

/* Called by dg_grad_ex as soon as the gradient of wrt[i] is complete (the
 * contribution of its last consumer added), with that gradient (in its
 * dtype, dg_grad's rule); returns the node that stands for it from then on,
 * of the same dtype (NULL: g's error). Nodes it adds get
 * the next ids, and so a place in a plan's order (node id order) right
 * after the gradient's own nodes, before the backward of earlier layers:
 * data parallelism all-reduces each gradient there, so the exchange can
 * overlap the rest of the backward. */
typedef dg_node *(*dg_grad_ready_fn)(dg_graph *g, int i, dg_node *grad, void *arg);
/* dg_grad, calling ready (when not NULL) once for each wrt[i] whose
 * gradient is not the constant zero, in the order the gradients complete. */
dg_status dg_grad_ex(dg_graph *g, dg_node *loss, dg_node *const *wrt, int n, dg_node **grads,
                     dg_grad_ready_fn ready, void *arg);

typedef enum dg_optim_kind { DG_OPTIM_SGD, DG_OPTIM_MOMENTUM, DG_OPTIM_ADAM } dg_optim_kind;

typedef struct dg_optim {
    dg_optim_kind kind;
    float lr;
    float momentum;            /* MOMENTUM: v = momentum v + g            */
    float beta1, beta2, eps;   /* ADAM                                    */
    float weight_decay;        /* L2 penalty folded into the gradient before
                                  any rule: g = dw + weight_decay w (0: none) */
} dg_optim;

/* Defaults: lr as given; momentum 0.9; Adam 0.9, 0.999, 1e-8. */
dg_optim dg_optim_default(dg_optim_kind kind, float lr);
/* "sgd" | "momentum" | "adam" -> kind; DG_ERR_INVALID otherwise. */
dg_status dg_optim_parse(const char *name, dg_optim_kind *kind);
const char *dg_optim_name(dg_optim_kind kind);   /* "?" for an unknown kind */

/* Appends one update node per parameter (plus the optimizer's state leaves,
 * zero-initialised). Each update writes its parameter in place; running a
 * plan whose outputs are `updates` performs one optimizer step. Refused
 * (DG_ERR_INVALID, nothing added): an unknown kind, a learning rate that is
 * not finite and > 0, a momentum or Adam beta outside [0, 1), eps <= 0, a
 * parameter given twice. */
dg_status dg_optim_apply(dg_graph *g, const dg_optim *o, dg_node *const *params,
                         dg_node *const *grads, int n, dg_node **updates);
/* The same, each update (and Adam's step counter) also reading skip, a
 * float32 node of one element (NULL: none, dg_optim_apply): where it is
 * non-zero when the step runs, no parameter or optimizer state changes.
 * And each update reading its gradient as dw / grad_scale (float32 [1],
 * read on the device when the step runs; NULL: dw as it is), before
 * weight decay: g = dw / grad_scale + weight_decay w. That is fp16's loss
 * scaling undone inside the update, where a division node per gradient
 * cost a launch each (core/nn/train_step.h). A grad_scale without a skip
 * adds a constant zero flag (the scale is the input after it). Refused as
 * dg_optim_apply, and for a skip or grad_scale of another graph, dtype or
 * size. */
dg_status dg_optim_apply_ex(dg_graph *g, const dg_optim *o, dg_node *const *params, dg_node *const *grads, int n,
                            dg_node *skip, dg_node *grad_scale, dg_node **updates);

/* Dynamic loss scaling (fp16 training, core/nn/train_step.h) as graph
 * nodes, so a replayed step needs no host round trip (loss_scale.c).
 *
 * found [1] + 1 when x (float32, any shape) holds an inf or a NaN, else
 * found: chained over the gradients from a zero constant, it counts those
 * that overflowed. NULL (g in an error state) for a found of another dtype
 * or size. */
dg_node *dg_found_inf(dg_graph *g, dg_node *found, dg_node *x);
/* The same test over n tensors at once (1 <= n <= DG_FOUND_INF_MAX):
 * found + 1 when any of them holds an inf or a NaN. One node (two kernel
 * launches on the GPU) for up to seven gradients where a chain of
 * dg_found_inf spends one node per gradient: the many small gradients of
 * a model (biases, norms' scales) cost launches, not bytes. NULL (g in an
 * error state) for n outside 1..DG_FOUND_INF_MAX too. */
#define DG_FOUND_INF_MAX (DG_MAX_INPUTS - 1)
dg_node *dg_found_inf_n(dg_graph *g, dg_node *found, int n, dg_node *const *xs);
/* The scale's update after a step: scale and clean (state leaves [1], the
 * scale and the clean steps since it last changed, written in place) move
 * by found [1]: non-zero halves the scale, to no less than
 * DG_LOSS_SCALE_MIN, and zeroes clean; zero adds one to clean, and at
 * `interval` clean steps doubles the scale where the double is finite
 * and zeroes clean. The floor keeps the updates' division by the scale
 * finite (a gradient would need |dw| > 2^104 to overflow it): a scale
 * halved to 0 would turn a clean step's gradients into NaN; the ceiling
 * keeps an infinite scale from halving to itself forever. Its output is a view of scale: a plan that outputs it runs it.
 * NULL (g in an error state) for operands that are not float32 [1], a
 * scale or clean that is no state leaf, or interval < 1. */
#define DG_LOSS_SCALE_MIN 0x1p-24f
dg_node *dg_loss_scale_update(dg_graph *g, dg_node *scale, dg_node *clean, dg_node *found, int interval);

#ifdef __cplusplus
}
#endif
#endif
