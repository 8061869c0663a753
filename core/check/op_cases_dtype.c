/* op_cases_dtype.c: the precision table (op_cases.h): casts, the
 * products of bf16 and f16 operands (float32 or bf16/f16 output), and the
 * storage ops (elementwise, sums, softmax, layer norm) and convolutions
 * (forward and both backward ops, through dg_grad) on bf16 and f16, checked on every backend against the float64 reference of the same
 * graph. The reference evaluates every node
 * the backend runs, the gradient's too, and rounds where the graph casts
 * (ref.c: to float32, then the dtype's round-to-nearest-even): the forward
 * operands and the backward's copy of dC in the operands' dtype
 * (autodiff.c).
 *
 * Tolerances (max |err| / max |ref|, the forward and each gradient):
 * - A cast read back: both sides round the same float32 values the same
 *   way: exact, held to 0 (1e-12 for the comparison's arithmetic); a
 *   truncating or misplaced rounding is off by 2^-8 (bf16) or 2^-11 (f16)
 *   relative and fails.
 * - A product, forward and gradients: its operands are the same rounded
 *   values on both sides, and a bf16 x bf16 or f16 x f16 product is exact in
 *   float32 (8 + 8 or 11 + 11 significant bits <= 24): only the float32 sums
 *   differ, as in an f32 product (TOL of op_cases.c). A kernel that skipped
 *   a rounding, rounded the other way or read the wrong operand is off by
 *   2^-9 or more relative and fails. This holds because every cast in these
 *   graphs reads values both sides hold exactly (the float32 inputs, the
 *   loss weights); a cast of a value each side computed (float32 against
 *   float64) may round the two to neighbouring values, a u of the dtype
 *   apart: checks of such graphs allow that.
 * - A storage op: the stored result's one rounding (u, below) on top of
 *   its float32 bound, forward element by element, gradients per row. */
#include "op_cases.h"

#define S(...) DG_SHAPE(__VA_ARGS__)
#define EXACT 1e-12
#define TOL 2e-6 /* float32 sums: op_cases.c's */
/* unit roundoff of the output dtype (2^-p, p the significand's bits with
 * the implicit one: 8 and 11): the one rounding of a stored result is at
 * most u relative to the value stored */
#define U_BF16 0x1p-8
#define U_F16  0x1p-11
/* Storage rows compare their forward element by element (cmp_f32_floor):
 * an output of at least max|ref| / 16 is held to its own relative error,
 * where the fp32 bound TOL (against the largest output) is at most 16 TOL;
 * smaller ones in absolute terms. A store that truncates is off by up to
 * 2u relative, which u + 16 TOL catches; against the largest output alone
 * it could hide below u. */
#define FLOOR (1.0 / 16)
#define FWD_BF16 (16 * TOL + U_BF16)
#define FWD_F16  (16 * TOL + U_F16)
/* The gradient of a 16-bit node is 16-bit (autodiff.c). Where a storage
 * op's backward computes in 16 bits (the elementwise ops that are not
 * exact; the column sums of a broadcast operand that is not a cast, whose
 * are summed into float32) its result is rounded once to
 * the dtype before the cast's backward widens it, where the float64
 * reference, evaluating the same backward nodes, rounds at casts alone
 * (ref.c): u more, relative to the element and so to the largest one,
 * than the row's bound for float32 gradients (GRAD_*). dy's 16-bit copy
 * is a cast, rounded alike on both sides. The rows without GRAD_* keep
 * float32's bound: their backward is exact in 16 bits (neg, relu, abs,
 * add, sub, add_scalar, permutes: dy copied or negated) or writes float32
 * (the sums' broadcast, softmax, layer norm: kernels that take float32,
 * straight into the input cast's float32 gradient), as a product's dA and
 * dB are (the gradient of a cast, and of a reshape of one, is float32).
 * Measured at seed 20261121 on the CPU: 0.05-0.93 u above the old bounds,
 * pow's two rounded forward factors and its product 2.03 u against 3 u. */
#define GRAD_BF16(bound) ((bound) + U_BF16)
#define GRAD_F16(bound)  ((bound) + U_F16)

/* The op on its float inputs cast to c->dtype (labels as they are), the
 * result cast back to float32 for the comparison: the kernels read and
 * write c->dtype, the reference evaluates the same graph in float64 from
 * the same rounded inputs, its result unrounded. */
