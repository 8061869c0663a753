/* gpu_common.cuh: the backend's context, error checking and launch helpers,
 * shared by the .cu files. */
#ifndef DG_GPU_COMMON_CUH
#define DG_GPU_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "../core/backend.h"
#include "gpu_backend.h"

struct gpu_ctx {
    int            device;
    cudaStream_t   stream;
    cublasHandle_t cublas;
    void          *cublas_ws;      /* fixed workspace: cuBLAS is graph-capture safe */
    size_t         cublas_ws_bytes;
    float         *staging;        /* pinned host buffer for uploads/downloads */
    float         *scratch;        /* device partial sums of two-pass reductions,  */
    size_t         scratch_floats; /* allocated once: runs stay allocation-free     */
    size_t         staging_bytes;
    cudaEvent_t    ev[2];
    dg_gpu_opts    opts;
    dg_gpu_gemm    gemm;
    cudaDeviceProp prop;
};

static inline gpu_ctx *gpu_of(const dg_backend *be) { return (gpu_ctx *)be->ctx; }

dg_status dg__cuda_fail(cudaError_t e, const char *expr, const char *file, int line);
dg_status dg__cublas_fail(cublasStatus_t s, const char *expr, const char *file, int line);

/* Evaluate a CUDA runtime call; on failure log it and return the mapped status. */
#define DG_CUDA_CHECK(expr)                                                         \
    do {                                                                            \
        cudaError_t e_ = (expr);                                                    \
        if (e_ != cudaSuccess) return dg__cuda_fail(e_, #expr, __FILE__, __LINE__); \
    } while (0)

#define DG_CUBLAS_CHECK(expr)                                                                  \
    do {                                                                                       \
        cublasStatus_t s_ = (expr);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return dg__cublas_fail(s_, #expr, __FILE__, __LINE__); \
    } while (0)

/* after every launch */
#define DG_CUDA_CHECK_LAUNCH() DG_CUDA_CHECK(cudaGetLastError())

/* grid for a grid-stride loop over n items */
static inline unsigned grid_for(long long n, int block) {
    long long g = (n + block - 1) / block;
    return (unsigned)(g < 1 ? 1 : g > 65535LL * 16 ? 65535LL * 16 : g);
}

/* kernels, by family; each returns the launch status */
dg_status dg__gpu_unary(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_binary(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_unary_backward(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_broadcast_to(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_permute(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_reduce(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax_backward(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax_ce(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax_ce_backward(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_update(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_matmul(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_sgemm(gpu_ctx *c, dg_gpu_gemm impl, bool ta, bool tb, int m, int n, int k, const float *A,
                        int lda, const float *B, int ldb, float *C, int ldc, int batch, long long sa,
                        long long sb, long long sc);

#endif
