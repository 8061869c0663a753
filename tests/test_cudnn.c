/* test_cudnn.c: the GPU's cuDNN convolutions (DG_CONV_VENDOR,
 * gpu_backend/gpu_cudnn.cu).
 *
 * Without a GPU (suites cudnn_plan, cudnn_absent): the plan-time
 * decisions (gpu_cudnn.h: the key a node makes, the workspace cap, which
 * heuristic answer is taken, the algorithms' names) and the refusal where
 * libcudnn.so.9 cannot be loaded. With a GPU (suite cudnn; the others skip
 * with the reason, gpu_util.h): each direction on a table of geometries
 * against the float64 reference of core/check (conv_check_sample: the
 * exact value and the sum of |terms| of each sampled entry), in float32
 * and with TF32; the plan under CUDA-graph replay (same bits, no
 * allocation per run); the workspace and the names a plan reports.
 * Suite cudnn_lowp: bf16 and f16 convolutions, built with dg_cast and
 * dg_conv2d under the graph's low-precision convolution rule.
 *
 * Error bounds, as max |got - exact| / sum|terms| over the samples
 * (conv_check_error): a float32 sum of K products is within gamma_K =
 * K u / (1 - K u), u = 2^-24, of the exact sum relative to sum|terms|
 * (Higham, 2nd ed., 3.1); cuDNN's transform algorithms (Winograd, FFT)
 * add rounding in their transforms, so float32 is allowed FP32_SLACK
 * beside 2 gamma_K: a wrong tap, offset, group or stride errs by the
 * order of the entry itself (sum|terms| / sqrt(K), above 1e-2 here). TF32
 * rounds each operand to 11 significant bits (2^-11 relative), so each
 * product to within 2^-10: TF32_TOL allows four times that, for the
 * transforms' rounding (Winograd's transformed tiles are rounded to TF32
 * too, and are larger than the tiles they come from). The 16-bit outputs
 * are rounded once more, to u16 of |exact| <= sum|terms|. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/check/conv_check.h"
#include "core/check/round.h"
#include "core/rng.h"
#include "core/testing.h"
#include "gpu_backend/gpu_cudnn.h"
#include "gpu_backend/gpu_testing.h"
#include "gpu_util.h"
#include "test_util.h"

#define FP32_SLACK 0x1.0p-16 /* Winograd's and FFT's transforms in float32 */
#define TF32_TOL   0x1.0p-8
#define SAMPLES    400

typedef struct conv_geo {
    const char *name;
    int         n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} conv_geo;

/* odd sizes, batch 1 and more, groups, stride 2, dilation 2, padding that
 * differs between the axes */
