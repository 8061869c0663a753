/* test_plan_opts.c: what a plan chooses and what it would take, before it
 * takes it.
 *  - The GEMM and convolution implementation are options of each plan
 *    (dg_plan_opts.gemm, .conv): two plans of different choices on one
 *    backend, run interleaved while the backend's own setting says a
 *    third, each give the bits of its own choice (those of a plan on a
 *    backend set to it) and match the float64 reference; the choice a
 *    backend does not offer is refused; dg_plan_node_impl names what a
 *    node runs as.
 *  - dg_plan_estimate reports what dg_plan_new would (every stat, for an
 *    MLP, a CNN and a transformer step, with and without reuse, with shared
 *    leaves) and allocates nothing, even where every allocation would fail.
 * The GPU's version of the first (implicit and im2col plans interleaved)
 * runs where a device answers. */
#include <math.h>
#include <string.h>

#include <duograd/testing.h>

#include "core/autodiff.h"
#include "core/check/ref.h"
#include "core/nn/cnn.h"
#include "core/nn/train_step.h"
#include "core/nn/transformer.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"
#include "train_util.h"
#ifdef DG_HAVE_CUDA
#include "gpu_util.h"
#endif

/* ---- a convolution, its two gradients and their float64 values ---- */

typedef struct conv_graph {
    dg_graph *g;
    dg_node  *x, *w, *dy;
    dg_node  *out[3];     /* y, dx, dw        */
    double  **ref;        /* float64 of every node, by id */
} conv_graph;

/* x [4,16,12,12], w [16,16,3,3], padding 1: both strides 1 and 16
 * channels, so on 2 threads the passes, the batch, the shifted taps and
 * the channel split all apply and differ in their sums' order */
static void conv_graph_new(conv_graph *c) {
    c->g = dg_graph_new();
    c->x = dg_param(c->g, "x", DG_SHAPE(4, 16, 12, 12), (dg_init){DG_INIT_UNIFORM, -1, 1, 31});
    c->w = dg_param(c->g, "w", DG_SHAPE(16, 16, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 32});
    dg_node *y = dg_conv2d(c->g, c->x, c->w, NULL, (dg_conv2d_opts){.pad = {1, 1}});
    c->dy = y ? dg_param(c->g, "dy", y->shape, (dg_init){DG_INIT_UNIFORM, -1, 1, 33}) : NULL;
    dg_node *wrt[2] = {c->x, c->w}, *grads[2];
    ASSERT_OK(dg_graph_status(c->g));
    ASSERT_OK(dg_grad(c->g, dg_sum(c->g, dg_mul(c->g, y, c->dy), DG_ALL_AXES, false), wrt, 2, grads));
    c->out[0] = y;
    c->out[1] = grads[0];
    c->out[2] = grads[1];
    /* every leaf from its init, in float64 */
    int size = dg_graph_size(c->g);
    c->ref = calloc((size_t)size, sizeof *c->ref);
    cr_assert_not_null(c->ref);
    for (int id = 0; id < size; id++) {
        const dg_node *leaf = dg_graph_node(c->g, id);
        if (leaf->op != DG_OP_LEAF) continue;
        int64_t n = dg_node_numel(leaf);
        float *f = malloc((size_t)n * sizeof *f);
        c->ref[id] = malloc((size_t)n * sizeof(double));
        cr_assert(f && c->ref[id]);
        ASSERT_OK(dg_init_fill(leaf->init, f, n));
        for (int64_t k = 0; k < n; k++) c->ref[id][k] = f[k];
        free(f);
    }
    ASSERT_OK(ref_eval(c->g, size, c->ref));
}

static void conv_graph_free(conv_graph *c) {
    ref_free(c->ref, dg_graph_size(c->g));
    free(c->ref);
    dg_graph_free(c->g);
}

/* the three outputs of a run of p, concatenated (caller frees) */
static float *outputs_of(dg_plan *p, const conv_graph *c, int64_t *n_total) {
    int64_t n = 0;
    for (int k = 0; k < 3; k++) n += dg_node_numel(c->out[k]);
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert_not_null(v);
    int64_t at = 0;
    for (int k = 0; k < 3; k++) {
        ASSERT_OK(dg_plan_get(p, c->out[k], v + at, dg_node_bytes(c->out[k])));
        at += dg_node_numel(c->out[k]);
    }
    *n_total = n;
    return v;
}

