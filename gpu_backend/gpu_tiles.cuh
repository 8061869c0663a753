/* gpu_tiles.cuh: what the tiled tensor-core kernels (gpu_attention.cu,
 * gpu_gemm_tf32.cu, gpu_gemm_wgmma.cu) share: cp.async copies from global
 * to shared memory, which need compute capability 8.0 (compiled for an
 * older device they are empty: those kernels are never launched there),
 * and the grouped order in which GEMM blocks visit their tiles. */
#ifndef DG_GPU_TILES_CUH
#define DG_GPU_TILES_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define DG_NO_CP_ASYNC 1
#endif

/* bytes (0..16) of the 16 at src into shared memory at byte address dst,
 * the rest zero-filled; src is not read when bytes is 0 */
static __device__ __forceinline__ void cp_async16(uint32_t dst, const float *src, int bytes) {
#ifndef DG_NO_CP_ASYNC
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
#endif
}

/* one float (bytes 4) or a zero (bytes 0) */
static __device__ __forceinline__ void cp_async4(uint32_t dst, const float *src, int bytes) {
#ifndef DG_NO_CP_ASYNC
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
#endif
}

static __device__ __forceinline__ void cp_async16(float *dst, const float *src, int bytes) {
    cp_async16((uint32_t)__cvta_generic_to_shared(dst), src, bytes);
}

static __device__ __forceinline__ void cp_async4(float *dst, const float *src, int bytes) {
    cp_async4((uint32_t)__cvta_generic_to_shared(dst), src, bytes);
}

static __device__ __forceinline__ void cp_commit(void) {
#ifndef DG_NO_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* wait until at most N committed groups are still in flight */
template <int N> static __device__ __forceinline__ void cp_wait(void) {
#ifndef DG_NO_CP_ASYNC
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* The C tile (tm, tn) of block b in a grid of tiles_m x tiles_n: blocks
 * next to each other in launch order cover `group` tile rows by a few
 * tile columns, so the blocks resident at once share their rows of A and
 * columns of B in L2. */
static __device__ __forceinline__ void grouped_tile(int b, int tiles_m, int tiles_n, int group, int *tm, int *tn) {
    int in_group = group * tiles_n, first_m = b / in_group * group;
    int rows = min(tiles_m - first_m, group);
    *tm = first_m + b % in_group % rows;
    *tn = b % in_group / rows;
}

#endif
