/* test_misuse.c: every public call of the core, given what a careless or
 * hostile caller might pass (NULL, a node of another graph, a shape of too
 * many dimensions or too many elements, an out-of-range enum, a negative
 * count), returns an error status whose message names the problem: no
 * crash, no exit, no assert, no DG_OK with a wrong result. */
#include <math.h>
#include <string.h>

#include <duograd/testing.h>

#include "core/attrs.h"
#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
#include "core/nn/trainer.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"

#include "test_util.h"

/* Clears the last error, so a message checked after a call is that call's. */
static void clear_error(void) { dg__fail(DG_OK, "-"); }

#define ASSERT_MSG(what) \
    cr_assert(strstr(dg_last_error(), (what)), "message '%s' does not name '%s'", dg_last_error(), (what))

/* expr returns `want`, with a message naming `what` */
#define ASSERT_FAILS(expr, want, what)                                                  \
    do {                                                                                \
        clear_error();                                                                  \
        dg_status st_ = (expr);                                                         \
        cr_assert_eq(st_, (want), "%s -> %s, want %s (%s)", #expr, dg_status_name(st_), \
                     dg_status_name(want), dg_last_error());                            \
        ASSERT_MSG(what);                                                               \
    } while (0)

/* expr (a value, compared with ==) equals `want`, with a message naming `what` */
#define ASSERT_VALUE(expr, want, what)                                    \
    do {                                                                  \
        clear_error();                                                    \
        cr_assert((expr) == (want), "%s is not %s", #expr, #want);        \
        ASSERT_MSG(what);                                                 \
    } while (0)

static const dg_init zero_init = {DG_INIT_FILL, 0, 0, 0};
static const int64_t big = (int64_t)1 << 40;

/* ---- graph and shapes ---- */

Test(misuse, null_graph) {
    ASSERT_FAILS(dg_graph_status(NULL), DG_ERR_INVALID, "dg_graph_status: NULL graph");
    ASSERT_VALUE(dg_graph_size(NULL), -1, "dg_graph_size: NULL graph");
    ASSERT_VALUE(dg_graph_node(NULL, 0), NULL, "dg_graph_node: NULL graph");
    ASSERT_VALUE(dg_input(NULL, "x", DG_SHAPE(2)), NULL, "leaf 'x': NULL graph");
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2));
    ASSERT_VALUE(dg_add(NULL, x, x), NULL, "add: NULL graph");
    ASSERT_VALUE(dg_matmul(NULL, x, x, false, false), NULL, "matmul: NULL graph");
    ASSERT_VALUE(dg_graph_node(g, 1), NULL, "no node 1 in a graph of 1");
    ASSERT_VALUE(dg_graph_node(g, -1), NULL, "no node -1");
    ASSERT_VALUE(dg_node_numel(NULL), -1, "dg_node_numel: NULL node");
    ASSERT_VALUE(dg_node_bytes(NULL), 0, "dg_node_bytes: NULL node");
    ASSERT_OK(dg_graph_status(g));
    dg_graph_free(g);
}

Test(misuse, too_many_dims) {
    dg_shape five = {.ndim = 5, .d = {2, 2, 2, 2}};
    dg_graph *g = dg_graph_new();
    ASSERT_VALUE(dg_input(g, "x", five), NULL, "leaf 'x': shape [5 dims] needs 1 to 4 dims");
    ASSERT_FAILS(dg_graph_status(g), DG_ERR_SHAPE, "needs 1 to 4 dims");
    dg_graph_free(g);

    g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(16));
    ASSERT_VALUE(dg_reshape(g, x, five), NULL, "cannot reshape [16] into [5 dims]");
    dg_graph_free(g);

    g = dg_graph_new();
    ASSERT_VALUE(dg_param(g, "w", (dg_shape){.ndim = 0}, zero_init), NULL, "shape [0 dims] needs 1 to 4 dims");
    dg_graph_free(g);

    char buf[32];
    cr_assert_str_eq(dg_shape_str(five, buf, sizeof buf), "[5 dims]");
    cr_assert_str_eq(dg_shape_str((dg_shape){.ndim = -3}, buf, sizeof buf), "[-3 dims]");
    cr_assert_str_eq(dg_shape_str(DG_SHAPE(2), NULL, 0), "");
    cr_assert(!dg_shape_eq(five, five), "a 5-D shape equals nothing");
    ASSERT_VALUE(dg_shape_numel(five), -1, "shape of 5 dims");
}

