/* ops.h: the op enum, its static facts (name, arity, role, attribute
 * family, inputs written in place, side outputs) and its dispatch
 * families. A node's cost is cost.h's.
 *
 * Adding an op: README.md's "Adding an op" and docs/ARCHITECTURE.md's
 * worked example (max_pool2d) list every file. Every switch over dg_op
 * names every op (no default:, -Werror=switch), so the compiler lists the
 * places a new op must be handled; tests/test_ops.c's coverage tests list
 * the rest (an op-case row, a float64 reference, a cost). */
#ifndef DG_OPS_H
#define DG_OPS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_op {
    DG_OP_LEAF,              /* input, parameter, optimizer state or constant */
    /* forward ops (differentiable) */
    DG_OP_ADD, DG_OP_SUB, DG_OP_MUL, DG_OP_DIV,   /* numpy broadcasting       */
    DG_OP_NEG,
    DG_OP_ADD_SCALAR, DG_OP_MUL_SCALAR, DG_OP_POW_SCALAR, /* dg_attr_scalar    */
    DG_OP_EXP, DG_OP_LOG, DG_OP_SQRT, DG_OP_ABS,
    DG_OP_RELU, DG_OP_LEAKY_RELU,                 /* dg_attr_scalar: slope    */
    DG_OP_SIGMOID, DG_OP_TANH, DG_OP_GELU,        /* gelu: tanh approximation */
    DG_OP_ERF,               /* the error function: exact GELU, x/2 (1 + erf(x/sqrt 2)), as ONNX exports it */
    /* [m,k]x[k,n] or [b,m,k]x[b,k,n]; dg_attr_matmul; the node's dtype is
     * its output's: f32, or its operands' bf16/f16 (dg_matmul_ex) */
    DG_OP_MATMUL,
    DG_OP_PERMUTE,           /* dg_attr_permute                               */
    DG_OP_RESHAPE,           /* a view: shares its input's storage            */
    DG_OP_SUM, DG_OP_MEAN,   /* dg_attr_reduce: axes (bit mask), keepdims     */
    DG_OP_BROADCAST_TO,
    DG_OP_SOFTMAX, DG_OP_LOG_SOFTMAX,  /* over the last axis; dg_attr_softmax:
                                          a scale, and the causal mask      */
    DG_OP_SOFTMAX_CE,        /* (logits [r,c], labels i32 [r]) -> mean loss [1];
                                side output: row log-sum-exp [r]             */
    DG_OP_SIDE_OUTPUT,       /* (owner): a side output of its owner's step    */
    /* convolutional networks: NCHW; dg_attr_conv (layout.h: dg_conv_dims_of) */
    DG_OP_CONV2D,            /* (x [N,C,H,W], w [O,C/groups,KH,KW]) -> [N,O,OH,OW] */
    DG_OP_MAX_POOL2D,        /* (x) -> [N,C,OH,OW]; side output: argmax, int32,
                                the index h*W+w in x's plane of each maximum */
    DG_OP_AVG_POOL2D,        /* (x) -> [N,C,OH,OW]; padding counts in the
                                divisor (KH*KW), as PyTorch's default      */
    DG_OP_BATCH_NORM,        /* (x [N,C,H,W] or [N,C], scale [C], shift [C]) -> x's
                                shape, normalised with the batch's statistics
                                over all axes but 1; dg_attr_norm; side
                                output: stats [2,C] (mean, 1/sqrt(var+eps)) */
    /* attention and language models */
    DG_OP_LAYER_NORM,        /* (x [..., D], scale [D], shift [D]) -> x's shape,
                                each row of D normalised with its own mean and
                                (biased) variance; dg_attr_norm (eps); side
                                output: stats [2, rows] (mean, 1/sqrt(var+eps)) */
    DG_OP_EMBEDDING,         /* (table [V, D], ids i32 [...]) -> [..., D]: row
                                ids[p] of table at position p; an id outside
                                [0, V) is refused by dg_plan_set and by the
                                CPU kernel (the GPU's gives a row of zeros) */
    DG_OP_ATTENTION,         /* (q, k, v [B,H,T,Dh]) -> [B,H,T,Dh]: fused
                                softmax(scale q k^T, causal mask) v, the score
                                matrix never stored; dg_attr_attention; side
                                output: lse [B,H,T], each row's natural
                                log-sum-exp of its unmasked scaled scores    */
    /* precision */
    DG_OP_CAST,              /* (x) -> x's shape in the node's dtype: f32 to
                                bf16 or f16 rounded to nearest even (inf and
                                NaN kept, overflow to inf), bf16 or f16 to
                                f32 exactly. Gradient: dy cast back to x's
                                dtype (a cast's gradient is float32: see
                                grad_dtype in autodiff.c)                   */
    /* data parallelism */
    DG_OP_ALL_REDUCE,        /* (x) -> x's shape: the mean of x over the
                                replicas of the backend's group (the same
                                graph on several devices, dg_backend_group);
                                a backend in no group is one replica: a copy.
                                Gradient: the all-reduce of dy             */
    /* backward ops: emitted by dg_grad where composing would waste work */
    DG_OP_RELU_BACKWARD,       /* (dy, x) -> dy * (x > 0)                     */
    DG_OP_LEAKY_RELU_BACKWARD, /* (dy, x) -> dy * (x > 0 ? 1 : slope)         */
    DG_OP_ABS_BACKWARD,        /* (dy, x) -> dy * sign(x)                     */
    DG_OP_SIGMOID_BACKWARD,    /* (dy, y) -> dy * y * (1 - y)                 */
    DG_OP_TANH_BACKWARD,       /* (dy, y) -> dy * (1 - y^2)                   */
    DG_OP_GELU_BACKWARD,       /* (dy, x) -> dy * gelu'(x)                    */
    DG_OP_SOFTMAX_BACKWARD,    /* (dy, y) -> y * (dy - sum(dy * y))           */
    DG_OP_LOG_SOFTMAX_BACKWARD,/* (dy, y) -> dy - exp(y) * sum(dy)            */
    DG_OP_SOFTMAX_CE_BACKWARD, /* (dloss [1], logits, labels, lse [r]) ->
                                  (exp(logits - lse) - onehot) * dloss / r    */
    DG_OP_CONV2D_BACKWARD_DATA,   /* (dy, w) -> dx [N,C,H,W]                 */
    DG_OP_CONV2D_BACKWARD_WEIGHT, /* (dy, x) -> dw [O,C/groups,KH,KW]         */
    DG_OP_MAX_POOL2D_BACKWARD,    /* (dy, argmax) -> dx: dy routed to each max */
    DG_OP_AVG_POOL2D_BACKWARD,    /* (dy) -> dx                               */
    DG_OP_BATCH_NORM_BACKWARD,    /* (dy, x, scale, stats) -> dx              */
    DG_OP_BATCH_NORM_BACKWARD_SCALE, /* (dy, x, stats) -> dscale [C] =
                                        sum over N,H,W of dy * xhat          */
    DG_OP_LAYER_NORM_BACKWARD,       /* (dy, x, scale, stats) -> dx          */
    DG_OP_LAYER_NORM_BACKWARD_SCALE, /* (dy, x, stats) -> dscale [D] = sum
                                        over rows of dy * xhat               */
    DG_OP_EMBEDDING_BACKWARD,  /* (dy [..., D], ids) -> dtable [V, D]: row v =
                                  sum of dy's rows at positions whose id is v,
                                  added in position order (the same bits every
                                  run, on every backend's own order); ids
                                  outside [0, V) add nothing                  */
    DG_OP_ATTENTION_BACKWARD,  /* (dout, q, k, v, out, lse) -> dq; side outputs
                                  dk, dv; dg_attr_attention; scratch: one
                                  float per row (B*H*T), sum(dout * out)      */
    /* optimizer updates: write their parameter and state in place (the
     * `writes` mask of their row); attributes: dg_attr_optim. Each reads
     * the gradient as g = dw + weight_decay w. Each may take one input
     * more than its row's n_in: a skip flag [1] (dg_optim_apply_ex);
     * where it is non-zero the update writes nothing (the step is skipped
     * on the device, with no host round trip). The three updates may take
     * a second: a gradient scale s [1] after the flag, read as
     * g = dw / s + weight_decay w (fp16's loss scale). */
    DG_OP_SGD_UPDATE,          /* (w, dw): w -= lr g                          */
    DG_OP_MOMENTUM_UPDATE,     /* (w, dw, v): v = mu v + g; w -= lr v         */
    DG_OP_ADAM_STEP,           /* (t [1]): t += 1                             */
    DG_OP_ADAM_UPDATE,         /* (w, dw, m, v, t): Adam with bias correction */
    /* dynamic loss scaling (autodiff.h, dg_found_inf): */
    DG_OP_FOUND_INF,           /* (found [1], x1..xk) -> [1], 1 <= k <= 7:
                                  found + 1 when any x holds an inf or NaN,
                                  else found; writes nothing                  */
    DG_OP_LOSS_SCALE_UPDATE,   /* (scale [1], clean [1], found [1]): found != 0:
                                  scale = max(scale / 2, DG_LOSS_SCALE_MIN),
                                  clean = 0; else clean += 1, and when clean
                                  reaches the growth interval (dg_attr_scalar)
                                  scale *= 2 where that is finite, clean = 0.
                                  Writes scale and clean                      */
    DG_OP_BATCH_NORM_RUNNING,  /* (running_mean [C], running_var [C], stats):
                                  r = (1 - momentum) r + momentum batch value,
                                  the variance unbiased; dg_attr_norm        */
    DG_OP_COUNT
} dg_op;

