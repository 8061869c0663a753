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

/* TF32 and CUDA-graph replay are not backend settings: they are options of
 * each plan (dg_plan_opts) and an argument of dg_gpu_sgemm. */
typedef struct dg_gpu_opts {
    int  device;       /* CUDA device index (default 0); the backend makes it
                          current on every entry, so backends on several
                          devices can live in one process                    */
    bool sync_debug;   /* synchronise after every node so a fault names it; also
                          on when the environment sets DG_GPU_SYNC=1          */
} dg_gpu_opts;

/* opts NULL: defaults. No device: DG_ERR_NO_DEVICE, "no CUDA device: ...";
 * a device index out of range: DG_ERR_INVALID. */
dg_status dg_gpu_backend_new(dg_backend **out, const dg_gpu_opts *opts);
/* CUDA devices that answer (0 where none does or the driver is missing) */
int       dg_gpu_device_count(void);
int       dg_gpu_device(const dg_backend *be);
void      dg_gpu_set_gemm(dg_backend *be, dg_gpu_gemm impl);
/* "NVIDIA H100 80GB HBM3, 132 SMs, cc 9.0, driver 13.0, runtime 13.0, cuBLAS 130100" */
const char *dg_gpu_info(const dg_backend *be, char *buf, size_t n);

/* Row-major C[m,n] = op(A) op(B) on device pointers, on the backend's
 * stream (the bench times these directly); tf32: cuBLAS may use TF32
 * tensor cores (DG_GPU_GEMM_CUBLAS only). */
dg_status dg_gpu_sgemm(dg_backend *be, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                       const float *A, const float *B, float *C);

/* Whether the backend's device has had a sticky fault (an illegal address
 * in a kernel, ...): then every call fails at once with DG_ERR_BACKEND, for
 * the rest of the process. why: the first fault's error, call and place. */
bool      dg_gpu_faulted(const dg_backend *be, char *why, size_t n);
/* For tests of fault handling: runs a kernel that stores through a null
 * pointer, which leaves the device faulted. Returns DG_ERR_BACKEND. */
dg_status dg_gpu_inject_fault(dg_backend *be);

/* Device-to-device copy on the backend's stream (the bandwidth ceiling). */
dg_status dg_gpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
