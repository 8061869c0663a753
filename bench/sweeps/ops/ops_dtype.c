/* ops_dtype.c: the ops sweep's cases in bf16 and fp16, and the bound each
 * row is checked to (ops_dtype.h).
 *
 * In bf16 and fp16 the forward op reads and writes the dtype, and so does
 * its backward node where its kernels take 16 bits: the gradient of a
 * 16-bit node is 16-bit (docs/ARCHITECTURE.md), read with the forward's
 * 16-bit values (relu's and gelu's x, mul's other operand, exp's y).
 * softmax's backward reads dy widened to float32 and the 16-bit y, and
 * writes float32. A backward node that reads and writes float32 alone
 * (the sums' broadcast: the graph widens their 16-bit dy first) is the
 * fp32 row's node and has no row of its own in the dtype.
 *
 * The bound, max |err| / max |ref| against the float64 reference of the
 * same graph from the same rounded inputs (the casts of the float32 inputs
 * round alike on both sides, so the inputs' roundings cancel):
 *
 *   T32(n) = OPS_TOL + sqrt(n) u32      u32 = 2^-24, n the timed node's
 *                                       reduction length (1 elementwise)
 *   fp32   forward and gradients: T32(n)
 *   bf16, fp16 (u = 2^-8, 2^-11, the dtype's unit roundoff)
 *          forward, element by element above OPS_FLOOR (1/16) of the
 *          largest output, absolute below it: u + T32(n) / OPS_FLOOR
 *          gradients, against the case's gradient scale: k u + T32(n)
 *
 * T32 is the float32 arithmetic, which a 16-bit row does as its fp32 row
 * does: OPS_TOL is what long float32 reductions lose beyond the tests'
 * 2e-6 at the sweep's sizes, and sqrt(n) u32 the growth of a float32 sum's
 * rounding errors (independent, of mean zero) over n terms: 1.9e-6 for a
 * softmax row or a row sum (n = 1024), 1.5e-5 for a column sum of 64K
 * rows (64M elements). The kernels accumulate in float32 or double, never
 * in the dtype, so u enters once per rounding and never times n: a kernel
 * that summed in bf16 would be off by about n u.
 *
 * The forward stores its result once in the dtype: u relative to each
 * element. Element by element (as the precision table, op_cases_dtype.c)
 * a store that truncates (up to 2u) or reads a neighbour fails where the
 * largest output alone could hide it below u; dividing T32 by the floor
 * holds the small outputs to it in absolute terms.
 *
 * The gradients: the reference's own backward (ref_grad.h) is exact where
 * the graph's rounds. The graph rounds dy, the float32 loss weights, where
 * it enters the 16-bit op's output (its gradient is 16-bit): u on every
 * 16-bit case. Where the backward node computes a 16-bit result (gelu's,
 * mul's and exp's products, add_bcast's column sum of the broadcast
 * operand) it rounds it once more as it stores it: u; where it copies dy
 * (relu, a permute, a same-shape add's operands) or writes float32 (the
 * sums' broadcast, softmax) it does not. And it reads the forward's values
 * as stored: an input both sides hold (relu's x, mul's b) costs nothing
 * more, exp's dy y reads the rounded y: u; softmax's y (dy - sum(dy y))
 * reads it twice: u |dx| from the first y, u y max|dy| through the row's
 * sum, which is within twice the largest gradient in a row of random
 * logits: 3u. */
#include "sweeps/ops/ops_dtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define OPS_TOL 1e-5 /* long reductions lose a little more than the tests' tolerance */
#define U32 0x1p-24

/* the op on its float inputs cast to c->dtype (labels as they are), its
 * result cast back to float32 for the comparison */
static dg_node *build_lowp(dg_graph *g, dg_node *const *in, const op_case *c) {
    dg_node *lp[OP_CASE_MAX_IN];
    for (int i = 0; i < c->n_in; i++) lp[i] = c->dom[i] == DOM_LABELS ? in[i] : dg_cast(g, in[i], c->dtype);
    op_case plain = *c;
    plain.build = NULL;
    return dg_cast(g, op_case_build(g, lp, &plain), DG_F32);
}

op_case ops_case_in(const op_case *oc, dg_precision p) {
    op_case c = *oc;
    dg_dtype t = dg_precision_dtype(p);
    if (t != DG_F32) {
        c.dtype = t;
        c.build = build_lowp;
    }
    return c;
}