/* Dispatch families: case-label lists that partition the ops (ops.c's
 * family_of names each once: an op in two lists is a duplicate case there,
 * an op in none a -Werror=switch error). A backend dispatches a family to
 * one entry (cpu_backend.c, gpu_backend.cu), whose own switch names the
 * family's ops and lists the other families, so an op added to a family
 * is a compile error in that family's kernel files and nowhere else.
 * Write `case DG_OPS_POOL:` in a switch over dg_op. */
#define DG_OPS_UNARY            DG_OP_NEG: case DG_OP_ADD_SCALAR: case DG_OP_MUL_SCALAR: case DG_OP_POW_SCALAR: \
    case DG_OP_EXP: case DG_OP_LOG: case DG_OP_SQRT: case DG_OP_ABS: case DG_OP_RELU: case DG_OP_LEAKY_RELU:  \
    case DG_OP_SIGMOID: case DG_OP_TANH: case DG_OP_GELU: case DG_OP_ERF
#define DG_OPS_BINARY           DG_OP_ADD: case DG_OP_SUB: case DG_OP_MUL: case DG_OP_DIV
#define DG_OPS_UNARY_BACKWARD   DG_OP_RELU_BACKWARD: case DG_OP_LEAKY_RELU_BACKWARD: case DG_OP_ABS_BACKWARD:  \
    case DG_OP_SIGMOID_BACKWARD: case DG_OP_TANH_BACKWARD: case DG_OP_GELU_BACKWARD
