/* test_conv.c: the convolutional ops outside the op table: every refusal of
 * their builders (graph_conv.c), the plan's im2col scratch, the float64
 * reference on small cases computed by hand (so a wrong formula in ref.c is
 * caught whatever the kernels do), and, on the CPU backend, what the table
 * cannot hold: the side outputs, the running statistics update and a batch
 * larger than one im2col chunk or one unfolding pass. */
#include <criterion/criterion.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <omp.h>
#include <math.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/check/ref.h"
#include "core/layout.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_kernels.h"
#include "test_util.h"

#define S DG_SHAPE

/* ---- builders: NULL, the graph's status and a message naming the op,
 * the shapes and the attribute ---- */

static void assert_refused(dg_graph *g, const dg_node *n, dg_status want, const char *expr,
                           const char *const *needles, int n_needles) {
    cr_assert_null(n, "%s was accepted", expr);
    dg_status st = dg_graph_status(g);
    cr_assert_eq(st, want, "%s: %s, want %s: %s", expr, dg_status_name(st), dg_status_name(want), dg_last_error());
    for (int i = 0; i < n_needles; i++)
        cr_assert(strstr(dg_last_error(), needles[i]), "%s: the message lacks \"%s\": %s", expr, needles[i],
                  dg_last_error());
}

/* builds `expr` in a fresh graph g, which must refuse it */
#define REFUSES(want, expr, ...)                                                                      \
    do {                                                                                              \
        dg_graph *g = dg_graph_new();                                                                 \
        cr_assert_not_null(g);                                                                        \
        const char *needles_[] = {__VA_ARGS__};                                                       \
        assert_refused(g, (expr), want, #expr, needles_, (int)(sizeof needles_ / sizeof needles_[0])); \
        dg_graph_free(g);                                                                             \
    } while (0)

/* builds `expr` in a fresh graph g, which must accept it */
#define ACCEPTS(expr)                                                       \
    do {                                                                    \
        dg_graph *g = dg_graph_new();                                       \
        cr_assert_not_null(g);                                              \
        cr_assert_not_null((expr), "%s refused: %s", #expr, dg_last_error()); \
        dg_graph_free(g);                                                   \
    } while (0)

#define X(...) dg_input(g, "x", S(__VA_ARGS__))
#define W(...) dg_input(g, "w", S(__VA_ARGS__))
#define V(name, ...) dg_input(g, name, S(__VA_ARGS__))
#define CONV(...) ((dg_conv2d_opts){__VA_ARGS__})
#define POOL(...) ((dg_pool2d_opts){__VA_ARGS__})

Test(conv_builders, conv2d_refusals) {
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(2, 3, 7), W(4, 3, 3, 3), NULL, CONV(0)), "conv2d", "input [2,3,7]",
            "4 axes [N,C,H,W]");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(2, 3, 7, 7), W(4, 3, 3), NULL, CONV(0)), "conv2d", "weight [4,3,3]",
            "4 axes");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 7, 7), W(1, 3, 2147483648LL, 1), NULL, CONV(0)), "conv2d",
            "weight [1,3,2147483648,1]", "kernel too large");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 4, 4), W(2, 3, 5, 3), NULL, CONV(0)), "conv2d", "kernel 5x3",
            "larger than the padded input 4x4", "input [1,3,4,4]", "padding 0x0");
    /* the dilated span counts: 3 taps 3 apart span 7 > 6, and padding 1 makes room */
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 6, 6), W(2, 3, 3, 3), NULL, CONV(.dilation = {3, 3})), "conv2d",
            "kernel 3x3 (dilated 7x7)", "padded input 6x6");
    ACCEPTS(dg_conv2d(g, X(1, 3, 6, 6), W(2, 3, 3, 3), NULL, CONV(.pad = {1, 1}, .dilation = {3, 3})));
    /* the span and the padded input in 64 bits: INT_MAX * 2 + 1 taps apart
     * wraps an int to -1 ("dilated -1x-1", and a sanitizer abort), and
     * 4 + 2 * 2^30 to a negative height */
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 1, 4, 4), W(1, 1, 3, 3), NULL, CONV(.dilation = {INT32_MAX, INT32_MAX})),
            "conv2d", "kernel 3x3 (dilated 4294967295x4294967295)", "padded input 4x4");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 1, 4, 4), W(1, 1, 3, 3), NULL,
                                    CONV(.pad = {1 << 30, 0}, .dilation = {INT32_MAX, 1})),
            "conv2d", "dilated 4294967295x3", "padded input 2147483652x4", "padding 1073741824x0");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 7, 7), W(4, 3, 3, 3), NULL, CONV(.stride = {-1, 1})), "conv2d",
            "stride -1x1", "input [1,3,7,7]", ">= 1");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 7, 7), W(4, 3, 3, 3), NULL, CONV(.pad = {0, -1})), "conv2d",
            "padding 0x-1", ">= 0");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 3, 7, 7), W(4, 3, 3, 3), NULL, CONV(.dilation = {1, -2})), "conv2d",
            "dilation 1x-2", ">= 1");
    /* groups: must divide C and O, at least 1 */
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(6, 1, 3, 3), NULL, CONV(.groups = 3)), "conv2d", "groups 3",
            "input [1,4,5,5]", "weight [6,1,3,3]");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(3, 2, 3, 3), NULL, CONV(.groups = 2)), "conv2d", "groups 2",
            "output channels (weight [3,2,3,3])");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(4, 4, 3, 3), NULL, CONV(.groups = -1)), "conv2d",
            "groups -1", ">= 1");
    /* channels: weight's C/groups times groups must be x's C */
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(6, 3, 3, 3), NULL, CONV(.groups = 2)), "conv2d",
            "weight [6,3,3,3] takes 3 channels per group", "2 groups = 6 input channels", "input [1,4,5,5] has 4");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(6, 3, 3, 3), NULL, CONV(0)), "conv2d", "takes 3 channels",
            "has 4");
    /* bias: [O] */
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(6, 4, 3, 3), V("bias", 5), CONV(0)), "conv2d", "bias [5]",
            "must be [6]", "weight [6,4,3,3]");
    REFUSES(DG_ERR_SHAPE, dg_conv2d(g, X(1, 4, 5, 5), W(6, 4, 3, 3), V("bias", 6, 1), CONV(0)), "conv2d",
            "bias [6,1]", "must be [6]");
    /* inputs: float (f32, bf16 or f16; the 16-bit rule: test_dtype_conv.c), present */
    REFUSES(DG_ERR_INVALID, dg_conv2d(g, dg_input_i32(g, "labels", S(1, 4, 5, 5)), W(6, 4, 3, 3), NULL, CONV(0)),
            "conv2d", "'labels' is i32; conv2d takes f32, bf16 or f16");
    REFUSES(DG_ERR_INVALID, dg_conv2d(g, X(1, 4, 5, 5), NULL, NULL, CONV(0)), "conv2d", "input 1 is NULL");
}

Test(conv_builders, pool_refusals) {
    REFUSES(DG_ERR_SHAPE, dg_max_pool2d(g, X(3, 6, 6), POOL(.kernel = {2, 2})), "max_pool2d", "input [3,6,6]",
            "4 axes");
    REFUSES(DG_ERR_SHAPE, dg_avg_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {0, 2})), "avg_pool2d", "kernel 0x2",
            ">= 1");
    REFUSES(DG_ERR_SHAPE, dg_max_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {2, 2}, .stride = {1, -1})), "max_pool2d",
            "stride 1x-1");
    REFUSES(DG_ERR_SHAPE, dg_avg_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {2, 2}, .pad = {-1, 0})), "avg_pool2d",
            "padding -1x0");
    REFUSES(DG_ERR_SHAPE, dg_max_pool2d(g, X(1, 3, 2, 6), POOL(.kernel = {3, 3})), "max_pool2d", "kernel 3x3",
            "padded input 2x6", "input [1,3,2,6]");
    /* padding over half the window would leave a window in padding alone */
    REFUSES(DG_ERR_SHAPE, dg_max_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {3, 3}, .pad = {2, 1})), "max_pool2d",
            "padding 2x1", "input [1,3,6,6]", "more than half the window 3x3");
    REFUSES(DG_ERR_SHAPE, dg_avg_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {2, 3}, .pad = {1, 2})), "avg_pool2d",
            "padding 1x2", "half the window 2x3");
    ACCEPTS(dg_max_pool2d(g, X(1, 3, 6, 6), POOL(.kernel = {2, 2}, .pad = {1, 1})));
    /* 2 * 2^30 overflows an int (to INT_MIN, which passed the check): the
     * windows of this pool past the first lie wholly in the padding */
    REFUSES(DG_ERR_SHAPE,
            dg_max_pool2d(g, X(1, 1, 4, 4), POOL(.kernel = {3, 3}, .stride = {INT32_MAX, 1}, .pad = {1 << 30, 0})),
            "max_pool2d", "padding 1073741824x0", "more than half the window 3x3");
    REFUSES(DG_ERR_SHAPE,
            dg_avg_pool2d(g, X(1, 1, 4, 4), POOL(.kernel = {3, 3}, .stride = {1, INT32_MAX}, .pad = {0, INT32_MAX})),
            "avg_pool2d", "padding 0x2147483647", "more than half the window 3x3");
    REFUSES(DG_ERR_SHAPE, dg_global_avg_pool2d(g, X(2, 3, 4)), "global_avg_pool2d", "input [2,3,4]", "4 axes");
}

Test(conv_builders, batch_norm_refusals) {
    REFUSES(DG_ERR_SHAPE, dg_batch_norm(g, X(2, 3, 4), V("scale", 3), V("shift", 3), 1e-5f), "batch_norm",
            "input [2,3,4]", "[N,C] or [N,C,H,W]");
    REFUSES(DG_ERR_SHAPE, dg_batch_norm(g, X(2, 3, 4, 4), V("scale", 4), V("shift", 3), 1e-5f), "batch_norm",
            "'scale' [4]", "must be [3]", "input [2,3,4,4]");
    REFUSES(DG_ERR_SHAPE, dg_batch_norm(g, X(2, 3), V("scale", 3), V("shift", 3, 1), 1e-5f), "batch_norm",
            "'shift' [3,1]", "must be [3]", "input [2,3]");
    REFUSES(DG_ERR_INVALID, dg_batch_norm(g, X(2, 3), V("scale", 3), V("shift", 3), 0.0f), "batch_norm", "eps 0",
            "> 0");
    REFUSES(DG_ERR_INVALID, dg_batch_norm(g, X(2, 3), V("scale", 3), V("shift", 3), NAN), "batch_norm", "eps nan");
    REFUSES(DG_ERR_SHAPE,
            dg_batch_norm_eval(g, X(2, 3, 4, 4), V("scale", 3), V("shift", 3), V("running_mean", 3),
                               V("running_var", 2), 1e-5f),
            "batch_norm_eval", "'running_var' [2]", "must be [3]", "input [2,3,4,4]");
    REFUSES(DG_ERR_INVALID,
            dg_batch_norm_eval(g, X(2, 3), V("scale", 3), V("shift", 3), V("running_mean", 3), V("running_var", 3),
                               -1.0f),
            "batch_norm_eval", "eps -1");
}

/* a batch_norm node of x [2,3,4,4] in g, for its running update */
static dg_node *bn_of(dg_graph *g) {
    return dg_batch_norm(g, X(2, 3, 4, 4), V("scale", 3), V("shift", 3), 1e-5f);
}

Test(conv_builders, batch_norm_running_refusals) {
    REFUSES(DG_ERR_INVALID, dg_batch_norm_running(g, dg_relu(g, X(2, 3)), V("running_mean", 3), V("running_var", 3),
                                                  0.1f),
            "batch_norm_running", "is a relu node, not batch_norm");
    REFUSES(DG_ERR_SHAPE, dg_batch_norm_running(g, bn_of(g), V("running_mean", 4), V("running_var", 3), 0.1f),
            "batch_norm_running", "'running_mean' [4]", "must be [3]", "input [2,3,4,4]");
    REFUSES(DG_ERR_SHAPE, dg_batch_norm_running(g, bn_of(g), V("running_mean", 3), V("running_var", 1, 3), 0.1f),
            "batch_norm_running", "'running_var' [1,3]");
    REFUSES(DG_ERR_INVALID, dg_batch_norm_running(g, bn_of(g), V("running_mean", 3), V("running_var", 3), 0.0f),
            "batch_norm_running", "momentum 0", "(0, 1]");
    REFUSES(DG_ERR_INVALID, dg_batch_norm_running(g, bn_of(g), V("running_mean", 3), V("running_var", 3), 1.5f),
            "batch_norm_running", "momentum 1.5");
    REFUSES(DG_ERR_INVALID, dg_batch_norm_running(g, bn_of(g), V("running_mean", 3), V("running_var", 3), NAN),
            "batch_norm_running", "momentum nan");
    ACCEPTS(dg_batch_norm_running(g, bn_of(g), V("running_mean", 3), V("running_var", 3), 1.0f));
}