Test(misuse, dimensions_below_one) {
    dg_graph *g = dg_graph_new();
    ASSERT_VALUE(dg_input(g, "x", DG_SHAPE(3, 0)), NULL, "leaf 'x': shape [3,0] has a dimension < 1");
    dg_graph_free(g);
    ASSERT_VALUE(dg_shape_numel(DG_SHAPE(3, -2)), -1, "a negative dimension");
}

Test(misuse, element_counts_that_overflow) {
    /* int64 overflows: 2^80 elements */
    ASSERT_VALUE(dg_shape_numel(DG_SHAPE(big, big)), -1, "more elements than int64 holds");
    dg_graph *g = dg_graph_new();
    ASSERT_VALUE(dg_input(g, "x", DG_SHAPE(big, big)), NULL, "has more than 2^40 elements");
    dg_graph_free(g);

    /* int64 holds 2^62 elements, size_t not their bytes */
    dg_node fake = {.op = DG_OP_LEAF, .shape = DG_SHAPE((int64_t)1 << 31, (int64_t)1 << 31), .name = "fake"};
    ASSERT_VALUE(dg_node_bytes(&fake), 0, "node 'fake' has a shape of no valid size");
    fake.shape = DG_SHAPE(big, big);
    ASSERT_VALUE(dg_node_bytes(&fake), 0, "node 'fake' has a shape of no valid size");

    /* valid operands whose result would be too large: broadcasting, matmul */
    g = dg_graph_new();
    dg_node *col = dg_input(g, "col", DG_SHAPE(big, 1)), *row = dg_input(g, "row", DG_SHAPE(1, big));
    ASSERT_OK(dg_graph_status(g));
    ASSERT_VALUE(dg_add(g, col, row), NULL, "add: output shape [1099511627776,1099511627776] has more than");
    dg_graph_free(g);
    g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE((int64_t)1 << 21, 1)), *b = dg_input(g, "b", DG_SHAPE(1, (int64_t)1 << 21));
    ASSERT_VALUE(dg_matmul(g, a, b, false, false), NULL, "matmul: output shape [2097152,2097152] has more than 2^40");
    dg_graph_free(g);
}

Test(misuse, unknown_init_kind) {
    dg_graph *g = dg_graph_new();
    ASSERT_VALUE(dg_param(g, "w", DG_SHAPE(2), (dg_init){(dg_init_kind)7, 0, 0, 0}), NULL,
                 "leaf 'w': unknown init kind 7");
    dg_graph_free(g);
    float host[4];
    ASSERT_FAILS(dg_init_fill((dg_init){(dg_init_kind)-1, 0, 0, 0}, host, 4), DG_ERR_INVALID, "unknown init kind -1");
    ASSERT_FAILS(dg_init_fill(zero_init, NULL, 4), DG_ERR_INVALID, "NULL host buffer");
    ASSERT_FAILS(dg_init_fill(zero_init, host, -1), DG_ERR_INVALID, "negative count");
}

Test(misuse, builder_given_a_node_of_another_graph) {
    dg_graph *g = dg_graph_new(), *h = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(2)), *b = dg_input(h, "b", DG_SHAPE(2));
    ASSERT_VALUE(dg_add(g, a, b), NULL, "add: input 1 belongs to another graph");
    ASSERT_FAILS(dg_graph_status(g), DG_ERR_INVALID, "another graph");
    dg_node fake = {.id = -1};
    ASSERT_VALUE(dg_relu(h, &fake), NULL, "relu: input 0 belongs to another graph");
    dg_graph_free(g);
    dg_graph_free(h);
}

/* ---- dg_grad ---- */

typedef struct two_graphs {
    dg_graph *g, *h;
    dg_node  *w, *loss, *hw, *hloss;
} two_graphs;