/* every output of a run against the float64 reference (sums of up to 2304
 * products in float32) */
static void assert_matches_reference(const conv_graph *c, const float *v, const char *what) {
    static const char *const names[3] = {"y", "dx", "dw"};
    int64_t at = 0;
    for (int k = 0; k < 3; k++) {
        int64_t n = dg_node_numel(c->out[k]);
        cmp_stats st = cmp_f32(v + at, c->ref[c->out[k]->id], n);
        ASSERT_CLOSE(st, 1e-5, names[k], what, (uint64_t)0);
        at += n;
    }
}

/* the outputs of one run of a plan on a fresh 2-thread CPU backend whose
 * own setting is `conv` (the plan leaves the choice at DEFAULT) */
static float *run_with_backend_setting(const conv_graph *c, dg_cpu_conv conv, int64_t *n) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_cpu_set_conv(be, conv);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, c->g, be, c->out, 3, NULL));
    ASSERT_OK(dg_plan_run(p));
    float *v = outputs_of(p, c, n);
    dg_plan_free(p);
    dg_backend_free(be);
    return v;
}

static bool same_bits(const float *a, const float *b, int64_t n) { return !memcmp(a, b, (size_t)n * sizeof *a); }

/* Two plans on one backend, one in passes (DG_CONV_IM2COL), one on shifted
 * taps (DG_CONV_SHIFT: the forward and dx; its weight's gradient as
 * DEFAULT's rule, not the backend's setting, picks), run in turns while
 * the backend's own setting is
 * the batch and then the channel split: each run gives exactly the bits of
 * its own strategy (a plan on a backend set to it) and matches the float64
 * reference. The strategies' bits differ (the channel split's are the
 * passes' here), so a plan that ran another's strategy would be seen. */
Test(plan_opts, cpu_plans_of_different_conv_choices_interleave) {
    conv_graph c;
    conv_graph_new(&c);
    int64_t n;
    float *want_passes = run_with_backend_setting(&c, DG_CPU_CONV_PASSES, &n);
    float *want_shift = run_with_backend_setting(&c, DG_CPU_CONV_SHIFT, &n);
    float *want_batch = run_with_backend_setting(&c, DG_CPU_CONV_BATCH, &n);
    cr_assert(!same_bits(want_passes, want_shift, n) && !same_bits(want_passes, want_batch, n) &&
                  !same_bits(want_shift, want_batch, n),
              "the strategies give the same bits here (passes/shift %d, passes/batch %d, shift/batch %d): the "
              "test could not tell them apart", same_bits(want_passes, want_shift, n),
              same_bits(want_passes, want_batch, n), same_bits(want_shift, want_batch, n));
    assert_matches_reference(&c, want_passes, "cpu-im2col on its own");
    assert_matches_reference(&c, want_shift, "cpu-shift on its own");

    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_cpu_set_conv(be, DG_CPU_CONV_BATCH); /* neither plan's choice */
    dg_plan *passes, *shift;
    ASSERT_OK(dg_plan_new(&passes, c.g, be, c.out, 3, &(dg_plan_opts){.conv = DG_CONV_IM2COL}));
    ASSERT_OK(dg_plan_new(&shift, c.g, be, c.out, 3, &(dg_plan_opts){.conv = DG_CONV_SHIFT}));
    char name[32];
    ASSERT_OK(dg_plan_node_impl(passes, c.out[0], name, sizeof name));
    cr_assert_str_eq(name, "cpu-im2col");
    ASSERT_OK(dg_plan_node_impl(shift, c.out[0], name, sizeof name));
    cr_assert_str_eq(name, "cpu-shift");
    ASSERT_OK(dg_plan_node_impl(shift, c.out[2], name, sizeof name));
    cr_assert_str_eq(name, "cpu-im2col-batch", "the shift has no weight's gradient: DEFAULT's choice runs it");
    for (int round = 0; round < 3; round++) {
        if (round == 2) dg_cpu_set_conv(be, DG_CPU_CONV_CHANNELS); /* the setting changes under both plans */
        dg_plan *order[2] = {round % 2 ? shift : passes, round % 2 ? passes : shift};
        for (int k = 0; k < 2; k++) {
            ASSERT_OK(dg_plan_run(order[k]));
            float *got = outputs_of(order[k], &c, &n);
            bool is_shift = order[k] == shift;
            char what[64];
            snprintf(what, sizeof what, "round %d, the %s plan", round, is_shift ? "shifted" : "passes'");
            cr_assert(same_bits(got, is_shift ? want_shift : want_passes, n),
                      "%s: not the bits of its own strategy", what);
            assert_matches_reference(&c, got, what);
            free(got);
        }
    }
    /* a plan that leaves the choice to the backend follows its setting */
    dg_cpu_set_conv(be, DG_CPU_CONV_BATCH);
    dg_plan *deflt;
    ASSERT_OK(dg_plan_new(&deflt, c.g, be, c.out, 3, NULL));
    ASSERT_OK(dg_plan_node_impl(deflt, c.out[2], name, sizeof name));
    cr_assert_str_eq(name, "cpu-im2col-batch");
    ASSERT_OK(dg_plan_run(deflt));
    float *got = outputs_of(deflt, &c, &n);
    cr_assert(same_bits(got, want_batch, n), "the DEFAULT plan did not run the backend's setting");
    dg_cpu_set_conv(be, DG_CPU_CONV_CHANNELS);
    ASSERT_OK(dg_plan_node_impl(deflt, c.out[2], name, sizeof name));
    cr_assert_str_eq(name, "cpu-im2col-chan", "a DEFAULT plan's name follows the setting");
    free(got);
    dg_plan_free(deflt);
    dg_plan_free(passes);
    dg_plan_free(shift);
    dg_backend_free(be);
    free(want_passes);
    free(want_shift);
    free(want_batch);
    conv_graph_free(&c);
}

