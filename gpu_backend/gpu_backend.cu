/* gpu_backend.cu: the CUDA backend's vtable: device discovery, memory,
 * transfers through pinned staging, op dispatch, CUDA-graph replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.cuh"

#define STAGING_BYTES ((size_t)16 << 20)
#define CUBLAS_WS_BYTES ((size_t)32 << 20)
#define SCRATCH_FLOATS ((size_t)4 << 20) /* 16 MiB of reduction partials */

dg_status dg__cuda_fail(cudaError_t e, const char *expr, const char *file, int line) {
    dg_status st = e == cudaErrorMemoryAllocation ? DG_ERR_OOM
                 : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? DG_ERR_NO_DEVICE
                                                                                 : DG_ERR_BACKEND;
    (void)cudaGetLastError(); /* clear a sticky-free error so the backend keeps working */
    return dg__fail(st, "gpu: %s failed: %s (%s) at %s:%d", expr, cudaGetErrorName(e), cudaGetErrorString(e),
                    file, line);
}

dg_status dg__cublas_fail(cublasStatus_t s, const char *expr, const char *file, int line) {
    dg_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? DG_ERR_OOM : DG_ERR_BACKEND;
    return dg__fail(st, "gpu: %s failed: %s (%s) at %s:%d", expr, cublasGetStatusName(s),
                    cublasGetStatusString(s), file, line);
}

static const char *gpu_name(const dg_backend *) { return "gpu"; }

static void gpu_free(dg_backend *be) {
    gpu_ctx *c = gpu_of(be);
    if (c) {
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->cublas) cublasDestroy(c->cublas);
        cudaFree(c->cublas_ws);
        cudaFree(c->scratch);
        cudaFreeHost(c->staging);
        for (int i = 0; i < 2; i++)
            if (c->ev[i]) cudaEventDestroy(c->ev[i]);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

static dg_status gpu_alloc(dg_backend *be, size_t bytes, void **out) {
    (void)be;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *out = NULL;
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return dg__fail(DG_ERR_OOM, "gpu: out of device memory allocating %zu bytes (%zu of %zu bytes free)",
                        bytes, free_b, total_b);
    }
    DG_CUDA_CHECK(e);
    return DG_OK;
}

static void gpu_release(dg_backend *be, void *ptr) {
    cudaStreamSynchronize(gpu_of(be)->stream); /* kernels may still read it */
    cudaFree(ptr);
}

/* host -> pinned staging -> device, in staging-sized chunks */
static dg_status gpu_upload(dg_backend *be, void *dst, const void *src, size_t bytes) {
    gpu_ctx *c = gpu_of(be);
    for (size_t off = 0; off < bytes; off += c->staging_bytes) {
        size_t n = bytes - off < c->staging_bytes ? bytes - off : c->staging_bytes;
        DG_CUDA_CHECK(cudaStreamSynchronize(c->stream)); /* staging free again */
        memcpy(c->staging, (const char *)src + off, n);
        DG_CUDA_CHECK(cudaMemcpyAsync((char *)dst + off, c->staging, n, cudaMemcpyHostToDevice, c->stream));
    }
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return DG_OK;
}

static dg_status gpu_download(dg_backend *be, void *dst, const void *src, size_t bytes) {
    gpu_ctx *c = gpu_of(be);
    for (size_t off = 0; off < bytes; off += c->staging_bytes) {
        size_t n = bytes - off < c->staging_bytes ? bytes - off : c->staging_bytes;
        DG_CUDA_CHECK(cudaMemcpyAsync(c->staging, (const char *)src + off, n, cudaMemcpyDeviceToHost, c->stream));
        DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        memcpy((char *)dst + off, c->staging, n);
    }
    return DG_OK;
}

static dg_status gpu_sync(dg_backend *be) {
    DG_CUDA_CHECK(cudaStreamSynchronize(gpu_of(be)->stream));
    return DG_OK;
}

static bool gpu_supports(const dg_backend *, dg_op op) { return op != DG_OP_LEAF && op < DG_OP_COUNT; }