#define DG_OPS_OPTIM            DG_OP_SGD_UPDATE: case DG_OP_MOMENTUM_UPDATE: case DG_OP_ADAM_STEP:            \
    case DG_OP_ADAM_UPDATE: case DG_OP_FOUND_INF: case DG_OP_LOSS_SCALE_UPDATE
#define DG_OPS_CONV             DG_OP_CONV2D: case DG_OP_CONV2D_BACKWARD_DATA: case DG_OP_CONV2D_BACKWARD_WEIGHT
#define DG_OPS_POOL             DG_OP_MAX_POOL2D: case DG_OP_AVG_POOL2D: case DG_OP_MAX_POOL2D_BACKWARD:        \
    case DG_OP_AVG_POOL2D_BACKWARD
/* the ops each backend dispatches one by one */
#define DG_OPS_UNGROUPED        DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_MATMUL: case DG_OP_PERMUTE:      \
    case DG_OP_RESHAPE: case DG_OP_SUM: case DG_OP_MEAN: case DG_OP_BROADCAST_TO: case DG_OP_SOFTMAX:          \
    case DG_OP_LOG_SOFTMAX: case DG_OP_SOFTMAX_CE: case DG_OP_BATCH_NORM: case DG_OP_LAYER_NORM:               \
    case DG_OP_EMBEDDING: case DG_OP_ATTENTION: case DG_OP_CAST: case DG_OP_ALL_REDUCE: case DG_OP_SOFTMAX_BACKWARD:            \
    case DG_OP_LOG_SOFTMAX_BACKWARD: case DG_OP_SOFTMAX_CE_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD:           \
    case DG_OP_BATCH_NORM_BACKWARD_SCALE: case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE: \
    case DG_OP_EMBEDDING_BACKWARD: case DG_OP_ATTENTION_BACKWARD: case DG_OP_BATCH_NORM_RUNNING

typedef enum dg_op_role {
    DG_ROLE_LEAF,
    DG_ROLE_FORWARD,   /* a user-facing, differentiable op  */
    DG_ROLE_BACKWARD,  /* only emitted by dg_grad            */
    DG_ROLE_UPDATE,    /* optimizer step, writes in place    */
    DG_ROLE_SIDE,      /* a side output, computed by the step of its owner */
} dg_op_role;

/* Which attribute struct of attrs.h an op's nodes carry. */
typedef enum dg_attr_kind {
    DG_ATTR_NONE,
    DG_ATTR_SCALAR,    /* dg_attr_scalar  */
    DG_ATTR_MATMUL,    /* dg_attr_matmul  */
    DG_ATTR_PERMUTE,   /* dg_attr_permute */
    DG_ATTR_REDUCE,    /* dg_attr_reduce  */
    DG_ATTR_OPTIM,     /* dg_attr_optim   */
    DG_ATTR_SIDE,      /* dg_attr_side    */
    DG_ATTR_CONV,      /* dg_attr_conv    */
    DG_ATTR_NORM,      /* dg_attr_norm    */
    DG_ATTR_SOFTMAX,   /* dg_attr_softmax */
    DG_ATTR_ATTENTION, /* dg_attr_attention */
} dg_attr_kind;

typedef struct dg_op_info {
    const char  *name;   /* "add", "matmul", ...                            */
    int          n_in;   /* number of inputs                                */
    dg_op_role   role;
    dg_attr_kind attr;
    unsigned     writes; /* bit i: the step writes input i in place (its
                            storage must be a parameter or optimizer state) */
    int          n_side; /* side outputs the op's kernel writes             */
} dg_op_info;

/* NULL (and the last error set) for a value that is no dg_op */
const dg_op_info *dg_op_info_get(dg_op op);
const char *dg_op_name(dg_op op);   /* "?" for a value that is no dg_op */

#ifdef __cplusplus
}
#endif
#endif
