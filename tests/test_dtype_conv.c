/* test_dtype_conv.c: convolutions of bf16 and f16 operands. The graph's
 * rule (two operands of one 16-bit dtype give that dtype; mixes refused by
 * name; pools and batch norm stay float32), the casts autodiff puts around
 * the backward ops, and each backend's float32 kernels run on the widened
 * operands: every CPU strategy and both GPU kernels, forward and both
 * backward ops, against the float32 convolution of the same rounded values
 * on the same kernels, with the step names that say "widened". The float64
 * precision table's conv rows run in test_dtype.c. GPU tests skip (or fail
 * under DG_REQUIRE_GPU=1) where no device answers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/round.h"
#include "core/layout.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

static dg_node *find_op(const dg_graph *g, dg_op op) {
    for (int i = 0; i < dg_graph_size(g); i++)
        if (dg_graph_node(g, i)->op == op) return dg_graph_node(g, i);
    return NULL;
}

/* ---- the graph's rule ------------------------------------------------- */

Test(dtype_conv_graph, two_operands_of_one_16bit_dtype_give_that_dtype) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 4, 6, 6)), *w = dg_input(g, "w", DG_SHAPE(5, 4, 3, 3));
    dg_node *b = dg_input(g, "b", DG_SHAPE(5));
    const dg_conv2d_opts o = {.pad = {1, 1}};
    dg_node *yb = dg_conv2d(g, dg_cast(g, x, DG_BF16), dg_cast(g, w, DG_BF16), NULL, o);
    dg_node *yh = dg_conv2d(g, dg_cast(g, x, DG_F16), dg_cast(g, w, DG_F16), NULL, o);
    cr_assert(yb && yb->dtype == DG_BF16 && dg_node_bytes(yb) == 2 * 5 * 6 * 6 * 2, "%s", dg_last_error());
    cr_assert(yh && yh->dtype == DG_F16);
    cr_assert_eq(dg_conv2d(g, x, w, NULL, o)->dtype, DG_F32, "float32 stays float32");
    dg_node *yb_bias = dg_conv2d(g, dg_cast(g, x, DG_BF16), dg_cast(g, w, DG_BF16), b, o);
    cr_assert(yb_bias && yb_bias->dtype == DG_F32, "a float32 bias makes the sum float32");
    cr_assert_eq(dg_graph_status(g), DG_OK, "%s", dg_last_error());
    dg_graph_free(g);

    struct { const char *what, *msg; } bad[] = {
        {"conv2d of f32 x and bf16 w", "conv2d: inputs 'x' (f32) and "},
        {"conv2d of bf16 x and f16 w", "(bf16) and "},
        {"max_pool2d of bf16", "max_pool2d takes float32"},
        {"avg_pool2d of f16", "avg_pool2d takes float32"},
        {"batch_norm of bf16", "batch_norm takes float32"},
        {"conv2d of bf16 with a bf16 bias", "conv2d: input 'cast"},
    };
    for (int i = 0; i < 6; i++) {
        g = dg_graph_new();
        x = dg_input(g, "x", DG_SHAPE(2, 4, 6, 6));
        w = dg_input(g, "w", DG_SHAPE(5, 4, 3, 3));
        dg_node *xb = dg_cast(g, x, DG_BF16), *c4 = dg_input(g, "c", DG_SHAPE(4)), *r = NULL;
        switch (i) {
        case 0: r = dg_conv2d(g, x, dg_cast(g, w, DG_BF16), NULL, o); break;
        case 1: r = dg_conv2d(g, xb, dg_cast(g, w, DG_F16), NULL, o); break;
        case 2: r = dg_max_pool2d(g, xb, (dg_pool2d_opts){.kernel = {2, 2}}); break;
        case 3: r = dg_avg_pool2d(g, dg_cast(g, x, DG_F16), (dg_pool2d_opts){.kernel = {2, 2}}); break;
        case 4: r = dg_batch_norm(g, xb, c4, c4, 1e-5f); break;
        case 5:
            r = dg_conv2d(g, xb, dg_cast(g, w, DG_BF16), dg_cast(g, dg_input(g, "b", DG_SHAPE(5)), DG_BF16), o);
            break;
        }
        cr_assert_null(r, "%s was accepted", bad[i].what);
        cr_assert_eq(dg_graph_status(g), DG_ERR_INVALID, "%s", bad[i].what);
        cr_assert(strstr(dg_last_error(), bad[i].msg), "%s: '%s'", bad[i].what, dg_last_error());
        if (i == 1) cr_assert(strstr(dg_last_error(), "(f16)"), "%s", dg_last_error());
        dg_graph_free(g);
    }
}

