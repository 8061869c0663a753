/* test_ops.c: every op of the table, on the CPU backend against the float64
 * reference (forward and backward), and the reference's symbolic gradients
 * against central finite differences. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "core/cost.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

/* Criterion may start each test in a fresh process image, where pointers
 * taken in the parent (names, build functions) are not valid: the
 * parameter is the row's index, the row is looked up in the worker. */
static struct criterion_test_params case_indices(void) {
    static int idx[256];
    for (int i = 0; i < dg_n_op_cases; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)dg_n_op_cases);
}

ParameterizedTestParameters(ops, cpu_forward) { return case_indices(); }
ParameterizedTest(int *row, ops, cpu_forward) {
    const op_case *c = &dg_op_cases[*row];
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    case_result r;
    case_ref ref;
    ASSERT_OK(case_run(&cg, be, &r));
    ASSERT_OK(case_ref_run(&cg, &ref));
    cmp_stats s = cmp_f32(r.out, ref.out, r.n_out);
    ASSERT_CLOSE(s, c->tol, "forward", c->name, seed);
    case_result_free(&r);
    case_ref_free(&ref);
    dg_backend_free(be);
    case_graph_free(&cg);
}

ParameterizedTestParameters(ops, cpu_backward) { return case_indices(); }
ParameterizedTest(int *row, ops, cpu_backward) {
    const op_case *c = &dg_op_cases[*row];
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    case_result r;
    case_ref ref;
    ASSERT_OK(case_run(&cg, be, &r));
    ASSERT_OK(case_ref_run(&cg, &ref));
    int checked = 0;
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        char what[32];
        snprintf(what, sizeof what, "grad of input %d", i);
        cmp_stats s = cmp_f32(r.grad[i], ref.grad[i], r.n_grad[i]);
        ASSERT_CLOSE(s, c->tol, what, c->name, seed);
        checked++;
    }
    cr_assert_gt(checked, 0, "%s: no gradient was checked", c->name);
    case_result_free(&r);
    case_ref_free(&ref);
    dg_backend_free(be);
    case_graph_free(&cg);
}

/* The symbolic gradient graph, evaluated in float64, must match central
 * differences of the float64 forward: this checks dg_grad and every
 * backward formula independently of float32 rounding. */
ParameterizedTestParameters(ops, gradcheck) { return case_indices(); }
ParameterizedTest(int *row, ops, gradcheck) {
    const op_case *c = &dg_op_cases[*row];
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_ref ref;
    ASSERT_OK(case_ref_run(&cg, &ref));
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        double *fd = case_finite_diff(&cg, i);
        cr_assert_not_null(fd);
        cmp_stats s = cmp_f64(ref.grad[i], fd, dg_node_numel(cg.in[i]));
        char what[64];
        snprintf(what, sizeof what, "symbolic vs finite-difference grad, input %d", i);
        ASSERT_CLOSE(s, 1e-6, what, c->name, seed);
        free(fd);
    }
    case_ref_free(&ref);
    case_graph_free(&cg);
}

/* Every op is reached by the table: the forward ops by their rows, the
 * backward ops by the rows' gradients, the updates by one training step
 * per optimizer (and a batch norm's running statistics). An op reached by
 * nothing has no float64 check of its reference, nor of either backend's
 * kernel: add a row to core/check/op_cases.c (a forward op) or use the op
 * in dg_grad (a backward op). Every node reached also has the side outputs
 * its row declares (a builder that forgot dg__side_new fails here), and a
 * cost (dg_node_cost) that counts its bytes. */
static void reach(const dg_graph *g, const char *where, int *seen) {
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *n = dg_graph_node(g, id);
        const dg_op_info *info = dg_op_info_get(n->op);
        seen[n->op]++;
        cr_expect_eq(n->n_side, info->n_side, "%s: node '%s' (%s) has %d side outputs, its op-table row declares %d",
                     where, n->name, info->name, n->n_side, info->n_side);
        bool computes = n->op != DG_OP_LEAF && n->op != DG_OP_RESHAPE && n->op != DG_OP_SIDE_OUTPUT;
        cr_expect(!computes || dg_node_cost(n).bytes > 0, "%s: node '%s' (%s) has no cost (core/cost.c)", where,
                  n->name, info->name);
    }
}

