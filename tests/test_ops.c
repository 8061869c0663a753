/* test_ops.c: every op of the table, on the CPU backend against the float64
 * reference (forward and backward), and the reference's symbolic gradients
 * against central finite differences. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

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

Test(ops, table_covers_every_forward_op) {
    int n_forward = 0;
    for (int op = 0; op < DG_OP_COUNT; op++) {
        const dg_op_info *info = dg_op_info_get((dg_op)op);
        cr_assert(info && info->name && info->name[0], "op %d has no name", op);
        if (info->role != DG_ROLE_FORWARD) continue;
        n_forward++;
        int rows = 0;
        for (int i = 0; i < dg_n_op_cases; i++) rows += dg_op_cases[i].op == (dg_op)op && !dg_op_cases[i].build;
        cr_expect_gt(rows, 0, "forward op %s has no row in the op table", info->name);
    }
    cr_assert_geq(n_forward, 25, "only %d forward ops", n_forward);
}
