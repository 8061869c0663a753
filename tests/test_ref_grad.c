/* test_ref_grad.c: the float64 reference's own backward (case_ref_own_grad)
 * against central finite differences of the float64 forward (which proves
 * its vector-Jacobian products), against dg_grad's gradient graph evaluated
 * in float64 (which checks dg_grad's rules against an independent
 * backward), and at the ops sweep's sizes, where it must stay about as
 * cheap as the gradient graph and agree with it; and max pooling at a tie,
 * which finite differences cannot see. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/check/ref.h"
#include "core/check/ref_grad.h"
#include "test_util.h"

/* The parameter is the row's index: Criterion may start each test in a
 * fresh process image, where the parent's pointers are not valid. */
static struct criterion_test_params case_indices(void) {
    static int idx[256];
    for (int i = 0; i < dg_n_op_cases; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)dg_n_op_cases);
}

static void own_grad_free(double *grad[OP_CASE_MAX_IN]) {
    for (int i = 0; i < OP_CASE_MAX_IN; i++) free(grad[i]);
}

/* Every float input gets a gradient, every label input NULL. */
static void assert_grad_slots(const case_graph *cg, double *const grad[OP_CASE_MAX_IN]) {
    for (int i = 0; i < cg->c->n_in; i++) {
        bool labels = cg->c->dom[i] == DOM_LABELS;
        cr_assert_eq(grad[i] == NULL, labels, "%s: input %d (%s) %s a gradient", cg->c->name, i,
                     labels ? "labels" : "float", grad[i] ? "has" : "lacks");
    }
}

/* The loss of cg's forward graph in float64, with element j of input i
 * moved by h (labels as doubles, as the reference reads them). */
static double loss_moved(const case_graph *cg, int i, int64_t j, double h) {
    const int upto = cg->loss->id + 1;
    double **vals = calloc((size_t)upto, sizeof *vals), loss = NAN;
    cr_assert_not_null(vals);
    for (int k = 0; k < cg->c->n_in; k++) {
        int64_t n = dg_node_numel(cg->in[k]);
        double *v = vals[cg->in[k]->id] = malloc((size_t)n * sizeof *v);
        cr_assert_not_null(v);
        for (int64_t e = 0; e < n; e++)
            v[e] = cg->c->dom[k] == DOM_LABELS ? (double)((const int32_t *)cg->in_val[k])[e] : cg->in_val[k][e];
    }
    int64_t n_out = dg_node_numel(cg->w);
    double *w = vals[cg->w->id] = malloc((size_t)n_out * sizeof *w);
    cr_assert_not_null(w);
    for (int64_t e = 0; e < n_out; e++) w[e] = cg->w_val[e];
    vals[cg->in[i]->id][j] += h;
    if (ref_eval(cg->g, upto, vals) == DG_OK) loss = vals[cg->loss->id][0];
    ref_free(vals, upto);
    free(vals);
    return loss;
}

/* Central differences take two forward passes per element, so an input of
 * more than FD_POINTS elements is checked at FD_POINTS of them, picked by a
 * stride coprime to its size: they spread over every axis and every
 * broadcast position rather than one row or column. */
#define FD_POINTS 64

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

static int64_t fd_stride(int64_t n) {
    int64_t p = 7919; /* far from any axis length: the points wander */
    while (gcd(p, n) != 1) p += 2;
    return p % n;
}

ParameterizedTestParameters(ref_grad, matches_finite_differences) { return case_indices(); }
ParameterizedTest(int *row, ref_grad, matches_finite_differences) {
    const op_case *c = &dg_op_cases[*row];
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    double *own[OP_CASE_MAX_IN];
    ASSERT_OK(case_ref_own_grad(&cg, own, NULL));
    assert_grad_slots(&cg, own);
    for (int i = 0; i < c->n_in; i++) {
        if (!own[i]) continue;
        int64_t n = dg_node_numel(cg.in[i]), points = n < FD_POINTS ? n : FD_POINTS;
        int64_t stride = n <= FD_POINTS ? 1 : fd_stride(n);
        double got[FD_POINTS], want[FD_POINTS];
        for (int64_t k = 0; k < points; k++) {
            int64_t j = k * stride % n;
            double h = 1e-6 * fmax(1.0, fabs((double)cg.in_val[i][j]));
            got[k] = own[i][j];
            want[k] = (loss_moved(&cg, i, j, h) - loss_moved(&cg, i, j, -h)) / (2 * h);
        }
        char what[64];
        snprintf(what, sizeof what, "own backward vs finite differences, input %d", i);
        ASSERT_CLOSE(cmp_f64(got, want, points), 1e-6, what, c->name, seed);
    }
    own_grad_free(own);
    case_graph_free(&cg);
}

