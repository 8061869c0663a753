/* graph_backward.c: the public builders of backward ops a program writes
 * by hand (a training step without dg_grad, as the bench's autodiff sweep
 * does). Each makes the node dg_grad would make for the same gradient
 * (autodiff.c), after checking what dg_grad knows by construction. */
#include "graph_internal.h"

dg_node *dg_relu_backward(dg_graph *g, dg_node *dy, dg_node *x) {
    dg_node *in[2] = {dy, x};
    if (!dg__check_f32_inputs(g, "relu_backward", 2, in)) return NULL;
    if (!dg_shape_eq(dy->shape, x->shape)) {
        char sa[96], sb[96];
        return dg__graph_fail(g, DG_ERR_SHAPE, "relu_backward: dy %s must have x's shape %s",
                              dg_shape_str(dy->shape, sa, sizeof sa), dg_shape_str(x->shape, sb, sizeof sb));
    }
    return dg__node_new(g, DG_OP_RELU_BACKWARD, x->shape, 2, in);
}

dg_node *dg_softmax_cross_entropy_backward(dg_graph *g, dg_node *dloss, dg_node *loss) {
    dg_node *in[2] = {dloss, loss};
    if (!dg__check_f32_inputs(g, "softmax_cross_entropy_backward", 2, in)) return NULL;
    if (loss->op != DG_OP_SOFTMAX_CE)
        return dg__graph_fail(g, DG_ERR_INVALID,
                              "softmax_cross_entropy_backward: '%s' (%s) is not a softmax_cross_entropy node",
                              loss->name, dg_op_name(loss->op));
    if (dg_node_numel(dloss) != 1) {
        char s[96];
        return dg__graph_fail(g, DG_ERR_SHAPE,
                              "softmax_cross_entropy_backward: dloss %s must have one element, as the loss has",
                              dg_shape_str(dloss->shape, s, sizeof s));
    }
    /* the inputs dg_grad gives it: the loss's gradient, logits, labels and
     * the row log-sum-exp the forward saved (its side output) */
    dg_node *logits = loss->in[0];
    dg_node *in4[4] = {dloss, logits, loss->in[1], loss->side[0]};
    return dg__node_new(g, DG_OP_SOFTMAX_CE_BACKWARD, logits->shape, 4, in4);
}
