/* test_plan.c: the memory plan. Buffers live at the same time never overlap;
 * reuse changes no result; reuse lowers the peak of a training step; the
 * peak of live bytes is the buffers' own (by hand on a small graph) and
 * never above the arena; runs allocate nothing; failed allocations are
 * reported cleanly. */
#include <string.h>

#include <duograd/testing.h>

#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"
#include "train_util.h"

#define N 8 /* random graphs use [N,N] matrices and [N] vectors */

/* A random DAG of elementwise, broadcasting, matmul, reduction and view ops.
 * Returns the number of outputs written to outs. */
static int random_graph(dg_graph *g, dg_rng *r, dg_node **leaves, int *n_leaves, dg_node **outs) {
    dg_node *pool[64];
    int n = 0;
    const dg_init unused = {DG_INIT_FILL, 0, 0, 0};
    for (int i = 0; i < 3; i++) pool[n++] = leaves[i] = dg_param(g, "m", DG_SHAPE(N, N), unused);
    dg_node *vec = leaves[3] = dg_param(g, "v", DG_SHAPE(N), unused);
    *n_leaves = 4;
    int steps = 20 + (int)(dg_rng_u64(r) % 20);
    for (int s = 0; s < steps; s++) {
        dg_node *a = pool[dg_rng_u64(r) % (uint64_t)n], *b = pool[dg_rng_u64(r) % (uint64_t)n], *y = NULL;
        switch (dg_rng_u64(r) % 8) {
        case 0: y = dg_add(g, a, b); break;
        case 1: y = dg_mul(g, a, b); break;
        case 2: y = dg_tanh(g, a); break;
        case 3: y = dg_mul_scalar(g, dg_matmul(g, a, b, dg_rng_u64(r) & 1, dg_rng_u64(r) & 1), 0.25f); break;
        case 4: y = dg_sigmoid(g, a); break;
        case 5: y = dg_sub(g, a, vec); break;
        case 6: y = dg_broadcast_to(g, dg_sum(g, a, 1, true), DG_SHAPE(N, N)); break;
        case 7: y = dg_reshape(g, dg_transpose(g, dg_reshape(g, a, DG_SHAPE(N / 2, 2 * N))), DG_SHAPE(N, N)); break;
        }
        pool[n++] = y;
    }
    int n_out = 0;
    outs[n_out++] = pool[n - 1];
    for (int k = 0; k < 2; k++) outs[n_out++] = pool[3 + dg_rng_u64(r) % (uint64_t)(n - 3)];
    return n_out;
}

static bool overlap(const dg_plan_buffer *a, const dg_plan_buffer *b) {
    bool time = a->first <= b->last && b->first <= a->last;
    bool space = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
    return time && space;
}

Test(plan, random_graphs_no_live_overlap_and_same_results) {
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    int reused = 0;
    for (int trial = 0; trial < 100; trial++) {
        dg_graph *g = dg_graph_new();
        dg_node *leaves[4], *outs[3];
        int n_leaves, n_out = random_graph(g, &r, leaves, &n_leaves, outs);
        ASSERT_OK(dg_graph_status(g));
        dg_plan *p, *flat;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, NULL));
        ASSERT_OK(dg_plan_new(&flat, g, be, outs, n_out, &(dg_plan_opts){.no_reuse = true}));
        int nb;
        const dg_plan_buffer *b = dg_plan_buffers(p, &nb);
        for (int i = 0; i < nb; i++)
            for (int j = i + 1; j < nb; j++)
                cr_assert(!overlap(&b[i], &b[j]),
                          "trial %d (seed %llu): buffers of nodes %d [%zu,+%zu) t[%d,%d] and %d [%zu,+%zu) t[%d,%d] "
                          "overlap", trial, (unsigned long long)seed, b[i].node_id, b[i].offset, b[i].bytes,
                          b[i].first, b[i].last, b[j].node_id, b[j].offset, b[j].bytes, b[j].first, b[j].last);
        dg_plan_stats st = dg_plan_stats_get(p);
        cr_assert_leq(st.arena_bytes, st.no_reuse_bytes);
        reused += st.arena_bytes < st.no_reuse_bytes;
        for (int i = 0; i < n_leaves; i++) {
            if (!dg_plan_has(p, leaves[i])) continue; /* unused by the outputs */
            float v[N * N];
            for (int k = 0; k < N * N; k++) v[k] = (float)(2 * dg_rng_uniform(&r) - 1);
            ASSERT_OK(dg_plan_set(p, leaves[i], v, dg_node_bytes(leaves[i])));
            ASSERT_OK(dg_plan_set(flat, leaves[i], v, dg_node_bytes(leaves[i])));
        }
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_run(flat));
        for (int o = 0; o < n_out; o++) {
            float x[N * N], y[N * N];
            size_t bytes = dg_node_bytes(outs[o]);
            ASSERT_OK(dg_plan_get(p, outs[o], x, bytes));
            ASSERT_OK(dg_plan_get(flat, outs[o], y, bytes));
            cr_assert(memcmp(x, y, bytes) == 0, "trial %d (seed %llu): output %d differs with reuse", trial,
                      (unsigned long long)seed, o);
        }
        dg_plan_free(flat);
        dg_plan_free(p);
        dg_graph_free(g);
    }
    cr_assert_gt(reused, 50, "reuse lowered the peak in only %d of 100 graphs", reused);
    dg_backend_free(be);
}