/* Two float64 evaluations of the same derivative differ by rounding: sums
 * in another order, and the gradient graph's constants, which are float32
 * op attributes (mean's 1/count: 2^-24 relative). A wrong rule is off by
 * far more. */
#define AGREE_TOL 1e-6

/* dg_grad's gradient graph, run by the float64 interpreter (ref), against
 * the own backward: each compared gradient must agree. */
static void assert_graph_grad_agrees(const case_graph *cg, const case_ref *ref, double *const own[OP_CASE_MAX_IN]) {
    for (int i = 0; i < cg->c->n_in; i++) {
        cr_assert_eq(own[i] == NULL, cg->grad[i] == NULL, "%s: input %d: own and graph gradients differ in presence",
                     cg->c->name, i);
        if (!own[i]) continue;
        char what[64];
        snprintf(what, sizeof what, "dg_grad graph vs own backward, input %d", i);
        ASSERT_CLOSE(cmp_f64(ref->grad[i], own[i], dg_node_numel(cg->in[i])), AGREE_TOL, what, cg->c->name,
                     cg->seed);
    }
}

ParameterizedTestParameters(ref_grad, dg_grad_rules_agree) { return case_indices(); }
ParameterizedTest(int *row, ref_grad, dg_grad_rules_agree) {
    const op_case *c = &dg_op_cases[*row];
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, test_seed()));
    double *own[OP_CASE_MAX_IN];
    ASSERT_OK(case_ref_own_grad(&cg, own, NULL));
    case_ref ref;
    ASSERT_OK(case_ref_run(&cg, &ref));
    assert_graph_grad_agrees(&cg, &ref, own);
    case_ref_free(&ref);
    own_grad_free(own);
    case_graph_free(&cg);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* The ops sweep checks backward rows with the own backward at up to 64M
 * elements, where it already runs the gradient graph in float64
 * (case_ref_run): the own backward must cost about as much, a forward and a
 * backward pass, nothing that grows with a row's or an axis's length. The
 * bound is relative, so it holds in a sanitizer build and on a loaded
 * machine alike; the two agree at this size too (sweep shapes from
 * op_case_shapes_at, as bench/sweeps/ops/sweep_ops.c makes them). */
#define SWEEP_N ((long long)1 << 18) /* a size of the sweep (also in --quick) */
#define SWEEP_MAX_RATIO 4.0

