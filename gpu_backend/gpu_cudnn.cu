/* gpu_cudnn.cu: conv2d, conv2d_backward_data and conv2d_backward_weight by
 * cuDNN (DG_GPU_CONV_CUDNN; DG_CONV_VENDOR in a plan), through its legacy
 * convolution API:
 *   conv2d:          cudnnConvolutionForward(x, w) -> y
 *   backward_data:   cudnnConvolutionBackwardData(w, dy) -> dx
 *   backward_weight: cudnnConvolutionBackwardFilter(x, dy) -> dw
 * on the graph's NCHW tensors and [o, c/groups, kh, kw] weights, as a
 * cross-correlation (the graph's convolution, as PyTorch's).
 *
 * The algorithm is chosen when the plan is made: the plan asks each
 * convolution's scratch (dg_backend_step_scratch_bytes), and the answer is
 * the workspace of the algorithm chosen then, once per key (gpu_cudnn.h:
 * geometry, direction, dtype, TF32 flag, workspace cap) and kept in the
 * backend's cache with its descriptors. A run finds the same entry and
 * calls cuDNN with the step's scratch as the workspace: nothing is
 * allocated per step, and the handle is bound to the backend's stream, so
 * a CUDA-graph capture records the calls like any kernel. Each entry's
 * convolution descriptor carries its own math type, so no handle state
 * changes between steps.
 *
 * Precisions: float32 on FMA units (CUDNN_FMA_MATH: no tensor cores, as
 * the own fp32 kernels); float32 with the step's TF32 flag
 * (CUDNN_TENSOR_OP_MATH: TF32 tensor cores); bf16 and f16 io tensors with
 * float compute (the low-precision convolution rule: 16-bit in and out,
 * float32 accumulation), on tensor cores. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.cuh"
#include "gpu_cudnn.h"
#include "gpu_cudnn_api.cuh"

#ifdef DG_HAVE_CUDNN

/* gpu_cudnn_plan.cu names the algorithms by these values */
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6 &&
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7,
              "cuDNN's algorithm enums changed: update dg__cudnn_algo_name");
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == 1 && CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == 7 &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED == 5 &&
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING == 6,
              "cuDNN's algorithm enums changed: update dg__cudnn_algo_name");

/* One key's choice: its descriptors (x, y: the image-side tensors, x or
 * dx and y or dy), the algorithm and its workspace; or why there is none
 * (status, why), kept so that each run of a node with this key reports it. */
struct cudnn_entry {
    dg_cudnn_key                 key;
    cudnnTensorDescriptor_t      x, y;
    cudnnFilterDescriptor_t      w;
    cudnnConvolutionDescriptor_t conv;
    int                          algo;
    size_t                       ws_bytes;
    dg_status                    status;
    char                         why[384];
};

struct gpu_cudnn {
    cudnnHandle_t handle;  /* on the backend's device, bound to its stream */
    cudnn_entry  **entries; /* [n] of [cap]; an entry never moves          */
    int            n, cap;
};

static dg_status cudnn_fail(cudnnStatus_t s, const char *expr, const char *file, int line) {
    dg_status st = s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                           s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                       ? DG_ERR_OOM
                   : s == CUDNN_STATUS_NOT_SUPPORTED ? DG_ERR_UNSUPPORTED
                                                     : DG_ERR_BACKEND;
    return dg__fail(st, "gpu: %s failed: %s (cuDNN status %d) at %s:%d", expr, dg__cudnn.error_string(s), (int)s, file,
                    line);
}