/* ---- the plan's scratch ---- */

/* the im2col scratch of a conv-family node from the layout's definition
 * (layout.h): chunk images of col [c*kh*kw, oh*ow], and for the weight
 * gradient dyT [o, oh*ow] as well */
static size_t scratch_by_layout(const dg_node *n) {
    dg_conv_dims d = dg_conv_dims_of(n);
    int64_t per_image = d.c * d.kh * d.kw * d.oh * d.ow + (n->op == DG_OP_CONV2D_BACKWARD_WEIGHT ? d.o * d.oh * d.ow : 0);
    return (size_t)(d.chunk * per_image) * sizeof(float);
}

/* Every step of the plan has scratch exactly when its node needs some:
 * one arena buffer of dg_node_scratch_bytes for that step alone, inside
 * the arena. Returns how many steps had scratch. */
static int assert_scratch_planned(const dg_plan *p) {
    int n_buf, n_steps, found = 0;
    const dg_plan_buffer *buf = dg_plan_buffers(p, &n_buf);
    const dg_step *steps = dg_plan_steps(p, &n_steps);
    dg_plan_stats st = dg_plan_stats_get(p);
    for (int i = 0; i < n_steps; i++) {
        const dg_node *n = steps[i].node;
        size_t want = dg_node_scratch_bytes(n);
        const dg_plan_buffer *sb = NULL;
        for (int j = 0; j < n_buf; j++)
            if (buf[j].scratch && buf[j].node_id == n->id) {
                cr_assert_null(sb, "node %s has two scratch buffers", n->name);
                sb = &buf[j];
            }
        cr_assert_eq(sb != NULL, want > 0, "node %s (%s) needs %zu bytes of scratch, planned: %s", n->name,
                     dg_op_name(n->op), want, sb ? "yes" : "no");
        cr_assert_eq(steps[i].scratch != NULL, want > 0, "step of %s: scratch pointer %p for %zu bytes", n->name,
                     steps[i].scratch, want);
        if (!sb) continue;
        found++;
        cr_assert_eq(sb->bytes, want, "%s: %zu bytes of scratch planned, %zu needed", n->name, sb->bytes, want);
        cr_assert_eq(want, scratch_by_layout(n), "%s: dg_node_scratch_bytes %zu, the layout's %zu", n->name, want,
                     scratch_by_layout(n));
        cr_assert(sb->first == n->id && sb->last == n->id, "%s: scratch live from %d to %d", n->name, sb->first,
                  sb->last);
        cr_assert_leq(sb->offset + sb->bytes, st.arena_bytes, "%s: scratch ends at %zu, beyond the arena of %zu",
                      n->name, sb->offset + sb->bytes, st.arena_bytes);
        /* live together with the step's output: disjoint bytes */
        for (int j = 0; j < n_buf; j++)
            if (!buf[j].scratch && buf[j].node_id == n->id)
                cr_assert(buf[j].offset + buf[j].bytes <= sb->offset || sb->offset + sb->bytes <= buf[j].offset,
                          "%s: scratch overlaps the output", n->name);
    }
    return found;
}

Test(conv_plan, scratch_of_a_convolution_and_its_gradient) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", S(2, 3, 9, 9), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *w = dg_param(g, "w", S(4, 3, 3, 3), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *y = dg_conv2d(g, x, w, NULL, CONV(.pad = {1, 1}));
    dg_node *loss = dg_sum(g, y, DG_ALL_AXES, false), *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, loss, wrt, 2, grads));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    cr_assert_eq(assert_scratch_planned(p), 1);
    /* [c*kh*kw = 27, oh*ow = 81] floats for each of the 2 images */
    cr_assert_eq(dg_node_scratch_bytes(y), (size_t)2 * 27 * 81 * sizeof(float));
    cr_assert_geq(dg_plan_stats_get(p).arena_bytes, dg_node_scratch_bytes(y) + dg_node_bytes(y));
    dg_plan_free(p);
    /* the gradients: backward_data like the forward, backward_weight with dyT */
    ASSERT_OK(dg_plan_new(&p, g, be, grads, 2, NULL));
    cr_assert_eq(grads[0]->op, DG_OP_CONV2D_BACKWARD_DATA);
    cr_assert_eq(grads[1]->op, DG_OP_CONV2D_BACKWARD_WEIGHT);
    cr_assert_eq(assert_scratch_planned(p), 2);
    cr_assert_eq(dg_node_scratch_bytes(grads[1]), (size_t)2 * (27 + 4) * 81 * sizeof(float));
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

Test(conv_plan, direct_1x1_convolution_has_no_scratch) {
    dg_graph *g = dg_graph_new();
    dg_node *y = dg_conv2d(g, X(2, 5, 4, 3), W(3, 5, 1, 1), NULL, CONV(0));
    /* a stride reads x sparsely: columns again */
    dg_node *strided = dg_conv2d(g, X(2, 5, 4, 3), W(3, 5, 1, 1), NULL, CONV(.stride = {2, 1}));
    cr_assert_not_null(strided, "%s", dg_last_error());
    cr_assert(dg_conv_dims_of(y).direct && !dg_conv_dims_of(strided).direct);
    cr_assert_eq(dg_node_scratch_bytes(y), 0);
    cr_assert_gt(dg_node_scratch_bytes(strided), 0);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    dg_node *outs[2] = {y, strided};
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 2, NULL));
    cr_assert_eq(assert_scratch_planned(p), 1, "only the strided convolution has scratch");
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

/* A batch over more than one im2col pass: x [3,16,183,183], w [2,16,5,5],
 * padding 2: 400 rows x 33489 columns of floats (54 MB) per image, so two
 * images fit the 128 MiB budget, and three make a full chunk and a part. */
static dg_node *chunked_conv(dg_graph *g, dg_node **x, dg_node **w) {
    *x = dg_param(g, "x", S(3, 16, 183, 183), (dg_init){DG_INIT_UNIFORM, -1, 1, 7});
    *w = dg_param(g, "w", S(2, 16, 5, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 8});
    return dg_conv2d(g, *x, *w, NULL, CONV(.pad = {2, 2}));
}

Test(conv_plan, a_large_batch_works_in_chunks) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = chunked_conv(g, &x, &w);
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_conv_dims d = dg_conv_dims_of(y);
    cr_assert(d.chunk == 2 && d.n == 3, "chunk %lld of %lld images", (long long)d.chunk, (long long)d.n);
    cr_assert_leq(dg_node_scratch_bytes(y), (size_t)DG_CONV_SCRATCH_BUDGET);
    cr_assert_eq(dg_node_scratch_bytes(y), scratch_by_layout(y));
    dg_graph_free(g);
}

/* ---- the float64 reference on cases computed by hand ---- */

/* Evaluates g in float64; leaves[i] gets values[i], the other leaves (the
 * gradient's constants) their init's values. The caller frees the slots
 * with ref_free and the array with free. */
static double **ref_run(dg_graph *g, dg_node *const *leaves, const double *const *values, int n) {
    int size = dg_graph_size(g);
    double **vals = calloc((size_t)size, sizeof *vals);
    cr_assert_not_null(vals);
    for (int i = 0; i < n; i++) {
        int64_t cnt = dg_node_numel(leaves[i]);
        vals[leaves[i]->id] = malloc((size_t)cnt * sizeof(double));
        cr_assert_not_null(vals[leaves[i]->id]);
        memcpy(vals[leaves[i]->id], values[i], (size_t)cnt * sizeof(double));
    }
    for (int id = 0; id < size; id++) {
        const dg_node *leaf = dg_graph_node(g, id);
        if (leaf->op != DG_OP_LEAF || vals[id]) continue;
        int64_t cnt = dg_node_numel(leaf);
        float *f = malloc((size_t)cnt * sizeof *f);
        vals[id] = malloc((size_t)cnt * sizeof(double));
        cr_assert(f && vals[id]);
        ASSERT_OK(dg_init_fill(leaf->init, f, cnt));
        for (int64_t k = 0; k < cnt; k++) vals[id][k] = f[k];
        free(f);
    }
    ASSERT_OK(ref_eval(g, size, vals));
    return vals;
}

static void ref_done(dg_graph *g, double **vals) {
    ref_free(vals, dg_graph_size(g));
    free(vals);
    dg_graph_free(g);
}

static void assert_values(const double *got, const double *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-12 * fmax(1, fabs(want[i])) ||
                  (isnan(got[i]) && isnan(want[i])), "%s[%d] = %.17g, want %.17g", what, i, got[i], want[i]);
}

#define VALUES(...) ((const double[]){__VA_ARGS__})
#define COUNT(...) ((int)(sizeof VALUES(__VA_ARGS__) / sizeof(double)))
#define ASSERT_VALUES(got, what, ...) assert_values(got, VALUES(__VA_ARGS__), COUNT(__VA_ARGS__), what)

/* x 1x1x3x3 = 1..9, w 1x1x2x2 = 1..4; loss = sum(y * dy) */
typedef struct conv_case { dg_graph *g; dg_node *x, *w, *dy, *y, *grad[2]; } conv_case;

static conv_case conv_case_new(dg_shape xs, dg_shape ws, dg_conv2d_opts o) {
    conv_case c = {.g = dg_graph_new()};
    dg_graph *g = c.g;
    c.x = dg_param(g, "x", xs, (dg_init){DG_INIT_FILL, 0, 0, 0});
    c.w = dg_param(g, "w", ws, (dg_init){DG_INIT_FILL, 0, 0, 0});
    c.y = dg_conv2d(g, c.x, c.w, NULL, o);
    cr_assert_not_null(c.y, "%s", dg_last_error());
    c.dy = dg_input(g, "dy", c.y->shape);
    dg_node *wrt[2] = {c.x, c.w};
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, c.y, c.dy), DG_ALL_AXES, false), wrt, 2, c.grad));
    return c;
}

Test(conv_ref, conv2d_by_hand) {
    /* x = [1 2 3; 4 5 6; 7 8 9], w = [1 2; 3 4]: y[i][j] = x[i][j] + 2 x[i][j+1] + 3 x[i+1][j] + 4 x[i+1][j+1] */
    conv_case c = conv_case_new(S(1, 1, 3, 3), S(1, 1, 2, 2), CONV(0));
    dg_node *leaves[3] = {c.x, c.w, c.dy};
    const double *in[3] = {VALUES(1, 2, 3, 4, 5, 6, 7, 8, 9), VALUES(1, 2, 3, 4), VALUES(1, 1, 1, 1)};
    double **v = ref_run(c.g, leaves, in, 3);
    ASSERT_VALUES(v[c.y->id], "y", 37, 47, 67, 77);
    /* dy = 1: dx sums the taps of w over the windows that read each x;
     * dw[ki][kj] sums x over the windows shifted by (ki, kj) */
    cr_assert_eq(c.grad[0]->op, DG_OP_CONV2D_BACKWARD_DATA);
    ASSERT_VALUES(v[c.grad[0]->id], "dx", 1, 3, 2, 4, 10, 6, 3, 7, 4);
    cr_assert_eq(c.grad[1]->op, DG_OP_CONV2D_BACKWARD_WEIGHT);
    ASSERT_VALUES(v[c.grad[1]->id], "dw", 12, 16, 24, 28);
    ref_done(c.g, v);
}