static dg_status dispatch(gpu_ctx *c, const dg_step *s) {
    switch (s->node->op) {
    case DG_OP_NEG: case DG_OP_ADD_SCALAR: case DG_OP_MUL_SCALAR: case DG_OP_POW_SCALAR:
    case DG_OP_EXP: case DG_OP_LOG: case DG_OP_SQRT: case DG_OP_ABS: case DG_OP_RELU:
    case DG_OP_LEAKY_RELU: case DG_OP_SIGMOID: case DG_OP_TANH: case DG_OP_GELU:
        return dg__gpu_unary(c, s);
    case DG_OP_ADD: case DG_OP_SUB: case DG_OP_MUL: case DG_OP_DIV:
        return dg__gpu_binary(c, s);
    case DG_OP_RELU_BACKWARD: case DG_OP_LEAKY_RELU_BACKWARD: case DG_OP_ABS_BACKWARD:
    case DG_OP_SIGMOID_BACKWARD: case DG_OP_TANH_BACKWARD: case DG_OP_GELU_BACKWARD:
        return dg__gpu_unary_backward(c, s);
    case DG_OP_MATMUL:       return dg__gpu_matmul(c, s);
    case DG_OP_PERMUTE:      return dg__gpu_permute(c, s);
    case DG_OP_RESHAPE:      return DG_OK; /* a view */
    case DG_OP_SUM: case DG_OP_MEAN:
        return dg__gpu_reduce(c, s);
    case DG_OP_BROADCAST_TO: return dg__gpu_broadcast_to(c, s);
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
        return dg__gpu_softmax(c, s);
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
        return dg__gpu_softmax_backward(c, s);
    case DG_OP_SOFTMAX_CE:          return dg__gpu_softmax_ce(c, s);
    case DG_OP_SOFTMAX_CE_BACKWARD: return dg__gpu_softmax_ce_backward(c, s);
    case DG_OP_SGD_UPDATE: case DG_OP_MOMENTUM_UPDATE: case DG_OP_ADAM_STEP: case DG_OP_ADAM_UPDATE:
        return dg__gpu_update(c, s);
    case DG_OP_LEAF:
    case DG_OP_COUNT:
        break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: op %s cannot be computed", dg_op_name(s->node->op));
}

static dg_status gpu_compute(dg_backend *be, const dg_step *s) {
    gpu_ctx *c = gpu_of(be);
    dg_status st = dispatch(c, s);
    if (st == DG_OK && c->opts.sync_debug) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return dg__fail(DG_ERR_BACKEND, "gpu: node '%s' (%s) faulted: %s", s->node->name,
                            dg_op_name(s->node->op), cudaGetErrorString(e));
        }
    }
    return st;
}

typedef struct graph_cache {
    cudaGraph_t     graph;
    cudaGraphExec_t exec;
} graph_cache;

static void gpu_cache_free(dg_backend *be, void *cache) {
    graph_cache *gc = (graph_cache *)cache;
    cudaStreamSynchronize(gpu_of(be)->stream);
    if (gc->exec) cudaGraphExecDestroy(gc->exec);
    if (gc->graph) cudaGraphDestroy(gc->graph);
    free(gc);
}

/* Capture the steps once into a CUDA graph, replay it on every run. */
static dg_status capture(dg_backend *be, const dg_step *steps, int n, graph_cache *gc) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    dg_status st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) st = dispatch(c, &steps[i]);
    cudaError_t e = cudaStreamEndCapture(c->stream, &gc->graph);
    if (st != DG_OK) return st;
    DG_CUDA_CHECK(e);
    DG_CUDA_CHECK(cudaGraphInstantiate(&gc->exec, gc->graph, 0));
    return DG_OK;
}

static dg_status gpu_run_steps(dg_backend *be, const dg_step *steps, int n, void **cache) {
    gpu_ctx *c = gpu_of(be);
    if (!c->opts.cuda_graphs || c->opts.sync_debug) {
        for (int i = 0; i < n; i++) {
            dg_status st = gpu_compute(be, &steps[i]);
            if (st != DG_OK) return st;
        }
        return DG_OK;
    }
    if (!*cache) {
        graph_cache *gc = (graph_cache *)calloc(1, sizeof *gc);
        if (!gc) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for a CUDA graph");
        dg_status st = capture(be, steps, n, gc);
        if (st != DG_OK) {
            gpu_cache_free(be, gc);
            return st;
        }
        *cache = gc;
    }
    DG_CUDA_CHECK(cudaGraphLaunch(((graph_cache *)*cache)->exec, c->stream));
    return DG_OK;
}

/* dst row i = src row idx[i]; 4-byte words, a grid-stride loop */
__global__ void k_gather_rows(unsigned *dst, const unsigned *src, const int *idx, long long n, long long words) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n * words;
         t += (long long)gridDim.x * blockDim.x) {
        long long i = t / words, w = t % words;
        dst[t] = src[(long long)idx[i] * words + w];
    }
}

