/* test_onednn_conv.c: the CPU backend's oneDNN convolutions (the plan
 * choice DG_CONV_VENDOR, DG_CPU_CONV_ONEDNN). conv2d and both backward ops
 * of odd shapes, groups, depthwise, strides, dilations, asymmetric padding
 * and batch 1, against the float64 check kit (core/check/conv_check.h):
 *   onednn_conv          through a plan: float32, the step's name, scratch
 *                        that is allocated once, ResNet-18's convolutions
 *                        made once each; the choice refused without oneDNN;
 *   onednn_conv_kernels  the primitives themselves in both layouts (plain
 *                        NCHW and oneDNN's blocked formats) and every dtype:
 *                        float32, bf16 (its own kernel) and f16 (widened);
 *   onednn_conv_lowp     bf16 and f16 convolutions built in the graph
 *                        (dg_cast + dg_conv2d): skipped, saying so, where
 *                        the graph does not have them.
 * Tolerance: the check kit's error of an entry is |out - exact| / sum|terms|.
 * Float32: CONV_CHECK_TOL (its file says why). A 16-bit output adds one
 * rounding of the float32 sum: at most u |sum| <= u sum|terms|, u = 2^-8
 * (bf16's 8-bit significand) or 2^-11 (f16's 11 bits); the inputs are the
 * 16-bit values themselves, so nothing else is lost.
 * No test takes a .timeout (each runs in seconds; ctest bounds the suite):
 * with two timed tests side by side under --jobs 2, Criterion 2.4's runner
 * process leaked 48 bytes of its own, which fails the sanitizer build. */
#include <criterion/criterion.h>
#include <omp.h>
#include <string.h>

#include "core/check/conv_check.h"
#include "core/dtype_convert.h"
#include "core/layout.h"
#include "core/nn/resnet.h"
#include "core/nn/train_step.h"
#include "core/testing.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"
#ifdef DG_HAVE_ONEDNN
#include "cpu_backend/cpu_onednn_conv.h"
#endif

#define SKIP_WITHOUT_ONEDNN()                                                                                    \
    do {                                                                                                         \
        if (!dg_cpu_has_onednn()) cr_skip_test("built with DG_ONEDNN=OFF: no oneDNN convolution to test");       \
    } while (0)

typedef struct conv_case {
    const char    *name;
    int64_t        n, c, h, w, o, kh, kw;
    dg_conv2d_opts opts;
} conv_case;

/* each catches its own slip: padding on the wrong side or dropped, the
 * right padding that oneDNN derives (negative where the stride drops a
 * remainder), dilation not counted from 0, grouped weights read as one
 * group, the two axes' attributes swapped, a 1x1 treated as direct */
static const conv_case cases[] = {
    {"odd 7x5, 3x3 pad 1", 2, 3, 7, 5, 5, 3, 3, {.pad = {1, 1}}},
    {"stride 2 dropping a row and a column", 2, 4, 8, 9, 6, 3, 3, {.stride = {2, 2}}},
    {"dilation 2, pad 2", 2, 3, 9, 9, 4, 3, 3, {.pad = {2, 2}, .dilation = {2, 2}}},
    {"2 groups, 5x3 kernel, pad 2x1", 2, 6, 7, 6, 4, 5, 3, {.pad = {2, 1}, .groups = 2}},
    {"depthwise, stride 2", 3, 8, 10, 10, 8, 3, 3, {.stride = {2, 2}, .pad = {1, 1}, .groups = 8}},
    {"batch 1, 1x1", 1, 16, 5, 5, 32, 1, 1, {.groups = 1}},
    {"1x1 stride 2", 2, 8, 7, 7, 12, 1, 1, {.stride = {2, 2}}},
    {"stride 2x1, dilation 1x2", 2, 5, 9, 11, 3, 3, 3, {.stride = {2, 1}, .pad = {1, 1}, .dilation = {1, 2}}},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* y = conv2d(x, w) in dtype t (float32 parameters cast for 16 bits), its
 * loss sum(y * dy) and both gradients; *nodes: y, dx, dw (the convolution
 * nodes themselves); NULL where the graph refuses a 16-bit convolution */
static dg_graph *conv_graph(const conv_case *cs, dg_dtype t, dg_node *nodes[3]) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", DG_SHAPE(cs->n, cs->c, cs->h, cs->w), (dg_init){DG_INIT_UNIFORM, -1, 1, 71});
    int64_t cg = cs->c / (cs->opts.groups > 0 ? cs->opts.groups : 1);
    dg_node *w = dg_param(g, "w", DG_SHAPE(cs->o, cg, cs->kh, cs->kw), (dg_init){DG_INIT_UNIFORM, -1, 1, 72});
    dg_node *xt = t == DG_F32 ? x : dg_cast(g, x, t), *wt = t == DG_F32 ? w : dg_cast(g, w, t);
    dg_node *y = dg_conv2d(g, xt, wt, NULL, cs->opts);
    if (dg_graph_status(g) != DG_OK) {
        dg_graph_free(g);
        return NULL;
    }
    dg_node *yf = t == DG_F32 ? y : dg_cast(g, y, DG_F32);
    dg_node *dy = dg_param(g, "dy", yf->shape, (dg_init){DG_INIT_UNIFORM, -1, 1, 73});
    dg_node *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, yf, dy), DG_ALL_AXES, false), wrt, 2, grads));
    nodes[0] = y;
    for (int i = 0; i < 2; i++) { /* the backward op, through autodiff's casts to float32 */
        nodes[i + 1] = grads[i];
        while (nodes[i + 1]->op == DG_OP_CAST) nodes[i + 1] = nodes[i + 1]->in[0];
    }
    cr_assert_eq(nodes[1]->op, DG_OP_CONV2D_BACKWARD_DATA, "%s", cs->name);
    cr_assert_eq(nodes[2]->op, DG_OP_CONV2D_BACKWARD_WEIGHT, "%s", cs->name);
    return g;
}

