/* gpu_backend.cu: the CUDA backend's vtable (cpu_backend.c's counterpart):
 * device discovery and selection, memory, op dispatch, CUDA-graph replay and timing events. Every entry that
 * touches the device first makes the backend's device current, so backends
 * on several devices can live in one process (and one thread). */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "gpu_common.cuh"

#define CUBLAS_WS_BYTES ((size_t)32 << 20)
#define SCRATCH_FLOATS ((size_t)4 << 20) /* 16 MiB of reduction partials */

/* Sticky faults. A kernel fault (an illegal address, a trap, a misaligned
 * access) leaves the device's context unusable for the rest of the process:
 * every later call fails with the same error, which cudaGetLastError does
 * not clear. The first one is recorded per device, so that from then on
 * every entry fails at once naming it, instead of with whichever call next
 * meets the broken context. */
#define MAX_DEVICES 64
static char device_fault[MAX_DEVICES][256];

static bool sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc: case cudaErrorAssert: case cudaErrorECCUncorrectable: case cudaErrorLaunchTimeout:
        return true;
    default:
        /* an error the runtime keeps reporting after it was read is sticky too */
        return cudaPeekAtLastError() != cudaSuccess;
    }
}

dg_status dg__cuda_fail(cudaError_t e, const char *expr, const char *file, int line) {
    dg_status st = e == cudaErrorMemoryAllocation ? DG_ERR_OOM
                 : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? DG_ERR_NO_DEVICE
                                                                                 : DG_ERR_BACKEND;
    (void)cudaGetLastError(); /* clear a sticky-free error so the backend keeps working */
    int dev = -1;
    if (sticky(e) && cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES && !device_fault[dev][0]) {
        snprintf(device_fault[dev], sizeof device_fault[dev], "%s (%s) in %s at %s:%d", cudaGetErrorName(e),
                 cudaGetErrorString(e), expr, file, line);
        return dg__fail(st, "gpu: device %d faulted: %s; it is unusable for the rest of this process", dev,
                        device_fault[dev]);
    }
    return dg__fail(st, "gpu: %s failed: %s (%s) at %s:%d", expr, cudaGetErrorName(e), cudaGetErrorString(e),
                    file, line);
}

dg_status dg__gpu_enter(const gpu_ctx *c) {
    if (c->device < MAX_DEVICES && device_fault[c->device][0])
        return dg__fail(DG_ERR_BACKEND, "gpu: device %d is unusable since its fault (%.*s)", c->device,
                        (int)strcspn(device_fault[c->device], " "), device_fault[c->device]);
    DG_CUDA_CHECK(cudaSetDevice(c->device));
    return DG_OK;
}

bool dg_gpu_faulted(const dg_backend *be, char *why, size_t n) {
    int d = gpu_of(be)->device;
    if (d >= MAX_DEVICES || !device_fault[d][0]) return false;
    if (why && n) snprintf(why, n, "%s", device_fault[d]);
    return true;
}

/* a store through a null pointer: the illegal address of dg_gpu_inject_fault */
static __global__ void fault_kernel(float *p) { p[threadIdx.x] = 1.0f; }

dg_status dg_gpu_inject_fault(dg_backend *be) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    fault_kernel<<<1, 32, 0, c->stream>>>(NULL);
    DG_CUDA_CHECK_LAUNCH();
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return dg__fail(DG_ERR_BACKEND, "gpu: the injected fault did not fault");
}

dg_status dg__cublas_fail(cublasStatus_t s, const char *expr, const char *file, int line) {
    dg_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? DG_ERR_OOM : DG_ERR_BACKEND;
    return dg__fail(st, "gpu: %s failed: %s (%s) at %s:%d", expr, dg__cublas.status_name(s),
                    dg__cublas.status_string(s), file, line);
}

static const char *gpu_name(const dg_backend *) { return "gpu"; }

/* Also frees a context that gpu_init left half made (NULL handles skipped). */
static void gpu_free(dg_backend *be) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_NOTE(cudaSetDevice(c->device));
    if (c->stream) DG_CUDA_NOTE(cudaStreamSynchronize(c->stream));
    dg__gpu_comm_free(c);
    dg__gpu_cudnn_free(c);
    if (c->cublas) {
        cublasStatus_t s = dg__cublas.destroy(c->cublas);
        if (s != CUBLAS_STATUS_SUCCESS) (void)dg__cublas_fail(s, "dg__cublas.destroy(c->cublas)", __FILE__, __LINE__);
    }
    DG_CUDA_NOTE(cudaFree(c->cublas_ws));
    DG_CUDA_NOTE(cudaFree(c->scratch));
    DG_CUDA_NOTE(cudaFree(c->col_arrivals));
    DG_CUDA_NOTE(cudaFree(c->l2_flush));
    DG_CUDA_NOTE(cudaFree(c->tf32_ws));
    dg__gpu_staging_free(c);
    if (c->stream) DG_CUDA_NOTE(cudaStreamDestroy(c->stream));
    free(c);
    free(be);
}