static void check_at_sweep_size(const char *name) {
    const op_case *c = NULL;
    for (int i = 0; i < dg_n_op_cases; i++)
        if (!strcmp(dg_op_cases[i].name, name)) c = &dg_op_cases[i];
    cr_assert_not_null(c, "no case %s in the table", name);
    dg_shape shape[OP_CASE_MAX_IN];
    cr_assert(op_case_shapes_at(c, SWEEP_N, shape), "%s is not swept at %lld elements", name, SWEEP_N);
    case_graph cg;
    ASSERT_OK(case_graph_new_at(&cg, c, shape, test_seed()));
    double *own[OP_CASE_MAX_IN];
    case_ref ref;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ASSERT_OK(case_ref_own_grad(&cg, own, NULL));
    double own_s = seconds_since(&t0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ASSERT_OK(case_ref_run(&cg, &ref));
    double graph_s = seconds_since(&t0);
    cr_assert_lt(own_s, SWEEP_MAX_RATIO * graph_s, "%s at %lld elements: own backward %.3f s, gradient graph %.3f s",
                 name, SWEEP_N, own_s, graph_s);
    assert_graph_grad_agrees(&cg, &ref, own);
    case_ref_free(&ref);
    own_grad_free(own);
    case_graph_free(&cg);
}

/* elementwise, [N] */
Test(ref_grad, sweep_size_flat) { check_at_sweep_size("gelu"); }
/* [N/1024, 1024] plus a [1024] row summed back over N/1024 rows */
Test(ref_grad, sweep_size_broadcast_rows) { check_at_sweep_size("add_bcast_row"); }
/* [N/1024, 1024] logits with N/1024 labels */
Test(ref_grad, sweep_size_softmax_ce_rows) { check_at_sweep_size("softmax_ce"); }

/* A node of an op without a vector-Jacobian product (here a backward op)
 * on the path to the loss is refused by name, never skipped: a future op
 * cannot pass with a zero gradient. */
Test(ref_grad, op_without_vjp_is_named) {
    static const op_case c = {.name = "tanh_backward_alone", .n_in = 1, .shape = {DG_SHAPE(3, 4)}};
    case_graph cg = {.c = &c, .g = dg_graph_new()};
    cr_assert_not_null(cg.g);
    float x[12], w[12];
    for (int i = 0; i < 12; i++) {
        x[i] = 0.1f * (float)(i + 1);
        w[i] = 1.0f - 0.2f * (float)i;
    }
    const dg_init zero = {DG_INIT_FILL, 0, 0, 0};
    cg.in[0] = dg_param(cg.g, "x", c.shape[0], zero);
    cg.in_val[0] = x;
    dg_node *in[2] = {cg.in[0], cg.in[0]};
    cg.out = dg__node_new(cg.g, DG_OP_TANH_BACKWARD, c.shape[0], 2, in);
    cg.w = dg_input(cg.g, "w", c.shape[0]);
    cg.w_val = w;
    cg.loss = dg_sum(cg.g, dg_mul(cg.g, cg.out, cg.w), DG_ALL_AXES, false);
    cr_assert_not_null(cg.loss, "%s", dg_last_error());
    double *own[OP_CASE_MAX_IN];
    dg_status st = case_ref_own_grad(&cg, own, NULL);
    cr_assert_eq(st, DG_ERR_UNSUPPORTED, "got %s: %s", dg_status_name(st), dg_last_error());
    cr_assert(strstr(dg_last_error(), "tanh_backward"), "the message names no op: %s", dg_last_error());
    for (int i = 0; i < OP_CASE_MAX_IN; i++) cr_assert_null(own[i], "gradient %d left behind on failure", i);
    dg_graph_free(cg.g);
}

/* Max pooling's derivative is a selection: at a tie it is not defined,
 * and finite differences cannot check which tap gets the gradient. The
 * rule (the first maximum in window order, as the forward's argmax) is
 * checked here on a tie, the own backward against dg_grad's graph: x = [1 5 5;
 * 5 2 0] with 2x2 windows at columns 0 and 1 has its first maximum at x[0][1]
 * in both, so that element gets both windows' w and no other gets any. */
Test(ref_grad, max_pool_ties_route_to_the_first_maximum) {
    static const op_case c = {.name = "max_pool2d_tied", .op = DG_OP_MAX_POOL2D, .n_in = 1,
                              .shape = {DG_SHAPE(1, 1, 2, 3)}, .pool = {.kernel = {2, 2}, .stride = {1, 1}}};
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, &c, test_seed()));
    const float tied[6] = {1, 5, 5, 5, 2, 0};
    memcpy(cg.in_val[0], tied, sizeof tied);
    double *own[OP_CASE_MAX_IN];
    ASSERT_OK(case_ref_own_grad(&cg, own, NULL));
    case_ref ref;
    ASSERT_OK(case_ref_run(&cg, &ref));
    const double want[6] = {0, (double)cg.w_val[0] + cg.w_val[1], 0, 0, 0, 0};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(own[0][i], want[i], "own backward: dx[%d] = %g, want %g", i, own[0][i], want[i]);
        cr_assert_eq(ref.grad[0][i], want[i], "dg_grad graph: dx[%d] = %g, want %g", i, ref.grad[0][i], want[i]);
    }
    case_ref_free(&ref);
    own_grad_free(own);
    case_graph_free(&cg);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Every max-pool row of the table draws its input from DOM_DISTINCT, whose
 * values lie in [-2, 2] at least 4/n apart: far more than a finite
 * difference's step (1e-6 |x|), so no step reorders a window. */
Test(ref_grad, max_pool_rows_have_no_ties) {
    int rows = 0;
    for (int r = 0; r < dg_n_op_cases; r++) {
        const op_case *c = &dg_op_cases[r];
        if (c->op != DG_OP_MAX_POOL2D || c->build) continue;
        rows++;
        cr_assert_eq(c->dom[0], DOM_DISTINCT, "%s: a max-pool row needs distinct inputs", c->name);
        case_graph cg;
        ASSERT_OK(case_graph_new(&cg, c, test_seed()));
        int64_t n = dg_node_numel(cg.in[0]);
        float *v = malloc((size_t)n * sizeof *v);
        cr_assert_not_null(v);
        memcpy(v, cg.in_val[0], (size_t)n * sizeof *v);
        qsort(v, (size_t)n, sizeof *v, cmp_float);
        cr_assert(v[0] >= -2 && v[n - 1] <= 2, "%s: values in [%g, %g]", c->name, v[0], v[n - 1]);
        for (int64_t i = 1; i < n; i++)
            cr_assert_geq(v[i] - v[i - 1], 0.99 * 4.0 / (double)n, "%s: %.9g and %.9g are %.3g apart", c->name,
                          v[i - 1], v[i], v[i] - v[i - 1]);
        free(v);
        case_graph_free(&cg);
    }
    cr_assert_geq(rows, 3, "only %d max-pool rows", rows);
}