/* the check kit's error of out, node n's output, from a and b, its
 * inputs' values: every entry of a small output, else 4096 samples */
static double conv_error(const dg_node *n, const float *a, const float *b, const float *out) {
    int64_t k = dg_node_numel(n);
    int s = k < 4096 ? (int)k : 4096;
    conv_sample *ref = malloc((size_t)s * sizeof *ref);
    cr_assert_not_null(ref);
    ASSERT_OK(conv_check_sample(n, a, b, test_seed() + (uint64_t)n->op, ref, s));
    double e = conv_check_error(ref, s, out);
    free(ref);
    return e;
}

/* outs: the three convolutions and their inputs, each once; how many */
static int with_inputs(dg_node *const nodes[3], dg_node *outs[9]) {
    int n = 0;
    for (int i = 0; i < 3; i++) {
        dg_node *cand[3] = {nodes[i], nodes[i]->in[0], nodes[i]->in[1]};
        for (int j = 0; j < 3; j++) {
            bool seen = false;
            for (int q = 0; q < n; q++) seen |= outs[q] == cand[j];
            if (!seen) outs[n++] = cand[j];
        }
    }
    return n;
}

static double unit_roundoff(dg_dtype t) { return t == DG_BF16 ? 0x1p-8 : t == DG_F16 ? 0x1p-11 : 0; }

/* every case's three convolutions planned with `opts` on a 2-thread CPU
 * backend, run, and checked; the step's name must start with `want` */
static void check_plans(dg_dtype t, const char *want) {
    dg_node *nodes[3];
    dg_graph *g = conv_graph(&cases[0], t, nodes);
    if (!g) cr_skip_test("the graph has no %s convolution in this build: %s", dg_dtype_name(t), dg_last_error());
    dg_graph_free(g);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    for (int c = 0; c < N_CASES; c++) {
        g = conv_graph(&cases[c], t, nodes);
        cr_assert_not_null(g, "%s: %s", cases[c].name, dg_last_error());
        dg_node *outs[9];
        int n_out = with_inputs(nodes, outs);
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, &(dg_plan_opts){.conv = DG_CONV_VENDOR}));
        ASSERT_OK(dg_plan_run(p));
        for (int i = 0; i < 3; i++) {
            char name[64];
            ASSERT_OK(dg_plan_node_impl(p, nodes[i], name, sizeof name));
            cr_assert(strncmp(name, want, strlen(want)) == 0 && name[strlen(want)] == ':', "%s %s: step '%s'",
                      cases[c].name, dg_op_name(nodes[i]->op), name);
            float *a = plan_values_f32(p, nodes[i]->in[0]), *b = plan_values_f32(p, nodes[i]->in[1]);
            float *out = plan_values_f32(p, nodes[i]);
            double e = conv_error(nodes[i], a, b, out), tol = CONV_CHECK_TOL + unit_roundoff(t);
            cr_assert(e <= tol, "%s, %s %s: error %.3g > %.3g (seed %llu)", cases[c].name, dg_dtype_name(t),
                      dg_op_name(nodes[i]->op), e, tol, (unsigned long long)test_seed());
            free(a); free(b); free(out);
        }
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg_backend_free(be);
}