static dg_status gpu_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                 size_t row_bytes) {
    if (row_bytes % 4) return dg__fail(DG_ERR_INVALID, "gpu: gather_rows needs rows of whole 4-byte words");
    long long words = (long long)(row_bytes / 4);
    k_gather_rows<<<grid_for((long long)n * words, 256), 256, 0, gpu_of(be)->stream>>>(
        (unsigned *)dst, (const unsigned *)src, idx, n, words);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static const dg_backend_i gpu_iface = {
    /* .name       = */ gpu_name,
    /* .free       = */ gpu_free,
    /* .alloc      = */ gpu_alloc,
    /* .release    = */ gpu_release,
    /* .upload     = */ gpu_upload,
    /* .download   = */ gpu_download,
    /* .sync       = */ gpu_sync,
    /* .supports   = */ gpu_supports,
    /* .compute    = */ gpu_compute,
    /* .run_steps  = */ gpu_run_steps,
    /* .cache_free = */ gpu_cache_free,
    /* .gather_rows= */ gpu_gather_rows,
};

static dg_status gpu_init(gpu_ctx *c) {
    DG_CUDA_CHECK(cudaSetDevice(c->device));
    DG_CUDA_CHECK(cudaGetDeviceProperties(&c->prop, c->device));
    DG_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    DG_CUBLAS_CHECK(cublasCreate(&c->cublas));
    DG_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    c->cublas_ws_bytes = CUBLAS_WS_BYTES;
    DG_CUDA_CHECK(cudaMalloc(&c->cublas_ws, c->cublas_ws_bytes));
    DG_CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, c->cublas_ws_bytes));
    DG_CUBLAS_CHECK(cublasSetMathMode(c->cublas, c->opts.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    c->scratch_floats = SCRATCH_FLOATS;
    DG_CUDA_CHECK(cudaMalloc(&c->scratch, c->scratch_floats * sizeof(float)));
    c->staging_bytes = STAGING_BYTES;
    DG_CUDA_CHECK(cudaMallocHost((void **)&c->staging, c->staging_bytes));
    for (int i = 0; i < 2; i++) DG_CUDA_CHECK(cudaEventCreate(&c->ev[i]));
    return DG_OK;
}

dg_status dg_gpu_backend_new(dg_backend **out, const dg_gpu_opts *opts) {
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return dg__fail(DG_ERR_NO_DEVICE, "no CUDA device: %s",
                        e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    }
    dg_backend *be = (dg_backend *)calloc(1, sizeof *be);
    gpu_ctx *c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return dg__fail(DG_ERR_OOM, "gpu: out of host memory creating the backend");
    }
    c->opts = opts ? *opts : dg_gpu_opts{false, true, false};
    const char *env = getenv("DG_GPU_SYNC");
    if (env && env[0] == '1') c->opts.sync_debug = true;
    c->gemm = DG_GPU_GEMM_CUBLAS;
    be->iface = &gpu_iface;
    be->ctx = c;
    dg_status st = gpu_init(c);
    if (st != DG_OK) {
        gpu_free(be);
        return st;
    }
    *out = be;
    return DG_OK;
}

dg_status dg_gpu_set_tf32(dg_backend *be, bool on) {
    gpu_ctx *c = gpu_of(be);
    c->opts.tf32 = on;
    DG_CUBLAS_CHECK(cublasSetMathMode(c->cublas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return DG_OK;
}

void dg_gpu_set_cuda_graphs(dg_backend *be, bool on) { gpu_of(be)->opts.cuda_graphs = on; }
void dg_gpu_set_gemm(dg_backend *be, dg_gpu_gemm impl) { gpu_of(be)->gemm = impl; }

const char *dg_gpu_info(const dg_backend *be, char *buf, size_t n) {
    const gpu_ctx *c = gpu_of(be);
    int drv = 0, rt = 0, cub = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cublasGetVersion(c->cublas, &cub);
    snprintf(buf, n, "%s, %d SMs, cc %d.%d, driver %d.%d, runtime %d.%d, cuBLAS %d", c->prop.name,
             c->prop.multiProcessorCount, c->prop.major, c->prop.minor, drv / 1000, drv % 1000 / 10, rt / 1000,
             rt % 1000 / 10, cub);
    return buf;
}

dg_status dg_gpu_sgemm(dg_backend *be, dg_gpu_gemm impl, bool ta, bool tb, int m, int n, int k, const float *A,
                       const float *B, float *C) {
    return dg__gpu_sgemm(gpu_of(be), impl, ta, tb, m, n, k, A, ta ? m : k, B, tb ? k : n, C, n, 1, 0, 0, 0);
}

dg_status dg_gpu_event_record(dg_backend *be, int which) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_CHECK(cudaEventRecord(c->ev[which ? 1 : 0], c->stream));
    return DG_OK;
}

dg_status dg_gpu_event_elapsed(dg_backend *be, float *ms) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_CHECK(cudaEventSynchronize(c->ev[1]));
    DG_CUDA_CHECK(cudaEventElapsedTime(ms, c->ev[0], c->ev[1]));
    return DG_OK;
}

dg_status dg_gpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes) {
    DG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, gpu_of(be)->stream));
    return DG_OK;
}