/* the same loss = sum(w * w) in two graphs: node ids line up */
static void two_graphs_new(two_graphs *t) {
    t->g = dg_graph_new();
    t->h = dg_graph_new();
    t->w = dg_param(t->g, "w", DG_SHAPE(3), zero_init);
    t->loss = dg_sum(t->g, dg_mul(t->g, t->w, t->w), DG_ALL_AXES, false);
    t->hw = dg_param(t->h, "hw", DG_SHAPE(3), zero_init);
    t->hloss = dg_sum(t->h, dg_mul(t->h, t->hw, t->hw), DG_ALL_AXES, false);
    ASSERT_OK(dg_graph_status(t->g));
    ASSERT_OK(dg_graph_status(t->h));
}

static void two_graphs_free(two_graphs *t) {
    dg_graph_free(t->g);
    dg_graph_free(t->h);
}

Test(misuse, grad_with_a_null_wrt_entry) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *wrt[2] = {t.w, NULL}, *grads[2];
    int size = dg_graph_size(t.g);
    ASSERT_FAILS(dg_grad(t.g, t.loss, wrt, 2, grads), DG_ERR_INVALID, "dg_grad: wrt[1] is NULL");
    cr_assert_eq(dg_graph_size(t.g), size, "a refused dg_grad adds nothing");
    ASSERT_OK(dg_graph_status(t.g));
    two_graphs_free(&t);
}

Test(misuse, grad_with_nodes_of_another_graph) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *grads[1];
    /* hw has w's id: unchecked, g's gradient of w came back as hw's */
    ASSERT_FAILS(dg_grad(t.g, t.loss, &t.hw, 1, grads), DG_ERR_INVALID,
                 "dg_grad: wrt[0] ('hw') is not a node of this graph");
    ASSERT_FAILS(dg_grad(t.g, t.hloss, &t.w, 1, grads), DG_ERR_INVALID, "loss 'sum_2' is not a node of this graph");
    ASSERT_OK(dg_graph_status(t.g));
    two_graphs_free(&t);
}

Test(misuse, grad_with_null_arguments) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *grads[1];
    ASSERT_FAILS(dg_grad(NULL, t.loss, &t.w, 1, grads), DG_ERR_INVALID, "dg_grad: NULL graph");
    ASSERT_FAILS(dg_grad(t.g, NULL, &t.w, 1, grads), DG_ERR_INVALID, "dg_grad: NULL loss");
    ASSERT_FAILS(dg_grad(t.g, t.loss, &t.w, 1, NULL), DG_ERR_INVALID, "NULL wrt or grads");
    ASSERT_FAILS(dg_grad(t.g, t.loss, &t.w, -1, grads), DG_ERR_INVALID, "n is -1");
    two_graphs_free(&t);
}

/* ---- optimizers ---- */

Test(misuse, optimizer_of_unknown_kind) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *dw, *upd = NULL;
    ASSERT_OK(dg_grad(t.g, t.loss, &t.w, 1, &dw));
    int size = dg_graph_size(t.g);
    dg_optim o = dg_optim_default((dg_optim_kind)3, 0.1f);
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, &upd), DG_ERR_INVALID, "unknown optimizer kind 3");
    cr_assert_null(upd);
    cr_assert_eq(dg_graph_size(t.g), size, "a refused dg_optim_apply adds nothing");
    cr_assert_str_eq(dg_optim_name((dg_optim_kind)3), "?");
    two_graphs_free(&t);
}

Test(misuse, optimizer_arguments) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *dw, *upd, *none = NULL;
    ASSERT_OK(dg_grad(t.g, t.loss, &t.w, 1, &dw));
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    ASSERT_FAILS(dg_optim_apply(NULL, &o, &t.w, &dw, 1, &upd), DG_ERR_INVALID, "NULL graph");
    ASSERT_FAILS(dg_optim_apply(t.g, NULL, &t.w, &dw, 1, &upd), DG_ERR_INVALID, "NULL optimizer");
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, -2, &upd), DG_ERR_INVALID, "n is -2");
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &none, 1, &upd), DG_ERR_INVALID, "grads[0] is NULL");
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.hw, &dw, 1, &upd), DG_ERR_INVALID,
                 "params[0] ('hw') is not a node of this graph");
    ASSERT_OK(dg_graph_status(t.g));
    ASSERT_FAILS(dg_optim_parse("adam", NULL), DG_ERR_INVALID, "NULL kind");
    two_graphs_free(&t);
}

