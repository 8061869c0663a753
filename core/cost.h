/* cost.h: what running a node takes: the least work its kernel must do
 * (FLOPs and bytes) and the working memory it needs beside its inputs and
 * output. Facts of a node, read from its shape, inputs and attributes (the
 * op table in ops.h knows ops alone). */
#ifndef DG_COST_H
#define DG_COST_H

#include <stddef.h>

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The least work a node's kernel must do: arithmetic (a transcendental
 * counts 1, a multiply-add 2) and bytes (every input and output, side
 * outputs included, read or written once). The bench's throughput columns
 * and the profiler's bound classification read these. */
typedef struct dg_cost { double flops, bytes; } dg_cost;
dg_cost dg_node_cost(const dg_node *n);   /* zeros for NULL */
/* The FLOPs of an attention or attention_backward node's products (cost.c
 * says which); the attention sweep counts the same. */
double dg_attention_flops(const dg_node *n);

/* The working memory a node's kernel needs beside its inputs and output
 * (the im2col columns of a convolution, layout.h), which the plan places in
 * its arena for that step only (dg_step.scratch). 0 for most ops and NULL. */
size_t dg_node_scratch_bytes(const dg_node *n);

#ifdef __cplusplus
}
#endif
#endif