/* dg_grad of a bf16 or f16 convolution of casts of float32 x and w: dy
 * cast to the dtype, both backward ops in it, their results cast to
 * float32 where they are accumulated into the casts' (float32) gradients,
 * so x's and w's gradients are float32 (a float32 conv: no casts at all).
 * Fails where autodiff hands the backward ops the float32 dy, leaves the
 * casts' gradients 16-bit, or casts a float32 convolution's. */
static void check_backward_casts(dg_dtype t) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", DG_SHAPE(2, 3, 5, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 1});
    dg_node *w = dg_param(g, "w", DG_SHAPE(4, 3, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 2});
    dg_node *y = dg_conv2d(g, dg_cast(g, x, t), dg_cast(g, w, t), NULL, (dg_conv2d_opts){0});
    dg_node *loss = dg_sum(g, dg_cast(g, y, DG_F32), DG_ALL_AXES, false);
    dg_node *wrt[2] = {x, w}, *gr[2];
    ASSERT_OK(dg_grad(g, loss, wrt, 2, gr));
    const dg_op ops[2] = {DG_OP_CONV2D_BACKWARD_DATA, DG_OP_CONV2D_BACKWARD_WEIGHT};
    for (int i = 0; i < 2; i++) {
        const dg_node *bw = find_op(g, ops[i]);
        cr_assert_not_null(bw);
        cr_assert_eq(gr[i]->dtype, DG_F32, "%s: the gradient is float32", dg_op_name(ops[i]));
        cr_assert_eq(bw->dtype, t, "%s runs in the operands' dtype", dg_op_name(ops[i]));
        cr_assert_eq(bw->in[0]->dtype, t, "%s: dy in the operands' dtype", dg_op_name(ops[i]));
        cr_assert_eq(bw->in[1]->dtype, t);
        if (t == DG_F32) {
            cr_assert_eq(gr[i], bw, "a float32 convolution's gradient is its backward op");
            cr_assert_neq(bw->in[0]->op, DG_OP_CAST, "no cast of a float32 dy");
        } else {
            cr_assert(gr[i]->op == DG_OP_CAST && gr[i]->in[0] == bw, "%s: its result cast to float32",
                      dg_op_name(ops[i]));
            cr_assert(bw->in[0]->op == DG_OP_CAST && bw->in[0]->in[0]->dtype == DG_F32, "dy: float32 cast");
        }
    }
    cr_assert_eq(find_op(g, ops[0])->in[0], find_op(g, ops[1])->in[0], "one copy of dy for both");
    dg_graph_free(g);
}

Test(dtype_conv_graph, autodiff_casts_around_the_bf16_backward_ops) { check_backward_casts(DG_BF16); }
Test(dtype_conv_graph, autodiff_casts_around_the_f16_backward_ops) { check_backward_casts(DG_F16); }
Test(dtype_conv_graph, a_float32_convolution_has_no_casts) { check_backward_casts(DG_F32); }

/* ---- the backends' widened kernels ------------------------------------- */

/* y = conv(x, w) in dtype t, read as float32; loss sum(y r); dx, dw */
typedef struct conv_graph { dg_graph *g; dg_node *x, *w, *r, *conv, *y, *grad[2]; } conv_graph;

