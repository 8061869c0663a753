/* gpu_backend.h: the CUDA + cuBLAS backend (C API). Built whenever nvcc is
 * found; available only where a CUDA device answers. */
#ifndef DG_GPU_BACKEND_H
#define DG_GPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_gpu_gemm {
    DG_GPU_GEMM_CUBLAS,  /* cublasSgemm / StridedBatched                  */
    DG_GPU_GEMM_NAIVE,   /* one thread per element of C                   */
    DG_GPU_GEMM_TILED,   /* shared-memory tiles, 8x8 register blocking    */
} dg_gpu_gemm;

typedef struct dg_gpu_opts {
    bool tf32;         /* cuBLAS may use TF32 tensor cores (default off)     */
    bool cuda_graphs;  /* dg_plan_run replays a captured CUDA graph (default on) */
    bool sync_debug;   /* synchronise after every node so a fault names it; also
                          on when the environment sets DG_GPU_SYNC=1          */
} dg_gpu_opts;

/* opts NULL: defaults. No device: DG_ERR_NO_DEVICE, "no CUDA device: ...". */
dg_status dg_gpu_backend_new(dg_backend **out, const dg_gpu_opts *opts);
dg_status dg_gpu_set_tf32(dg_backend *be, bool on);
void      dg_gpu_set_cuda_graphs(dg_backend *be, bool on);
void      dg_gpu_set_gemm(dg_backend *be, dg_gpu_gemm impl);
/* "NVIDIA H100 80GB HBM3, 132 SMs, cc 9.0, driver 13.0, runtime 13.0, cuBLAS 130100" */
const char *dg_gpu_info(const dg_backend *be, char *buf, size_t n);

/* Row-major C[m,n] = op(A) op(B) on device pointers, on the backend's
 * stream (the bench times these directly). */
dg_status dg_gpu_sgemm(dg_backend *be, dg_gpu_gemm impl, bool ta, bool tb, int m, int n, int k,
                       const float *A, const float *B, float *C);

/* Device-to-device copy on the backend's stream (the bandwidth ceiling). */
dg_status dg_gpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes);

/* Device timing with CUDA events on the backend's stream. */
dg_status dg_gpu_event_record(dg_backend *be, int which);   /* which: 0 start, 1 stop */
dg_status dg_gpu_event_elapsed(dg_backend *be, float *ms);  /* syncs on stop          */

#ifdef __cplusplus
}
#endif
#endif