/* scaled: the updates skip on a found-inf count, and the loss scale's
 * update follows (an fp16 step's loss scaling, core/nn/train_step.h) */
static void reach_step(dg_optim_kind kind, bool running, bool scaled, int *seen) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 3));
    dg_node *scale = dg_param(g, "scale", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *shift = dg_param(g, "shift", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *bn = dg_batch_norm(g, x, scale, shift, 1e-5f);
    dg_node *loss = dg_sum(g, dg_mul(g, bn, bn), DG_ALL_AXES, false);
    dg_node *params[2] = {scale, shift}, *grads[2], *updates[2];
    ASSERT_OK(dg_grad(g, loss, params, 2, grads));
    dg_optim o = dg_optim_default(kind, 0.1f);
    dg_node *found = NULL, *loss_scale = NULL;
    if (scaled) {
        found = dg_const(g, "found_inf.zero", DG_SHAPE(1), 0.0f);
        for (int i = 0; i < 2; i++) found = dg_found_inf(g, found, grads[i]);
        loss_scale = dg_state(g, "loss_scale", DG_SHAPE(1), (dg_init){DG_INIT_FILL, 65536, 0, 0});
    }
    ASSERT_OK(dg_optim_apply_ex(g, &o, params, grads, 2, found, loss_scale, updates));
    if (scaled) {
        dg_node *clean = dg_state(g, "loss_scale.clean", DG_SHAPE(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
        cr_assert_not_null(dg_loss_scale_update(g, loss_scale, clean, found, 2000), "%s", dg_last_error());
    }
    if (running) {
        dg_node *rm = dg_param(g, "running_mean", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 0, 0, 0});
        dg_node *rv = dg_param(g, "running_var", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 1, 0, 0});
        cr_assert_not_null(dg_batch_norm_running(g, bn, rm, rv, 0.1f), "%s", dg_last_error());
    }
    ASSERT_OK(dg_graph_status(g));
    reach(g, dg_optim_name(kind), seen);
    dg_graph_free(g);
}

Test(ops, table_reaches_every_op) {
    static int seen[DG_OP_COUNT];
    for (int i = 0; i < dg_n_op_cases + dg_n_dtype_cases; i++) {
        const op_case *c = i < dg_n_op_cases ? &dg_op_cases[i] : &dg_dtype_cases[i - dg_n_op_cases];
        case_graph cg;
        ASSERT_OK(case_graph_new(&cg, c, 1));
        reach(cg.g, c->name, seen);
        case_graph_free(&cg);
    }
    reach_step(DG_OPTIM_SGD, true, false, seen);
    reach_step(DG_OPTIM_MOMENTUM, false, false, seen);
    reach_step(DG_OPTIM_ADAM, false, true, seen);
    for (int op = 0; op < DG_OP_COUNT; op++)
        cr_expect_gt(seen[op], 0, "op %s is reached by no op case (core/check/op_cases.c, op_cases_dtype.c) nor by a "
                 "training step",
                     dg_op_name((dg_op)op));
}

Test(ops, table_covers_every_forward_op) {
    int n_forward = 0;
    for (int op = 0; op < DG_OP_COUNT; op++) {
        const dg_op_info *info = dg_op_info_get((dg_op)op);
        cr_assert(info && info->name && info->name[0], "op %d has no name", op);
        if (info->role != DG_ROLE_FORWARD) continue;
        n_forward++;
        int rows = 0;
        for (int i = 0; i < dg_n_op_cases; i++) rows += dg_op_cases[i].op == (dg_op)op && !dg_op_cases[i].build;
        for (int i = 0; i < dg_n_dtype_cases; i++) rows += dg_dtype_cases[i].op == (dg_op)op;
        cr_expect_gt(rows, 0, "forward op %s has no row in the op table or the precision table", info->name);
    }
    cr_assert_geq(n_forward, 25, "only %d forward ops", n_forward);
}

/* ---- logits far from 0 ---- */

/* The softmax-like rows of the op table: softmax (plain, scaled, causal),
 * log_softmax, softmax cross-entropy (2-D and 3-D logits). */
static const char *const softmax_like[] = {"softmax", "softmax_scaled", "softmax_causal", "log_softmax",
                                           "softmax_ce", "softmax_ce_3d"};

static const op_case *op_case_named(const char *name) {
    for (int i = 0; i < dg_n_op_cases; i++)
        if (!strcmp(dg_op_cases[i].name, name)) return &dg_op_cases[i];
    cr_assert_fail("no op case named %s", name);
    return NULL;
}

/* Every softmax-like op with its logits drawn in [-mag, mag] (the table
 * draws [-2, 2]), forward and gradient, on the CPU against the float64
 * reference. At 100 and 1000, exp of a logit overflows float (exp(89) is
 * past FLT_MAX): a row reduced without its max subtracted first (or with
 * the max taken as 0) gives inf or NaN. The tolerance grows with the
 * logits: float rounds x - max to |x| * 2^-24, which moves exp(x - max)
 * by as much relatively (softmax's condition number is about |x|). */
Test(ops, softmax_family_at_large_logits) {
    const float mags[] = {100.0f, 1000.0f};
    uint64_t seed = test_seed();
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    for (size_t ni = 0; ni < sizeof softmax_like / sizeof *softmax_like; ni++)
        for (size_t mi = 0; mi < sizeof mags / sizeof *mags; mi++) {
            const op_case *c = op_case_named(softmax_like[ni]);
            case_graph cg;
            ASSERT_OK(case_graph_new(&cg, c, seed));
            for (int64_t j = 0; j < dg_node_numel(cg.in[0]); j++) cg.in_val[0][j] *= mags[mi] / 2.0f;
            char name[64];
            snprintf(name, sizeof name, "%s at +-%g", c->name, (double)mags[mi]);
            case_result r;
            case_ref ref;
            ASSERT_OK(case_run(&cg, be, &r));
            ASSERT_OK(case_ref_run(&cg, &ref));
            double tol = c->tol * mags[mi] / 2.0;
            ASSERT_CLOSE(cmp_f32(r.out, ref.out, r.n_out), tol, "forward", name, seed);
            ASSERT_CLOSE(cmp_f32(r.grad[0], ref.grad[0], r.n_grad[0]), tol, "gradient", name, seed);
            case_result_free(&r);
            case_ref_free(&ref);
            case_graph_free(&cg);
        }
    dg_backend_free(be);
}

/* ---- labels and ids outside their range ---- */

static void assert_error_has(const char *needle) {
    cr_assert(strstr(dg_last_error(), needle), "the message lacks \"%s\": %s", needle, dg_last_error());
}

/* logits [4,5] -> loss, and the logits' gradient */
typedef struct ce_case { dg_graph *g; dg_node *logits, *labels, *loss, *dlogits; dg_backend *be; dg_plan *p; } ce_case;

static ce_case ce_case_new(void) {
    ce_case c = {.g = dg_graph_new()};
    c.logits = dg_param(c.g, "logits", DG_SHAPE(4, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 7});
    c.labels = dg_input_i32(c.g, "labels", DG_SHAPE(4));
    c.loss = dg_softmax_cross_entropy(c.g, c.logits, c.labels);
    ASSERT_OK(dg_grad(c.g, c.loss, &c.logits, 1, &c.dlogits));
    ASSERT_OK(dg_cpu_backend_new(&c.be, 2));
    dg_node *outs[2] = {c.loss, c.dlogits};
    ASSERT_OK(dg_plan_new(&c.p, c.g, c.be, outs, 2, NULL));
    return c;
}

static void ce_case_free(ce_case *c) {
    dg_plan_free(c->p);
    dg_backend_free(c->be);
    dg_graph_free(c->g);
}

/* A label outside [0, classes) gave a NaN loss with status OK. dg_plan_set
 * refuses it, naming the first, and copies nothing. */
Test(labels, outside_the_classes_are_refused_by_dg_plan_set) {
    ce_case c = ce_case_new();
    int32_t good[4] = {0, 4, 2, 2}, high[4] = {0, 1, 5, 7}, low[4] = {1, -1, 0, 9};
    ASSERT_OK(dg_plan_set(c.p, c.labels, good, sizeof good));
    cr_assert_eq(dg_plan_set(c.p, c.labels, high, sizeof high), DG_ERR_INVALID);
    assert_error_has("label 5 at position 2 of 'labels' is outside [0, 5)");
    assert_error_has("'logits'");
    cr_assert_eq(dg_plan_set(c.p, c.labels, low, sizeof low), DG_ERR_INVALID);
    assert_error_has("label -1 at position 1");
    int32_t back[4];
    ASSERT_OK(dg_plan_get(c.p, c.labels, back, sizeof back));
    cr_assert(memcmp(back, good, sizeof good) == 0, "a refused set left the labels changed");
    ASSERT_OK(dg_plan_run(c.p));
    float loss;
    ASSERT_OK(dg_plan_get(c.p, c.loss, &loss, sizeof loss));
    cr_assert(isfinite(loss), "loss %g", (double)loss);
    ce_case_free(&c);
}

/* Labels that reach the plan's memory without dg_plan_set (a gather, a
 * write through dg_plan_data): the CPU kernels refuse them, forward and
 * backward, with the first bad value. */
Test(labels, outside_the_classes_are_refused_by_the_cpu_kernels) {
    ce_case c = ce_case_new();
    int32_t *dev = dg_plan_data(c.p, c.labels); /* host memory on the CPU */
    cr_assert_not_null(dev, "%s", dg_last_error());
    const int32_t bad[4] = {3, 0, 6, -2};
    memcpy(dev, bad, sizeof bad);
    cr_assert_eq(dg_plan_run(c.p), DG_ERR_INVALID, "a run with label 6 of 5 classes: %s", dg_last_error());
    assert_error_has("(softmax_cross_entropy): 6 at position 2 of 'labels' is outside [0, 5)");
    int n;
    const dg_step *steps = dg_plan_steps(c.p, &n);
    int backward = 0;
    for (int i = 0; i < n; i++) {
        if (steps[i].node->op != DG_OP_SOFTMAX_CE_BACKWARD) continue;
        cr_assert_eq(dg_backend_compute(c.be, &steps[i]), DG_ERR_INVALID, "the backward took label 6");
        assert_error_has("(softmax_cross_entropy_backward): 6 at position 2 of 'labels'");
        backward++;
    }
    cr_assert_eq(backward, 1);
    ce_case_free(&c);
}

/* The same for embedding ids, forward and backward: a row outside the
 * table was a row of zeros, silently. */
Test(labels, ids_outside_the_table_are_refused_by_the_cpu_kernels) {
    dg_graph *g = dg_graph_new();
    dg_node *table = dg_param(g, "table", DG_SHAPE(5, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 3});
    dg_node *ids = dg_input_i32(g, "ids", DG_SHAPE(2, 3));
    dg_node *e = dg_embedding(g, table, ids), *dtable;
    ASSERT_OK(dg_grad(g, dg_sum(g, e, DG_ALL_AXES, false), &table, 1, &dtable));
    cr_assert_eq(dtable->op, DG_OP_EMBEDDING_BACKWARD);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan *p;
    dg_node *outs[2] = {e, dtable};
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 2, NULL));
    int32_t *dev = dg_plan_data(p, ids);
    const int32_t bad[6] = {0, 4, 1, 5, 2, -1};
    memcpy(dev, bad, sizeof bad);
    int n;
    const dg_step *steps = dg_plan_steps(p, &n);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        dg_op op = steps[i].node->op;
        if (op != DG_OP_EMBEDDING && op != DG_OP_EMBEDDING_BACKWARD) continue;
        cr_assert_eq(dg_backend_compute(be, &steps[i]), DG_ERR_INVALID, "%s took id 5 of 5 rows", dg_op_name(op));
        assert_error_has("5 at position 3 of 'ids' is outside [0, 5)");
        checked++;
    }
    cr_assert_eq(checked, 2);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}
