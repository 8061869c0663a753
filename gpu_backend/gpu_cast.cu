/* gpu_cast.cu: DG_OP_CAST on the GPU (cpu_cast.c's counterpart), and the
 * same conversions for a 16-bit convolution's float32 copies (gpu_conv.cu):
 * float32 to bf16 or f16 rounded to nearest even, or back exactly, with the
 * toolkit's conversions: core/dtype_convert.h's bits for every value
 * (narrowing turns a NaN into the canonical 0x7fff of either type, as the scalar
 * code does; widening an f16 NaN keeps its payload, gpu_lowp.cuh's
 * f16_widen, as the scalar code and the CPU's F16C do). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu_common.cuh"
#include "gpu_lowp.cuh"

#define BLOCK 256

template <typename T> __device__ __forceinline__ T narrow(float v);
template <> __device__ __forceinline__ __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half narrow(float v) { return __float2half_rn(v); }

__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return f16_widen(__half_as_ushort(v)); }

template <typename T> __global__ void k_narrow(const float *__restrict__ x, T *__restrict__ y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = narrow<T>(x[i]);
}

template <typename T> __global__ void k_widen(const T *__restrict__ x, float *__restrict__ y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = widen(x[i]);
}

dg_status dg__gpu_widen(gpu_ctx *c, dg_dtype t, const void *x, float *y, long long n) {
    unsigned grid = grid_for(n, BLOCK);
    if (t == DG_BF16)
        k_widen<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>((const __nv_bfloat16 *)x, y, n);
    else if (t == DG_F16)
        k_widen<__half><<<grid, BLOCK, 0, c->stream>>>((const __half *)x, y, n);
    else
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: no widening of %s to f32", dg_dtype_name(t));
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_narrow(gpu_ctx *c, dg_dtype t, const float *x, void *y, long long n) {
    unsigned grid = grid_for(n, BLOCK);
    if (t == DG_BF16)
        k_narrow<__nv_bfloat16><<<grid, BLOCK, 0, c->stream>>>(x, (__nv_bfloat16 *)y, n);
    else if (t == DG_F16)
        k_narrow<__half><<<grid, BLOCK, 0, c->stream>>>(x, (__half *)y, n);
    else
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: no rounding of f32 to %s", dg_dtype_name(t));
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_cast(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype from = nd->in[0]->dtype, to = nd->dtype;
    long long n = dg_node_numel(nd);
    if (from == DG_F32 && (to == DG_BF16 || to == DG_F16)) return dg__gpu_narrow(c, to, (const float *)s->in[0], s->out, n);
    if ((from == DG_BF16 || from == DG_F16) && to == DG_F32) return dg__gpu_widen(c, from, s->in[0], (float *)s->out, n);
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: cast %s from %s to %s", nd->name, dg_dtype_name(from),
                    dg_dtype_name(to));
}