/* The matmul's GEMM per plan: each plan's name, and its bits those of a
 * plan on a backend set to the same sgemm, whatever the backend says. */
Test(plan_opts, cpu_gemm_choice_per_plan) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_param(g, "a", DG_SHAPE(37, 300), (dg_init){DG_INIT_UNIFORM, -1, 1, 41});
    dg_node *b = dg_param(g, "b", DG_SHAPE(300, 29), (dg_init){DG_INIT_UNIFORM, -1, 1, 42});
    dg_node *c = dg_matmul(g, a, b, false, false);
    ASSERT_OK(dg_graph_status(g));
    static const struct { dg_gemm_impl plan; dg_cpu_gemm set; const char *name; } impls[] = {
        {DG_GEMM_VENDOR, DG_CPU_GEMM_OPENBLAS, "cpu-openblas"},
        {DG_GEMM_OWN, DG_CPU_GEMM_OWN, "cpu-own"},
        {DG_GEMM_NAIVE, DG_CPU_GEMM_NAIVE, "cpu-naive"},
    };
    size_t bytes = dg_node_bytes(c);
    float *want = malloc(bytes), *got = malloc(bytes);
    cr_assert(want && got);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
        dg_cpu_set_gemm(be, impls[i].set);
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, &c, 1, NULL));
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, c, want, bytes));
        dg_plan_free(p);
        /* the backend now set to another sgemm: the plan's choice holds */
        dg_cpu_set_gemm(be, impls[(i + 1) % 3].set);
        ASSERT_OK(dg_plan_new(&p, g, be, &c, 1, &(dg_plan_opts){.gemm = impls[i].plan}));
        char name[32];
        ASSERT_OK(dg_plan_node_impl(p, c, name, sizeof name));
        cr_assert_str_eq(name, impls[i].name);
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, c, got, bytes));
        cr_assert(same_bits(got, want, dg_node_numel(c)), "%s: not the bits of its own sgemm", impls[i].name);
        dg_plan_free(p);
    }
    dg_backend_free(be);
    free(want);
    free(got);
    dg_graph_free(g);
}

/* A choice the backend does not offer, an unknown one, a node without a
 * step, a buffer too small: refused with a status and a message. */
