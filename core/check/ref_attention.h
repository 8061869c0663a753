/* ref_attention.h: the float64 definitions of the attention family's ops
 * (layer_norm, embedding, attention and their backward ops), called by
 * ref.c's evaluator. vals[id] holds node id's values in double. */
#ifndef DG_REF_ATTENTION_H
#define DG_REF_ATTENTION_H

#include "../graph.h"

void ref_layer_norm(const dg_node *n, double **vals, double *y);
/* stats [2, rows]: means, then 1/sqrt(var + eps) */
void ref_layer_norm_stats(const dg_node *ln, double **vals, double *stats);
void ref_layer_norm_backward(const dg_node *n, double **vals, double *y, bool scale_grad);
void ref_embedding(const dg_node *n, double **vals, double *y);
void ref_embedding_backward(const dg_node *n, double **vals, double *y);
/* o (or NULL) and lse (or NULL) of an attention node */
void ref_attention(const dg_node *n, double **vals, double *o, double *lse);
/* dq, dk, dv (each may be NULL) of an attention_backward node; its lse and
 * out inputs are not read: P is recomputed from q and k, an independent
 * check of the forward's saved values */
void ref_attention_backward(const dg_node *n, double **vals, double *dq, double *dk, double *dv);
/* The same products from raw values: n supplies the scale and the mask, qs
 * the shape of q, k, v and dout; adds into dq, dk, dv (each may be NULL). */
void ref_attention_vjp(const dg_node *n, dg_shape qs, const double *q, const double *k, const double *v,
                       const double *dout, double *dq, double *dk, double *dv);

#endif
