/* optim.c: optimizer updates as graph nodes, so a training step (forward,
 * backward, update) is one graph that one plan runs, or one CUDA graph. */
#include "autodiff.h"

#include <math.h>
#include <string.h>

#include "attrs.h"
#include "graph_internal.h"

dg_optim dg_optim_default(dg_optim_kind kind, float lr) {
    return (dg_optim){.kind = kind, .lr = lr, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

dg_status dg_optim_parse(const char *name, dg_optim_kind *kind) {
    static const char *names[] = {"sgd", "momentum", "adam"};
    if (!kind) return dg__fail(DG_ERR_INVALID, "dg_optim_parse: NULL kind");
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) { *kind = (dg_optim_kind)i; return DG_OK; }
    return dg__fail(DG_ERR_INVALID, "unknown optimizer '%s' (expected sgd, momentum or adam)", name ? name : "");
}

const char *dg_optim_name(dg_optim_kind kind) {
    switch (kind) {
    case DG_OPTIM_SGD:      return "sgd";
    case DG_OPTIM_MOMENTUM: return "momentum";
    case DG_OPTIM_ADAM:     return "adam";
    }
    return "?";
}

/* An update node writes its first input (the parameter) in place, and its
 * state inputs (the op table's `writes` mask says which); its output is a
 * view of the parameter, so a plan that outputs it keeps the step. in[]
 * holds the row's n_in inputs and room for two more: skip, then
 * grad_scale, when given (grad_scale only with skip: dg_optim_apply_ex). */
static dg_node *update(dg_graph *g, dg_op op, dg_node *w, int n_in, dg_node **in, const dg_optim *o, dg_node *skip,
                       dg_node *grad_scale) {
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return NULL;
    if (skip) in[n_in++] = skip; /* the row's inputs, then the flag, then the scale (ops.h) */
    if (skip && grad_scale) in[n_in++] = grad_scale;
    dg_node *u = dg__node_new(g, op, w->shape, n_in, in);
    if (!u) return NULL;
    u->view_of = w;
    dg__attr_optim_set(u, (dg_attr_optim){o->lr, o->kind == DG_OPTIM_ADAM ? o->beta1 : o->momentum, o->beta2,
                                          o->eps, o->weight_decay});
    return u;
}

static dg_status check_operand(const dg_graph *g, const char *what, int i, const dg_node *x) {
    if (!x) return dg__fail(DG_ERR_INVALID, "dg_optim_apply: %s[%d] is NULL", what, i);
    if (!dg__graph_owns(g, x))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: %s[%d] ('%s') is not a node of this graph", what, i, x->name);
    return DG_OK;
}

/* Everything checked before the first node is added, so a refused call
 * leaves g as it was. An unknown kind would otherwise add no update and
 * report success. */
static dg_status check_args(const dg_graph *g, const dg_optim *o, dg_node *const *params,
                            dg_node *const *grads, int n, dg_node *const *updates) {
    if (!g || !o) return dg__fail(DG_ERR_INVALID, "dg_optim_apply: NULL %s", g ? "optimizer" : "graph");
    if ((unsigned)o->kind > DG_OPTIM_ADAM)
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: unknown optimizer kind %d", (int)o->kind);
    /* a rate of 0 or NaN would not train; beta = 1 divides by zero in Adam's
     * bias correction; eps = 0 divides by zero where a gradient is 0 */
    if (!(o->lr > 0 && isfinite(o->lr)))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: learning rate %g, needs a finite value > 0", (double)o->lr);
    if (!(o->weight_decay >= 0 && isfinite(o->weight_decay)))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: weight decay %g, needs a finite value >= 0",
                        (double)o->weight_decay);
    if (o->kind == DG_OPTIM_MOMENTUM && !(o->momentum >= 0 && o->momentum < 1))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: momentum %g, needs [0, 1)", (double)o->momentum);
    if (o->kind == DG_OPTIM_ADAM && !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: Adam beta1 %g, beta2 %g, eps %g: needs betas in [0, 1) and "
                        "eps > 0", (double)o->beta1, (double)o->beta2, (double)o->eps);
    if (n < 0) return dg__fail(DG_ERR_INVALID, "dg_optim_apply: n is %d, < 0", n);
    if (n > 0 && (!params || !grads || !updates))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply: NULL params, grads or updates for %d nodes", n);
    for (int i = 0; i < n; i++) {
        const dg_node *w = params[i], *dw = grads[i];
        dg_status st = check_operand(g, "params", i, w);
        if (st == DG_OK) st = check_operand(g, "grads", i, dw);
        if (st != DG_OK) return st;
        if (w->leaf != DG_LEAF_PARAM || !dg_shape_eq(w->shape, dw->shape))
            return dg__fail(DG_ERR_INVALID, "dg_optim_apply: parameter %d must be a param leaf with a gradient of "
                            "its shape", i);
        if (dw->dtype != DG_F32) /* the update kernels read float32 */
            return dg__fail(DG_ERR_INVALID, "dg_optim_apply: gradient %d ('%s') is %s; updates take float32 "
                            "gradients", i, dw->name, dg_dtype_name(dw->dtype));
        for (int j = 0; j < i; j++) /* two updates writing one parameter in place */
            if (params[j] == w)
                return dg__fail(DG_ERR_INVALID, "dg_optim_apply: parameter '%s' given twice (%d and %d)", w->name, j,
                                i);
    }
    return DG_OK;
}