static dg_status gpu_alloc(dg_backend *be, size_t bytes, void **out) {
    DG_GPU_USE_DEVICE(gpu_of(be));
    cudaError_t e = cudaMalloc(out, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *out = NULL;
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError(); /* the message says 0 */
        return dg__fail(DG_ERR_OOM, "gpu: out of device memory allocating %zu bytes (%zu of %zu bytes free)",
                        bytes, free_b, total_b);
    }
    DG_CUDA_CHECK(e);
    return DG_OK;
}

static void gpu_release(dg_backend *be, void *ptr) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_NOTE(cudaSetDevice(c->device));
    DG_CUDA_NOTE(cudaStreamSynchronize(c->stream)); /* kernels may still read it */
    DG_CUDA_NOTE(cudaFree(ptr));
}

static dg_status gpu_sync(dg_backend *be) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    dg_status st = dg__gpu_comm_join(c);
    if (st != DG_OK) return st;
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return DG_OK;
}

/* cuBLAS and the own GEMM kernels take int dimensions */
static bool gemm_dims_fit_int(const dg_node *n) {
    const dg_node *t[3] = {n->in[0], n->in[1], n};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < t[i]->shape.ndim; j++)
            if (t[i]->shape.d[j] > INT_MAX) return false;
    return true;
}

/* Every op the plan steps (not leaves, nor side outputs: their owner's step
 * writes them), except nodes the kernels cannot take, so a plan refuses
 * the graph up front instead of failing in a run. No device call. */
static bool gpu_supports(const dg_backend *be, const dg_node *n) {
    switch (n->op) {
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_COUNT: return false;
    case DG_OP_SOFTMAX_CE:                                 return dg__gpu_softmax_ce_fits(gpu_of(be), n);
    case DG_OP_MATMUL:                                     return gemm_dims_fit_int(n);
    case DG_OPS_CONV:                                      return dg__gpu_conv_fits(n);
    case DG_OPS_POOL:                                      return dg__gpu_pool_fits(n);
    case DG_OP_ATTENTION: case DG_OP_ATTENTION_BACKWARD:   return dg__gpu_attention_fits(n);
    case DG_OP_BATCH_NORM: case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
        return dg__gpu_batch_norm_fits(gpu_of(be), n);
    /* the kernels take every shape a builder makes */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM:
    case DG_OP_PERMUTE: case DG_OP_RESHAPE: case DG_OP_SUM: case DG_OP_MEAN: case DG_OP_BROADCAST_TO:
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: case DG_OP_LAYER_NORM: case DG_OP_EMBEDDING:
    case DG_OP_ALL_REDUCE: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
    case DG_OP_SOFTMAX_CE_BACKWARD:
    case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD:
    case DG_OP_BATCH_NORM_RUNNING: case DG_OP_CAST:
        return true;
    }
    return false; /* a value that is no dg_op */
}

int dg__gpu_step_gemm(const gpu_ctx *c, unsigned flags) {
    switch (DG_STEP_GEMM(flags)) {
    case DG_GEMM_DEFAULT: return (int)c->gemm;
    case DG_GEMM_VENDOR:  return DG_GPU_GEMM_CUBLAS;
    case DG_GEMM_OWN:     return DG_GPU_GEMM_TILED;
    case DG_GEMM_NAIVE:   return DG_GPU_GEMM_NAIVE;
    case DG_GEMM_COUNT:   break;
    }
    return -1;
}

int dg__gpu_step_conv(const gpu_ctx *c, unsigned flags) {
    switch (DG_STEP_CONV(flags)) {
    case DG_CONV_DEFAULT:  return (int)c->conv;
    case DG_CONV_IM2COL:   return DG_GPU_CONV_IM2COL;
    case DG_CONV_IMPLICIT: return DG_GPU_CONV_IMPLICIT;
    case DG_CONV_VENDOR:   return DG_GPU_CONV_CUDNN;
    case DG_CONV_OWN:      return DG_GPU_CONV_IMPLICIT;
    case DG_CONV_IM2COL_BATCH: case DG_CONV_SHIFT: case DG_CONV_IM2COL_CHANNELS: case DG_CONV_COUNT:
        break;
    }
    return -1;
}

int dg__gpu_node_conv(const gpu_ctx *c, const dg_node *n, unsigned flags) {
    int conv = dg__gpu_step_conv(c, flags);
    if (conv != DG_GPU_CONV_AUTO) return conv;
    bool tensor_cores = n->in[0]->dtype != DG_F32 || (flags & DG_STEP_TF32);
    return tensor_cores && dg_gpu_has_cudnn(NULL, 0) ? DG_GPU_CONV_CUDNN : DG_GPU_CONV_IMPLICIT;
}

