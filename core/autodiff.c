/* autodiff.c: dg_grad, reverse mode over the graph, one case per op. */
#include "autodiff.h"

#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "graph_internal.h"

/* Builds an internal backward op: same shape as `like`, inputs as given. */
static dg_node *backward_op(dg_graph *g, dg_op op, const dg_node *like, int n_in, dg_node **in) {
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return NULL;
    dg_node *n = dg__node_new(g, op, like->shape, n_in, in);
    return n;
}

/* A backward op that carries attributes: `like`'s shape, the forward node
 * y's attributes, copied whole. The two rows of the op table must name the
 * same family (ops.c); where they do not, the graph fails naming both ops,
 * so no family needs a line here. */
static dg_node *backward_with_attrs(dg_graph *g, dg_op op, const dg_node *y, const dg_node *like, int n_in,
                                    dg_node **in) {
    dg_attr_kind want = dg_op_info_get(op)->attr, have = dg_op_info_get(y->op)->attr;
    if (want != have)
        return dg__graph_fail(g, DG_ERR_INVALID, "dg_grad: %s takes attribute family %d, but its forward op %s "
                              "(node '%s') has %d", dg_op_name(op), (int)want, dg_op_name(y->op), y->name, (int)have);
    dg_node *d = backward_op(g, op, like, n_in, in);
    if (d) memcpy(d->attr, y->attr, sizeof d->attr);
    return d;
}

/* a convolution's backward op (dy, w) -> dx or (dy, x) -> dw: in the
 * dtype of its inputs, held to one as conv2d's are (graph_conv.c) */
static dg_node *conv_backward(dg_graph *g, dg_op op, const dg_node *y, const dg_node *like, dg_node **in) {
    if (!in[0] || !dg__check_float_inputs(g, dg_op_name(op), 2, in)) return NULL;
    dg_node *d = backward_with_attrs(g, op, y, like, 2, in);
    if (d) d->dtype = in[0]->dtype;
    return d;
}

/* an elementwise backward op (dy, the forward's x or y) -> dx: in x's
 * dtype, which dy and the forward value share (the gradient of a 16-bit
 * node is 16-bit) */
static dg_node *bw2(dg_graph *g, dg_op op, dg_node *dy, dg_node *x) {
    dg_node *in[2] = {dy, x};
    dg_node *d = backward_op(g, op, x, 2, in);
    if (d) d->dtype = x->dtype;
    return d;
}

/* dy as float32, for the backward ops whose kernels read a float32
 * gradient (softmax, the norms, pooling, embedding, broadcast_to): a
 * 16-bit node's gradient is widened first, and their float32 result is
 * rounded back to the input's dtype by accumulate */
static dg_node *f32(dg_graph *g, dg_node *dy) { return dg_cast(g, dy, DG_F32); }


/* The dtype of x's gradient: x's own, as autocast's gradients are (a bf16
 * or f16 activation's gradient is stored in 16 bits, a float32 one's, the
 * residual stream's or a master parameter's, in float32), but float32 for
 * a cast, whose gradient goes on in float32 to one side of it: a 16-bit
 * copy of a weight or of a layer norm's output gathers its gradient (a
 * product's dW or dX, written in float32 by the product) in float32, with
 * no rounding to 16 bits and back, and an fp16 weight gradient of a scaled
 * loss does not overflow f16's range on the way (a sum over the batch of
 * 2^16-scaled terms). A reshape (a view) takes its source's: the copy a
 * 3-D product folds into 2-D rows gathers float32 too. A 16-bit bias
 * copy's gradient, the column sum of the 16-bit dy, is summed straight
 * into float32 (reduce_to): no f16 overflow of a sum whose terms fit, and
 * no 16-bit sum and cast per bias. */
static dg_dtype grad_dtype(const dg_node *x) {
    while (x->op == DG_OP_RESHAPE) x = x->in[0]; /* a view's gradient is its source's, reshaped */
    return x->op == DG_OP_CAST ? DG_F32 : x->dtype;
}

