/* op_cases.c: the op-case rows and how the ops sweep scales them. */
#include "op_cases.h"

#include <math.h>
#include <stddef.h>

#define S DG_SHAPE
#define TOL 2e-6

/* an MLP loss: softmax_ce(relu(x W1 + b1) W2 + b2, labels) */
static dg_node *build_mlp(dg_graph *g, dg_node *const *in, const op_case *c) {
    (void)c;
    /* in: x [5,6], W1 [6,4] ... packed as three inputs: x, W [6,4], labels */
    dg_node *h = dg_relu(g, dg_matmul(g, in[0], in[1], false, false));
    dg_node *logits = dg_matmul(g, h, dg_transpose(g, in[1]), false, false); /* [5,6] */
    return dg_softmax_cross_entropy(g, logits, in[2]);
}

/* a broadcasted expression: (x * b - exp(c)) / (c*c + 1) */
static dg_node *build_bcast_expr(dg_graph *g, dg_node *const *in, const op_case *c) {
    (void)c;
    dg_node *num = dg_sub(g, dg_mul(g, in[0], in[1]), dg_exp(g, in[2]));
    return dg_div(g, num, dg_add_scalar(g, dg_mul(g, in[2], in[2]), 1.0f));
}

/* one node used by several consumers: y = tanh(x); y * y + sigmoid(y) + y */
static dg_node *build_used_twice(dg_graph *g, dg_node *const *in, const op_case *c) {
    (void)c;
    dg_node *y = dg_tanh(g, in[0]);
    return dg_add(g, dg_add(g, dg_mul(g, y, y), dg_sigmoid(g, y)), y);
}

/* attention-like: softmax(q k^T / sqrt(d)) v, batched */
static dg_node *build_attention(dg_graph *g, dg_node *const *in, const op_case *c) {
    (void)c;
    dg_node *s = dg_mul_scalar(g, dg_matmul(g, in[0], in[1], false, true), 0.5f);
    return dg_matmul(g, dg_softmax(g, s), in[2], false, false);
}

/* a small convolutional classifier: softmax_ce(global_avg_pool(relu(
 * max_pool(conv(x, w, padding 1), 2x2))), labels): x [N,C,H,W] with W the
 * number of classes, w [W,C,3,3] */
static dg_node *build_small_cnn(dg_graph *g, dg_node *const *in, const op_case *c) {
    (void)c;
    dg_node *y = dg_conv2d(g, in[0], in[1], NULL, (dg_conv2d_opts){.pad = {1, 1}});
    y = dg_relu(g, dg_max_pool2d(g, y, (dg_pool2d_opts){.kernel = {2, 2}}));
    return dg_softmax_cross_entropy(g, dg_global_avg_pool2d(g, y), in[2]);
}