Test(conv_ref, conv2d_padding_stride_dilation_groups_by_hand) {
    /* padding 1, stride 2: windows at rows -1 and 1, columns -1 and 1;
     * outside taps are 0: y = [4, 2*3 + 3*4, 4*2 + 7*4, 5 + 12 + 24 + 36] */
    conv_case c = conv_case_new(S(1, 1, 3, 3), S(1, 1, 2, 2), CONV(.stride = {2, 2}, .pad = {1, 1}));
    dg_node *leaves[3] = {c.x, c.w, c.dy};
    const double *in[3] = {VALUES(1, 2, 3, 4, 5, 6, 7, 8, 9), VALUES(1, 2, 3, 4), VALUES(1, 10, 100, 1000)};
    double **v = ref_run(c.g, leaves, in, 3);
    ASSERT_VALUES(v[c.y->id], "y", 4, 18, 36, 77);
    /* each x element is read by exactly one window (at most) here:
     * x[0][0] by window 0 with w[1][1]; x[0][1] by window 1 with w[1][0] ... */
    ASSERT_VALUES(v[c.grad[0]->id], "dx", 4, 30, 40, 200, 1000, 2000, 400, 3000, 4000);
    /* dw[ki][kj]: x under tap (ki, kj) of each window, weighted by its dy */
    ASSERT_VALUES(v[c.grad[1]->id], "dw", 1000 * 5, 100 * 4 + 1000 * 6, 10 * 2 + 1000 * 8,
                  1 + 10 * 3 + 100 * 7 + 1000 * 9);
    ref_done(c.g, v);

    /* dilation 2: the four corners, 1 + 2*3 + 3*7 + 4*9 */
    c = conv_case_new(S(1, 1, 3, 3), S(1, 1, 2, 2), CONV(.dilation = {2, 2}));
    const double *in2[3] = {VALUES(1, 2, 3, 4, 5, 6, 7, 8, 9), VALUES(1, 2, 3, 4), VALUES(1)};
    dg_node *leaves2[3] = {c.x, c.w, c.dy};
    v = ref_run(c.g, leaves2, in2, 3);
    ASSERT_VALUES(v[c.y->id], "y", 64);
    ASSERT_VALUES(v[c.grad[0]->id], "dx", 1, 0, 2, 0, 0, 0, 3, 0, 4);
    ASSERT_VALUES(v[c.grad[1]->id], "dw", 1, 3, 7, 9);
    ref_done(c.g, v);

    /* groups 2: output channel o reads input channel o only */
    c = conv_case_new(S(1, 2, 1, 1), S(2, 1, 1, 1), CONV(.groups = 2));
    const double *in3[3] = {VALUES(1, 10), VALUES(2, 3), VALUES(5, 7)};
    dg_node *leaves3[3] = {c.x, c.w, c.dy};
    v = ref_run(c.g, leaves3, in3, 3);
    ASSERT_VALUES(v[c.y->id], "y", 2, 30);
    ASSERT_VALUES(v[c.grad[0]->id], "dx", 10, 21);
    ASSERT_VALUES(v[c.grad[1]->id], "dw", 5, 70);
    ref_done(c.g, v);
}

/* y = pool(x) with loss sum(y * dy); argmax is y's side output */
typedef struct pool_case { dg_graph *g; dg_node *x, *dy, *y, *dx; } pool_case;

static pool_case pool_case_new(bool max, dg_shape xs, dg_pool2d_opts o) {
    pool_case c = {.g = dg_graph_new()};
    c.x = dg_param(c.g, "x", xs, (dg_init){DG_INIT_FILL, 0, 0, 0});
    c.y = max ? dg_max_pool2d(c.g, c.x, o) : dg_avg_pool2d(c.g, c.x, o);
    cr_assert_not_null(c.y, "%s", dg_last_error());
    c.dy = dg_input(c.g, "dy", c.y->shape);
    ASSERT_OK(dg_grad(c.g, dg_sum(c.g, dg_mul(c.g, c.y, c.dy), DG_ALL_AXES, false), &c.x, 1, &c.dx));
    return c;
}

Test(conv_ref, max_pool2d_by_hand) {
    /* x = [1 5 5; 5 2 0], 2x2 windows at columns 0 and 1: both maxima are 5,
     * tied three times and twice: the first in (ki, kj) order, x[0][1] */
    pool_case c = pool_case_new(true, S(1, 1, 2, 3), POOL(.kernel = {2, 2}, .stride = {1, 1}));
    dg_node *leaves[2] = {c.x, c.dy};
    const double *in[2] = {VALUES(1, 5, 5, 5, 2, 0), VALUES(1, 10)};
    double **v = ref_run(c.g, leaves, in, 2);
    ASSERT_VALUES(v[c.y->id], "y", 5, 5);
    ASSERT_VALUES(v[c.y->side[0]->id], "argmax", 1, 1);
    cr_assert_eq(c.dx->op, DG_OP_MAX_POOL2D_BACKWARD);
    ASSERT_VALUES(v[c.dx->id], "dx", 0, 11, 0, 0, 0, 0);
    ref_done(c.g, v);

    /* padding is not a tap: negative values stay the maxima of windows
     * that hang over the edge (2x2, padding 1, stride 2: one tap each) */
    c = pool_case_new(true, S(1, 1, 2, 2), POOL(.kernel = {2, 2}, .pad = {1, 1}));
    const double *in2[2] = {VALUES(-1, -2, -3, -4), VALUES(1, 2, 3, 4)};
    dg_node *leaves2[2] = {c.x, c.dy};
    v = ref_run(c.g, leaves2, in2, 2);
    ASSERT_VALUES(v[c.y->id], "y", -1, -2, -3, -4);
    ASSERT_VALUES(v[c.y->side[0]->id], "argmax", 0, 1, 2, 3);
    ASSERT_VALUES(v[c.dx->id], "dx", 1, 2, 3, 4);
    ref_done(c.g, v);

    /* NaN: the first NaN is taken over any number and kept; one before a
     * number is kept too (a comparison with NaN is false). argmax indexes
     * the plane: row r's taps are 4r .. 4r + 3 */
    c = pool_case_new(true, S(1, 1, 3, 4), POOL(.kernel = {1, 4}));
    const double *in3[2] = {VALUES(1, NAN, 3, NAN, 2, 7, NAN, 9, NAN, 9, 1, 2), VALUES(1, 1, 1)};
    dg_node *leaves3[2] = {c.x, c.dy};
    v = ref_run(c.g, leaves3, in3, 2);
    ASSERT_VALUES(v[c.y->id], "y", NAN, NAN, NAN);
    ASSERT_VALUES(v[c.y->side[0]->id], "argmax", 1, 6, 8);
    ref_done(c.g, v);
}

Test(conv_ref, avg_pool2d_by_hand) {
    /* padding counts in the divisor: 2x2 windows, padding 1, stride 2 each
     * hold one tap of x [1 2; 3 4]: y = x / 4; dx = dy / 4 */
    pool_case c = pool_case_new(false, S(1, 1, 2, 2), POOL(.kernel = {2, 2}, .pad = {1, 1}));
    dg_node *leaves[2] = {c.x, c.dy};
    const double *in[2] = {VALUES(1, 2, 3, 4), VALUES(4, 8, 12, 16)};
    double **v = ref_run(c.g, leaves, in, 2);
    ASSERT_VALUES(v[c.y->id], "y", 0.25, 0.5, 0.75, 1);
    cr_assert_eq(c.dx->op, DG_OP_AVG_POOL2D_BACKWARD);
    ASSERT_VALUES(v[c.dx->id], "dx", 1, 2, 3, 4);
    ref_done(c.g, v);

    /* overlapping 1x2 windows, stride 1: the middle tap gets both */
    c = pool_case_new(false, S(1, 1, 1, 3), POOL(.kernel = {1, 2}, .stride = {1, 1}));
    const double *in2[2] = {VALUES(1, 2, 3), VALUES(2, 4)};
    dg_node *leaves2[2] = {c.x, c.dy};
    v = ref_run(c.g, leaves2, in2, 2);
    ASSERT_VALUES(v[c.y->id], "y", 1.5, 2.5);
    ASSERT_VALUES(v[c.dx->id], "dx", 1, 3, 2);
    ref_done(c.g, v);
}

Test(conv_ref, batch_norm_by_hand) {
    /* one channel of x = [1, 3]: mean 2, variance 1 (biased); eps 3 makes
     * invstd 1/2: y = 2 (x - 2) / 2 + 0.5 */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", S(2, 1), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *scale = dg_param(g, "scale", S(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *shift = dg_param(g, "shift", S(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *y = dg_batch_norm(g, x, scale, shift, 3.0f);
    dg_node *rm = dg_state(g, "running_mean", S(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *rv = dg_state(g, "running_var", S(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *run = dg_batch_norm_running(g, y, rm, rv, 0.25f);
    dg_node *dy = dg_input(g, "dy", S(2, 1)), *wrt[3] = {x, scale, shift}, *grad[3];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, y, dy), DG_ALL_AXES, false), wrt, 3, grad));
    cr_assert_not_null(run, "%s", dg_last_error());
    dg_node *leaves[6] = {x, scale, shift, rm, rv, dy};
    const double *in[6] = {VALUES(1, 3), VALUES(2), VALUES(0.5), VALUES(0), VALUES(1), VALUES(1, 0)};
    double **v = ref_run(g, leaves, in, 6);
    ASSERT_VALUES(v[y->id], "y", -0.5, 1.5);
    ASSERT_VALUES(v[y->side[0]->id], "stats (mean, invstd)", 2, 0.5);
    /* L = y[0] = -d / (2 sqrt(d^2/4 + 3)) * 2 + 0.5 with d = x1 - x0 = 2:
     * dL/dd = -2 (1/2 (4)^-1/2 - d^2/8 (4)^-3/2) = -0.375, so dx = [0.375, -0.375];
     * dscale = sum dy xhat = -1/2; dshift = sum dy = 1 */
    cr_assert_eq(grad[0]->op, DG_OP_BATCH_NORM_BACKWARD);
    ASSERT_VALUES(v[grad[0]->id], "dx", 0.375, -0.375);
    cr_assert_eq(grad[1]->op, DG_OP_BATCH_NORM_BACKWARD_SCALE);
    ASSERT_VALUES(v[grad[1]->id], "dscale", -0.5);
    ASSERT_VALUES(v[grad[2]->id], "dshift", 1);
    /* var = 1/invstd^2 - eps = 1, unbiased over 2 values: 2; momentum 1/4:
     * rm = 3/4 0 + 1/4 2, rv = 3/4 1 + 1/4 2, written in place */
    ASSERT_VALUES(v[rm->id], "running mean", 0.5);
    ASSERT_VALUES(v[rv->id], "running var", 1.25);
    ASSERT_VALUES(v[run->id], "the update's value: the running mean", 0.5);
    ref_done(g, v);
}

Test(conv_ref, batch_norm_4d_channels_by_hand) {
    /* x [2,2,1,2]: channel 0 holds 1, 3 (image 0) and 5, 7 (image 1): mean 4,
     * variance 5, with eps 4 invstd 1/3; channel 1 holds 10, 10, 20, 20:
     * mean 15, variance 25, invstd 1/sqrt(29) */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", S(2, 2, 1, 2), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *scale = dg_param(g, "scale", S(2), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *shift = dg_param(g, "shift", S(2), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *y = dg_batch_norm(g, x, scale, shift, 4.0f);
    dg_node *leaves[3] = {x, scale, shift};
    const double *in[3] = {VALUES(1, 3, 10, 10, 5, 7, 20, 20), VALUES(1, 3), VALUES(0, 1)};
    double **v = ref_run(g, leaves, in, 3);
    ASSERT_VALUES(v[y->side[0]->id], "stats", 4, 15, 1.0 / 3, 1 / sqrt(29.0));
    const double lo = 3 * -5 / sqrt(29.0) + 1, hi = 3 * 5 / sqrt(29.0) + 1;
    ASSERT_VALUES(v[y->id], "y", -1, -1.0 / 3, lo, lo, 1.0 / 3, 1, hi, hi);
    ref_done(g, v);
}

/* ---- on the CPU backend: what the op table does not reach.
 * These need the CPU kernels of the convolutional ops. ---- */

/* The running statistics after one and after two runs of a training
 * forward, against the float64 formula from x itself. */
