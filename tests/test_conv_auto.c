/* test_conv_auto.c: the CPU backend's default convolution,
 * DG_CPU_CONV_AUTO (cpu_conv_auto.c; docs/PERF.md, "The CPU's default
 * convolution per precision and layer"):
 *   conv_auto/rule_*      the rule alone, the ISA given (AMX or not), so it
 *                         runs on any CPU: ResNet-18's CIFAR layers as
 *                         measured, every pass, fp32, f16 and bf16;
 *   conv_auto/backend_*   a plan that leaves the choice to a backend left
 *                         at its default: each node's step named by what
 *                         the rule picks for it on this CPU (the own
 *                         everywhere without oneDNN), results against the
 *                         float64 check kit; explicit choices unchanged.
 * The expected picks are written out per case, not computed by the rule:
 * a rule inverted (bf16 by oneDNN without AMX, the stem or a strided dw on
 * oneDNN, the channels counted over groups) fails here. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/check/conv_check.h"
#include "core/dtype_convert.h"
#include "core/layout.h"
#include "core/testing.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_kernels.h"
#include "test_util.h"

static const dg_op conv_ops[3] = {DG_OP_CONV2D, DG_OP_CONV2D_BACKWARD_DATA, DG_OP_CONV2D_BACKWARD_WEIGHT};

/* ResNet-18's CIFAR layers (3x3 "same" or 1x1 shortcuts, at batch 8) and
 * the float32 pick per pass (forward, dx, dw): 'D' oneDNN, 'O' the own */
typedef struct r18_layer {
    const char *name;
    int64_t     c, hw, o, k, stride;
    const char *fp32;
} r18_layer;

static const r18_layer r18[] = {
    {"stem", 3, 32, 64, 3, 1, "OOO"},        {"l1.0-conv1", 64, 32, 64, 3, 1, "DDD"},
    {"l2.0-conv1", 64, 32, 128, 3, 2, "DDO"}, {"l2.0-conv2", 128, 16, 128, 3, 1, "DDD"},
    {"l2.0-down", 64, 32, 128, 1, 2, "DDO"},  {"l3.0-conv1", 128, 16, 256, 3, 2, "DDO"},
    {"l3.0-conv2", 256, 8, 256, 3, 1, "DDD"}, {"l3.0-down", 128, 16, 256, 1, 2, "DDO"},
    {"l4.0-conv1", 256, 8, 512, 3, 2, "DDO"}, {"l4.0-conv2", 512, 4, 512, 3, 1, "DDD"},
    {"l4.0-down", 256, 8, 512, 1, 2, "DDO"},
};

/* The rule per precision, layer, pass and ISA: bf16 all oneDNN with AMX
 * and all own without; fp32 and f16 as the table says, whatever the ISA. */
