/* test_seams.c: the interface-v2 seams of the core. Attributes round-trip
 * through their typed accessors; a side output is computed by its owner's
 * step, placed from that step to its last reader, right against float64,
 * and never differentiated; in-place writes are declared by the op table
 * and refused on anything but persistent state; the backend interface
 * checks its version, sees whole nodes, times with events and applies its
 * thread count when it runs. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/attrs.h"
#include "core/backend_impl.h"
#include "core/check/ref.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

Test(seams, attributes_round_trip_through_their_family) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 4)), *b = dg_input(g, "b", DG_SHAPE(5, 4));
    dg_node *mm = dg_matmul(g, a, b, false, true);
    dg_node *pm = dg_permute(g, a, (int[]){1, 0});
    dg_node *sm = dg_sum(g, a, 2u, true);
    dg_node *lr = dg_leaky_relu(g, a, 0.25f);
    ASSERT_OK(dg_graph_status(g));
    cr_assert(!dg_attr_matmul_of(mm).trans_a && dg_attr_matmul_of(mm).trans_b);
    cr_assert(dg_attr_permute_of(pm).perm[0] == 1 && dg_attr_permute_of(pm).perm[1] == 0);
    cr_assert(dg_attr_reduce_of(sm).axes == 2u && dg_attr_reduce_of(sm).keepdims);
    cr_assert_float_eq(dg_attr_scalar_of(lr).value, 0.25f, 0);
    cr_assert_float_eq(dg_attr_scalar_or0(dg_exp(g, a)), 0.0f, 0, "exp has no scalar");
    for (int op = 0; op < DG_OP_COUNT; op++) /* every row names a family that fits the block */
        cr_assert(dg_op_info_get((dg_op)op)->name, "op %d has no row", op);
    dg_graph_free(g);
}

/* logits [R, C] -> loss with its lse side output; the gradient wrt logits */
typedef struct ce_graph {
    dg_graph *g;
    dg_node  *x, *y, *loss, *lse, *dx;
} ce_graph;

#define R 6
#define C 5

static void ce_graph_new(ce_graph *t) {
    t->g = dg_graph_new();
    t->x = dg_param(t->g, "x", DG_SHAPE(R, C), (dg_init){DG_INIT_UNIFORM, -3, 3, 11});
    t->y = dg_input_i32(t->g, "y", DG_SHAPE(R));
    t->loss = dg_softmax_cross_entropy(t->g, t->x, t->y);
    ASSERT_OK(dg_graph_status(t->g));
    cr_assert_eq(t->loss->n_side, 1, "softmax_cross_entropy declares one side output");
    t->lse = t->loss->side[0];
    cr_assert(t->lse->op == DG_OP_SIDE_OUTPUT && t->lse->in[0] == t->loss && t->lse->shape.ndim == 1 &&
              t->lse->shape.d[0] == R, "lse is [R], owned by the loss node");
    ASSERT_OK(dg_grad(t->g, t->loss, &t->x, 1, &t->dx));
}

static const dg_plan_buffer *buffer_of(const dg_plan *p, const dg_node *n) {
    int nb;
    const dg_plan_buffer *b = dg_plan_buffers(p, &nb);
    for (int i = 0; i < nb; i++)
        if (b[i].node_id == n->id) return &b[i];
    return NULL;
}