Test(conv_cpu, batch_norm_running_statistics_update_in_place) {
    enum { N = 4, C = 3, P = 5 };
    const float momentum = 0.25f, eps = 1e-3f;
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", S(N, C, 1, P));
    dg_node *scale = dg_param(g, "scale", S(C), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *shift = dg_param(g, "shift", S(C), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *bn = dg_batch_norm(g, x, scale, shift, eps);
    dg_node *rm = dg_state(g, "running_mean", S(C), (dg_init){DG_INIT_FILL, 0.5f, 0, 0});
    dg_node *rv = dg_state(g, "running_var", S(C), (dg_init){DG_INIT_FILL, 2.0f, 0, 0});
    dg_node *run = dg_batch_norm_running(g, bn, rm, rv, momentum);
    cr_assert_not_null(run, "%s", dg_last_error());
    float xv[N * C * P];
    for (int i = 0; i < N * C * P; i++) xv[i] = (float)(0.37 * i - 0.011 * i * i + (i % C));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &run, 1, NULL));
    ASSERT_OK(dg_plan_set(p, x, xv, sizeof xv));
    double want_m[C], want_v[C];
    for (int c = 0; c < C; c++) {
        want_m[c] = 0.5;
        want_v[c] = 2.0;
    }
    for (int step = 1; step <= 2; step++) {
        ASSERT_OK(dg_plan_run(p));
        float got_m[C], got_v[C];
        ASSERT_OK(dg_plan_get(p, rm, got_m, sizeof got_m));
        ASSERT_OK(dg_plan_get(p, rv, got_v, sizeof got_v));
        for (int c = 0; c < C; c++) {
            double mean = 0, var = 0;
            for (int n = 0; n < N; n++)
                for (int q = 0; q < P; q++) mean += xv[(n * C + c) * P + q];
            mean /= N * P;
            for (int n = 0; n < N; n++)
                for (int q = 0; q < P; q++) var += pow(xv[(n * C + c) * P + q] - mean, 2);
            var /= N * P - 1; /* unbiased */
            want_m[c] = (1 - momentum) * want_m[c] + momentum * mean;
            want_v[c] = (1 - momentum) * want_v[c] + momentum * var;
            cr_assert(fabs(got_m[c] - want_m[c]) <= 1e-5 * fmax(1, fabs(want_m[c])),
                      "run %d, channel %d: running mean %.9g, want %.9g", step, c, got_m[c], want_m[c]);
            cr_assert(fabs(got_v[c] - want_v[c]) <= 1e-5 * fmax(1, fabs(want_v[c])),
                      "run %d, channel %d: running var %.9g, want %.9g", step, c, got_v[c], want_v[c]);
        }
    }
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

/* The side outputs the kernels write (the table's rows read only y and
 * the gradients, from inputs without ties): max pool's output and argmax
 * exactly on an input full of ties and with a few NaNs (the first maximum
 * wins; the first NaN wins and propagates), batch norm's stats to float
 * rounding, against the reference. */
Test(conv_cpu, side_outputs_match_the_reference) {
    enum { N = 2, C = 3, H = 7, W = 6, NX = N * C * H * W, NY = N * C * 4 * 3 };
    dg_graph *g = dg_graph_new();
    dg_node *xp = dg_input(g, "x_pool", S(N, C, H, W)), *xb = dg_input(g, "x_norm", S(N, C, H, W));
    dg_node *scale = dg_param(g, "scale", S(C), (dg_init){DG_INIT_UNIFORM, 0.5f, 2, 3});
    dg_node *shift = dg_param(g, "shift", S(C), (dg_init){DG_INIT_UNIFORM, -1, 1, 4});
    dg_node *pool = dg_max_pool2d(g, xp, POOL(.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}));
    dg_node *bn = dg_batch_norm(g, xb, scale, shift, 1e-5f);
    cr_assert(pool && bn, "%s", dg_last_error());
    dg_node *outs[4] = {pool, pool->side[0], bn, bn->side[0]};
    float xpv[NX], xbv[NX], sv[C], tv[C];
    for (int i = 0; i < NX; i++) {
        xpv[i] = i % 41 == 5 ? NAN : (float)((i * 37) % 5) * 0.5f - 1.0f; /* five values */
        xbv[i] = (float)((i * 37) % NX) / 50.0f - 2.0f;
    }
    ASSERT_OK(dg_init_fill(scale->init, sv, C));
    ASSERT_OK(dg_init_fill(shift->init, tv, C));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 4, NULL));
    ASSERT_OK(dg_plan_set(p, xp, xpv, sizeof xpv));
    ASSERT_OK(dg_plan_set(p, xb, xbv, sizeof xbv));
    ASSERT_OK(dg_plan_run(p));
    float y[NY], stats[2 * C];
    int32_t argmax[NY];
    cr_assert_eq(dg_node_bytes(pool->side[0]), sizeof argmax);
    ASSERT_OK(dg_plan_get(p, pool, y, sizeof y));
    ASSERT_OK(dg_plan_get(p, pool->side[0], argmax, sizeof argmax));
    ASSERT_OK(dg_plan_get(p, bn->side[0], stats, sizeof stats));
    double xpd[NX], xbd[NX], sd[C], td[C];
    for (int i = 0; i < NX; i++) {
        xpd[i] = xpv[i];
        xbd[i] = xbv[i];
    }
    for (int c = 0; c < C; c++) {
        sd[c] = sv[c];
        td[c] = tv[c];
    }
    dg_node *leaves[4] = {xp, xb, scale, shift};
    const double *in[4] = {xpd, xbd, sd, td};
    double **v = ref_run(g, leaves, in, 4);
    int nans = 0;
    for (int i = 0; i < NY; i++) {
        double want = v[pool->id][i];
        nans += isnan(want);
        cr_assert(y[i] == want || (isnan(y[i]) && isnan(want)), "y[%d] = %g, want %g", i, y[i], want);
        cr_assert_eq((double)argmax[i], v[pool->side[0]->id][i], "argmax[%d] = %d, want %g", i, argmax[i],
                     v[pool->side[0]->id][i]);
    }
    cr_assert_gt(nans, 0, "no window met a NaN");
    ASSERT_CLOSE(cmp_f32(stats, v[bn->side[0]->id], 2 * C), 1e-6, "stats", "batch_norm", test_seed());
    dg_plan_free(p);
    dg_backend_free(be);
    ref_done(g, v);
}

/* The CPU's max pool takes the windows that lie inside x in blocks of up
 * to 256 outputs of a row, tap by tap with selects (cpu_pool.c: strides 1
 * and 2 as constants, any other as a variable), and the rest one by one:
 * rows of 300 outputs (two blocks, no padding), of 301 from a padded 3x3
 * pool (a border column each side: 601 columns leave the last window
 * over the edge), of 601 at stride 1 (three blocks) and of 201 at stride
 * 3, against the reference, output and argmax exactly, on values full of
 * ties and with NaNs one above another, so that a window holds two of
 * them (the first must be taken: a later NaN, or a later equal value,
 * replacing it is a bug). */
Test(conv_cpu, max_pool_blocks_match_the_reference) {
    enum { N = 1, C = 2, H = 5, W = 601, NX = N * C * H * W };
    static const dg_pool2d_opts opts[4] = {POOL(.kernel = {2, 2}, .stride = {2, 2}),
                                           POOL(.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}),
                                           POOL(.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}),
                                           POOL(.kernel = {2, 3}, .stride = {2, 3}, .pad = {1, 1})};
    static float xv[NX], y[NX];
    static int32_t argmax[NX];
    static double xd[NX];
    for (int i = 0; i < NX; i++) {
        xv[i] = (i % W) % 7 == 3 ? NAN : (float)((i * 37) % 5) * 0.5f - 1.0f;
        xd[i] = xv[i];
    }
    for (int k = 0; k < 4; k++) {
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_input(g, "x", S(N, C, H, W));
        dg_node *pool = dg_max_pool2d(g, x, opts[k]);
        cr_assert_not_null(pool, "%s", dg_last_error());
        int64_t ny = dg_node_numel(pool);
        dg_node *outs[2] = {pool, pool->side[0]};
        dg_backend *be;
        ASSERT_OK(dg_cpu_backend_new(&be, 0));
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, outs, 2, NULL));
        ASSERT_OK(dg_plan_set(p, x, xv, sizeof xv));
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, pool, y, (size_t)ny * sizeof *y));
        ASSERT_OK(dg_plan_get(p, pool->side[0], argmax, (size_t)ny * sizeof *argmax));
        const double *in[1] = {xd};
        double **v = ref_run(g, &x, in, 1);
        int nans = 0;
        for (int64_t i = 0; i < ny; i++) {
            double want = v[pool->id][i];
            nans += isnan(want);
            cr_assert(y[i] == want || (isnan(y[i]) && isnan(want)), "pool %d: y[%lld] = %g, want %g", k, (long long)i,
                      y[i], want);
            cr_assert_eq((double)argmax[i], v[pool->side[0]->id][i], "pool %d: argmax[%lld] = %d, want %g", k,
                         (long long)i, argmax[i], v[pool->side[0]->id][i]);
        }
        cr_assert_gt(nans, 0, "pool %d: no window met a NaN", k);
        dg_plan_free(p);
        dg_backend_free(be);
        ref_done(g, v); /* frees g too */
    }
}

/* The pool kernels clamp every window to x whatever the node's attributes
 * say: a pool built with sound attributes and then given the ones of a
 * window wholly in the padding (kernel 3x3, stride INT_MAX x 1, padding
 * 2^30 x 0 on x [1,1,4,4], which the builder refuses) reads no element
 * outside x: its windows hold no tap, so y is 0 and argmax -1, and the
 * backward adds nothing. The CPU max pool read x at its window's first
 * corner, 2^30 rows past the plane (SIGSEGV). */
Test(conv_cpu, pools_stay_inside_x_whatever_the_attributes) {
    for (int max = 0; max < 2; max++) {
        /* sound: kernel 3x3, stride 2x1, padding 1x0 -> y [1,1,2,2] */
        pool_case c = pool_case_new(max, S(1, 1, 4, 4), POOL(.kernel = {3, 3}, .stride = {2, 1}, .pad = {1, 0}));
        dg_node *outs[2] = {c.y, c.dx};
        dg_backend *be;
        ASSERT_OK(dg_cpu_backend_new(&be, 2));
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, c.g, be, outs, 2, NULL));
        float x[16], dy[4] = {1, 2, 3, 4}, y[4], dx[16];
        for (int i = 0; i < 16; i++) x[i] = (float)i + 1.0f;
        ASSERT_OK(dg_plan_set(p, c.x, x, sizeof x));
        ASSERT_OK(dg_plan_set(p, c.dy, dy, sizeof dy));
        dg_attr_conv hostile = {{3, 3}, {INT32_MAX, 1}, {1 << 30, 0}, {1, 1}, 1};
        dg__attr_conv_set(c.y, hostile);
        dg__attr_conv_set(c.dx, hostile);
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, c.y, y, sizeof y));
        ASSERT_OK(dg_plan_get(p, c.dx, dx, sizeof dx));
        for (int i = 0; i < 4; i++) cr_assert_eq(y[i], 0.0f, "%s: y[%d] = %g, want 0", dg_op_name(c.y->op), i, y[i]);
        for (int i = 0; i < 16; i++)
            cr_assert_eq(dx[i], 0.0f, "%s: dx[%d] = %g, want 0", dg_op_name(c.y->op), i, dx[i]);
        if (max) {
            int32_t argmax[4];
            ASSERT_OK(dg_plan_get(p, c.y->side[0], argmax, sizeof argmax));
            for (int i = 0; i < 4; i++) cr_assert_eq(argmax[i], -1, "argmax[%d] = %d, want -1", i, argmax[i]);
        }
        dg_plan_free(p);
        dg_backend_free(be);
        dg_graph_free(c.g);
    }
}

/* The same promise for the attributes the CPU max pool's block path
 * divides by or offsets with (cpu_pool.c): a column stride of 0 or -5, a
 * negative column padding. No crash, and every output is the tap its
 * argmax names inside the plane, or 0 with argmax -1. */
Test(conv_cpu, max_pool_blocks_leave_odd_strides_to_the_clamped_path) {
    const dg_attr_conv odd[3] = {{{3, 3}, {1, 0}, {0, 0}, {1, 1}, 1},
                                 {{3, 3}, {1, -5}, {0, 1}, {1, 1}, 1},
                                 {{3, 3}, {1, 1}, {0, -2}, {1, 1}, 1}};
    for (int k = 0; k < 3; k++) {
        pool_case c = pool_case_new(true, S(1, 1, 4, 4), POOL(.kernel = {3, 3}, .stride = {1, 1}));
        dg_node *outs[2] = {c.y, c.y->side[0]};
        dg_backend *be;
        ASSERT_OK(dg_cpu_backend_new(&be, 2));
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, c.g, be, outs, 2, NULL));
        float x[16], y[4];
        int32_t argmax[4];
        for (int i = 0; i < 16; i++) x[i] = (float)((i * 7) % 16);
        ASSERT_OK(dg_plan_set(p, c.x, x, sizeof x));
        dg__attr_conv_set(c.y, odd[k]);
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, c.y, y, sizeof y));
        ASSERT_OK(dg_plan_get(p, c.y->side[0], argmax, sizeof argmax));
        for (int i = 0; i < 4; i++) {
            cr_assert(argmax[i] >= -1 && argmax[i] < 16, "attributes %d: argmax[%d] = %d", k, i, argmax[i]);
            cr_assert_eq(y[i], argmax[i] < 0 ? 0.0f : x[argmax[i]], "attributes %d: y[%d] = %g, argmax %d", k, i,
                         y[i], argmax[i]);
        }
        dg_plan_free(p);
        dg_backend_free(be);
        dg_graph_free(c.g);
    }
}

/* How the CPU backend of a case runs: its threads (0: OpenMP's default),
 * its convolutions' strategy and its sgemm (cpu_backend.h); nested: the
 * plan run from inside another parallel region, where the backend's
 * regions get a team of one thread */