static dg_status refuse_choice(const gpu_ctx *c, unsigned flags) {
    if (dg__gpu_step_gemm(c, flags) < 0)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu backend: no GEMM implementation %d", (int)DG_STEP_GEMM(flags));
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu backend: convolution implementation %d is not one of the GPU's (im2col, "
                    "implicit, own (the implicit kernels) and the vendor's, cuDNN; the others are the CPU's "
                    "strategies)", (int)DG_STEP_CONV(flags));
}

static bool is_conv(const dg_node *n) {
    return n->op == DG_OP_CONV2D || n->op == DG_OP_CONV2D_BACKWARD_DATA || n->op == DG_OP_CONV2D_BACKWARD_WEIGHT;
}

/* a convolution's scratch depends on its kernels, a matmul's on its GEMM:
 * the step's (its plan's choice, or the backend's setting for DEFAULT); a
 * 16-bit convolution's float32 copies go ahead of its kernels' scratch
 * (dg_conv_widened_of) */
static size_t gpu_step_scratch_bytes(const dg_backend *be, const dg_node *n, unsigned flags) {
    const gpu_ctx *c = gpu_of(be);
    int gemm = dg__gpu_step_gemm(c, flags), conv = is_conv(n) ? dg__gpu_node_conv(c, n, flags) : -1;
    /* cuDNN's: the workspace of the algorithm chosen now, once per geometry
     * (bf16 and f16 natively: no float32 copies) */
    if (is_conv(n) && conv == DG_GPU_CONV_CUDNN) return dg__gpu_cudnn_scratch_bytes(gpu_of(be), n, flags);
    if (is_conv(n) && conv >= 0)
        return (size_t)dg_conv_widened_of(n).inner * sizeof(float) + dg__gpu_conv_scratch_bytes(c, n, (dg_gpu_conv)conv);
    if (n->op == DG_OP_MATMUL && gemm >= 0) return sizeof(float) * dg__gpu_matmul_scratch_floats(c, n, (dg_gpu_gemm)gemm);
    return dg_node_scratch_bytes(n);
}

static size_t gpu_scratch_bytes(const dg_backend *be, const dg_node *n) { return gpu_step_scratch_bytes(be, n, 0u); }

/* what n's step runs as under flags (dg_backend_step_impl) */
static dg_status gpu_step_impl(const dg_backend *be, const dg_node *n, unsigned flags, char *buf, size_t size) {
    const gpu_ctx *c = gpu_of(be);
    int gemm = dg__gpu_step_gemm(c, flags), conv = dg__gpu_step_conv(c, flags);
    if (gemm < 0 || conv < 0) return refuse_choice(c, flags);
    if (conv == DG_GPU_CONV_CUDNN) { /* a plan that asks for cuDNN where it is missing: refused, saying why */
        dg_status st = dg__cudnn_load();
        if (st != DG_OK) return st;
    }
    if (!n) return DG_OK;
    if (is_conv(n)) conv = dg__gpu_node_conv(c, n, flags);
    if (is_conv(n) && conv == DG_GPU_CONV_CUDNN) return dg__gpu_cudnn_impl(gpu_of(be), n, flags, buf, size);
    bool tf32 = (flags & DG_STEP_TF32) != 0;
    const char *name = "gpu";
    if (n->op == DG_OP_MATMUL && n->in[0]->dtype != DG_F32) /* the own wgmma kernel or cuBLAS's GemmEx */
        name = dg__gpu_lowp_own(c, flags) ? (n->in[0]->dtype == DG_BF16 ? "gpu-tiled-bf16" : "gpu-tiled-f16")
                                          : (n->in[0]->dtype == DG_BF16 ? "gpu-cublas-bf16" : "gpu-cublas-f16");
    else if (n->op == DG_OP_MATMUL)
        name = gemm == DG_GPU_GEMM_CUBLAS ? (tf32 ? "gpu-cublas-tf32" : "gpu-cublas")
             : gemm == DG_GPU_GEMM_TILED  ? (tf32 ? "gpu-tiled-tf32" : "gpu-tiled")
                                          : "gpu-naive";
    else if (is_conv(n))
        name = conv == DG_GPU_CONV_IMPLICIT && dg__gpu_conv_implicit_fits(n) ? "gpu-implicit" : "gpu-im2col";
    if (is_conv(n) && n->dtype != DG_F32) /* the float32 kernels on widened copies (dg__gpu_conv) */
        snprintf(buf, size, "%s-%s-widened", name, dg_dtype_name(n->dtype));
    else
        snprintf(buf, size, "%s", name);
    return DG_OK;
}