Test(seams, side_output_is_written_by_its_owner_and_kept_for_its_reader) {
    ce_graph t;
    ce_graph_new(&t);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    dg_node *outs[2] = {t.loss, t.dx};
    ASSERT_OK(dg_plan_new(&p, t.g, be, outs, 2, NULL));
    const dg_plan_buffer *lb = buffer_of(p, t.lse);
    cr_assert(lb, "the lse side output has an arena buffer");
    const dg_node *bwd = t.dx;
    while (bwd->op != DG_OP_SOFTMAX_CE_BACKWARD) bwd = bwd->in[0]; /* through views, if any */
    cr_assert_eq(bwd->in[3], t.lse, "the backward reads the saved lse");
    cr_assert_eq(lb->first, t.loss->id, "lse lives from its owner's step");
    cr_assert_geq(lb->last, bwd->id, "lse lives until the backward reads it");
    int n_steps;
    const dg_step *steps = dg_plan_steps(p, &n_steps);
    bool owner_has_side = false;
    for (int i = 0; i < n_steps; i++) {
        cr_assert_neq(steps[i].node->op, DG_OP_SIDE_OUTPUT, "a side output is not a step of its own");
        if (steps[i].node == t.loss) owner_has_side = steps[i].side[0] == dg_plan_data(p, t.lse);
    }
    cr_assert(owner_has_side, "the owner's step writes the side output's storage");

    int32_t labels[R];
    dg_rng r = dg_rng_new(test_seed());
    for (int i = 0; i < R; i++) labels[i] = (int32_t)(dg_rng_u64(&r) % C);
    ASSERT_OK(dg_plan_set(p, t.y, labels, sizeof labels));
    ASSERT_OK(dg_plan_run(p));
    float lse[R], x[R * C];
    ASSERT_OK(dg_plan_get(p, t.lse, lse, sizeof lse));
    ASSERT_OK(dg_plan_get(p, t.x, x, sizeof x));
    for (int i = 0; i < R; i++) {
        double m = x[i * C], s = 0;
        for (int j = 1; j < C; j++) m = fmax(m, x[i * C + j]);
        for (int j = 0; j < C; j++) s += exp(x[i * C + j] - m);
        cr_assert_float_eq(lse[i], m + log(s), 1e-5, "row %d: lse %.7g, want %.7g", i, lse[i], m + log(s));
    }
    dg_plan_free(p);

    /* a forward-only plan still gives the owner's step somewhere to write */
    ASSERT_OK(dg_plan_new(&p, t.g, be, &t.loss, 1, NULL));
    cr_assert(dg_plan_has(p, t.lse), "the side output is planned even with no reader");
    cr_assert_eq(buffer_of(p, t.lse)->last, t.lse->id, "and dies right after its owner");
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(t.g);
}

Test(seams, side_output_reference_is_its_definition) {
    ce_graph t;
    ce_graph_new(&t);
    int n = dg_graph_size(t.g);
    double **v = calloc((size_t)n, sizeof *v);
    v[t.x->id] = malloc(R * C * sizeof(double));
    v[t.y->id] = malloc(R * sizeof(double));
    for (int i = 0; i < R * C; i++) v[t.x->id][i] = (i % 7) - 3.0;
    for (int i = 0; i < R; i++) v[t.y->id][i] = i % C;
    for (int id = 0; id < n; id++) { /* dloss and any other constant */
        const dg_node *c = dg_graph_node(t.g, id);
        if (c->leaf == DG_LEAF_CONST) {
            v[id] = malloc((size_t)dg_node_numel(c) * sizeof(double));
            for (int64_t j = 0; j < dg_node_numel(c); j++) v[id][j] = c->init.a;
        }
    }
    ASSERT_OK(ref_eval(t.g, n, v));
    double mean = 0;
    for (int i = 0; i < R; i++) mean += v[t.lse->id][i] - v[t.x->id][i * C + (int)v[t.y->id][i]];
    cr_assert_float_eq(v[t.loss->id][0], mean / R, 1e-12, "loss = mean(lse - x[label])");
    ref_free(v, n);
    free(v);
    dg_graph_free(t.g);
}

Test(seams, a_loss_through_a_side_output_has_no_gradient) {
    ce_graph t;
    ce_graph_new(&t);
    dg_node *l2 = dg_sum(t.g, t.lse, DG_ALL_AXES, false), *d;
    cr_assert_eq(dg_grad(t.g, l2, &t.x, 1, &d), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "side output"), "message: %s", dg_last_error());
    dg_graph_free(t.g);
}