dg_status dg_optim_apply(dg_graph *g, const dg_optim *o, dg_node *const *params,
                         dg_node *const *grads, int n, dg_node **updates) {
    return dg_optim_apply_ex(g, o, params, grads, n, NULL, NULL, updates);
}

/* skip and grad_scale: float32 [1] nodes of g, or NULL */
static dg_status check_scalar(const dg_graph *g, const char *what, const dg_node *x) {
    if (!x) return DG_OK;
    if (!dg__graph_owns(g, x))
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply_ex: the %s '%s' is not a node of this graph", what, x->name);
    if (x->dtype != DG_F32 || dg_node_numel(x) != 1)
        return dg__fail(DG_ERR_INVALID, "dg_optim_apply_ex: the %s '%s' must be float32 of one element (%s, %lld "
                        "elements)", what, x->name, dg_dtype_name(x->dtype), (long long)dg_node_numel(x));
    return DG_OK;
}

dg_status dg_optim_apply_ex(dg_graph *g, const dg_optim *o, dg_node *const *params, dg_node *const *grads, int n,
                            dg_node *skip, dg_node *grad_scale, dg_node **updates) {
    dg_status st = check_args(g, o, params, grads, n, updates);
    if (st == DG_OK) st = check_scalar(g, "skip flag", skip);
    if (st == DG_OK) st = check_scalar(g, "gradient scale", grad_scale);
    if (st != DG_OK) return st;
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "dg_optim_apply");
    const dg_init zero = {DG_INIT_FILL, 0, 0, 0};
    /* the scale is the input after the flag: a scale alone gets a flag that never skips */
    if (grad_scale && !skip) skip = dg_const(g, "optim.no_skip", DG_SHAPE(1), 0.0f);
    dg_node *step = NULL;
    if (o->kind == DG_OPTIM_ADAM && n > 0) {
        /* one step counter for all parameters, incremented before the updates */
        dg_node *in[2] = {dg_state(g, "adam_t", DG_SHAPE(1), zero)};
        step = update(g, DG_OP_ADAM_STEP, in[0], 1, in, o, skip, NULL);
    }
    for (int i = 0; i < n; i++) {
        dg_node *w = params[i], *dw = grads[i];
        switch (o->kind) {
        case DG_OPTIM_SGD: {
            dg_node *in[4] = {w, dw};
            updates[i] = update(g, DG_OP_SGD_UPDATE, w, 2, in, o, skip, grad_scale);
            break;
        }
        case DG_OPTIM_MOMENTUM: {
            dg_node *in[5] = {w, dw, dg_state(g, "velocity", w->shape, zero)};
            updates[i] = update(g, DG_OP_MOMENTUM_UPDATE, w, 3, in, o, skip, grad_scale);
            break;
        }
        case DG_OPTIM_ADAM: {
            dg_node *in[7] = {w, dw, dg_state(g, "adam_m", w->shape, zero),
                              dg_state(g, "adam_v", w->shape, zero), step};
            updates[i] = update(g, DG_OP_ADAM_UPDATE, w, 5, in, o, skip, grad_scale);
            break;
        }
        }
    }
    return dg_graph_status(g);
}
