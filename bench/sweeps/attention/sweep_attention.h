/* sweep_attention.h: what the attention sweep (sweep_attention.c: rows,
 * memory, timing), its graphs and reduced check (attention_graph.c) and its
 * report (sweep_attention_report.c) share. */
#ifndef DG_BENCH_SWEEP_ATTENTION_H
#define DG_BENCH_SWEEP_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check/attention_check.h"
#include "core/backend.h"
#include "core/plan.h"
#include "core/precision.h"

#define ATT_BATCH     16    /* B of every row (the PyTorch peer's)           */
#define ATT_VARIANT_T 1024  /* the head-size variants run at this T only     */
#define ATT_CHECK_B   1     /* the reduced check's shape: B, H, and T at most */
#define ATT_CHECK_H   2
#define ATT_CHECK_T   128

/* a case: the mask and the heads; case "full" and "causal" are B=16 H=8
 * Dh=64, the peer's configuration (bench/peers/torch_attention.py) */
typedef struct att_case {
    const char *name;
    int         heads, dh;
    bool        causal;
    bool        variant;   /* runs at ATT_VARIANT_T only */
} att_case;
#define ATT_N_CASES 6
/* a definition of another length conflicts with this declaration: a build error */
extern const att_case att_cases[ATT_N_CASES];

/* impl = BACKEND-FORM-PASS: cpu, gpu (node by node), gpu-graph (CUDA-graph
 * replay); composed (matmul, softmax_ex, matmul) or fused (dg_attention);
 * fwd (o) or fwdbwd (o, then dq, dk, dv of sum(o * w)) */
typedef struct att_backend { const char *name; bool gpu, replay; } att_backend;
enum { ATT_N_BACKENDS = 3, ATT_COMPOSED = 0, ATT_FUSED = 1, ATT_FWD = 0, ATT_FWDBWD = 1 };
#define ATT_N_IMPLS (ATT_N_BACKENDS * 4)
extern const att_backend att_backends[ATT_N_BACKENDS];
extern const char *const att_forms[2];  /* "composed", "fused" */
extern const char *const att_passes[2]; /* "fwd", "fwdbwd"     */
/* implementation index i = (backend * 2 + form) * 2 + pass */
void att_impl_name(int i, char *buf, size_t n);

/* FLOPs of a row, core/ops.c's convention (dg_attention_flops): 2 per
 * multiply-add of the products with the score matrix, forward 4 B H T^2 Dh,
 * backward 10 B H T^2 Dh, times (T+1)/(2T) when causal; the same count for
 * both forms (the composed form's matmuls compute the masked half too). */
double att_flops(int64_t b, int64_t h, int64_t t, int64_t dh, bool causal, bool backward);
/* the same from the core: dg_attention_flops of the fused graph's attention
 * (and attention_backward) nodes at d */
double att_core_flops(const att_dims *d, bool backward);

/* The tolerance of a row in precision p (the sampled rows and the reduced
 * check alike; attention_graph.c says why each is what it is) */
double att_tol(dg_precision p);
/* NULL where backend bb has form `fused` in precision p, else why not
 * (the row is skipped with it): the CPU has no TF32; the fused kernels'
 * products are fp32-accurate whatever TF32 (3xTF32 on the GPU). */
const char *att_refusal(const att_backend *bb, bool fused, dg_precision p);

/* one row's graph: fwd outputs o; fwdbwd outputs dq, dk, dv of sum(o * w).
 * In bf16 and fp16 (composed only) both products take their operands
 * through casts to the dtype and return float32 (dg_model_matmul, the
 * training step's policy): the softmax and the outputs stay float32, the
 * backward rounds the gradients reaching the products (autodiff.c). */
typedef struct att_graph {
    dg_graph *g;
    dg_node  *in[4];   /* q, k, v, w (w NULL for fwd) */
    dg_node  *out[3];
    int       n_in, n_out;
} att_graph;

/* the graph at d in precision p (no tensor memory); free ag->g, also
 * after a failure */
dg_status att_graph_build(att_graph *ag, const att_dims *d, bool fused, bool backward, dg_precision p);
/* n seeded floats uniform in [-1, 1), rounded to p's dtype in bf16 and
 * fp16 (the casts of q, k, v and dO are then exact, and the float64 side
 * starts from the values the kernels get) */
void      att_fill_uniform(float *x, int64_t n, uint64_t seed, dg_precision p);
/* the plan options of a row in precision p on backend bb */
dg_plan_opts att_plan_opts(const att_backend *bb, dg_precision p);

/* The reduced check of an implementation: the row's graph (form, pass, mask,
 * head size, precision) at B=1, H=2, T' on backend be, planned as the row
 * is (replay or not, TF32 or not), every output entry against
 * ref_eval_stored's float64 evaluation of it (which rounds where the graph
 * casts). */
typedef struct att_reduced_check {
    bool      done;
    int64_t   t;          /* the T' it ran at                         */
    dg_status st;
    char      why[256];   /* st's message                             */
    double    err;        /* the largest max|x - ref| / max|ref| of the outputs */
    double    ms, flops;  /* CPU: a warm run's time (the predictor's first figure) */
} att_reduced_check;
void att_reduced_run(att_reduced_check *rc, dg_backend *be, const att_backend *bb, const att_case *c, bool fused,
                     bool backward, int64_t t, dg_precision p);

#endif