Test(seams, updates_write_only_what_their_row_declares) {
    dg_graph *g = dg_graph_new();
    dg_node *w = dg_param(g, "w", DG_SHAPE(4), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *loss = dg_sum(g, dg_mul(g, w, w), DG_ALL_AXES, false), *dw, *upd;
    ASSERT_OK(dg_grad(g, loss, &w, 1, &dw));
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    ASSERT_OK(dg_optim_apply(g, &o, &w, &dw, 1, &upd));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &upd, 1, NULL));
    int n;
    const dg_step *s = dg_plan_steps(p, &n);
    const dg_step *u = &s[n - 1];
    cr_assert_eq(u->node->op, DG_OP_MOMENTUM_UPDATE);
    cr_assert(u->inout[0] == dg_plan_data(p, w) && u->inout[1] == NULL && u->inout[2] == u->in[2],
              "momentum writes w and v, reads dw");
    for (int i = 0; i + 1 < n; i++)
        for (int j = 0; j < DG_MAX_INPUTS; j++) cr_assert_null(s[i].inout[j], "%s writes nothing in place",
                                                               dg_op_name(s[i].node->op));
    dg_plan_free(p);

    /* a hand-made update writing an input (not a parameter) is refused */
    dg_node *x = dg_input(g, "x", DG_SHAPE(4));
    dg_node *in[2] = {x, dw};
    dg_node *bad = dg__node_new(g, DG_OP_SGD_UPDATE, x->shape, 2, in);
    bad->view_of = x;
    cr_assert_eq(dg_plan_new(&p, g, be, &bad, 1, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "in place") && strstr(dg_last_error(), "'x'"), "%s", dg_last_error());
    dg_backend_free(be);
    dg_graph_free(g);
}

Test(seams, backend_interface_version_is_checked) {
    dg_backend_i iface = {.version = DG_BACKEND_IFACE_VERSION + 1};
    cr_assert_null(dg__backend_new(&iface, NULL));
    cr_assert(strstr(dg_last_error(), "version"), "%s", dg_last_error());
}

Test(seams, cpu_host_memory_is_aligned_usable_and_checked) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    size_t sizes[] = {0, 1, 63, 65, 4096};
    for (int i = 0; i < 5; i++) {
        unsigned char *p = NULL;
        ASSERT_OK(dg_backend_host_alloc(be, sizes[i], (void **)&p));
        cr_assert_not_null(p);
        cr_assert_eq((uintptr_t)p % 64, 0, "%zu bytes at %p: not 64-byte aligned", sizes[i], (void *)p);
        memset(p, 0xab, sizes[i]); /* ASan: every byte asked for is there */
        dg_backend_host_free(be, p);
    }
    void *p = &p;
    cr_assert_eq(dg_backend_host_alloc(NULL, 8, &p), DG_ERR_INVALID);
    cr_assert_eq(dg_backend_host_alloc(be, 8, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "dg_backend_host_alloc"), "%s", dg_last_error());
    cr_assert_eq(dg_backend_host_alloc(be, SIZE_MAX - 8, &p), DG_ERR_OOM, "a size that overflows the rounding");
    cr_assert_null(p);
    dg_backend_host_free(be, NULL);
    dg_backend_host_free(NULL, NULL);
    dg_backend_free(be);
}

/* the plan reserves what the backend's scratch_bytes says, not the
 * portable columns: a conv graph's arena with a hook that asks nothing,
 * the default (dg_node_scratch_bytes), and one that asks 64 MiB */
static size_t scratch_calls;
static size_t scratch_none(const dg_backend *be, const dg_node *n) {
    (void)be;
    scratch_calls += n->op == DG_OP_CONV2D;
    return 0;
}
static size_t scratch_big(const dg_backend *be, const dg_node *n) {
    (void)be;
    return n->op == DG_OP_CONV2D ? (size_t)64 << 20 : dg_node_scratch_bytes(n);
}

