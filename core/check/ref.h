/* ref.h: a deliberately naive float64 interpreter of duograd graphs, the
 * reference that every backend is checked against. It shares no kernel code
 * with the backends: its index arithmetic is written independently, from
 * the definitions. */
#ifndef DG_TEST_REF_H
#define DG_TEST_REF_H

#include "../graph.h"

/* Evaluates nodes [0, upto) of g in float64. vals has one slot per node;
 * leaves must be filled by the caller (numel doubles; int32 labels as
 * doubles); every other slot is allocated here where it is NULL and reused
 * (overwritten) where an earlier evaluation left it. Optimizer updates
 * write their parameter and state leaves in place, as the backends do, so
 * evaluating a training step's graph again with the same vals runs its
 * next step. Free with ref_free. */
dg_status ref_eval(const dg_graph *g, int upto, double **vals);
/* ref_eval with each bf16 or f16 node's values rounded to its dtype once
 * computed, as the graph stores them (a cast's are rounded anyway): the
 * reference of a whole step in a 16-bit policy. Without it a 16-bit
 * convolution's output differs from the graph's by up to 2^-9 relatively
 * at every layer, and ResNet's batch norm at batch 2 turns that into a
 * step that no longer matches (a relative update error of 0.5 measured);
 * the single-op cases keep ref_eval, whose unrounded output is what their
 * bound of the output dtype's unit roundoff is written against. */
dg_status ref_eval_stored(const dg_graph *g, int upto, double **vals);
void ref_free(double **vals, int n);

/* The pool family (ref_pool.c), reached by ref_eval and case_ref_own_grad
 * through DG_OPS_POOL; DG_ERR_UNSUPPORTED for a node of another family.
 * ref_pool_eval: vals[n->id] from n's inputs; ref_pool_side: the side
 * output `side` of a pool from its owner's inputs; ref_pool_vjp: adds y's
 * contribution (adj[y->id]) into its input's adjoint. */
dg_status ref_pool_eval(const dg_node *n, double **vals);
dg_status ref_pool_side(const dg_node *side, double **vals, double *y);
dg_status ref_pool_vjp(const dg_node *y, double *const *val, double *const *adj);

#endif