static const int mlp_widths[] = {784, 256, 100, 10};

Test(plan, mlp_step_peak_lower_with_reuse) {
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, mlp_widths, 4, 128, &o, 1));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p, *flat;
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_new(&flat, t.g, be, t.step.outputs, t.step.n_outputs, &(dg_plan_opts){.no_reuse = true}));
    dg_plan_stats s = dg_plan_stats_get(p), f = dg_plan_stats_get(flat);
    cr_log_info("MLP 784-256-100-10 batch 128 Adam step: %d kernels, %d buffers; arena %zu bytes with reuse, "
                "%zu without (%.1f%%); persistent %zu bytes", s.n_steps, s.n_buffers, s.arena_bytes,
                s.no_reuse_bytes, 100.0 * (double)s.arena_bytes / (double)s.no_reuse_bytes, s.persistent_bytes);
    cr_assert_lt(s.arena_bytes, s.no_reuse_bytes);
    cr_assert_eq(f.arena_bytes, f.no_reuse_bytes);
    dg_plan_free(flat);
    dg_plan_free(p);
    dg_backend_free(be);
    train_graph_free(&t);
}

Test(plan, runs_allocate_nothing) {
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 1e-2f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, mlp_widths, 4, 32, &o, 2));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p)); /* first run */
    size_t before = dg_backend_n_allocs(be);
    cr_assert_gt(before, 0, "the plan allocated nothing at all: the counter is not wired");
    for (int i = 0; i < 100; i++) ASSERT_OK(dg_plan_run(p));
    cr_assert_eq(dg_backend_n_allocs(be), before, "100 runs made %zu allocations",
                 dg_backend_n_allocs(be) - before);
    dg_plan_free(p);
    dg_backend_free(be);
    train_graph_free(&t);
}

Test(plan, failed_allocation_is_reported) {
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, mlp_widths, 4, 16, &o, 3));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    for (int k = 1; k <= 2; k++) { /* the persistent region, then the arena */
        dg_plan *p = (dg_plan *)1;
        dg_backend_fail_alloc_after(be, k);
        cr_assert_eq(dg_plan_new(&p, t.g, be, t.step.outputs, t.step.n_outputs, NULL), DG_ERR_OOM);
        cr_assert_null(p);
        cr_assert(strstr(dg_last_error(), "bytes"), "message: %s", dg_last_error());
    }
    dg_plan *p; /* and the backend still works afterwards */
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p));
    dg_plan_free(p);
    dg_backend_free(be);
    train_graph_free(&t);
}

Test(plan, set_get_reject_wrong_nodes_and_sizes) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4)), *y = dg_relu(g, x), *z = dg_exp(g, x);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    float v[4] = {1, -2, 3, -4};
    cr_assert_eq(dg_plan_set(p, x, v, 3 * sizeof(float)), DG_ERR_INVALID);
    cr_assert_eq(dg_plan_set(p, y, v, sizeof v), DG_ERR_INVALID);   /* not a leaf */
    cr_assert_eq(dg_plan_get(p, z, v, sizeof v), DG_ERR_INVALID);   /* not planned */
    ASSERT_OK(dg_plan_set(p, x, v, sizeof v));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_plan_get(p, y, v, sizeof v));
    cr_assert(v[0] == 1 && v[1] == 0 && v[2] == 3 && v[3] == 0);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

/* The peak of live bytes from the buffer list, step by step: at each
 * buffer's first step (where the peak can rise), the sum of every buffer
 * whose [first, last] holds that step. */