static dg_status dispatch(gpu_ctx *c, const dg_step *s) {
    if (dg__gpu_step_gemm(c, s->flags) < 0 || dg__gpu_step_conv(c, s->flags) < 0) return refuse_choice(c, s->flags);
    switch (s->node->op) {
    /* a family goes to one entry, whose switch names its ops (ops.h) */
    case DG_OPS_UNARY:          return dg__gpu_unary(c, s);
    case DG_OPS_BINARY:         return dg__gpu_binary(c, s);
    case DG_OPS_UNARY_BACKWARD: return dg__gpu_unary_backward(c, s);
    case DG_OPS_POOL:           return dg__gpu_pool(c, s);
    case DG_OP_MATMUL:       return dg__gpu_matmul(c, s);
    case DG_OP_PERMUTE:      return dg__gpu_permute(c, s);
    case DG_OP_CAST:         return dg__gpu_cast(c, s);
    case DG_OP_RESHAPE:      return DG_OK; /* a view: the plan never steps it           */
    case DG_OP_SIDE_OUTPUT:  return DG_OK; /* written by its owner's step: never stepped */
    case DG_OP_SUM: case DG_OP_MEAN:
        return dg__gpu_reduce(c, s);
    case DG_OP_BROADCAST_TO: return dg__gpu_broadcast_to(c, s);
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
        return dg__gpu_softmax(c, s);
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
        return dg__gpu_softmax_backward(c, s);
    case DG_OP_SOFTMAX_CE:          return dg__gpu_softmax_ce(c, s);
    case DG_OP_SOFTMAX_CE_BACKWARD: return dg__gpu_softmax_ce_backward(c, s);
    case DG_OPS_OPTIM:       return dg__gpu_update(c, s);
    case DG_OPS_CONV:                     return dg__gpu_conv(c, s);
    case DG_OP_BATCH_NORM:                return dg__gpu_batch_norm(c, s);
    case DG_OP_BATCH_NORM_BACKWARD:       return dg__gpu_batch_norm_backward(c, s);
    case DG_OP_BATCH_NORM_BACKWARD_SCALE: return dg__gpu_batch_norm_backward_scale(c, s);
    case DG_OP_BATCH_NORM_RUNNING:        return dg__gpu_batch_norm_running(c, s);
    case DG_OP_LAYER_NORM:                return dg__gpu_layer_norm(c, s);
    case DG_OP_LAYER_NORM_BACKWARD:       return dg__gpu_layer_norm_backward(c, s);
    case DG_OP_LAYER_NORM_BACKWARD_SCALE: return dg__gpu_layer_norm_backward_scale(c, s);
    case DG_OP_EMBEDDING:                 return dg__gpu_embedding(c, s);
    case DG_OP_EMBEDDING_BACKWARD:        return dg__gpu_embedding_backward(c, s);
    case DG_OP_ATTENTION:                 return dg__gpu_attention(c, s);
    case DG_OP_ATTENTION_BACKWARD:        return dg__gpu_attention_backward(c, s);
    case DG_OP_ALL_REDUCE:                return dg__gpu_all_reduce(c, s);
    case DG_OP_LEAF:
    case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: op %s cannot be computed", dg_op_name(s->node->op));
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: op %d is not a dg_op", (int)s->node->op);
}

/* One step's work inside an NVTX range named after its node, so Nsight
 * Systems and Nsight Compute show the graph's names. The range spans the
 * queueing on the host (also while a CUDA graph is captured), not the
 * kernel's run. Without an attached tool NVTX calls return at once. */
static dg_status dispatch_named(gpu_ctx *c, const dg_step *s) {
    nvtxRangePushA(s->node->name);
    dg_status st = dg__gpu_comm_before(c, s); /* waits for the all-reduces it touches */
    if (st == DG_OK) st = dispatch(c, s);
    nvtxRangePop();
    return st;
}

/* one step, on the current device; sync_debug: wait for it so a fault
 * names its node */
static dg_status compute_step(gpu_ctx *c, const dg_step *s) {
    dg_status st = dispatch_named(c, s);
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

/* One node alone (the profiler, the node-by-node timings): an all-reduce
 * is joined at once, so the events around it time the exchange itself. */
static dg_status gpu_compute(dg_backend *be, const dg_step *s) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    dg_status st = compute_step(c, s);
    return st == DG_OK && s->node->op == DG_OP_ALL_REDUCE ? dg__gpu_comm_join(c) : st;
}

typedef struct graph_cache {
    cudaGraph_t     graph;
    cudaGraphExec_t exec;
} graph_cache;

static void gpu_cache_free(dg_backend *be, void *cache) {
    graph_cache *gc = (graph_cache *)cache;
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_NOTE(cudaSetDevice(c->device));
    DG_CUDA_NOTE(cudaStreamSynchronize(c->stream)); /* a replay may still run */
    if (gc->exec) DG_CUDA_NOTE(cudaGraphExecDestroy(gc->exec));
    if (gc->graph) DG_CUDA_NOTE(cudaGraphDestroy(gc->graph));
    free(gc);
}

/* Capture the steps once into a CUDA graph, replay it on every run. Each
 * step's cuBLAS math mode (TF32 or not) is set on the host as it is
 * captured, so the graph keeps every matmul's mode. */
static dg_status capture(gpu_ctx *c, const dg_step *steps, int n, graph_cache *gc) {
    DG_CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    dg_status st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) st = dispatch_named(c, &steps[i]);
    if (st == DG_OK) st = dg__gpu_comm_join(c); /* the capture must join the comm stream it forked */
    cudaError_t e = cudaStreamEndCapture(c->stream, &gc->graph);
    if (st != DG_OK) return st;
    DG_CUDA_CHECK(e);
    DG_CUDA_CHECK(cudaGraphInstantiate(&gc->exec, gc->graph, 0));
    return DG_OK;
}

