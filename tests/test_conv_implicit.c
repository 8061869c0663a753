/* test_conv_implicit.c: the GPU's implicit-GEMM convolutions
 * (DG_GPU_CONV_IMPLICIT, gpu_conv_implicit.cu) on a table of geometries:
 * conv2d, backward_data and backward_weight against a float64 reference
 * written here from the definition, and against the im2col + cuBLAS path
 * on the same backend; then the same bits from run to run. GPU only: every
 * test skips with the reason where no device answers (gpu_util.h).
 *
 * Error bound, element by element: a float32 sum of K products, in any
 * order and with or without FMA, is within gamma_K * sum |products| of
 * the exact sum, gamma_K = K u / (1 - K u), u = 2^-24 (Higham, Accuracy
 * and Stability of Numerical Algorithms, 2nd ed., section 3.1). The inputs
 * are float32 values and the reference sums them exactly in double (its own
 * error is below 2^-53 relative), so each result must lie within gamma_K
 * times the sum of |products| the reference adds up beside it; two float32
 * results of the same element within twice that of each other. K is the
 * reduction length: cg*kh*kw for y, og*kh*kw for dx, n*oh*ow for dw (an
 * element with fewer terms in range only tightens the bound). An element
 * all of whose taps fall in padding must be exactly 0; a NaN (the outputs
 * are filled with NaN before every run) fails every bound. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/rng.h"
#include "gpu_util.h"
#include "test_util.h"

typedef struct conv_geo {
    const char *name;
    int         n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} conv_geo;

/* Shapes that are multiples of no tile (the kernels' tiles are 64 or 128
 * rows and columns, slices of 8), and every kind of index: */