/* Without oneDNN the vendor's convolution is refused when the plan is
 * made, with a message naming the build option; with it, the plan is made
 * and its step named cpu-onednn. */
Test(onednn_conv, vendor_choice_follows_the_build) {
    dg_node *nodes[3];
    dg_graph *g = conv_graph(&cases[0], DG_F32, nodes);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan *p = NULL;
    dg_status st = dg_plan_new(&p, g, be, nodes, 3, &(dg_plan_opts){.conv = DG_CONV_VENDOR});
    if (dg_cpu_has_onednn()) {
        ASSERT_OK(st);
        char name[64];
        ASSERT_OK(dg_plan_node_impl(p, nodes[0], name, sizeof name));
        cr_assert(strncmp(name, "cpu-onednn:", 11) == 0, "%s", name);
    } else {
        cr_assert_eq(st, DG_ERR_UNSUPPORTED);
        cr_assert(strstr(dg_last_error(), "DG_ONEDNN=OFF"), "%s", dg_last_error());
    }
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

/* Float32 through the plan, every case and direction. */
Test(onednn_conv, every_direction_matches_float64) {
    SKIP_WITHOUT_ONEDNN();
    check_plans(DG_F32, "cpu-onednn");
}

/* The backend's own default set to oneDNN: a plan that leaves the choice
 * to it runs oneDNN too, in the backend's workspace (its scratch is the
 * im2col columns, so that the setting may change again). */
Test(onednn_conv, backend_default_runs_onednn) {
    SKIP_WITHOUT_ONEDNN();
    dg_node *nodes[3];
    dg_graph *g = conv_graph(&cases[3], DG_F32, nodes);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_cpu_set_conv(be, DG_CPU_CONV_ONEDNN);
    dg_node *outs[9];
    int n_out = with_inputs(nodes, outs);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, NULL));
    cr_assert_eq(dg_backend_step_scratch_bytes(be, nodes[1], 0), dg_node_scratch_bytes(nodes[1]));
    ASSERT_OK(dg_plan_run(p));
    char name[64];
    ASSERT_OK(dg_plan_node_impl(p, nodes[1], name, sizeof name));
    cr_assert(strncmp(name, "cpu-onednn:", 11) == 0, "%s", name);
    float *a = plan_values_f32(p, nodes[1]->in[0]), *b = plan_values_f32(p, nodes[1]->in[1]);
    float *out = plan_values_f32(p, nodes[1]);
    double e = conv_error(nodes[1], a, b, out);
    cr_assert(e <= CONV_CHECK_TOL, "dx: error %.3g", e);
    free(a); free(b); free(out);
    long created, runs;
    dg_cpu_onednn_conv_counts(be, &created, &runs);
    cr_assert(created == 3 && runs == 3, "%ld created, %ld runs", created, runs);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

/* The primitives are made with the plan, and its steps allocate nothing:
 * two runs leave the backend's allocation count and the cache as the plan
 * left them; the vendor choice reserves scratch in the plan for each step.
 * Catches a primitive made at the first run (timed), a scratchpad oneDNN
 * allocates itself, scratch asked for and not reserved. */
Test(onednn_conv, plan_makes_primitives_and_runs_allocate_nothing) {
    SKIP_WITHOUT_ONEDNN();
    dg_node *nodes[3];
    dg_graph *g = conv_graph(&cases[4], DG_F32, nodes);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan_opts o = {.conv = DG_CONV_VENDOR};
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, nodes, 3, &o));
    long created, runs;
    dg_cpu_onednn_conv_counts(be, &created, &runs);
    cr_assert(created == 3 && runs == 0, "after the plan: %ld created, %ld runs", created, runs);
    for (int i = 0; i < 3; i++)
        cr_assert_gt(dg_backend_step_scratch_bytes(be, nodes[i], dg_step_flags(&o)), 0, "%s: no scratch reserved",
                     dg_op_name(nodes[i]->op));
    ASSERT_OK(dg_plan_run(p));
    size_t allocs = dg_backend_n_allocs(be);
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_plan_run(p));
    cr_assert_eq(dg_backend_n_allocs(be), allocs);
    dg_cpu_onednn_conv_counts(be, &created, &runs);
    cr_assert(created == 3 && runs == 9, "three runs: %ld created, %ld runs", created, runs);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