/* replay: the plan allows capture and replay (dg_plan_opts.no_replay
 * unset); sync_debug runs node by node all the same */
static dg_status gpu_run_steps(dg_backend *be, const dg_step *steps, int n, bool replay, void **cache) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    if (!replay || c->opts.sync_debug) {
        for (int i = 0; i < n; i++) {
            dg_status st = compute_step(c, &steps[i]);
            if (st != DG_OK) return st;
        }
        return dg__gpu_comm_join(c);
    }
    if (!*cache) {
        graph_cache *gc = (graph_cache *)calloc(1, sizeof *gc);
        if (!gc) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for a CUDA graph");
        dg_status st = capture(c, steps, n, gc);
        if (st != DG_OK) {
            gpu_cache_free(be, gc);
            return st;
        }
        *cache = gc;
    }
    DG_CUDA_CHECK(cudaGraphLaunch(((graph_cache *)*cache)->exec, c->stream));
    return DG_OK;
}

static dg_status gpu_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                 size_t row_bytes) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    return dg__gpu_gather_rows(c, dst, src, idx, n, row_bytes);
}

/* ---- timing events: cudaEvent_t (default flags, so timing is on),
 * recorded on the backend's stream ---- */

static dg_status gpu_event_new(dg_backend *be, void **ev) {
    DG_GPU_USE_DEVICE(gpu_of(be)); /* an event belongs to the device current at creation */
    cudaEvent_t e = NULL;
    DG_CUDA_CHECK(cudaEventCreate(&e));
    *ev = (void *)e;
    return DG_OK;
}

static void gpu_event_free(dg_backend *be, void *ev) {
    DG_CUDA_NOTE(cudaSetDevice(gpu_of(be)->device));
    DG_CUDA_NOTE(cudaEventDestroy((cudaEvent_t)ev));
}

static dg_status gpu_event_record(dg_backend *be, void *ev) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    DG_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, c->stream));
    return DG_OK;
}

/* waits for stop; milliseconds between the two records */
static dg_status gpu_event_elapsed(dg_backend *be, void *start, void *stop, double *ms) {
    DG_GPU_USE_DEVICE(gpu_of(be));
    float f = 0.0f;
    DG_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)stop));
    DG_CUDA_CHECK(cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)stop));
    *ms = (double)f;
    return DG_OK;
}

static const dg_backend_i gpu_iface = {
    /* .version       = */ DG_BACKEND_IFACE_VERSION,
    /* .name          = */ gpu_name,
    /* .free          = */ gpu_free,
    /* .alloc         = */ gpu_alloc,
    /* .release       = */ gpu_release,
    /* .upload        = */ dg__gpu_upload,
    /* .download      = */ dg__gpu_download,
    /* .sync          = */ gpu_sync,
    /* .supports      = */ gpu_supports,
    /* .compute       = */ gpu_compute,
    /* .run_steps     = */ gpu_run_steps,
    /* .cache_free    = */ gpu_cache_free,
    /* .gather_rows   = */ gpu_gather_rows,
    /* .event_new     = */ gpu_event_new,
    /* .event_free    = */ gpu_event_free,
    /* .event_record  = */ gpu_event_record,
    /* .event_elapsed = */ gpu_event_elapsed,
    /* .group         = */ dg__gpu_group,
    /* .host_alloc    = */ dg__gpu_host_alloc,
    /* .host_free     = */ dg__gpu_host_free,
    /* .scratch_bytes = */ gpu_scratch_bytes,
    /* .step_scratch_bytes = */ gpu_step_scratch_bytes,
    /* .step_impl     = */ gpu_step_impl,
};

