/* graph_internal.h: what the builders (graph.c, graph_conv.c, autodiff.c,
 * optim.c, nn/) share to make nodes and report errors on a graph. Not
 * installed: a program using duograd builds graphs through graph.h. */
#ifndef DG_GRAPH_INTERNAL_H
#define DG_GRAPH_INTERNAL_H

#include <stdbool.h>

#include "graph.h"
#include "status_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* check_inputs and float32 for every input (graph.c). */
bool dg__check_f32_inputs(dg_graph *g, const char *op, int n_in, dg_node *const *in);
/* check_inputs, and every input f32, bf16 or f16, all of one dtype
 * (graph.c): the ops that store low precision and compute in float32 */
bool dg__check_float_inputs(dg_graph *g, const char *op, int n_in, dg_node *const *in);
/* Create a node of `op` after the caller has validated shapes. */
dg_node *dg__node_new(dg_graph *g, dg_op op, dg_shape s, int n_in, dg_node *const *in);
/* Give `owner` its next side output, of shape s, named "<owner>.<what>".
 * Returns the side node (NULL on error). */
dg_node *dg__side_new(dg_graph *g, dg_node *owner, dg_shape s, const char *what);
/* Whether n is a node of g (never sets an error). */
bool dg__graph_owns(const dg_graph *g, const dg_node *n);
/* Refuse to work on g, which is in an error state: returns its status with
 * "<who>: the graph is in an error state: <its first error>". */
dg_status dg__graph_refuse(const dg_graph *g, const char *who);
/* Put g in an error state with a message (the last error even when g is
 * NULL); returns NULL. */
dg_node *dg__graph_fail(dg_graph *g, dg_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