/* Sums dy [broadcast shape] back to x's shape ("reverse broadcast"); a
 * 16-bit dy whose sum is x's float32 gradient (a bias copy's: x a cast)
 * is summed straight into float32. */
static dg_node *reduce_to(dg_graph *g, dg_node *dy, const dg_node *x) {
    const dg_shape t = x->shape;
    if (!dy || dg_shape_eq(dy->shape, t)) return dy;
    int nd = dy->shape.ndim, off = nd - t.ndim;
    uint32_t axes = 0;
    for (int i = 0; i < nd; i++) {
        int64_t td = i >= off ? t.d[i - off] : 1;
        if (dy->shape.d[i] != td) axes |= 1u << i;
    }
    dg_node *s = !axes ? dy : dg_sum_ex(g, dy, axes, true, grad_dtype(x) == DG_F32 ? DG_F32 : dy->dtype);
    return dg_reshape(g, s, t);
}

/* A contribution in another dtype than grad_dtype(x) is cast once here (a
 * float32 op's gradient to its 16-bit input, a 16-bit one to a cast), and
 * contributions are summed in that dtype. */
static void accumulate(dg_graph *g, dg_node **grad, const dg_node *x, dg_node *contrib) {
    dg_dtype t = grad_dtype(x);
    if (contrib && contrib->dtype != t && x->dtype != DG_I32) contrib = dg_cast(g, contrib, t);
    if (!contrib) return;
    grad[x->id] = grad[x->id] ? dg_add(g, grad[x->id], contrib) : contrib;
}

static dg_status fail_no_grad(dg_graph *g, const dg_node *y) {
    dg__graph_fail(g, DG_ERR_UNSUPPORTED, "dg_grad: op %s (node '%s') has no gradient",
                   dg_op_name(y->op), y->name);
    return DG_ERR_UNSUPPORTED;
}

/* Adds the gradient contributions of y (whose gradient is dy) to its inputs
 * that need one. */