static const conv_geo geos[] = {
    {"3x3 padding 1, 5x7 image", 2, 3, 5, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"stride 2 padding 1", 2, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {"dilation 2 padding 2", 1, 5, 11, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {"groups 2 stride 2", 2, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
    {"depthwise", 3, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},
    {"1x1, 70 -> 130 channels", 2, 70, 5, 6, 130, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    /* backward_data: the odd positions of dx have no tap at all */
    {"1x1 stride 2 groups 2", 2, 8, 6, 7, 8, 1, 1, 2, 2, 0, 0, 1, 1, 2},
    {"7x7 stride 2 padding 3", 2, 3, 15, 13, 9, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    /* strides and dilations sharing no factor and sharing one */
    {"3x2 kernel stride 3x2 dilation 2x3", 1, 4, 13, 11, 5, 3, 2, 3, 2, 2, 1, 2, 3, 1},
    {"5x3 kernel stride 2x3 dilation 1x2 groups 4", 2, 16, 10, 10, 32, 5, 3, 2, 3, 2, 1, 1, 2, 4},
    {"66 -> 72 channels stride 2x1", 2, 66, 4, 5, 72, 3, 3, 2, 1, 1, 0, 1, 1, 1},
    /* backward_data: 20 residue classes, more than one launch holds */
    {"stride 5x4: 20 classes", 2, 3, 17, 14, 5, 3, 3, 5, 4, 1, 1, 1, 1, 1},
    {"130 channels 3x3", 4, 130, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    /* backward_weight sums 64*16*16 positions in several split-K partials
     * (gpu_conv_implicit.cu's weight_splits: 64 on an H100) */
    {"batch 64: split-K", 64, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},
};
#define N_GEOS ((int)(sizeof geos / sizeof geos[0]))

static int out_size(int in, int k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

/* the graph of one geometry: y = conv2d(x, w), loss = sum(y * dy), so the
 * gradient nodes are conv2d_backward_data (dy, w) and _weight (dy, x) */
typedef struct conv_case {
    conv_geo  q;
    int       oh, ow;
    dg_graph *g;
    dg_node  *x, *w, *dy, *out[3]; /* y, dx, dw */
    int64_t   n_out[3];
    float    *in[3];               /* x, w, dy */
} conv_case;

static const char *const out_names[3] = {"y", "dx", "dw"};

static void conv_case_new(conv_case *cc, const conv_geo *q, uint64_t seed) {
    memset(cc, 0, sizeof *cc);
    cc->q = *q;
    cc->oh = out_size(q->h, q->kh, q->sh, q->ph, q->dh);
    cc->ow = out_size(q->w, q->kw, q->sw, q->pw, q->dw);
    cc->g = dg_graph_new();
    cr_assert_not_null(cc->g);
    cc->x = dg_input(cc->g, "x", DG_SHAPE(q->n, q->c, q->h, q->w));
    cc->w = dg_input(cc->g, "w", DG_SHAPE(q->o, q->c / q->groups, q->kh, q->kw));
    dg_conv2d_opts o = {{q->sh, q->sw}, {q->ph, q->pw}, {q->dh, q->dw}, q->groups};
    dg_node *y = dg_conv2d(cc->g, cc->x, cc->w, NULL, o);
    cr_assert_not_null(y, "%s: %s", q->name, dg_last_error());
    cc->dy = dg_input(cc->g, "dy", y->shape);
    dg_node *wrt[2] = {cc->x, cc->w}, *grads[2];
    ASSERT_OK(dg_grad(cc->g, dg_sum(cc->g, dg_mul(cc->g, y, cc->dy), DG_ALL_AXES, false), wrt, 2, grads));
    cr_assert_eq(grads[0]->op, DG_OP_CONV2D_BACKWARD_DATA, "%s: dx is a %s node", q->name, dg_op_name(grads[0]->op));
    cr_assert_eq(grads[1]->op, DG_OP_CONV2D_BACKWARD_WEIGHT, "%s: dw is a %s node", q->name,
                 dg_op_name(grads[1]->op));
    cc->out[0] = y;
    cc->out[1] = grads[0];
    cc->out[2] = grads[1];
    dg_node *ins[3] = {cc->x, cc->w, cc->dy};
    dg_rng r = dg_rng_new(seed);
    for (int k = 0; k < 3; k++) {
        cc->n_out[k] = dg_node_numel(cc->out[k]);
        int64_t n = dg_node_numel(ins[k]);
        cc->in[k] = malloc((size_t)n * sizeof(float));
        cr_assert_not_null(cc->in[k]);
        /* in [-1, -1/4] and [1/4, 1]: never 0, so every tap counts */
        for (int64_t i = 0; i < n; i++) {
            double v = 0.25 + 0.75 * dg_rng_uniform(&r);
            cc->in[k][i] = (float)(dg_rng_uniform(&r) < 0.5 ? -v : v);
        }
    }
}

static void conv_case_free(conv_case *cc) {
    for (int k = 0; k < 3; k++) free(cc->in[k]);
    dg_graph_free(cc->g);
}

/* The float64 reference from the definition: ref[k] the exact y, dx, dw,
 * abs[k] the sum of |products| of each element (its error bound's scale). */
static void conv_case_reference(const conv_case *cc, double *ref[3], double *abs_sum[3]) {
    const conv_geo *q = &cc->q;
    int cg = q->c / q->groups, og = q->o / q->groups;
    const float *x = cc->in[0], *w = cc->in[1], *dy = cc->in[2];
    for (int k = 0; k < 3; k++) {
        ref[k] = calloc((size_t)cc->n_out[k], sizeof(double));
        abs_sum[k] = calloc((size_t)cc->n_out[k], sizeof(double));
        cr_assert(ref[k] && abs_sum[k]);
    }
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int oy = 0; oy < cc->oh; oy++)
                for (int ox = 0; ox < cc->ow; ox++) {
                    int64_t yi = (((int64_t)n * q->o + o) * cc->oh + oy) * cc->ow + ox;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < q->kh; ki++)
                            for (int kj = 0; kj < q->kw; kj++) {
                                int iy = oy * q->sh - q->ph + ki * q->dh, ix = ox * q->sw - q->pw + kj * q->dw;
                                if (iy < 0 || iy >= q->h || ix < 0 || ix >= q->w) continue;
                                int c = o / og * cg + ci;
                                int64_t xi = (((int64_t)n * q->c + c) * q->h + iy) * q->w + ix;
                                int64_t wi = (((int64_t)o * cg + ci) * q->kh + ki) * q->kw + kj;
                                double wx = (double)w[wi] * x[xi], wdy = (double)w[wi] * dy[yi];
                                double dyx = (double)dy[yi] * x[xi];
                                ref[0][yi] += wx;
                                abs_sum[0][yi] += fabs(wx);
                                ref[1][xi] += wdy;
                                abs_sum[1][xi] += fabs(wdy);
                                ref[2][wi] += dyx;
                                abs_sum[2][wi] += fabs(dyx);
                            }
                }
}

static double gamma_of(int64_t k) {
    double ku = (double)k * 0x1.0p-24;
    return ku / (1.0 - ku);
}

/* reduction lengths of y, dx, dw */
static void reduction_lengths(const conv_case *cc, int64_t k[3]) {
    const conv_geo *q = &cc->q;
    k[0] = (int64_t)(q->c / q->groups) * q->kh * q->kw;
    k[1] = (int64_t)(q->o / q->groups) * q->kh * q->kw;
    k[2] = (int64_t)q->n * cc->oh * cc->ow;
}

/* every element of got within factor * gamma * abs_sum of want */
static void assert_within(const conv_case *cc, int k, const char *what, const float *got, const double *want,
                          const double *abs_sum, double factor, double gamma, uint64_t seed) {
    for (int64_t i = 0; i < cc->n_out[k]; i++) {
        double bound = factor * gamma * abs_sum[i], diff = fabs((double)got[i] - want[i]);
        cr_assert(diff <= bound,
                  "%s [%s, seed %llu]: %s element %lld: %.9g, want %.9g (off by %.3g, bound %.3g = %g gamma_K "
                  "sum|products|)", what, cc->q.name, (unsigned long long)seed, out_names[k], (long long)i, got[i],
                  want[i], diff, bound, factor);
    }
}

/* y, dx and dw of one plan run on `be` with conv implementation impl; the
 * outputs are filled with NaN first, so an element the kernels leave
 * unwritten shows */
static void conv_case_run(const conv_case *cc, dg_backend *be, dg_gpu_conv impl, int runs, float *got[][3]) {
    dg_gpu_set_conv(be, impl);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, cc->g, be, cc->out, 3, NULL));
    dg_node *ins[3] = {cc->x, cc->w, cc->dy};
    for (int k = 0; k < 3; k++) ASSERT_OK(dg_plan_set(p, ins[k], cc->in[k], dg_node_bytes(ins[k])));
    int64_t most = cc->n_out[0] > cc->n_out[1] ? cc->n_out[0] : cc->n_out[1];
    most = most > cc->n_out[2] ? most : cc->n_out[2];
    float *nan = malloc((size_t)most * sizeof(float));
    cr_assert_not_null(nan);
    for (int64_t i = 0; i < most; i++) nan[i] = NAN;
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 3; k++)
            ASSERT_OK(dg_backend_upload(be, dg_plan_data(p, cc->out[k]), nan, dg_node_bytes(cc->out[k])));
        ASSERT_OK(dg_plan_run(p));
        for (int k = 0; k < 3; k++) {
            got[r][k] = malloc(dg_node_bytes(cc->out[k]));
            cr_assert_not_null(got[r][k]);
            ASSERT_OK(dg_plan_get(p, cc->out[k], got[r][k], dg_node_bytes(cc->out[k])));
        }
    }
    free(nan);
    dg_plan_free(p);
}

static struct criterion_test_params geo_indices(void) {
    static int idx[N_GEOS];
    for (int i = 0; i < N_GEOS; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)N_GEOS);
}