/* the skip flag and the gradient scale of dg_optim_apply_ex: each a
 * float32 [1] node of the graph, refused otherwise with nothing added */
Test(misuse, optimizer_skip_and_scale) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *dw, *upd = NULL;
    ASSERT_OK(dg_grad(t.g, t.loss, &t.w, 1, &dw));
    dg_node *half = dg_cast(t.g, dg_const(t.g, "one", DG_SHAPE(1), 1.0f), DG_BF16);
    dg_node *other = dg_const(t.h, "other", DG_SHAPE(1), 1.0f);
    cr_assert(half && other, "%s", dg_last_error());
    int size = dg_graph_size(t.g);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    ASSERT_FAILS(dg_optim_apply_ex(t.g, &o, &t.w, &dw, 1, NULL, half, &upd), DG_ERR_INVALID,
                 "the gradient scale 'cast_");
    cr_assert(strstr(dg_last_error(), "float32 of one element (bf16, 1 elements)"), "%s", dg_last_error());
    ASSERT_FAILS(dg_optim_apply_ex(t.g, &o, &t.w, &dw, 1, NULL, t.w, &upd), DG_ERR_INVALID,
                 "the gradient scale 'w' must be float32 of one element (f32, 3 elements)");
    ASSERT_FAILS(dg_optim_apply_ex(t.g, &o, &t.w, &dw, 1, other, NULL, &upd), DG_ERR_INVALID,
                 "the skip flag 'other' is not a node of this graph");
    ASSERT_FAILS(dg_optim_apply_ex(t.g, &o, &t.w, &dw, 1, NULL, other, &upd), DG_ERR_INVALID,
                 "the gradient scale 'other' is not a node of this graph");
    cr_assert_null(upd);
    cr_assert_eq(dg_graph_size(t.g), size, "a refused dg_optim_apply_ex adds nothing");
    two_graphs_free(&t);
}

/* hyper-parameters that would divide by zero or not train, and a parameter
 * that two updates would write */
Test(misuse, optimizer_settings_out_of_range) {
    two_graphs t;
    two_graphs_new(&t);
    dg_node *dw, *upd[2];
    ASSERT_OK(dg_grad(t.g, t.loss, &t.w, 1, &dw));
    int size = dg_graph_size(t.g);
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.0f);
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, upd), DG_ERR_INVALID, "learning rate 0");
    o.lr = NAN;
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, upd), DG_ERR_INVALID, "learning rate nan");
    o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    o.momentum = 1.0f;
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, upd), DG_ERR_INVALID, "momentum 1");
    o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    o.beta1 = 1.0f;
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, upd), DG_ERR_INVALID, "beta1 1");
    o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    o.eps = 0.0f;
    ASSERT_FAILS(dg_optim_apply(t.g, &o, &t.w, &dw, 1, upd), DG_ERR_INVALID, "eps 0");
    o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    dg_node *twice[2] = {t.w, t.w}, *grads[2] = {dw, dw};
    ASSERT_FAILS(dg_optim_apply(t.g, &o, twice, grads, 2, upd), DG_ERR_INVALID, "given twice (0 and 1)");
    cr_assert_eq(dg_graph_size(t.g), size, "a refused dg_optim_apply adds nothing");
    two_graphs_free(&t);
}

/* ---- plans ---- */

typedef struct planned {
    two_graphs t;
    dg_backend *be;
    dg_plan    *p;
} planned;

static void planned_new(planned *s) {
    two_graphs_new(&s->t);
    ASSERT_OK(dg_cpu_backend_new(&s->be, 1));
    ASSERT_OK(dg_plan_new(&s->p, s->t.g, s->be, &s->t.loss, 1, NULL));
}

static void planned_free(planned *s) {
    dg_plan_free(s->p);
    dg_backend_free(s->be);
    two_graphs_free(&s->t);
}

