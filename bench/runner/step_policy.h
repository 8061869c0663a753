/* step_policy.h: whether a built training step carries its precision's
 * policy (core/nn/train_step.h), the part of a row's check that its
 * float64 evaluation cannot see: that evaluation rounds where the graph
 * casts, so a step built in fp32 by mistake under a "bf16" row, or an
 * fp16 step without its loss scaling, agrees with its own reference and
 * would pass. The train and scaling sweeps check it beside the float64
 * comparison, on the graph they time. */
#ifndef DG_BENCH_STEP_POLICY_H
#define DG_BENCH_STEP_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/check/step_check.h"
#include "core/precision.h"

/* the precision a row in precision p trains its step in: p, but fp32 for
 * the CPU's tf32 rows (gpu false), the CPU having no TF32 mode */
dg_precision bench_step_precision(dg_precision p, bool gpu);

/* true when the step ts of graph g is p's: every forward product (matmul,
 * convolution) takes both operands in p's dtype (dg_precision_dtype: f32
 * for fp32 and tf32, and then no node of the graph is 16-bit), at least
 * one product; fp16, and fp16 alone, scales its loss (ts->loss_scale and
 * the skip count ts->found_inf). why (n bytes) says what was found:
 * "4 of 4 forward products bf16", ", loss not scaled", ... */
bool bench_step_policy(const dg_graph *g, const dg_train_step *ts, dg_precision p, char *why, size_t n);

/* The check column of a step row in precision p: base alone in fp32 (the
 * column fp32 rows have always had); otherwise "BASE+P-policy tol T"
 * (bench_step_policy above, and the float64 check's tolerance T, the
 * tol_text given), within the CSV reader's 47 characters. */
void bench_step_check_word(char *buf, size_t n, const char *base, dg_precision p, const char *tol_text);

#endif