static void conv_graph_new(conv_graph *cg, dg_dtype t, dg_shape xs, dg_shape ws, dg_conv2d_opts o) {
    cg->g = dg_graph_new();
    cg->x = dg_input(cg->g, "x", xs);
    cg->w = dg_input(cg->g, "w", ws);
    cg->conv = dg_conv2d(cg->g, dg_cast(cg->g, cg->x, t), dg_cast(cg->g, cg->w, t), NULL, o);
    cg->y = dg_cast(cg->g, cg->conv, DG_F32);
    cr_assert_not_null(cg->y, "%s", dg_last_error());
    cg->r = dg_input(cg->g, "r", cg->y->shape);
    dg_node *loss = dg_sum(cg->g, dg_mul(cg->g, cg->y, cg->r), DG_ALL_AXES, false);
    dg_node *wrt[2] = {cg->x, cg->w};
    ASSERT_OK(dg_grad(cg->g, loss, wrt, 2, cg->grad));
}

typedef struct conv_run { float *out[3]; char impl[3][64]; size_t scratch; } conv_run;

/* y, dx, dw of cg on be under the plan's conv choice, from values v[3]
 * (x, w, r), and what the three convolution steps ran as */
static void conv_run_on(const conv_graph *cg, dg_backend *be, dg_conv_impl impl, float *const *v, conv_run *out) {
    dg_node *outs[3] = {cg->y, cg->grad[0], cg->grad[1]}, *in[3] = {cg->x, cg->w, cg->r};
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, cg->g, be, outs, 3, &(dg_plan_opts){.conv = impl}));
    for (int i = 0; i < 3; i++) ASSERT_OK(dg_plan_set(p, in[i], v[i], dg_node_bytes(in[i])));
    ASSERT_OK(dg_plan_run(p));
    const dg_op ops[3] = {DG_OP_CONV2D, DG_OP_CONV2D_BACKWARD_DATA, DG_OP_CONV2D_BACKWARD_WEIGHT};
    for (int i = 0; i < 3; i++) {
        out->out[i] = malloc(dg_node_bytes(outs[i]));
        cr_assert_not_null(out->out[i]);
        ASSERT_OK(dg_plan_get(p, outs[i], out->out[i], dg_node_bytes(outs[i])));
        ASSERT_OK(dg_plan_node_impl(p, find_op(cg->g, ops[i]), out->impl[i], sizeof out->impl[i]));
    }
    out->scratch = dg_backend_step_scratch_bytes(be, cg->conv, dg_step_flags(&(dg_plan_opts){.conv = impl}));
    dg_plan_free(p);
}

typedef struct conv_param {
    bool         gpu;
    dg_conv_impl impl;
    dg_dtype     dtype;
    int          geometry; /* 0: 3x3 padding 1; 1: 3x3 stride 2, two groups; 2: 1x1 */
} conv_param;

static const struct { dg_shape x, w; dg_conv2d_opts o; } geometries[3] = {
    {DG_SHAPE(4, 8, 10, 10), DG_SHAPE(12, 8, 3, 3), {.pad = {1, 1}}},
    {DG_SHAPE(3, 8, 11, 9), DG_SHAPE(6, 4, 3, 3), {.stride = {2, 2}, .pad = {1, 1}, .groups = 2}},
    {DG_SHAPE(2, 16, 7, 7), DG_SHAPE(8, 16, 1, 1), {.groups = 1}},
};

/* The 16-bit graph against the float32 one on the same kernels, both fed
 * the values rounded to t (x, w, and r, so dy is the same either side):
 * the float32 sums are the same sums in the same order, so each 16-bit
 * result is the float32 one rounded once, within u of it (2^-8 bf16, 2^-11
 * f16; 1e-6 of the largest for the sums' last bits). A truncating store is
 * off by up to 2u, an operand widened as the other dtype or a scratch
 * region overlapping another by far more. The steps' names end in
 * "-<dtype>-widened" where the float32 ones' do not. */