Test(misuse, plan_set_and_get_with_a_null_host_buffer) {
    planned s;
    planned_new(&s);
    ASSERT_FAILS(dg_plan_set(s.p, s.t.w, NULL, 12), DG_ERR_INVALID, "dg_plan_set: NULL host buffer");
    ASSERT_FAILS(dg_plan_get(s.p, s.t.loss, NULL, 4), DG_ERR_INVALID, "dg_plan_get: NULL host buffer");
    float v[3] = {0};
    ASSERT_FAILS(dg_plan_set(NULL, s.t.w, v, 12), DG_ERR_INVALID, "dg_plan_set: NULL plan");
    ASSERT_FAILS(dg_plan_get(s.p, NULL, v, 4), DG_ERR_INVALID, "dg_plan_get: NULL node");
    ASSERT_FAILS(dg_plan_set(s.p, s.t.hw, v, 12), DG_ERR_INVALID, "node 'hw' is not part of this plan");
    planned_free(&s);
}

Test(misuse, plan_new_arguments) {
    planned s;
    planned_new(&s);
    dg_plan *p = NULL;
    ASSERT_FAILS(dg_plan_new(NULL, s.t.g, s.be, &s.t.loss, 1, NULL), DG_ERR_INVALID, "dg_plan_new: NULL out");
    ASSERT_FAILS(dg_plan_new(&p, NULL, s.be, &s.t.loss, 1, NULL), DG_ERR_INVALID, "NULL graph");
    ASSERT_FAILS(dg_plan_new(&p, s.t.g, NULL, &s.t.loss, 1, NULL), DG_ERR_INVALID, "NULL backend");
    ASSERT_FAILS(dg_plan_new(&p, s.t.g, s.be, NULL, 1, NULL), DG_ERR_INVALID, "NULL outputs");
    ASSERT_FAILS(dg_plan_new(&p, s.t.g, s.be, &s.t.loss, 0, NULL), DG_ERR_INVALID, "0 outputs");
    ASSERT_FAILS(dg_plan_new(&p, s.t.g, s.be, &s.t.hloss, 1, NULL), DG_ERR_INVALID,
                 "output 0 is not a node of this graph");
    cr_assert_null(p);
    planned_free(&s);
}

Test(misuse, plan_new_forwards_the_graph_error_intact) {
    planned s;
    planned_new(&s);
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(2, 3)), *b = dg_input(g, "b", DG_SHAPE(4, 5));
    cr_assert_null(dg_matmul(g, a, b, false, false));
    char first[256];
    snprintf(first, sizeof first, "%s", dg_last_error());
    cr_assert(strstr(first, "matmul: inner dimensions differ"), "%s", first);
    char want[512];
    snprintf(want, sizeof want, "dg_plan_new: the graph is in an error state: %s", first);
    dg_plan *p;
    ASSERT_FAILS(dg_plan_new(&p, g, s.be, &a, 1, NULL), DG_ERR_SHAPE, "dg_plan_new");
    cr_assert_str_eq(dg_last_error(), want);
    /* a later, unrelated failure does not become the graph's error */
    dg_optim_kind k;
    cr_assert_neq(dg_optim_parse("bogus", &k), DG_OK);
    ASSERT_FAILS(dg_plan_new(&p, g, s.be, &a, 1, NULL), DG_ERR_SHAPE, "dg_plan_new");
    cr_assert_str_eq(dg_last_error(), want);
    ASSERT_FAILS(dg_grad(g, a, &a, 1, &b), DG_ERR_SHAPE, "dg_grad: the graph is in an error state: matmul");
    dg_graph_free(g);
    planned_free(&s);
}