Test(plan_opts, refusals) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 3, 8, 8));
    dg_node *w = dg_param(g, "w", DG_SHAPE(4, 3, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 5});
    dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.pad = {1, 1}});
    dg_node *r = dg_reshape(g, y, DG_SHAPE(2, 256));
    ASSERT_OK(dg_graph_status(g));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p = NULL;
    dg_plan_stats s;
    cr_assert_eq(dg_plan_new(&p, g, be, &y, 1, &(dg_plan_opts){.conv = DG_CONV_IMPLICIT}), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "GPU"), "%s", dg_last_error());
    cr_assert_null(p);
    cr_assert_eq(dg_plan_estimate(g, be, &y, 1, &(dg_plan_opts){.conv = DG_CONV_IMPLICIT}, &s), DG_ERR_UNSUPPORTED);
    cr_assert_eq(dg_plan_new(&p, g, be, &y, 1, &(dg_plan_opts){.conv = DG_CONV_COUNT}), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_new(&p, g, be, &y, 1, &(dg_plan_opts){.gemm = (dg_gemm_impl)-1}), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_estimate(g, NULL, &y, 1, &(dg_plan_opts){.gemm = DG_GEMM_COUNT}, &s), DG_ERR_INVALID);
    cr_assert_eq(s.arena_bytes, 0u, "a refused estimate is zeroed");
    ASSERT_OK(dg_plan_new(&p, g, be, &r, 1, &(dg_plan_opts){.conv = DG_CONV_IM2COL_BATCH}));
    char name[32];
    ASSERT_OK(dg_plan_node_impl(p, y, name, sizeof name));
    cr_assert_str_eq(name, "cpu-im2col", "one thread: the batch falls back to the passes");
    cr_assert_eq(dg_plan_node_impl(p, x, name, sizeof name), DG_ERR_INVALID, "a leaf has no step");
    cr_assert_eq(dg_plan_node_impl(p, r, name, sizeof name), DG_ERR_INVALID, "a view has no step");
    cr_assert_eq(dg_plan_node_impl(p, y, name, 4), DG_ERR_INVALID, "'cpu-im2col' needs 11 bytes");
    cr_assert_eq(dg_plan_node_impl(p, y, NULL, 4), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_node_impl(NULL, y, name, sizeof name), DG_ERR_INVALID);
    dg_plan_free(p);
    /* an op with one implementation: the backend's name */
    dg_node *z = dg_relu(g, y);
    ASSERT_OK(dg_plan_new(&p, g, be, &z, 1, NULL));
    ASSERT_OK(dg_plan_node_impl(p, z, name, sizeof name));
    cr_assert_str_eq(name, "cpu");
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

/* ---- the dry run ---- */

static void assert_stats_equal(dg_plan_stats e, dg_plan_stats s, const char *what) {
    cr_assert(e.persistent_bytes == s.persistent_bytes && e.arena_bytes == s.arena_bytes &&
                  e.no_reuse_bytes == s.no_reuse_bytes && e.n_steps == s.n_steps && e.n_buffers == s.n_buffers &&
                  e.live_bytes == s.live_bytes,
              "%s: estimate persistent %zu arena %zu no-reuse %zu live %zu steps %d buffers %d; plan %zu %zu %zu "
              "%zu %d %d", what, e.persistent_bytes, e.arena_bytes, e.no_reuse_bytes, e.live_bytes, e.n_steps,
              e.n_buffers, s.persistent_bytes, s.arena_bytes, s.no_reuse_bytes, s.live_bytes, s.n_steps,
              s.n_buffers);
}

/* For g's outputs on be, with and without reuse and with a plan of shared
 * leaves: the estimate (on be, and for no backend: the CPU's scratch is
 * the portable one) is the plan's stats, and the estimates allocate
 * nothing, not even where every allocation would fail. */