static void check_widened(const conv_param *q) {
    dg_backend *be = test_backend_open(q->gpu);
    /* DEFAULT is the own strategies' rule: the backend's AUTO would run
     * some float32 steps by oneDNN and their 16-bit twins by the own */
    if (!q->gpu) dg_cpu_set_conv(be, DG_CPU_CONV_DEFAULT);
    conv_graph lo, f32;
    conv_graph_new(&lo, q->dtype, geometries[q->geometry].x, geometries[q->geometry].w, geometries[q->geometry].o);
    conv_graph_new(&f32, DG_F32, geometries[q->geometry].x, geometries[q->geometry].w, geometries[q->geometry].o);
    float *v[3];
    dg_node *in[3] = {lo.x, lo.w, lo.r};
    dg_rng rng = dg_rng_new(test_seed());
    for (int i = 0; i < 3; i++) {
        int64_t n = dg_node_numel(in[i]);
        v[i] = malloc((size_t)n * sizeof(float));
        uint16_t *bits = malloc((size_t)n * sizeof(uint16_t));
        cr_assert(v[i] && bits);
        for (int64_t j = 0; j < n; j++) v[i][j] = (float)(4.0 * dg_rng_uniform(&rng) - 2.0);
        dg_check_round(q->dtype, v[i], bits, (size_t)n);
        free(bits);
    }
    conv_run a, b;
    conv_run_on(&lo, be, q->impl, v, &a);
    conv_run_on(&f32, be, q->impl, v, &b);
    double u = q->dtype == DG_BF16 ? 0x1p-8 : 0x1p-11;
    const char *what[3] = {"conv2d", "backward_data", "backward_weight"};
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%s-widened", dg_dtype_name(q->dtype));
    dg_node *outs[3] = {lo.y, lo.grad[0], lo.grad[1]};
    for (int i = 0; i < 3; i++) {
        int64_t n = dg_node_numel(outs[i]);
        double top = 0;
        for (int64_t j = 0; j < n; j++) top = fmax(top, fabs(b.out[i][j]));
        for (int64_t j = 0; j < n; j++) {
            double want = b.out[i][j], got = a.out[i][j];
            cr_assert(fabs(got - want) <= u * fabs(want) + 1e-6 * top, "%s %s %s element %lld: %.9g, float32 %.9g",
                      what[i], a.impl[i], dg_dtype_name(q->dtype), (long long)j, got, want);
        }
        size_t la = strlen(a.impl[i]), ls = strlen(suffix);
        cr_assert(la > ls && strcmp(a.impl[i] + la - ls, suffix) == 0, "%s runs as '%s'", what[i], a.impl[i]);
        cr_assert(strncmp(a.impl[i], b.impl[i], la - ls) == 0 && strlen(b.impl[i]) == la - ls,
                  "%s: '%s' is '%s' widened", what[i], a.impl[i], b.impl[i]);
    }
    /* the step reserves the float32 copies beside its kernels' scratch */
    size_t copies = (size_t)dg_conv_widened_of(lo.conv).inner * sizeof(float);
    cr_assert(copies >= 4 * (size_t)(dg_node_numel(lo.conv->in[0]) + dg_node_numel(lo.conv->in[1]) +
                                    dg_node_numel(lo.conv)));
    cr_assert_eq(a.scratch, copies + b.scratch, "scratch %zu: copies %zu and the float32 step's %zu", a.scratch,
                 copies, b.scratch);
    for (int i = 0; i < 3; i++) {
        free(v[i]);
        free(a.out[i]);
        free(b.out[i]);
    }
    dg_graph_free(lo.g);
    dg_graph_free(f32.g);
    dg_backend_free(be);
}

