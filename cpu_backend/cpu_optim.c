/* cpu_optim.c: optimizer updates, in place on the parameter and state: the
 * step's inout[i] are the inputs the op table says the update writes; and
 * the loss-scaling ops (the found-inf test, the scale's update). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "../core/attrs.h"
#include "../core/autodiff.h"
#include "cpu_kernels.h"

/* Adam's update of elements [lo, hi). Written 4 wide by hand: sqrtf keeps
 * its errno branch in this build (no -fno-math-errno), and GCC vectorises
 * no loop with a branch, so the plain loop was a scalar sqrt and divide
 * per element, about 15 cycles: a third of the MLP step at batch 128
 * (docs/PERF.md). SSE2 is baseline x86-64 (no dispatch needed); sqrtps and
 * divps round as sqrtss and divss do, and the operations keep their order,
 * so the results are the scalar loop's, bit for bit. */
static void adam_range(float *w, const float *dw, float *m, float *v, int64_t lo, int64_t hi, float lr_t,
                       float b1, float b2, float eps_t, float wd, float gs) {
    int64_t i = lo;
#ifdef __SSE2__
    const __m128 B1 = _mm_set1_ps(b1), C1 = _mm_set1_ps(1.0f - b1), B2 = _mm_set1_ps(b2),
                 C2 = _mm_set1_ps(1.0f - b2), LR = _mm_set1_ps(lr_t), EPS = _mm_set1_ps(eps_t), WD = _mm_set1_ps(wd),
                 GS = _mm_set1_ps(gs);
    for (; i + 4 <= hi; i += 4) {
        __m128 wi = _mm_loadu_ps(w + i);
        __m128 g = _mm_add_ps(_mm_div_ps(_mm_loadu_ps(dw + i), GS), _mm_mul_ps(WD, wi));
        __m128 mi = _mm_add_ps(_mm_mul_ps(B1, _mm_loadu_ps(m + i)), _mm_mul_ps(C1, g));
        __m128 vi = _mm_add_ps(_mm_mul_ps(B2, _mm_loadu_ps(v + i)), _mm_mul_ps(_mm_mul_ps(C2, g), g));
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        __m128 step = _mm_div_ps(_mm_mul_ps(LR, mi), _mm_add_ps(_mm_sqrt_ps(vi), EPS));
        _mm_storeu_ps(w + i, _mm_sub_ps(wi, step));
    }
#endif
    for (; i < hi; i++) {
        float g = dw[i] / gs + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        w[i] -= lr_t * m[i] / (sqrtf(v[i]) + eps_t);
    }
}

/* Whether x[0..n) holds an inf or a NaN: the exponent's bits all set,
 * tested on the bits so no floating-point mode can fold the test away. */
static bool any_nonfinite(const float *x, int64_t n) {
    int bad = 0;
#pragma omp parallel for simd reduction(| : bad) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        bad |= (b & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

/* (found [1], x1..xk) -> found + 1 when an x overflowed; (scale, clean, found):
 * the scale halves on an overflow, doubles after `interval` clean steps,
 * within [DG_LOSS_SCALE_MIN, FLT_MAX] (ops.h) */
static void loss_scale_op(const dg_step *s) {
    const dg_node *nd = s->node;
    const float found = *(const float *)s->in[nd->op == DG_OP_FOUND_INF ? 0 : 2];
    if (nd->op == DG_OP_FOUND_INF) {
        bool bad = false;
        for (int i = 1; i < nd->n_in && !bad; i++) bad = any_nonfinite(s->in[i], dg_node_numel(nd->in[i]));
        *(float *)s->out = found + (bad ? 1.0f : 0.0f);
        return;
    }
    float *scale = s->inout[0], *clean = s->inout[1];
    if (found != 0.0f) {
        *scale = fmaxf(*scale * 0.5f, DG_LOSS_SCALE_MIN);
        *clean = 0.0f;
    } else if (++*clean >= dg_attr_scalar_of(nd).value) {
        if (isfinite(*scale * 2.0f)) *scale *= 2.0f;
        *clean = 0.0f;
    }
}

void dg__cpu_update(const dg_step *s) {
    const dg_node *nd = s->node;
    if (nd->op == DG_OP_FOUND_INF || nd->op == DG_OP_LOSS_SCALE_UPDATE) {
        loss_scale_op(s);
        return;
    }
    /* the skip flag, an input past the row's, then the gradient scale
     * (dg_optim_apply_ex); no scale divides by 1, which changes no bit */
    const int n_row = dg_op_info_get(nd->op)->n_in;
    if (nd->n_in > n_row && *(const float *)s->in[n_row] != 0.0f) return;
    const float gs = nd->n_in > n_row + 1 ? *(const float *)s->in[n_row + 1] : 1.0f;
    dg_attr_optim a = dg_attr_optim_of(nd);
    float lr = a.lr, b1 = a.beta1, b2 = a.beta2, eps = a.eps, wd = a.weight_decay;
    int64_t n = dg_node_numel(nd);
    float *w = s->inout[0];
    const float *dw = s->in[1];
    switch (nd->op) {
    case DG_OP_SGD_UPDATE:
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) w[i] -= lr * (dw[i] / gs + wd * w[i]);
        break;
    case DG_OP_MOMENTUM_UPDATE: {
        float *v = s->inout[2];
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            v[i] = b1 * v[i] + (dw[i] / gs + wd * w[i]);
            w[i] -= lr * v[i];
        }
        break;
    }
    case DG_OP_ADAM_STEP:
        w[0] += 1.0f;
        break;
    case DG_OP_ADAM_UPDATE: {
        float *m = s->inout[2], *v = s->inout[3];
        float t = *(const float *)s->in[4];
        /* bias correction folded into the step size */
        float lr_t = lr * sqrtf(1.0f - powf(b2, t)) / (1.0f - powf(b1, t));
        float eps_t = eps * sqrtf(1.0f - powf(b2, t));
        /* blocks of 1024 elements (whole 4-wide vectors), shared out statically */
        int64_t blocks = (n + 1023) / 1024;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < blocks; b++)
            adam_range(w, dw, m, v, b * 1024, b + 1 < blocks ? (b + 1) * 1024 : n, lr_t, b1, b2, eps_t, wd, gs);
        break;
    }
    case DG_OP_FOUND_INF: case DG_OP_LOSS_SCALE_UPDATE: /* loss_scale_op's */
        break;
    /* not an update: cpu_compute sends only DG_OPS_OPTIM here */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}
