/* op_cases_dtype.c: the precision table (op_cases.h): casts and the
 * products of bf16 and f16 operands, checked on every backend against the
 * float64 reference of the same graph. The reference evaluates every node
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
 *   apart: checks of such graphs allow that. */
#include "op_cases.h"

#define S(...) DG_SHAPE(__VA_ARGS__)
#define EXACT 1e-12
#define TOL 2e-6 /* float32 sums: op_cases.c's */

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
};
const int dg_n_dtype_cases = (int)(sizeof dg_dtype_cases / sizeof dg_dtype_cases[0]);
