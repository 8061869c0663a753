/* gpu_lowp.cuh: loads and stores of float32, bf16 or f16 storage for the
 * kernels that compute in float32 (elementwise, softmax): overloads on the
 * storage type, widening exact, narrowing to nearest even
 * (__float2bfloat16_rn, __float2half_rn: core/dtype_convert.h's bits). ld4
 * and st4 move four elements at 4j: one float4 (16 bytes) or one uint2 of
 * four 16-bit values (8 bytes), the address aligned to that size. */
#ifndef DG_GPU_LOWP_CUH
#define DG_GPU_LOWP_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* f16 bits widened to float32 exactly as core/dtype_convert.h's
 * dg__f16_to_f32 (and the CPU's F16C) do: a NaN keeps its sign and
 * payload, made quiet. __half2float turns every NaN into the canonical
 * 0x7fffffff, so the two backends would give different bits. Both
 * values computed and one selected: an early return for the NaN made
 * four branches of each 4-wide load, and the f16 elementwise kernels
 * 20-25% slower than bf16's (docs/PERF.md). */
static __device__ __forceinline__ float f16_widen(unsigned short u) {
    const float f = __half2float(__ushort_as_half(u));
    const unsigned nan = (unsigned)(u & 0x8000u) << 16 | 0x7fc00000u | (unsigned)(u & 0x3ffu) << 13;
    return (u & 0x7fffu) > 0x7c00u ? __uint_as_float(nan) : f;
}

static __device__ __forceinline__ float ld(const float *p, long long i) { return p[i]; }
static __device__ __forceinline__ float ld(const __nv_bfloat16 *p, long long i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ float ld(const __half *p, long long i) { return f16_widen(__half_as_ushort(p[i])); }
static __device__ __forceinline__ void st(float *p, long long i, float v) { p[i] = v; }
static __device__ __forceinline__ void st(__nv_bfloat16 *p, long long i, float v) { p[i] = __float2bfloat16_rn(v); }
static __device__ __forceinline__ void st(__half *p, long long i, float v) { p[i] = __float2half_rn(v); }

static __device__ __forceinline__ float4 ld4(const float *p, int j) { return __ldg((const float4 *)p + j); }
static __device__ __forceinline__ float4 ld4(const __nv_bfloat16 *p, int j) {
    uint2 u = __ldg((const uint2 *)p + j); /* element 4j in u.x's low half */
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
static __device__ __forceinline__ float4 ld4(const __half *p, int j) {
    uint2 u = __ldg((const uint2 *)p + j);
    return make_float4(f16_widen((unsigned short)(u.x & 0xffffu)), f16_widen((unsigned short)(u.x >> 16)),
                       f16_widen((unsigned short)(u.y & 0xffffu)), f16_widen((unsigned short)(u.y >> 16)));
}

static __device__ __forceinline__ void st4(float *p, int j, float4 v) { ((float4 *)p)[j] = v; }
static __device__ __forceinline__ unsigned pack2(__nv_bfloat16 a, __nv_bfloat16 b) {
    return (unsigned)__bfloat16_as_ushort(a) | (unsigned)__bfloat16_as_ushort(b) << 16;
}
static __device__ __forceinline__ unsigned pack2(__half a, __half b) {
    return (unsigned)__half_as_ushort(a) | (unsigned)__half_as_ushort(b) << 16;
}
static __device__ __forceinline__ void st4(__nv_bfloat16 *p, int j, float4 v) {
    ((uint2 *)p)[j] = make_uint2(pack2(__float2bfloat16_rn(v.x), __float2bfloat16_rn(v.y)),
                                 pack2(__float2bfloat16_rn(v.z), __float2bfloat16_rn(v.w)));
}
static __device__ __forceinline__ void st4(__half *p, int j, float4 v) {
    ((uint2 *)p)[j] = make_uint2(pack2(__float2half_rn(v.x), __float2half_rn(v.y)),
                                 pack2(__float2half_rn(v.z), __float2half_rn(v.w)));
}

#endif