static bool same_geometry(const dg_node *a, const dg_node *b) {
    if (a->op != b->op) return false;
    dg_conv_dims x = dg_conv_dims_of(a), y = dg_conv_dims_of(b);
    return x.n == y.n && x.c == y.c && x.h == y.h && x.w == y.w && x.o == y.o && x.oh == y.oh && x.ow == y.ow &&
           x.kh == y.kh && x.kw == y.kw && x.sh == y.sh && x.sw == y.sw && x.ph == y.ph && x.pw == y.pw;
}

/* ResNet-18's training step (CIFAR stem, batch 2) planned with oneDNN's
 * convolutions: one primitive per distinct geometry and direction, more
 * than a 16-entry cache holds; a second plan of the same step and a run of
 * each make none. Catches a cache that evicts (the first plan's primitives
 * made again for the second) or keys too finely. */
Test(onednn_conv, resnet18_convolutions_made_once) {
    SKIP_WITHOUT_ONEDNN();
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_train_step ts;
    dg_resnet_cfg cfg = dg_resnet18_default(DG_RESNET_CIFAR);
    ASSERT_OK(dg_resnet18_new(g, &cfg, 1, &m));
    dg_optim opt = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    ASSERT_OK(dg_train_step_build(g, &m, 2, &opt, &ts));
    long distinct = 0, steps = 0;
    for (int i = 0; i < dg_graph_size(g); i++) {
        const dg_node *n = dg_graph_node(g, i);
        if (n->op != DG_OP_CONV2D && n->op != DG_OP_CONV2D_BACKWARD_DATA && n->op != DG_OP_CONV2D_BACKWARD_WEIGHT)
            continue;
        steps++;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = same_geometry(dg_graph_node(g, j), n);
        distinct += !seen;
    }
    cr_assert_gt(distinct, 16, "ResNet-18's step has %ld distinct convolutions", distinct);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan_opts o = {.conv = DG_CONV_VENDOR};
    dg_plan *p, *q;
    ASSERT_OK(dg_plan_new(&p, g, be, ts.outputs, ts.n_outputs, &o));
    long created, runs;
    dg_cpu_onednn_conv_counts(be, &created, &runs);
    cr_assert_eq(created, distinct, "the first plan: %ld created for %ld distinct", created, distinct);
    ASSERT_OK(dg_plan_new(&q, g, be, ts.outputs, ts.n_outputs, &o));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_plan_run(q));
    dg_cpu_onednn_conv_counts(be, &created, &runs);
    cr_assert(created == distinct && runs == 2 * steps, "two plans run: %ld created, %ld runs of %ld steps", created,
              runs, steps);
    dg_plan_free(q);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

#ifdef DG_HAVE_ONEDNN
/* n's values as dtype t: raw holds them as stored, val as float32 */
static void fill_as(dg_dtype t, const float *src, void *raw, float *val, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (t == DG_F32) {
            ((float *)raw)[i] = val[i] = src[i];
            continue;
        }
        uint16_t h = t == DG_BF16 ? dg__f32_to_bf16(src[i]) : dg__f32_to_f16(src[i]);
        ((uint16_t *)raw)[i] = h;
        val[i] = t == DG_BF16 ? dg__bf16_to_f32(h) : dg__f16_to_f32(h);
    }
}

/* node n's convolution by the primitive of dtype t and layout `blocked`,
 * from n's inputs' init (rounded to t), checked; *widened said back */
