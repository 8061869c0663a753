/* gpu_optim.cu: optimizer updates (cpu_optim.c's counterpart), in place on
 * the parameter and the optimizer state. The inputs they write arrive as
 * the step's writable inout[] pointers (the op table's `writes` mask):
 *   sgd_update      (w, dw)          writes w
 *   momentum_update (w, dw, v)       writes w, v
 *   adam_step       (t [1])          writes t
 *   adam_update     (w, dw, m, v, t) writes w, m, v
 * all of the parameter's shape but t. Attributes: dg_attr_optim {lr, beta1
 * (momentum's mu), beta2, eps, weight_decay}; each rule reads the gradient
 * as g = dw / gs + weight_decay w. An input past the row's is the skip
 * flag [1] (dg_optim_apply_ex): every thread reads it on the device and a
 * non-zero flag writes nothing; a second one is the gradient scale gs [1]
 * (fp16's loss scale, read on the device too, so a replayed graph follows
 * its changes; none: 1). The loss-scaling ops of the same family are
 * gpu_loss_scale.cu's. */
#include "gpu_common.cuh"

#define BLOCK 256

/* the step is skipped: skip is NULL where the update has no flag */
__device__ __forceinline__ bool skipped(const float *skip) { return skip && *skip != 0.0f; }

/* the gradient scale: gs is NULL where the update has none (dividing by 1
 * changes no bit) */
__device__ __forceinline__ float grad_scale(const float *gs) { return gs ? *gs : 1.0f; }

__global__ void k_sgd(float *w, const float *dw, long long n, float lr, float wd, const float *skip, const float *gs) {
    if (skipped(skip)) return;
    const float s = grad_scale(gs);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        w[i] -= lr * (dw[i] / s + wd * w[i]);
}

__global__ void k_momentum(float *w, const float *dw, float *v, long long n, float lr, float mu, float wd,
                           const float *skip, const float *gs) {
    if (skipped(skip)) return;
    const float s = grad_scale(gs);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float vi = mu * v[i] + (dw[i] / s + wd * w[i]);
        v[i] = vi;
        w[i] -= lr * vi;
    }
}

__global__ void k_adam_step(float *t, const float *skip) {
    if (!skipped(skip)) t[0] += 1.0f;
}

/* the step counter lives on the device so a captured graph stays valid */
__global__ void k_adam(float *w, const float *dw, float *m, float *v, const float *t, long long n, float lr,
                       float b1, float b2, float eps, float wd, const float *skip, const float *gs) {
    if (skipped(skip)) return;
    const float s = grad_scale(gs);
    float tt = t[0];
    float lr_t = lr * sqrtf(1.0f - powf(b2, tt)) / (1.0f - powf(b1, tt));
    float eps_t = eps * sqrtf(1.0f - powf(b2, tt));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float g = dw[i] / s + wd * w[i];
        float mi = b1 * m[i] + (1.0f - b1) * g, vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr_t * mi / (sqrtf(vi) + eps_t);
    }
}

dg_status dg__gpu_update(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    if (nd->op == DG_OP_FOUND_INF || nd->op == DG_OP_LOSS_SCALE_UPDATE) return dg__gpu_loss_scale(c, s);
    /* every input the op's row marks as written must come writable (a plan
     * sees to it; this guards a step made without one) */
    unsigned writes = dg_op_info_get(nd->op)->writes;
    for (int i = 0; i < nd->n_in; i++)
        if ((writes >> i & 1u) && !s->inout[i])
            return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s): input %d is written in place but the step "
                            "gives no writable pointer for it", nd->name, dg_op_name(nd->op), i);
    long long n = dg_node_numel(nd);
    float *w = (float *)s->inout[0];
    const float *dw = (const float *)s->in[1];
    dg_attr_optim o = dg_attr_optim_of(nd);
    const int n_row = dg_op_info_get(nd->op)->n_in;
    const float *skip = nd->n_in > n_row ? (const float *)s->in[n_row] : NULL;
    const float *gs = nd->n_in > n_row + 1 ? (const float *)s->in[n_row + 1] : NULL;
    unsigned grid = grid_for(n, BLOCK);
    switch (nd->op) {
    case DG_OP_SGD_UPDATE: k_sgd<<<grid, BLOCK, 0, c->stream>>>(w, dw, n, o.lr, o.weight_decay, skip, gs); break;
    case DG_OP_MOMENTUM_UPDATE:
        k_momentum<<<grid, BLOCK, 0, c->stream>>>(w, dw, (float *)s->inout[2], n, o.lr, o.beta1, o.weight_decay,
                                                  skip, gs);
        break;
    case DG_OP_ADAM_STEP: k_adam_step<<<1, 1, 0, c->stream>>>(w, skip); break;
    case DG_OP_ADAM_UPDATE:
        k_adam<<<grid, BLOCK, 0, c->stream>>>(w, dw, (float *)s->inout[2], (float *)s->inout[3],
                                              (const float *)s->in[4], n, o.lr, o.beta1, o.beta2, o.eps,
                                              o.weight_decay, skip, gs);
        break;
    case DG_OP_FOUND_INF: case DG_OP_LOSS_SCALE_UPDATE: /* sent to dg__gpu_loss_scale above */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not an update op", dg_op_name(nd->op));
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