static void assert_estimate_is_the_plan(dg_graph *g, dg_node *const *outs, int n_out, const char *what) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    for (int k = 0; k < 2; k++) {
        dg_plan_opts o = {.no_reuse = k == 1};
        char w[96];
        snprintf(w, sizeof w, "%s, %s", what, k ? "no reuse" : "reuse");
        size_t before = dg_backend_n_allocs(be);
        dg_plan_stats e, e_none;
        ASSERT_OK(dg_plan_estimate(g, be, outs, n_out, &o, &e));
        ASSERT_OK(dg_plan_estimate(g, NULL, outs, n_out, &o, &e_none));
        cr_assert_eq(dg_backend_n_allocs(be), before, "%s: the estimate allocated", w);
        /* where the next allocation would fail, the estimate still answers,
         * and leaves that failure to the next allocation: it tried none */
        dg_backend_fail_alloc_after(be, 1);
        dg_plan_stats again;
        ASSERT_OK(dg_plan_estimate(g, be, outs, n_out, &o, &again));
        assert_stats_equal(again, e, w);
        void *ptr = NULL;
        cr_assert_eq(dg_backend_alloc(be, 64, &ptr), DG_ERR_OOM, "%s: the estimate tried an allocation", w);
        cr_assert_eq(dg_backend_n_allocs(be), before, "%s: the estimate allocated", w);
        cr_assert(e.persistent_bytes > 0 && e.arena_bytes > 0 && e.n_steps > 0, "%s: an empty estimate", w);
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, &o));
        cr_assert_gt(dg_backend_n_allocs(be), before, "%s: the plan allocated nothing: the counter is not wired", w);
        assert_stats_equal(e, dg_plan_stats_get(p), w);
        assert_stats_equal(e_none, dg_plan_stats_get(p), w);
        /* a second plan that sees the first one's leaves owns none */
        dg_plan_opts shared = {.share_leaves = p, .no_reuse = o.no_reuse};
        ASSERT_OK(dg_plan_estimate(g, be, outs, n_out, &shared, &e));
        dg_plan *q;
        ASSERT_OK(dg_plan_new(&q, g, be, outs, n_out, &shared));
        cr_assert_eq(dg_plan_stats_get(q).persistent_bytes, 0u, "%s: the sharing plan owns leaves", w);
        snprintf(w, sizeof w, "%s, %s, shared leaves", what, k ? "no reuse" : "reuse");
        assert_stats_equal(e, dg_plan_stats_get(q), w);
        dg_plan_free(q);
        dg_plan_free(p);
    }
    dg_backend_free(be);
}

Test(plan_opts, estimate_is_the_plan_mlp) {
    static const int widths[] = {784, 256, 100, 10};
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, 64, &o, 1));
    assert_estimate_is_the_plan(t.g, t.step.outputs, t.step.n_outputs, "MLP Adam step");
    train_graph_free(&t);
}

static void model_step(dg_model_new_fn fn, const void *cfg, int batch, const char *what) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_train_step ts;
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.05f);
    ASSERT_OK(fn(g, cfg, 1, &m));
    ASSERT_OK(dg_train_step_build(g, &m, batch, &o, &ts));
    assert_estimate_is_the_plan(g, ts.outputs, ts.n_outputs, what);
    /* the forward alone: the loss */
    assert_estimate_is_the_plan(g, &ts.loss, 1, what);
    dg_graph_free(g);
}

Test(plan_opts, estimate_is_the_plan_cnn) {
    dg_cnn_cfg cfg = dg_cnn_default();
    model_step(dg_cnn_new, &cfg, 4, "CNN momentum step");
}

Test(plan_opts, estimate_is_the_plan_transformer) {
    dg_charlm_cfg fused = {.vocab = 17, .context = 16, .width = 32, .heads = 2, .layers = 2};
    model_step(dg_charlm_new, &fused, 3, "char LM step, fused attention");
    dg_charlm_cfg composed = fused;
    composed.composed = true;
    model_step(dg_charlm_new, &composed, 3, "char LM step, composed attention");
}

/* Refused as dg_plan_new refuses, zeroed: NULL arguments, no outputs, a
 * graph in error, an output of another graph. */