Test(conv_auto, rule_picks_by_precision_layer_pass_and_isa) {
    for (size_t i = 0; i < sizeof r18 / sizeof r18[0]; i++) {
        const r18_layer *l = &r18[i];
        dg_graph *g = dg_graph_new();
        int64_t pad = l->k / 2;
        dg_node *y = dg_conv2d(g, dg_input(g, "x", DG_SHAPE(8, l->c, l->hw, l->hw)),
                               dg_input(g, "w", DG_SHAPE(l->o, l->c, l->k, l->k)), NULL,
                               (dg_conv2d_opts){.stride = {l->stride, l->stride}, .pad = {pad, pad}});
        cr_assert_not_null(y, "%s: %s", l->name, dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        for (int p = 0; p < 3; p++)
            for (int amx = 0; amx < 2; amx++) {
                const dg_dtype types[3] = {DG_F32, DG_F16, DG_BF16};
                for (int t = 0; t < 3; t++) {
                    bool want = types[t] == DG_BF16 ? amx : l->fp32[p] == 'D';
                    bool got = dg__cpu_conv_auto_onednn(&d, conv_ops[p], types[t], amx);
                    cr_assert_eq(got, want, "%s %s %s, %s: %s, want %s", l->name, dg_op_name(conv_ops[p]),
                                 dg_dtype_name(types[t]), amx ? "AMX" : "no AMX", got ? "oneDNN" : "own",
                                 want ? "oneDNN" : "own");
                }
            }
        dg_graph_free(g);
    }
}

/* Input channels are counted a group: a depthwise layer of 64 channels
 * has one a group, which oneDNN's block pads as it pads the stem's 3. */
Test(conv_auto, rule_counts_channels_a_group) {
    dg_graph *g = dg_graph_new();
    dg_node *y = dg_conv2d(g, dg_input(g, "x", DG_SHAPE(8, 64, 16, 16)), dg_input(g, "w", DG_SHAPE(64, 1, 3, 3)),
                           NULL, (dg_conv2d_opts){.pad = {1, 1}, .groups = 64});
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_conv_dims d = dg_conv_dims_of(y);
    for (int p = 0; p < 3; p++)
        cr_assert_not(dg__cpu_conv_auto_onednn(&d, conv_ops[p], DG_F32, true), "depthwise %s: oneDNN",
                      dg_op_name(conv_ops[p]));
    dg_graph_free(g);
}

/* a small layer of each of the rule's kinds, at batch 2 */
typedef struct conv_case {
    const char    *name;
    int64_t        c, hw, o, k;
    dg_conv2d_opts opts;
    const char    *fp32; /* the float32 pick per pass, as r18's */
} conv_case;

static const conv_case cases[] = {
    {"3 channels (a stem)", 3, 8, 16, 3, {.pad = {1, 1}}, "OOO"},
    {"16 channels, stride 1", 16, 8, 16, 3, {.pad = {1, 1}}, "DDD"},
    {"16 channels, stride 2", 16, 9, 32, 3, {.stride = {2, 2}, .pad = {1, 1}}, "DDO"},
    {"1x1, stride 2", 16, 8, 32, 1, {.stride = {2, 2}}, "DDO"},
    {"depthwise, 16 groups", 16, 8, 16, 3, {.pad = {1, 1}, .groups = 16}, "OOO"},
};

/* y = conv2d(x, w) in dtype t, its loss sum(y * dy) and both gradients;
 * nodes: y, dx, dw (the convolution nodes, under autodiff's casts) */
static dg_graph *conv_graph(const conv_case *cs, dg_dtype t, dg_node *nodes[3]) {
    dg_graph *g = dg_graph_new();
    int64_t groups = cs->opts.groups > 0 ? cs->opts.groups : 1;
    dg_node *x = dg_param(g, "x", DG_SHAPE(2, cs->c, cs->hw, cs->hw), (dg_init){DG_INIT_UNIFORM, -1, 1, 81});
    dg_node *w = dg_param(g, "w", DG_SHAPE(cs->o, cs->c / groups, cs->k, cs->k), (dg_init){DG_INIT_UNIFORM, -1, 1, 82});
    dg_node *xt = t == DG_F32 ? x : dg_cast(g, x, t), *wt = t == DG_F32 ? w : dg_cast(g, w, t);
    dg_node *y = dg_conv2d(g, xt, wt, NULL, cs->opts);
    dg_node *yf = t == DG_F32 ? y : dg_cast(g, y, DG_F32);
    dg_node *dy = dg_param(g, "dy", yf->shape, (dg_init){DG_INIT_UNIFORM, -1, 1, 83});
    dg_node *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, yf, dy), DG_ALL_AXES, false), wrt, 2, grads));
    nodes[0] = y;
    for (int i = 0; i < 2; i++) {
        nodes[i + 1] = grads[i];
        while (nodes[i + 1]->op == DG_OP_CAST) nodes[i + 1] = nodes[i + 1]->in[0];
        cr_assert_eq(nodes[i + 1]->op, conv_ops[i + 1], "%s", cs->name);
    }
    return g;
}

/* the check kit's error of node n's output (every entry: these are small) */
static double conv_error(dg_plan *p, const dg_node *n) {
    float *a = plan_values_f32(p, n->in[0]), *b = plan_values_f32(p, n->in[1]), *out = plan_values_f32(p, n);
    int s = (int)dg_node_numel(n);
    conv_sample *ref = malloc((size_t)s * sizeof *ref);
    cr_assert_not_null(ref);
    ASSERT_OK(conv_check_sample(n, a, b, test_seed() + (uint64_t)n->op, ref, s));
    double e = conv_check_error(ref, s, out);
    free(ref); free(a); free(b); free(out);
    return e;
}

/* whether oneDNN's kernels here are AMX's, as the library reports its ISA */
static bool onednn_reports_amx(void) {
    char info[160];
    return strstr(dg_cpu_onednn_info(info, sizeof info), "ISA: avx512_core_amx") != NULL;
}

