/* attention_check.h: the attention sweep's check at the full shape. A
 * sample of rows of the outputs, each against float64 sums written from
 * the definition (no kernel, no graph, no ref.c code shared):
 *
 *   o[i]  = sum_j P[i,j] v[j],  P[i,:] = softmax_j(scale q[i].k[j]) over the
 *           unmasked keys (causal: j <= i)
 *   dq[i] = scale sum_j P[i,j] (dO[i].v[j] - dO[i].o[i]) k[j]
 *   dk[j] = scale sum_i P[i,j] (dO[i].v[j] - dO[i].o[i]) q[i]
 *   dv[j] = sum_i P[i,j] dO[i]
 *
 * ATT_CHECK_QROWS query rows (b, h, i) for o and dq, among them the mask's
 * edges (i = 0, 1, T-1), and ATT_CHECK_KROWS key rows (j = 0, 1, T-1 and
 * others) of one head for dk and dv. A query row costs O(T Dh); the key
 * rows need every query's softmax in their head, O(T^2 Dh), computed only
 * when a row with a backward asks (OpenMP over the queries).
 *
 * Error of an output: max |x - ref| / max |ref| over its sampled rows (the
 * norm-wise error bench/peers/torch_attention.py computes over whole
 * tensors), the denominator floored at 1e-3 of the output's scale
 * (att_scales, core/check/error.h): at T = 1 dq and dk are exactly zero;
 * NaN in x counts as infinite. */
#ifndef DG_BENCH_ATTENTION_CHECK_H
#define DG_BENCH_ATTENTION_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "../graph.h"

#define ATT_CHECK_QROWS 16
#define ATT_CHECK_KROWS 8
/* The largest error an ok row may have (the sampled rows here and the
 * reduced graph against ref.c alike). Measured, float32 against float64,
 * inputs uniform in [-1, 1): CPU composed and fused, T 64..512, at most
 * 8e-7 (a 2-core Xeon); H100, T 128..8192, every case, at most 3.5e-6
 * (the fused kernel's 3xTF32 products). Wrong results measured by the tests: an output 0.1% off 1e-3
 * (fwd) and 2e-3 (fwdbwd); one query row off by 0.5 in its first entry
 * 0.5; a causal mask that lets every key in 1. */
#define ATT_CHECK_TOL 1e-4

/* The largest error of an ok bf16 or f16 attention, q, k, v and dout
 * rounded to the dtype before the kernel and the float64 side see them (so
 * those casts are exact), u its unit roundoff (bf16 2^-8, fp16 2^-11):
 *   ATT_CHECK_TOL + ATT_CHECK_LOW_ROUNDINGS u.
 * Whence 3 u, of the largest entry of each output:
 *  - inside the kernel (fused or composed) one rounding on each output's
 *    path: P before P v (o) and P^T dO (dv), dS before dS k (dq) and
 *    dS^T q (dk). It moves each of the T terms of the sum by at most u
 *    relatively, with random signs, so the error of an entry is a random
 *    walk of T steps of u |term|, the same order as the entry itself:
 *    about u / sqrt(3) of the entry's own size whatever T (about 0.15 u
 *    of the output's largest entry at flat softmaxes, measured at most
 *    0.67 u, CPU composed rows, T 64..1024);
 *  - the fused op stores o, dq, dk, dv in the dtype: against a reference
 *    that rounds the same nodes (ref_eval_stored) an entry may fall on the
 *    other side of a rounding boundary than the reference's: one unit in
 *    the last place, 2 u of the entry (at most 2 u of the largest); against
 *    the unrounded float64 sums the stored rounding is at most u;
 *  - the backward's delta = dO . o reads the stored o (its rounding's
 *    share follows the first point's argument: random, a fraction of u).
 * 0.7 u + 2 u < 3 u: the sum of the bounds of the first two, rounded up. A
 * wrong kernel misses it by far: a tile's P not rescaled when the row
 * maximum grows, or a masked key let in, errs by tens of percent (the
 * tests); a product 5% off is 13 u in bf16. */
#define ATT_CHECK_LOW_ROUNDINGS 3
/* ATT_CHECK_TOL for DG_F32, the above for DG_BF16 and DG_F16 */
double att_check_tol(dg_dtype t);

typedef enum att_out { ATT_O, ATT_DQ, ATT_DK, ATT_DV, ATT_N_OUT } att_out;

/* q, k, v, dO [b, h, t, dh] */
typedef struct att_dims { int64_t b, h, t, dh; float scale; bool causal; } att_dims;

typedef struct att_sample {
    att_dims d;
    int64_t  qrow[ATT_CHECK_QROWS];   /* rows of the [b*h*t, dh] view: (b*h' + h)*t + i */
    int64_t  head;                    /* b*h' + h of the key rows                       */
    int64_t  krow[ATT_CHECK_KROWS];   /* j within that head                              */
    bool     keys_done;
    double   scale[ATT_N_OUT];        /* att_scales of the full tensors                  */
    double   ref[ATT_N_OUT][ATT_CHECK_QROWS][DG_ATTENTION_MAX_HEAD]; /* dk, dv: the first KROWS */
} att_sample;

/* The scale of each output's terms (error.h), from the largest entries of
 * the n-element inputs: o = P v is an average of v's rows (max|v|); dv =
 * sum_i P[i,j] dO[i] (max|dO|: a key's probabilities sum to about 1 over
 * the queries); dq = scale sum_j P[i,j] (dO[i].v[j] - dO[i].o[i]) k[j]
 * (scale * dh * max|dO| max|v| max|k|: a dot product of dh terms); dk the
 * same with max|q|. dout may be NULL (a forward: the backward's scales 0). */
void att_scales(const att_dims *d, const float *q, const float *k, const float *v, const float *dout, int64_t n,
                double scale[ATT_N_OUT]);

/* Picks the rows (seeded) and computes o and dq there. q, k, v, dout: the
 * full tensors. DG_ERR_INVALID for a head size above DG_ATTENTION_MAX_HEAD,
 * DG_ERR_OOM without host memory. */
dg_status att_sample_new(att_sample *s, att_dims d, const float *q, const float *k, const float *v,
                         const float *dout, uint64_t seed);
/* dk and dv at the key rows (once; the head's O(T^2 Dh) work) */
dg_status att_sample_keys(att_sample *s, const float *q, const float *k, const float *v, const float *dout);
/* the error of output `which`, x the whole tensor [b, h, t, dh] */
double    att_sample_error(const att_sample *s, att_out which, const float *x);

#endif
