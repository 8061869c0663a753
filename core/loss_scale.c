/* loss_scale.c: the nodes of dynamic loss scaling (autodiff.h): the
 * found-inf test over a gradient and the scale's update. With the skip
 * flag of the optimizer's updates (optim.c) they keep a whole fp16 step on
 * the device: the flag is a tensor the kernels read, never a host branch. */
#include "autodiff.h"

#include "attrs.h"
#include "graph_internal.h"

/* float32 of exactly one element */
static bool is_scalar_f32(const dg_node *n) { return n->dtype == DG_F32 && dg_node_numel(n) == 1; }

dg_node *dg_found_inf_n(dg_graph *g, dg_node *found, int n, dg_node *const *xs) {
    if (!xs) return dg__graph_fail(g, DG_ERR_INVALID, "found_inf: NULL tensors to test");
    if (n < 1 || n > DG_FOUND_INF_MAX)
        return dg__graph_fail(g, DG_ERR_INVALID, "found_inf: %d tensors to test (1 to %d)", n, DG_FOUND_INF_MAX);
    dg_node *in[DG_MAX_INPUTS] = {found};
    for (int i = 0; i < n; i++) in[1 + i] = xs[i];
    if (!dg__check_f32_inputs(g, "found_inf", 1 + n, in)) return NULL;
    if (!is_scalar_f32(found))
        return dg__graph_fail(g, DG_ERR_SHAPE, "found_inf: the count '%s' must have one element", found->name);
    return dg__node_new(g, DG_OP_FOUND_INF, DG_SHAPE(1), 1 + n, in);
}

dg_node *dg_found_inf(dg_graph *g, dg_node *found, dg_node *x) { return dg_found_inf_n(g, found, 1, &x); }

dg_node *dg_loss_scale_update(dg_graph *g, dg_node *scale, dg_node *clean, dg_node *found, int interval) {
    dg_node *in[3] = {scale, clean, found};
    if (!dg__check_f32_inputs(g, "loss_scale_update", 3, in)) return NULL;
    for (int i = 0; i < 3; i++)
        if (!is_scalar_f32(in[i]))
            return dg__graph_fail(g, DG_ERR_SHAPE, "loss_scale_update: input %d ('%s') must have one element", i,
                                  in[i]->name);
    /* written in place: persistent storage the plan keeps between steps */
    if (scale->leaf != DG_LEAF_STATE || clean->leaf != DG_LEAF_STATE)
        return dg__graph_fail(g, DG_ERR_INVALID, "loss_scale_update: the scale and its clean-step count must be "
                              "state leaves (dg_state)");
    if (interval < 1)
        return dg__graph_fail(g, DG_ERR_INVALID, "loss_scale_update: growth interval %d, < 1", interval);
    dg_node *u = dg__node_new(g, DG_OP_LOSS_SCALE_UPDATE, DG_SHAPE(1), 3, in);
    if (!u) return NULL;
    u->view_of = scale;
    dg__attr_scalar_set(u, (dg_attr_scalar){(float)interval});
    return u;
}
