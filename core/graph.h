/* graph.h: tensors as graph nodes, and the builders that create them.
 *
 * A dg_graph is a static computation graph. Nodes are created in
 * topological order (a builder only takes existing nodes), so creation order
 * is a valid execution order. Every builder infers the output shape; given
 * incompatible shapes it returns NULL and puts the graph in an error state
 * (dg_graph_status) whose message names the op and the shapes. Builders
 * given a NULL input also return NULL, so a chain of builders can be written
 * without checks and the first error is the one reported.
 *
 * Tensors are row-major, 1 to 4 dimensions, float32 (labels: int32).
 *
 * Misuse is refused, never a crash: a NULL graph or node, a node of another
 * graph, a shape of more than DG_MAX_DIMS dimensions, a dimension < 1 or more
 * than DG_MAX_NUMEL elements, an unknown enum value. Functions returning a
 * status return DG_ERR_INVALID (DG_ERR_SHAPE for shapes) with a message for
 * dg_last_error(); the others return the value each one names below and set
 * the same message. */
#ifndef DG_GRAPH_H
#define DG_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MAX_DIMS   4
#define DG_MAX_INPUTS 8   /* 7 gradients and a count: dg_found_inf_n */
#define DG_ALL_AXES   0xFu   /* reduction mask selecting every axis */
/* The most elements a tensor may have (4 TiB of float32): element and byte
 * counts, and the backends' offsets, stay far from overflowing. */
#define DG_MAX_NUMEL  ((int64_t)1 << 40)

/* A tensor's element type. F32: float32; I32: class labels and ids;
 * BF16 (bfloat16: float32's exponent, 8 bits of significand) and F16
 * (IEEE binary16: 5-bit exponent, 11 bits of significand), made by dg_cast.
 * Low-precision storage, float32 arithmetic: dg_matmul/dg_matmul_ex (float32
 * accumulation; output f32 or the operands' dtype), the elementwise unary
 * and binary ops, dg_sum/dg_mean, the softmax family (not the
 * cross-entropy) and dg_layer_norm read bf16 or f16, widen to float32,
 * compute, and round the result to nearest even on store; their output has
 * their input's dtype (a binary op of f32 and bf16 or f16: f32; bf16 with
 * f16: refused). Softmax and layer-norm statistics are float32. Every other
 * op takes float32 (labels and ids: I32) and refuses the rest by name
 * (docs/ARCHITECTURE.md has the table). A node's gradient has its dtype,
 * but a cast's, which is float32 (autodiff.c). */
typedef enum dg_dtype { DG_F32, DG_I32, DG_BF16, DG_F16 } dg_dtype;

/* "f32", "i32", "bf16", "f16"; "?" for a value out of range */
const char *dg_dtype_name(dg_dtype t);
/* bytes of one element: 4 or 2; 0 for a value out of range */
size_t      dg_dtype_size(dg_dtype t);

typedef struct dg_shape {
    int     ndim;              /* 1..DG_MAX_DIMS */
    int64_t d[DG_MAX_DIMS];
} dg_shape;

#define DG__NARGS(...) DG__NARGS_(__VA_ARGS__, 4, 3, 2, 1, 0)
#define DG__NARGS_(a, b, c, d, n, ...) n
/* DG_SHAPE(128, 784) -> a dg_shape of two dimensions. C++ has no compound
 * literal: there it is the aggregate dg_shape{2, {128, 784}} (C++11), whose
 * list-initialisation refuses a narrowing size (a size_t or double
 * variable: cast it to int64_t). */
#ifdef __cplusplus
#define DG_SHAPE(...) (dg_shape{DG__NARGS(__VA_ARGS__), {__VA_ARGS__}})
#else
#define DG_SHAPE(...) ((dg_shape){.ndim = DG__NARGS(__VA_ARGS__), .d = {__VA_ARGS__}})
#endif

typedef enum dg_leaf_kind {
    DG_LEAF_NONE,    /* not a leaf: computed by an op                        */
    DG_LEAF_INPUT,   /* fed by the caller before each run (dg_plan_set)      */
    DG_LEAF_PARAM,   /* trainable, persistent, initialised from `init`       */
    DG_LEAF_STATE,   /* optimizer state, persistent, initialised from `init` */
    DG_LEAF_CONST,   /* persistent, initialised from `init`, never written   */
} dg_leaf_kind;

typedef enum dg_init_kind { DG_INIT_FILL, DG_INIT_UNIFORM, DG_INIT_NORMAL, DG_INIT_DATA } dg_init_kind;

