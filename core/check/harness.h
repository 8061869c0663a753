/* harness.h: runs an op case on a backend or on the float64 reference, and
 * compares results. Shared by the Criterion suites and the bench's ops
 * sweep (dg_check). */
#ifndef DG_TEST_HARNESS_H
#define DG_TEST_HARNESS_H

#include "../autodiff.h"
#include "../plan.h"
#include "op_cases.h"

/* The case's graph: inputs -> out; loss = sum(out * w) with random w; the
 * gradients of loss with respect to every float input. */
typedef struct case_graph {
    const op_case *c;
    dg_graph      *g;
    dg_node       *in[OP_CASE_MAX_IN], *out, *w, *loss;
    dg_node       *grad[OP_CASE_MAX_IN];   /* NULL for label inputs      */
    float         *in_val[OP_CASE_MAX_IN]; /* host values (labels: i32) */
    float         *w_val;
    uint64_t       seed;
} case_graph;

/* Results of one run: forward output and each input's gradient. */
typedef struct case_result {
    int64_t n_out, n_grad[OP_CASE_MAX_IN];
    float  *out, *grad[OP_CASE_MAX_IN];
} case_result;

typedef struct case_ref {
    double *out, *grad[OP_CASE_MAX_IN];
} case_ref;

/* worst disagreement of a float32 result against a reference */
typedef struct cmp_stats {
    double  max_rel;     /* max |x - ref| / max |ref|          */
    double  nmse;        /* sum (x - ref)^2 / sum ref^2         */
    int64_t worst;       /* index of the largest |x - ref|     */
    double  got, want;   /* values at `worst`                  */
} cmp_stats;

dg_status case_graph_new(case_graph *cg, const op_case *c, uint64_t seed);
/* The same case with other input shapes (the ops sweep's, op_case_shapes_at) */
dg_status case_graph_new_at(case_graph *cg, const op_case *c, const dg_shape *shape, uint64_t seed);
void      case_graph_free(case_graph *cg);
/* Builds a plan on be, uploads the inputs, runs once, downloads. */
dg_status case_run(case_graph *cg, dg_backend *be, case_result *r);
/* The same, keeping the plan for the caller (to time its steps): *plan is
 * the caller's to free, also on failure (NULL when none was made). */
dg_status case_run_planned(case_graph *cg, dg_backend *be, dg_plan **plan, case_result *r);
void      case_result_free(case_result *r);
/* Same graph in float64 (forward and the symbolic gradient graph). */
dg_status case_ref_run(const case_graph *cg, case_ref *r);
void      case_ref_free(case_ref *r);
/* Central finite differences of the reference loss w.r.t. input i. */
double   *case_finite_diff(const case_graph *cg, int i);

/* C[m,n] = op(A) op(B) in float64, row-major, packed (lda = ta ? m : k ...) */
void ref_sgemm(bool ta, bool tb, int m, int n, int k, const float *A, const float *B, double *C);

/* max_rel: max |x - ref| / max |ref| (error.h's measure without a scale:
 * INFINITY for any difference from an all-zero reference) */
cmp_stats cmp_f32(const float *x, const double *ref, int64_t n);
/* the same, the denominator floored at DG_CHECK_ABS_FLOOR * scale (error.h) */
cmp_stats cmp_f32_scaled(const float *x, const double *ref, int64_t n, double scale);
/* The scale of a case's gradients: the largest |reference gradient| over
 * all its inputs. The gradients of one loss share its weights w and its
 * units: an input whose gradient is zero (a max that never picks it, a
 * product with a zero factor) is measured against its siblings' size. */
double    case_grad_scale(const case_graph *cg, const case_ref *ref);
/* the worst max_rel of a result's output and gradients against the
 * reference (the gradients with case_grad_scale) */
double    case_max_rel_err(const case_graph *cg, const case_result *r, const case_ref *ref);
/* per element: |x - ref| / max(|ref|, floor * max |ref|); floor 1 is
 * cmp_f32's max_rel, a small floor holds every element above it to its own
 * relative error. NaN or infinity where ref is finite: INFINITY. */
cmp_stats cmp_f32_floor(const float *x, const double *ref, int64_t n, double floor);
cmp_stats cmp_f64(const double *x, const double *ref, int64_t n);
cmp_stats cmp_f32_f32(const float *x, const float *ref, int64_t n);

#endif