typedef struct cpu_conf { int threads; dg_cpu_conv conv; dg_cpu_gemm gemm; bool nested; } cpu_conf;
#define PASSES ((cpu_conf){0, DG_CPU_CONV_PASSES, DG_CPU_GEMM_OPENBLAS, false})
#define BATCH3 ((cpu_conf){3, DG_CPU_CONV_BATCH, DG_CPU_GEMM_OPENBLAS, false})

static dg_status run_plan(dg_plan *p, bool nested) {
    if (!nested) return dg_plan_run(p);
    dg_status st = DG_OK;
    omp_set_max_active_levels(1);
#pragma omp parallel num_threads(2)
#pragma omp single
    st = dg_plan_run(p);
    return st;
}

/* y = conv2d(x, w) forward and both gradients on the CPU backend `cf`
 * against the float64 reference, from x's and w's init and a uniform dy;
 * `what` names the case; tol covers float32 sums of up to 100k products. */
static void assert_conv_matches_reference(dg_graph *g, dg_node *x, dg_node *w, dg_node *y, cpu_conf cf, double tol,
                                          const char *what_case) {
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_node *dy = dg_input(g, "dy", y->shape), *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, y, dy), DG_ALL_AXES, false), wrt, 2, grads));
    int64_t nx = dg_node_numel(x), nw = dg_node_numel(w), ny = dg_node_numel(y);
    float *xv = malloc((size_t)nx * sizeof *xv), *wv = malloc((size_t)nw * sizeof *wv);
    float *dyv = malloc((size_t)ny * sizeof *dyv);
    cr_assert(xv && wv && dyv);
    ASSERT_OK(dg_init_fill(x->init, xv, nx));
    ASSERT_OK(dg_init_fill(w->init, wv, nw));
    ASSERT_OK(dg_init_fill((dg_init){DG_INIT_UNIFORM, -1, 1, 9}, dyv, ny));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, cf.threads));
    dg_cpu_set_conv(be, cf.conv);
    dg_cpu_set_gemm(be, cf.gemm);
    dg_plan *p;
    dg_node *outs[3] = {y, grads[0], grads[1]};
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 3, NULL));
    ASSERT_OK(dg_plan_set(p, dy, dyv, (size_t)ny * sizeof *dyv));
    /* twice: the second run meets the first one's scratch (partials,
     * columns); `nested` applies to the second */
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(run_plan(p, cf.nested));
    /* the reference, from the same values */
    double *xd = malloc((size_t)nx * sizeof *xd), *wd = malloc((size_t)nw * sizeof *wd);
    double *dyd = malloc((size_t)ny * sizeof *dyd);
    cr_assert(xd && wd && dyd);
    for (int64_t i = 0; i < nx; i++) xd[i] = xv[i];
    for (int64_t i = 0; i < nw; i++) wd[i] = wv[i];
    for (int64_t i = 0; i < ny; i++) dyd[i] = dyv[i];
    dg_node *leaves[3] = {x, w, dy};
    const double *in[3] = {xd, wd, dyd};
    double **v = ref_run(g, leaves, in, 3);
    const char *what[3] = {"y", "dx", "dw"};
    for (int k = 0; k < 3; k++) {
        int64_t n = dg_node_numel(outs[k]);
        float *got = malloc((size_t)n * sizeof *got);
        cr_assert_not_null(got);
        ASSERT_OK(dg_plan_get(p, outs[k], got, (size_t)n * sizeof *got));
        ASSERT_CLOSE(cmp_f32(got, v[outs[k]->id], n), tol, what[k], what_case, test_seed());
        free(got);
    }
    dg_plan_free(p);
    dg_backend_free(be);
    ref_done(g, v);
    free(xv);
    free(wv);
    free(dyv);
    free(xd);
    free(wd);
    free(dyd);
}

/* A convolution over more images than one im2col chunk holds (2 + 1 here,
 * one image per pass): forward and both gradients against the float64
 * reference. */
Test(conv_cpu, a_batch_over_several_chunks_matches_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = chunked_conv(g, &x, &w);
    /* sums of 400 (y, dx) and 100k (dw) products in float32 */
    assert_conv_matches_reference(g, x, w, y, PASSES, 1e-5, "conv2d over 2 chunks");
}

/* x [5,16,hw,hw], w [4,8,3,3], padding 1, 2 groups: 144 rows of columns
 * (and 4 of dyT for the weight's gradient); the groups' rows and channels
 * are offset inside each pass */
static dg_node *grouped_conv(dg_graph *g, int64_t hw, dg_node **x, dg_node **w) {
    *x = dg_param(g, "x", S(5, 16, hw, hw), (dg_init){DG_INIT_UNIFORM, -1, 1, 10});
    *w = dg_param(g, "w", S(4, 8, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 11});
    return dg_conv2d(g, *x, *w, NULL, CONV(.pad = {1, 1}, .groups = 2));
}

/* The forward and dx in passes of several images and a shorter last one
 * (cpu_conv.c unfolds as many images as fit its 1 MiB UNFOLD_BYTES at
 * once): at 26x26, 144 x 676 floats (0.39 MB) per image, passes of 2, 2
 * and 1 images (the weight's gradient: one pass of 5). */
Test(conv_cpu, unfolding_passes_of_several_images_match_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 26, &x, &w);
    /* sums of 72 (y), 18 (dx) and 3380 (dw) products in float32 */
    assert_conv_matches_reference(g, x, w, y, PASSES, 1e-5, "conv2d unfolded 2, 2 and 1 images at a time");
}

/* The weight's gradient in passes of several images and a shorter last
 * one (as many as fit the 4 MiB WEIGHT_PASS_BYTES, their dy transposed
 * beside the columns): at 52x52, (144 + 4) x 2704 floats (1.6 MB) per
 * image, passes of 2, 2 and 1 images (the forward and dx: one image per
 * pass). */
Test(conv_cpu, weight_gradient_passes_of_several_images_match_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 52, &x, &w);
    /* sums of 72 (y), 18 (dx) and 13520 (dw) products in float32 */
    assert_conv_matches_reference(g, x, w, y, PASSES, 1e-5,
                                  "conv2d's weight gradient over passes of 2, 2 and 1 images");
}

/* Images of fewer than 512 columns are multiplied side by side in passes
 * of at least ceil(512 / cols) (cpu_conv.c SIDE_COLUMNS): 40 images of 4 x
 * 4 outputs, passes of 32 and 8 (1 MiB holds fewer: 28 of the 3x3 case's
 * 36.9 KB, 31 of the 1x1's 33.3 KB). The 3x3 case with 2 groups runs both
 * the forward (y^T through the columns) and dx (dy^T in dx) side by side;
 * the widening 1x1 stride-2 case (520 rows of columns, 1040 outputs) only
 * dx, its forward image by image. */
Test(conv_cpu, passes_side_by_side_match_the_reference, .timeout = 300) {
    static const struct { int64_t c, hw, o, k; dg_conv2d_opts opts; const char *what; } cases[2] = {
        {64, 4, 64, 3, CONV(.pad = {1, 1}, .groups = 2), "3x3, 2 groups, forward and dx side by side"},
        {520, 8, 1040, 1, CONV(.stride = {2, 2}), "1x1 stride 2 widening, dx side by side"},
    };
    for (int k = 0; k < 2; k++) {
        dg_graph *g = dg_graph_new();
        int64_t c = cases[k].c, hw = cases[k].hw, kk = cases[k].k;
        int64_t cg = c / (cases[k].opts.groups ? cases[k].opts.groups : 1);
        dg_node *x = dg_param(g, "x", S(40, c, hw, hw), (dg_init){DG_INIT_UNIFORM, -1, 1, 16});
        dg_node *w = dg_param(g, "w", S(cases[k].o, cg, kk, kk), (dg_init){DG_INIT_UNIFORM, -1, 1, 17});
        dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].opts);
        cr_assert_not_null(y, "%s", dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        cr_assert_eq(d.cols, 16);
        cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 32, "%s: passes of 32 images", cases[k].what);
        /* sums of up to 520 (y), 1040 (dx) and 640 (dw) products in float32 */
        assert_conv_matches_reference(g, x, w, y, PASSES, 1e-5, cases[k].what);
    }
}

/* How many images a pass of the forward or dx holds: as many as fit 1 MiB
 * of columns, and side by side at least 512 columns' worth, never more
 * than the scratch's chunk */
Test(conv_cpu, pass_images_follow_columns_and_scratch) {
    dg_conv_dims d = {.n = 100, .rows = 600, .cols = 16, .chunk = 100};
    cr_assert_eq(dg__cpu_conv_pass_images(&d, false), 27, "1 MiB / 38.4 KB");
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 32, "512 columns side by side");
    d.rows = 54;
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 100, "1 MiB holds more: the chunk");
    d.rows = 600;
    d.cols = 100;
    cr_assert_eq(dg__cpu_conv_pass_images(&d, false), 4, "1 MiB / 240 KB");
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 6, "ceil(512 / 100)");
    d.rows = 5000;
    cr_assert_eq(dg__cpu_conv_pass_images(&d, false), 1, "an image of 2 MB: one per pass");
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 6, "ceil(512 / 100)");
    d.chunk = 4;
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 4, "never more than the scratch's chunk");
    d.cols = 512;
    cr_assert_eq(dg__cpu_conv_pass_images(&d, true), 1, "512 columns: an image per pass");
}

/* ---- DG_CPU_CONV_BATCH: OpenMP over the batch, a slot per thread ---- */

/* 3 threads over 5 images (ranges of 1, 2 and 2: a thread's second image
 * reuses its slot, and its partial dw accumulates), 2 groups, padding 1:
 * each thread's columns, its partial dw and their sum into dw */
Test(conv_cpu, batch_over_threads_matches_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 9, &x, &w);
    cr_assert_eq(dg__cpu_conv_slots(&(dg_conv_dims){0}, true, DG_CPU_CONV_BATCH, 3, DG_OP_CONV2D), 0,
                 "no images: no slots");
    dg_conv_dims d = dg_conv_dims_of(y);
    cr_assert_eq(dg__cpu_conv_slots(&d, true, DG_CPU_CONV_BATCH, 3, DG_OP_CONV2D), 3, "the case must run on 3 slots");
    /* sums of 72 (y), 18 (dx) and 405 (dw) products in float32 */
    assert_conv_matches_reference(g, x, w, y, BATCH3, 1e-5, "conv2d image by image on 3 threads");
}

/* An image whose columns are larger than 1 MiB runs in blocks of whole
 * output rows of at least 256 columns (cpu_conv.c BLOCK_BYTES,
 * BLOCK_COLUMNS): 40 channels of 61 x 50 with stride 2 and padding 1
 * give 360 rows x 31 x 25 outputs (1.1 MB), blocks of 11, 11 and 9
 * output rows (a short last one); 54 channels of 29 x 24 with dilation 2,
 * stride 1 and padding (0, 1) give 486 rows x 25 x 22 outputs (1.07 MB),
 * blocks of 12, 12 and 1 rows. A block's taps read input rows that the
 * next block reads too, so dx sums over the blocks, and dw sums every
 * block of every image. */
Test(conv_cpu, batch_in_blocks_of_output_rows_matches_the_reference, .timeout = 300) {
    static const struct { int64_t c, h, w; dg_conv2d_opts o; const char *what; } cases[2] = {
        {40, 61, 50, CONV(.stride = {2, 2}, .pad = {1, 1}), "stride 2: blocks of 11, 11 and 9 output rows"},
        {54, 29, 24, CONV(.pad = {0, 1}, .dilation = {2, 2}), "dilation 2: blocks of 12, 12 and 1 output rows"},
    };
    for (int k = 0; k < 2; k++) {
        dg_graph *g = dg_graph_new();
        int64_t c = cases[k].c;
        dg_node *x = dg_param(g, "x", S(4, c, cases[k].h, cases[k].w), (dg_init){DG_INIT_UNIFORM, -1, 1, 14});
        dg_node *w = dg_param(g, "w", S(5, c, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 15});
        dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].o);
        cr_assert_not_null(y, "%s", dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        cr_assert_gt(d.rows * d.cols * 4, 1 << 20, "%s: an image's columns must exceed 1 MiB", cases[k].what);
        cr_assert_gt(d.cols, 2 * 256, "%s: the case must need three blocks", cases[k].what);
        /* sums of up to 486 (y), 45 (dx) and 3100 (dw) products in float32 */
        assert_conv_matches_reference(g, x, w, y, BATCH3, 1e-5, cases[k].what);
    }
}