static const conv_geo geos[] = {
    {"3x3 padding 1, 5x7 image", 2, 3, 5, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"stride 2 padding 1, batch 1", 1, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {"dilation 2 padding 2, batch 1", 1, 5, 11, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {"groups 2 stride 2", 2, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
    {"depthwise", 3, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},
    {"5x3 kernel, padding 2x0", 2, 3, 9, 8, 5, 5, 3, 1, 1, 2, 0, 1, 1, 1},
    {"1x1, 70 -> 130 channels", 2, 70, 5, 6, 130, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {"7x7 stride 2 padding 3", 2, 3, 15, 13, 9, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {"3x2 kernel stride 3x2 dilation 2x3, padding 2x1", 1, 4, 13, 11, 5, 3, 2, 3, 2, 2, 1, 2, 3, 1},
    {"batch 16, 32 channels 3x3", 16, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
};
#define N_GEOS ((int)(sizeof geos / sizeof geos[0]))

static const char *const out_names[3] = {"y", "dx", "dw"};

/* y = conv2d(x, w); loss = sum(y * dy): the gradients are
 * conv2d_backward_data(dy, w) and conv2d_backward_weight(dy, x). With
 * dtype DG_BF16 or DG_F16, x and w are cast to it first (and y back to
 * float32 before the loss): conv[k] are then the 16-bit convolutions and
 * out[k] their float32 casts. */
typedef struct conv_case {
    conv_geo  q;
    dg_dtype  dtype;
    dg_graph *g;
    dg_node  *x, *w, *dy;
    dg_node  *conv[3]; /* the conv2d, backward_data, backward_weight nodes */
    dg_node  *out[3];  /* y, dx, dw as float32                             */
    float    *in[3];   /* x, w, dy                                         */
} conv_case;

static dg_node *uncast(dg_node *n) { return n->op == DG_OP_CAST ? n->in[0] : n; }

static void conv_case_new(conv_case *cc, const conv_geo *q, dg_dtype dtype, uint64_t seed) {
    memset(cc, 0, sizeof *cc);
    cc->q = *q;
    cc->dtype = dtype;
    cc->g = dg_graph_new();
    cr_assert_not_null(cc->g);
    cc->x = dg_input(cc->g, "x", DG_SHAPE(q->n, q->c, q->h, q->w));
    cc->w = dg_input(cc->g, "w", DG_SHAPE(q->o, q->c / q->groups, q->kh, q->kw));
    dg_node *x = cc->x, *w = cc->w;
    if (dtype != DG_F32) {
        x = dg_cast(cc->g, x, dtype);
        w = dg_cast(cc->g, w, dtype);
    }
    dg_conv2d_opts o = {{q->sh, q->sw}, {q->ph, q->pw}, {q->dh, q->dw}, q->groups};
    dg_node *y = dg_conv2d(cc->g, x, w, NULL, o);
    cr_assert_not_null(y, "%s: %s", q->name, dg_last_error());
    cr_assert_eq(y->dtype, dtype, "%s: conv2d of %s operands gives %s", q->name, dg_dtype_name(dtype),
                 dg_dtype_name(y->dtype));
    dg_node *y32 = dtype == DG_F32 ? y : dg_cast(cc->g, y, DG_F32);
    cc->dy = dg_input(cc->g, "dy", y->shape);
    dg_node *wrt[2] = {cc->x, cc->w}, *grads[2];
    ASSERT_OK(dg_grad(cc->g, dg_sum(cc->g, dg_mul(cc->g, y32, cc->dy), DG_ALL_AXES, false), wrt, 2, grads));
    cc->out[0] = y32, cc->out[1] = grads[0], cc->out[2] = grads[1];
    cc->conv[0] = y, cc->conv[1] = uncast(grads[0]), cc->conv[2] = uncast(grads[1]);
    cr_assert_eq(cc->conv[1]->op, DG_OP_CONV2D_BACKWARD_DATA, "%s: dx from a %s node", q->name,
                 dg_op_name(cc->conv[1]->op));
    cr_assert_eq(cc->conv[2]->op, DG_OP_CONV2D_BACKWARD_WEIGHT, "%s: dw from a %s node", q->name,
                 dg_op_name(cc->conv[2]->op));
    dg_node *ins[3] = {cc->x, cc->w, cc->dy};
    dg_rng r = dg_rng_new(seed);
    for (int k = 0; k < 3; k++) {
        int64_t n = dg_node_numel(ins[k]);
        cc->in[k] = malloc((size_t)n * sizeof(float));
        cr_assert_not_null(cc->in[k]);
        /* zero-mean, never 0: every tap counts */
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

static dg_plan *conv_case_plan(const conv_case *cc, dg_backend *be, const dg_plan_opts *o) {
    dg_plan *p = NULL;
    ASSERT_OK(dg_plan_new(&p, cc->g, be, cc->out, 3, o));
    dg_node *ins[3] = {cc->x, cc->w, cc->dy};
    for (int k = 0; k < 3; k++) ASSERT_OK(dg_plan_set(p, ins[k], cc->in[k], dg_node_bytes(ins[k])));
    return p;
}

/* y, dx, dw of one run (outputs filled with NaN first: an unwritten
 * element shows) */
static void conv_case_run(const conv_case *cc, dg_backend *be, dg_plan *p, float *got[3]) {
    for (int k = 0; k < 3; k++) {
        size_t bytes = dg_node_bytes(cc->out[k]);
        float *nan = malloc(bytes);
        cr_assert_not_null(nan);
        for (size_t i = 0; i < bytes / sizeof(float); i++) nan[i] = NAN;
        ASSERT_OK(dg_backend_upload(be, dg_plan_data(p, cc->out[k]), nan, bytes));
        free(nan);
    }
    ASSERT_OK(dg_plan_run(p));
    for (int k = 0; k < 3; k++) {
        got[k] = malloc(dg_node_bytes(cc->out[k]));
        cr_assert_not_null(got[k]);
        ASSERT_OK(dg_plan_get(p, cc->out[k], got[k], dg_node_bytes(cc->out[k])));
    }
}

/* each output's reduction length: cg*kh*kw for y, og*kh*kw for dx,
 * n*oh*ow for dw */
static int64_t reduction_length(const conv_case *cc, int k) {
    const conv_geo *q = &cc->q;
    const dg_node *y = cc->conv[0];
    return k == 0 ? (int64_t)(q->c / q->groups) * q->kh * q->kw
         : k == 1 ? (int64_t)(q->o / q->groups) * q->kh * q->kw
                  : (int64_t)q->n * y->shape.d[2] * y->shape.d[3];
}

static double gamma_of(int64_t k) {
    double ku = (double)k * 0x1.0p-24;
    return ku / (1.0 - ku);
}

/* the worst sampled error of each output against float64 from the values
 * the convolutions read (rounded to the case's dtype first) */
static void conv_case_errors(const conv_case *cc, float *const got[3], uint64_t seed, double err[3]) {
    float *in[3];
    for (int k = 0; k < 3; k++) {
        size_t n = (size_t)dg_node_numel(k == 0 ? cc->x : k == 1 ? cc->w : cc->dy);
        in[k] = malloc(n * sizeof(float));
        cr_assert_not_null(in[k]);
        memcpy(in[k], cc->in[k], n * sizeof(float));
        dg_check_round(cc->dtype, in[k], NULL, n); /* nothing for float32 */
    }
    const float *a[3] = {in[0], in[2], in[2]}, *b[3] = {in[1], in[1], in[0]}; /* (x,w) (dy,w) (dy,x) */
    conv_sample s[SAMPLES];
    for (int k = 0; k < 3; k++) {
        ASSERT_OK(conv_check_sample(cc->conv[k], a[k], b[k], seed + (uint64_t)k, s, SAMPLES));
        err[k] = conv_check_error(s, SAMPLES, got[k]);
    }
    for (int k = 0; k < 3; k++) free(in[k]);
}

static struct criterion_test_params geo_indices(void) {
    static int idx[N_GEOS];
    for (int i = 0; i < N_GEOS; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)N_GEOS);
}

/* ---- without a GPU: the plan-time decisions ---- */

/* The key of each direction is the forward's geometry in cuDNN's terms:
 * catches a swapped padding or stride axis, the weight's channel count
 * taken as c instead of c/groups, and TF32 or a workspace where the step
 * does not allow them. */
Test(cudnn_plan, key_of_each_direction) {
    conv_case cc;
    conv_case_new(&cc, &geos[8], DG_F32, 1); /* every attribute differs between the axes */
    const unsigned vendor = (unsigned)DG_CONV_VENDOR << DG_STEP_CONV_SHIFT;
    const int dirs[3] = {DG_CUDNN_FORWARD, DG_CUDNN_BACKWARD_DATA, DG_CUDNN_BACKWARD_FILTER};
    for (int k = 0; k < 3; k++) {
        dg_cudnn_key key;
        ASSERT_OK(dg__cudnn_key_of(cc.conv[k], vendor | DG_STEP_TF32, true, &key));
        cr_assert_eq(key.dir, dirs[k], "%s: direction %d", out_names[k], key.dir);
        cr_assert_eq(key.dtype, DG_F32);
        cr_assert(key.tf32, "%s: the step allows TF32", out_names[k]);
        const int x[4] = {1, 4, 13, 11}, w[4] = {5, 4, 3, 2}, y[4] = {1, 5, 5, 5};
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(key.x[i], x[i], "%s: x[%d] = %d, want %d", out_names[k], i, key.x[i], x[i]);
            cr_assert_eq(key.w[i], w[i], "%s: w[%d] = %d, want %d", out_names[k], i, key.w[i], w[i]);
            cr_assert_eq(key.y[i], y[i], "%s: y[%d] = %d, want %d", out_names[k], i, key.y[i], y[i]);
        }
        cr_assert(key.pad[0] == 2 && key.pad[1] == 1, "pad %d,%d", key.pad[0], key.pad[1]);
        cr_assert(key.stride[0] == 3 && key.stride[1] == 2, "stride %d,%d", key.stride[0], key.stride[1]);
        cr_assert(key.dilation[0] == 2 && key.dilation[1] == 3, "dilation %d,%d", key.dilation[0], key.dilation[1]);
        cr_assert_eq(key.groups, 1);
        cr_assert_eq(key.cap, dg__cudnn_workspace_cap(cc.conv[k]));
        dg_cudnn_key plain;
        ASSERT_OK(dg__cudnn_key_of(cc.conv[k], vendor, false, &plain));
        cr_assert(!plain.tf32 && plain.cap == 0, "%s: no TF32 flag, no workspace: tf32 %d, cap %zu", out_names[k],
                  plain.tf32, plain.cap);
        cr_assert(memcmp(&key, &plain, sizeof key) != 0, "the keys of two precisions must differ");
    }
    /* a node of another op is refused, naming it */
    dg_cudnn_key key;
    cr_assert_eq(dg__cudnn_key_of(cc.dy, vendor, true, &key), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "'dy'"), "%s", dg_last_error());
    conv_case_free(&cc);

    conv_case_new(&cc, &geos[3], DG_F32, 1); /* groups 2: w [6, 2, 3, 3] */
    ASSERT_OK(dg__cudnn_key_of(cc.conv[2], vendor, true, &key));
    cr_assert(key.groups == 2 && key.w[0] == 6 && key.w[1] == 2, "groups %d, w [%d, %d, ...]", key.groups, key.w[0],
              key.w[1]);
    conv_case_free(&cc);
}

/* The cap grows with the largest tensor between its floor and ceiling:
 * catches a cap of the smallest tensor, or one without its bounds. */
Test(cudnn_plan, workspace_cap) {
    conv_case small, big;
    conv_case_new(&small, &geos[0], DG_F32, 1);
    cr_assert_eq(dg__cudnn_workspace_cap(small.conv[0]), DG_CUDNN_WS_MIN);
    conv_geo q = {"large", 64, 64, 128, 128, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}; /* x: 256 MiB */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(q.n, q.c, q.h, q.w)), *w = dg_input(g, "w", DG_SHAPE(64, 64, 3, 3));
    dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1});
    cr_assert_not_null(y, "%s", dg_last_error());
    cr_assert_eq(dg__cudnn_workspace_cap(y), DG_CUDNN_WS_MAX, "x of %zu bytes", dg_node_bytes(x));
    dg_graph_free(g);
    conv_geo mid = {"mid", 8, 32, 128, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1}; /* x: 16 MiB */
    conv_case_new(&big, &mid, DG_F32, 1);
    cr_assert_eq(dg__cudnn_workspace_cap(big.conv[1]), 4 * dg_node_bytes(big.x));
    conv_case_free(&big);
    conv_case_free(&small);
}

/* Which heuristic answer is taken: catches taking a failed answer, one
 * over the cap, a tensor-core answer for plain float32, or a
 * non-deterministic one where a deterministic answer fits. */
Test(cudnn_plan, pick) {
    const dg_cudnn_candidate c[] = {
        {7, false, 0, true, false},      /* failed                 */
        {6, true, 1u << 30, true, false}, /* over the cap          */
        {1, true, 4096, true, true},     /* tensor cores           */
        {0, true, 0, false, false},      /* not deterministic      */
        {2, true, 1024, true, false},    /* the one                */
        {3, true, 0, true, false},
    };
    const int n = (int)(sizeof c / sizeof c[0]);
    cr_assert_eq(dg__cudnn_pick(c, n, 1u << 20, true), 4);
    cr_assert_eq(dg__cudnn_pick(c, n, 1u << 20, false), 2, "TF32 allowed: the tensor-core answer first");
    cr_assert_eq(dg__cudnn_pick(c, n, 0, true), 5, "no workspace: the deterministic answer without any");
    cr_assert_eq(dg__cudnn_pick(c, 4, 0, true), 3, "none deterministic fits: the first that does");
    cr_assert_eq(dg__cudnn_pick(c, 2, 1u << 20, true), -1, "nothing fits");
    cr_assert_eq(dg__cudnn_pick(c, 0, 1u << 20, true), -1);
}

Test(cudnn_plan, algorithm_names) {
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_FORWARD, 1), "implicit-precomp-gemm");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_FORWARD, 7), "winograd-nonfused");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_BACKWARD_DATA, 1), "algo-1");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_BACKWARD_DATA, 3), "fft-tiling");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_BACKWARD_FILTER, 3), "algo-3");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_BACKWARD_FILTER, 6), "fft-tiling");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_BACKWARD_FILTER, 7), "unknown");
    cr_assert_str_eq(dg__cudnn_algo_name(DG_CUDNN_FORWARD, -1), "unknown");
}

