/* cpu_optim.c: optimizer updates, in place on the parameter and state: the
 * step's inout[i] are the inputs the op table says the update writes. */
#include <math.h>
#include <stdint.h>

#include "../core/attrs.h"
#include "cpu_kernels.h"

void dg__cpu_update(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_attr_optim a = dg_attr_optim_of(nd);
    float lr = a.lr, b1 = a.beta1, b2 = a.beta2, eps = a.eps, wd = a.weight_decay;
    int64_t n = dg_node_numel(nd);
    float *w = s->inout[0];
    const float *dw = s->in[1];
    switch (nd->op) {
    case DG_OP_SGD_UPDATE:
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) w[i] -= lr * (dw[i] + wd * w[i]);
        break;
    case DG_OP_MOMENTUM_UPDATE: {
        float *v = s->inout[2];
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            v[i] = b1 * v[i] + (dw[i] + wd * w[i]);
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
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float g = dw[i] + wd * w[i];
            m[i] = b1 * m[i] + (1.0f - b1) * g;
            v[i] = b2 * v[i] + (1.0f - b2) * g * g;
            w[i] -= lr_t * m[i] / (sqrtf(v[i]) + eps_t);
        }
        break;
    }
    default: break;
    }
}