Test(misuse, plan_queries_with_null) {
    planned s;
    planned_new(&s);
    int n = 7;
    ASSERT_VALUE(dg_plan_buffers(NULL, &n), NULL, "dg_plan_buffers: NULL plan");
    cr_assert_eq(n, 0);
    ASSERT_VALUE(dg_plan_steps(s.p, NULL), NULL, "dg_plan_steps: NULL count");
    ASSERT_VALUE(dg_plan_stats_get(NULL).n_steps, 0, "dg_plan_stats_get: NULL plan");
    ASSERT_VALUE(dg_plan_data(s.p, s.t.hw), NULL, "dg_plan_data: the node is not planned");
    cr_assert(!dg_plan_has(s.p, s.t.hw) && !dg_plan_has(NULL, s.t.w) && !dg_plan_has(s.p, NULL));
    ASSERT_FAILS(dg_plan_run(NULL), DG_ERR_INVALID, "NULL plan");
    void *data[8] = {0};
    ASSERT_VALUE(dg_step_of(NULL, data, 0).node, NULL, "dg_step_of: NULL node");
    ASSERT_VALUE(dg_step_of(s.t.loss, NULL, 0).node, NULL, "dg_step_of: NULL data");
    planned_free(&s);
}

/* ---- backends ---- */

Test(misuse, backend_calls_with_null) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    void *buf = NULL;
    float host[4] = {0};
    ASSERT_FAILS(dg_backend_alloc(NULL, 16, &buf), DG_ERR_INVALID, "dg_backend_alloc: NULL backend");
    ASSERT_FAILS(dg_backend_alloc(be, 16, NULL), DG_ERR_INVALID, "dg_backend_alloc: NULL out");
    ASSERT_OK(dg_backend_alloc(be, 16, &buf));
    ASSERT_FAILS(dg_backend_upload(be, buf, NULL, 16), DG_ERR_INVALID, "dg_backend_upload: NULL source");
    ASSERT_FAILS(dg_backend_upload(NULL, buf, host, 16), DG_ERR_INVALID, "dg_backend_upload: NULL backend");
    ASSERT_FAILS(dg_backend_download(be, NULL, buf, 16), DG_ERR_INVALID, "dg_backend_download: NULL destination");
    ASSERT_OK(dg_backend_upload(be, NULL, NULL, 0));
    ASSERT_FAILS(dg_backend_sync(NULL), DG_ERR_INVALID, "dg_backend_sync: NULL backend");
    ASSERT_VALUE(dg_backend_supports(be, NULL), false, "dg_backend_supports: NULL node");
    ASSERT_FAILS(dg_backend_compute(be, NULL), DG_ERR_INVALID, "dg_backend_compute: NULL step");
    ASSERT_FAILS(dg_backend_compute(be, &(dg_step){0}), DG_ERR_INVALID, "dg_backend_compute: NULL step node");
    dg_node fake = {.op = (dg_op)99, .name = "fake"};
    ASSERT_FAILS(dg_backend_compute(be, &(dg_step){.node = &fake}), DG_ERR_INVALID, "node 'fake' has unknown op 99");
    int32_t idx[1] = {0};
    ASSERT_FAILS(dg_backend_gather_rows(be, buf, buf, idx, -1, 4), DG_ERR_INVALID, "n is -1");
    ASSERT_FAILS(dg_backend_gather_rows(be, buf, buf, NULL, 1, 4), DG_ERR_INVALID, "NULL indices");
    ASSERT_FAILS(dg_backend_gather_rows(NULL, buf, buf, idx, 1, 4), DG_ERR_INVALID, "NULL backend");
    cr_assert_eq(dg_backend_n_allocs(NULL), 0);
    dg_backend_fail_alloc_after(NULL, 1);
    cr_assert_str_eq(dg_backend_name(NULL), "none");
    dg_backend_release(be, buf);
    dg_backend_free(be);
}

Test(misuse, events_with_null) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_event *ev = NULL;
    double ms;
    ASSERT_FAILS(dg_event_new(NULL, &ev), DG_ERR_INVALID, "dg_event_new: NULL backend");
    ASSERT_FAILS(dg_event_new(be, NULL), DG_ERR_INVALID, "dg_event_new: NULL out");
    ASSERT_FAILS(dg_event_record(NULL), DG_ERR_INVALID, "dg_event_record: NULL event");
    ASSERT_OK(dg_event_new(be, &ev));
    ASSERT_FAILS(dg_event_elapsed(ev, NULL, &ms), DG_ERR_INVALID, "dg_event_elapsed: NULL stop");
    ASSERT_FAILS(dg_event_elapsed(ev, ev, NULL), DG_ERR_INVALID, "dg_event_elapsed: NULL ms");
    dg_event_free(ev);
    dg_backend_free(be);
}

