/* attrs.h: op attributes, one struct per op family, stored in a node's
 * opaque attribute block (dg_node.attr) and read only through these typed
 * accessors. An op's row in the op table (ops.c) names its family; the
 * readers check it, so reading the wrong family (or a NULL node) gives a
 * zeroed struct and sets the last error instead of reading garbage; the
 * builders' setters assert it, since only the core calls them.
 *
 * Adding a family: its struct, a DG_ATTR_* kind in ops.h, and one
 * DG__ATTR_ACCESSORS line below; no other op's attributes change. */
#ifndef DG_ATTRS_H
#define DG_ATTRS_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "graph.h"
#include "status_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* add_scalar, mul_scalar, pow_scalar: the scalar; leaky_relu and its
 * backward: the negative slope */
typedef struct dg_attr_scalar { float value; } dg_attr_scalar;

/* matmul: C = op(A) op(B), op = transpose where the flag is set */
typedef struct dg_attr_matmul { bool trans_a, trans_b; } dg_attr_matmul;

/* permute: output axis i is input axis perm[i] */
typedef struct dg_attr_permute { int perm[DG_MAX_DIMS]; } dg_attr_permute;

/* sum, mean: bit i of axes reduces axis i; keepdims keeps them as size 1 */
typedef struct dg_attr_reduce { uint32_t axes; bool keepdims; } dg_attr_reduce;

/* optimizer updates: momentum reads beta1 as its momentum; every rule
 * first takes g = dw + weight_decay w */
typedef struct dg_attr_optim { float lr, beta1, beta2, eps, weight_decay; } dg_attr_optim;

/* side_output: which of its owner's side outputs this node is */
typedef struct dg_attr_side { int index; } dg_attr_side;

/* conv2d and its backward ops, the pools and theirs: the window (a
 * convolution's is its weight's KH, KW), the step between windows, the
 * zeros added on each side (top and bottom, left and right), the spacing of
 * a window's taps (1: dense) and the channel groups (the pools: 1, 1).
 * Index 0 is the height, 1 the width. */
typedef struct dg_attr_conv { int kernel[2], stride[2], pad[2], dilation[2], groups; } dg_attr_conv;

/* batch_norm and its backward: eps inside the square root; the running
 * update: momentum, the weight of the new batch (PyTorch's convention), and
 * count, the values per channel (N*H*W) that make the variance unbiased */
typedef struct dg_attr_norm { float eps, momentum; int64_t count; } dg_attr_norm;

/* softmax, log_softmax and their backward ops: y = softmax(scale x) over
 * the last axis. causal: x read as matrices [..., R, C] (R the second-last
 * axis, 1 for a 1-D x), column j of row i is masked when j > i: its
 * probability is exactly 0 and a row with every column masked is all 0
 * (log_softmax is never masked: dg_log_softmax builds scale 1, causal off). */
typedef struct dg_attr_softmax { float scale; bool causal; } dg_attr_softmax;

/* attention and its backward: scores = scale q k^T; causal: key j is masked
 * for query i when j > i */
typedef struct dg_attr_attention { float scale; bool causal; } dg_attr_attention;

/* Internal: whether n's op carries the attribute family `kind`; sets the
 * last error when it does not. */
static inline bool dg__attr_family_is(const dg_node *n, dg_attr_kind kind, const char *fam) {
    const dg_op_info *info = n ? dg_op_info_get(n->op) : NULL;
    if (info && info->attr == kind) return true;
    if (!n) dg__fail(DG_ERR_INVALID, "dg_attr_%s_of: NULL node", fam);
    else dg__fail(DG_ERR_INVALID, "dg_attr_%s_of: node '%s' (%s) has no %s attributes", fam, n->name,
                  dg_op_name(n->op), fam);
    return false;
}

/* dg_attr_<fam>_of(node) -> the struct; dg__attr_<fam>_set(node, value) */
#define DG__ATTR_ACCESSORS(fam, KIND)                                                         \
    static_assert(sizeof(dg_attr_##fam) <= DG_ATTR_BYTES, "attributes exceed DG_ATTR_BYTES"); \
    static inline dg_attr_##fam dg_attr_##fam##_of(const dg_node *n) {                       \
        dg_attr_##fam a;                                                                      \
        memset(&a, 0, sizeof a);                                                              \
        if (dg__attr_family_is(n, KIND, #fam)) memcpy(&a, n->attr, sizeof a);                 \
        return a;                                                                             \
    }                                                                                         \
    static inline void dg__attr_##fam##_set(dg_node *n, dg_attr_##fam a) {                    \
        assert(dg_op_info_get(n->op)->attr == KIND);                                          \
        memcpy(n->attr, &a, sizeof a);                                                        \
    }

DG__ATTR_ACCESSORS(scalar, DG_ATTR_SCALAR)
DG__ATTR_ACCESSORS(matmul, DG_ATTR_MATMUL)
DG__ATTR_ACCESSORS(permute, DG_ATTR_PERMUTE)
DG__ATTR_ACCESSORS(reduce, DG_ATTR_REDUCE)
DG__ATTR_ACCESSORS(optim, DG_ATTR_OPTIM)
DG__ATTR_ACCESSORS(side, DG_ATTR_SIDE)
DG__ATTR_ACCESSORS(conv, DG_ATTR_CONV)
DG__ATTR_ACCESSORS(norm, DG_ATTR_NORM)
DG__ATTR_ACCESSORS(softmax, DG_ATTR_SOFTMAX)
DG__ATTR_ACCESSORS(attention, DG_ATTR_ATTENTION)

/* The scalar of a node whose op has one, 0 for the others (and NULL): lets
 * one elementwise kernel serve neg, exp, ... and the scalar ops alike. */
static inline float dg_attr_scalar_or0(const dg_node *n) {
    const dg_op_info *info = n ? dg_op_info_get(n->op) : NULL;
    return info && info->attr == DG_ATTR_SCALAR ? dg_attr_scalar_of(n).value : 0.0f;
}

#ifdef __cplusplus
}
#endif
#endif
