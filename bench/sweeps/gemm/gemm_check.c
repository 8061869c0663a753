/* gemm_check.c: Freivalds' test and its tolerance per precision
 * (gemm_check.h). */
#include "sweeps/gemm/gemm_check.h"

#include <math.h>
#include <stdlib.h>

#include "core/check/error.h"
#include "core/rng.h"

dg_status bench_freivalds_new(bench_freivalds *f, int m, int n, int k, bool ta, bool tb, const float *A,
                              const float *B, uint64_t seed) {
    *f = (bench_freivalds){.m = m, .n = n, .k = k};
    f->x = malloc((size_t)n * sizeof *f->x);
    f->z = malloc((size_t)m * sizeof *f->z);
    double *bx = malloc((size_t)k * sizeof *bx);
    if (!f->x || !f->z || !bx) {
        free(bx);
        bench_freivalds_free(f);
        return dg_fail(DG_ERR_OOM, "host memory for the check of a %d x %d x %d product", m, n, k);
    }
    dg_rng r = dg_rng_new(seed);
    for (int j = 0; j < n; j++) f->x[j] = 2 * dg_rng_uniform(&r) - 1;
    /* bx = op(B) x [k], z = op(A) bx [m] */
#pragma omp parallel for
    for (int p = 0; p < k; p++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double)(tb ? B[(size_t)j * k + p] : B[(size_t)p * n + j]) * f->x[j];
        bx[p] = s;
    }
#pragma omp parallel for
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int p = 0; p < k; p++) s += (double)(ta ? A[(size_t)p * m + i] : A[(size_t)i * k + p]) * bx[p];
        f->z[i] = s;
    }
    free(bx);
    /* z_i sums k n products A_ip B_pj x_j of random sign, whose sum grows
     * like sqrt(k n) max|A| max|B| max|x| */
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    double a = 0, b = 0, xm = 0;
    for (size_t i = 0; i < na; i++) a = fmax(a, fabs(A[i]));
    for (size_t i = 0; i < nb; i++) b = fmax(b, fabs(B[i]));
    for (int j = 0; j < n; j++) xm = fmax(xm, fabs(f->x[j]));
    f->scale = sqrt((double)k * n) * a * b * xm;
    return DG_OK;
}

double bench_freivalds_err(const bench_freivalds *f, const float *C) {
    double err = 0, zmax = 0;
#pragma omp parallel for reduction(max : err, zmax)
    for (int i = 0; i < f->m; i++) {
        double y = 0;
        for (int j = 0; j < f->n; j++) y += (double)C[(size_t)i * f->n + j] * f->x[j];
        double e = fabs(y - f->z[i]);
        if (isnan(y)) e = INFINITY;
        err = e > err ? e : err;
        zmax = fabs(f->z[i]) > zmax ? fabs(f->z[i]) : zmax;
    }
    return dg_check_rel_err(err, zmax, f->scale);
}

void bench_freivalds_free(bench_freivalds *f) {
    free(f->x);
    free(f->z);
    f->x = f->z = NULL;
}

/* fp32: float32 inputs and sums; tf32: the tensor cores' 10-bit
 * significand inputs (unit roundoff 2^-11), measured as before. */
#define TOL_FP32 1e-4
#define TOL_TF32 5e-3

/* bf16, fp16: the operands are exact after rounding, and so are their
 * products in float32 (8 + 8 or 11 + 11 significand bits <= 24): the one
 * rounding left is the float32 accumulation of k terms, unit roundoff
 * u = 2^-24. With |a|, |b|, |x| <= 1 an element c_ij has size ~ sqrt(k)
 * and the sum's error |dc_ij| <= gamma_k sum|a b| (gamma_k ~ k u) at worst,
 * ~ sqrt(k) u sqrt(k) = k u when the roundings have random signs (round to
 * nearest: the CPU's sgemm). Freivalds' error sums n of them against x of
 * random sign, ~ sqrt(n) k u, over the scale sqrt(k n): ~ sqrt(k) u; the
 * tolerance is 16 sqrt(k) u (6.1e-5 at k = 4096), a margin of 16 for the
 * tail over m rows and the blocked sums' order. The GPU's tensor cores
 * need not round each partial sum to nearest (truncation biases the
 * errors one way: they add up like k u, not sqrt(k) u), so a GPU row gets
 * 2 k u where that is larger (4.9e-4 at k = 4096). Either stays below
 * what operands rounded one way for the kernel and another for the check
 * give, ~ 0.5 u_dtype (bf16 2^-9 ~ 2e-3, fp16 2^-12 ~ 2.4e-4; the GPU's
 * fp16 at k >= 2048 excepted). */
#define UNIT_ROUNDOFF_F32 0x1p-24

double bench_gemm_tol(dg_precision p, int k, bool gpu) {
    switch (p) {
    case DG_PREC_FP32: return TOL_FP32;
    case DG_PREC_TF32: return TOL_TF32;
    case DG_PREC_BF16: case DG_PREC_FP16: break;
    }
    double tol = 16 * sqrt((double)k) * UNIT_ROUNDOFF_F32;
    return gpu ? fmax(tol, 2.0 * k * UNIT_ROUNDOFF_F32) : tol;
}