Test(plan_opts, estimate_refusals) {
    dg_graph *g = dg_graph_new(), *other = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4)), *y = dg_relu(g, x), *z = dg_input(other, "z", DG_SHAPE(4));
    dg_plan_stats s = {.arena_bytes = 7};
    cr_assert_eq(dg_plan_estimate(NULL, NULL, &y, 1, NULL, &s), DG_ERR_INVALID);
    cr_assert_eq(s.arena_bytes, 0u);
    cr_assert_eq(dg_plan_estimate(g, NULL, NULL, 1, NULL, &s), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_estimate(g, NULL, &y, 0, NULL, &s), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_estimate(g, NULL, &y, 1, NULL, NULL), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_estimate(g, NULL, &z, 1, NULL, &s), DG_ERR_INVALID);
    ASSERT_OK(dg_plan_estimate(g, NULL, &y, 1, NULL, &s));
    cr_assert_eq(s.n_steps, 1);
    cr_assert_null(dg_add(g, x, dg_input(g, "q", DG_SHAPE(5)))); /* shapes 4 and 5: the graph is now in error */
    cr_assert_neq(dg_plan_estimate(g, NULL, &y, 1, NULL, &s), DG_OK);
    dg_graph_free(g);
    dg_graph_free(other);
}

#ifdef DG_HAVE_CUDA
/* The GPU: a plan on the implicit kernels (no im2col columns reserved)
 * and one on im2col, run in turns on one backend while its own setting
 * says im2col, then implicit: each runs its own kernels (the implicit
 * plan has no room for columns, so running it on im2col would fail) and
 * matches the float64 reference; the estimates are the plans' stats. */
Test(plan_opts, gpu_plans_of_different_conv_choices_interleave) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    conv_graph c;
    conv_graph_new(&c);
    dg_gpu_set_conv(gpu, DG_GPU_CONV_IM2COL);
    dg_plan *implicit, *im2col;
    dg_plan_opts oi = {.conv = DG_CONV_IMPLICIT}, oc = {.conv = DG_CONV_IM2COL};
    ASSERT_OK(dg_plan_new(&implicit, c.g, gpu, c.out, 3, &oi));
    ASSERT_OK(dg_plan_new(&im2col, c.g, gpu, c.out, 3, &oc));
    dg_plan_stats e;
    ASSERT_OK(dg_plan_estimate(c.g, gpu, c.out, 3, &oi, &e));
    assert_stats_equal(e, dg_plan_stats_get(implicit), "gpu implicit plan");
    ASSERT_OK(dg_plan_estimate(c.g, gpu, c.out, 3, &oc, &e));
    assert_stats_equal(e, dg_plan_stats_get(im2col), "gpu im2col plan");
    cr_assert_lt(dg_plan_stats_get(implicit).arena_bytes, dg_plan_stats_get(im2col).arena_bytes,
                 "the implicit plan reserves no columns");
    char name[32];
    ASSERT_OK(dg_plan_node_impl(implicit, c.out[0], name, sizeof name));
    cr_assert_str_eq(name, "gpu-implicit");
    ASSERT_OK(dg_plan_node_impl(im2col, c.out[0], name, sizeof name));
    cr_assert_str_eq(name, "gpu-im2col");
    for (int round = 0; round < 3; round++) {
        if (round == 2) dg_gpu_set_conv(gpu, DG_GPU_CONV_IMPLICIT);
        dg_plan *order[2] = {round % 2 ? im2col : implicit, round % 2 ? implicit : im2col};
        for (int k = 0; k < 2; k++) {
            ASSERT_OK(dg_plan_run(order[k]));
            int64_t n;
            float *got = outputs_of(order[k], &c, &n);
            char what[64];
            snprintf(what, sizeof what, "round %d, the %s plan", round, order[k] == implicit ? "implicit" : "im2col");
            assert_matches_reference(&c, got, what);
            free(got);
        }
    }
    cr_assert_eq(dg_plan_new(&(dg_plan *){NULL}, c.g, gpu, c.out, 3, &(dg_plan_opts){.conv = DG_CONV_SHIFT}),
                 DG_ERR_UNSUPPORTED, "the CPU's strategies are not the GPU's");
    /* the message lists every choice the GPU does take, the own one too */
    cr_assert(strstr(dg_last_error(), "im2col") && strstr(dg_last_error(), "implicit") &&
                  strstr(dg_last_error(), "own") && strstr(dg_last_error(), "cuDNN"),
              "%s", dg_last_error());
    dg_plan_free(implicit);
    dg_plan_free(im2col);
    conv_graph_free(&c);
    dg_backend_free(gpu);
}
#endif