static struct criterion_test_params params_of(bool gpu) {
    static conv_param cpu_p[5 * 2 * 3], gpu_p[2 * 2 * 3];
    static const dg_conv_impl cpu_impls[5] = {DG_CONV_DEFAULT, DG_CONV_IM2COL, DG_CONV_IM2COL_BATCH, DG_CONV_SHIFT,
                                              DG_CONV_IM2COL_CHANNELS};
    static const dg_conv_impl gpu_impls[2] = {DG_CONV_IM2COL, DG_CONV_IMPLICIT};
    conv_param *p = gpu ? gpu_p : cpu_p;
    int n_impl = gpu ? 2 : 5, k = 0;
    for (int i = 0; i < n_impl; i++)
        for (int t = 0; t < 2; t++)
            for (int geo = 0; geo < 3; geo++)
                p[k++] = (conv_param){gpu, gpu ? gpu_impls[i] : cpu_impls[i], t ? DG_F16 : DG_BF16, geo};
    return cr_make_param_array(conv_param, p, (size_t)k);
}

ParameterizedTestParameters(dtype_conv, cpu_strategies_widened) { return params_of(false); }
ParameterizedTest(conv_param *q, dtype_conv, cpu_strategies_widened) { check_widened(q); }

ParameterizedTestParameters(dtype_conv, gpu_kernels_widened) { return params_of(true); }
ParameterizedTest(conv_param *q, dtype_conv, gpu_kernels_widened) { check_widened(q); }

/* A plan's estimate for no backend in particular (the portable kernels)
 * reserves a 16-bit convolution's float32 copies as the CPU's plan does:
 * the two arenas agree, the copies more than the 16-bit tensors saved. */
Test(dtype_conv_cpu, the_estimate_for_no_backend_holds_the_float32_copies) {
    conv_graph cg;
    conv_graph_new(&cg, DG_BF16, DG_SHAPE(4, 8, 10, 10), DG_SHAPE(12, 8, 3, 3), (dg_conv2d_opts){.pad = {1, 1}});
    dg_node *outs[3] = {cg.y, cg.grad[0], cg.grad[1]};
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    dg_plan_stats none, on_cpu;
    ASSERT_OK(dg_plan_estimate(cg.g, NULL, outs, 3, NULL, &none));
    ASSERT_OK(dg_plan_estimate(cg.g, cpu, outs, 3, NULL, &on_cpu));
    cr_assert_eq(none.arena_bytes, on_cpu.arena_bytes, "no backend %zu, cpu %zu", none.arena_bytes,
                 on_cpu.arena_bytes);
    cr_assert_geq(none.live_bytes, dg_node_scratch_bytes(cg.conv) + 4 * (size_t)dg_node_numel(cg.conv));
    dg_backend_free(cpu);
    dg_graph_free(cg.g);
}

/* A 16-bit convolution's step made outside a plan (dg_step_of: no
 * scratch) is refused with a message, not run through a NULL scratch, even
 * where the float32 kernel needs none of its own (a 1x1). The own
 * strategy is set: the backend's default takes oneDNN's bf16 kernel on an
 * AVX512-BF16 or AMX CPU, which widens nothing (seen on the H200's host). */
Test(dtype_conv_cpu, a_bf16_step_without_scratch_is_refused) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_cast(g, dg_input(g, "x", DG_SHAPE(1, 2, 3, 3)), DG_BF16);
    dg_node *w = dg_cast(g, dg_input(g, "w", DG_SHAPE(2, 2, 1, 1)), DG_BF16);
    dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){0});
    cr_assert(y && dg_node_scratch_bytes(y) == 0, "a 1x1 needs no im2col columns");
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    dg_cpu_set_conv(cpu, DG_CPU_CONV_PASSES);
    cr_assert(dg_backend_step_scratch_bytes(cpu, y, 0) > 0, "its float32 copies need scratch");
    uint16_t xv[18] = {0}, wv[4] = {0}, yv[18];
    void *data[6] = {NULL, xv, NULL, wv, yv};
    cr_assert(x->id == 1 && w->id == 3 && y->id == 4);
    dg_step s = dg_step_of(y, data, 0);
    cr_assert_eq(dg_backend_compute(cpu, &s), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "needs scratch"), "%s", dg_last_error());
    dg_backend_free(cpu);
    dg_graph_free(g);
}
