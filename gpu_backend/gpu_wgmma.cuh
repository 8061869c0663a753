/* gpu_wgmma.cuh: what the two wgmma GEMM kernels (gpu_gemm_wgmma.cu, TF32;
 * gpu_gemm_wgmma_lowp.cu, bf16 and fp16) share: the 128-byte swizzled
 * shared-memory layout, its matrix descriptors, and the fences and waits
 * around wgmma.mma_async. Both files are compiled for sm_90a alone (CMake);
 * a pass for another target defines WG_NO_WGMMA, under which these are
 * empty and the kernels trap (never launched there). */
#ifndef DG_GPU_WGMMA_CUH
#define DG_GPU_WGMMA_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_NO_WGMMA 1
#endif

/* Rows of 128 bytes, 8 rows to a 1024-byte swizzle atom: the byte offset
 * of 16-byte chunk c (0..7) of row r, the chunk index XORed with r % 8 as
 * the hardware's 128-byte swizzle does on address bits 4-6 and 7-9 (so the
 * tile must start on a 1024-byte boundary). */
static __device__ __forceinline__ uint32_t wg_chunk(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

/* A shared-memory matrix descriptor under the 128-byte swizzle for the
 * operand at byte address addr: lbo, the leading byte offset (MN-major:
 * from one 64-element-wide atom column to the next along m or n; K-major:
 * unused, 16), sbo, the stride byte offset (from one 8-row group to the
 * next: 8 rows of m/n when K-major, 8 k when MN-major; 1024 for atoms
 * stacked densely). Fields in 16-byte units. */
static __device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32 |
           (uint64_t)1 << 62;
}

static __device__ __forceinline__ void wg_fence(void) {
#ifndef WG_NO_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void wg_commit(void) {
#ifndef WG_NO_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/* until at most N committed wgmma groups of this warpgroup are in flight */
template <int N> static __device__ __forceinline__ void wg_wait(void) {
#ifndef WG_NO_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* this thread's shared-memory writes (cp.async, st.shared) made visible
 * to the tensor cores' reads (the async proxy) */
static __device__ __forceinline__ void proxy_fence(void) {
#ifndef WG_NO_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#endif