/* Each direction, implicit against float64 and against im2col + cuBLAS.
 * Catches any wrong index of the gathers (padding, stride, dilation, group
 * offsets, backward_data's residue classes), a wrong split-K sum, and an
 * element left unwritten. */
ParameterizedTestParameters(conv_implicit, agrees_with_float64_and_im2col) { return geo_indices(); }
ParameterizedTest(int *gi, conv_implicit, agrees_with_float64_and_im2col) {
    dg_backend *be = gpu_open_or_skip(NULL);
    uint64_t seed = test_seed();
    conv_case cc;
    conv_case_new(&cc, &geos[*gi], seed);
    double *ref[3], *abs_sum[3];
    conv_case_reference(&cc, ref, abs_sum);
    int64_t klen[3];
    reduction_lengths(&cc, klen);
    float *implicit[1][3], *im2col[1][3];
    conv_case_run(&cc, be, DG_GPU_CONV_IMPLICIT, 1, implicit);
    conv_case_run(&cc, be, DG_GPU_CONV_IM2COL, 1, im2col);
    for (int k = 0; k < 3; k++) {
        double gamma = gamma_of(klen[k]);
        assert_within(&cc, k, "implicit vs float64", implicit[0][k], ref[k], abs_sum[k], 1.0, gamma, seed);
        assert_within(&cc, k, "im2col vs float64", im2col[0][k], ref[k], abs_sum[k], 1.0, gamma, seed);
        /* the two float32 results: each within gamma of the exact value */
        double *as_double = malloc((size_t)cc.n_out[k] * sizeof(double));
        cr_assert_not_null(as_double);
        for (int64_t i = 0; i < cc.n_out[k]; i++) as_double[i] = im2col[0][k][i];
        assert_within(&cc, k, "implicit vs im2col", implicit[0][k], as_double, abs_sum[k], 2.0, gamma, seed);
        free(as_double);
        free(implicit[0][k]);
        free(im2col[0][k]);
        free(ref[k]);
        free(abs_sum[k]);
    }
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* Two runs of one plan, and a run of a second plan, give the same bits:
 * no float atomics, split-K partials summed in a fixed order. Run on the
 * split-K geometry and on a strided one with several residue classes. */
Test(conv_implicit, same_bits_run_to_run) {
    dg_backend *be = gpu_open_or_skip(NULL);
    const int picks[] = {N_GEOS - 1, 1};
    for (size_t pi = 0; pi < sizeof picks / sizeof picks[0]; pi++) {
        conv_case cc;
        conv_case_new(&cc, &geos[picks[pi]], test_seed());
        float *a[2][3], *b[1][3];
        conv_case_run(&cc, be, DG_GPU_CONV_IMPLICIT, 2, a);
        conv_case_run(&cc, be, DG_GPU_CONV_IMPLICIT, 1, b);
        for (int k = 0; k < 3; k++) {
            size_t bytes = (size_t)cc.n_out[k] * sizeof(float);
            cr_assert(memcmp(a[0][k], a[1][k], bytes) == 0, "%s: %s differs between two runs of one plan",
                      cc.q.name, out_names[k]);
            cr_assert(memcmp(a[0][k], b[0][k], bytes) == 0, "%s: %s differs between two plans", cc.q.name,
                      out_names[k]);
            free(a[0][k]);
            free(a[1][k]);
            free(b[0][k]);
        }
        conv_case_free(&cc);
    }
    dg_backend_free(be);
}

/* A plan reserves the scratch of the kernels selected when it is made:
 * with the implicit kernels no im2col columns (backward-weight only its
 * split partials), so its arena is smaller; a plan made with im2col runs
 * the implicit kernels too, with the same split and so the same bits; a
 * plan made with the implicit kernels refuses im2col with a message
 * instead of writing columns into memory it never reserved. */
Test(conv_implicit, scratch_follows_the_kernels_selected_at_planning) {
    dg_backend *be = gpu_open_or_skip(NULL);
    conv_case cc;
    conv_case_new(&cc, &geos[N_GEOS - 1], test_seed()); /* split-K: backward-weight has partials */
    const dg_node *y = cc.out[0], *dx = cc.out[1], *dw = cc.out[2];
    dg_gpu_set_conv(be, DG_GPU_CONV_IMPLICIT);
    cr_assert_eq(dg_backend_scratch_bytes(be, y), 0);
    cr_assert_eq(dg_backend_scratch_bytes(be, dx), 0);
    size_t partials = dg_backend_scratch_bytes(be, dw);
    cr_assert(partials > 0 && partials < dg_node_scratch_bytes(dw), "partials %zu, columns %zu", partials,
              dg_node_scratch_bytes(dw));
    dg_plan *implicit_plan, *im2col_plan;
    dg_gpu_set_conv(be, DG_GPU_CONV_IMPLICIT);
    ASSERT_OK(dg_plan_new(&implicit_plan, cc.g, be, cc.out, 3, NULL));
    dg_gpu_set_conv(be, DG_GPU_CONV_IM2COL);
    cr_assert_eq(dg_backend_scratch_bytes(be, y), dg_node_scratch_bytes(y));
    ASSERT_OK(dg_plan_new(&im2col_plan, cc.g, be, cc.out, 3, NULL));
    size_t a_impl = dg_plan_stats_get(implicit_plan).arena_bytes, a_cols = dg_plan_stats_get(im2col_plan).arena_bytes;
    cr_assert(a_impl < a_cols, "arena with the implicit kernels %zu, with im2col %zu", a_impl, a_cols);

    /* the implicit kernels on both plans: the same bits */
    dg_gpu_set_conv(be, DG_GPU_CONV_IMPLICIT);
    dg_node *ins[3] = {cc.x, cc.w, cc.dy};
    float *got[2][3];
    dg_plan *plans[2] = {implicit_plan, im2col_plan};
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 3; k++) ASSERT_OK(dg_plan_set(plans[i], ins[k], cc.in[k], dg_node_bytes(ins[k])));
        ASSERT_OK(dg_plan_run(plans[i]));
        for (int k = 0; k < 3; k++) {
            got[i][k] = malloc(dg_node_bytes(cc.out[k]));
            cr_assert_not_null(got[i][k]);
            ASSERT_OK(dg_plan_get(plans[i], cc.out[k], got[i][k], dg_node_bytes(cc.out[k])));
        }
    }
    for (int k = 0; k < 3; k++) {
        cr_assert(memcmp(got[0][k], got[1][k], dg_node_bytes(cc.out[k])) == 0,
                  "%s differs between the plan made with implicit kernels and the one made with im2col",
                  out_names[k]);
        free(got[0][k]);
        free(got[1][k]);
    }

    /* im2col on a plan without columns: refused, and named. (A plan that
     * replays a CUDA graph, as both above after their first run, keeps the
     * kernels it captured: this one does not replay, so it meets the
     * switch.) */
    dg_plan *unreplayed;
    ASSERT_OK(dg_plan_new(&unreplayed, cc.g, be, cc.out, 3, &(dg_plan_opts){.no_replay = true}));
    for (int k = 0; k < 3; k++) ASSERT_OK(dg_plan_set(unreplayed, ins[k], cc.in[k], dg_node_bytes(ins[k])));
    dg_gpu_set_conv(be, DG_GPU_CONV_IM2COL);
    cr_assert_eq(dg_plan_run(unreplayed), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "dg_gpu_set_conv"), "%s", dg_last_error());
    ASSERT_OK(dg_backend_sync(be)); /* the backend goes on */
    ASSERT_OK(dg_plan_run(im2col_plan));
    dg_plan_free(unreplayed);
    dg_plan_free(implicit_plan);
    dg_plan_free(im2col_plan);
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* x of 2^31 elements or more: the implicit kernels index in 32 bits
 * (dg__gpu_conv_implicit_fits), so with them selected the backend still
 * reserves the im2col columns and runs im2col + cuBLAS, and the results
 * are exact. x [4,1,32768,16385] = 2^31 + 131072 elements (8.6 GB; an
 * image, 2^29 + 32768, fits a GEMM's int), w [1,1,1,1] = 0.5, stride 2 (a
 * 1x1 convolution with stride 1 would read x as its own columns): y
 * [4,1,16384,8193] = 0.5 x at the even positions, dx = 0.5 dy there and 0
 * elsewhere. Every value is a small integer or half of one: no rounding. */
