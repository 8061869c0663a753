/* cpu_optim.c: optimizer updates, in place on the parameter.
 * p.f = {lr, beta1 or momentum, beta2, eps}. */
#include <math.h>
#include <stdint.h>

#include "cpu_kernels.h"

void dg__cpu_update(const dg_step *s) {
    const dg_node *nd = s->node;
    float lr = nd->p.f[0], b1 = nd->p.f[1], b2 = nd->p.f[2], eps = nd->p.f[3];
    int64_t n = dg_node_numel(nd);
    float *w = s->out;       /* = s->in[0]: the update writes its parameter */
    const float *dw = s->in[1];
    switch (nd->op) {
    case DG_OP_SGD_UPDATE:
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) w[i] -= lr * dw[i];
        break;
    case DG_OP_MOMENTUM_UPDATE: {
        float *v = (float *)s->in[2];
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            v[i] = b1 * v[i] + dw[i];
            w[i] -= lr * v[i];
        }
        break;
    }
    case DG_OP_ADAM_STEP:
        w[0] += 1.0f;
        break;
    case DG_OP_ADAM_UPDATE: {
        float *m = (float *)s->in[2], *v = (float *)s->in[3];
        float t = *(const float *)s->in[4];
        /* bias correction folded into the step size */
        float lr_t = lr * sqrtf(1.0f - powf(b2, t)) / (1.0f - powf(b1, t));
        float eps_t = eps * sqrtf(1.0f - powf(b2, t));
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            m[i] = b1 * m[i] + (1.0f - b1) * dw[i];
            v[i] = b2 * v[i] + (1.0f - b2) * dw[i] * dw[i];
            w[i] -= lr_t * m[i] / (sqrtf(v[i]) + eps_t);
        }
        break;
    }
    default: break;
    }
}