/* How a persistent leaf is initialised: FILL with a; UNIFORM in [a, b);
 * NORMAL with mean a, standard deviation b; DATA: a copy of host floats,
 * the leaf's values in row-major order (an imported model's weights,
 * core/onnx/onnx.h), whose address seed holds (made by dg_init_data: the
 * struct keeps its four fields, so every positional initializer stands);
 * the caller keeps them alive and unchanged while any plan or float64
 * reference of the graph may read them. The same seed gives the same
 * values on every backend (they are drawn on the host, then uploaded). */
typedef struct dg_init {
    dg_init_kind kind;
    float        a, b;
    uint64_t     seed;
} dg_init;

/* DG_INIT_DATA reading numel floats at data */
static inline dg_init dg_init_data(const float *data) {
    dg_init i;
    i.kind = DG_INIT_DATA;
    i.a = i.b = 0.0f;
    i.seed = (uint64_t)(uintptr_t)data;
    return i;
}

/* Op attributes live in one opaque block per node; each op family reads
 * and writes it only through its typed accessor in attrs.h (dg_attr_*_of),
 * so adding an op with new attributes never touches another op's. */
#define DG_ATTR_BYTES 64

/* A node may own side outputs: tensors its kernel writes beside its main
 * output for a later reader (a backward op), such as softmax cross-entropy's
 * row log-sum-exp, or batch norm's mean and inverse std. Each is a node of op
 * DG_OP_SIDE_OUTPUT whose input is the owner; it is computed by the owner's
 * step, and the plan keeps it alive until its last reader. */
#define DG_MAX_SIDE 2

typedef struct dg_node {
    int              id;       /* index in the graph, = creation order */
    dg_op            op;
    dg_dtype         dtype;
    dg_leaf_kind     leaf;
    dg_shape         shape;
    int              n_in;
    struct dg_node  *in[DG_MAX_INPUTS];
    int              n_side;
    struct dg_node  *side[DG_MAX_SIDE]; /* side outputs, in the op's order  */
    uint64_t         attr[DG_ATTR_BYTES / 8]; /* see attrs.h          */
    dg_init          init;     /* persistent leaves only               */
    struct dg_node  *view_of;  /* non-NULL: the output is this node's storage
                                  (reshape views, in-place updates)   */
    char             name[32];
} dg_node;

typedef struct dg_graph dg_graph;

dg_graph *dg_graph_new(void);              /* NULL when out of memory */
void      dg_graph_free(dg_graph *g);
/* The graph's first error (DG_OK while healthy), whose message it makes
 * the last error again; DG_ERR_INVALID for NULL. */
dg_status dg_graph_status(const dg_graph *g);
int       dg_graph_size(const dg_graph *g);        /* -1 for NULL          */
dg_node  *dg_graph_node(const dg_graph *g, int id); /* NULL: no such node  */

/* shape helpers */
/* The product of the dimensions; -1 for a shape of 0 or more than
 * DG_MAX_DIMS dimensions, a negative dimension, or a product beyond int64. */
int64_t     dg_shape_numel(dg_shape s);
/* false also for a shape of more than DG_MAX_DIMS dimensions */
bool        dg_shape_eq(dg_shape a, dg_shape b);
/* "[2,3,4]"; "[5 dims]" for a dimension count out of range; "" for a NULL
 * or empty buffer */
const char *dg_shape_str(dg_shape s, char *buf, size_t n);
int64_t     dg_node_numel(const dg_node *n);       /* -1 for NULL          */
size_t      dg_node_bytes(const dg_node *n);       /* 0 for NULL           */

/* leaves: NULL (and the graph in error) for an invalid shape or init kind */
dg_node *dg_input(dg_graph *g, const char *name, dg_shape s);
dg_node *dg_input_i32(dg_graph *g, const char *name, dg_shape s);
dg_node *dg_param(dg_graph *g, const char *name, dg_shape s, dg_init init);
dg_node *dg_state(dg_graph *g, const char *name, dg_shape s, dg_init init);
dg_node *dg_const(dg_graph *g, const char *name, dg_shape s, float value);
/* a constant holding data (numel(s) floats, row-major; DG_INIT_DATA's
 * lifetime rule) */
dg_node *dg_const_data(dg_graph *g, const char *name, dg_shape s, const float *data);