/* ---- ops, attributes, rng ---- */

Test(misuse, ops_out_of_range) {
    ASSERT_VALUE(dg_op_info_get(DG_OP_COUNT), NULL, "is not a dg_op");
    ASSERT_VALUE(dg_op_info_get((dg_op)-1), NULL, "op -1 is not a dg_op");
    cr_assert_str_eq(dg_op_name((dg_op)1000), "?");
    ASSERT_VALUE(dg_node_cost(NULL).bytes, 0.0, "dg_node_cost: NULL node");
    dg_node fake = {.op = (dg_op)1000};
    ASSERT_VALUE(dg_node_cost(&fake).flops, 0.0, "op 1000 is not a dg_op");
}

Test(misuse, attributes_of_the_wrong_family) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 2));
    dg_node *y = dg_add(g, x, x);
    ASSERT_VALUE(dg_attr_matmul_of(y).trans_b, false, "dg_attr_matmul_of: node 'add_1' (add) has no matmul");
    ASSERT_VALUE(dg_attr_permute_of(NULL).perm[3], 0, "dg_attr_permute_of: NULL node");
    cr_assert_float_eq(dg_attr_scalar_or0(NULL), 0.0f, 0);
    dg_graph_free(g);
}

Test(misuse, rng_with_null) {
    ASSERT_VALUE(dg_rng_u64(NULL), 0, "dg_rng: NULL generator");
    ASSERT_VALUE(dg_rng_normal(NULL), 0.0, "dg_rng: NULL generator");
}

/* ---- models and training ---- */

Test(misuse, mlp_config_out_of_range) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_FAILS(dg_mlp_new(g, &(dg_mlp_cfg){.n_widths = 0}, 1, &m), DG_ERR_INVALID, "mlp: 0 widths, needs 2 to 9");
    ASSERT_FAILS(dg_mlp_new(g, &(dg_mlp_cfg){.n_widths = 10}, 1, &m), DG_ERR_INVALID, "mlp: 10 widths");
    ASSERT_FAILS(dg_mlp_new(g, &(dg_mlp_cfg){.widths = {4, 8, 0}, .n_widths = 3}, 1, &m), DG_ERR_INVALID,
                 "mlp: width 2 is 0");
    cr_assert_eq(dg_graph_size(g), 0, "a refused configuration adds no parameter");
    ASSERT_FAILS(dg_mlp_new(g, NULL, 1, &m), DG_ERR_INVALID, "mlp: NULL config");
    ASSERT_FAILS(dg_mlp_new(g, &(dg_mlp_cfg){.widths = {1 << 30, 1 << 30}, .n_widths = 2}, 1, &m), DG_ERR_SHAPE,
                 "has more than 2^40 elements");
    dg_graph_free(g);

    dg_mlp_cfg cfg;
    ASSERT_FAILS(dg_mlp_parse_widths("784-10", NULL), DG_ERR_INVALID, "NULL cfg");
    ASSERT_FAILS(dg_mlp_parse_widths(NULL, &cfg), DG_ERR_INVALID, "need at least two");
    ASSERT_FAILS(dg_mlp_parse_widths("784-10-", &cfg), DG_ERR_INVALID, "bad layer widths '784-10-'");
    ASSERT_FAILS(dg_mlp_parse_widths("1-1-1-1-1-1-1-1-1-1", &cfg), DG_ERR_INVALID, "2 to 9 widths");
    ASSERT_FAILS(dg_mlp_parse_widths("784-0", &cfg), DG_ERR_INVALID, "bad layer widths");
}