static dg_status backprop(dg_graph *g, dg_node *y, dg_node *dy, const bool *needs, dg_node **grad) {
    dg_node *a = y->in[0], *b = y->n_in > 1 ? y->in[1] : NULL;
    bool na = a && needs[a->id], nb = b && needs[b->id];
    float s = dg_attr_scalar_or0(y);
    switch (y->op) {
    case DG_OP_LEAF: break;
    case DG_OP_ADD:
        if (na) accumulate(g, grad, a, reduce_to(g, dy, a));
        if (nb) accumulate(g, grad, b, reduce_to(g, dy, b));
        break;
    case DG_OP_SUB:
        if (na) accumulate(g, grad, a, reduce_to(g, dy, a));
        if (nb) accumulate(g, grad, b, reduce_to(g, dg_neg(g, dy), b));
        break;
    case DG_OP_MUL:
        if (na) accumulate(g, grad, a, reduce_to(g, dg_mul(g, dy, b), a));
        if (nb) accumulate(g, grad, b, reduce_to(g, dg_mul(g, dy, a), b));
        break;
    case DG_OP_DIV: /* y = a / b: da = dy / b, db = -dy * y / b */
        if (na) accumulate(g, grad, a, reduce_to(g, dg_div(g, dy, b), a));
        if (nb) accumulate(g, grad, b, reduce_to(g, dg_neg(g, dg_mul(g, dy, dg_div(g, y, b))), b));
        break;
    case DG_OP_NEG:        if (na) accumulate(g, grad, a, dg_neg(g, dy)); break;
    case DG_OP_ADD_SCALAR: if (na) accumulate(g, grad, a, dy); break;
    case DG_OP_MUL_SCALAR: if (na) accumulate(g, grad, a, dg_mul_scalar(g, dy, s)); break;
    case DG_OP_POW_SCALAR: /* d(a^s) = s a^(s-1) */
        if (na) accumulate(g, grad, a, dg_mul(g, dy, dg_mul_scalar(g, dg_pow_scalar(g, a, s - 1.0f), s)));
        break;
    case DG_OP_EXP:  if (na) accumulate(g, grad, a, dg_mul(g, dy, y)); break;
    case DG_OP_LOG:  if (na) accumulate(g, grad, a, dg_div(g, dy, a)); break;
    case DG_OP_SQRT: if (na) accumulate(g, grad, a, dg_mul_scalar(g, dg_div(g, dy, y), 0.5f)); break;
    case DG_OP_ABS:  if (na) accumulate(g, grad, a, bw2(g, DG_OP_ABS_BACKWARD, dy, a)); break;
    case DG_OP_RELU: if (na) accumulate(g, grad, a, bw2(g, DG_OP_RELU_BACKWARD, dy, a)); break;
    case DG_OP_LEAKY_RELU:
        if (na) {
            dg_node *d = bw2(g, DG_OP_LEAKY_RELU_BACKWARD, dy, a);
            if (d) dg__attr_scalar_set(d, (dg_attr_scalar){s});
            accumulate(g, grad, a, d);
        }
        break;
    case DG_OP_SIGMOID: if (na) accumulate(g, grad, a, bw2(g, DG_OP_SIGMOID_BACKWARD, dy, y)); break;
    case DG_OP_TANH:    if (na) accumulate(g, grad, a, bw2(g, DG_OP_TANH_BACKWARD, dy, y)); break;
    case DG_OP_GELU:    if (na) accumulate(g, grad, a, bw2(g, DG_OP_GELU_BACKWARD, dy, a)); break;
    case DG_OP_ERF: /* d erf(a) = 2/sqrt(pi) exp(-a^2): composed, as erf is rare (exact GELU) */
        if (na)
            accumulate(g, grad, a, dg_mul(g, dy, dg_mul_scalar(g, dg_exp(g, dg_neg(g, dg_mul(g, a, a))),
                                                                1.12837917f))); /* 2/sqrt(pi) */
        break;
    /* the mean over replicas is linear and the same on every replica: its
     * transpose is itself */
    case DG_OP_ALL_REDUCE: if (na) accumulate(g, grad, a, dg_all_reduce(g, dy)); break;
    /* a cast's gradient is dy cast back to the input's dtype (accumulate) */
    case DG_OP_CAST: if (na) accumulate(g, grad, a, dy); break;
    case DG_OP_MATMUL: {
        /* C = op(A) op(B); each case is the product rule with the transposes
         * folded into the flags, so no transposed copy is materialised. A
         * product of bf16 or f16 operands takes dC in theirs (a float32
         * output's gradient rounded once) and accumulates in float32, as
         * autocast's backward products do; dA and dB are written in their
         * gradient's dtype (grad_dtype: 16 bits for a 16-bit activation,
         * float32 for a cast's copy). */
        dg_attr_matmul mm = dg_attr_matmul_of(y);
        bool ta = mm.trans_a, tb = mm.trans_b;
        dy = dg_cast(g, dy, a->dtype);
        dg_dtype ga = grad_dtype(a), gb = grad_dtype(b);
        if (na) accumulate(g, grad, a,
                           !ta ? dg_matmul_ex(g, dy, b, false, !tb, ga)   /* dA = dC op(B)^T            */
                               : dg_matmul_ex(g, b, dy, tb, true, ga));   /* dA = (dC op(B)^T)^T        */
        if (nb) accumulate(g, grad, b,
                           !tb ? dg_matmul_ex(g, a, dy, !ta, false, gb)   /* dB = op(A)^T dC            */
                               : dg_matmul_ex(g, dy, a, true, ta, gb));   /* dB = (op(A)^T dC)^T        */
        break;
    }
    case DG_OP_PERMUTE:
        if (na) {
            int inv[DG_MAX_DIMS];
            dg_attr_permute pa = dg_attr_permute_of(y);
            for (int i = 0; i < y->shape.ndim; i++) inv[pa.perm[i]] = i;
            accumulate(g, grad, a, dg_permute(g, dy, inv));
        }
        break;
    case DG_OP_RESHAPE: if (na) accumulate(g, grad, a, dg_reshape(g, dy, a->shape)); break;
    case DG_OP_SUM:
    case DG_OP_MEAN:
        if (na) {
            dg_shape kept = a->shape; /* the output shape with keepdims */
            uint32_t axes = dg_attr_reduce_of(y).axes;
            for (int i = 0; i < kept.ndim; i++)
                if (axes >> i & 1u) kept.d[i] = 1;
            dg_node *d = dg_broadcast_to(g, dg_reshape(g, f32(g, dy), kept), a->shape);
            if (y->op == DG_OP_MEAN)
                d = dg_mul_scalar(g, d, (float)((double)dg_node_numel(y) / (double)dg_node_numel(a)));
            accumulate(g, grad, a, d);
        }
        break;
    case DG_OP_BROADCAST_TO: if (na) accumulate(g, grad, a, reduce_to(g, dy, a)); break;
    case DG_OP_SOFTMAX:
    case DG_OP_LOG_SOFTMAX:
        if (na) { /* the forward's scale and mask */
            dg_node *in[2] = {f32(g, dy), y};
            dg_node *d = backward_op(g, y->op == DG_OP_SOFTMAX ? DG_OP_SOFTMAX_BACKWARD : DG_OP_LOG_SOFTMAX_BACKWARD,
                                     y, 2, in);
            if (d) dg__attr_softmax_set(d, dg_attr_softmax_of(y));
            accumulate(g, grad, a, d);
        }
        break;
    case DG_OP_SOFTMAX_CE:
        if (na) { /* reads the forward's saved row log-sum-exp */
            dg_node *in[4] = {f32(g, dy), a, b, y->side[0]};
            accumulate(g, grad, a, backward_op(g, DG_OP_SOFTMAX_CE_BACKWARD, a, 4, in));
        }
        break;
    case DG_OP_CONV2D: { /* dx = conv^T(dy, w), dw = correlation of dy with x */
        /* a bf16 or f16 convolution's backward ops run in its dtype: dy
         * in it (no node where it already is), dx and dw in it (conv_backward) */
        dy = dg_cast(g, dy, a->dtype);
        dg_node *to_x[2] = {dy, b}, *to_w[2] = {dy, a};
        if (na) accumulate(g, grad, a, conv_backward(g, DG_OP_CONV2D_BACKWARD_DATA, y, a, to_x));
        if (nb) accumulate(g, grad, b, conv_backward(g, DG_OP_CONV2D_BACKWARD_WEIGHT, y, b, to_w));
        break;
    }
    case DG_OP_MAX_POOL2D:
        if (na) { /* routed through the forward's saved argmax */
            dg_node *in[2] = {f32(g, dy), y->side[0]};
            accumulate(g, grad, a, backward_with_attrs(g, DG_OP_MAX_POOL2D_BACKWARD, y, a, 2, in));
        }
        break;
    case DG_OP_AVG_POOL2D:
        if (na) {
            dg_node *dy32 = f32(g, dy);
            accumulate(g, grad, a, backward_with_attrs(g, DG_OP_AVG_POOL2D_BACKWARD, y, a, 1, &dy32));
        }
        break;
    case DG_OP_BATCH_NORM: { /* inputs x, scale, shift; stats saved by the forward */
        dg_node *shift = y->in[2], *stats = y->side[0];
        dy = f32(g, dy);
        if (na) {
            dg_node *in[4] = {dy, a, b, stats};
            accumulate(g, grad, a, backward_with_attrs(g, DG_OP_BATCH_NORM_BACKWARD, y, a, 4, in));
        }
        if (nb) {
            dg_node *in[3] = {dy, a, stats};
            accumulate(g, grad, b, backward_with_attrs(g, DG_OP_BATCH_NORM_BACKWARD_SCALE, y, b, 3, in));
        }
        /* the sum of dy over every axis but the channels': for [N,C,H,W]
         * first over H,W (row sums), then over N (column sums), two layouts
         * both backends reduce fast, where axes {0,2,3} at once take the
         * general strided path (one thread per channel on the GPU) */
        if (needs[shift->id])
            accumulate(g, grad, shift,
                       a->shape.ndim == 4 ? dg_sum(g, dg_sum(g, dy, 0xCu, false), 0x1u, false)
                                          : dg_sum(g, dy, 0x1u, false));
        break;
    }
    case DG_OP_LAYER_NORM: { /* as batch norm, per row instead of per channel */
        dg_node *shift = y->in[2], *stats = y->side[0];
        dy = f32(g, dy);
        if (na) {
            dg_node *in[4] = {dy, a, b, stats};
            accumulate(g, grad, a, backward_with_attrs(g, DG_OP_LAYER_NORM_BACKWARD, y, a, 4, in));
        }
        if (nb) {
            dg_node *in[3] = {dy, a, stats};
            accumulate(g, grad, b, backward_with_attrs(g, DG_OP_LAYER_NORM_BACKWARD_SCALE, y, b, 3, in));
        }
        if (needs[shift->id]) /* column sums of dy read as [rows, D] */
            accumulate(g, grad, shift,
                       dg_sum(g, dg_reshape(g, dy, DG_SHAPE(dg_node_numel(dy) / shift->shape.d[0],
                                                            shift->shape.d[0])), 0x1u, false));
        break;
    }
    case DG_OP_EMBEDDING: /* the ids (b) are integers: no gradient */
        if (na) {
            dg_node *in[2] = {f32(g, dy), b};
            accumulate(g, grad, a, backward_op(g, DG_OP_EMBEDDING_BACKWARD, a, 2, in));
        }
        break;
    case DG_OP_ATTENTION: {
        /* one backward step writes dq, and dk, dv as side outputs, all in
         * the forward's dtype, and takes dout in it, as a 16-bit
         * convolution does */
        dg_node *c = y->in[2];
        if (na || nb || needs[c->id]) {
            dg_node *in[6] = {dg_cast(g, dy, a->dtype), a, b, c, y, y->side[0]};
            dg_node *dq = backward_op(g, DG_OP_ATTENTION_BACKWARD, a, 6, in);
            if (!dq) break;
            dq->dtype = a->dtype;
            dg__attr_attention_set(dq, dg_attr_attention_of(y));
            dg_node *dk = dg__side_new(g, dq, b->shape, "dk"), *dv = dk ? dg__side_new(g, dq, c->shape, "dv") : NULL;
            if (!dv) break;
            dk->dtype = dv->dtype = a->dtype;
            if (na) accumulate(g, grad, a, dq);
            if (nb) accumulate(g, grad, b, dk);
            if (needs[c->id]) accumulate(g, grad, c, dv);
        }
        break;
    }
    case DG_OP_SIDE_OUTPUT: /* saved for a backward op, not part of the function */
        dg__graph_fail(g, DG_ERR_UNSUPPORTED, "dg_grad: the loss depends on side output '%s', which has no "
                       "gradient", y->name);
        return DG_ERR_UNSUPPORTED;
    case DG_OP_RELU_BACKWARD:
    case DG_OP_LEAKY_RELU_BACKWARD:
    case DG_OP_ABS_BACKWARD:
    case DG_OP_SIGMOID_BACKWARD:
    case DG_OP_TANH_BACKWARD:
    case DG_OP_GELU_BACKWARD:
    case DG_OP_SOFTMAX_BACKWARD:
    case DG_OP_LOG_SOFTMAX_BACKWARD:
    case DG_OP_SOFTMAX_CE_BACKWARD:
    case DG_OP_CONV2D_BACKWARD_DATA:
    case DG_OP_CONV2D_BACKWARD_WEIGHT:
    case DG_OP_MAX_POOL2D_BACKWARD:
    case DG_OP_AVG_POOL2D_BACKWARD:
    case DG_OP_BATCH_NORM_BACKWARD:
    case DG_OP_BATCH_NORM_BACKWARD_SCALE:
    case DG_OP_LAYER_NORM_BACKWARD:
    case DG_OP_LAYER_NORM_BACKWARD_SCALE:
    case DG_OP_EMBEDDING_BACKWARD:
    case DG_OP_ATTENTION_BACKWARD:
    case DG_OP_BATCH_NORM_RUNNING:
    case DG_OP_SGD_UPDATE:
    case DG_OP_MOMENTUM_UPDATE:
    case DG_OP_ADAM_STEP:
    case DG_OP_ADAM_UPDATE:
    case DG_OP_FOUND_INF:
    case DG_OP_LOSS_SCALE_UPDATE:
    case DG_OP_COUNT:
        return fail_no_grad(g, y);
    }
    return dg_graph_status(g);
}