/* A direct convolution (1x1, stride 1, no padding) image by image: the
 * forward reads x and dx is written in place of columns; the weight's
 * gradient still unfolds */
Test(conv_cpu, direct_convolution_over_threads_matches_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", S(4, 6, 5, 7), (dg_init){DG_INIT_UNIFORM, -1, 1, 12});
    dg_node *w = dg_param(g, "w", S(8, 6, 1, 1), (dg_init){DG_INIT_UNIFORM, -1, 1, 13});
    dg_node *y = dg_conv2d(g, x, w, NULL, CONV());
    cr_assert_not_null(y, "%s", dg_last_error());
    cr_assert(dg_conv_dims_of(y).direct);
    assert_conv_matches_reference(g, x, w, y, BATCH3, 1e-5, "a direct conv2d image by image on 3 threads");
}

/* Fewer images than threads: the batch cuts each image in threads/n
 * units (cpu_conv.c image_parts), the forward's and dw's by output rows,
 * dx's by input channels (one group only), and gives them to the threads:
 * unevenly cut images, units of one image on different threads, a unit of
 * blocks (a 1.1 MB image), a direct 1x1 cut by columns and by channels.
 * Each case first asserts that it is cut: more slots than images. */
Test(conv_cpu, batch_cut_in_units_matches_the_reference, .timeout = 300) {
    static const struct {
        int64_t n, c, h, w, o, k;
        dg_conv2d_opts opts;
        int threads, slots, data_slots;
        const char *what;
    } cases[] = {
        /* 9 output rows in units of 4 and 5 (slots of 144 x 45 floats: 5 of
         * them in 3 images' 144 x 81, for 6 units); dx: 16 channels in 2
         * units of 8 (72 x 81: 6 slots) */
        {3, 16, 9, 9, 8, 3, CONV(.pad = {1, 1}), 7, 5, 6, "3 images of 9x9 cut in 2 on 7 threads"},
        /* 9 x 3 outputs, 3 units of 3 rows (63 x 9: 6 slots); 7 channels in
         * units of 2, 2 and 3 (27 x 27: 4 slots for 6 units) */
        {2, 7, 11, 6, 5, 3, CONV(.stride = {1, 2}, .pad = {0, 1}), 7, 6, 4, "2 images cut in 3, stride (1, 2)"},
        /* 31 x 25 outputs, rows in units of 15 and 16, blocks of 11 rows
         * inside (360 x 275: 5 slots for 4 units); 40 channels in 2 units */
        {2, 40, 61, 50, 6, 3, CONV(.stride = {2, 2}, .pad = {1, 1}), 5, 4, 4, "2 images of 1.1 MB cut in 2"},
        /* direct: 5 rows of 7 columns in 2 and 3; 6 channels in 3 units of 2 */
        {2, 6, 5, 7, 8, 1, CONV(), 6, 6, 6, "a direct 1x1 on 2 images cut in 3"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_param(g, "x", S(cases[k].n, cases[k].c, cases[k].h, cases[k].w),
                              (dg_init){DG_INIT_UNIFORM, -1, 1, 40 + (uint64_t)k});
        dg_node *w = dg_param(g, "w", S(cases[k].o, cases[k].c, cases[k].k, cases[k].k),
                              (dg_init){DG_INIT_UNIFORM, -1, 1, 50 + (uint64_t)k});
        dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].opts);
        cr_assert_not_null(y, "%s", dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        cr_assert_eq(dg__cpu_conv_slots(&d, true, DG_CPU_CONV_BATCH, cases[k].threads, DG_OP_CONV2D), cases[k].slots,
                     "%s: forward slots", cases[k].what);
        cr_assert_eq(dg__cpu_conv_slots(&d, true, DG_CPU_CONV_BATCH, cases[k].threads, DG_OP_CONV2D_BACKWARD_DATA),
                     cases[k].data_slots, "%s: dx slots", cases[k].what);
        assert_conv_matches_reference(g, x, w, y, (cpu_conf){cases[k].threads, DG_CPU_CONV_BATCH,
                                                             DG_CPU_GEMM_OPENBLAS, false}, 1e-5, cases[k].what);
    }
}

/* Both strides 1 and OW = W: im2col copies, and col2im adds, a tap's valid
 * rows as one span of the plane (cpu_conv.c span_rows), whose wrapped ends
 * in the padding columns must come out zero. Edge cases, each in the
 * passes, the batch of whole images and the batch cut into units: images
 * of one row (taps with no valid row at all), 2 columns under a 5-wide
 * kernel (taps with no valid column), vertical padding 0 (oh = h - 2,
 * the rows shifted), dilation 2, and 1.8 MB images in blocks of 7, 7, 7,
 * 7, 7 and 5 output rows, where a block's first and last taps lose a row;
 * and one just outside the spans, stride (2, 1) with OW = W, whose output
 * rows read every other input row. */
Test(conv_cpu, span_unfolding_matches_the_reference, .timeout = 300) {
    static const struct { int64_t n, c, h, w, k; dg_conv2d_opts opts; bool span; const char *what; } cases[] = {
        {3, 4, 1, 6, 3, CONV(.pad = {1, 1}), true, "1-row images, padding 1"},
        {3, 3, 5, 2, 5, CONV(.pad = {2, 2}), true, "2 columns under a 5x5 kernel"},
        {3, 5, 7, 8, 3, CONV(.pad = {0, 1}), true, "padding (0, 1)"},
        {3, 4, 9, 9, 3, CONV(.pad = {2, 2}, .dilation = {2, 2}), true, "dilation 2, padding 2"},
        {3, 32, 40, 40, 3, CONV(.pad = {1, 1}), true, "1.8 MB images in blocks of 7 output rows"},
        {3, 5, 9, 7, 3, CONV(.stride = {2, 1}, .pad = {1, 1}), false, "stride (2, 1), row by row"},
    };
    static const struct { cpu_conf cf; const char *what; } confs[] = {
        {{3, DG_CPU_CONV_PASSES, DG_CPU_GEMM_OPENBLAS, false}, "passes"},
        {BATCH3, "batch"},
        {{7, DG_CPU_CONV_BATCH, DG_CPU_GEMM_OPENBLAS, false}, "batch cut in 2"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t f = 0; f < sizeof confs / sizeof confs[0]; f++) {
            char what[160];
            snprintf(what, sizeof what, "%s, %s", cases[k].what, confs[f].what);
            dg_graph *g = dg_graph_new();
            dg_node *x = dg_param(g, "x", S(cases[k].n, cases[k].c, cases[k].h, cases[k].w),
                                  (dg_init){DG_INIT_UNIFORM, -1, 1, 60 + (uint64_t)k});
            dg_node *w = dg_param(g, "w", S(6, cases[k].c, cases[k].k, cases[k].k),
                                  (dg_init){DG_INIT_UNIFORM, -1, 1, 70 + (uint64_t)k});
            dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].opts);
            cr_assert_not_null(y, "%s", dg_last_error());
            dg_conv_dims d = dg_conv_dims_of(y);
            cr_assert_eq(d.sh == 1 && d.sw == 1 && d.ow == d.w, cases[k].span, "%s: spans or rows as the case says",
                         what);
            assert_conv_matches_reference(g, x, w, y, confs[f].cf, 1e-5, what);
        }
}

/* DG_CPU_CONV_SHIFT (cpu_conv_shift.c): the stride-1 convolutions from
 * shifted views of padded planes, forward and dx against the float64
 * reference (the weight's gradient, which runs as DEFAULT, with them).
 * Each case states whether the shift applies, and where it does the
 * forward and dx must get slots on the case's threads (else the fallback
 * would pass for it): 3x3 padding 1, the ResNet layers; 5x5
 * padding 2 over 2 columns (the kernel wider than the image); padding
 * (0, 1), so dx pads dy by 2 rows and 1 column; dilation 2; no padding;
 * 2 groups; a 1x3 kernel; and where it does not apply, stride 2 and a 1x1
 * kernel with padding 1 (dx would need negative padding), which must
 * still match through the batch strategy. Each runs as 3 images on 3
 * threads, cut into 2 units of rows an image on 7, one image cut in 4,
 * and nested (a team of one thread: slots are counted for 3, one works). */
Test(conv_cpu, shift_matches_the_reference, .timeout = 300) {
    static const struct { int64_t n, c, h, w, o, kh, kw; dg_conv2d_opts opts; bool applies; const char *what; }
        cases[] = {
            {3, 4, 6, 7, 6, 3, 3, CONV(.pad = {1, 1}), true, "3x3, padding 1"},
            {3, 3, 5, 2, 4, 5, 5, CONV(.pad = {2, 2}), true, "2 columns under a 5x5 kernel"},
            {3, 5, 7, 8, 6, 3, 3, CONV(.pad = {0, 1}), true, "padding (0, 1)"},
            {3, 4, 9, 9, 5, 3, 3, CONV(.pad = {2, 2}, .dilation = {2, 2}), true, "dilation 2, padding 2"},
            {3, 3, 6, 5, 4, 3, 3, CONV(.pad = {0, 0}), true, "no padding"},
            {3, 4, 6, 6, 6, 3, 3, CONV(.pad = {1, 1}, .groups = 2), true, "2 groups"},
            {3, 4, 5, 6, 3, 1, 3, CONV(.pad = {0, 1}), true, "a 1x3 kernel"},
            {3, 5, 9, 7, 6, 3, 3, CONV(.stride = {2, 2}, .pad = {1, 1}), false, "stride 2"},
            {3, 4, 5, 5, 6, 1, 1, CONV(.pad = {1, 1}), false, "1x1, padding 1"},
        };
    /* ops: how many of forward and dx must run shifted where it applies
     * (one small image's scratch, its columns, is too small for 4 slots of
     * dy padded in some cases: those fall back to the batch strategy) */
    static const struct { int64_t n; cpu_conf cf; int ops; const char *what; } confs[] = {
        {3, {3, DG_CPU_CONV_SHIFT, DG_CPU_GEMM_OPENBLAS, false}, 2, "3 images on 3 threads"},
        {3, {7, DG_CPU_CONV_SHIFT, DG_CPU_GEMM_OPENBLAS, false}, 2, "units of rows on 7 threads"},
        {1, {4, DG_CPU_CONV_SHIFT, DG_CPU_GEMM_OPENBLAS, false}, 1, "one image cut in 4"},
        {3, {3, DG_CPU_CONV_SHIFT, DG_CPU_GEMM_OPENBLAS, true}, 2, "nested"},
    };
    static const dg_op ops[2] = {DG_OP_CONV2D, DG_OP_CONV2D_BACKWARD_DATA};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t f = 0; f < sizeof confs / sizeof confs[0]; f++) {
            char what[160];
            snprintf(what, sizeof what, "%s, %s", cases[k].what, confs[f].what);
            dg_graph *g = dg_graph_new();
            dg_node *x = dg_param(g, "x", S(confs[f].n, cases[k].c, cases[k].h, cases[k].w),
                                  (dg_init){DG_INIT_UNIFORM, -1, 1, 80 + (uint64_t)k});
            int64_t cg = cases[k].c / (cases[k].opts.groups ? cases[k].opts.groups : 1);
            dg_node *w = dg_param(g, "w", S(cases[k].o, cg, cases[k].kh, cases[k].kw),
                                  (dg_init){DG_INIT_UNIFORM, -1, 1, 90 + (uint64_t)k});
            dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].opts);
            cr_assert_not_null(y, "%s: %s", what, dg_last_error());
            dg_conv_dims d = dg_conv_dims_of(y);
            cr_assert_eq(dg__cpu_conv_shift_applies(&d), cases[k].applies, "%s: the shift applies as the case says",
                         what);
            for (int op = 0; op < confs[f].ops && cases[k].applies; op++)
                cr_assert_gt(dg__cpu_conv_shift_slots(&d, true, confs[f].cf.threads, ops[op]), 1,
                             "%s: %s runs shifted", what, dg_op_name(ops[op]));
            assert_conv_matches_reference(g, x, w, y, confs[f].cf, 1e-5, what);
        }
}

/* Where the shift runs: never on one thread, with an sgemm that cannot
 * run on every thread at once, where it does not apply, or for the
 * weight's gradient, which runs as DEFAULT would (with 32 channels on 2
 * threads, 144 columns of dw a thread, the channel split, where a
 * fallback to the batch strategy would show); with fewer images than
 * threads each image's rows are cut (at most a unit a row); never more
 * slots than the scratch holds. */