static dg_status gpu_init(gpu_ctx *c) {
    DG_CUDA_CHECK(cudaSetDevice(c->device));
    DG_CUDA_CHECK(cudaGetDeviceProperties(&c->prop, c->device));
    int l2 = 0;
    DG_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c->device));
    c->l2_bytes = (size_t)l2;
    DG_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    dg_status st = dg__cublas_load();
    if (st != DG_OK) return st;
    DG_CUBLAS_CHECK(dg__cublas.create(&c->cublas));
    DG_CUBLAS_CHECK(dg__cublas.set_stream(c->cublas, c->stream));
    c->cublas_ws_bytes = CUBLAS_WS_BYTES;
    DG_CUDA_CHECK(cudaMalloc(&c->cublas_ws, c->cublas_ws_bytes));
    DG_CUBLAS_CHECK(dg__cublas.set_workspace(c->cublas, c->cublas_ws, c->cublas_ws_bytes));
    /* full fp32 until a matmul allows TF32 (gpu_gemm.cu tracks the mode) */
    DG_CUBLAS_CHECK(dg__cublas.set_math_mode(c->cublas, CUBLAS_DEFAULT_MATH));
    c->cublas_tf32 = false;
    c->scratch_floats = SCRATCH_FLOATS;
    DG_CUDA_CHECK(cudaMalloc(&c->scratch, c->scratch_floats * sizeof(float)));
    DG_CUDA_CHECK(cudaMalloc(&c->col_arrivals, GPU_COL_ARRIVALS * sizeof *c->col_arrivals));
    /* on the stream: its kernels are ordered after the zeroing */
    DG_CUDA_CHECK(cudaMemsetAsync(c->col_arrivals, 0, GPU_COL_ARRIVALS * sizeof *c->col_arrivals, c->stream));
    return dg__gpu_staging_init(c);
}

/* ---- is there a usable device: absent (nothing to use) or broken (a
 * driver that fails), worded once for dg_gpu_probe and the constructor ---- */

static dg_gpu_state say(dg_gpu_state s, char *why, size_t n, const char *fmt, ...) {
    if (!why || !n) return s;
    int head = snprintf(why, n, "%s", s == DG_GPU_ABSENT   ? "no CUDA device: "
                                      : s == DG_GPU_BROKEN ? "CUDA device broken: "
                                                           : "");
    if (head >= 0 && (size_t)head < n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + head, n - (size_t)head, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* The driver and the device count. Where the runtime cannot load the
 * driver library it answers cudaErrorInsufficientDriver, the same code as
 * for a driver older than itself; it reports driver version 0 only in the
 * first case, which tells a machine without a driver (absent) from one
 * with an outdated driver (broken). */
static dg_gpu_state probe_count(int *count, char *why, size_t n) {
    *count = 0;
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) (void)cudaGetLastError();
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) (void)cudaGetLastError();
    if (drv == 0) { /* the loader says why; a library that loads yet gives no version is not a driver */
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *err = dlerror();
            return say(DG_GPU_ABSENT, why, n, "the NVIDIA driver is not installed (%s)",
                       err ? err : "libcuda.so.1 cannot be loaded");
        }
        dlclose(lib);
        return say(DG_GPU_BROKEN, why, n, "libcuda.so.1 loads but reports no driver version (a stub library?)");
    }
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *count = 0;
        if (e == cudaErrorNoDevice)
            return say(DG_GPU_ABSENT, why, n, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        if (e == cudaErrorInsufficientDriver)
            return say(DG_GPU_BROKEN, why, n, "the driver supports CUDA %d.%d, older than this runtime's %d.%d (%s)",
                       drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, cudaGetErrorName(e));
        return say(DG_GPU_BROKEN, why, n, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorName(e),
                   cudaGetErrorString(e));
    }
    if (*count == 0) return say(DG_GPU_ABSENT, why, n, "cudaGetDeviceCount found none");
    return DG_GPU_PRESENT;
}

/* Makes device's primary context (what a backend would use first), then
 * restores the calling thread's current device. */
static dg_gpu_state probe_context(int device, char *why, size_t n) {
    if (device < MAX_DEVICES && device_fault[device][0])
        return say(DG_GPU_BROKEN, why, n, "device %d faulted earlier in this process: %s", device,
                   device_fault[device]);
    int prev = device;
    if (cudaGetDevice(&prev) != cudaSuccess) (void)cudaGetLastError();
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaFree(NULL); /* the idiom that initialises the context */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return say(DG_GPU_BROKEN, why, n, "device %d cannot be initialised: %s (%s)", device, cudaGetErrorName(e),
                   cudaGetErrorString(e));
    }
    if (cudaSetDevice(prev) != cudaSuccess) (void)cudaGetLastError();
    return DG_GPU_PRESENT;
}

