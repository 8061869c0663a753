/* conv_prec.h: the conv sweep's check in each precision, apart so that
 * tests plant bugs in front of it. The float64 entries (conv_check.h) are
 * computed from the node's inputs as the kernel reads them: in bf16 and
 * fp16 the float32 values after rounding to the dtype (dg_check_round),
 * in tf32 the float32 values (the tensor cores round them, which the
 * tolerance allows for). A 16-bit output is one rounding of a float32
 * accumulation: that rounding is taken out of the error entry by entry
 * (conv_prec_error), so the tolerance left is the accumulation's. */
#ifndef DG_BENCH_CONV_PREC_H
#define DG_BENCH_CONV_PREC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/check/conv_check.h"
#include "core/precision.h"

/* The largest |out - exact| / sum|terms| over the samples, less for each
 * entry the half step of its dtype at out (the interval of values that
 * round to out); `out` holds the output in dtype t: float32 values
 * (DG_F32: conv_check_error), or bf16 / f16 bits. INFINITY where an entry
 * is NaN or infinite (left unwritten). */
double conv_prec_error(const conv_sample *s, int n, const void *out, dg_dtype t);

/* The largest error a correct result passes in precision p, its dot
 * products of `terms` products; `gpu`: by the GPU (see conv_prec.c). */
double conv_prec_tol(dg_precision p, int64_t terms, bool gpu);

#endif
