/* cost.c: what a node's kernel must do (FLOPs and bytes) and the working
 * memory it needs: facts of a node (its shape, inputs and attributes), so
 * they live beside the graph rather than in the op table (ops.c), which
 * knows ops alone. */
#include "cost.h"

#include <stdbool.h>
#include <stddef.h>

#include "layout.h"
#include "status_internal.h"

/* The arithmetic of n's kernel: per output element, per input element
 * (reductions, the losses, the scale gradients) or from the node's
 * dimensions (products, windows, attention). One case per op: a new op is
 * a -Werror=switch error here until it has its rule. */
/* an update's gradient scale (dg_optim_apply_ex, the input after its skip
 * flag) divides each of its `out` gradient elements */
static double update_unscale(const dg_node *n, double out) {
    return n->n_in > dg_op_info_get(n->op)->n_in + 1 ? out : 0;
}

static double node_flops(const dg_node *n) {
    const double out = (double)dg_node_numel(n), in0 = n->n_in > 0 ? (double)dg_node_numel(n->in[0]) : 0;
    switch (n->op) {
    case DG_OP_LEAF: case DG_OP_RESHAPE: case DG_OP_SIDE_OUTPUT:
    case DG_OP_PERMUTE: case DG_OP_BROADCAST_TO: case DG_OP_COUNT:
    case DG_OP_EMBEDDING: case DG_OP_CAST: /* a copy, or a conversion per element */
        return 0;
    case DG_OPS_BINARY: case DG_OPS_UNARY: case DG_OP_ADAM_STEP: case DG_OP_LOSS_SCALE_UPDATE:
    case DG_OP_ALL_REDUCE: /* an add per element and replica: counted as one */
        return out;
    case DG_OP_SUM: case DG_OP_MEAN:
        return in0;
    case DG_OPS_UNARY_BACKWARD:
        return 2 * out;
    case DG_OP_SGD_UPDATE:
        return 2 * out + update_unscale(n, out);
    case DG_OP_LOG_SOFTMAX_BACKWARD: case DG_OP_SOFTMAX_CE_BACKWARD:
        return 3 * out;
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: case DG_OP_SOFTMAX_BACKWARD:
        return 4 * out;
    case DG_OP_MOMENTUM_UPDATE:
        return 4 * out + update_unscale(n, out);
    case DG_OP_SOFTMAX_CE:
        return 4 * in0;
    case DG_OP_ADAM_UPDATE:
        return 11 * out + update_unscale(n, out);
    case DG_OP_BATCH_NORM_BACKWARD_SCALE: case DG_OP_LAYER_NORM_BACKWARD_SCALE:
        return 3 * in0;  /* per input element: (x - mean) * invstd * dy, summed */
    case DG_OP_BATCH_NORM: case DG_OP_LAYER_NORM:
        return 7 * out;  /* mean and variance passes, then scale and shift (per channel or row) */
    case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD:
        return 10 * out; /* two sums, then the combination */
    case DG_OP_BATCH_NORM_RUNNING:
        return 8 * out;  /* per channel */
    case DG_OP_FOUND_INF: { /* a finiteness test per element of each x */
        double tests = 0;
        for (int i = 1; i < n->n_in; i++) tests += (double)dg_node_numel(n->in[i]);
        return tests;
    }
    case DG_OP_EMBEDDING_BACKWARD: /* an add per dy element */
    case DG_OP_MAX_POOL2D_BACKWARD: /* an add per max */
        return in0;
    case DG_OP_AVG_POOL2D_BACKWARD:
        return out;
    case DG_OP_MATMUL:
        return 2.0 * out * (double)dg_gemm_dims_of(n).k;
    case DG_OPS_CONV: {
        /* each form is the same multiply-adds: every output of the forward
         * against every tap of its window */
        dg_conv_dims d = dg_conv_dims_of(n);
        return 2.0 * (double)d.n * (double)d.o * (double)d.cols * (double)(d.cg * d.kh * d.kw);
    }
    case DG_OP_MAX_POOL2D: case DG_OP_AVG_POOL2D: {
        dg_conv_dims d = dg_conv_dims_of(n);
        return out * (double)(d.kh * d.kw); /* a compare or add per tap */
    }
    case DG_OP_ATTENTION: case DG_OP_ATTENTION_BACKWARD:
        return dg_attention_flops(n);
    }
    return 0;
}

dg_cost dg_node_cost(const dg_node *n) {
    dg_cost c = {0, 0};
    if (!n) {
        dg__fail(DG_ERR_INVALID, "dg_node_cost: NULL node");
        return c;
    }
    const dg_op_info *info = dg_op_info_get(n->op);
    if (!info || n->op == DG_OP_LEAF || n->op == DG_OP_RESHAPE || n->op == DG_OP_SIDE_OUTPUT) return c;
    for (int i = 0; i < n->n_in; i++) {
        double b = (double)dg_node_bytes(n->in[i]);
        c.bytes += (info->writes >> i & 1u) ? 2 * b : b; /* read, then written back */
    }
    if (!info->writes) c.bytes += (double)dg_node_bytes(n);
    for (int i = 0; i < n->n_side; i++) c.bytes += (double)dg_node_bytes(n->side[i]);
    c.flops = node_flops(n);
    return c;
}

/* The multiply-adds of the products with the score matrix, two FLOPs each:
 * forward QK^T and PV (2 products of T*T*Dh per head), backward QK^T again,
 * dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q (5); the causal mask
 * leaves (T+1)/(2T) of the scores. Softmax's exponentials are not counted. */
double dg_attention_flops(const dg_node *n) {
    const dg_shape s = n->in[n->op == DG_OP_ATTENTION ? 0 : 1]->shape;
    double b = (double)s.d[0], h = (double)s.d[1], t = (double)s.d[2], dh = (double)s.d[3];
    double products = n->op == DG_OP_ATTENTION ? 2 : 5;
    double kept = dg_attr_attention_of(n).causal ? (t + 1) / (2 * t) : 1;
    return 2 * products * b * h * t * t * dh * kept;
}

size_t dg_node_scratch_bytes(const dg_node *n) {
    if (!n) {
        dg__fail(DG_ERR_INVALID, "dg_node_scratch_bytes: NULL node");
        return 0;
    }
    switch (n->op) {
    case DG_OP_ATTENTION_BACKWARD: /* one float per query row */
        return (size_t)dg_node_numel(n) / (size_t)n->shape.d[3] * sizeof(float);
    case DG_OPS_CONV: {
        dg_conv_dims d = dg_conv_dims_of(n);
        return (size_t)dg_conv_scratch_floats(&d, n->op == DG_OP_CONV2D_BACKWARD_WEIGHT) * sizeof(float);
    }
    /* the others work in their inputs and output alone */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_POOL:
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_MATMUL: case DG_OP_PERMUTE: case DG_OP_RESHAPE:
    case DG_OP_SUM: case DG_OP_MEAN: case DG_OP_BROADCAST_TO: case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
    case DG_OP_SOFTMAX_CE: case DG_OP_BATCH_NORM: case DG_OP_LAYER_NORM: case DG_OP_EMBEDDING: case DG_OP_ATTENTION:
    case DG_OP_CAST: case DG_OP_ALL_REDUCE: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
    case DG_OP_SOFTMAX_CE_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
    case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD:
    case DG_OP_BATCH_NORM_RUNNING: case DG_OP_COUNT:
        return 0;
    }
    return 0;
}