Test(conv_cpu, shift_slots_follow_threads_images_and_scratch) {
    dg_graph *g = dg_graph_new();
    dg_node *x = V("x", 4, 8, 6, 6), *w = V("w", 8, 8, 3, 3);
    dg_node *y = dg_conv2d(g, x, w, NULL, CONV(.pad = {1, 1}));
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_conv_dims d = dg_conv_dims_of(y);
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, true, 4, DG_OP_CONV2D), 4);
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, true, 1, DG_OP_CONV2D), 0, "one thread");
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, false, 4, DG_OP_CONV2D), 0, "an sgemm that cannot run beside itself");
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, true, 16, DG_OP_CONV2D), 16, "4 images cut in 4 rows each");
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, true, 64, DG_OP_CONV2D), 24, "at most a unit a row: 4 x 6");
    cr_assert_eq(dg__cpu_conv_shift_slots(&d, true, 4, DG_OP_CONV2D_BACKWARD_WEIGHT), 0, "the weight's gradient");
    dg_conv_dims deep = d;
    deep.c = deep.cg = 32;
    deep.rows = 32 * 9;
    cr_assert_eq(dg__cpu_conv_strategy(&deep, DG_OP_CONV2D_BACKWARD_WEIGHT, DG_CPU_CONV_SHIFT, true, 2, NULL),
                 DG_CPU_CONV_RUN_CHANNELS, "the weight's gradient under the shift runs as DEFAULT");
    dg_conv_dims strided = d;
    strided.sh = 2;
    cr_assert_eq(dg__cpu_conv_shift_slots(&strided, true, 4, DG_OP_CONV2D), 0, "stride 2");
    /* a scratch of one image's columns (chunk 1: 72 x 36 floats) holds
     * 2 slots of a whole image's padded planes and result (8 x 8*8+2 +
     * 8 x 6*8 floats) beside the weights tap by tap (576) */
    dg_conv_dims small = d;
    small.chunk = 1;
    cr_assert_eq(dg__cpu_conv_shift_slots(&small, true, 4, DG_OP_CONV2D), 2);
    /* with 12 output channels the weights (864 floats) leave 1728, room
     * for one slot of 1104: none (2592 / 1104 would be 2) */
    dg_conv_dims wide = small;
    wide.o = wide.og = 12;
    cr_assert_eq(dg__cpu_conv_shift_slots(&wide, true, 4, DG_OP_CONV2D), 0, "the weights tap by tap take room");
    dg_graph_free(g);
}

/* the geometry of a 3x3, padding-1 layer of c -> o channels on hw x hw
 * images, n of them */
static dg_conv_dims same_3x3(dg_graph *g, int64_t n, int64_t c, int64_t hw, int64_t o) {
    dg_node *y = dg_conv2d(g, V("x", n, c, hw, hw), V("w", o, c, 3, 3), NULL, CONV(.pad = {1, 1}));
    cr_assert_not_null(y, "%s", dg_last_error());
    return dg_conv_dims_of(y);
}

/* DEFAULT's rule for the shift on 16 threads (the host it was measured
 * on): the forward and dx of ResNet-18's 64- and 128-channel layers at
 * batch 32, and of 64ch 32x32 at batch 8 (units of 16 rows, 544 columns);
 * not 128ch 16x16 at batch 8 (units of 8 rows: 144 columns), not 256ch
 * 8x8 (wrap columns 2 of 10), not the 3-channel stem, never the weight's
 * gradient. */
Test(conv_cpu, shift_by_default_where_it_paid) {
    dg_graph *g = dg_graph_new();
    static const dg_op fwd = DG_OP_CONV2D, dx = DG_OP_CONV2D_BACKWARD_DATA, dw = DG_OP_CONV2D_BACKWARD_WEIGHT;
    dg_conv_dims l1 = same_3x3(g, 32, 64, 32, 64), l2 = same_3x3(g, 32, 128, 16, 128);
    cr_assert(dg__cpu_conv_shift_pays(&l1, 16, fwd) && dg__cpu_conv_shift_pays(&l1, 16, dx), "64ch 32x32, batch 32");
    cr_assert(dg__cpu_conv_shift_pays(&l2, 16, fwd) && dg__cpu_conv_shift_pays(&l2, 16, dx), "128ch 16x16, batch 32");
    cr_assert(!dg__cpu_conv_shift_pays(&l1, 16, dw), "the weight's gradient keeps its rule");
    dg_conv_dims l1_b8 = same_3x3(g, 8, 64, 32, 64), l2_b8 = same_3x3(g, 8, 128, 16, 128);
    cr_assert(dg__cpu_conv_shift_pays(&l1_b8, 16, fwd), "64ch 32x32, batch 8: 544 columns a unit");
    cr_assert(!dg__cpu_conv_shift_pays(&l2_b8, 16, fwd), "128ch 16x16, batch 8: 144 columns a unit");
    dg_conv_dims l3 = same_3x3(g, 32, 256, 8, 256), stem = same_3x3(g, 32, 3, 32, 64);
    cr_assert(!dg__cpu_conv_shift_pays(&l3, 16, fwd), "256ch 8x8: a fifth of the grid wraps");
    cr_assert(!dg__cpu_conv_shift_pays(&stem, 16, fwd) && !dg__cpu_conv_shift_pays(&stem, 16, dx), "3 channels");
    dg_conv_dims strided = l1;
    strided.sh = strided.sw = 2;
    cr_assert(!dg__cpu_conv_shift_pays(&strided, 16, fwd), "stride 2: the shift does not apply");
    dg_graph_free(g);
}

/* DG_CPU_CONV_CHANNELS (cpu_conv.c): the weight's gradient split by input
 * channels, against the float64 reference (the forward and dx run as
 * DEFAULT). Ranges of uneven width (5 channels on 3 threads), a stride of
 * 2, dilation 2, a range that crosses a group boundary (8 channels in 2
 * groups on 3 threads: [2, 5) meets both groups), threads without a
 * channel (3 channels on 7), 64x64 images whose columns (147 KB a channel
 * a thread) take passes of 7 and 2 images, and nested (a team of one). */
Test(conv_cpu, channels_match_the_reference, .timeout = 300) {
    static const struct { int64_t n, c, h, o, k; int threads; bool nested; dg_conv2d_opts opts; const char *what; }
        cases[] = {
            {3, 5, 6, 4, 3, 3, false, CONV(.pad = {1, 1}), "5 channels on 3 threads"},
            {3, 4, 9, 6, 3, 3, false, CONV(.stride = {2, 2}, .pad = {1, 1}), "stride 2"},
            {2, 4, 9, 5, 3, 3, false, CONV(.pad = {2, 2}, .dilation = {2, 2}), "dilation 2"},
            {3, 8, 6, 6, 3, 3, false, CONV(.pad = {1, 1}, .groups = 2), "a range across 2 groups"},
            {2, 3, 6, 4, 3, 7, false, CONV(.pad = {1, 1}), "threads without a channel"},
            {9, 3, 64, 2, 3, 3, false, CONV(.pad = {1, 1}), "passes of 7 and 2 images"},
            {3, 5, 6, 4, 3, 3, true, CONV(.pad = {1, 1}), "nested"},
        };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_param(g, "x", S(cases[k].n, cases[k].c, cases[k].h, cases[k].h),
                              (dg_init){DG_INIT_UNIFORM, -1, 1, 110 + (uint64_t)k});
        int64_t cg = cases[k].c / (cases[k].opts.groups ? cases[k].opts.groups : 1);
        dg_node *w = dg_param(g, "w", S(cases[k].o, cg, cases[k].k, cases[k].k),
                              (dg_init){DG_INIT_UNIFORM, -1, 1, 120 + (uint64_t)k});
        dg_node *y = dg_conv2d(g, x, w, NULL, cases[k].opts);
        cr_assert_not_null(y, "%s: %s", cases[k].what, dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        cr_assert(dg__cpu_conv_channels_run(&d, true, cases[k].threads), "%s: the split runs", cases[k].what);
        cpu_conf cf = {cases[k].threads, DG_CPU_CONV_CHANNELS, DG_CPU_GEMM_OPENBLAS, cases[k].nested};
        assert_conv_matches_reference(g, x, w, y, cf, 1e-5, cases[k].what);
    }
}

/* Where the channel split runs: on 2 threads or more, with an sgemm that
 * can run on every thread at once, over 2 input channels or more */
Test(conv_cpu, channels_run_where_they_can) {
    dg_graph *g = dg_graph_new();
    dg_conv_dims d = same_3x3(g, 4, 8, 6, 8), one = same_3x3(g, 4, 1, 6, 8);
    cr_assert(dg__cpu_conv_channels_run(&d, true, 4));
    cr_assert(!dg__cpu_conv_channels_run(&d, true, 1), "one thread");
    cr_assert(!dg__cpu_conv_channels_run(&d, false, 4), "an sgemm that cannot run beside itself");
    cr_assert(!dg__cpu_conv_channels_run(&one, true, 4), "one input channel");
    dg_graph_free(g);
}

/* DEFAULT's rule for the channel split on 16 threads (the host it was
 * measured on): the weight's gradients of the 256- and 512-channel 3x3
 * layers, not of 128 channels (72 columns of dw a thread), not of the 1x1
 * downsampling from 256 channels (16 columns); on 32 threads not of 256
 * channels either */
Test(conv_cpu, channels_by_default_where_they_paid) {
    dg_graph *g = dg_graph_new();
    dg_conv_dims l3 = same_3x3(g, 32, 256, 8, 256), l4 = same_3x3(g, 32, 512, 4, 512);
    dg_conv_dims l2 = same_3x3(g, 32, 128, 16, 128);
    cr_assert(dg__cpu_conv_channels_pay(&l3, 16) && dg__cpu_conv_channels_pay(&l4, 16), "256 and 512 channels");
    cr_assert(!dg__cpu_conv_channels_pay(&l2, 16), "128 channels: 72 columns a thread");
    dg_node *down = dg_conv2d(g, V("x", 32, 256, 8, 8), V("w", 512, 256, 1, 1), NULL, CONV(.stride = {2, 2}));
    cr_assert_not_null(down, "%s", dg_last_error());
    dg_conv_dims dd = dg_conv_dims_of(down);
    cr_assert(!dg__cpu_conv_channels_pay(&dd, 16), "1x1 from 256 channels: 16 columns a thread");
    cr_assert(!dg__cpu_conv_channels_pay(&l3, 32), "256 channels on 32 threads: 72 columns a thread");
    dg_graph_free(g);
}

/* DEFAULT's choice per direction of ResNet-18's CIFAR layers at batch 32
 * on 16 threads: the own strategy that was fastest in the conv sweep's
 * table (reports/h200/host/conv.csv, docs/PERF.md), which the rules in
 * cpu_conv.c and cpu_conv_shift.c pick: the shift for the forward and dx
 * of 64ch 32x32, the batch strategy for the others but the 4x4 layers'
 * (the passes), the channel split for the weight's gradient of 256 and
 * 512 channels 3x3, the batch strategy or the passes for the others'.
 * Left out: 128ch 16x16's forward and dx, which the rule runs shifted
 * where the host measured the batch 4-11% ahead and the 2-core VM the
 * shift ahead (inside both machines' spreads), and the weight's gradients
 * of the stride-2 128ch 16x16 3x3 and 1x1 layers, where the passes run and
 * the split and the batch measured faster (docs/PERF.md). */
