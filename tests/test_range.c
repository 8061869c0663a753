/* test_range.c: the numerical edges that real training reaches, on every
 * backend against the float64 reference: the range table (logits of +-100
 * and +-1000, exp and log near overflow and underflow, magnitudes far from
 * 1), log(0), reductions of a million large, tiny and cancelling values,
 * and GEMM shapes one below, at and one above every blocking factor of the
 * CPU's own sgemm and the GPU's tiled kernels. GPU tests skip (or fail
 * under DG_REQUIRE_GPU=1) where no device answers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <omp.h>

#include "core/check/ref.h"
#include "core/layout.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

#define U_F32 (1.0 / 16777216.0) /* float32 unit roundoff, 2^-24 */
#define U_F64 (1.0 / 9007199254740992.0) /* float64, 2^-53 */

/* ---- the range table ------------------------------------------------- */

static struct criterion_test_params range_indices(void) {
    static int idx[128];
    for (int i = 0; i < dg_n_range_cases; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)dg_n_range_cases);
}

/* forward with the row's floor; gradients of loss = sum(out * w) against
 * their largest element, or the incoming gradient's (op_case.grad_vs_dy) */
static void check_range_case(int row, bool gpu) {
    const op_case *c = &dg_range_cases[row];
    dg_backend *be = test_backend_open(gpu);
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_result r;
    case_ref ref;
    ASSERT_OK(case_run(&cg, be, &r));
    ASSERT_OK(case_ref_run(&cg, &ref));
    cmp_stats s = cmp_f32_floor(r.out, ref.out, r.n_out, c->floor);
    cr_log_info("%s %s forward %.3g (tol %.3g)", gpu ? "gpu" : "cpu", c->name, s.max_rel, c->tol);
    ASSERT_CLOSE(s, c->tol, gpu ? "gpu forward" : "cpu forward", c->name, seed);
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        s = cmp_f32_floor(r.grad[i], ref.grad[i], r.n_grad[i], 1.0);
        if (c->grad_vs_dy) s = grad_vs_dy(s, ref.grad[i], r.n_grad[i], cg.w_val, dg_node_numel(cg.w));
        cr_log_info("%s %s grad %d %.3g", gpu ? "gpu" : "cpu", c->name, i, s.max_rel);
        ASSERT_CLOSE(s, c->tol, gpu ? "gpu gradient" : "cpu gradient", c->name, seed);
    }
    case_result_free(&r);
    case_ref_free(&ref);
    case_graph_free(&cg);
    dg_backend_free(be);
}

ParameterizedTestParameters(range, cpu_edges) { return range_indices(); }
ParameterizedTest(int *row, range, cpu_edges) { check_range_case(*row, false); }

ParameterizedTestParameters(range, gpu_edges) { return range_indices(); }
ParameterizedTest(int *row, range, gpu_edges) { check_range_case(*row, true); }

/* ---- log(0) ------------------------------------------------------------ */

/* log follows IEEE 754: log(0) = -inf, and its gradient dy / x is +-inf
 * there (a loss must never take log of a probability that can be 0: use
 * softmax_cross_entropy, which works through log-sum-exp); a subnormal
 * input still has a finite log. */