Test(misuse, model_and_train_step) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_mlp_new(g, &(dg_mlp_cfg){.widths = {4, 3}, .n_widths = 2}, 1, &m));
    dg_shape s;
    cr_assert(!dg_model_input_shape(NULL, 2, &s) && !dg_model_input_shape(&m, 2, NULL));
    dg_model empty = {0};
    ASSERT_VALUE(dg_model_forward(g, &empty, NULL, NULL), NULL, "model: NULL model or forward");
    dg_graph_free(g);

    g = dg_graph_new();
    ASSERT_OK(dg_mlp_new(g, &(dg_mlp_cfg){.widths = {4, 3}, .n_widths = 2}, 1, &m));
    dg_train_step ts;
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 0.01f), bad = dg_optim_default((dg_optim_kind)9, 0.01f);
    ASSERT_FAILS(dg_train_step_build(g, &m, 8, &o, NULL), DG_ERR_INVALID, "train step: NULL out");
    ASSERT_FAILS(dg_train_step_build(g, &m, 0, &o, &ts), DG_ERR_INVALID, "batch 0");
    dg_model many = m;
    many.n_params = DG_MODEL_MAX_PARAMS + 1;
    ASSERT_FAILS(dg_train_step_build(g, &many, 8, &o, &ts), DG_ERR_INVALID, "has 129 parameters");
    ASSERT_FAILS(dg_train_step_build(g, &m, 8, &bad, &ts), DG_ERR_INVALID, "unknown optimizer kind 9");
    dg_graph_free(g);
}

Test(misuse, trainer_arguments) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    float x[8 * 4] = {0};
    int32_t y[8] = {0};
    dg_dataset data = {.n = 8, .rows = 2, .cols = 2, .classes = 3, .x = x, .y = y};
    dg_mlp_cfg cfg = {.widths = {4, 3}, .n_widths = 2}, none = {.n_widths = 0};
    dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &cfg, .optim = dg_optim_default(DG_OPTIM_SGD, 0.1f),
                       .epochs = 1, .batch = 4, .seed = 1};
    ASSERT_OK(dg_train(be, &o, &data, &data, NULL, NULL, NULL));
    ASSERT_FAILS(dg_train(NULL, &o, &data, &data, NULL, NULL, NULL), DG_ERR_INVALID, "train: NULL backend");
    ASSERT_FAILS(dg_train(be, NULL, &data, &data, NULL, NULL, NULL), DG_ERR_INVALID, "train: NULL options");
    ASSERT_FAILS(dg_train(be, &o, NULL, &data, NULL, NULL, NULL), DG_ERR_INVALID, "NULL training set");
    dg_dataset empty = data, huge = data, blank = data, wide = data;
    empty.n = 0;
    huge.rows = huge.cols = 1 << 16;
    blank.x = NULL;
    wide.cols = 3;
    ASSERT_FAILS(dg_train(be, &o, &data, &empty, NULL, NULL, NULL), DG_ERR_INVALID, "test set of 0 examples");
    ASSERT_FAILS(dg_train(be, &o, &huge, &data, NULL, NULL, NULL), DG_ERR_INVALID, "of 65536x65536");
    ASSERT_FAILS(dg_train(be, &o, &blank, &data, NULL, NULL, NULL), DG_ERR_INVALID, "training set without images");
    ASSERT_FAILS(dg_train(be, &o, &data, &wide, NULL, NULL, NULL), DG_ERR_INVALID, "test examples of 2x3");
    o.model_cfg = &none;
    ASSERT_FAILS(dg_train(be, &o, &data, &data, NULL, NULL, NULL), DG_ERR_INVALID, "mlp: 0 widths");
    o.model_cfg = &cfg;
    o.optim.kind = (dg_optim_kind)5;
    ASSERT_FAILS(dg_train(be, &o, &data, &data, NULL, NULL, NULL), DG_ERR_INVALID, "unknown optimizer kind 5");
    dg_backend_free(be);
}

/* dg_fail: a program built on duograd records its own failure in the slot
 * dg_last_error() reads, and gets its status back; a later library failure
 * replaces it */
Test(misuse, a_programs_own_failure_is_the_last_error) {
    cr_assert_eq(dg_fail(DG_ERR_IO, "harness: %s is %d bytes short", "x.csv", 12), DG_ERR_IO);
    cr_assert_str_eq(dg_last_error(), "harness: x.csv is 12 bytes short");
    cr_assert_null(dg_input(NULL, "x", DG_SHAPE(1)));
    cr_assert(strstr(dg_last_error(), "x.csv") == NULL, "the library's failure came last: %s", dg_last_error());
}
