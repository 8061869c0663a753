/* error.h: the one relative error every check reports (the ops, attention,
 * gemm and training-step checks, and the suites' comparisons).
 *
 *   err = max |x - ref| / max(max |ref|, DG_CHECK_ABS_FLOOR * scale)
 *
 * The plain norm-wise error max|x - ref| / max|ref| means nothing where the
 * reference is exactly zero: attention at T = 1 has dq = dk = 0 in float64
 * (a softmax over one key does not move), a float32 kernel leaves rounding
 * of about 2^-24 of its terms there, and over a floor of 1e-300 that read
 * 1e+293, a false `wrong`. `scale` is what the output's terms are made of,
 * from the inputs (for o = P v: max|v|; for a dot product: the sum of its
 * |terms|): the caller knows it. Where max|ref| is above the floor (every
 * output with nonzero data) the measure and its thresholds mean what they
 * always did; only an output that is zero, or cancels to below 1e-3 of its
 * terms, is measured against its terms instead, where float32 rounding
 * alone (2^-24 per term, 6e-8) would otherwise exceed any threshold.
 * A threshold t then admits an absolute error of t * 1e-3 * scale on a zero
 * output: 1e-7 * scale for the attention check's 1e-4. */
#ifndef DG_CHECK_ERROR_H
#define DG_CHECK_ERROR_H

#define DG_CHECK_ABS_FLOOR 1e-3

/* abs_err / max(ref_max, DG_CHECK_ABS_FLOOR * scale); INFINITY where
 * abs_err is NaN or infinite; 0 for abs_err 0 whatever the denominator
 * (an exact zero against a zero reference with no scale) */
double dg_check_rel_err(double abs_err, double ref_max, double scale);

#endif