static void check_log_zero(bool gpu) {
    dg_backend *be = test_backend_open(gpu);
    const float x[4] = {0.0f, FLT_TRUE_MIN, FLT_MIN, 1e-30f};
    dg_graph *g = dg_graph_new();
    dg_node *in = dg_param(g, "x", DG_SHAPE(4), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *y = dg_log(g, in), *loss = dg_sum(g, y, DG_ALL_AXES, false), *dx;
    ASSERT_OK(dg_grad(g, loss, &in, 1, &dx));
    dg_node *outs[2] = {y, dx};
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 2, NULL));
    ASSERT_OK(dg_plan_set(p, in, x, sizeof x));
    ASSERT_OK(dg_plan_run(p));
    float out[4], grad[4];
    ASSERT_OK(dg_plan_get(p, y, out, sizeof out));
    ASSERT_OK(dg_plan_get(p, dx, grad, sizeof grad));
    cr_assert(out[0] == -INFINITY, "log(0) = %g, want -inf", (double)out[0]);
    cr_assert(isinf(grad[0]) && grad[0] > 0, "d log(x)/dx at 0 = %g, want +inf", (double)grad[0]);
    for (int i = 1; i < 4; i++) {
        double want = log((double)x[i]), dwant = 1.0 / (double)x[i];
        cr_assert(fabs(out[i] - want) <= 4 * U_F32 * fabs(want), "log(%g) = %.9g, want %.9g", (double)x[i],
                  (double)out[i], want);
        /* 1 / FLT_TRUE_MIN overflows float32 (2^149): +inf is its rounding */
        if (dwant > FLT_MAX) cr_assert(isinf(grad[i]) && grad[i] > 0, "1/%g = %g, want +inf", (double)x[i],
                                       (double)grad[i]);
        else cr_assert(fabs(grad[i] - dwant) <= 4 * U_F32 * dwant, "1/%g = %.9g, want %.9g", (double)x[i],
                       (double)grad[i], dwant);
    }
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

Test(range, cpu_log_of_zero) { check_log_zero(false); }
Test(range, gpu_log_of_zero) { check_log_zero(true); }

/* ---- reductions -------------------------------------------------------- */

/* About a million elements each, over every layout the kernels tell apart
 * (core/layout.h: row sums, column sums, any other axis set). */
#define SU(...) {DG_SHAPE(__VA_ARGS__)}
static const op_case reduce_cases[] = {
    {"sum_all_huge_positive", DG_OP_SUM, 1, SU(1 << 20), {DOM_RANGE}, .axes = DG_ALL_AXES,
     .range = {{0.5e30, 1e30}}},
    {"sum_all_huge_cancelling", DG_OP_SUM, 1, SU(1 << 20), {DOM_RANGE}, .axes = DG_ALL_AXES,
     .range = {{-1e30, 1e30}}},
    {"mean_all_tiny", DG_OP_MEAN, 1, SU(1 << 20), {DOM_RANGE}, .axes = DG_ALL_AXES, .range = {{1e-30, 2e-30}}},
    {"sum_rows_tiny_cancelling", DG_OP_SUM, 1, SU(64, 16384), {DOM_RANGE}, .axes = 2,
     .range = {{-1e-30, 1e-30}}},
    {"mean_cols_huge_cancelling", DG_OP_MEAN, 1, SU(4096, 256), {DOM_RANGE}, .axes = 1,
     .range = {{-1e30, 1e30}}},
    {"sum_middle_axis_decades", DG_OP_SUM, 1, SU(16, 4099, 16), {DOM_DECADES_SIGNED}, .axes = 2,
     .range = {{-30, 30}}},
};
#define N_REDUCE ((int)(sizeof reduce_cases / sizeof reduce_cases[0]))

/* The longest chain of float additions any element goes through, for the
 * GPU's float accumulation (gpu_reduce.cu): row sums, a lane's sequential
 * float4 loop (n/128), the float4's pairwise sum, the warp's tree, the
 * alignment prologue and the sequential sum of the chunk partials (at
 * most n/1024 + 1); column sums, a thread's rows (n/8), the block's 8 warps
 * and the sequential sum of the slices (at most n/64 + 1); the general
 * kernel sums sequentially. */
static double gpu_chain(dg_reduce_kind kind, double n) {
    switch (kind) {
    case DG_REDUCE_ROWS:    return n / 128 + n / 1024 + 16;
    case DG_REDUCE_COLS:    return n / 8 + n / 64 + 16;
    case DG_REDUCE_GENERAL: return n;
    }
    return n;
}