/* elementwise, numpy-style broadcasting for binary ops */
dg_node *dg_add(dg_graph *g, dg_node *a, dg_node *b);
dg_node *dg_sub(dg_graph *g, dg_node *a, dg_node *b);
dg_node *dg_mul(dg_graph *g, dg_node *a, dg_node *b);
dg_node *dg_div(dg_graph *g, dg_node *a, dg_node *b);
dg_node *dg_neg(dg_graph *g, dg_node *a);
dg_node *dg_add_scalar(dg_graph *g, dg_node *a, float s);
dg_node *dg_mul_scalar(dg_graph *g, dg_node *a, float s);
dg_node *dg_pow_scalar(dg_graph *g, dg_node *a, float s);
dg_node *dg_exp(dg_graph *g, dg_node *a);
dg_node *dg_log(dg_graph *g, dg_node *a);
dg_node *dg_sqrt(dg_graph *g, dg_node *a);
dg_node *dg_abs(dg_graph *g, dg_node *a);
dg_node *dg_relu(dg_graph *g, dg_node *a);
dg_node *dg_leaky_relu(dg_graph *g, dg_node *a, float slope);
dg_node *dg_sigmoid(dg_graph *g, dg_node *a);
dg_node *dg_tanh(dg_graph *g, dg_node *a);
dg_node *dg_gelu(dg_graph *g, dg_node *a);
dg_node *dg_erf(dg_graph *g, dg_node *a); /* erf(x): its gradient 2/sqrt(pi) exp(-x^2) is composed */

/* The mean of a over the replicas of the group its plan's backend belongs
 * to (dg_backend_group: the same graph planned on several devices, each
 * with its own a); outside a group, a itself. */
dg_node *dg_all_reduce(dg_graph *g, dg_node *a);

/* matmul: a [m,k] (or [k,m] if trans_a), b [k,n] (or [n,k] if trans_b) -> [m,n].
 * Batched: a [B,m,k] with b [B,k,n]; a [B,H,m,k] with b [B,H,k,n] (the
 * leading axes folded into one batch of B*H products); a [B,m,k] with a
 * 2-D b is folded into one [B*m,k]x[k,n] product. */
/* a and b both float32, or both bf16, or both f16 (products and sums in
 * float32); the output is float32 */
dg_node *dg_matmul(dg_graph *g, dg_node *a, dg_node *b, bool trans_a, bool trans_b);
/* dg_matmul with the output in dtype `out`: DG_F32, or the operands' own
 * bf16 or f16 (the float32 sums rounded to nearest even as they are
 * stored: half the bytes of a float32 output; cuBLAS writes a 16-bit C
 * with 32-bit compute). Anything else is refused naming both dtypes. Its
 * gradient is 16-bit, as every 16-bit node's. */
dg_node *dg_matmul_ex(dg_graph *g, dg_node *a, dg_node *b, bool trans_a, bool trans_b, dg_dtype out);
/* a in dtype `to`: float32 to bf16 or f16 (rounded to nearest even), or
 * back; a cast to a's own dtype is a, with no node added */
dg_node *dg_cast(dg_graph *g, dg_node *a, dg_dtype to);
/* a's axes in the order perm gives, in a's dtype (f32, bf16 or f16) */
dg_node *dg_permute(dg_graph *g, dg_node *a, const int *perm);
dg_node *dg_transpose(dg_graph *g, dg_node *a);       /* swaps the last two axes */
dg_node *dg_reshape(dg_graph *g, dg_node *a, dg_shape s);

/* sums and means over the axes set in `axes`, in a's dtype (the sums in
 * float32 or wider, the result rounded once as it is stored) */
dg_node *dg_sum(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims);
dg_node *dg_mean(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims);
/* dg_sum with the result stored in dtype `out`: a's own, or DG_F32 for a
 * bf16 or f16 a (a 16-bit gradient summed into a float32 one, as a bias
 * copy's is: no rounding to 16 bits and back, and no f16 overflow of a
 * sum whose terms fit). Anything else is refused naming both dtypes. */
dg_node *dg_sum_ex(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims, dg_dtype out);
dg_node *dg_broadcast_to(dg_graph *g, dg_node *a, dg_shape s);

dg_node *dg_softmax(dg_graph *g, dg_node *a);
/* softmax(scale * a) over the last axis; causal: a read as matrices
 * [..., R, C], column j of row i gets probability exactly 0 when j > i */
dg_node *dg_softmax_ex(dg_graph *g, dg_node *a, float scale, bool causal);
dg_node *dg_log_softmax(dg_graph *g, dg_node *a);
/* logits [r, c] (any rank: rows = all but the last axis), labels int32 with
 * r elements in [0, c); returns the mean over rows of -log softmax[label],
 * computed through log-sum-exp, shape [1]. The labels are data:
 * dg_plan_set refuses one outside [0, c) with a message, and the CPU
 * kernel refuses it however it reached the plan. */
dg_node *dg_softmax_cross_entropy(dg_graph *g, dg_node *logits, dg_node *labels);

/* Backward ops for a step written by hand (graph_backward.c): the nodes
 * dg_grad makes for these gradients, for a program that calls the backward
 * kernels itself. dy and x [same shape] -> dy where x > 0, else 0, x's
 * shape (DG_ERR_SHAPE when the shapes differ). */
