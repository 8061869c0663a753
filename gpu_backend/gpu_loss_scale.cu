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

/* elements a block scans at a time: 8 a thread, one tensor's */
#define SCAN_CHUNK (8 * BLOCK)

/* the tensors one found_inf node tests, passed by value: tensor t holds
 * chunks first[t] .. first[t + 1] - 1 of the node's SCAN_CHUNK-element
 * chunks, so the grid is sized by the elements, not by the largest tensor
 * times the count (a grid row per tensor launched mostly idle blocks: the
 * char-LM's fp16 step got 0.15 ms slower that way) */
struct found_operands {
    const float *x[DG_FOUND_INF_MAX];
    long long    n[DG_FOUND_INF_MAX];
    long long    first[DG_FOUND_INF_MAX + 1];
    int          k;
};

/* Each block takes chunks blockIdx.x, + gridDim.x, ...; a chunk's tensor
 * is found among the k first[] bounds (uniform over the block). Every
 * block that sees an inf or NaN writes the same value, found + 1 (out is
 * never found's storage: the plan keeps an input live through its
 * reader's step), so the result does not depend on which block wins. */
__global__ void k_found_scan(found_operands a, const float *found, float *out) {
    int bad = 0;
    for (long long c = blockIdx.x; c < a.first[a.k]; c += gridDim.x) {
        int t = 0;
        while (c >= a.first[t + 1]) t++;
        const float *x = a.x[t];
        const long long lo = (c - a.first[t]) * SCAN_CHUNK, n = a.n[t];
#pragma unroll
        for (int j = 0; j < SCAN_CHUNK / BLOCK; j++) {
            long long i = lo + j * BLOCK + threadIdx.x;
            if (i < n) bad |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
        }
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) out[0] = found[0] + 1.0f;
}

__global__ void k_scale_update(float *scale, float *clean, const float *found, float interval) {
    if (found[0] != 0.0f) { /* halved to no less than the floor, doubled where finite (ops.h) */
        scale[0] = fmaxf(scale[0] * 0.5f, DG_LOSS_SCALE_MIN);
        clean[0] = 0.0f;
    } else if ((clean[0] += 1.0f) >= interval) {
        if (isfinite(scale[0] * 2.0f)) scale[0] *= 2.0f;
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
        a.k = k;
        for (int i = 0; i < k; i++) {
            a.x[i] = (const float *)s->in[1 + i];
            a.n[i] = dg_node_numel(nd->in[1 + i]);
            a.first[i + 1] = a.first[i] + (a.n[i] + SCAN_CHUNK - 1) / SCAN_CHUNK;
        }
        /* a few blocks an SM; more chunks than that are taken in turn */
        const long long most = 4LL * c->prop.multiProcessorCount, chunks = a.first[k];
        unsigned grid = (unsigned)(chunks < 1 ? 1 : chunks < most ? chunks : most);
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