/* Where libcudnn.so.9 can be opened (the build machines' toolkit, PyTorch's
 * copy on the GPU machine) every entry point resolves and the version is
 * cuDNN 9's: catches a misspelt entry point, which makes the loader
 * refuse the library, without a GPU. Skips, saying why, where the library
 * cannot be opened or the build has no cudnn.h (fails there under
 * DG_REQUIRE_GPU=1). */
Test(cudnn_plan, loads_where_installed) {
    char why[512];
    bool has = dg_gpu_has_cudnn(why, sizeof why);
    if (!has && (strncmp(why, "cuDNN cannot be loaded", 22) == 0 || strncmp(why, "this build has no cuDNN", 23) == 0))
        GPU_SKIP_OR_FAIL(why);
    cr_assert(has && strncmp(why, "cuDNN 9.", 8) == 0, "%s", why);
}

/* ---- cuDNN absent: the loader pointed at a name that does not exist ---- */

#define ABSENT "libcudnn-absent.so.9"

/* the query says why, naming the library and where PyTorch keeps it */
Test(cudnn_absent, query_says_why) {
    dg_gpu_set_cudnn_library(ABSENT);
    char why[512];
    cr_assert(!dg_gpu_has_cudnn(why, sizeof why), "loaded %s: %s", ABSENT, why);
    cr_assert(strstr(why, ABSENT) && strstr(why, "LD_LIBRARY_PATH") && strstr(why, "nvidia/cudnn/lib"), "%s", why);
    cr_assert(!dg_gpu_has_cudnn(NULL, 0), "the second ask gives the same answer");
}