const dg_node *ops_timed_forward(const case_graph *cg) {
    return cg->c->build == build_lowp ? cg->out->in[0] : cg->out;
}

const dg_node *ops_timed_backward(const case_graph *cg) {
    const dg_node *last = NULL;
    for (int id = cg->loss->id + 1; cg->c->sweep.bwd != DG_OP_LEAF && id < dg_graph_size(cg->g); id++)
        if (dg_graph_node(cg->g, id)->op == cg->c->sweep.bwd) last = dg_graph_node(cg->g, id);
    return last;
}

bool ops_node_in(const dg_node *n, dg_dtype t) {
    bool any = n->dtype == t;
    for (int i = 0; i < n->n_in; i++) any |= n->in[i]->dtype == t;
    return any;
}

bool ops_case_has(const op_case *oc, dg_precision p, bool bwd, char *why, size_t n) {
    op_case c = ops_case_in(oc, p);
    case_graph cg;
    dg_status st = case_graph_new(&cg, &c, 1);
    bool has = st == DG_OK;
    if (!has) snprintf(why, n, "%s", dg_last_error()); /* the graph's first error */
    const dg_node *b = has && bwd ? ops_timed_backward(&cg) : NULL;
    if (b && !ops_node_in(b, c.dtype)) {
        has = false;
        snprintf(why, n, "its backward node (%s) reads and writes float32 alone (its kernels take float32: the "
                 "graph widens a 16-bit gradient before it): the fp32 row times it", dg_op_name(b->op));
    }
    case_graph_free(&cg);
    return has;
}

long long ops_reduction_length(const dg_node *n) {
    const dg_node *x = n->in[0];
    switch (n->op) {
    case DG_OP_SUM: case DG_OP_MEAN: return dg_node_numel(x) / dg_node_numel(n);
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: case DG_OP_SOFTMAX_CE:
        return x->shape.d[x->shape.ndim - 1];
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD: /* (dy, y): y's rows */
        return n->in[1]->shape.d[n->in[1]->shape.ndim - 1];
    case DG_OP_SOFTMAX_CE_BACKWARD: /* (dloss, logits, labels, lse) */
        return n->in[1]->shape.d[n->in[1]->shape.ndim - 1];
    default: return 1;
    }
}

/* the unit roundoff of a 16-bit dtype's stored values; 0 for float32,
 * whose roundings T32 holds */
static double unit_roundoff(dg_dtype t) {
    switch (t) {
    case DG_BF16: return 0x1p-8;
    case DG_F16:  return 0x1p-11;
    case DG_F32: case DG_I32: break;
    }
    return 0;
}

/* the units u a case's gradients carry, by its forward op (the header
 * says why): dy's rounding, the result's where the backward stores a
 * computed 16-bit value, and those of the rounded forward values read */
static double grad_roundings(dg_op op) {
    switch (op) {
    case DG_OP_EXP: return 1 + 1 + 1;
    case DG_OP_SOFTMAX: return 1 + 3;
    case DG_OP_GELU: case DG_OP_MUL: return 1 + 1;
    /* relu, permutes, sums: dy copied or widened; add copies dy, and
     * add_bcast's bias copy sums it into float32 (dg_sum_ex) */
    default: return 1;
    }
}

double ops_tol(dg_dtype t, dg_op op, long long n, bool bwd) {
    double t32 = OPS_TOL + sqrt((double)(n > 1 ? n : 1)) * U32, u = unit_roundoff(t);
    if (u == 0) return t32;
    return bwd ? grad_roundings(op) * u + t32 : u + t32 / OPS_FLOOR;
}

void ops_errors(const case_graph *cg, const case_result *res, const case_ref *ref, dg_dtype t, double err[2]) {
    err[0] = t == DG_F32 ? cmp_f32(res->out, ref->out, res->n_out).max_rel
                         : cmp_f32_floor(res->out, ref->out, res->n_out, OPS_FLOOR).max_rel;
    /* each gradient against the largest of all of them (harness.h) */
    double scale = case_grad_scale(cg, ref);
    err[1] = 0;
    for (int i = 0; i < cg->c->n_in; i++)
        if (ref->grad[i]) err[1] = fmax(err[1], cmp_f32_scaled(res->grad[i], ref->grad[i], res->n_grad[i], scale).max_rel);
}
