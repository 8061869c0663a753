/* list_ops.c: op coverage. Forward support is what the backend says of the
 * op; backward support is computed, not declared: the op's first row in the
 * op-case table is differentiated with dg_grad and every op of the resulting
 * gradient graph must be supported. */
#include "cli/list_ops.h"

#include "cli/backends.h"
#include "core/check/harness.h"

/* the op's first row in the op table, else in the precision table (the cast) */
static const op_case *first_row(dg_op op) {
    for (int i = 0; i < dg_n_op_cases; i++)
        if (dg_op_cases[i].op == op && !dg_op_cases[i].build) return &dg_op_cases[i];
    for (int i = 0; i < dg_n_dtype_cases; i++)
        if (dg_dtype_cases[i].op == op) return &dg_dtype_cases[i];
    return NULL;
}

/* whether the backend runs the op's node of its first row */
static const char *forward_support(const dg_backend *be, const op_case *c) {
    if (!c) return "untested";
    case_graph cg;
    bool ok = case_graph_new(&cg, c, 1) == DG_OK && dg_backend_supports(be, cg.out);
    case_graph_free(&cg);
    return ok ? "yes" : "no";
}

/* "yes", "no", or "n/a" where no backend could be opened */
static const char *backward_support(const dg_backend *be, const op_case *c) {
    if (!be) return "n/a";
    if (!c) return "untested";
    case_graph cg;
    bool ok = case_graph_new(&cg, c, 1) == DG_OK;
    for (int id = 0; ok && id < dg_graph_size(cg.g); id++) {
        const dg_node *n = dg_graph_node(cg.g, id);
        ok = n->op == DG_OP_LEAF || n->op == DG_OP_RESHAPE || n->op == DG_OP_SIDE_OUTPUT || dg_backend_supports(be, n);
    }
    case_graph_free(&cg);
    return ok ? "yes" : "no";
}

int bench_list_ops(FILE *out) {
    const char *names[2] = {"cpu", "gpu"};
    dg_backend *be[2] = {NULL, NULL};
    for (int b = 0; b < 2; b++)
        if (bench_backend_open(names[b], 0, &be[b]) != DG_OK)
            fprintf(stderr, "bench: %s backend unavailable: %s\n", names[b], dg_last_error());
    int missing = 0, n = 0;
    fprintf(out, "%-24s %-8s %-8s %-8s %-8s\n", "op", "cpu-fwd", "cpu-bwd", "gpu-fwd", "gpu-bwd");
    for (int op = 0; op < DG_OP_COUNT; op++) {
        const dg_op_info *info = dg_op_info_get((dg_op)op);
        if (info->role != DG_ROLE_FORWARD) continue;
        n++;
        const char *col[4];
        for (int b = 0; b < 2; b++) {
            col[2 * b] = !be[b] ? "n/a" : forward_support(be[b], first_row((dg_op)op));
            col[2 * b + 1] = backward_support(be[b], first_row((dg_op)op));
        }
        for (int k = 0; k < 4; k++) missing += col[k][0] == 'n' && col[k][1] == 'o';
        fprintf(out, "%-24s %-8s %-8s %-8s %-8s\n", info->name, col[0], col[1], col[2], col[3]);
    }
    fprintf(out, "%d forward ops; n/a: backend not available on this machine\n", n);
    for (int b = 0; b < 2; b++) dg_backend_free(be[b]);
    return missing ? 1 : 0;
}