dg_node *dg_relu_backward(dg_graph *g, dg_node *dy, dg_node *x);
/* loss: a dg_softmax_cross_entropy node (DG_ERR_INVALID otherwise), dloss
 * its gradient, one element (DG_ERR_SHAPE otherwise) -> the gradient for
 * its logits, their shape: dloss (softmax(logits) - onehot(labels)) / rows. */
dg_node *dg_softmax_cross_entropy_backward(dg_graph *g, dg_node *dloss, dg_node *loss);

/* convolutional networks (NCHW), built in graph_conv.c */

/* zeros are the defaults: stride 1, no padding, dilation 1, one group */
typedef struct dg_conv2d_opts { int stride[2], pad[2], dilation[2], groups; } dg_conv2d_opts;
/* kernel (window) is required; a stride of 0 means the window's size;
 * padding at most half the window, so no window lies wholly in padding */
typedef struct dg_pool2d_opts { int kernel[2], stride[2], pad[2]; } dg_pool2d_opts;

/* x [N,C,H,W], w [O,C/groups,KH,KW], bias [O] or NULL -> [N,O,OH,OW] with
 * OH = (H + 2 pad - dilation (KH - 1) - 1) / stride + 1 (likewise OW).
 * groups = C = O is a depthwise convolution. x and w both f32, both bf16
 * or both f16 (DG_ERR_INVALID for a mix): the output has their dtype, the
 * sums run in float32; bias, if any, is f32 (a 16-bit output plus it is
 * f32). dg_grad's backward ops take the same dtype and return float32
 * gradients (autodiff.c). */
dg_node *dg_conv2d(dg_graph *g, dg_node *x, dg_node *w, dg_node *bias, dg_conv2d_opts o);
/* The options a convolution node was built with: a conv2d's, or the forward
 * convolution's of its backward-data and backward-weight nodes; zeros for
 * any other node (and NULL). The kernel's size is in w's shape. */
dg_conv2d_opts dg_node_conv2d_opts(const dg_node *n);
dg_node *dg_max_pool2d(dg_graph *g, dg_node *x, dg_pool2d_opts o);
dg_node *dg_avg_pool2d(dg_graph *g, dg_node *x, dg_pool2d_opts o);
dg_node *dg_global_avg_pool2d(dg_graph *g, dg_node *x);   /* [N,C,H,W] -> [N,C] */
dg_node *dg_flatten(dg_graph *g, dg_node *x);             /* [N,...] -> [N, rest], a view */
/* Training-mode batch normalisation of x [N,C,H,W] or [N,C] per channel
 * with the batch's mean and (biased) variance: scale * (x - mean) /
 * sqrt(var + eps) + shift; scale, shift [C]. */
dg_node *dg_batch_norm(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, float eps);
/* The running statistics update of batch_norm node bn: running_mean and
 * running_var [C] (state leaves, written in place) move towards the batch's
 * mean and unbiased variance by momentum in (0, 1]. Its output is a view of
 * running_mean: a plan that outputs it runs the update. */
dg_node *dg_batch_norm_running(dg_graph *g, dg_node *bn, dg_node *running_mean, dg_node *running_var,
                               float momentum);
/* Evaluation-mode batch normalisation with given statistics (running_mean,
 * running_var [C]), composed of elementwise ops. */
dg_node *dg_batch_norm_eval(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, dg_node *running_mean,
                            dg_node *running_var, float eps);

/* attention and language models, built in graph_attention.c */

/* x [..., D] normalised per row of D: scale * (x - mean) / sqrt(var + eps)
 * + shift, the variance biased; scale, shift [D]. */
dg_node *dg_layer_norm(dg_graph *g, dg_node *x, dg_node *scale, dg_node *shift, float eps);
/* table [V, D], ids int32 [...] (at most 3 axes) -> [..., D]. The ids are
 * data: dg_plan_set refuses ids outside [0, V) with a message. */
dg_node *dg_embedding(dg_graph *g, dg_node *table, dg_node *ids);
/* Fused scaled dot-product attention of q, k, v [B,H,T,Dh] (the same
 * shape, 1 <= Dh <= DG_ATTENTION_MAX_HEAD): softmax(scale q k^T) v with
 * key j masked for query i when causal and j > i -> [B,H,T,Dh]. q, k, v
 * all float32, all bf16 or all f16 (a mix is refused naming the dtypes);
 * the output in their dtype (16-bit: float32 softmax and sums, the
 * probabilities rounded to the dtype before they multiply v, as
 * FlashAttention does), the saved log-sum-exp float32; its gradients dq,
 * dk, dv in the inputs' dtype too (dg_grad casts them to float32). */
#define DG_ATTENTION_MAX_HEAD 128
dg_node *dg_attention(dg_graph *g, dg_node *q, dg_node *k, dg_node *v, float scale, bool causal);

#ifdef __cplusplus
}
#endif
#endif