dg_gpu_state dg_gpu_probe(char *why, size_t n) {
    int count = 0;
    dg_gpu_state s = probe_count(&count, why, n);
    if (s == DG_GPU_PRESENT) s = probe_context(0, why, n);
    if (s == DG_GPU_PRESENT) say(s, why, n, "%d CUDA device%s", count, count == 1 ? "" : "s");
    return s;
}

int dg_gpu_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error for later calls */
        return 0;
    }
    return count;
}

dg_status dg_gpu_backend_new(dg_backend **out, const dg_gpu_opts *opts) {
    *out = NULL;
    int count = 0;
    char why[512];
    dg_gpu_state state = probe_count(&count, why, sizeof why);
    if (state != DG_GPU_PRESENT) return dg__fail(state == DG_GPU_ABSENT ? DG_ERR_NO_DEVICE : DG_ERR_BACKEND, "%s", why);
    dg_gpu_opts o = opts ? *opts : dg_gpu_opts{0, false, DG_GPU_TF32_AUTO, 0};
    if (o.device < 0 || o.device >= count)
        return dg__fail(DG_ERR_INVALID, "gpu: device index %d is out of range: %d CUDA device%s (0..%d)", o.device,
                        count, count == 1 ? "" : "s", count - 1);
    if (probe_context(o.device, why, sizeof why) != DG_GPU_PRESENT) return dg__fail(DG_ERR_BACKEND, "%s", why);
    const char *env = getenv("DG_GPU_SYNC");
    if (env && env[0] == '1') o.sync_debug = true;
    gpu_ctx *c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!c) return dg__fail(DG_ERR_OOM, "gpu: out of host memory creating the backend");
    c->device = o.device;
    c->opts = o;
    c->gemm = DG_GPU_GEMM_CUBLAS;
    c->conv = DG_GPU_CONV_DEFAULT; /* implicit: faster than im2col + cuBLAS on 32 of ResNet-18's 33 3x3 layer
                                       directions on an H100 (docs/PERF.md) */
    dg_backend *be = dg__backend_new(&gpu_iface, c);
    if (!be) { /* out of memory: our iface's version is the core's own */
        free(c);
        return DG_ERR_OOM;
    }
    dg_status st = gpu_init(c);
    if (st != DG_OK) { /* report init's failure, not a teardown failure after it */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        gpu_free(be);
        return dg__fail(st, "%s", msg);
    }
    *out = be;
    return DG_OK;
}

int dg_gpu_device(const dg_backend *be) { return gpu_of(be)->device; }

/* host-side settings and cached facts: no device call */
void dg_gpu_set_gemm(dg_backend *be, dg_gpu_gemm impl) { gpu_of(be)->gemm = impl; }
void dg_gpu_set_conv(dg_backend *be, dg_gpu_conv impl) { gpu_of(be)->conv = impl; }

const char *dg_gpu_info(const dg_backend *be, char *buf, size_t n) {
    const gpu_ctx *c = gpu_of(be);
    int drv = 0, rt = 0, cub = 0; /* 0 where a query fails */
    if (cudaDriverGetVersion(&drv) != cudaSuccess) (void)cudaGetLastError();
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) (void)cudaGetLastError();
    if (dg__cublas.get_version(c->cublas, &cub) != CUBLAS_STATUS_SUCCESS) cub = 0;
    snprintf(buf, n, "%s, %d SMs, cc %d.%d, driver %d.%d, runtime %d.%d, cuBLAS %d", c->prop.name,
             c->prop.multiProcessorCount, c->prop.major, c->prop.minor, drv / 1000, drv % 1000 / 10, rt / 1000,
             rt % 1000 / 10, cub);
    return buf;
}

/* the backend's workspace (tf32_ws) grown to at least floats */
static dg_status ws_reserve(dg_backend *be, size_t floats) {
    gpu_ctx *c = gpu_of(be);
    if (floats <= c->tf32_ws_floats) return DG_OK;
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream)); /* the old workspace may be in use by queued work */
    DG_CUDA_CHECK(cudaFree(c->tf32_ws));
    c->tf32_ws = NULL, c->tf32_ws_floats = 0;
    dg_status st = gpu_alloc(be, sizeof(float) * floats, (void **)&c->tf32_ws);
    if (st != DG_OK) return st;
    c->tf32_ws_floats = floats;
    return DG_OK;
}

dg_status dg_gpu_sgemm(dg_backend *be, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                       const float *A, const float *B, float *C) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    int lda = ta ? m : k, ldb = tb ? k : n;
    if (impl != DG_GPU_GEMM_TILED || !tf32)
        return dg__gpu_sgemm(c, impl, tf32, ta, tb, m, n, k, A, lda, B, ldb, C, n, 1, 0, 0, 0);
    dg_status st = ws_reserve(be, dg__gpu_tf32_scratch_floats(c, ta, tb, m, n, k, 1));
    if (st != DG_OK) return st;
    return dg__gpu_sgemm_tf32(c, ta, tb, m, n, k, A, lda, B, ldb, C, n, 1, 0, 0, 0, c->tf32_ws, c->tf32_ws_floats);
}