static void check_primitive(dg_onednn_convs *o, const dg_node *n, dg_dtype t, bool blocked, const char *what,
                            bool *widened) {
    dg_conv_dims d = dg_conv_dims_of(n);
    dg_onednn_conv k = {n->op, t, blocked, omp_get_max_threads(), d.n, d.c, d.h, d.w, d.o, d.oh, d.ow, d.kh, d.kw,
                        d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.groups};
    dg_onednn_conv_info info;
    ASSERT_OK(dg__onednn_conv_prepare(o, &k, &info));
    *widened = info.widened;
    size_t es = t == DG_F32 ? 4 : 2;
    int64_t na = dg_node_numel(n->in[0]), nb = dg_node_numel(n->in[1]), ny = dg_node_numel(n);
    float *src = malloc((size_t)(na > nb ? na : nb) * 4), *va = malloc((size_t)na * 4), *vb = malloc((size_t)nb * 4);
    float *out = malloc((size_t)ny * 4);
    void *ra = malloc((size_t)na * es), *rb = malloc((size_t)nb * es), *ry = malloc((size_t)ny * es);
    void *scratch = info.scratch ? aligned_alloc(64, (info.scratch + 63) & ~(size_t)63) : NULL;
    cr_assert(src && va && vb && out && ra && rb && ry && (scratch || !info.scratch));
    ASSERT_OK(dg_init_fill((dg_init){DG_INIT_UNIFORM, -1, 1, 81}, src, na));
    fill_as(t, src, ra, va, na);
    ASSERT_OK(dg_init_fill((dg_init){DG_INIT_UNIFORM, -1, 1, 82}, src, nb));
    fill_as(t, src, rb, vb, nb);
    memset(ry, 0xff, (size_t)ny * es); /* NaN: an entry left unwritten fails */
    ASSERT_OK(dg__onednn_conv_run(o, &k, ra, rb, ry, scratch));
    for (int64_t i = 0; i < ny; i++)
        out[i] = t == DG_F32 ? ((float *)ry)[i] : t == DG_BF16 ? dg__bf16_to_f32(((uint16_t *)ry)[i])
                                                               : dg__f16_to_f32(((uint16_t *)ry)[i]);
    double e = conv_error(n, va, vb, out), tol = CONV_CHECK_TOL + unit_roundoff(t);
    cr_assert(e <= tol, "%s, %s %s, %s (%s): error %.3g > %.3g", what, dg_dtype_name(t), dg_op_name(n->op),
              blocked ? "blocked" : "plain", info.impl, e, tol);
    free(src); free(va); free(vb); free(out); free(ra); free(rb); free(ry); free(scratch);
}

/* Every case, direction, dtype and layout through the primitives (the
 * graph's nodes give the geometry only). bf16 runs oneDNN's own kernel
 * where the CPU has AVX512-BF16 (else it is widened, as f16 always is on
 * the CPU in oneDNN 2.6). Catches a layout's reorder skipped or run the
 * wrong way, a 16-bit operand read as float32, the widened output not
 * rounded into the output. */
Test(onednn_conv_kernels, every_dtype_and_layout_matches_float64) {
    dg_onednn_convs *o;
    ASSERT_OK(dg__onednn_convs_new(&o));
    const dg_dtype types[] = {DG_F32, DG_BF16, DG_F16};
    bool widened[3] = {false, false, false};
    for (int c = 0; c < N_CASES; c++) {
        dg_node *nodes[3];
        dg_graph *g = conv_graph(&cases[c], DG_F32, nodes);
        for (int t = 0; t < 3; t++)
            for (int layout = 0; layout < 2; layout++)
                for (int i = 0; i < 3; i++) {
                    bool w;
                    check_primitive(o, nodes[i], types[t], layout, cases[c].name, &w);
                    widened[t] |= w;
                }
        dg_graph_free(g);
    }
    cr_assert(!widened[0], "float32 widened");
    cr_assert(widened[2], "oneDNN 2.6 has no f16 convolution on the CPU: f16 should have been widened");
    long created, runs;
    dg__onednn_conv_counts(o, &created, &runs);
    cr_assert(created == N_CASES * 18 && runs == created, "%ld created, %ld runs", created, runs);
    dg__onednn_convs_free(o);
}
#endif

/* bf16 and f16 convolutions in the graph (the graph's 16-bit convolution
 * rule): output in the operands' dtype, the float32 inputs' gradients
 * float32 through autodiff's casts; the step named for the dtype: bf16 by oneDNN's own
 * kernel where the CPU has AVX512-BF16 or AMX, else widened. */
Test(onednn_conv_lowp, bf16_matches_float64) {
    SKIP_WITHOUT_ONEDNN();
    char info[128];
    dg_cpu_onednn_info(info, sizeof info);
    bool native = strstr(info, "ISA: avx512_core_bf16") || strstr(info, "ISA: avx512_core_amx");
    check_plans(DG_BF16, native ? "cpu-onednn-bf16" : "cpu-onednn-bf16-widened");
}

Test(onednn_conv_lowp, f16_is_widened_and_matches_float64) {
    SKIP_WITHOUT_ONEDNN();
    check_plans(DG_F16, "cpu-onednn-f16-widened");
}