const op_case dg_op_cases[] = {
    {"add",            DG_OP_ADD, 2, {S(3, 5), S(3, 5)}, .tol = TOL,
                       .sweep = {"add", OP_SCALE_FLAT, DG_OP_LEAF, true, true}},
    {"add_bcast_row",  DG_OP_ADD, 2, {S(4, 3, 5), S(5)}, .tol = TOL,
                       .sweep = {"add_bcast", OP_SCALE_ROWS, DG_OP_SUM, false, false}},
    {"add_bcast_both", DG_OP_ADD, 2, {S(2, 3, 1), S(1, 5)}, .tol = TOL},
    {"sub_bcast_col",  DG_OP_SUB, 2, {S(3, 5), S(3, 1)}, .tol = TOL},
    {"add_bcast_wide", DG_OP_ADD, 2, {S(3, 130), S(130)}, .tol = TOL},   /* rows >= 128: row kernels */
    {"mul_bcast_wide", DG_OP_MUL, 2, {S(2, 1, 129), S(3, 1)}, .tol = TOL},
    {"mul",            DG_OP_MUL, 2, {S(7, 3), S(7, 3)}, .tol = TOL,
                       .sweep = {"mul", OP_SCALE_FLAT, DG_OP_MUL, false, false}},
    {"mul_bcast_4d",   DG_OP_MUL, 2, {S(2, 1, 3, 5), S(3, 3, 1)}, .tol = TOL},
    {"div",            DG_OP_DIV, 2, {S(3, 5), S(3, 5)}, {DOM_ANY, DOM_POS}, .tol = TOL},
    {"div_bcast",      DG_OP_DIV, 2, {S(3, 5), S(5)}, {DOM_ANY, DOM_POS}, .tol = TOL},
    {"neg",            DG_OP_NEG, 1, {S(7)}, .tol = TOL},
    {"add_scalar",     DG_OP_ADD_SCALAR, 1, {S(3, 5)}, .scalar = 1.5f, .tol = TOL},
    {"mul_scalar",     DG_OP_MUL_SCALAR, 1, {S(3, 5)}, .scalar = -0.75f, .tol = TOL},
    {"pow_scalar",     DG_OP_POW_SCALAR, 1, {S(3, 5)}, {DOM_POS}, .scalar = 1.7f, .tol = TOL},
    {"pow_scalar_int", DG_OP_POW_SCALAR, 1, {S(2, 7)}, {DOM_POS}, .scalar = 3.0f, .tol = TOL},
    {"log",            DG_OP_LOG, 1, {S(3, 5)}, {DOM_POS}, .tol = TOL},
    {"sqrt",           DG_OP_SQRT, 1, {S(3, 5)}, {DOM_POS}, .tol = TOL},
    {"abs",            DG_OP_ABS, 1, {S(3, 5)}, {DOM_AWAY0}, .tol = TOL},
    {"relu",           DG_OP_RELU, 1, {S(3, 7)}, {DOM_AWAY0}, .tol = TOL,
                       .sweep = {"relu", OP_SCALE_FLAT, DG_OP_RELU_BACKWARD, true, false}},
    {"leaky_relu",     DG_OP_LEAKY_RELU, 1, {S(3, 7)}, {DOM_AWAY0}, .scalar = 0.1f, .tol = TOL},
    {"sigmoid",        DG_OP_SIGMOID, 1, {S(3, 5)}, .tol = TOL},
    {"tanh",           DG_OP_TANH, 1, {S(3, 5)}, .tol = TOL},
    {"gelu",           DG_OP_GELU, 1, {S(3, 5)}, .tol = TOL,
                       .sweep = {"gelu", OP_SCALE_FLAT, DG_OP_GELU_BACKWARD, false, false}},
    {"erf",            DG_OP_ERF, 1, {S(3, 5)}, .tol = TOL},
    /* a backend in no group: one replica (the group's are test_data_parallel's) */
    {"all_reduce",     DG_OP_ALL_REDUCE, 1, {S(3, 5)}, .tol = TOL},
    {"exp",            DG_OP_EXP, 1, {S(3, 5)}, .tol = TOL,
                       .sweep = {"exp", OP_SCALE_FLAT, DG_OP_MUL, false, false}},
    {"matmul",         DG_OP_MATMUL, 2, {S(5, 7), S(7, 3)}, .tol = TOL},
    {"matmul_ta",      DG_OP_MATMUL, 2, {S(7, 5), S(7, 3)}, .ta = true, .tol = TOL},
    {"matmul_tb",      DG_OP_MATMUL, 2, {S(5, 7), S(3, 7)}, .tb = true, .tol = TOL},
    {"matmul_ta_tb",   DG_OP_MATMUL, 2, {S(7, 5), S(3, 7)}, .ta = true, .tb = true, .tol = TOL},
    {"matmul_odd",     DG_OP_MATMUL, 2, {S(17, 33), S(33, 9)}, .tol = TOL},
    {"bmm",            DG_OP_MATMUL, 2, {S(2, 3, 4), S(2, 4, 5)}, .tol = TOL},
    {"bmm_tb",         DG_OP_MATMUL, 2, {S(3, 3, 4), S(3, 5, 4)}, .tb = true, .tol = TOL},
    {"bmm_ta",         DG_OP_MATMUL, 2, {S(2, 4, 3), S(2, 4, 5)}, .ta = true, .tol = TOL},
    {"matmul_3d_2d",   DG_OP_MATMUL, 2, {S(2, 3, 4), S(4, 5)}, .tol = TOL},
    {"permute_3d",     DG_OP_PERMUTE, 1, {S(2, 3, 4)}, .perm = {2, 0, 1}, .tol = TOL},
    {"permute_4d",     DG_OP_PERMUTE, 1, {S(2, 3, 1, 5)}, .perm = {3, 1, 0, 2}, .tol = TOL},
    {"transpose_batched", DG_OP_PERMUTE, 1, {S(2, 33, 35)}, .perm = {0, 2, 1}, .tol = TOL},
    {"permute_wide",   DG_OP_PERMUTE, 1, {S(3, 2, 130)}, .perm = {1, 0, 2}, .tol = TOL},
    /* the heads' split: rows of 8 floats, 32 bytes (the GPU's 16-byte units) */
    {"permute_heads",  DG_OP_PERMUTE, 1, {S(2, 3, 5, 8)}, .perm = {0, 2, 1, 3}, .tol = TOL},
    {"reshape",        DG_OP_RESHAPE, 1, {S(3, 4)}, .target = S(2, 6), .tol = TOL},
    {"sum_axis1",      DG_OP_SUM, 1, {S(3, 4, 5)}, .axes = 2, .tol = TOL},
    {"sum_all",        DG_OP_SUM, 1, {S(3, 4, 5)}, .axes = DG_ALL_AXES, .tol = TOL},
    {"sum_axes02_keep",DG_OP_SUM, 1, {S(3, 4, 5)}, .axes = 5, .keepdims = true, .tol = TOL},
    {"sum_last",       DG_OP_SUM, 1, {S(3, 4, 5)}, .axes = 4, .keepdims = true, .tol = TOL},
    {"sum_each_row",   DG_OP_SUM, 1, {S(6, 5)}, .axes = 2, .tol = TOL, /* one sum per row */
                       .sweep = {"sum_rows", OP_SCALE_ROWS, DG_OP_BROADCAST_TO, true, true}},
    {"sum_rows",       DG_OP_SUM, 1, {S(6, 5)}, .axes = 1, .tol = TOL, /* over the rows: column sums */
                       .sweep = {"sum_cols", OP_SCALE_ROWS, DG_OP_BROADCAST_TO, false, false}},
    {"sum_rows_w12",   DG_OP_SUM, 1, {S(70, 12)}, .axes = 1, .tol = TOL}, /* column sums through partials */
    {"mean_axis0",     DG_OP_MEAN, 1, {S(6, 5)}, .axes = 1, .tol = TOL},
    {"mean_all",       DG_OP_MEAN, 1, {S(2, 3, 5)}, .axes = DG_ALL_AXES, .keepdims = true, .tol = TOL},
    {"broadcast_to",   DG_OP_BROADCAST_TO, 1, {S(3, 1)}, .target = S(2, 3, 5), .tol = TOL},
    {"broadcast_to_wide", DG_OP_BROADCAST_TO, 1, {S(3, 1)}, .target = S(3, 131), .tol = TOL},
    {"softmax",        DG_OP_SOFTMAX, 1, {S(4, 7)}, .tol = TOL,
                       .sweep = {"softmax", OP_SCALE_ROWS, DG_OP_SOFTMAX_BACKWARD, true, true}},
    {"log_softmax",    DG_OP_LOG_SOFTMAX, 1, {S(2, 3, 6)}, .tol = TOL},
    {"softmax_ce",     DG_OP_SOFTMAX_CE, 2, {S(5, 7), S(5)}, {DOM_ANY, DOM_LABELS}, .tol = TOL,
                       .sweep = {"softmax_ce", OP_SCALE_ROWS, DG_OP_SOFTMAX_CE_BACKWARD, false, true}},
    {"transpose",      DG_OP_PERMUTE, 1, {S(3, 5)}, .perm = {1, 0}, .tol = TOL,
                       .sweep = {"transpose", OP_SCALE_SQUARE, DG_OP_PERMUTE, false, false}},
    {"softmax_ce_3d",  DG_OP_SOFTMAX_CE, 2, {S(2, 3, 4), S(2, 3)}, {DOM_ANY, DOM_LABELS}, .tol = TOL},
    {"mlp_loss",       DG_OP_SOFTMAX_CE, 3, {S(5, 6), S(6, 4), S(5)}, {DOM_ANY, DOM_ANY, DOM_LABELS},
                       .build = build_mlp, .tol = TOL},
    {"bcast_expr",     DG_OP_DIV, 3, {S(2, 3, 5), S(5), S(3, 1)}, .build = build_bcast_expr, .tol = TOL},
    {"used_twice",     DG_OP_TANH, 1, {S(4, 5)}, .build = build_used_twice, .tol = TOL},
    {"attention",      DG_OP_SOFTMAX, 3, {S(2, 3, 4), S(2, 5, 4), S(2, 5, 3)}, .build = build_attention, .tol = TOL},
    /* convolutions: x, w[, bias]; the first row of an op is its plainest
     * (bench --list-ops asks the backends about its node) */
    {"conv2d",         DG_OP_CONV2D, 2, {S(2, 3, 7, 7), S(4, 3, 3, 3)}, .tol = TOL},
    {"conv2d_bias_pad", DG_OP_CONV2D, 3, {S(2, 3, 6, 5), S(5, 3, 3, 3), S(5)}, .conv = {.pad = {1, 1}}, .tol = TOL},
    /* stride 2; the last column is read by no window (dx 0 there) */
    {"conv2d_stride2_untiled", DG_OP_CONV2D, 2, {S(2, 3, 9, 10), S(4, 3, 3, 3)},
                       .conv = {.stride = {2, 2}, .pad = {1, 0}}, .tol = TOL},
    {"conv2d_dilation2", DG_OP_CONV2D, 2, {S(1, 2, 9, 9), S(3, 2, 3, 3)}, .conv = {.pad = {2, 2}, .dilation = {2, 2}},
                       .tol = TOL},
    {"conv2d_groups2", DG_OP_CONV2D, 2, {S(2, 4, 6, 6), S(6, 2, 3, 3)}, .conv = {.pad = {1, 1}, .groups = 2},
                       .tol = TOL},
    {"conv2d_depthwise", DG_OP_CONV2D, 2, {S(2, 3, 7, 7), S(3, 1, 3, 3)},
                       .conv = {.stride = {2, 2}, .pad = {1, 1}, .groups = 3}, .tol = TOL},
    {"conv2d_1x1_direct", DG_OP_CONV2D, 3, {S(2, 5, 4, 3), S(3, 5, 1, 1), S(3)}, .tol = TOL},
    {"conv2d_1x1_stride2", DG_OP_CONV2D, 2, {S(2, 4, 7, 7), S(3, 4, 1, 1)}, .conv = {.stride = {2, 2}}, .tol = TOL},
    /* every attribute differs between height and width; neither axis tiles.
     * A batch over more than one im2col chunk needs some 50 MB of columns
     * per image, beyond finite differences: tests/test_conv.c runs one. */
    {"conv2d_rect",    DG_OP_CONV2D, 2, {S(1, 3, 11, 10), S(2, 3, 2, 4)},
                       .conv = {.stride = {3, 2}, .pad = {1, 0}, .dilation = {1, 2}}, .tol = TOL},
    /* pools: distinct values for max, so no window holds a tie */
    {"max_pool2d",     DG_OP_MAX_POOL2D, 1, {S(2, 3, 6, 6)}, {DOM_DISTINCT}, .pool = {.kernel = {2, 2}}, .tol = TOL},
    {"max_pool2d_pad_stride", DG_OP_MAX_POOL2D, 1, {S(2, 2, 7, 6)}, {DOM_DISTINCT},
                       .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}, .tol = TOL},
    {"max_pool2d_rect", DG_OP_MAX_POOL2D, 1, {S(1, 3, 5, 7)}, {DOM_DISTINCT},
                       .pool = {.kernel = {3, 2}, .stride = {1, 2}, .pad = {1, 1}}, .tol = TOL},
    {"avg_pool2d",     DG_OP_AVG_POOL2D, 1, {S(2, 3, 6, 6)}, .pool = {.kernel = {2, 2}}, .tol = TOL},
    {"avg_pool2d_pad_stride", DG_OP_AVG_POOL2D, 1, {S(2, 2, 7, 6)},
                       .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}, .tol = TOL},
    {"avg_pool2d_rect", DG_OP_AVG_POOL2D, 1, {S(1, 3, 5, 8)},
                       .pool = {.kernel = {2, 3}, .stride = {1, 2}, .pad = {1, 1}}, .tol = TOL},
    /* batch norm: x, scale, shift; eps in .scalar */
    {"batch_norm",     DG_OP_BATCH_NORM, 3, {S(4, 3, 3, 3), S(3), S(3)}, .scalar = 1e-5f, .tol = TOL},
    {"batch_norm_2d",  DG_OP_BATCH_NORM, 3, {S(8, 5), S(5), S(5)}, .scalar = 1e-5f, .tol = TOL},
    {"batch_norm_one_image", DG_OP_BATCH_NORM, 3, {S(1, 2, 4, 5), S(2), S(2)}, .scalar = 1e-3f, .tol = TOL},
    /* planes of 143 and 512 values: the GPU's kernels by planes (gpu_norm.cu),
     * scalar and 4 at a time, each channel's images in 3 slices */
    {"batch_norm_planes", DG_OP_BATCH_NORM, 3, {S(3, 2, 11, 13), S(2), S(2)}, .scalar = 1e-5f, .tol = TOL},
    {"batch_norm_planes4", DG_OP_BATCH_NORM, 3, {S(3, 2, 16, 32), S(2), S(2)}, .scalar = 1e-5f, .tol = TOL},
    /* attention and language models */
    {"softmax_scaled", DG_OP_SOFTMAX, 1, {S(3, 9)}, .scalar = 0.35f, .tol = TOL},
    {"softmax_causal", DG_OP_SOFTMAX, 1, {S(2, 5, 7)}, .scalar = 0.5f, .causal = true, .tol = TOL},
    {"softmax_causal_wide", DG_OP_SOFTMAX, 1, {S(2, 2, 3, 6)}, .scalar = 1.5f, .causal = true, .tol = TOL},
    {"layer_norm",     DG_OP_LAYER_NORM, 3, {S(2, 5, 8), S(8), S(8)}, .scalar = 1e-5f, .tol = TOL},
    {"layer_norm_one_row", DG_OP_LAYER_NORM, 3, {S(1, 13), S(13), S(13)}, .scalar = 1e-3f, .tol = TOL},
    {"embedding",      DG_OP_EMBEDDING, 2, {S(7, 5), S(3, 4)}, {DOM_ANY, DOM_LABELS}, .tol = TOL},
    {"embedding_repeats", DG_OP_EMBEDDING, 2, {S(3, 6), S(2, 5, 2)}, {DOM_ANY, DOM_LABELS}, .tol = TOL},
    {"matmul_4d",      DG_OP_MATMUL, 2, {S(2, 3, 4, 5), S(2, 3, 5, 6)}, .tol = TOL},
    {"matmul_4d_tt",   DG_OP_MATMUL, 2, {S(2, 2, 5, 4), S(2, 2, 3, 5)}, .ta = true, .tb = true, .tol = TOL},
    {"attention",      DG_OP_ATTENTION, 3, {S(2, 2, 7, 5), S(2, 2, 7, 5), S(2, 2, 7, 5)}, .scalar = 0.45f,
                       .tol = TOL},
    {"attention_causal", DG_OP_ATTENTION, 3, {S(1, 3, 9, 4), S(1, 3, 9, 4), S(1, 3, 9, 4)}, .scalar = 0.5f,
                       .causal = true, .tol = TOL},
    /* two positions, causal: query 0 sees only key 0 (its dq is exactly 0), query 1 both */
    {"attention_two_rows", DG_OP_ATTENTION, 3, {S(2, 1, 2, 3), S(2, 1, 2, 3), S(2, 1, 2, 3)}, .scalar = 1.0f,
                       .causal = true, .tol = TOL},
    /* more than one 64-key tile (the CPU's): the running max grows in later tiles for some rows */
    {"attention_long", DG_OP_ATTENTION, 3, {S(1, 1, 130, 8), S(1, 1, 130, 8), S(1, 1, 130, 8)}, .scalar = 0.35f,
                       .tol = TOL},
    {"attention_long_causal", DG_OP_ATTENTION, 3, {S(1, 2, 70, 8), S(1, 2, 70, 8), S(1, 2, 70, 8)},
                       .scalar = 0.35f, .causal = true, .tol = TOL},
    {"small_cnn",      DG_OP_CONV2D, 3, {S(2, 3, 6, 4), S(4, 3, 3, 3), S(2)}, {DOM_ANY, DOM_ANY, DOM_LABELS},
                       .build = build_small_cnn, .tol = TOL},
};
const int dg_n_op_cases = (int)(sizeof dg_op_cases / sizeof dg_op_cases[0]);