/* The checks that need no graph work: a refused call leaves g as it was. A
 * foreign node's id would index this graph's gradients: the gradient of an
 * unrelated node would come back as if it were the one asked for. */
static dg_status check_args(const dg_graph *g, const dg_node *loss, dg_node *const *wrt, int n,
                            dg_node *const *grads) {
    if (!g || !loss) return dg__fail(DG_ERR_INVALID, "dg_grad: NULL %s", g ? "loss" : "graph");
    if (n < 0) return dg__fail(DG_ERR_INVALID, "dg_grad: n is %d, < 0", n);
    if (n > 0 && (!wrt || !grads)) return dg__fail(DG_ERR_INVALID, "dg_grad: NULL wrt or grads for %d nodes", n);
    if (!dg__graph_owns(g, loss))
        return dg__fail(DG_ERR_INVALID, "dg_grad: loss '%s' is not a node of this graph", loss->name);
    for (int i = 0; i < n; i++) {
        if (!wrt[i]) return dg__fail(DG_ERR_INVALID, "dg_grad: wrt[%d] is NULL", i);
        if (!dg__graph_owns(g, wrt[i]))
            return dg__fail(DG_ERR_INVALID, "dg_grad: wrt[%d] ('%s') is not a node of this graph", i, wrt[i]->name);
        if (wrt[i]->dtype == DG_I32) /* a bf16 or f16 node's gradient is bf16 or f16 */
            return dg__fail(DG_ERR_INVALID, "dg_grad: cannot differentiate with respect to int32 '%s'", wrt[i]->name);
    }
    return DG_OK;
}

