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
    DOM_LABELS,  /* int32 class labels in [0, last dim of input 0); an
                    embedding's ids: in [0, rows of its table)           */
    DOM_DISTINCT, /* a shuffle of n values evenly spaced in [-2, 2]: no
                     two within 4/n, so no max-pool window holds a tie, nor
                     one that a finite-difference step could make        */
    /* the numerical edges (the range table); lo, hi: the case's range[i];
     * elements 0 and 1 of the input take the range's ends */
    DOM_RANGE,   /* uniform in [lo, hi]                                   */
    DOM_DECADES, /* 10^e, e uniform in [lo, hi]: magnitudes over decades  */
    DOM_DECADES_SIGNED, /* the same with a random sign                   */
    DOM_EDGE_LOGITS,    /* each row (last axis) [hi, -hi, 0, then uniform in
                           [-hi, hi]]: one logit far above the rest, one far
                           below, as a saturated classifier produces      */
} input_domain;

/* bounds of a DOM_RANGE / DOM_DECADES / DOM_EDGE_LOGITS input */
typedef struct input_range { double lo, hi; } input_range;

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

/* A case's place in the ops sweep (bench/sweeps/ops/sweep_ops.c). */
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
    float        scalar;             /* scalar ops, leaky slope, batch_norm and
                                        layer_norm eps, softmax and attention
                                        scale                              */
    bool         causal;             /* softmax and attention              */
    uint32_t     axes;
    bool         keepdims, ta, tb;
    int          perm[DG_MAX_DIMS];
    dg_shape     target;             /* reshape, broadcast_to            */
    dg_conv2d_opts conv;             /* conv2d (a third input: the bias) */
    dg_pool2d_opts pool;             /* max_pool2d, avg_pool2d           */
    dg_dtype     dtype;              /* matmul: its operands' (the float32
                                        inputs cast to it first); cast: the
                                        dtype cast to and back from          */
    /* composed graphs build themselves; NULL: the op alone */
    dg_node   *(*build)(dg_graph *g, dg_node *const *in, const op_case *c);
    double       tol;                /* float32 vs float64: max |err| / max |ref| */
    double       grad_tol;           /* precision table: the gradients' bound
                                        (the forward's is tol); 0: tol       */
    op_sweep     sweep;
    /* range table only (dg_range_cases): the inputs' bounds, and the floor
     * of the forward check (cmp_f32_floor): outputs smaller than
     * floor * max |ref| are held to tol * floor * max |ref| in absolute
     * terms, the others to tol relative to themselves. Gradients are held
     * to tol against their largest element, or with grad_vs_dy against the
     * incoming gradient's (max |w|) where that is larger: where the op's
     * Jacobian nearly cancels (w - sum(w y) of a saturated softmax,
     * 1 - y^2), the float32 rounding of y decides the small difference. */
    input_range  range[OP_CASE_MAX_IN];
    double       floor;
    bool         grad_vs_dy;
};

extern const op_case dg_op_cases[];
extern const int     dg_n_op_cases;

/* The numerical edges a real training run reaches: logits of +-100 and
 * +-1000, exp and log near overflow and underflow, magnitudes of 1e-37 to
 * 1e38. Checked on every backend against the float64 reference; the
 * tolerances are bounds from float32 rounding, justified row by row. Kept
 * out of dg_op_cases: finite differences, the GPU-vs-CPU NMSE check and the
 * ops sweep assume the [-2, 2] domains. */
extern const op_case dg_range_cases[];
extern const int     dg_n_range_cases;

/* Precision: casts and bf16/f16 products, on every backend against the
 * float64 reference of the same graph (which rounds where the graph casts);
 * tolerances from the dtypes' unit roundoff (op_cases_dtype.c). Kept out of
 * dg_op_cases: a finite difference cannot see through a rounding. */
extern const op_case dg_dtype_cases[];
extern const int     dg_n_dtype_cases;

/* Builds the case's output from its inputs. */
dg_node *op_case_build(dg_graph *g, dg_node *const *in, const op_case *c);
/* The case's input shapes at sweep size N; false when the case is not
 * swept or N is not a positive multiple of OP_SWEEP_ROW. */
bool     op_case_shapes_at(const op_case *c, long long N, dg_shape *out);

#endif