/* Tolerances of the range table. The inputs are exact floats, so every
 * error comes from the kernels' own float32 arithmetic; an ulp is at most
 * 2^-23 of a value.
 *   ULPS: an elementwise output or gradient is a few roundings from its
 *   exact value: one library function (at most 1 ulp in glibc; 2 ulp for
 *   CUDA's expf, logf, tanhf, 4 for its powf) and the backward's one or
 *   two products; 16 ulp leaves room.
 *   LOGITS(L): float32 softmax over logits of magnitude L is backward
 *   stable: it is exact for logits moved by L u (u = 2^-24: the log-sum-exp
 *   is rounded to a float of magnitude L, and x - lse is rounded again),
 *   which moves exp(x - lse) by a relative 2 L u; the GPU's __expf adds
 *   about 1.16 |d| + 2 ulp for an argument d, |d| <= 2 L. So 8 L u + 16 ulp. */
#define ULPS (16.0 / 8388608.0)
#define LOGITS(L) (8.0 * (L) / 16777216.0 + ULPS)
#define REL 0.0  /* floor: every output held to its own relative error  */
#define SCALE 1.0 /* floor: errors measured against the largest output  */
#define R(lo, hi) {(lo), (hi)}

const op_case dg_range_cases[] = {
    /* softmax family: one logit at +L, one at -L, one at 0, the rest spread
     * over [-L, L]; or every logit near +-1000 (only the max subtraction
     * keeps exp finite). log-softmax and cross-entropy have absolute errors
     * of L u (x - lse): measured against the largest output. */
    {"softmax_logits_100", DG_OP_SOFTMAX, 1, {S(6, 37)}, {DOM_EDGE_LOGITS}, .range = {R(0, 100)},
     .tol = LOGITS(100), .floor = 1e-30, .grad_vs_dy = true},
    {"softmax_logits_1000", DG_OP_SOFTMAX, 1, {S(5, 33)}, {DOM_EDGE_LOGITS}, .range = {R(0, 1000)},
     .tol = LOGITS(1000), .floor = 1e-30, .grad_vs_dy = true},
    {"softmax_logits_near_1000", DG_OP_SOFTMAX, 1, {S(4, 40)}, {DOM_RANGE}, .range = {R(998, 1002)},
     .tol = LOGITS(1000), .floor = 1e-30, .grad_vs_dy = true},
    {"log_softmax_logits_1000", DG_OP_LOG_SOFTMAX, 1, {S(5, 33)}, {DOM_EDGE_LOGITS}, .range = {R(0, 1000)},
     .tol = LOGITS(1000), .floor = SCALE, .grad_vs_dy = true},
    {"log_softmax_logits_near_-1000", DG_OP_LOG_SOFTMAX, 1, {S(3, 2, 17)}, {DOM_RANGE}, .range = {R(-1002, -998)},
     .tol = LOGITS(1000), .floor = SCALE, .grad_vs_dy = true},
    {"softmax_ce_logits_100", DG_OP_SOFTMAX_CE, 2, {S(7, 13), S(7)}, {DOM_EDGE_LOGITS, DOM_LABELS},
     .range = {R(0, 100)}, .tol = LOGITS(100), .floor = SCALE, .grad_vs_dy = true},
    {"softmax_ce_logits_1000", DG_OP_SOFTMAX_CE, 2, {S(9, 11), S(9)}, {DOM_EDGE_LOGITS, DOM_LABELS},
     .range = {R(0, 1000)}, .tol = LOGITS(1000), .floor = SCALE, .grad_vs_dy = true},
    {"softmax_ce_logits_near_1000", DG_OP_SOFTMAX_CE, 2, {S(6, 10), S(6)}, {DOM_RANGE, DOM_LABELS},
     .range = {R(998, 1002)}, .tol = LOGITS(1000), .floor = SCALE, .grad_vs_dy = true},
    /* exp up to 1.6e38 (its gradient w exp(x), |w| <= 2, stays below
     * FLT_MAX) and down into the subnormals and to 0, never NaN: subnormal
     * outputs have absolute errors of 2^-150, measured against FLT_MIN-sized
     * values (floor 1e-3 of the largest, 1.8e-35) */
    {"exp_near_overflow", DG_OP_EXP, 1, {S(4, 9)}, {DOM_RANGE}, .range = {R(80, 87.9)}, .tol = ULPS, .floor = REL},
    {"exp_underflow", DG_OP_EXP, 1, {S(4, 9)}, {DOM_RANGE}, .range = {R(-110, -80)}, .tol = ULPS, .floor = 1e-3},
    /* log, sqrt and x^2 over the normal floats; log(0): test_range */
    {"log_tiny", DG_OP_LOG, 1, {S(3, 11)}, {DOM_DECADES}, .range = {R(-37.5, -30)}, .tol = ULPS, .floor = REL},
    {"log_huge", DG_OP_LOG, 1, {S(3, 11)}, {DOM_DECADES}, .range = {R(30, 38.5)}, .tol = ULPS, .floor = REL},
    {"sqrt_decades", DG_OP_SQRT, 1, {S(5, 9)}, {DOM_DECADES}, .range = {R(-37, 38)}, .tol = ULPS, .floor = REL},
    {"pow2_decades", DG_OP_POW_SCALAR, 1, {S(5, 9)}, {DOM_DECADES}, .range = {R(-18, 18)}, .scalar = 2.0f,
     .tol = ULPS, .floor = REL},
    /* saturating activations: sigmoid below -88 underflows to 0 (exp(88)
     * overflows first: an absolute error under FLT_MIN); tanh and gelu
     * saturate to their limits; 1 + tanh cancels in gelu, whose errors are
     * u times the largest output */
    {"sigmoid_saturated", DG_OP_SIGMOID, 1, {S(4, 11)}, {DOM_RANGE}, .range = {R(-100, 100)}, .tol = ULPS,
     .floor = 1e-30, .grad_vs_dy = true},
    {"tanh_saturated", DG_OP_TANH, 1, {S(4, 11)}, {DOM_RANGE}, .range = {R(-100, 100)}, .tol = ULPS,
     .floor = 1e-30, .grad_vs_dy = true},
    {"gelu_large", DG_OP_GELU, 1, {S(4, 11)}, {DOM_RANGE}, .range = {R(-100, 100)}, .tol = ULPS, .floor = SCALE,
     .grad_vs_dy = true},
    {"gelu_huge", DG_OP_GELU, 1, {S(4, 11)}, {DOM_RANGE}, .range = {R(-1e4, 1e4)}, .tol = ULPS, .floor = SCALE,
     .grad_vs_dy = true},
    {"gelu_beyond_1e19", DG_OP_GELU, 1, {S(4, 11)}, {DOM_RANGE}, .range = {R(-1e20, 1e20)}, .tol = ULPS, .floor = SCALE,
     .grad_vs_dy = true},
    /* products, quotients and sums of magnitudes far from 1: one rounding */
    {"mul_huge_by_tiny", DG_OP_MUL, 2, {S(3, 7), S(3, 7)}, {DOM_DECADES_SIGNED, DOM_DECADES_SIGNED},
     .range = {R(18, 20), R(-20, -18)}, .tol = ULPS, .floor = REL},
    {"div_tiny_by_huge", DG_OP_DIV, 2, {S(3, 7), S(7)}, {DOM_DECADES_SIGNED, DOM_DECADES},
     .range = {R(-12, -10), R(10, 12)}, .tol = ULPS, .floor = REL},
    {"add_huge_cancelling", DG_OP_ADD, 2, {S(5, 7), S(5, 7)}, {DOM_DECADES_SIGNED, DOM_DECADES_SIGNED},
     .range = {R(30, 37), R(30, 37)}, .tol = ULPS, .floor = REL},
    {"relu_decades", DG_OP_RELU, 1, {S(5, 9)}, {DOM_DECADES_SIGNED}, .range = {R(-37, 38)}, .tol = ULPS,
     .floor = REL},
    {"leaky_relu_tiny", DG_OP_LEAKY_RELU, 1, {S(5, 9)}, {DOM_DECADES_SIGNED}, .range = {R(-37, -30)},
     .scalar = 0.01f, .tol = ULPS, .floor = 1e-6},
    {"abs_huge", DG_OP_ABS, 1, {S(5, 9)}, {DOM_DECADES_SIGNED}, .range = {R(30, 38)}, .tol = ULPS, .floor = REL},
};
const int dg_n_range_cases = (int)(sizeof dg_range_cases / sizeof dg_range_cases[0]);

