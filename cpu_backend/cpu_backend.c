/* cpu_backend.c: the CPU backend's vtable, memory and op dispatch. */
#include "cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct cpu_ctx {
    int         threads;
    dg_cpu_gemm gemm;
    float      *pack;   /* dg_cpu_sgemm_own scratch for `threads` threads */
} cpu_ctx;

static cpu_ctx *ctx_of(const dg_backend *be) { return be->ctx; }

static const char *cpu_name(const dg_backend *be) { (void)be; return "cpu"; }

static void cpu_free(dg_backend *be) {
    free(ctx_of(be)->pack);
    free(be->ctx);
    free(be);
}

static dg_status cpu_alloc(dg_backend *be, size_t bytes, void **out) {
    (void)be;
    *out = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    return *out ? DG_OK : dg__fail(DG_ERR_OOM, "cpu: out of memory allocating %zu bytes", bytes);
}

static void cpu_release(dg_backend *be, void *ptr) { (void)be; free(ptr); }

static dg_status cpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    memcpy(dst, src, bytes);
    return DG_OK;
}

static bool cpu_supports(const dg_backend *be, dg_op op) {
    (void)be;
    return op != DG_OP_LEAF && op < DG_OP_COUNT;
}

/* [b,]m,n from the output, k from op(A); row strides from the stored shapes */
static void cpu_matmul(cpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node, *a = nd->in[0], *b = nd->in[1];
    int r = nd->shape.ndim - 2;
    int64_t batch = r ? nd->shape.d[0] : 1;
    int m = (int)nd->shape.d[r], n = (int)nd->shape.d[r + 1];
    bool ta = nd->p.trans_a, tb = nd->p.trans_b;
    int k = (int)(ta ? a->shape.d[r] : a->shape.d[r + 1]);
    int lda = (int)a->shape.d[r + 1], ldb = (int)b->shape.d[r + 1];
    for (int64_t i = 0; i < batch; i++) {
        const float *A = (const float *)s->in[0] + i * (int64_t)m * k;
        const float *B = (const float *)s->in[1] + i * (int64_t)k * n;
        float *C = (float *)s->out + i * (int64_t)m * n;
        switch (c->gemm) {
        case DG_CPU_GEMM_OPENBLAS: dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n); break;
        case DG_CPU_GEMM_OWN:      dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, c->pack); break;
        case DG_CPU_GEMM_NAIVE:    dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, n); break;
        }
    }
}

static dg_status cpu_compute(dg_backend *be, const dg_step *s) {
    switch (s->node->op) {
    case DG_OP_NEG: case DG_OP_ADD_SCALAR: case DG_OP_MUL_SCALAR: case DG_OP_POW_SCALAR:
    case DG_OP_EXP: case DG_OP_LOG: case DG_OP_SQRT: case DG_OP_ABS: case DG_OP_RELU:
    case DG_OP_LEAKY_RELU: case DG_OP_SIGMOID: case DG_OP_TANH: case DG_OP_GELU:
        dg__cpu_unary(s); break;
    case DG_OP_ADD: case DG_OP_SUB: case DG_OP_MUL: case DG_OP_DIV:
        dg__cpu_binary(s); break;
    case DG_OP_RELU_BACKWARD: case DG_OP_LEAKY_RELU_BACKWARD: case DG_OP_ABS_BACKWARD:
    case DG_OP_SIGMOID_BACKWARD: case DG_OP_TANH_BACKWARD: case DG_OP_GELU_BACKWARD:
        dg__cpu_unary_backward(s); break;
    case DG_OP_MATMUL:       cpu_matmul(ctx_of(be), s); break;
    case DG_OP_PERMUTE:      dg__cpu_permute(s); break;
    case DG_OP_RESHAPE:      break; /* a view: nothing to compute */
    case DG_OP_SUM: case DG_OP_MEAN:
        dg__cpu_reduce(s); break;
    case DG_OP_BROADCAST_TO: dg__cpu_broadcast_to(s); break;
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
        dg__cpu_softmax(s); break;
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
        dg__cpu_softmax_backward(s); break;
    case DG_OP_SOFTMAX_CE:          dg__cpu_softmax_ce(s); break;
    case DG_OP_SOFTMAX_CE_BACKWARD: dg__cpu_softmax_ce_backward(s); break;
    case DG_OP_SGD_UPDATE: case DG_OP_MOMENTUM_UPDATE: case DG_OP_ADAM_STEP: case DG_OP_ADAM_UPDATE:
        dg__cpu_update(s); break;
    case DG_OP_LEAF:
    case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: op %s cannot be computed", dg_op_name(s->node->op));
    }
    return DG_OK;
}

static dg_status cpu_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                 size_t row_bytes) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        memcpy((char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes, row_bytes);
    return DG_OK;
}

static const dg_backend_i cpu_iface = {
    /* .name       = */ cpu_name,
    /* .free       = */ cpu_free,
    /* .alloc      = */ cpu_alloc,
    /* .release    = */ cpu_release,
    /* .upload     = */ cpu_copy,
    /* .download   = */ cpu_copy,
    /* .sync       = */ NULL,
    /* .supports   = */ cpu_supports,
    /* .compute    = */ cpu_compute,
    /* .run_steps  = */ NULL,
    /* .cache_free = */ NULL,
    /* .gather_rows= */ cpu_gather_rows,
};

dg_status dg_cpu_backend_new(dg_backend **out, int threads) {
    *out = NULL;
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    threads = omp_get_max_threads();
    dg_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    float *pack = malloc(dg_cpu_gemm_own_pack_floats(threads) * sizeof(float));
    if (!be || !c || !pack) {
        free(be); free(c); free(pack);
        return dg__fail(DG_ERR_OOM, "cpu: out of memory creating the backend");
    }
    *c = (cpu_ctx){threads, DG_CPU_GEMM_OPENBLAS, pack};
    *be = (dg_backend){.iface = &cpu_iface, .ctx = c};
    *out = be;
    return DG_OK;
}

int dg_cpu_threads(const dg_backend *be) { return ctx_of(be)->threads; }

void dg_cpu_set_gemm(dg_backend *be, dg_cpu_gemm impl) { ctx_of(be)->gemm = impl; }

const char *dg_cpu_blas_info(char *buf, size_t n) {
    int par = openblas_get_parallel(); /* 0 sequential, 1 pthreads, 2 OpenMP */
    snprintf(buf, n, "%s (parallel: %s)", openblas_get_config(),
             par == 2 ? "OpenMP" : par == 1 ? "pthreads" : "sequential");
    return buf;
}