static dg_node *build_lowp(dg_graph *g, dg_node *const *in, const op_case *c) {
    dg_node *lp[OP_CASE_MAX_IN];
    for (int i = 0; i < c->n_in; i++) lp[i] = c->dom[i] == DOM_LABELS ? in[i] : dg_cast(g, in[i], c->dtype);
    op_case plain = *c;
    plain.build = NULL;
    return dg_cast(g, op_case_build(g, lp, &plain), DG_F32);
}

/* a binary op of one low-precision operand (index low: the other stays
 * float32): a float32 result */
static dg_node *mixed(dg_graph *g, dg_node *const *in, const op_case *c, int low) {
    dg_node *lp[2] = {in[0], in[1]};
    lp[low] = dg_cast(g, in[low], c->dtype);
    op_case plain = *c;
    plain.build = NULL;
    return op_case_build(g, lp, &plain);
}

/* a low-precision a and a float32 b */
static dg_node *build_mixed(dg_graph *g, dg_node *const *in, const op_case *c) { return mixed(g, in, c, 0); }

/* a float32 a and a low-precision b (the residual sum: the float32 stream
 * plus a 16-bit branch) */
static dg_node *build_mixed_b(dg_graph *g, dg_node *const *in, const op_case *c) { return mixed(g, in, c, 1); }

/* a product whose output is c->dtype (dg_matmul_ex) */
static dg_node *build_matmul_out(dg_graph *g, dg_node *const *in, const op_case *c) {
    return dg_cast(g, dg_matmul_ex(g, dg_cast(g, in[0], c->dtype), dg_cast(g, in[1], c->dtype), c->ta, c->tb,
                                   c->dtype), DG_F32);
}

#define LOWP .build = build_lowp, .floor = FLOOR

/* a 16-bit input summed into float32 (dg_sum_ex): one float32 rounding */
static dg_node *build_sum_f32(dg_graph *g, dg_node *const *in, const op_case *c) {
    return dg_sum_ex(g, dg_cast(g, in[0], c->dtype), c->axes, c->keepdims, DG_F32);
}

