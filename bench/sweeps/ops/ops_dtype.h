/* ops_dtype.h: an op case of the ops sweep in a precision, and the
 * tolerance its rows are checked to against the float64 reference
 * (ops_dtype.c states the bound). */
#ifndef DG_BENCH_OPS_DTYPE_H
#define DG_BENCH_OPS_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/check/harness.h"
#include "core/precision.h"

/* The case as the sweep builds it in precision p: fp32 (and tf32) the row
 * itself; bf16 and fp16 its float inputs cast to the dtype, the op on
 * 2-byte storage, its result cast back to float32 (the float64 reference
 * rounds the same float32 inputs at the same casts). */
op_case ops_case_in(const op_case *oc, dg_precision p);

/* Whether the case has a row in precision p, forward (bwd false) or
 * backward, judged from its graph at the row's own small shapes; false
 * with the reason in why (n bytes): the graph refuses the op in the dtype
 * (the softmax cross-entropy takes float32 alone), or its
 * backward node reads no value of the dtype (the fp32 row's node). */
bool ops_case_has(const op_case *oc, dg_precision p, bool bwd, char *why, size_t n);

/* The op node a forward row times: the case's output, or in bf16 and
 * fp16 the node under its cast back to float32. */
const dg_node *ops_timed_forward(const case_graph *cg);
/* The node a backward row times: the last of the case's sweep.bwd op in
 * the gradient, after the loss; NULL where there is none (add's gradient
 * passes dy through) */
const dg_node *ops_timed_backward(const case_graph *cg);
/* whether node n reads or writes dtype t */
bool ops_node_in(const dg_node *n, dg_dtype t);

/* The reduction length of node n: the terms each output of a sum adds, a
 * softmax row's length; 1 for an elementwise op. */
long long ops_reduction_length(const dg_node *n);

/* The check's bound on max |err| / max |ref| (ops_dtype.c): in dtype t of
 * the direction bwd (false: the forward output, compared element by
 * element above OPS_FLOOR of the largest in bf16 and fp16; true: every
 * input's gradient against the case's gradient scale) of a case whose
 * forward op is `op`, its timed node reducing over n terms. */
double ops_tol(dg_dtype t, dg_op op, long long n, bool bwd);
#define OPS_FLOOR (1.0 / 16)

/* The forward's and the gradients' errors of a run against the reference
 * (err[0], err[1]), compared as ops_tol bounds them for dtype t */
void ops_errors(const case_graph *cg, const case_result *res, const case_ref *ref, dg_dtype t, double err[2]);

#endif