Test(conv_cpu, default_picks_the_tables_fastest_strategy) {
    static const dg_cpu_conv_run P = DG_CPU_CONV_RUN_PASSES, B = DG_CPU_CONV_RUN_BATCH, C = DG_CPU_CONV_RUN_CHANNELS,
                                 S = DG_CPU_CONV_RUN_SHIFT;
    /* the directions checked: fwd, dx, dw */
    static const struct { const char *layer; int64_t c, hw, o, k, stride; dg_cpu_conv_run want[3]; bool checked[3]; }
        layers[] = {
            {"stem", 3, 32, 64, 3, 1, {B, B, B}, {1, 1, 1}},         {"l1.0-conv1", 64, 32, 64, 3, 1, {S, S, B}, {1, 1, 1}},
            {"l2.0-conv1", 64, 32, 128, 3, 2, {B, B, B}, {1, 1, 1}}, {"l2.0-conv2", 128, 16, 128, 3, 1, {B, B, B}, {0, 0, 1}},
            {"l2.0-down", 64, 32, 128, 1, 2, {B, B, B}, {1, 1, 1}},  {"l3.0-conv1", 128, 16, 256, 3, 2, {B, B, C}, {1, 1, 0}},
            {"l3.0-conv2", 256, 8, 256, 3, 1, {B, B, C}, {1, 1, 1}}, {"l3.0-down", 128, 16, 256, 1, 2, {B, B, B}, {1, 1, 0}},
            {"l4.0-conv1", 256, 8, 512, 3, 2, {P, P, C}, {1, 1, 1}}, {"l4.0-conv2", 512, 4, 512, 3, 1, {P, P, C}, {1, 1, 1}},
            {"l4.0-down", 256, 8, 512, 1, 2, {B, B, P}, {1, 1, 1}},
        };
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        dg_graph *g = dg_graph_new();
        int pad = (int)layers[i].k / 2, stride = (int)layers[i].stride;
        dg_node *y = dg_conv2d(g, V("x", 32, layers[i].c, layers[i].hw, layers[i].hw),
                               V("w", layers[i].o, layers[i].c, layers[i].k, layers[i].k), NULL,
                               CONV(.stride = {stride, stride}, .pad = {pad, pad}));
        cr_assert_not_null(y, "%s: %s", layers[i].layer, dg_last_error());
        dg_conv_dims d = dg_conv_dims_of(y);
        const dg_op ops[3] = {DG_OP_CONV2D, DG_OP_CONV2D_BACKWARD_DATA, DG_OP_CONV2D_BACKWARD_WEIGHT};
        for (int k = 0; k < 3; k++) {
            if (!layers[i].checked[k]) continue;
            dg_cpu_conv_run got = dg__cpu_conv_strategy(&d, ops[k], DG_CPU_CONV_DEFAULT, true, 16, NULL);
            cr_assert_eq(got, layers[i].want[k], "%s %s: %s, the table's fastest is %s", layers[i].layer,
                         dg_op_name(ops[k]), dg__cpu_conv_run_name(got), dg__cpu_conv_run_name(layers[i].want[k]));
        }
        dg_graph_free(g);
    }
}

/* The batch strategy asked for with the other sgemms: the naive one runs
 * it (its nested region is one thread), the own one, whose threads share
 * one packing buffer, must run the passes instead */
Test(conv_cpu, batch_with_the_own_and_the_naive_sgemm_matches_the_reference, .timeout = 300) {
    static const dg_cpu_gemm gemms[2] = {DG_CPU_GEMM_OWN, DG_CPU_GEMM_NAIVE};
    for (int k = 0; k < 2; k++) {
        dg_graph *g = dg_graph_new();
        dg_node *x, *w, *y = grouped_conv(g, 26, &x, &w); /* GEMMs large enough for the own sgemm to pack */
        assert_conv_matches_reference(g, x, w, y, (cpu_conf){3, DG_CPU_CONV_BATCH, gemms[k], false}, 1e-5,
                                      k ? "the batch with the naive sgemm" : "the batch with the own sgemm");
    }
}

/* The thread ids of a team of `n` (at most 8), thread by thread */
static void team_thread_ids(int n, long ids[8]) {
#pragma omp parallel num_threads(n)
    ids[omp_get_thread_num()] = syscall(SYS_gettid);
}

/* 5 images on 8 threads: 5 slots work, and the batch's regions still take
 * the whole team of 8. libgomp ends the pool threads that a smaller team
 * leaves out and creates new ones for the next team of 8 (0.8 ms each
 * time on a 16-core host), so a run of the plan must leave the same 8
 * threads behind it; the results with 3 threads idle match the float64
 * reference. */
Test(conv_cpu, batch_with_fewer_slots_than_threads_keeps_the_team, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 9, &x, &w);
    dg_conv_dims d = dg_conv_dims_of(y);
    cr_assert_eq(dg__cpu_conv_slots(&d, true, DG_CPU_CONV_BATCH, 8, DG_OP_CONV2D), 5, "the case must run on 5 slots");
    dg_node *wrt[2] = {x, w}, *grads[2];
    ASSERT_OK(dg_grad(g, dg_sum(g, y, DG_ALL_AXES, false), wrt, 2, grads));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 8));
    dg_cpu_set_conv(be, DG_CPU_CONV_BATCH);
    dg_plan *p;
    dg_node *outs[3] = {y, grads[0], grads[1]};
    ASSERT_OK(dg_plan_new(&p, g, be, outs, 3, NULL));
    ASSERT_OK(dg_plan_run(p)); /* the pool now has its 8 threads */
    long before[8], after[8];
    team_thread_ids(8, before);
    ASSERT_OK(dg_plan_run(p));
    team_thread_ids(8, after);
    for (int t = 0; t < 8; t++)
        cr_expect_eq(after[t], before[t], "thread %d of the team was replaced (%ld, then %ld): a region shrank the team", t,
                     before[t], after[t]);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
    dg_node *x2, *w2, *y2 = grouped_conv(g = dg_graph_new(), 9, &x2, &w2);
    assert_conv_matches_reference(g, x2, w2, y2, (cpu_conf){8, DG_CPU_CONV_BATCH, DG_CPU_GEMM_OPENBLAS, false}, 1e-5,
                                  "conv2d on 5 of 8 threads");
}

/* A plan run from inside another parallel region: the batch's regions get
 * one thread instead of 3, which must then do every image, and the
 * weight's gradient must add no partials (the first, plain run left
 * threads 1 and 2's in the scratch) */
Test(conv_cpu, batch_in_a_team_smaller_than_asked_matches_the_reference, .timeout = 300) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 9, &x, &w);
    assert_conv_matches_reference(g, x, w, y, (cpu_conf){3, DG_CPU_CONV_BATCH, DG_CPU_GEMM_OPENBLAS, true}, 1e-5,
                                  "the batch on a team of one thread");
}

/* When the batch runs image by image: the rule of dg__cpu_conv_slots */
Test(conv_cpu, batch_slots_follow_threads_images_and_scratch) {
    dg_graph *g = dg_graph_new();
    dg_node *x, *w, *y = grouped_conv(g, 9, &x, &w); /* 5 images */
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_node *dy = dg_input(g, "dy", y->shape), *wrt[1] = {w}, *dwn;
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_mul(g, y, dy), DG_ALL_AXES, false), wrt, 1, &dwn));
    cr_assert_eq(dwn->op, DG_OP_CONV2D_BACKWARD_WEIGHT);
    dg_conv_dims f = dg_conv_dims_of(y), dw = dg_conv_dims_of(dwn);
    /* BATCH: a slot per thread, at most one per image */
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_BATCH, 4, DG_OP_CONV2D), 4);
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_BATCH, 8, DG_OP_CONV2D), 5);
    /* DEFAULT, forward and dx: with half the threads or more busy */
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D), 5);
    /* twice the threads or more: each image cut in threads/5 parts. The
     * forward's 9 output rows in 2 (at most 5 rows, slots of 144 x 45
     * floats): 9 of them in the scratch of 5 images of 144 x 81; in 4 (3
     * rows, 144 x 27): 15 of 20 units. dx's 16 channels (2 groups: uncut) */
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_DEFAULT, 10, DG_OP_CONV2D), 9);
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_BATCH, 20, DG_OP_CONV2D), 15);
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_BATCH, 10, DG_OP_CONV2D_BACKWARD_DATA), 5);
    dg_conv_dims ungrouped = f; /* dx's 16 channels in 2 parts of 8: slots of 72 x 81, 10 units */
    ungrouped.groups = 1;
    cr_assert_eq(dg__cpu_conv_slots(&ungrouped, true, DG_CPU_CONV_BATCH, 10, DG_OP_CONV2D_BACKWARD_DATA), 10);
    ungrouped.c = 1; /* never less than a channel a unit */
    ungrouped.rows = 9;
    cr_assert_eq(dg__cpu_conv_slots(&ungrouped, true, DG_CPU_CONV_BATCH, 10, DG_OP_CONV2D_BACKWARD_DATA), 5);
    /* never: the passes asked for, one thread, an sgemm that cannot run in a parallel region */
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_PASSES, 4, DG_OP_CONV2D), 0);
    cr_assert_eq(dg__cpu_conv_slots(&f, true, DG_CPU_CONV_BATCH, 1, DG_OP_CONV2D), 0);
    cr_assert_eq(dg__cpu_conv_slots(&f, false, DG_CPU_CONV_BATCH, 4, DG_OP_CONV2D), 0);
    /* the weight's gradient: slots of columns and a partial dw, 144*81 +
     * 4*72 floats each, in a scratch of `chunk` images of (144 + 4)*81 */
    cr_assert_eq(dw.chunk, 5);
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_BATCH, 8, DG_OP_CONV2D_BACKWARD_WEIGHT), 5);
    /* DEFAULT: an image for every thread, and the partial (4*72 floats)
     * no larger than an image's columns (144*81) */
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_WEIGHT), 5);
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_DEFAULT, 6, DG_OP_CONV2D_BACKWARD_WEIGHT), 0);
    dg_conv_dims few_positions = dw;
    few_positions.cols = few_positions.oh = few_positions.ow = 1; /* columns 144*1 < the partial 4*72 */
    few_positions.chunk = 500;
    cr_assert_eq(dg__cpu_conv_slots(&few_positions, true, DG_CPU_CONV_BATCH, 5, DG_OP_CONV2D_BACKWARD_WEIGHT), 5);
    cr_assert_eq(dg__cpu_conv_slots(&few_positions, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_WEIGHT), 0);
    few_positions.cols = few_positions.ow = 2;
    few_positions.o = 3; /* 3*72 floats <= 144*2: no larger than the columns */
    cr_assert_eq(dg__cpu_conv_slots(&few_positions, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_WEIGHT), 5);
    dw.chunk = 4; /* room for 4 slots (4*11952 of 47952 floats), not 5 */
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_BATCH, 8, DG_OP_CONV2D_BACKWARD_WEIGHT), 4);
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_WEIGHT), 0);
    dw.chunk = 1; /* room for one slot: the passes */
    cr_assert_eq(dg__cpu_conv_slots(&dw, true, DG_CPU_CONV_BATCH, 8, DG_OP_CONV2D_BACKWARD_WEIGHT), 0);
    /* DEFAULT, forward and dx of images under 32 columns: the passes, side
     * by side, where the forward can be (rows >= o) and, for dx, dx too
     * (dy^T fits in dx, o*cols <= c*h*w) */
    dg_conv_dims small = f; /* 144 rows, 4 outputs, 16 channels */
    small.h = small.w = small.oh = small.ow = 4;
    small.cols = 16;
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D), 0);
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_DATA), 0);
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_BATCH, 5, DG_OP_CONV2D), 5, "asked for: the batch");
    small.o = 145; /* more outputs than rows: the forward cannot be side by side, nor dx by default */
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D), 5);
    small.c = 145; /* dy^T fits in dx: still the batch */
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_DATA), 5);
    small.c = 16;
    small.o = 17; /* dy^T (17*16 floats) larger than dx (16*16): dx cannot either */
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D_BACKWARD_DATA), 5);
    small.o = 4;
    small.oh = small.ow = 6;
    small.cols = 36; /* 6x6, more than 32 columns: the batch */
    cr_assert_eq(dg__cpu_conv_slots(&small, true, DG_CPU_CONV_DEFAULT, 5, DG_OP_CONV2D), 5);
    dg_graph_free(g);
}

/* dg_node_conv2d_opts: what a convolution and its two gradients were built
 * with (the bench and the check kit read the geometry through it); zeros
 * for any other node and NULL */
Test(conv_builders, options_are_read_back_from_every_convolution_node) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", S(2, 4, 9, 7), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *w = dg_param(g, "w", S(6, 2, 3, 2), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_conv2d_opts o = {.stride = {2, 1}, .pad = {1, 0}, .dilation = {1, 2}, .groups = 2};
    dg_node *y = dg_conv2d(g, x, w, NULL, o);
    dg_node *loss = dg_sum(g, dg_mul(g, y, y), DG_ALL_AXES, false);
    dg_node *grads[2];
    ASSERT_OK(dg_grad(g, loss, (dg_node *[]){x, w}, 2, grads));
    const dg_node *conv_nodes[3] = {y, grads[0], grads[1]};
    for (int i = 0; i < 3; i++) {
        dg_conv2d_opts got = dg_node_conv2d_opts(conv_nodes[i]);
        cr_assert(got.stride[0] == 2 && got.stride[1] == 1 && got.pad[0] == 1 && got.pad[1] == 0 &&
                      got.dilation[0] == 1 && got.dilation[1] == 2 && got.groups == 2,
                  "%s: stride %d,%d pad %d,%d dilation %d,%d groups %d", dg_op_name(conv_nodes[i]->op), got.stride[0],
                  got.stride[1], got.pad[0], got.pad[1], got.dilation[0], got.dilation[1], got.groups);
    }
    dg_conv2d_opts none = dg_node_conv2d_opts(loss), null = dg_node_conv2d_opts(NULL);
    cr_assert(none.groups == 0 && none.stride[0] == 0 && null.groups == 0 && null.dilation[1] == 0);
    dg_graph_free(g);
}