#define DG_CUDNN_CHECK(expr)                                                            \
    do {                                                                                \
        cudnnStatus_t s_ = (expr);                                                      \
        if (s_ != CUDNN_STATUS_SUCCESS) return cudnn_fail(s_, #expr, __FILE__, __LINE__); \
    } while (0)

#define DG_CUDNN_NOTE(expr)                                                           \
    do {                                                                              \
        cudnnStatus_t s_ = (expr);                                                    \
        if (s_ != CUDNN_STATUS_SUCCESS) (void)cudnn_fail(s_, #expr, __FILE__, __LINE__); \
    } while (0)

/* the handle, made on first use on the backend's device and stream */
static dg_status cudnn_ready(gpu_ctx *c) {
    if (c->cudnn) return DG_OK;
    dg_status st = dg__cudnn_load();
    if (st != DG_OK) return st;
    gpu_cudnn *g = (gpu_cudnn *)calloc(1, sizeof *g);
    if (!g) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for cuDNN's state");
    cudnnStatus_t s = dg__cudnn.create(&g->handle);
    if (s == CUDNN_STATUS_SUCCESS) s = dg__cudnn.set_stream(g->handle, c->stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        st = cudnn_fail(s, "cudnnCreate / cudnnSetStream", __FILE__, __LINE__);
        if (g->handle) DG_CUDNN_NOTE(dg__cudnn.destroy(g->handle));
        free(g);
        return st;
    }
    c->cudnn = g;
    return DG_OK;
}

static cudnnDataType_t data_type(int dtype) {
    return dtype == DG_BF16 ? CUDNN_DATA_BFLOAT16 : dtype == DG_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static bool deterministic(cudnnDeterminism_t d) { return d == CUDNN_DETERMINISTIC; }
static bool tensor_ops(cudnnMathType_t m) { return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; }

/* cuDNN's answers for e's direction, each algorithm run and timed once by
 * cudnnFind* (at plan time, never inside a captured graph), fastest first,
 * as candidates (math[i]: answer i's math type). The heuristics of
 * cudnnGet*_v7 picked algorithms that made the fp32 ResNet-18 step 25%
 * slower than the own kernels on an H200 (docs/PERF.md). */
static dg_status measured(gpu_cudnn *g, const cudnn_entry *e, dg_cudnn_candidate *cand, cudnnMathType_t *math,
                            int *n) {
    *n = 0;
    switch (e->key.dir) {
    case DG_CUDNN_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        DG_CUDNN_CHECK(dg__cudnn.forward_algos(g->handle, e->x, e->w, e->conv, e->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                               n, p));
        for (int i = 0; i < *n; i++) {
            cand[i] = {(int)p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS, p[i].memory,
                       deterministic(p[i].determinism), tensor_ops(p[i].mathType)};
            math[i] = p[i].mathType;
        }
        return DG_OK;
    }
    case DG_CUDNN_BACKWARD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        DG_CUDNN_CHECK(dg__cudnn.backward_data_algos(g->handle, e->w, e->y, e->conv, e->x,
                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, p));
        for (int i = 0; i < *n; i++) {
            cand[i] = {(int)p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS, p[i].memory,
                       deterministic(p[i].determinism), tensor_ops(p[i].mathType)};
            math[i] = p[i].mathType;
        }
        return DG_OK;
    }
    case DG_CUDNN_BACKWARD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        DG_CUDNN_CHECK(dg__cudnn.backward_filter_algos(g->handle, e->x, e->y, e->conv, e->w,
                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, p));
        for (int i = 0; i < *n; i++) {
            cand[i] = {(int)p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS, p[i].memory,
                       deterministic(p[i].determinism), tensor_ops(p[i].mathType)};
            math[i] = p[i].mathType;
        }
        return DG_OK;
    }
    }
    return dg__fail(DG_ERR_INVALID, "gpu: cuDNN direction %d", e->key.dir);
}

/* the workspace e's algorithm takes under its descriptors' math type */
static dg_status workspace_of(gpu_cudnn *g, const cudnn_entry *e, size_t *bytes) {
    switch (e->key.dir) {
    case DG_CUDNN_FORWARD:
        DG_CUDNN_CHECK(dg__cudnn.forward_workspace(g->handle, e->x, e->w, e->conv, e->y,
                                                   (cudnnConvolutionFwdAlgo_t)e->algo, bytes));
        return DG_OK;
    case DG_CUDNN_BACKWARD_DATA:
        DG_CUDNN_CHECK(dg__cudnn.backward_data_workspace(g->handle, e->w, e->y, e->conv, e->x,
                                                         (cudnnConvolutionBwdDataAlgo_t)e->algo, bytes));
        return DG_OK;
    case DG_CUDNN_BACKWARD_FILTER:
        DG_CUDNN_CHECK(dg__cudnn.backward_filter_workspace(g->handle, e->x, e->y, e->conv, e->w,
                                                           (cudnnConvolutionBwdFilterAlgo_t)e->algo, bytes));
        return DG_OK;
    }
    return dg__fail(DG_ERR_INVALID, "gpu: cuDNN direction %d", e->key.dir);
}

/* e's descriptors from its key (image-side tensors: x is x or dx, y is y
 * or dy; the weight w or dw) */
