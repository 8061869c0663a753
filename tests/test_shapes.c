/* test_shapes.c: builders reject impossible shapes with DG_ERR_SHAPE and a
 * message naming the op and the shapes; nothing crashes, and the first error
 * is the one kept. */
#include <string.h>

#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

static void expect_msg(const char *needle1, const char *needle2) {
    const char *m = dg_last_error();
    cr_assert(strstr(m, needle1), "message '%s' lacks '%s'", m, needle1);
    if (needle2) cr_assert(strstr(m, needle2), "message '%s' lacks '%s'", m, needle2);
}

Test(shapes, add_mismatch) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 4)), *b = dg_input(g, "b", DG_SHAPE(5));
    cr_assert_null(dg_add(g, a, b));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("add", "[3,4]");
    expect_msg("[5]", NULL);
    dg_graph_free(g);
}

Test(shapes, matmul_inner) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 4)), *b = dg_input(g, "b", DG_SHAPE(5, 6));
    cr_assert_null(dg_matmul(g, a, b, false, false));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("matmul", "[3,4]");
    expect_msg("[5,6]", NULL);
    dg_graph_free(g);
}

Test(shapes, matmul_batch_mismatch) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(2, 3, 4)), *b = dg_input(g, "b", DG_SHAPE(3, 4, 5));
    cr_assert_null(dg_matmul(g, a, b, false, false));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("matmul", "[2,3,4]");
    dg_graph_free(g);
}

Test(shapes, reshape_count) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 4));
    cr_assert_null(dg_reshape(g, a, DG_SHAPE(5, 2)));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("reshape", "[5,2]");
    dg_graph_free(g);
}

Test(shapes, broadcast_to_incompatible) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 2));
    cr_assert_null(dg_broadcast_to(g, a, DG_SHAPE(3, 4)));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("broadcast_to", "[3,2]");
    dg_graph_free(g);
}

Test(shapes, permute_not_a_permutation) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(2, 3, 4));
    int perm[3] = {0, 0, 2};
    cr_assert_null(dg_permute(g, a, perm));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("permute", NULL);
    dg_graph_free(g);
}

Test(shapes, softmax_ce_labels) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 10)), *l = dg_input_i32(g, "l", DG_SHAPE(5));
    cr_assert_null(dg_softmax_cross_entropy(g, x, l));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("softmax_cross_entropy", "[4,10]");
    dg_graph_free(g);
}

Test(shapes, reduce_no_axis) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3));
    cr_assert_null(dg_sum(g, a, 0x2, false)); /* axis 1 of a 1-D tensor */
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("sum", NULL);
    dg_graph_free(g);
}

Test(shapes, bad_leaf_shapes) {
    dg_graph *g = dg_graph_new();
    cr_assert_null(dg_input(g, "z", DG_SHAPE(3, 0)));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("'z'", "[3,0]");
    dg_graph_free(g);
}

Test(shapes, first_error_is_kept_and_chains_return_null) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(3, 4)), *b = dg_input(g, "b", DG_SHAPE(4, 3));
    dg_node *bad = dg_sub(g, a, b);                 /* first error: sub */
    dg_node *next = dg_relu(g, dg_add(g, bad, a));  /* NULL propagates   */
    cr_assert_null(bad);
    cr_assert_null(next);
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("sub", NULL);
    /* nothing can be planned from a broken graph */
    dg_backend *be;
    dg_plan *p = NULL;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    cr_assert_eq(dg_plan_new(&p, g, be, &a, 1, NULL), DG_ERR_SHAPE);
    cr_assert_null(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

Test(shapes, grad_needs_scalar_loss) {
    dg_graph *g = dg_graph_new();
    dg_node *w = dg_param(g, "w", DG_SHAPE(3), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *y = dg_relu(g, w), *dw;
    cr_assert_eq(dg_grad(g, y, &w, 1, &dw), DG_ERR_SHAPE);
    expect_msg("dg_grad", "[3]");
    dg_graph_free(g);
}

/* The hand-written backward builders (graph_backward.c) refuse what dg_grad
 * never builds: gradients of another shape, a loss of another op. */
Test(shapes, relu_backward_shapes) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 10)), *dy = dg_input(g, "dy", DG_SHAPE(4, 1));
    cr_assert_null(dg_relu_backward(g, dy, x)); /* broadcastable, still refused */
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("relu_backward", "[4,1]");
    expect_msg("[4,10]", NULL);
    dg_graph_free(g);
}

Test(shapes, softmax_ce_backward_needs_its_loss) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 10)), *l = dg_input_i32(g, "l", DG_SHAPE(4));
    dg_node *loss = dg_softmax_cross_entropy(g, x, l);
    cr_assert_null(dg_softmax_cross_entropy_backward(g, dg_const(g, "two", DG_SHAPE(2), 1.0f), loss));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    expect_msg("softmax_cross_entropy_backward", "[2]");
    dg_graph_free(g);

    g = dg_graph_new();
    x = dg_input(g, "x", DG_SHAPE(4, 10));
    dg_node *one = dg_const(g, "one", DG_SHAPE(1), 1.0f);
    cr_assert_null(dg_softmax_cross_entropy_backward(g, one, dg_sum(g, x, DG_ALL_AXES, false)));
    cr_assert_eq(dg_graph_status(g), DG_ERR_INVALID);
    expect_msg("softmax_cross_entropy_backward", "not a softmax_cross_entropy node");
    dg_graph_free(g);
}

/* Each builder makes the node dg_grad makes for the same gradient: its op,
 * shape and inputs in order, so the kernels read them as the backward does. */
static void expect_same_node(const dg_node *a, const dg_node *b) {
    cr_assert(a && b);
    cr_assert_eq(a->op, b->op, "%s vs %s", dg_op_name(a->op), dg_op_name(b->op));
    cr_assert(dg_shape_eq(a->shape, b->shape));
    cr_assert_eq(a->n_in, b->n_in);
    for (int i = 0; i < a->n_in; i++) cr_assert_eq(a->in[i], b->in[i], "input %d differs", i);
}

Test(shapes, backward_builders_match_dg_grad) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", DG_SHAPE(4, 10), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *l = dg_input_i32(g, "l", DG_SHAPE(4));
    dg_node *loss = dg_softmax_cross_entropy(g, x, l), *dx;
    ASSERT_OK(dg_grad(g, loss, &x, 1, &dx));
    /* dg_grad seeds with a one of the loss's shape: that node is dx's dloss */
    expect_same_node(dg_softmax_cross_entropy_backward(g, dx->in[0], loss), dx);

    dg_node *r = dg_relu(g, x), *y = dg_sum(g, r, DG_ALL_AXES, false), *dr;
    ASSERT_OK(dg_grad(g, y, &x, 1, &dr));
    cr_assert_eq(dr->op, DG_OP_RELU_BACKWARD);
    expect_same_node(dg_relu_backward(g, dr->in[0], x), dr);
    ASSERT_OK(dg_graph_status(g));
    dg_graph_free(g);
}