static size_t brute_live_peak(const dg_plan_buffer *b, int n) {
    size_t peak = 0;
    for (int i = 0; i < n; i++) {
        size_t live = 0;
        for (int j = 0; j < n; j++)
            if (b[j].first <= b[i].first && b[i].first <= b[j].last) live += b[j].bytes;
        if (live > peak) peak = live;
    }
    return peak;
}

/* x [1,2,4,4] -> a = relu(x) -> y = conv2d(a, w [3,2,3,3]) [1,3,2,2] -> z = exp(y), output z.
 * Bytes: a 32 floats = 128, y and z 12 floats = 48 each, y's im2col scratch
 * rows 2*3*3 = 18 by cols 2*2 = 4 = 72 floats = 288. Live at relu: a (128);
 * at conv: a + y + scratch = 464; at exp: y + z = 96. Peak 464. */
Test(plan, live_bytes_of_a_small_graph_by_hand) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(1, 2, 4, 4));
    dg_node *w = dg_param(g, "w", DG_SHAPE(3, 2, 3, 3), (dg_init){DG_INIT_FILL, 0.5f, 0, 0});
    dg_node *y = dg_conv2d(g, dg_relu(g, x), w, NULL, (dg_conv2d_opts){0});
    dg_node *z = dg_exp(g, y);
    ASSERT_OK(dg_graph_status(g));
    cr_assert_eq(dg_node_scratch_bytes(y), 288, "the im2col scratch the sum assumes: %zu bytes",
                 dg_node_scratch_bytes(y));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &z, 1, NULL));
    dg_plan_stats s = dg_plan_stats_get(p);
    cr_assert_eq(s.live_bytes, 464, "peak live bytes %zu, want 128 + 48 + 288 = 464", s.live_bytes);
    cr_assert_geq(s.arena_bytes, s.live_bytes);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

/* the arena holds every buffer live at once, so it is never below the peak
 * of live bytes, which the buffer list gives step by step */
static void expect_live_within_arena(dg_graph *g, dg_node *const *outs, int n_out, const char *what) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    for (int reuse = 0; reuse < 2; reuse++) {
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, n_out, &(dg_plan_opts){.no_reuse = !reuse}));
        int nb;
        const dg_plan_buffer *b = dg_plan_buffers(p, &nb);
        dg_plan_stats s = dg_plan_stats_get(p);
        cr_assert_eq(s.live_bytes, brute_live_peak(b, nb), "%s: live bytes %zu, the buffers' peak %zu", what,
                     s.live_bytes, brute_live_peak(b, nb));
        cr_assert(s.live_bytes > 0 && s.arena_bytes >= s.live_bytes, "%s (reuse %d): arena %zu < live %zu", what,
                  reuse, s.arena_bytes, s.live_bytes);
        dg_plan_free(p);
    }
    dg_backend_free(be);
}

Test(plan, arena_never_below_live_bytes) {
    dg_rng r = dg_rng_new(test_seed());
    for (int trial = 0; trial < 30; trial++) {
        dg_graph *g = dg_graph_new();
        dg_node *leaves[4], *outs[3];
        int n_leaves, n_out = random_graph(g, &r, leaves, &n_leaves, outs);
        ASSERT_OK(dg_graph_status(g));
        char what[64];
        snprintf(what, sizeof what, "random graph %d (seed %llu)", trial, (unsigned long long)test_seed());
        expect_live_within_arena(g, outs, n_out, what);
        dg_graph_free(g);
    }
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, mlp_widths, 4, 64, &o, 1));
    expect_live_within_arena(t.g, t.step.outputs, t.step.n_outputs, "MLP Adam step");
    train_graph_free(&t);
    /* a convolutional step: scratch buffers and side outputs */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(3, 2, 9, 7));
    dg_node *w = dg_param(g, "w", DG_SHAPE(4, 2, 3, 3), (dg_init){DG_INIT_NORMAL, 0, 0.3f, 5});
    dg_node *h = dg_max_pool2d(g, dg_relu(g, dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.pad = {1, 1}})),
                               (dg_pool2d_opts){.kernel = {2, 2}});
    dg_node *loss = dg_sum(g, dg_mul(g, h, h), 0xFu, false), *dw;
    ASSERT_OK(dg_grad(g, loss, &w, 1, &dw));
    dg_node *outs[2] = {loss, dw};
    expect_live_within_arena(g, outs, 2, "conv + pool with gradient");
    dg_graph_free(g);
}