/* What each kernel promises for a sum S of n terms with sum |x| = A (both
 * scaled by 1/n for a mean): the CPU accumulates in double, in order, and
 * rounds once to float: |err| <= u32 |S| + n u64 A (+ the scale, in
 * double). The GPU accumulates in float over a fixed tree of longest chain
 * d: |err| <= u32 |S| + d u32 A (Higham, Accuracy and Stability, 4.2), and
 * rounds the scale 1/n to float. Both bounds doubled. */
static double reduce_bound(bool gpu, dg_reduce_kind kind, double n, double S, double A) {
    if (gpu) return 2 * (2 * U_F32 * fabs(S) + gpu_chain(kind, n) * U_F32 * A);
    return 2 * (U_F32 * fabs(S) + n * U_F64 * A);
}

static void check_reduce(int row, bool gpu) {
    const op_case *c = &reduce_cases[row];
    dg_backend *be = test_backend_open(gpu);
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_result r;
    case_ref ref;
    ASSERT_OK(case_run(&cg, be, &r));
    ASSERT_OK(case_ref_run(&cg, &ref));
    /* A per output: the same reduction of |x|, in float64 */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", c->shape[0]);
    dg_node *a = c->op == DG_OP_SUM ? dg_sum(g, dg_abs(g, x), c->axes, c->keepdims)
                                    : dg_mean(g, dg_abs(g, x), c->axes, c->keepdims);
    cr_assert_not_null(a, "%s", dg_last_error());
    int n_nodes = dg_graph_size(g);
    double **v = calloc((size_t)n_nodes, sizeof *v);
    int64_t n_in = dg_node_numel(x);
    v[x->id] = malloc((size_t)n_in * sizeof(double));
    for (int64_t i = 0; i < n_in; i++) v[x->id][i] = cg.in_val[0][i];
    ASSERT_OK(ref_eval(g, n_nodes, v));
    dg_reduce_layout l = dg_reduce_layout_of(cg.out);
    double worst = -1; /* the largest error / bound; NaN counts as infinite */
    int64_t wi = 0;
    for (int64_t i = 0; i < r.n_out; i++) {
        double S = ref.out[i], err = fabs((double)r.out[i] - S);
        double q = err / reduce_bound(gpu, l.kind, (double)l.n_red, S, v[a->id][i]);
        if (!(q <= worst)) { worst = isnan(q) ? INFINITY : q; wi = i; }
    }
    cr_log_info("%s %s: worst error %.3g of the bound (output %lld)", gpu ? "gpu" : "cpu", c->name, worst,
                (long long)wi);
    cr_assert(worst <= 1, "%s %s [seed %llu] output %lld: got %.9g, want %.9g: error %.3g > bound %.3g (sum |x| "
              "%.3g over %lld)", gpu ? "gpu" : "cpu", c->name, (unsigned long long)seed, (long long)wi,
              (double)r.out[wi], ref.out[wi], fabs((double)r.out[wi] - ref.out[wi]),
              reduce_bound(gpu, l.kind, (double)l.n_red, ref.out[wi], v[a->id][wi]), v[a->id][wi], (long long)l.n_red);
    ref_free(v, n_nodes);
    free(v);
    dg_graph_free(g);
    case_result_free(&r);
    case_ref_free(&ref);
    case_graph_free(&cg);
    dg_backend_free(be);
}

static struct criterion_test_params reduce_indices(void) {
    static int idx[N_REDUCE];
    for (int i = 0; i < N_REDUCE; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)N_REDUCE);
}

ParameterizedTestParameters(range, cpu_reductions) { return reduce_indices(); }
ParameterizedTest(int *row, range, cpu_reductions) { check_reduce(*row, false); }

ParameterizedTestParameters(range, gpu_reductions) { return reduce_indices(); }
ParameterizedTest(int *row, range, gpu_reductions) { check_reduce(*row, true); }

/* ---- GEMM across every blocking boundary ------------------------------- */