Test(conv_implicit, tensors_past_32_bit_indices_fall_back_to_im2col, .timeout = 600) {
    dg_backend *be = gpu_open_or_skip(NULL);
    enum { N = 4, H = 32768, W = 16385, OH = 16384, OW = 8193 };
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(N, 1, H, W)), *w = dg_input(g, "w", DG_SHAPE(1, 1, 1, 1));
    dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.stride = {2, 2}});
    cr_assert_not_null(y, "%s", dg_last_error());
    cr_assert(dg_node_numel(x) > INT32_MAX && dg_node_numel(y) == (int64_t)N * OH * OW);
    dg_node *dy = dg_input(g, "dy", y->shape), *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, y, dy), DG_ALL_AXES, false), wrt, 2, grads));
    dg_node *outs[2] = {y, grads[0]};
    dg_gpu_set_conv(be, DG_GPU_CONV_IMPLICIT);
    for (int k = 0; k < 2; k++)
        cr_assert(dg_backend_scratch_bytes(be, outs[k]) == dg_node_scratch_bytes(outs[k]) &&
                      dg_node_scratch_bytes(outs[k]) > 0,
                  "%s: %zu bytes of scratch with the implicit kernels selected, %zu of columns", out_names[k],
                  dg_backend_scratch_bytes(be, outs[k]), dg_node_scratch_bytes(outs[k]));
    dg_plan *p;
    dg_status st = dg_plan_new(&p, g, be, outs, 2, NULL);
    if (st == DG_ERR_OOM) cr_skip_test("%s", dg_last_error()); /* a device of less than ~22 GB */
    ASSERT_OK(st);
    int64_t nx = dg_node_numel(x), ny = dg_node_numel(y);
    float *xv = malloc((size_t)nx * sizeof *xv), *yv = malloc((size_t)ny * sizeof *yv), half = 0.5f;
    if (!xv || !yv) {
        free(xv);
        free(yv);
        cr_skip_test("no host memory for %lld + %lld floats", (long long)nx, (long long)ny);
    }
    for (int64_t i = 0; i < nx; i++) xv[i] = (float)(i % 2039 - 1019);
    for (int64_t i = 0; i < ny; i++) yv[i] = (float)(i % 1021 - 510); /* dy */
    ASSERT_OK(dg_plan_set(p, x, xv, (size_t)nx * sizeof *xv));
    ASSERT_OK(dg_plan_set(p, w, &half, sizeof half));
    ASSERT_OK(dg_plan_set(p, dy, yv, (size_t)ny * sizeof *yv));
    ASSERT_OK(dg_plan_run(p));
    /* dx, into x's host buffer (x is not needed after): 0.5 dy at even positions */
    ASSERT_OK(dg_plan_get(p, grads[0], xv, (size_t)nx * sizeof *xv));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < nx; i++) {
        int64_t col = i % W, row = i / W % H, n = i / ((int64_t)H * W);
        float want = row % 2 || col % 2 ? 0.0f : 0.5f * yv[(n * OH + row / 2) * OW + col / 2];
        if (xv[i] != want && !bad++) first = i;
    }
    cr_assert_eq(bad, 0, "dx: %lld of %lld elements wrong, the first at %lld", (long long)bad, (long long)nx,
                 (long long)first);
    /* y: 0.5 x at even positions, x's pattern recomputed */
    ASSERT_OK(dg_plan_get(p, y, yv, (size_t)ny * sizeof *yv));
    for (int64_t i = 0; i < ny; i++) {
        int64_t ox = i % OW, oy = i / OW % OH, n = i / ((int64_t)OH * OW);
        int64_t at = (n * H + 2 * oy) * W + 2 * ox;
        if (yv[i] != 0.5f * (float)(at % 2039 - 1019) && !bad++) first = i;
    }
    cr_assert_eq(bad, 0, "y: %lld of %lld elements wrong, the first at %lld", (long long)bad, (long long)ny,
                 (long long)first);
    free(xv);
    free(yv);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}
