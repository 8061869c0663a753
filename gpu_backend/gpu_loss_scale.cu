/* gpu_loss_scale.cu: the loss-scaling ops (cpu_optim.c's loss_scale_op),
 * on the device so a replayed CUDA graph of an fp16 step needs no host
 * round trip:
 *   found_inf         (found [1], x1..xk) -> [1]: found + 1 when an x
 *                     holds an inf or NaN, else found
 *   loss_scale_update (scale [1], clean [1], found [1]) writes scale and
 *                     clean: halve on an overflow, double after `interval`
 *                     (dg_attr_scalar) clean steps */
#include "../core/autodiff.h"
#include "gpu_common.cuh"

#define BLOCK 256

__global__ void k_found_copy(const float *found, float *out) { out[0] = found[0]; }

/* the tensors one found_inf node tests, passed by value */
struct found_operands {
    const float *x[DG_FOUND_INF_MAX];
    long long    n[DG_FOUND_INF_MAX];
};

/* Row blockIdx.y of the grid scans x[blockIdx.y] with a grid-stride loop
 * (rows past a short tensor's end scan nothing). Every block that sees an
 * inf or NaN writes the same value, found + 1 (out is never found's
 * storage: the plan keeps an input live through its reader's step), so the
 * result does not depend on which block wins. */
__global__ void k_found_scan(found_operands a, const float *found, float *out) {
    const float *x = a.x[blockIdx.y];
    const long long n = a.n[blockIdx.y];
    int bad = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        bad |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
    if (__syncthreads_or(bad) && threadIdx.x == 0) out[0] = found[0] + 1.0f;
}

/* blocks a row: enough for the largest tensor, at most a few waves */
#define SCAN_BLOCKS_MAX 2048

__global__ void k_scale_update(float *scale, float *clean, const float *found, float interval) {
    if (found[0] != 0.0f) {
        scale[0] *= 0.5f;
        clean[0] = 0.0f;
    } else if ((clean[0] += 1.0f) >= interval) {
        scale[0] *= 2.0f;
        clean[0] = 0.0f;
    }
}

dg_status dg__gpu_loss_scale(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    if (nd->op == DG_OP_FOUND_INF) {
        const int k = nd->n_in - 1;
        if (k < 1 || k > DG_FOUND_INF_MAX)
            return dg__fail(DG_ERR_INVALID, "gpu: found_inf node '%s' tests %d tensors (1 to %d)", nd->name, k,
                            DG_FOUND_INF_MAX);
        found_operands a = {};
        long long most = 1;
        for (int i = 0; i < k; i++) {
            a.x[i] = (const float *)s->in[1 + i];
            a.n[i] = dg_node_numel(nd->in[1 + i]);
            if (a.n[i] > most) most = a.n[i];
        }
        unsigned blocks = grid_for(most, BLOCK);
        dim3 grid(blocks < SCAN_BLOCKS_MAX ? blocks : SCAN_BLOCKS_MAX, (unsigned)k);
        k_found_copy<<<1, 1, 0, c->stream>>>((const float *)s->in[0], (float *)s->out);
        DG_CUDA_CHECK_LAUNCH();
        k_found_scan<<<grid, BLOCK, 0, c->stream>>>(a, (const float *)s->in[0], (float *)s->out);
        DG_CUDA_CHECK_LAUNCH();
        return DG_OK;
    }
    if (nd->op != DG_OP_LOSS_SCALE_UPDATE || !s->inout[0] || !s->inout[1])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s) is no loss-scale update with a writable scale and "
                        "count", nd->name, dg_op_name(nd->op));
    k_scale_update<<<1, 1, 0, c->stream>>>((float *)s->inout[0], (float *)s->inout[1], (const float *)s->in[2],
                                           dg_attr_scalar_of(nd).value);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