/* Every element of C = op(A) op(B) (k terms, any summation order, with or
 * without FMA) is within gamma_k (|A||B|)_ij of the exact product (Higham
 * 3.5): (k + 2) u32 (|A||B|)_ij. A term dropped or counted twice at a
 * block edge costs about (|A||B|)_ij / k, far above it; a missed element
 * stays NaN. */
typedef struct gemm_data {
    int     m, n, k;
    bool    ta, tb;
    float  *A, *B, *C;
    double *R, *Rabs;
} gemm_data;

static void gemm_data_new(gemm_data *d, int m, int n, int k, bool ta, bool tb, dg_rng *rng) {
    *d = (gemm_data){.m = m, .n = n, .k = k, .ta = ta, .tb = tb};
    d->A = malloc(sizeof(float) * m * k);
    d->B = malloc(sizeof(float) * k * n);
    d->C = malloc(sizeof(float) * m * n);
    d->R = malloc(sizeof(double) * m * n);
    d->Rabs = malloc(sizeof(double) * m * n);
    float *absA = malloc(sizeof(float) * m * k), *absB = malloc(sizeof(float) * k * n);
    cr_assert(d->A && d->B && d->C && d->R && d->Rabs && absA && absB, "out of memory");
    for (int i = 0; i < m * k; i++) absA[i] = fabsf(d->A[i] = (float)(2 * dg_rng_uniform(rng) - 1));
    for (int i = 0; i < k * n; i++) absB[i] = fabsf(d->B[i] = (float)(2 * dg_rng_uniform(rng) - 1));
    ref_sgemm(ta, tb, m, n, k, d->A, d->B, d->R);
    ref_sgemm(ta, tb, m, n, k, absA, absB, d->Rabs);
    free(absA);
    free(absB);
}

static void gemm_data_free(gemm_data *d) {
    free(d->A); free(d->B); free(d->C); free(d->R); free(d->Rabs);
}

/* one assertion for the worst element: Criterion reports each assertion
 * to its runner, a million of them would dominate the run time */
static void gemm_check(const gemm_data *d, const char *impl, uint64_t seed) {
    int bad = -1;
    for (int i = 0; i < d->m * d->n && bad < 0; i++)
        if (!(fabs((double)d->C[i] - d->R[i]) <= (d->k + 2) * U_F32 * d->Rabs[i])) bad = i;
    cr_assert(bad < 0, "%s %dx%dx%d ta=%d tb=%d [seed %llu]: C[%d][%d] = %.9g, want %.9g (bound %.3g)", impl, d->m,
              d->n, d->k, d->ta, d->tb, (unsigned long long)seed, bad / d->n, bad % d->n, (double)d->C[bad],
              d->R[bad], (d->k + 2) * U_F32 * d->Rabs[bad]);
}

/* cpu_gemm.c: MR 6, NR 16, MC 96 (rows of an A block), NC 2048 (columns of
 * the shared B panel), KC 256 (the k slice: C accumulates past the first) */
static const int cpu_gemm_shapes[][3] = {
    {95, 17, 255}, {96, 16, 256}, {97, 15, 257},   /* MC, NR, KC: below, at, above        */
    {193, 33, 513}, {191, 31, 511},                /* two of each, +-1                    */
    {7, 2049, 3}, {5, 2047, 17}, {6, 2048, 1},     /* NC, the B panel's edge, with MR     */
    {1, 1, 1}, {1, 17, 1}, {7, 1, 257},            /* a single row, column, k             */
};

