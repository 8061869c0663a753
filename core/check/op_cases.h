/* op_cases.h: the one table of op cases. It drives the CPU-vs-reference
 * checks, the finite-difference gradient checks, the GPU-vs-CPU checks, the
 * op coverage listing (bench --list-ops) and the ops sweep with its charts
 * (bench --sweep ops). Adding an op: add rows here. */
#ifndef DG_CHECK_OP_CASES_H
#define DG_CHECK_OP_CASES_H

#include "../graph.h"

typedef enum input_domain {
    DOM_ANY,     /* uniform in [-2, 2]                                   */
    DOM_AWAY0,   /* |x| in [0.2, 2], random sign: kinks stay out of reach */
    DOM_POS,     /* uniform in [0.5, 2]: log, sqrt, divisors, powers      */
    DOM_LABELS,  /* int32 class labels in [0, last dim of input 0)        */
} input_domain;

#define OP_CASE_MAX_IN 3

/* How the ops sweep grows a case to N elements (N a multiple of
 * OP_SWEEP_ROW), from the row's own input shapes:
 *   FLAT:   inputs shaped like input 0 become [N]
 *   ROWS:   input 0 becomes [N/ROW, ROW]; inputs shaped like it the same;
 *           a 1-D input as long as input 0's last axis becomes [ROW]
 *           (a broadcast row); labels become [N/ROW]
 *   SQUARE: input 0 becomes [s, N/s], s = round(sqrt(N)) */
typedef enum op_scale { OP_SCALE_NONE, OP_SCALE_FLAT, OP_SCALE_ROWS, OP_SCALE_SQUARE } op_scale;

#define OP_SWEEP_ROW 1024

/* A case's place in the ops sweep (bench/sweep_ops.c). */
typedef struct op_sweep {
    const char *name;          /* the sweep's `case` column; NULL: not swept */
    op_scale    scale;
    dg_op       bwd;           /* the backward node timed (the last of this op
                                  in the gradient); DG_OP_LEAF: none          */
    bool        chart_bw;      /* drawn in the ops bandwidth chart            */
    bool        chart_speedup; /* drawn in the ops speedup chart              */
} op_sweep;

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
    op_sweep     sweep;
};

extern const op_case dg_op_cases[];
extern const int     dg_n_op_cases;

/* Builds the case's output from its inputs. */
dg_node *op_case_build(dg_graph *g, dg_node *const *in, const op_case *c);
/* The case's input shapes at sweep size N; false when the case is not
 * swept or N is not a positive multiple of OP_SWEEP_ROW. */
bool     op_case_shapes_at(const op_case *c, long long N, dg_shape *out);

#endif