dg_status dg_gpu_gemm_ex(dg_backend *be, dg_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *A,
                         const void *B, float *C) {
    if (!be || !A || !B || !C || m <= 0 || n <= 0 || k <= 0)
        return dg__fail(DG_ERR_INVALID, "dg_gpu_gemm_ex: NULL operand or empty product (%d x %d x %d)", m, n, k);
    if (dtype == DG_F32)
        return dg_gpu_sgemm(be, DG_GPU_GEMM_CUBLAS, false, ta, tb, m, n, k, (const float *)A, (const float *)B, C);
    if (dtype != DG_BF16 && dtype != DG_F16)
        return dg__fail(DG_ERR_UNSUPPORTED, "dg_gpu_gemm_ex: operands of dtype %s (f32, bf16 or f16)",
                       dg_dtype_name(dtype));
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    return dg__gpu_gemm_low(c, dtype, DG_F32, ta, tb, m, n, k, A, ta ? m : k, B, tb ? k : n, C, n, 1, 0, 0, 0);
}

bool dg_gpu_has_tiled16(const dg_backend *be, char *why, size_t n) {
    return dg__gpu_has_wgmma_lowp(gpu_of(be), why, n);
}

dg_status dg_gpu_gemm_ex_tiled(dg_backend *be, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                               const void *A, int lda, const void *B, int ldb, void *C, int ldc) {
    if (!be || !A || !B || !C || m <= 0 || n <= 0 || k <= 0)
        return dg__fail(DG_ERR_INVALID, "dg_gpu_gemm_ex_tiled: NULL operand or empty product (%d x %d x %d)", m, n, k);
    if (lda < (ta ? m : k) || ldb < (tb ? k : n) || ldc < n)
        return dg__fail(DG_ERR_INVALID, "dg_gpu_gemm_ex_tiled: leading dimensions %d, %d, %d below the rows' %d, %d, "
                        "%d", lda, ldb, ldc, ta ? m : k, tb ? k : n, n);
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    /* operands whose rows 16-byte copies cannot read are packed into the
     * workspace, and split-k's partials go there */
    size_t pack = dg__gpu_gemm16_scratch_bytes(c, ta, tb, m, n, k, A, lda, B, ldb, 1, 0, 0);
    dg_status st = dg__gpu_has_wgmma_lowp(c, NULL, 0) ? ws_reserve(be, (pack + 3) / 4) : DG_OK;
    if (st != DG_OK) return st;
    return dg__gpu_gemm_tiled16(c, dtype, out, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, 1, 0, 0, 0, c->tf32_ws,
                                sizeof(float) * c->tf32_ws_floats);
}

dg_status dg_gpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    DG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return DG_OK;
}

/* ---- device facts and the L2 flush, for the bench ---- */

static bool is_gpu(const dg_backend *be) { return be && be->iface == &gpu_iface; }

size_t dg_gpu_l2_bytes(const dg_backend *be) { return is_gpu(be) ? gpu_of(be)->l2_bytes : 0; }

/* cudaMemsetAsync writes through L2 like any kernel: a buffer twice its
 * size leaves none of the earlier kernels' lines behind */
dg_status dg_gpu_flush_l2(dg_backend *be) {
    if (!is_gpu(be)) return dg__fail(DG_ERR_INVALID, "dg_gpu_flush_l2: not a GPU backend");
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    if (!c->l2_flush) {
        dg_status st = gpu_alloc(be, 2 * c->l2_bytes, &c->l2_flush);
        if (st != DG_OK) return st;
        c->l2_flush_bytes = 2 * c->l2_bytes;
    }
    DG_CUDA_CHECK(cudaMemsetAsync(c->l2_flush, 0, c->l2_flush_bytes, c->stream));
    return DG_OK;
}

dg_status dg_gpu_pci_bus_id(const dg_backend *be, char *buf, size_t n) {
    if (!is_gpu(be) || !buf) return dg__fail(DG_ERR_INVALID, "dg_gpu_pci_bus_id: not a GPU backend, or a NULL buffer");
    const gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    char id[64] = ""; /* "0000:41:00.0" */
    DG_CUDA_CHECK(cudaDeviceGetPCIBusId(id, (int)sizeof id, c->device));
    size_t len = strlen(id);
    if (len >= n) return dg__fail(DG_ERR_INVALID, "dg_gpu_pci_bus_id: %zu bytes cannot hold \"%s\"", n, id);
    memcpy(buf, id, len + 1);
    return DG_OK;
}
