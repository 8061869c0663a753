/* op_table.h: the one table of op cases. It drives the CPU-vs-reference
 * checks, the finite-difference gradient checks, the GPU-vs-CPU checks and
 * the op coverage listing. Adding an op: add rows here. */
#ifndef DG_TEST_OP_TABLE_H
#define DG_TEST_OP_TABLE_H

#include "../graph.h"

typedef enum input_domain {
    DOM_ANY,     /* uniform in [-2, 2]                                   */
    DOM_AWAY0,   /* |x| in [0.2, 2], random sign: kinks stay out of reach */
    DOM_POS,     /* uniform in [0.5, 2]: log, sqrt, divisors, powers      */
    DOM_LABELS,  /* int32 class labels in [0, last dim of input 0)        */
} input_domain;

#define OP_CASE_MAX_IN 3

typedef struct op_case op_case;
struct op_case {
    const char  *name;
    dg_op        op;                 /* the op under test                */
    int          n_in;
    dg_shape     shape[OP_CASE_MAX_IN];
    input_domain dom[OP_CASE_MAX_IN];
    float        scalar;             /* scalar ops, leaky slope          */
    uint32_t     axes;
    bool         keepdims, ta, tb;
    int          perm[DG_MAX_DIMS];
    dg_shape     target;             /* reshape, broadcast_to            */
    /* composed graphs build themselves; NULL: the op alone */
    dg_node   *(*build)(dg_graph *g, dg_node *const *in, const op_case *c);
    double       tol;                /* float32 vs float64: max |err| / max |ref| */
};

extern const op_case dg_op_cases[];
extern const int     dg_n_op_cases;

/* Builds the case's output from its inputs. */
dg_node *op_case_build(dg_graph *g, dg_node *const *in, const op_case *c);

#endif