/* pending[k]: the consumers of wrt[k] below top whose contributions are
 * still to come (each consumer once, whatever its number of uses) */
static void count_consumers(const dg_graph *g, int top, const int *wrt_of, int *pending) {
    for (int id = 0; id < top; id++) {
        const dg_node *y = dg_graph_node(g, id);
        for (int j = 0; j < y->n_in; j++) {
            int k = y->in[j]->id < top ? wrt_of[y->in[j]->id] : -1;
            bool seen = false;
            for (int p = 0; p < j; p++) seen |= y->in[p] == y->in[j];
            if (k >= 0 && !seen) pending[k]++;
        }
    }
}

/* ready's node for the gradient d of x (NULL: g's error), held to d's
 * dtype: a backward rule reading it expects grad_dtype(x) */
static dg_node *call_ready(dg_graph *g, dg_grad_ready_fn ready, void *arg, int k, const dg_node *x, dg_node *d) {
    dg_node *r = ready(g, k, d, arg);
    if (r && r->dtype != d->dtype)
        return dg__graph_fail(g, DG_ERR_INVALID, "dg_grad: the ready callback gave %s for the %s gradient of '%s'",
                              dg_dtype_name(r->dtype), dg_dtype_name(d->dtype), x->name);
    return r;
}

/* y's contributions are in: each wrt input of y with no consumer left has
 * its final gradient, handed to ready */