/* every case's three convolutions in dtype t, planned with `o` (NULL: the
 * backend's default) on a 2-thread backend, run and checked; each step's
 * name must say oneDNN exactly where `want` (a case's picks per pass) has
 * 'D' */
static void check_picks(dg_dtype t, const dg_plan_opts *o, dg_cpu_conv setting, bool (*want)(const conv_case *, int)) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    if ((int)setting >= 0) dg_cpu_set_conv(be, setting);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dg_node *nodes[3];
        dg_graph *g = conv_graph(&cases[c], t, nodes);
        /* the convolutions' inputs are outputs too: the check reads them */
        dg_node *outs[9];
        int n_out = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                dg_node *cand = j == 0 ? nodes[i] : nodes[i]->in[j - 1];
                bool seen = false;
                for (int q = 0; q < n_out; q++) seen |= outs[q] == cand;
                if (!seen) outs[n_out++] = cand;
            }
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, o));
        ASSERT_OK(dg_plan_run(p));
        for (int i = 0; i < 3; i++) {
            char name[96];
            ASSERT_OK(dg_plan_node_impl(p, nodes[i], name, sizeof name));
            bool onednn = strncmp(name, "cpu-onednn", 10) == 0;
            cr_assert_eq(onednn, want(&cases[c], i), "%s %s %s: step '%s'", cases[c].name, dg_dtype_name(t),
                         dg_op_name(nodes[i]->op), name);
            double e = conv_error(p, nodes[i]), tol = CONV_CHECK_TOL + (t == DG_BF16 ? 0x1p-8 : 0);
            cr_assert(e <= tol, "%s %s %s (%s): error %.3g > %.3g", cases[c].name, dg_dtype_name(t),
                      dg_op_name(nodes[i]->op), name, e, tol);
        }
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg_backend_free(be);
}

static bool fp32_rule(const conv_case *cs, int pass) { return dg_cpu_has_onednn() && cs->fp32[pass] == 'D'; }
static bool bf16_rule(const conv_case *cs, int pass) {
    (void)cs, (void)pass;
    return dg_cpu_has_onednn() && onednn_reports_amx();
}
static bool never(const conv_case *cs, int pass) { (void)cs, (void)pass; return false; }
static bool always(const conv_case *cs, int pass) { (void)cs, (void)pass; return true; }

/* A new backend's default is AUTO: float32 steps by the rule's picks. */
Test(conv_auto, backend_default_follows_the_rule_in_fp32) { check_picks(DG_F32, NULL, (dg_cpu_conv)-1, fp32_rule); }

/* bf16: oneDNN where its ISA is AMX's, the own (widened) elsewhere. */
Test(conv_auto, backend_default_follows_the_rule_in_bf16) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_cast(g, dg_input(g, "x", DG_SHAPE(1, 16, 4, 4)), DG_BF16);
    dg_node *w = dg_cast(g, dg_input(g, "w", DG_SHAPE(4, 16, 3, 3)), DG_BF16);
    bool built = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){0}) != NULL;
    dg_graph_free(g);
    if (!built) cr_skip_test("the graph has no bf16 convolution in this build: %s", dg_last_error());
    check_picks(DG_BF16, NULL, (dg_cpu_conv)-1, bf16_rule);
}

/* Explicit choices mean what they did: the vendor's is oneDNN on every
 * node (the stem too), a backend set to DEFAULT runs the own everywhere,
 * a plan that asks for the own kernels (DG_CONV_OWN) runs them on every
 * node whatever the backend's setting, and a setting outside the enum
 * leaves AUTO in place. */
Test(conv_auto, explicit_choices_keep_their_meaning) {
    check_picks(DG_F32, NULL, DG_CPU_CONV_DEFAULT, never);
    check_picks(DG_F32, &(dg_plan_opts){.conv = DG_CONV_OWN}, (dg_cpu_conv)-1, never);
    check_picks(DG_F32, &(dg_plan_opts){.conv = DG_CONV_OWN}, DG_CPU_CONV_ONEDNN, never);
    check_picks(DG_F32, &(dg_plan_opts){.conv = DG_CONV_IM2COL}, (dg_cpu_conv)-1, never);
    check_picks(DG_F32, NULL, (dg_cpu_conv)99, fp32_rule);
    if (dg_cpu_has_onednn()) check_picks(DG_F32, &(dg_plan_opts){.conv = DG_CONV_VENDOR}, (dg_cpu_conv)-1, always);
}