/* a plan that names cuDNN is refused with that reason; the own kernels
 * still plan and run */
Test(cudnn_absent, vendor_plan_refused) {
    dg_gpu_set_cudnn_library(ABSENT);
    dg_backend *be = gpu_open_or_skip(NULL);
    conv_case cc;
    conv_case_new(&cc, &geos[0], DG_F32, 1);
    dg_plan *p = NULL;
    cr_assert_eq(dg_plan_new(&p, cc.g, be, cc.out, 3, &(dg_plan_opts){.conv = DG_CONV_VENDOR}), DG_ERR_UNSUPPORTED);
    cr_assert_null(p);
    cr_assert(strstr(dg_last_error(), ABSENT) && strstr(dg_last_error(), "LD_LIBRARY_PATH"), "%s", dg_last_error());
    dg_gpu_set_conv(be, DG_GPU_CONV_CUDNN);
    cr_assert_eq(dg_plan_new(&p, cc.g, be, cc.out, 3, NULL), DG_ERR_UNSUPPORTED, "DEFAULT with the setting at cuDNN");
    p = conv_case_plan(&cc, be, &(dg_plan_opts){.conv = DG_CONV_IMPLICIT});
    ASSERT_OK(dg_plan_run(p));
    dg_plan_free(p);
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* where cuDNN cannot load, the backend's AUTO default runs every
 * precision on the implicit kernels (16-bit ones widened), never refusing */
Test(cudnn_absent, auto_default_falls_back_to_the_implicit_kernels) {
    dg_gpu_set_cudnn_library(ABSENT);
    dg_backend *be = gpu_open_or_skip(NULL);
    conv_case cc;
    conv_case_new(&cc, &geos[0], DG_BF16, 1);
    dg_plan *p = conv_case_plan(&cc, be, NULL);
    char name[64];
    ASSERT_OK(dg_plan_node_impl(p, cc.conv[0], name, sizeof name));
    cr_assert_str_eq(name, "gpu-implicit-bf16-widened");
    ASSERT_OK(dg_plan_run(p));
    dg_plan_free(p);
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* ---- with a GPU ---- */

static dg_backend *cudnn_open_or_skip(void) {
    dg_backend *be = gpu_open_or_skip(NULL);
    char why[512];
    if (!dg_gpu_has_cudnn(why, sizeof why)) GPU_SKIP_OR_FAIL(why);
    return be;
}

/* Each direction in float32 and with TF32 against float64. Catches a
 * wrong descriptor (padding, stride, dilation, groups, the axes swapped),
 * a direction given the wrong tensors, and an element left unwritten. */
ParameterizedTestParameters(cudnn, agrees_with_float64) { return geo_indices(); }
ParameterizedTest(int *gi, cudnn, agrees_with_float64) {
    dg_backend *be = cudnn_open_or_skip();
    uint64_t seed = test_seed();
    conv_case cc;
    conv_case_new(&cc, &geos[*gi], DG_F32, seed);
    for (int tf32 = 0; tf32 < 2; tf32++) {
        dg_plan *p = conv_case_plan(&cc, be, &(dg_plan_opts){.conv = DG_CONV_VENDOR, .tf32 = tf32});
        float *got[3];
        conv_case_run(&cc, be, p, got);
        double err[3];
        conv_case_errors(&cc, got, seed, err);
        for (int k = 0; k < 3; k++) {
            char impl[64];
            ASSERT_OK(dg_plan_node_impl(p, cc.conv[k], impl, sizeof impl));
            double bound = tf32 ? TF32_TOL : 2 * gamma_of(reduction_length(&cc, k)) + FP32_SLACK;
            cr_assert(err[k] <= bound, "%s [%s, seed %llu, %s]: %s error %.3g of sum|terms|, bound %.3g",
                      tf32 ? "tf32" : "fp32", cc.q.name, (unsigned long long)seed, impl, out_names[k], err[k], bound);
            free(got[k]);
        }
        dg_plan_free(p);
    }
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* The names and the workspace a plan reports: the algorithm is chosen
 * when the plan is made and named after it, in float32 without tensor
 * cores, with TF32 as such; its workspace within the cap (a plan naming
 * cuDNN) or none (a DEFAULT plan with the setting at cuDNN). */
Test(cudnn, names_and_workspace) {
    dg_backend *be = cudnn_open_or_skip();
    conv_case cc;
    conv_case_new(&cc, &geos[9], DG_F32, test_seed());
    const unsigned vendor = (unsigned)DG_CONV_VENDOR << DG_STEP_CONV_SHIFT;
    dg_gpu_set_conv(be, DG_GPU_CONV_CUDNN);
    for (int k = 0; k < 3; k++) {
        const dg_node *n = cc.conv[k];
        size_t ws = dg_backend_step_scratch_bytes(be, n, vendor);
        cr_assert(ws <= dg__cudnn_workspace_cap(n), "%s: workspace %zu over the cap", out_names[k], ws);
        cr_assert_eq(dg_backend_step_scratch_bytes(be, n, 0u), 0, "%s: DEFAULT at cuDNN takes no workspace",
                     out_names[k]);
        char name[64];
        ASSERT_OK(dg_backend_step_impl(be, n, vendor, name, sizeof name));
        cr_assert(strncmp(name, "gpu-cudnn:", 10) == 0 && strcmp(name + 10, "unknown") != 0, "%s: %s",
                  out_names[k], name);
        ASSERT_OK(dg_backend_step_impl(be, n, vendor | DG_STEP_TF32, name, sizeof name));
        cr_assert(strncmp(name, "gpu-cudnn-tf32:", 15) == 0, "%s: %s", out_names[k], name);
    }
    /* the DEFAULT plan runs, on cuDNN without workspace */
    dg_plan *p = conv_case_plan(&cc, be, NULL);
    float *got[3];
    conv_case_run(&cc, be, p, got);
    double err[3];
    conv_case_errors(&cc, got, 7, err);
    for (int k = 0; k < 3; k++) {
        double bound = 2 * gamma_of(reduction_length(&cc, k)) + FP32_SLACK;
        cr_assert(err[k] <= bound, "DEFAULT at cuDNN: %s error %.3g, bound %.3g", out_names[k], err[k], bound);
        free(got[k]);
    }
    dg_plan_free(p);
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* The plan replays as a CUDA graph: the same bits run after run and as
 * node by node (the captured calls are the chosen algorithms, with the
 * workspace in the arena), and no allocation after the first run. */
Test(cudnn, replay_same_bits_no_allocation) {
    dg_backend *be = cudnn_open_or_skip();
    conv_case cc;
    conv_case_new(&cc, &geos[9], DG_F32, test_seed());
    dg_plan *replayed = conv_case_plan(&cc, be, &(dg_plan_opts){.conv = DG_CONV_VENDOR});
    dg_plan *stepped = conv_case_plan(&cc, be, &(dg_plan_opts){.conv = DG_CONV_VENDOR, .no_replay = true});
    float *a[3], *b[3], *c[3];
    conv_case_run(&cc, be, replayed, a); /* captures */
    size_t allocs = dg_backend_n_allocs(be);
    conv_case_run(&cc, be, replayed, b);
    cr_assert_eq(dg_backend_n_allocs(be), allocs, "a replay allocated %zu times",
                 dg_backend_n_allocs(be) - allocs);
    conv_case_run(&cc, be, stepped, c);
    for (int k = 0; k < 3; k++) {
        size_t bytes = dg_node_bytes(cc.out[k]);
        cr_assert(memcmp(a[k], b[k], bytes) == 0, "%s differs between two runs of one plan", out_names[k]);
        cr_assert(memcmp(a[k], c[k], bytes) == 0, "%s differs between the replayed plan and node by node",
                  out_names[k]);
        free(a[k]);
        free(b[k]);
        free(c[k]);
    }
    dg_plan_free(stepped);
    dg_plan_free(replayed);
    conv_case_free(&cc);
    dg_backend_free(be);
}

/* A plan that asks for the own kernels (DG_CONV_OWN) runs the implicit
 * ones in every precision where the default would take cuDNN (TF32, bf16,
 * f16), whatever the backend's setting: the resnet sweep's own rows rest
 * on it. Catches an OWN mapped to the backend's setting (cuDNN here). */
Test(cudnn, own_choice_runs_the_implicit_kernels) {
    dg_backend *be = cudnn_open_or_skip();
    dg_gpu_set_conv(be, DG_GPU_CONV_CUDNN);
    static const dg_dtype dtypes[3] = {DG_F32, DG_BF16, DG_F16};
    for (int v = 0; v < 4; v++) { /* fp32, tf32, bf16, f16 */
        conv_case cc;
        conv_case_new(&cc, &geos[9], dtypes[v < 2 ? 0 : v - 1], test_seed());
        dg_plan *p = conv_case_plan(&cc, be, &(dg_plan_opts){.tf32 = v == 1, .conv = DG_CONV_OWN});
        for (int k = 0; k < 3; k++) {
            char name[64];
            ASSERT_OK(dg_plan_node_impl(p, cc.conv[k], name, sizeof name));
            cr_assert(strncmp(name, "gpu-implicit", 12) == 0, "variant %d %s: '%s'", v, out_names[k], name);
        }
        ASSERT_OK(dg_plan_run(p));
        dg_plan_free(p);
        conv_case_free(&cc);
    }
    dg_backend_free(be);
}

/* The backend's default (AUTO, gpu_backend.h): float32 convolutions on
 * the implicit kernels, TF32, bf16 and f16 ones on cuDNN with the
 * workspace a plan naming cuDNN reserves, so the same algorithm and the
 * same bits as that plan. Catches a default that ignores the precision
 * (the 16-bit step twice as slow on widened copies, reports/h200/
 * resnet.csv) and one that runs cuDNN without its workspace. */
Test(cudnn, auto_default_picks_by_precision) {
    dg_backend *be = cudnn_open_or_skip();
    static const dg_dtype dtypes[3] = {DG_F32, DG_BF16, DG_F16};
    static const char *const want[4] = {"gpu-implicit", "gpu-cudnn-tf32:", "gpu-cudnn-bf16:", "gpu-cudnn-f16:"};
    for (int v = 0; v < 4; v++) { /* fp32, tf32, bf16, f16 */
        conv_case cc;
        conv_case_new(&cc, &geos[9], dtypes[v < 2 ? 0 : v - 1], test_seed());
        dg_plan *dflt = conv_case_plan(&cc, be, &(dg_plan_opts){.tf32 = v == 1});
        dg_plan *vendor = conv_case_plan(&cc, be, &(dg_plan_opts){.tf32 = v == 1, .conv = DG_CONV_VENDOR});
        float *a[3], *b[3];
        conv_case_run(&cc, be, dflt, a);
        conv_case_run(&cc, be, vendor, b);
        for (int k = 0; k < 3; k++) {
            char name[64];
            ASSERT_OK(dg_plan_node_impl(dflt, cc.conv[k], name, sizeof name));
            cr_assert(strncmp(name, want[v], strlen(want[v])) == 0, "variant %d %s: '%s', want '%s...'", v,
                      out_names[k], name, want[v]);
            const unsigned flags = v == 1 ? DG_STEP_TF32 : 0u;
            if (v > 0) {
                cr_assert_eq(dg_backend_step_scratch_bytes(be, cc.conv[k], flags),
                             dg_backend_step_scratch_bytes(be, cc.conv[k],
                                                           flags | (unsigned)DG_CONV_VENDOR << DG_STEP_CONV_SHIFT),
                             "variant %d %s: the default reserves another workspace than cuDNN's", v, out_names[k]);
                cr_assert(memcmp(a[k], b[k], dg_node_bytes(cc.out[k])) == 0,
                          "variant %d %s: the default's bits differ from the cuDNN plan's", v, out_names[k]);
            }
            free(a[k]);
            free(b[k]);
        }
        dg_plan_free(dflt);
        dg_plan_free(vendor);
        conv_case_free(&cc);
    }
    dg_backend_free(be);
}

/* ---- bf16 and f16 (the graph's low-precision convolution rule) ---- */

/* The key of a 16-bit convolution: its dtype, and never TF32 (float
 * compute on tensor cores whatever the plan's flag). No GPU needed. */
Test(cudnn_lowp, key_of_16_bit) {
    const dg_dtype types[2] = {DG_BF16, DG_F16};
    const unsigned vendor = (unsigned)DG_CONV_VENDOR << DG_STEP_CONV_SHIFT;
    for (int t = 0; t < 2; t++) {
        conv_case cc;
        conv_case_new(&cc, &geos[3], types[t], 1);
        for (int k = 0; k < 3; k++) {
            dg_cudnn_key key;
            ASSERT_OK(dg__cudnn_key_of(cc.conv[k], vendor | DG_STEP_TF32, true, &key));
            cr_assert(key.dtype == (int)types[t] && !key.tf32, "%s %s: dtype %d, tf32 %d", dg_dtype_name(types[t]),
                      out_names[k], key.dtype, key.tf32);
        }
        conv_case_free(&cc);
    }
}

/* Each direction of 16-bit io against float64 on the rounded operands:
 * the float32 accumulation within 2 gamma_K and the output's rounding to
 * u16 (bf16: 2^-8, f16: 2^-11), both relative to sum|terms|. Catches
 * descriptors of the wrong data type (the bytes read as another format
 * give garbage), and an accumulation in 16 bits (errors of u16 times
 * sqrt(K) and more). */
ParameterizedTestParameters(cudnn_lowp, agrees_with_float64) { return geo_indices(); }
ParameterizedTest(int *gi, cudnn_lowp, agrees_with_float64) {
    dg_backend *be = cudnn_open_or_skip();
    uint64_t seed = test_seed();
    const dg_dtype types[2] = {DG_BF16, DG_F16};
    for (int t = 0; t < 2; t++) {
        conv_case cc;
        conv_case_new(&cc, &geos[*gi], types[t], seed);
        dg_plan *p = conv_case_plan(&cc, be, &(dg_plan_opts){.conv = DG_CONV_VENDOR});
        float *got[3];
        conv_case_run(&cc, be, p, got);
        double err[3], u16 = types[t] == DG_BF16 ? 0x1.0p-8 : 0x1.0p-11;
        conv_case_errors(&cc, got, seed, err);
        for (int k = 0; k < 3; k++) {
            char impl[64];
            ASSERT_OK(dg_plan_node_impl(p, cc.conv[k], impl, sizeof impl));
            const char *want = types[t] == DG_BF16 ? "gpu-cudnn-bf16:" : "gpu-cudnn-f16:";
            cr_assert(strncmp(impl, want, strlen(want)) == 0, "%s: %s", out_names[k], impl);
            double bound = u16 + 2 * gamma_of(reduction_length(&cc, k)) + FP32_SLACK;
            cr_assert(err[k] <= bound, "%s [%s, seed %llu, %s]: %s error %.3g of sum|terms|, bound %.3g",
                      dg_dtype_name(types[t]), cc.q.name, (unsigned long long)seed, impl, out_names[k], err[k],
                      bound);
            free(got[k]);
        }
        dg_plan_free(p);
        conv_case_free(&cc);
    }
    dg_backend_free(be);
}