static dg_status consumer_done(dg_graph *g, const dg_node *y, const int *wrt_of, int *pending, dg_node **grad,
                               dg_grad_ready_fn ready, void *arg, bool *readied) {
    for (int j = 0; j < y->n_in; j++) {
        const dg_node *x = y->in[j];
        int k = wrt_of[x->id];
        bool seen = false;
        for (int p = 0; p < j; p++) seen |= y->in[p] == x;
        if (k < 0 || seen || --pending[k] > 0 || !grad[x->id]) continue;
        grad[x->id] = call_ready(g, ready, arg, k, x, grad[x->id]);
        readied[k] = true;
        if (!grad[x->id]) return dg_graph_status(g);
    }
    return DG_OK;
}

dg_status dg_grad(dg_graph *g, dg_node *loss, dg_node *const *wrt, int n, dg_node **grads) {
    return dg_grad_ex(g, loss, wrt, n, grads, NULL, NULL);
}

dg_status dg_grad_ex(dg_graph *g, dg_node *loss, dg_node *const *wrt, int n, dg_node **grads,
                     dg_grad_ready_fn ready, void *arg) {
    dg_status st = check_args(g, loss, wrt, n, grads);
    if (st != DG_OK) return st;
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "dg_grad");
    if (dg_node_numel(loss) != 1 || loss->dtype != DG_F32) {
        char b[96];
        dg__graph_fail(g, DG_ERR_SHAPE, "dg_grad: loss '%s' must be one float32 element, has shape %s",
                       loss->name, dg_shape_str(loss->shape, b, sizeof b));
        return DG_ERR_SHAPE;
    }
    int top = loss->id + 1;
    bool *needs = calloc((size_t)top, sizeof *needs);
    dg_node **grad = calloc((size_t)top, sizeof *grad);
    int *wrt_of = malloc((size_t)top * sizeof *wrt_of);     /* node id -> its first index in wrt, or -1 */
    int *pending = calloc((size_t)n + 1, sizeof *pending);
    bool *readied = calloc((size_t)n + 1, sizeof *readied);
    if (!needs || !grad || !wrt_of || !pending || !readied) {
        st = dg__fail(DG_ERR_OOM, "dg_grad: out of memory");
        goto done;
    }
    for (int id = 0; id < top; id++) wrt_of[id] = -1;
    for (int i = n - 1; i >= 0; i--)
        if (wrt[i]->id < top) wrt_of[wrt[i]->id] = i;
    if (ready) count_consumers(g, top, wrt_of, pending);
    /* needs[x]: x depends on some wrt node, so a gradient must flow into it */
    for (int i = 0; i < n; i++)
        if (wrt[i]->id < top) needs[wrt[i]->id] = true;
    for (int id = 0; id < top; id++) {
        dg_node *x = dg_graph_node(g, id);
        for (int j = 0; j < x->n_in && !needs[id]; j++) needs[id] = needs[x->in[j]->id];
    }
    grad[loss->id] = dg_const(g, "dloss", loss->shape, 1.0f);
    for (int id = top - 1; id >= 0 && st == DG_OK; id--) {
        dg_node *y = dg_graph_node(g, id);
        if (grad[id] && needs[id] && y->op != DG_OP_LEAF) st = backprop(g, y, grad[id], needs, grad);
        if (st == DG_OK && ready) st = consumer_done(g, y, wrt_of, pending, grad, ready, arg, readied);
    }
    if (st == DG_OK) st = dg_graph_status(g);
    /* a wrt with no consumer below the loss: the loss itself */
    for (int i = 0; i < n && st == DG_OK && ready; i++) {
        int id = wrt[i]->id;
        if (id < top && wrt_of[id] == i && !readied[i] && grad[id] &&
            !(grad[id] = call_ready(g, ready, arg, i, wrt[i], grad[id])))
            st = dg_graph_status(g);
    }
    for (int i = 0; i < n && st == DG_OK; i++) {
        dg_node *d = wrt[i]->id < top ? grad[wrt[i]->id] : NULL;
        grads[i] = d ? d : dg_cast(g, dg_const(g, "zero_grad", wrt[i]->shape, 0.0f), grad_dtype(wrt[i]));
        if (!grads[i]) st = dg_graph_status(g);
    }
done:
    free(needs);
    free(grad);
    free(wrt_of);
    free(pending);
    free(readied);
    return st;
}
