/* test_ops.c: every op of the table, on the CPU backend against the float64
 * reference (forward and backward), and the reference's symbolic gradients
 * against central finite differences. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

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

static void reach_step(dg_optim_kind kind, bool running, int *seen) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 3));
    dg_node *scale = dg_param(g, "scale", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *shift = dg_param(g, "shift", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *bn = dg_batch_norm(g, x, scale, shift, 1e-5f);
    dg_node *loss = dg_sum(g, dg_mul(g, bn, bn), DG_ALL_AXES, false);
    dg_node *params[2] = {scale, shift}, *grads[2], *updates[2];
    ASSERT_OK(dg_grad(g, loss, params, 2, grads));
    dg_optim o = dg_optim_default(kind, 0.1f);
    ASSERT_OK(dg_optim_apply(g, &o, params, grads, 2, updates));
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
    reach_step(DG_OPTIM_SGD, true, seen);
    reach_step(DG_OPTIM_MOMENTUM, false, seen);
    reach_step(DG_OPTIM_ADAM, false, seen);
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
