/* gpu_cast.cu: DG_OP_CAST on the GPU (cpu_cast.c's counterpart): float32
 * to bf16 or f16 rounded to nearest even, or back exactly, with the
 * toolkit's conversions (core/dtype_convert.h's bits for every number and
 * infinity; a NaN stays a NaN, its payload may differ). The same
 * conversions carry the row ops' bf16 and f16 storage to and from their
 * float32 kernels (dg__gpu_widened). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu_common.cuh"

#define BLOCK 256

template <typename T> __device__ __forceinline__ T narrow(float v);
template <> __device__ __forceinline__ __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half narrow(float v) { return __float2half_rn(v); }

__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

template <typename T> __global__ void k_narrow(const float *__restrict__ x, T *__restrict__ y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = narrow<T>(x[i]);
}

template <typename T> __global__ void k_widen(const T *__restrict__ x, float *__restrict__ y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = widen(x[i]);
}

dg_status dg__gpu_cast(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype from = nd->in[0]->dtype, to = nd->dtype;
    long long n = dg_node_numel(nd);
    unsigned grid = grid_for(n, BLOCK);
    if (from == DG_F32 && to == DG_BF16)
        k_narrow<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>((const float *)s->in[0], (__nv_bfloat16 *)s->out, n);
    else if (from == DG_F32 && to == DG_F16)
        k_narrow<__half><<<grid, BLOCK, 0, c->stream>>>((const float *)s->in[0], (__half *)s->out, n);
    else if (from == DG_BF16 && to == DG_F32)
        k_widen<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>((const __nv_bfloat16 *)s->in[0], (float *)s->out, n);
    else if (from == DG_F16 && to == DG_F32)
        k_widen<__half><<<grid, BLOCK, 0, c->stream>>>((const __half *)s->in[0], (float *)s->out, n);
    else
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: cast %s from %s to %s", nd->name, dg_dtype_name(from),
                        dg_dtype_name(to));
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static bool low_precision(dg_dtype t) { return t == DG_BF16 || t == DG_F16; }

/* x (dtype t) -> y float32, or back, n elements, on the stream */
static void widen_into(gpu_ctx *c, dg_dtype t, const void *x, float *y, long long n) {
    unsigned grid = grid_for(n, BLOCK);
    if (t == DG_BF16) k_widen<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>((const __nv_bfloat16 *)x, y, n);
    else k_widen<__half><<<grid, BLOCK, 0, c->stream>>>((const __half *)x, y, n);
}

static void narrow_into(gpu_ctx *c, dg_dtype t, const float *x, void *y, long long n) {
    unsigned grid = grid_for(n, BLOCK);
    if (t == DG_BF16) k_narrow<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>(x, (__nv_bfloat16 *)y, n);
    else k_narrow<__half><<<grid, BLOCK, 0, c->stream>>>(x, (__half *)y, n);
}

/* each float32 copy starts on 256 bytes, as the plan's buffers do (the
 * kernels' vector loads rely on it) */
static size_t copy_bytes(const dg_node *n) { return ((size_t)dg_node_numel(n) * sizeof(float) + 255) & ~(size_t)255; }

bool dg__gpu_widens(const dg_node *n) {
    if (low_precision(n->dtype)) return true;
    for (int i = 0; i < n->n_in; i++)
        if (low_precision(n->in[i]->dtype)) return true;
    return false;
}

size_t dg__gpu_widened_bytes(const dg_node *n) {
    switch (n->op) {
    case DG_OP_LAYER_NORM: case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE:
        break;
    default:
        return 0;
    }
    size_t bytes = low_precision(n->dtype) ? copy_bytes(n) : 0;
    for (int i = 0; i < n->n_in; i++)
        if (low_precision(n->in[i]->dtype)) bytes += copy_bytes(n->in[i]);
    return bytes;
}

dg_status dg__gpu_widened(gpu_ctx *c, const dg_step *s, dg_status (*f32)(gpu_ctx *, const dg_step *)) {
    const dg_node *nd = s->node;
    if (!s->scratch || !dg__gpu_widened_bytes(nd))
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s of %s): the step gives no scratch for its float32 "
                        "copies", nd->name, dg_op_name(nd->op), dg_dtype_name(nd->dtype));
    dg_step w = *s;
    char *p = (char *)s->scratch;
    for (int i = 0; i < nd->n_in; i++) {
        if (!low_precision(nd->in[i]->dtype)) continue;
        widen_into(c, nd->in[i]->dtype, s->in[i], (float *)p, dg_node_numel(nd->in[i]));
        DG_CUDA_CHECK_LAUNCH();
        w.in[i] = p;
        p += copy_bytes(nd->in[i]);
    }
    if (low_precision(nd->dtype)) w.out = p;
    dg_status st = f32(c, &w);
    if (st != DG_OK || !low_precision(nd->dtype)) return st;
    narrow_into(c, nd->dtype, (const float *)w.out, s->out, dg_node_numel(nd));
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