dg_node *op_case_build(dg_graph *g, dg_node *const *in, const op_case *c) {
    if (c->build) return c->build(g, in, c);
    dg_node *a = in[0], *b = c->n_in > 1 ? in[1] : NULL;
    switch (c->op) {
    case DG_OP_ADD:          return dg_add(g, a, b);
    case DG_OP_SUB:          return dg_sub(g, a, b);
    case DG_OP_MUL:          return dg_mul(g, a, b);
    case DG_OP_DIV:          return dg_div(g, a, b);
    case DG_OP_NEG:          return dg_neg(g, a);
    case DG_OP_ADD_SCALAR:   return dg_add_scalar(g, a, c->scalar);
    case DG_OP_MUL_SCALAR:   return dg_mul_scalar(g, a, c->scalar);
    case DG_OP_POW_SCALAR:   return dg_pow_scalar(g, a, c->scalar);
    case DG_OP_EXP:          return dg_exp(g, a);
    case DG_OP_LOG:          return dg_log(g, a);
    case DG_OP_SQRT:         return dg_sqrt(g, a);
    case DG_OP_ABS:          return dg_abs(g, a);
    case DG_OP_RELU:         return dg_relu(g, a);
    case DG_OP_LEAKY_RELU:   return dg_leaky_relu(g, a, c->scalar);
    case DG_OP_SIGMOID:      return dg_sigmoid(g, a);
    case DG_OP_TANH:         return dg_tanh(g, a);
    case DG_OP_GELU:         return dg_gelu(g, a);
    case DG_OP_ERF:          return dg_erf(g, a);
    case DG_OP_ALL_REDUCE:   return dg_all_reduce(g, a);
    case DG_OP_MATMUL:       return dg_matmul(g, dg_cast(g, a, c->dtype), dg_cast(g, b, c->dtype), c->ta, c->tb);
    case DG_OP_CAST:         return dg_cast(g, dg_cast(g, a, c->dtype), DG_F32); /* the rounding, read back */
    case DG_OP_PERMUTE:      return dg_permute(g, a, c->perm);
    case DG_OP_RESHAPE:      return dg_reshape(g, a, c->target);
    case DG_OP_SUM:          return dg_sum(g, a, c->axes, c->keepdims);
    case DG_OP_MEAN:         return dg_mean(g, a, c->axes, c->keepdims);
    case DG_OP_BROADCAST_TO: return dg_broadcast_to(g, a, c->target);
    case DG_OP_SOFTMAX:      return c->scalar ? dg_softmax_ex(g, a, c->scalar, c->causal) : dg_softmax(g, a);
    case DG_OP_LOG_SOFTMAX:  return dg_log_softmax(g, a);
    case DG_OP_SOFTMAX_CE:   return dg_softmax_cross_entropy(g, a, b);
    case DG_OP_CONV2D:       return dg_conv2d(g, a, b, c->n_in > 2 ? in[2] : NULL, c->conv);
    case DG_OP_MAX_POOL2D:   return dg_max_pool2d(g, a, c->pool);
    case DG_OP_AVG_POOL2D:   return dg_avg_pool2d(g, a, c->pool);
    case DG_OP_BATCH_NORM:   return dg_batch_norm(g, a, b, in[2], c->scalar);
    case DG_OP_LAYER_NORM:   return dg_layer_norm(g, a, b, in[2], c->scalar);
    case DG_OP_EMBEDDING:    return dg_embedding(g, a, b);
    case DG_OP_ATTENTION:    return dg_attention(g, a, b, in[2], c->scalar, c->causal);
    /* not forward ops: no builder, so no row (their cases are the
     * gradients of the forward rows) */
    case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM:
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
    case DG_OP_SOFTMAX_CE_BACKWARD: case DG_OP_CONV2D_BACKWARD_DATA: case DG_OP_CONV2D_BACKWARD_WEIGHT:
    case DG_OP_MAX_POOL2D_BACKWARD: case DG_OP_AVG_POOL2D_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD:
    case DG_OP_BATCH_NORM_BACKWARD_SCALE: case DG_OP_BATCH_NORM_RUNNING: case DG_OP_LAYER_NORM_BACKWARD:
    case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD: case DG_OP_ATTENTION_BACKWARD:
    case DG_OP_COUNT:
        break;
    }
    return NULL;
}

bool op_case_shapes_at(const op_case *c, long long N, dg_shape *out) {
    const long long row = OP_SWEEP_ROW;
    if (!c->sweep.name || N < row || N % row) return false;
    dg_shape first = c->shape[0];
    for (int i = 0; i < c->n_in; i++) {
        dg_shape s = c->shape[i];
        bool like_first = dg_shape_eq(s, first);
        switch (c->sweep.scale) {
        case OP_SCALE_NONE: return false;
        case OP_SCALE_FLAT: out[i] = like_first ? DG_SHAPE(N) : s; break;
        case OP_SCALE_ROWS:
            if (i == 0 || like_first) out[i] = DG_SHAPE(N / row, row);
            else if (c->dom[i] == DOM_LABELS) out[i] = DG_SHAPE(N / row);
            else if (s.ndim == 1 && s.d[0] == first.d[first.ndim - 1]) out[i] = DG_SHAPE(row);
            else return false;
            break;
        case OP_SCALE_SQUARE: {
            long long side = llround(sqrt((double)N));
            if (i > 0) return false;
            out[0] = DG_SHAPE(side, N / side);
            break;
        }
        }
    }
    return true;
}
