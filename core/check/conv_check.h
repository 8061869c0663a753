/* conv_check.h: the conv sweep's check (check word CONV_CHECK_WORD). A few
 * hundred entries of a convolution's output, drawn at random (seeded), are
 * each computed exactly in float64 from the node's two inputs: a dot
 * product of K terms (forward: K = c/groups*kh*kw taps; backward-data: the
 * o/groups*kh*kw taps that reach the input element; backward-weight: the
 * batch*oh*ow positions of the window). A float32 result is compared
 * entry by entry, its error scaled by the sum of |terms| (the dot
 * product's condition number times its value), so one tolerance holds for
 * every K. */
#ifndef DG_BENCH_CONV_CHECK_H
#define DG_BENCH_CONV_CHECK_H

#include <stdint.h>

#include "../graph.h"

#define CONV_CHECK_WORD    "f64-sampled"
#define CONV_CHECK_SAMPLES 256

/* Float32 accumulation of K products makes errors bounded by about
 * K * 2^-24 of the sum of |terms| in the worst case, but with the sweep's
 * zero-mean inputs (uniform in [-1, 1)) the partial sums grow like
 * sqrt(K) and their rounding errors add like a random walk: relative to
 * sum |terms| they stay near 2^-24 whatever K (the largest K here is
 * backward-weight's batch*oh*ow, 1.6M). 1e-5 is about 170 times that.
 * A wrong tap, offset or missing chunk makes errors of the order of the
 * entry itself, about sum|terms| / sqrt(K): at least 8e-4 for K = 1.6M. */
#define CONV_CHECK_TOL 1e-5

/* One checked output entry: its flat index in the output, its exact value
 * and the sum of |terms| of its dot product. */
typedef struct conv_sample {
    int64_t index;
    double  exact, abs_sum;
} conv_sample;

/* Fills s[0..n) for output entries of nd, a conv2d, conv2d_backward_data
 * or conv2d_backward_weight node: the first and the last entry (a corner
 * of the padding each), then n - 2 drawn from `seed`. a and b are the
 * host values of nd's inputs in order (conv2d: x, w; backward_data: dy, w;
 * backward_weight: dy, x). DG_ERR_INVALID for another op, n < 2 or NULL. */
dg_status conv_check_sample(const dg_node *nd, const float *a, const float *b, uint64_t seed, conv_sample *s, int n);

/* The largest |out[index] - exact| / sum|terms| over the samples;
 * INFINITY where out is NaN or infinite (an entry left unwritten). */
double conv_check_error(const conv_sample *s, int n, const float *out);

#endif