Test(seams, plan_reserves_the_backends_scratch) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 8, 16, 16)), *w = dg_input(g, "w", DG_SHAPE(8, 8, 3, 3));
    dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.stride = {1, 1}, .pad = {1, 1}, .dilation = {1, 1}, .groups = 1});
    cr_assert_not_null(y, "%s", dg_last_error());
    cr_assert_gt(dg_node_scratch_bytes(y), 0, "im2col columns expected");
    size_t arena[3];
    const dg_backend_i *cpu_iface = be->iface;
    dg_backend_i hooked = *cpu_iface;
    size_t (*hooks[3])(const dg_backend *, const dg_node *) = {scratch_none, NULL, scratch_big};
    for (int i = 0; i < 3; i++) {
        hooked.scratch_bytes = hooks[i];
        be->iface = &hooked;
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
        arena[i] = dg_plan_stats_get(p).arena_bytes;
        dg_plan_free(p);
    }
    be->iface = cpu_iface;
    cr_assert_gt(scratch_calls, 0, "the plan never asked the backend");
    cr_assert_eq(arena[0], dg_node_bytes(y), "no scratch: only y (%zu bytes), got %zu", dg_node_bytes(y), arena[0]);
    cr_assert_geq(arena[1], dg_node_bytes(y) + dg_node_scratch_bytes(y));
    cr_assert_geq(arena[2], ((size_t)64 << 20) + dg_node_bytes(y));
    cr_assert_eq(dg_backend_scratch_bytes(be, y), dg_node_scratch_bytes(y));
    cr_assert_eq(dg_backend_scratch_bytes(NULL, y), 0);
    dg_graph_free(g);
    dg_backend_free(be);
}

Test(seams, supports_sees_the_node) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 3));
    cr_assert(!dg_backend_supports(be, x), "a leaf is not computed");
    cr_assert(dg_backend_supports(be, dg_relu(g, x)));
    dg_graph_free(g);
    dg_backend_free(be);
}

Test(seams, events_time_work_on_their_backend_only) {
    dg_backend *a, *b;
    ASSERT_OK(dg_cpu_backend_new(&a, 1));
    ASSERT_OK(dg_cpu_backend_new(&b, 1));
    dg_event *e0, *e1, *f;
    ASSERT_OK(dg_event_new(a, &e0));
    ASSERT_OK(dg_event_new(a, &e1));
    ASSERT_OK(dg_event_new(b, &f));
    ASSERT_OK(dg_event_record(e0));
    volatile double acc = 0;
    for (int i = 0; i < 2000000; i++) acc += 1e-9 * i;
    ASSERT_OK(dg_event_record(e1));
    ASSERT_OK(dg_event_record(f));
    double ms = -1;
    ASSERT_OK(dg_event_elapsed(e0, e1, &ms));
    cr_assert_gt(ms, 0.0, "elapsed %.6f ms", ms);
    cr_assert_eq(dg_event_elapsed(e0, f, &ms), DG_ERR_INVALID, "events of two backends");
    dg_event_free(e0); dg_event_free(e1); dg_event_free(f);
    dg_backend_free(a);
    dg_backend_free(b);
}

/* Thread counts are process-wide in OpenMP and OpenBLAS: each backend must
 * apply its own whenever it runs. */
Test(seams, each_cpu_backend_runs_with_its_own_thread_count) {
    dg_backend *one, *two;
    ASSERT_OK(dg_cpu_backend_new(&one, 1));
    ASSERT_OK(dg_cpu_backend_new(&two, 2));
    float A[4] = {1, 2, 3, 4}, Cm[4];
    dg_cpu_sgemm(one, DG_CPU_GEMM_OPENBLAS, false, false, 2, 2, 2, A, A, Cm);
    cr_assert_eq(omp_get_max_threads(), 1);
    dg_cpu_sgemm(two, DG_CPU_GEMM_OPENBLAS, false, false, 2, 2, 2, A, A, Cm);
    cr_assert_eq(omp_get_max_threads(), 2);
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4)), *y = dg_relu(g, x);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, one, &y, 1, NULL));
    ASSERT_OK(dg_plan_run(p));
    cr_assert_eq(omp_get_max_threads(), 1, "a plan run applies its backend's count");
    cr_assert_float_eq(Cm[0], 7.0f, 0);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(one);
    dg_backend_free(two);
}