const op_case dg_dtype_cases[] = {
    {"cast_bf16",        DG_OP_CAST,   1, {S(7, 9)}, .dtype = DG_BF16, .tol = EXACT},
    {"cast_f16",         DG_OP_CAST,   1, {S(7, 9)}, .dtype = DG_F16, .tol = EXACT},
    {"matmul_bf16",      DG_OP_MATMUL, 2, {S(5, 7), S(7, 3)}, .dtype = DG_BF16, .tol = TOL},
    {"matmul_bf16_ta_tb", DG_OP_MATMUL, 2, {S(7, 5), S(3, 7)}, .ta = true, .tb = true, .dtype = DG_BF16,
     .tol = TOL},
    {"matmul_bf16_odd",  DG_OP_MATMUL, 2, {S(17, 33), S(33, 9)}, .dtype = DG_BF16, .tol = TOL},
    {"bmm_bf16_tb",      DG_OP_MATMUL, 2, {S(3, 3, 4), S(3, 5, 4)}, .tb = true, .dtype = DG_BF16, .tol = TOL},
    {"matmul_f16",       DG_OP_MATMUL, 2, {S(5, 7), S(7, 3)}, .dtype = DG_F16, .tol = TOL},
    {"matmul_f16_ta",    DG_OP_MATMUL, 2, {S(7, 5), S(7, 3)}, .ta = true, .dtype = DG_F16, .tol = TOL},
    {"matmul_f16_odd",   DG_OP_MATMUL, 2, {S(17, 33), S(33, 9)}, .dtype = DG_F16, .tol = TOL},
    {"bmm_f16_ta",       DG_OP_MATMUL, 2, {S(2, 4, 3), S(2, 4, 5)}, .ta = true, .dtype = DG_F16, .tol = TOL},
    /* [B,m,k] x [k,n] (a reshaped 2-D product) and [B,H,m,k] x [B,H,k,n]
     * (batch folded into views) */
    {"matmul_bf16_3d_2d", DG_OP_MATMUL, 2, {S(2, 3, 4), S(4, 5)}, .dtype = DG_BF16, .tol = TOL},
    {"matmul_f16_4d_tt", DG_OP_MATMUL, 2, {S(2, 2, 5, 4), S(2, 2, 3, 5)}, .ta = true, .tb = true, .dtype = DG_F16,
     .tol = TOL},

    /* Storage ops: inputs rounded to the dtype, float32 inside, the result
     * rounded once on store. Forward: the fp32 bound plus the output's unit
     * roundoff u (2^-8 bf16, 2^-11 f16), times the factor each row states.
     * Gradients: float32's bound plus u (GRAD_*); where the backward reads
     * the rounded forward output (exp, sigmoid, tanh, softmax) that value
     * is off by u relative, and the row's factor bounds how the formula
     * carries it. */
    /* elementwise forward: one rounding (u); gradients read the rounded
     * input both sides hold (relu, gelu: TOL) or the output y: exp's dy y
     * is off u; sigmoid's y (1 - y) by u y |1 - 2y| <= u y, against a
     * largest gradient >= 0.1 on [-2, 2]: 4u; tanh's 1 - y^2 by 2u y^2,
     * against a largest 1 - y^2 of ~1: 2u */
    {"relu_bf16", DG_OP_RELU, 1, {S(33, 65)}, {DOM_AWAY0},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    {"relu_f16", DG_OP_RELU, 1, {S(33, 65)}, {DOM_AWAY0},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL},
    {"gelu_bf16", DG_OP_GELU, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL)},
    {"gelu_f16", DG_OP_GELU, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL)},
    {"exp_bf16", DG_OP_EXP, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL + U_BF16)},
    {"exp_f16", DG_OP_EXP, 1, {S(33, 65)}, {DOM_ANY}, .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL + U_F16)},
    {"sigmoid_bf16", DG_OP_SIGMOID, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL + 4 * U_BF16)},
    {"sigmoid_f16", DG_OP_SIGMOID, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL + 4 * U_F16)},
    {"tanh_bf16", DG_OP_TANH, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL + 2 * U_BF16)},
    {"tanh_f16", DG_OP_TANH, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL + 2 * U_F16)},
    /* the rest of the unary ops: one rounding; log's and sqrt's gradients
     * divide the float32 dy by the held x or the rounded y (u); pow's is
     * dy s x^(s-1) built of bf16/f16 nodes, x^(s-1) and its product by s
     * each rounded (2u); the others read the held x (TOL) */
    {"neg_bf16", DG_OP_NEG, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    {"add_scalar_f16", DG_OP_ADD_SCALAR, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL, .scalar = 0.75f},
    {"mul_scalar_bf16", DG_OP_MUL_SCALAR, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL), .scalar = -1.3f},
    {"pow_scalar_f16", DG_OP_POW_SCALAR, 1, {S(33, 65)}, {DOM_POS},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL + 2 * U_F16), .scalar = 1.5f},
    {"log_bf16", DG_OP_LOG, 1, {S(33, 65)}, {DOM_POS},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL)},
    {"sqrt_f16", DG_OP_SQRT, 1, {S(33, 65)}, {DOM_POS},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL + U_F16)},
    {"abs_bf16", DG_OP_ABS, 1, {S(33, 65)}, {DOM_AWAY0},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    {"leaky_relu_f16", DG_OP_LEAKY_RELU, 1, {S(33, 65)}, {DOM_AWAY0},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL), .scalar = 0.1f},
    /* div: y = a / b rounded once; da = dy / b reads the held b (TOL),
     * db = -dy y / b takes y / b in the dtype, a second rounding (2u) */
    {"div_bf16", DG_OP_DIV, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_POS},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL + 2 * U_BF16)},
    /* binary, same shape and a broadcast row (the bias add): one rounding;
     * the gradients are dy or dy times the other operand, as held (TOL);
     * the bias copy's, the column sum of the 16-bit dy, is summed into
     * float32 (TOL: its old 16-bit sum was u off) */
    {"add_bf16", DG_OP_ADD, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    {"sub_f16", DG_OP_SUB, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL},
    {"mul_bf16", DG_OP_MUL, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL)},
    {"mul_f16", DG_OP_MUL, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = GRAD_F16(TOL)},
    {"bias_add_bf16", DG_OP_ADD, 2, {S(33, 65), S(65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    {"bias_add_f16", DG_OP_ADD, 2, {S(33, 65), S(65)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL},
    /* last axes of a multiple of 4 (the GPU's four-at-a-time kernels: the
     * same shape, a bias row, f32 with bf16 as in a residual sum), and a
     * column broadcast (inner stride 0: one at a time) */
    {"add_f16_rows64", DG_OP_ADD, 2, {S(9, 64), S(9, 64)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL},
    {"bias_add_bf16_rows64", DG_OP_ADD, 2, {S(2, 9, 64), S(64)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL},
    /* the column's gradient sums 64 products dy a each rounded to bf16
     * before the sum (as autocast's mul backward does): their roundings
     * add up to u sum |dy a|, not u |sum dy a|; over seeds 1-40 the
     * error stayed within 1.3 u of the largest gradient: one u more */
    {"mul_bf16_column", DG_OP_MUL, 2, {S(9, 64), S(9, 1)}, {DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = GRAD_BF16(TOL + U_BF16)},
    {"add_mixed_bf16_f32_rows64", DG_OP_ADD, 2, {S(9, 64), S(9, 64)}, {DOM_ANY, DOM_ANY}, .dtype = DG_BF16,
     .build = build_mixed, .tol = TOL},
    {"sub_mixed_f16_f32_bias64", DG_OP_SUB, 2, {S(9, 64), S(64)}, {DOM_ANY, DOM_ANY}, .dtype = DG_F16,
     .build = build_mixed, .tol = TOL},
    {"add_mixed_f32_bf16_rows64", DG_OP_ADD, 2, {S(2, 9, 64), S(2, 9, 64)}, {DOM_ANY, DOM_ANY}, .dtype = DG_BF16,
     .build = build_mixed_b, .tol = TOL},
    /* f32 with bf16 or f16: a float32 result, no rounding of its own */
    {"mul_mixed_bf16_f32", DG_OP_MUL, 2, {S(33, 65), S(65)}, {DOM_ANY, DOM_ANY}, .dtype = DG_BF16,
     .build = build_mixed, .tol = TOL},
    {"add_mixed_f16_f32",  DG_OP_ADD, 2, {S(33, 65), S(33, 65)}, {DOM_ANY, DOM_ANY}, .dtype = DG_F16,
     .build = build_mixed, .tol = TOL},
    /* row and column sums (the sum in double, one rounding); the gradient
     * is dy broadcast (TOL) */
    {"sum_rows_bf16", DG_OP_SUM, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL, .axes = 0x2},
    {"sum_cols_f16", DG_OP_SUM, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL, .axes = 0x1},
    {"mean_all_bf16", DG_OP_MEAN, 1, {S(5, 7, 9)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL, .axes = 0x5},
    /* the GPU's other sum kernels: long rows summed in chunks, then the
     * partials (positive terms: no cancellation, the float32 sum within
     * 16 TOL of itself); a column mean through partials and their sum */
    {"sum_long_rows_bf16", DG_OP_SUM, 1, {S(3, 3000)}, {DOM_POS},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL, .axes = 0x2},
    {"mean_cols_f16", DG_OP_MEAN, 1, {S(300, 40)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL, .axes = 0x1},
    /* 16-bit inputs summed into float32 (a bias copy's gradient): the sum
     * of exact 16-bit values rounded once to float32 (TOL), no 16-bit
     * rounding; columns directly and through partials, rows, and the
     * general path */
    {"sum_cols_bf16_into_f32", DG_OP_SUM, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, .build = build_sum_f32, .tol = TOL, .axes = 0x1},
    {"sum_cols_f16_into_f32", DG_OP_SUM, 1, {S(300, 40)}, {DOM_ANY},
     .dtype = DG_F16, .build = build_sum_f32, .tol = TOL, .axes = 0x1},
    {"sum_rows_f16_into_f32", DG_OP_SUM, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, .build = build_sum_f32, .tol = TOL, .axes = 0x2},
    {"sum_cols_bf16_w68", DG_OP_SUM, 1, {S(129, 68)}, {DOM_ANY}, /* 16-bit out through partials */
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL, .axes = 0x1},
    {"sum_axes02_bf16_into_f32", DG_OP_SUM, 1, {S(5, 7, 9)}, {DOM_ANY},
     .dtype = DG_BF16, .build = build_sum_f32, .tol = TOL, .axes = 0x5, .keepdims = true},
    /* permutes move 16-bit values without converting them: exact both
     * ways (the gradient is a 16-bit permute). One row per kernel: the
     * heads' split (rows of 4 elements, copied element by element), rows
     * of 130 (a block per row), a batched transpose (the GPU's tiles
     * through shared memory) and a move of the last axis (the CPU's tiles) */
    {"permute_heads_bf16", DG_OP_PERMUTE, 1, {S(2, 5, 3, 4)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = EXACT, .grad_tol = TOL, .perm = {0, 2, 1, 3}},
    {"permute_heads16_bf16", DG_OP_PERMUTE, 1, {S(2, 3, 5, 16)}, {DOM_ANY}, /* 32-byte rows: 16-byte units */
     .dtype = DG_BF16, LOWP, .tol = EXACT, .grad_tol = TOL, .perm = {0, 2, 1, 3}},
    {"permute_wide_f16", DG_OP_PERMUTE, 1, {S(3, 2, 130)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = EXACT, .grad_tol = TOL, .perm = {1, 0, 2}},
    {"transpose_bf16", DG_OP_PERMUTE, 1, {S(2, 33, 35)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = EXACT, .grad_tol = TOL, .perm = {0, 2, 1}},
    {"permute_last_axis_f16", DG_OP_PERMUTE, 1, {S(2, 3, 40)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = EXACT, .grad_tol = TOL, .perm = {2, 0, 1}},
    /* softmax: max and sum in float32, each probability rounded once;
     * the gradient y (dy - sum dy y) reads the rounded y: off u in y and
     * in the sum, 2u */
    {"softmax_bf16", DG_OP_SOFTMAX, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + 2 * U_BF16},
    {"softmax_f16", DG_OP_SOFTMAX, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + 2 * U_F16},
    {"log_softmax_bf16", DG_OP_LOG_SOFTMAX, 1, {S(33, 65)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + 2 * U_BF16},
    /* rows of whole float4s (c % 4 == 0, c <= 1024): the GPU's register
     * kernels (plain, scaled, causal), where c = 65 above takes its
     * two-pass ones */
    {"softmax_bf16_rows128", DG_OP_SOFTMAX, 1, {S(17, 128)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + 2 * U_BF16},
    {"log_softmax_f16_rows64", DG_OP_LOG_SOFTMAX, 1, {S(9, 64)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + 2 * U_F16},
    {"softmax_f16_scaled", DG_OP_SOFTMAX, 1, {S(9, 64)}, {DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + 2 * U_F16, .scalar = 0.7f},
    {"softmax_bf16_causal", DG_OP_SOFTMAX, 1, {S(2, 16, 16)}, {DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + 2 * U_BF16, .scalar = 0.5f, .causal = true},
    /* layer norm: statistics in double from the rounded x, y rounded once;
     * the gradients read x, scale (held) and the float32 stats: fp32 */
    {"layer_norm_bf16", DG_OP_LAYER_NORM, 3, {S(33, 65), S(65), S(65)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL, .scalar = 1e-5f},
    {"layer_norm_f16", DG_OP_LAYER_NORM, 3, {S(33, 65), S(65), S(65)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL, .scalar = 1e-5f},
    /* rows of whole float4s: the GPU holds them in registers (16 threads a
     * row of 64, a warp for 256, the block for 2048); 300 rows: the scale
     * gradient in slices of rows, then their sum. The gradients' float32
     * sums run over up to 2048 terms (300 for the scale's) in the GPU's
     * order, ~log2 of that roundings deep: 8 TOL */
    {"layer_norm_bf16_d64", DG_OP_LAYER_NORM, 3, {S(9, 64), S(64), S(64)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = 8 * TOL, .scalar = 1e-5f},
    {"layer_norm_f16_d256", DG_OP_LAYER_NORM, 3, {S(5, 256), S(256), S(256)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = 8 * TOL, .scalar = 1e-5f},
    {"layer_norm_bf16_d2048", DG_OP_LAYER_NORM, 3, {S(3, 2048), S(2048), S(2048)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = 8 * TOL, .scalar = 1e-5f},
    {"layer_norm_f16_rows300", DG_OP_LAYER_NORM, 3, {S(300, 32), S(32), S(32)}, {DOM_ANY, DOM_ANY, DOM_ANY},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = 8 * TOL, .scalar = 1e-5f},
    /* a bf16 or f16 output of a product (dg_matmul_ex): the float32 sums
     * rounded once (u); the gradients as the float32-output rows' (TOL) */
    {"matmul_out_bf16",   DG_OP_MATMUL, 2, {S(17, 33), S(33, 9)}, .dtype = DG_BF16, .build = build_matmul_out,
     .floor = FLOOR, .tol = FWD_BF16, .grad_tol = TOL},
    {"matmul_out_f16_tb", DG_OP_MATMUL, 2, {S(17, 33), S(9, 33)}, .tb = true, .dtype = DG_F16,
     .build = build_matmul_out, .floor = FLOOR, .tol = FWD_F16, .grad_tol = TOL},
    {"bmm_out_bf16_ta",   DG_OP_MATMUL, 2, {S(3, 5, 4), S(3, 5, 6)}, .ta = true, .dtype = DG_BF16,
     .build = build_matmul_out, .floor = FLOOR, .tol = FWD_BF16, .grad_tol = TOL},
    /* rows of 8193: the CPU sums 7 rows (64K floats) at a time, so 9 rows
     * take two chunks, the second from A's row 7 (column 7 transposed) */
    {"matmul_out_bf16_chunks", DG_OP_MATMUL, 2, {S(9, 3), S(3, 8193)}, .dtype = DG_BF16,
     .build = build_matmul_out, .floor = FLOOR, .tol = FWD_BF16, .grad_tol = TOL},
    {"matmul_out_f16_chunks_ta", DG_OP_MATMUL, 2, {S(3, 9), S(3, 8193)}, .ta = true, .dtype = DG_F16,
     .build = build_matmul_out, .floor = FLOOR, .tol = FWD_F16, .grad_tol = TOL},
    /* convolutions of bf16 or f16 x and w (io in 16 bits, float32 sums):
     * the output rounded once (u) on the float32 sums (op_cases.c's TOL,
     * as its float32 conv rows of these sizes: sums of at most 192 terms,
     * dw's). The reference is not rounded: against it a truncating store
     * is off by up to 2u and fails. Backward, dy is the
     * loss weights rounded to the dtype (values both sides hold), and each
     * backward op's result is rounded once before its cast to float32:
     * TOL + u against the largest gradient. Rows: the plain one, padding
     * and stride (im2col columns), groups, a 1x1 (x read as its own
     * columns, CPU and GPU im2col) and dilation. */
    {"conv2d_bf16", DG_OP_CONV2D, 2, {S(2, 3, 7, 7), S(4, 3, 3, 3)},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + U_BF16},
    {"conv2d_f16", DG_OP_CONV2D, 2, {S(2, 3, 7, 7), S(4, 3, 3, 3)},
     .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + U_F16},
    {"conv2d_bf16_stride2_pad", DG_OP_CONV2D, 2, {S(2, 3, 9, 10), S(5, 3, 3, 3)},
     .conv = {.stride = {2, 2}, .pad = {1, 1}}, .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + U_BF16},
    {"conv2d_f16_groups2", DG_OP_CONV2D, 2, {S(2, 4, 6, 6), S(6, 2, 3, 3)},
     .conv = {.pad = {1, 1}, .groups = 2}, .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + U_F16},
    {"conv2d_bf16_1x1", DG_OP_CONV2D, 2, {S(2, 5, 4, 3), S(3, 5, 1, 1)},
     .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + U_BF16},
    {"conv2d_f16_dilation2", DG_OP_CONV2D, 2, {S(1, 2, 9, 9), S(3, 2, 3, 3)},
     .conv = {.pad = {2, 2}, .dilation = {2, 2}}, .dtype = DG_F16, LOWP, .tol = FWD_F16, .grad_tol = TOL + U_F16},
    {"conv2d_bf16_c8_8x8", DG_OP_CONV2D, 2, {S(3, 8, 8, 8), S(8, 8, 3, 3)},
     .conv = {.pad = {1, 1}}, .dtype = DG_BF16, LOWP, .tol = FWD_BF16, .grad_tol = TOL + U_BF16},
};
const int dg_n_dtype_cases = (int)(sizeof dg_dtype_cases / sizeof dg_dtype_cases[0]);
