/* ref_grad.h: the float64 reference's own backward. It differentiates an op
 * case's forward graph with vector-Jacobian products written from each op's
 * mathematical definition, sharing nothing with dg_grad's rules
 * (core/autodiff.c) or the backward ops, so a wrong gradient rule cannot
 * be reproduced by the reference it is checked against. It costs one
 * forward and one backward pass, so the ops sweep can use it at any size. */
#ifndef DG_CHECK_REF_GRAD_H
#define DG_CHECK_REF_GRAD_H

#include "harness.h"

/* The gradient of cg's loss (sum(out * w)) with respect to every float
 * input: grad[i] gets numel(input i) doubles, allocated here, the caller's
 * to free; label (int32) inputs get NULL. Only the forward part of cg->g
 * (nodes up to cg->loss) is read. On failure every grad[i] is NULL and the
 * last error names the cause: DG_ERR_UNSUPPORTED names an op without a
 * vector-Jacobian product here. out (NULL: not wanted) gets the float64
 * forward output the backward started from (numel(cg->out) doubles, the
 * caller's to free; NULL on failure). */
dg_status case_ref_own_grad(const case_graph *cg, double *grad[OP_CASE_MAX_IN], double **out);

#endif