static dg_status describe(const cudnn_entry *e) {
    const dg_cudnn_key *k = &e->key;
    cudnnDataType_t t = data_type(k->dtype);
    DG_CUDNN_CHECK(dg__cudnn.set_tensor_4d(e->x, CUDNN_TENSOR_NCHW, t, k->x[0], k->x[1], k->x[2], k->x[3]));
    DG_CUDNN_CHECK(dg__cudnn.set_tensor_4d(e->y, CUDNN_TENSOR_NCHW, t, k->y[0], k->y[1], k->y[2], k->y[3]));
    DG_CUDNN_CHECK(dg__cudnn.set_filter_4d(e->w, t, CUDNN_TENSOR_NCHW, k->w[0], k->w[1], k->w[2], k->w[3]));
    DG_CUDNN_CHECK(dg__cudnn.set_conv_2d(e->conv, k->pad[0], k->pad[1], k->stride[0], k->stride[1], k->dilation[0],
                                         k->dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DG_CUDNN_CHECK(dg__cudnn.set_group_count(e->conv, k->groups));
    /* float32 without TF32: FMA units only; else tensor cores allowed */
    bool fma = k->dtype == DG_F32 && !k->tf32;
    DG_CUDNN_CHECK(dg__cudnn.set_math_type(e->conv, fma ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    return DG_OK;
}

/* e's descriptors and algorithm: the first of cuDNN's answers that
 * dg__cudnn_pick takes whose workspace, asked again under the answer's
 * math type, still fits the cap */
static dg_status choose(gpu_cudnn *g, cudnn_entry *e) {
    DG_CUDNN_CHECK(dg__cudnn.create_tensor(&e->x));
    DG_CUDNN_CHECK(dg__cudnn.create_tensor(&e->y));
    DG_CUDNN_CHECK(dg__cudnn.create_filter(&e->w));
    DG_CUDNN_CHECK(dg__cudnn.create_conv(&e->conv));
    dg_status st = describe(e);
    if (st != DG_OK) return st;
    dg_cudnn_candidate cand[CUDNN_CONVOLUTION_FWD_ALGO_COUNT]; /* the most answers of any direction */
    cudnnMathType_t math[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    if ((st = measured(g, e, cand, math, &n)) != DG_OK) return st;
    bool fma = e->key.dtype == DG_F32 && !e->key.tf32;
    int i;
    while ((i = dg__cudnn_pick(cand, n, e->key.cap, fma)) >= 0) {
        if (!fma) DG_CUDNN_CHECK(dg__cudnn.set_math_type(e->conv, math[i]));
        e->algo = cand[i].algo;
        if ((st = workspace_of(g, e, &e->ws_bytes)) != DG_OK) return st;
        if (e->ws_bytes <= e->key.cap) return DG_OK;
        cand[i].ok = false; /* over the cap under its own math type: the next answer */
    }
    if (e->key.cap == 0)
        return dg__fail(DG_ERR_UNSUPPORTED, "cuDNN has no algorithm for it that needs no workspace, and a plan that "
                        "leaves DG_CONV_DEFAULT reserves none (its scratch is that of the kernels set when it was "
                        "made): name DG_CONV_VENDOR in the plan's options");
    return dg__fail(DG_ERR_UNSUPPORTED, "cuDNN has no algorithm for it within %zu bytes of workspace (of %d answers)",
                    e->key.cap, n);
}

/* the cache's entry for key, chosen now where there is none yet */
static dg_status entry_of(gpu_ctx *c, const dg_cudnn_key *key, cudnn_entry **out) {
    gpu_cudnn *g = c->cudnn;
    for (int i = 0; i < g->n; i++)
        if (memcmp(&g->entries[i]->key, key, sizeof *key) == 0) {
            *out = g->entries[i];
            return DG_OK;
        }
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        cudnn_entry **grown = (cudnn_entry **)realloc(g->entries, (size_t)cap * sizeof *grown);
        if (!grown) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for cuDNN's algorithms");
        g->entries = grown;
        g->cap = cap;
    }
    cudnn_entry *e = (cudnn_entry *)calloc(1, sizeof *e);
    if (!e) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for cuDNN's algorithms");
    e->key = *key;
    e->status = choose(g, e);
    if (e->status != DG_OK) snprintf(e->why, sizeof e->why, "%s", dg_last_error()); /* kept: each run says why */
    g->entries[g->n++] = e;
    *out = e;
    return DG_OK;
}

/* n's entry under a step's flags; DG_OK with *out set, or why not (cuDNN
 * absent, a node it cannot take, no algorithm). The backend's device is
 * current (a run's step: no device switch inside a CUDA-graph capture). */
static dg_status entry_for(gpu_ctx *c, const dg_node *n, unsigned flags, cudnn_entry **out) {
    *out = NULL;
    dg_status st = cudnn_ready(c);
    dg_cudnn_key key;
    /* the plan reserved the workspace where it named cuDNN, or left the
     * choice to the backend's AUTO (whose choice for n it knew) */
    bool workspace = DG_STEP_CONV(flags) == DG_CONV_VENDOR ||
                     (DG_STEP_CONV(flags) == DG_CONV_DEFAULT && c->conv == DG_GPU_CONV_AUTO);
    if (st == DG_OK) st = dg__cudnn_key_of(n, flags, workspace, &key);
    if (st == DG_OK) st = entry_of(c, &key, out);
    if (st != DG_OK) return st;
    return (*out)->status == DG_OK ? DG_OK
                                   : dg__fail((*out)->status, "gpu: node '%s' (%s) on cuDNN: %s", n->name,
                                              dg_op_name(n->op), (*out)->why);
}

/* plan time: the handle and the algorithm are made on the backend's device */
size_t dg__gpu_cudnn_scratch_bytes(gpu_ctx *c, const dg_node *n, unsigned flags) {
    cudnn_entry *e;
    if (dg__gpu_enter(c) != DG_OK || entry_for(c, n, flags, &e) != DG_OK) return 0; /* the step fails, saying why */
    return e->ws_bytes;
}

dg_status dg__gpu_cudnn_impl(gpu_ctx *c, const dg_node *n, unsigned flags, char *buf, size_t size) {
    cudnn_entry *e;
    dg_status st = dg__gpu_enter(c);
    if (st == DG_OK) st = entry_for(c, n, flags, &e);
    if (st != DG_OK) return st;
    const char *kind = e->key.dtype == DG_BF16 ? "gpu-cudnn-bf16"
                     : e->key.dtype == DG_F16  ? "gpu-cudnn-f16"
                     : e->key.tf32             ? "gpu-cudnn-tf32"
                                               : "gpu-cudnn";
    snprintf(buf, size, "%s:%s", kind, dg__cudnn_algo_name(e->key.dir, e->algo));
    return DG_OK;
}

dg_status dg__gpu_cudnn_conv(gpu_ctx *c, const dg_step *s) {
    cudnn_entry *e;
    dg_status st = entry_for(c, s->node, s->flags, &e);
    if (st != DG_OK) return st;
    if (e->ws_bytes && !s->scratch)
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s): the step gives no scratch for cuDNN's %zu bytes of "
                        "workspace (a step made without a plan)", s->node->name, dg_op_name(s->node->op), e->ws_bytes);
    cudnnHandle_t h = c->cudnn->handle;
    const float one = 1.0f, zero = 0.0f; /* float scaling for float, half and bfloat16 data alike */
    switch (e->key.dir) {
    case DG_CUDNN_FORWARD: /* y = conv(x [in 0], w [in 1]) */
        DG_CUDNN_CHECK(dg__cudnn.forward(h, &one, e->x, s->in[0], e->w, s->in[1], e->conv,
                                         (cudnnConvolutionFwdAlgo_t)e->algo, s->scratch, e->ws_bytes, &zero, e->y,
                                         s->out));
        return DG_OK;
    case DG_CUDNN_BACKWARD_DATA: /* dx from dy [in 0], w [in 1] */
        DG_CUDNN_CHECK(dg__cudnn.backward_data(h, &one, e->w, s->in[1], e->y, s->in[0], e->conv,
                                               (cudnnConvolutionBwdDataAlgo_t)e->algo, s->scratch, e->ws_bytes, &zero,
                                               e->x, s->out));
        return DG_OK;
    case DG_CUDNN_BACKWARD_FILTER: /* dw from dy [in 0], x [in 1] */
        DG_CUDNN_CHECK(dg__cudnn.backward_filter(h, &one, e->x, s->in[1], e->y, s->in[0], e->conv,
                                                 (cudnnConvolutionBwdFilterAlgo_t)e->algo, s->scratch, e->ws_bytes,
                                                 &zero, e->w, s->out));
        return DG_OK;
    }
    return dg__fail(DG_ERR_INVALID, "gpu: cuDNN direction %d", e->key.dir);
}

void dg__gpu_cudnn_free(gpu_ctx *c) {
    gpu_cudnn *g = c->cudnn;
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        cudnn_entry *e = g->entries[i];
        if (e->conv) DG_CUDNN_NOTE(dg__cudnn.destroy_conv(e->conv));
        if (e->w) DG_CUDNN_NOTE(dg__cudnn.destroy_filter(e->w));
        if (e->y) DG_CUDNN_NOTE(dg__cudnn.destroy_tensor(e->y));
        if (e->x) DG_CUDNN_NOTE(dg__cudnn.destroy_tensor(e->x));
        free(e);
    }
    free(g->entries);
    DG_CUDNN_NOTE(dg__cudnn.destroy(g->handle));
    free(g);
    c->cudnn = NULL;
}

#else /* a build without cudnn.h: every plan that asks for cuDNN was refused by dg__cudnn_load */

size_t dg__gpu_cudnn_scratch_bytes(gpu_ctx *, const dg_node *, unsigned) { return 0; }
dg_status dg__gpu_cudnn_impl(gpu_ctx *, const dg_node *, unsigned, char *, size_t) { return dg__cudnn_load(); }
dg_status dg__gpu_cudnn_conv(gpu_ctx *, const dg_step *) { return dg__cudnn_load(); }
void dg__gpu_cudnn_free(gpu_ctx *) {}

#endif