Test(range, cpu_gemm_block_edges) {
    uint64_t seed = test_seed();
    dg_rng rng = dg_rng_new(seed);
    float *pack = malloc(dg_cpu_gemm_own_pack_floats(omp_get_max_threads()) * sizeof(float));
    for (size_t s = 0; s < sizeof cpu_gemm_shapes / sizeof cpu_gemm_shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            gemm_data d;
            gemm_data_new(&d, cpu_gemm_shapes[s][0], cpu_gemm_shapes[s][1], cpu_gemm_shapes[s][2], t & 1, t & 2,
                          &rng);
            int lda = d.ta ? d.m : d.k, ldb = d.tb ? d.k : d.n;
            for (int impl = 0; impl < 3; impl++) {
                for (int i = 0; i < d.m * d.n; i++) d.C[i] = NAN; /* every element must be written */
                if (impl == 0) dg_cpu_sgemm_own(d.ta, d.tb, d.m, d.n, d.k, d.A, lda, d.B, ldb, d.C, d.n, false, pack);
                if (impl == 1) dg_cpu_sgemm_naive(d.ta, d.tb, d.m, d.n, d.k, d.A, lda, d.B, ldb, d.C, d.n, false);
                if (impl == 2) dg_cpu_sgemm_openblas(d.ta, d.tb, d.m, d.n, d.k, d.A, lda, d.B, ldb, d.C, d.n, false);
                gemm_check(&d, impl == 0 ? "own" : impl == 1 ? "naive" : "openblas", seed);
            }
            gemm_data_free(&d);
        }
    free(pack);
}

#ifdef DG_HAVE_CUDA
/* gpu_gemm.cu: tiles of 128 x 128, k slices of 8; the vectorised kernel
 * takes untransposed shapes with m, n multiples of 128 and k of 8 */
static const int gpu_gemm_shapes[][3] = {
    {127, 129, 7}, {128, 128, 8}, {129, 127, 9},   /* TM, TN, TK: below, at, above       */
    {256, 384, 264}, {255, 257, 263}, {257, 383, 265}, /* several tiles, many k slices  */
    {128, 256, 9}, {1, 129, 1}, {129, 1, 17},       /* vector path refused by k; thin      */
};
#endif

Test(range, gpu_gemm_block_edges) {
    dg_backend *gpu = test_backend_open(true);
#ifdef DG_HAVE_CUDA
    uint64_t seed = test_seed();
    dg_rng rng = dg_rng_new(seed);
    for (size_t s = 0; s < sizeof gpu_gemm_shapes / sizeof gpu_gemm_shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            gemm_data d;
            gemm_data_new(&d, gpu_gemm_shapes[s][0], gpu_gemm_shapes[s][1], gpu_gemm_shapes[s][2], t & 1, t & 2,
                          &rng);
            size_t ba = sizeof(float) * d.m * d.k, bb = sizeof(float) * d.k * d.n, bc = sizeof(float) * d.m * d.n;
            void *dA, *dB, *dC;
            ASSERT_OK(dg_backend_alloc(gpu, ba, &dA));
            ASSERT_OK(dg_backend_alloc(gpu, bb, &dB));
            ASSERT_OK(dg_backend_alloc(gpu, bc, &dC));
            ASSERT_OK(dg_backend_upload(gpu, dA, d.A, ba));
            ASSERT_OK(dg_backend_upload(gpu, dB, d.B, bb));
            for (int impl = 0; impl < 3; impl++) {
                for (int i = 0; i < d.m * d.n; i++) d.C[i] = NAN;
                ASSERT_OK(dg_backend_upload(gpu, dC, d.C, bc));
                ASSERT_OK(dg_gpu_sgemm(gpu, (dg_gpu_gemm)impl, false, d.ta, d.tb, d.m, d.n, d.k, dA, dB, dC));
                ASSERT_OK(dg_backend_download(gpu, d.C, dC, bc));
                gemm_check(&d, impl == 0 ? "cublas" : impl == 1 ? "naive" : "tiled", seed);
            }
            dg_backend_release(gpu, dA);
            dg_backend_release(gpu, dB);
            dg_backend_release(gpu, dC);
            gemm_data_free(&d);
        }
#endif
    dg_backend_free(gpu);
}
