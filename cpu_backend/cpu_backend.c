/* cpu_backend.c: the CPU backend's vtable, memory and op dispatch. */
#include "cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/backend_impl.h"
#include "../core/layout.h"
#include "../core/status_internal.h"
#include "cpu_all_reduce.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"
#include "cpu_onednn.h"
#include "cpu_onednn_conv.h"

typedef struct cpu_ctx {
    int         threads;
    dg_cpu_gemm gemm;
    dg_cpu_conv conv;
    float      *pack;   /* dg_cpu_sgemm_own scratch for `threads` threads */
    float      *attn;   /* fused attention's tiles for `threads` threads   */
    float      *wide;   /* dg_cpu_gemm_ex's float32 operands of a bf16 or
                         * f16 product, grown to the largest asked        */
    size_t      wide_floats;
    dg_onednn  *onednn; /* made at the first oneDNN product (DG_HAVE_ONEDNN) */
    dg_onednn_convs *onednn_conv; /* made at the first oneDNN convolution */
    void       *conv_ws;  /* the oneDNN convolutions' scratch where the step
                           * has none of its own (onednn_conv_step) */
    size_t      conv_ws_bytes;
    /* across processes (dg_cpu_set_all_reduce, _overlap): NULL, one
     * process, all_reduce is a copy */
    cpu_comm     *comm;
    bool          in_run;  /* a plan's run (cpu_run_steps): all_reduce may queue */
} cpu_ctx;

static cpu_ctx *ctx_of(const dg_backend *be) { return be->ctx; }

static const char *cpu_name(const dg_backend *be) { (void)be; return "cpu"; }

static void cpu_free(dg_backend *be) {
    free(ctx_of(be)->pack);
    free(ctx_of(be)->attn);
    free(ctx_of(be)->wide);
#ifdef DG_HAVE_ONEDNN
    dg__onednn_free(ctx_of(be)->onednn);
    dg__onednn_convs_free(ctx_of(be)->onednn_conv);
#endif
    free(ctx_of(be)->conv_ws);
    dg__cpu_comm_free(ctx_of(be)->comm);
    free(be->ctx);
    free(be);
}

/* OpenMP's and OpenBLAS's thread counts are process-wide state; each entry
 * that runs work applies this backend's count, so backends with different
 * counts can live in one process. Only a change costs anything: OpenBLAS's
 * setter reallocates its per-thread buffers, and its getter cannot tell
 * what was set (the OpenMP build re-reads the machine's processor count on
 * every call), so the count last given to OpenBLAS is remembered here. */
static int blas_threads_applied;

static void apply_threads(const cpu_ctx *c) {
    if (omp_get_max_threads() != c->threads) omp_set_num_threads(c->threads);
    if (blas_threads_applied != c->threads) {
        openblas_set_num_threads(c->threads);
        blas_threads_applied = c->threads;
    }
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

/* every op the core has, at any shape the builders accept */
static bool cpu_supports(const dg_backend *be, const dg_node *n) {
    (void)be;
    return n->op != DG_OP_LEAF && n->op != DG_OP_SIDE_OUTPUT && n->op < DG_OP_COUNT;
}

static void sgemm(const cpu_ctx *c, dg_cpu_gemm impl, bool ta, bool tb, int m, int n, int k, const float *A,
                  int lda, const float *B, int ldb, float *C, int ldc, bool acc) {
    switch (impl) {
    case DG_CPU_GEMM_OPENBLAS: dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, acc); break;
    case DG_CPU_GEMM_OWN:      dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, acc, c->pack); break;
    case DG_CPU_GEMM_NAIVE:    dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, acc); break;
    /* the convolutions' strided, accumulating products and the chunks of a
     * bf16/f16-output matmul (matmul_lowp_out) come here with ONEDNN:
     * OpenBLAS runs them */
    case DG_CPU_GEMM_ONEDNN:   dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, acc); break;
    }
}

#ifdef DG_HAVE_ONEDNN
/* c's oneDNN state, made at its first use */
static dg_status onednn_of(cpu_ctx *c, dg_onednn **out) {
    if (!c->onednn) {
        dg_status st = dg__onednn_new(&c->onednn);
        if (st != DG_OK) return st;
    }
    *out = c->onednn;
    return DG_OK;
}
#endif

/* *ok: oneDNN has its own kernel for g's dtype (its primitive now made
 * and cached); false in a build without oneDNN */
static dg_status onednn_native(cpu_ctx *c, const dg_onednn_gemm *g, bool *ok) {
    *ok = false;
#ifdef DG_HAVE_ONEDNN
    dg_onednn *o;
    dg_status st = onednn_of(c, &o);
    return st != DG_OK ? st : dg__onednn_prepare(o, g, ok);
#else
    (void)c;
    (void)g;
    return DG_OK;
#endif
}

static dg_status no_onednn(void) {
    return dg__fail(DG_ERR_UNSUPPORTED, "cpu: no oneDNN GEMM in this build (configured with DG_ONEDNN=OFF)");
}

/* the float32 buffer for both widened operands of g, grown as needed */
static dg_status wide_buffer(cpu_ctx *c, const dg_onednn_gemm *g, float **out) {
    size_t need = (size_t)g->batch * ((size_t)g->m * g->k + (size_t)g->k * g->n);
    if (need > c->wide_floats) {
        float *w = realloc(c->wide, need * sizeof(float));
        if (!w) return dg__fail(DG_ERR_OOM, "cpu: %zu floats for the widened operands of a GEMM", need);
        c->wide = w;
        c->wide_floats = need;
    }
    *out = c->wide;
    return DG_OK;
}

/* C = op(A) op(B) for each of g's batch (packed, row-major) by impl.
 * ONEDNN: oneDNN's kernel for g's dtype, else (f16) the widened operands
 * by its float32 one. Other impls: bf16 and f16 operands first widened to
 * float32 (exactly: the products of two such values are exact in float32,
 * so this is the float32-accumulating GEMM of the low-precision values)
 * into `wide` (NULL: the backend's buffer), then impl's sgemm. */
static dg_status gemm_packed(cpu_ctx *c, dg_cpu_gemm impl, dg_onednn_gemm g, const void *A, const void *B, float *C,
                             float *wide) {
    bool onednn = impl == DG_CPU_GEMM_ONEDNN;
    if (onednn) {
        if (!dg_cpu_has_onednn()) return no_onednn();
        bool native;
        dg_status st = onednn_native(c, &g, &native);
#ifdef DG_HAVE_ONEDNN
        if (st == DG_OK && native) return dg__onednn_gemm(c->onednn, &g, A, B, C);
#endif
        if (st != DG_OK) return st;
    }
    if (g.dtype == DG_BF16 || g.dtype == DG_F16) {
        dg_status st = wide ? DG_OK : wide_buffer(c, &g, &wide);
        if (st != DG_OK) return st;
        int64_t na = (int64_t)g.batch * g.m * g.k;
        dg__cpu_widen(g.dtype, A, wide, na);
        dg__cpu_widen(g.dtype, B, wide + na, (int64_t)g.batch * g.k * g.n);
        A = wide;
        B = wide + na;
        g.dtype = DG_F32;
    } else if (g.dtype != DG_F32) {
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: no GEMM of %s operands", dg_dtype_name(g.dtype));
    }
#ifdef DG_HAVE_ONEDNN
    if (onednn) return dg__onednn_gemm(c->onednn, &g, A, B, C);
#endif
    const float *a = A, *b = B;
    for (int i = 0; i < g.batch; i++)
        sgemm(c, impl, g.ta, g.tb, g.m, g.n, g.k, a + (size_t)i * g.m * g.k, g.ta ? g.m : g.k,
              b + (size_t)i * g.k * g.n, g.tb ? g.k : g.n, C + (size_t)i * g.m * g.n, g.n, false);
    return DG_OK;
}

/* Whether the vendor choice takes oneDNN for a product of dtype t: a
 * low-precision one it has its own kernel for, on a CPU where that kernel
 * outruns widening for OpenBLAS (AMX; cpu_onednn.h) */
static bool onednn_vendor(dg_dtype t) {
#ifdef DG_HAVE_ONEDNN
    return t != DG_F32 && dg__onednn_bf16_pays();
#else
    (void)t;
    return false;
#endif
}

/* What a matmul step of g's operands runs with under the step's impl:
 * the vendor choice (OPENBLAS) multiplies bf16 operands with oneDNN where
 * onednn_vendor says so, everything else with OpenBLAS (f16: oneDNN 2.6
 * has no kernel); every other impl as chosen. */
static dg_status matmul_impl(cpu_ctx *c, dg_cpu_gemm impl, const dg_onednn_gemm *g, dg_cpu_gemm *out) {
    *out = impl;
    if (impl != DG_CPU_GEMM_OPENBLAS || !onednn_vendor(g->dtype)) return DG_OK;
    bool native;
    dg_status st = onednn_native(c, g, &native);
    if (st == DG_OK && native) *out = DG_CPU_GEMM_ONEDNN;
    return st;
}

static dg_onednn_gemm matmul_gemm(const dg_node *n) {
    dg_gemm_dims d = dg_gemm_dims_of(n);
    return (dg_onednn_gemm){n->in[0]->dtype, d.ta, d.tb, d.batch, d.m, d.n, d.k, DG_F32};
}

/* The step's sgemm: its plan's choice (DG_STEP_GEMM), or the backend's
 * setting for DEFAULT. -1 for a choice this backend does not offer. */
static int step_gemm(const cpu_ctx *c, unsigned flags) {
    switch (DG_STEP_GEMM(flags)) {
    case DG_GEMM_DEFAULT: return (int)c->gemm;
    case DG_GEMM_VENDOR:  return DG_CPU_GEMM_OPENBLAS;
    case DG_GEMM_OWN:     return DG_CPU_GEMM_OWN;
    case DG_GEMM_NAIVE:   return DG_CPU_GEMM_NAIVE;
    case DG_GEMM_COUNT:   break;
    }
    return -1;
}

/* The step's convolution strategy, as step_gemm: -1 for the GPU's implicit
 * GEMM (and anything else the CPU does not have); the vendor's is oneDNN's,
 * refused later (refuse_choice) in a build without it */
static int step_conv(const cpu_ctx *c, unsigned flags) {
    switch (DG_STEP_CONV(flags)) {
    case DG_CONV_DEFAULT:         return (int)c->conv;
    case DG_CONV_IM2COL:          return DG_CPU_CONV_PASSES;
    case DG_CONV_IM2COL_BATCH:    return DG_CPU_CONV_BATCH;
    case DG_CONV_SHIFT:           return DG_CPU_CONV_SHIFT;
    case DG_CONV_IM2COL_CHANNELS: return DG_CPU_CONV_CHANNELS;
    case DG_CONV_VENDOR:          return DG_CPU_CONV_ONEDNN;
    case DG_CONV_OWN:             return DG_CPU_CONV_DEFAULT;
    case DG_CONV_IMPLICIT:
    case DG_CONV_COUNT:           break;
    }
    return -1;
}

/* a choice this backend does not offer, or oneDNN's in a build without it */
static bool refused(int gemm, int conv) {
    return gemm < 0 || conv < 0 || (conv == DG_CPU_CONV_ONEDNN && !dg_cpu_has_onednn());
}

static dg_status refuse_choice(const cpu_ctx *c, unsigned flags) {
    if (step_conv(c, flags) == DG_CPU_CONV_ONEDNN)
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: no oneDNN convolution in this build (configured with DG_ONEDNN=OFF)");
    if (step_gemm(c, flags) < 0)
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu backend: no GEMM implementation %d", (int)DG_STEP_GEMM(flags));
    return dg__fail(DG_ERR_UNSUPPORTED, "cpu backend: convolution implementation %d is not one of the CPU's (the "
                    "implicit GEMM is the GPU's)", (int)DG_STEP_CONV(flags));
}

static bool is_conv(dg_op op) {
    return op == DG_OP_CONV2D || op == DG_OP_CONV2D_BACKWARD_DATA || op == DG_OP_CONV2D_BACKWARD_WEIGHT;
}

/* whether oneDNN's bf16 kernels are AMX's (what AUTO's rule asks of the ISA) */
static bool onednn_amx(void) {
#ifdef DG_HAVE_ONEDNN
    return dg__onednn_bf16_pays();
#else
    return false;
#endif
}

/* The strategy n's step runs: the step's (step_conv), AUTO resolved for
 * the node to ONEDNN or the own DEFAULT by its rule (cpu_conv_auto.c),
 * the own everywhere in a build without oneDNN. Not a convolution: the
 * step's, which only a refusal reads. */
static int node_conv(const cpu_ctx *c, const dg_node *n, unsigned flags) {
    int conv = step_conv(c, flags);
    if (conv != DG_CPU_CONV_AUTO || !n || !is_conv(n->op)) return conv;
    if (!dg_cpu_has_onednn()) return DG_CPU_CONV_DEFAULT;
    dg_conv_dims d = dg_conv_dims_of(n);
    return dg__cpu_conv_auto_onednn(&d, n->op, n->in[0]->dtype, onednn_amx()) ? DG_CPU_CONV_ONEDNN
                                                                                : DG_CPU_CONV_DEFAULT;
}

/* n's oneDNN convolution as the backend runs it: its geometry, its inputs'
 * dtype, the backend's threads, and the layout that won on the 2-core VM
 * (docs/PERF.md, "oneDNN's convolutions"): oneDNN's blocked formats, the
 * operands reordered in the step's scratch, for both strides 1 (its jit
 * kernels: up to 5x the NCHW primitive, the weight's gradient most);
 * NCHW/OIHW as they are for a strided one (its gemm:jit kernel outran the
 * blocked one and its reorders in every direction of the stride-2 layer). */
#ifdef DG_HAVE_ONEDNN
static dg_onednn_conv onednn_conv_of(const cpu_ctx *c, const dg_node *n) {
    dg_conv_dims d = dg_conv_dims_of(n);
    bool blocked = d.sh == 1 && d.sw == 1;
    return (dg_onednn_conv){n->op, n->in[0]->dtype, blocked, c->threads, d.n, d.c, d.h, d.w, d.o, d.oh, d.ow,
                            d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.groups};
}
#endif

/* n's oneDNN convolution found or made (on the backend's threads, which
 * it is made for), and what it needs; DG_ERR_UNSUPPORTED in a build
 * without oneDNN */
static dg_status onednn_conv_prepare(cpu_ctx *c, const dg_node *n, dg_onednn_conv_info *info) {
#ifdef DG_HAVE_ONEDNN
    if (!c->onednn_conv) {
        dg_status st = dg__onednn_convs_new(&c->onednn_conv);
        if (st != DG_OK) return st;
    }
    apply_threads(c);
    dg_onednn_conv k = onednn_conv_of(c, n);
    return dg__onednn_conv_prepare(c->onednn_conv, &k, info);
#else
    (void)n;
    *info = (dg_onednn_conv_info){0, false, NULL};
    return refuse_choice(c, (unsigned)DG_CONV_VENDOR << DG_STEP_CONV_SHIFT);
#endif
}

/* the backend's own scratch for oneDNN's convolutions, grown to `bytes` */
static dg_status conv_workspace(cpu_ctx *c, size_t bytes, void **out) {
    if (bytes > c->conv_ws_bytes) {
        void *w = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (!w) return dg__fail(DG_ERR_OOM, "cpu: %zu bytes of scratch for oneDNN's convolutions", bytes);
        free(c->conv_ws);
        c->conv_ws = w;
        c->conv_ws_bytes = bytes;
    }
    *out = c->conv_ws;
    return DG_OK;
}

/* The scratch a plan reserves for n's oneDNN convolution, which is made
 * here, as the plan is laid out, so that none is created in its timed
 * steps. Asked by name (DG_CONV_VENDOR): what the primitive needs. Left to
 * the backend's setting (DEFAULT, set to ONEDNN): the im2col columns as
 * for the own strategies, so the setting may change after the plan is
 * made, and the backend's own workspace grown to what the primitive needs.
 * Where oneDNN refuses the node, the same columns: the step then fails
 * with oneDNN's message. */
static size_t onednn_conv_step_scratch(const dg_backend *be, const dg_node *n, unsigned flags) {
    cpu_ctx *c = ctx_of(be);
    dg_onednn_conv_info info;
    if (onednn_conv_prepare(c, n, &info) != DG_OK) return dg_backend_scratch_bytes(be, n);
    if (DG_STEP_CONV(flags) == DG_CONV_VENDOR) return info.scratch;
    void *ws;
    (void)conv_workspace(c, info.scratch, &ws); /* out of memory: said again when the step runs */
    return dg_backend_scratch_bytes(be, n);
}

/* n's convolution by oneDNN: in the step's scratch where the plan asked
 * for oneDNN by name (onednn_conv_step_scratch), else in the backend's
 * workspace (DEFAULT set to ONEDNN, a step without scratch) */
static dg_status onednn_conv_step(cpu_ctx *c, const dg_step *s) {
    dg_onednn_conv_info info;
    dg_status st = onednn_conv_prepare(c, s->node, &info);
    void *scratch = s->scratch;
    if (st == DG_OK && (DG_STEP_CONV(s->flags) != DG_CONV_VENDOR || !scratch))
        st = conv_workspace(c, info.scratch, &scratch);
    if (st != DG_OK) return st;
#ifdef DG_HAVE_ONEDNN
    dg_onednn_conv k = onednn_conv_of(c, s->node);
    return dg__onednn_conv_run(c->onednn_conv, &k, s->in[0], s->in[1], s->out, scratch);
#else
    return refuse_choice(c, s->flags);
#endif
}

/* the operands' float32 copies of a bf16 or f16 product: scratch of the
 * step, one float per element of each */
static size_t widened_operand_floats(const dg_node *n) {
    return n->op == DG_OP_MATMUL && n->in[0]->dtype != DG_F32
               ? (size_t)dg_node_numel(n->in[0]) + (size_t)dg_node_numel(n->in[1])
               : 0;
}

/* A bf16 or f16 matmul output is summed in float32 a chunk of rows at a
 * time into scratch, then rounded into the output: rows of at most this
 * many floats (at least one row), so the scratch stays far smaller than
 * the float32 output it stands for. */
#define LOWP_OUT_CHUNK_FLOATS ((int64_t)65536)

static int64_t lowp_out_rows(const dg_gemm_dims *d) {
    int64_t r = LOWP_OUT_CHUNK_FLOATS / d->n;
    return r < 1 ? 1 : r < d->m ? r : d->m;
}

/* the float32 rows of a bf16 or f16 row op (cpu_softmax.c,
 * cpu_layer_norm.c: rows widened per thread), or of a matmul's chunk of
 * rounded output */
static size_t lowp_floats(const dg_node *n, int threads) {
    int64_t row = n->shape.d[n->shape.ndim - 1];
    switch (n->op) {
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
        return n->in[0]->dtype != DG_F32 || n->in[n->n_in - 1]->dtype != DG_F32 ? (size_t)(threads * 2 * row) : 0;
    case DG_OP_LAYER_NORM: return n->dtype != DG_F32 ? (size_t)(threads * 4 * row) : 0;
    case DG_OP_LAYER_NORM_BACKWARD:
        return n->in[0]->dtype != DG_F32 || n->in[1]->dtype != DG_F32 || n->in[2]->dtype != DG_F32
                   ? (size_t)(threads * 3 * row) : 0;
    case DG_OP_MATMUL: {
        if (n->dtype == DG_F32) return 0;
        dg_gemm_dims d = dg_gemm_dims_of(n);
        return (size_t)(lowp_out_rows(&d) * d.n);
    }
    default: return 0;
    }
}

/* a 16-bit convolution's float32 copies go ahead of the strategies' own
 * scratch (dg_conv_widened_of) */
static size_t cpu_scratch_bytes(const dg_backend *be, const dg_node *n) {
    size_t wide = widened_operand_floats(n) + lowp_floats(n, ctx_of(be)->threads);
    if (wide) return wide * sizeof(float);
    return (size_t)dg_conv_widened_of(n).inner * sizeof(float) + dg_node_scratch_bytes(n);
}

/* As cpu_scratch_bytes, but none for a bf16 product of float32 output that
 * oneDNN's own kernel multiplies (ONEDNN, or the vendor choice where
 * onednn_vendor takes it): such a plan's arena holds no float32 copies.
 * Should the CPU turn out to have no such kernel, or the backend's default
 * change to another sgemm before the step runs, cpu_matmul widens into the
 * backend's buffer. */
static size_t cpu_step_scratch_bytes(const dg_backend *be, const dg_node *n, unsigned flags) {
    int gemm = step_gemm(ctx_of(be), flags);
    if (is_conv(n->op) && node_conv(ctx_of(be), n, flags) == DG_CPU_CONV_ONEDNN)
        return onednn_conv_step_scratch(be, n, flags);
    if (n->op == DG_OP_MATMUL && n->in[0]->dtype == DG_BF16 && n->dtype == DG_F32 && dg_cpu_has_onednn() &&
        (gemm == DG_CPU_GEMM_ONEDNN || (gemm == DG_CPU_GEMM_OPENBLAS && onednn_vendor(DG_BF16))))
        return 0;
    return dg_backend_scratch_bytes(be, n); /* the interface's, as without flags */
}

/* A bf16 or f16 output (dg_matmul_ex): the operands widened into the
 * step's scratch, then rows [r0, r0 + rows) of op(A) (A + r0 rows, or A +
 * r0 columns when transposed) summed by impl's sgemm (OpenBLAS's for
 * ONEDNN) into the float32 chunk after the widened operands, and rounded
 * out */
static dg_status matmul_lowp_out(const cpu_ctx *c, dg_cpu_gemm impl, const dg_step *s) {
    dg_gemm_dims d = dg_gemm_dims_of(s->node);
    const dg_node *a = s->node->in[0], *b = s->node->in[1];
    float *wide = s->scratch;
    int64_t na = dg_node_numel(a);
    dg__cpu_widen(a->dtype, s->in[0], wide, na);
    dg__cpu_widen(b->dtype, s->in[1], wide + na, dg_node_numel(b));
    const float *A = wide, *B = wide + na;
    float *chunk = wide + widened_operand_floats(s->node);
    int64_t rows = lowp_out_rows(&d);
    dg_dtype t = s->node->dtype;
    for (int i = 0; i < d.batch; i++)
        for (int64_t r0 = 0; r0 < d.m; r0 += rows) {
            int rn = (int)(d.m - r0 < rows ? d.m - r0 : rows);
            sgemm(c, impl, d.ta, d.tb, rn, d.n, d.k, A + i * d.stride_a + (d.ta ? r0 : r0 * d.lda), d.lda,
                  B + i * d.stride_b, d.ldb, chunk, d.n, false);
#pragma omp parallel for schedule(static)
            for (int r = 0; r < rn; r++)
                dg__lp_store(t, s->out, i * d.stride_c + (r0 + r) * d.ldc, d.n, chunk + (int64_t)r * d.n);
        }
    return DG_OK;
}

/* *yes: whether n, a product of bf16 operands with a bf16 output, runs by
 * oneDNN's own kernel under impl, as a float32-output one would
 * (matmul_impl: the backend's default at ONEDNN, or the vendor choice
 * where that kernel is AMX's), oneDNN rounding its float32 sums on store;
 * else matmul_lowp_out widens for an sgemm. g->out becomes n's dtype. The
 * plan keeps matmul_lowp_out's scratch either way: the backend's default
 * may change before the step runs. */
static dg_status lowp_out_by_onednn(cpu_ctx *c, dg_cpu_gemm impl, dg_onednn_gemm *g, const dg_node *n, bool *yes) {
    *yes = false;
    if (g->dtype != DG_BF16 || n->dtype != DG_BF16 || !dg_cpu_has_onednn()) return DG_OK;
    g->out = DG_BF16;
    dg_cpu_gemm resolved;
    dg_status st = matmul_impl(c, impl, g, &resolved);
    if (st != DG_OK || resolved != DG_CPU_GEMM_ONEDNN) return st;
    return onednn_native(c, g, yes);
}

/* the matmul step: its operands' product by its impl (matmul_impl), any
 * widened operands in the step's scratch, or, where the plan reserved none
 * (cpu_step_scratch_bytes), the backend's buffer; a bf16 or f16 output by
 * oneDNN's kernel where lowp_out_by_onednn says so, else matmul_lowp_out */
static dg_status cpu_matmul(cpu_ctx *c, dg_cpu_gemm impl, const dg_step *s) {
    dg_onednn_gemm g = matmul_gemm(s->node);
    if (g.dtype != DG_F32 && g.dtype != DG_BF16 && g.dtype != DG_F16)
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: matmul %s of %s operands", s->node->name, dg_dtype_name(g.dtype));
    if (s->node->dtype != DG_F32) {
        bool by_onednn;
        dg_status st = lowp_out_by_onednn(c, impl, &g, s->node, &by_onednn);
        if (st != DG_OK) return st;
#ifdef DG_HAVE_ONEDNN
        if (by_onednn) return dg__onednn_gemm(c->onednn, &g, s->in[0], s->in[1], s->out);
#endif
        return matmul_lowp_out(c, impl, s);
    }
    dg_status st = matmul_impl(c, impl, &g, &impl);
    return st != DG_OK ? st : gemm_packed(c, impl, g, s->in[0], s->in[1], s->out, s->scratch);
}

/* sgemm above with the step's choice, as the convolution kernels call it */
typedef struct step_blas { const cpu_ctx *c; dg_cpu_gemm impl; } step_blas;

static void selected_sgemm(const void *ctx, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                           const float *B, int ldb, float *C, int ldc, bool accumulate) {
    const step_blas *b = ctx;
    sgemm(b->c, b->impl, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, accumulate);
}

/* Whether `impl` may be called from every thread of a parallel region at
 * once, each call on its own thread: the own sgemm shares one packing
 * buffer between calls (never two at once); OpenBLAS only in its OpenMP or
 * sequential build (the OpenMP build runs on the calling thread inside a
 * parallel region; a pthreads build, which a system may link instead,
 * would start its own threads under every caller). */
static bool sgemm_serial_in_parallel(dg_cpu_gemm impl) {
    switch (impl) {
    case DG_CPU_GEMM_OPENBLAS:
    case DG_CPU_GEMM_ONEDNN: /* OpenBLAS runs a convolution's products (sgemm) */
        return openblas_get_parallel() != 1; /* 0 sequential, 1 pthreads, 2 OpenMP */
    case DG_CPU_GEMM_OWN:      return false;
    case DG_CPU_GEMM_NAIVE:    return true;
    }
    return false;
}

/* conv2d and its two backward ops, with the step's sgemm and strategy */
static dg_status cpu_conv(const cpu_ctx *c, dg_cpu_gemm gemm, dg_cpu_conv conv, const dg_step *s) {
    const step_blas b = {c, gemm};
    const dg_cpu_blas blas = {selected_sgemm, &b, sgemm_serial_in_parallel(gemm)};
    switch (s->node->op) {
    case DG_OP_CONV2D:               return dg__cpu_conv2d(s, &blas, conv);
    case DG_OP_CONV2D_BACKWARD_DATA: return dg__cpu_conv2d_backward_data(s, &blas, conv);
    case DG_OP_CONV2D_BACKWARD_WEIGHT: return dg__cpu_conv2d_backward_weight(s, &blas, conv);
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "cpu: %s is not a convolution", dg_op_name(s->node->op));
}

/* A bf16 or f16 convolution on the float32 strategies: both inputs
 * widened into the step's scratch, cpu_conv into the float32 output there
 * (the strategies' scratch after it), then rounded into the node's output
 * (layout: dg_conv_widened_of). The sums are float32, as in a 16-bit
 * convolution of oneDNN's; only the io is 16 bits wide. */
static dg_status cpu_conv_widened(const cpu_ctx *c, dg_cpu_gemm gemm, dg_cpu_conv conv, const dg_step *s) {
    const dg_node *n = s->node;
    if (!s->scratch)
        return dg__fail(DG_ERR_INVALID, "cpu: %s '%s' (%s) needs scratch for its float32 copies (a step from "
                        "dg_step_of: run it through a plan's steps)", dg_op_name(n->op), n->name,
                        dg_dtype_name(n->dtype));
    dg_conv_widened w = dg_conv_widened_of(n);
    float *f = s->scratch;
    dg__cpu_widen(n->in[0]->dtype, s->in[0], f, dg_node_numel(n->in[0]));
    dg__cpu_widen(n->in[1]->dtype, s->in[1], f + w.in1, dg_node_numel(n->in[1]));
    dg_step wide = *s;
    wide.in[0] = f;
    wide.in[1] = f + w.in1;
    wide.out = f + w.out;
    wide.scratch = dg_node_scratch_bytes(n) ? f + w.inner : NULL;
    dg_status st = cpu_conv(c, gemm, conv, &wide);
    if (st == DG_OK) dg__cpu_narrow(n->dtype, f + w.out, s->out, dg_node_numel(n));
    return st;
}

/* What n's step runs as under flags (dg_backend_step_impl): the matmul's
 * sgemm, the convolution's strategy on the backend's threads with the
 * step's sgemm, the backend's name for every other op. */
static dg_status cpu_step_impl(const dg_backend *be, const dg_node *n, unsigned flags, char *buf, size_t size) {
    cpu_ctx *c = ctx_of(be);
    int gemm = step_gemm(c, flags), conv = node_conv(c, n, flags);
    if (refused(gemm, conv)) return refuse_choice(c, flags);
    if (!n) return DG_OK;
    const char *name = "cpu";
    switch (n->op) {
    case DG_OP_MATMUL: {
        /* asking makes the step's oneDNN primitive, if it has one: a plan's
         * profile names its steps before it times them */
        static const char *const names[] = {"cpu-openblas", "cpu-own", "cpu-naive", "cpu-onednn"};
        dg_onednn_gemm g = matmul_gemm(n);
        apply_threads(c); /* the count the primitive is made for (cpu_onednn.c) */
        if (n->dtype != DG_F32) { /* a bf16/f16 output: oneDNN's kernel, or widened for the sgemm */
            bool by_onednn;
            dg_status st = lowp_out_by_onednn(c, (dg_cpu_gemm)gemm, &g, n, &by_onednn);
            if (st != DG_OK) return st;
            if (by_onednn) snprintf(buf, size, "cpu-onednn-%s", dg_dtype_name(g.dtype));
            else snprintf(buf, size, "%s-%s-widened", names[gemm == DG_CPU_GEMM_ONEDNN ? DG_CPU_GEMM_OPENBLAS : gemm],
                          dg_dtype_name(g.dtype));
            return DG_OK;
        }
        dg_cpu_gemm impl;
        bool native = false;
        dg_status st = matmul_impl(c, (dg_cpu_gemm)gemm, &g, &impl);
        if (st == DG_OK && impl == DG_CPU_GEMM_ONEDNN)
            st = dg_cpu_has_onednn() ? onednn_native(c, &g, &native) : no_onednn();
        if (st != DG_OK) return st;
        if (g.dtype == DG_F32)
            snprintf(buf, size, "%s", names[impl]);
        else /* bf16 by oneDNN's own kernel, or widened to float32 first */
            snprintf(buf, size, "%s-%s%s", names[impl], dg_dtype_name(g.dtype), native ? "" : "-widened");
        return DG_OK;
    }
    case DG_OPS_CONV: {
        if (conv == DG_CPU_CONV_ONEDNN) { /* made here if not yet: a plan names its steps before timing them */
            dg_onednn_conv_info info;
            dg_status st = onednn_conv_prepare(c, n, &info);
            if (st != DG_OK) return st;
            dg_dtype t = n->in[0]->dtype;
            snprintf(buf, size, "cpu-onednn%s%s%s:%s", t == DG_F32 ? "" : "-", t == DG_F32 ? "" : dg_dtype_name(t),
                     info.widened ? "-widened" : "", info.impl);
            return DG_OK;
        }
        dg_conv_dims d = dg_conv_dims_of(n);
        name = dg__cpu_conv_run_name(dg__cpu_conv_strategy(&d, n->op, (dg_cpu_conv)conv,
                                                           sgemm_serial_in_parallel((dg_cpu_gemm)gemm), c->threads,
                                                           NULL));
        if (n->dtype == DG_F32) break;
        /* say that a float32 strategy ran it (cpu_conv_widened) */
        snprintf(buf, size, "%s-%s-widened", name, dg_dtype_name(n->dtype));
        return DG_OK;
    }
    /* one implementation each: the backend's name */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_POOL:
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT: case DG_OP_PERMUTE: case DG_OP_RESHAPE: case DG_OP_SUM:
    case DG_OP_MEAN: case DG_OP_BROADCAST_TO: case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: case DG_OP_SOFTMAX_CE:
    case DG_OP_BATCH_NORM: case DG_OP_LAYER_NORM: case DG_OP_EMBEDDING: case DG_OP_ATTENTION: case DG_OP_ALL_REDUCE:
    case DG_OP_CAST: case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD: case DG_OP_SOFTMAX_CE_BACKWARD:
    case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE: case DG_OP_LAYER_NORM_BACKWARD:
    case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD: case DG_OP_ATTENTION_BACKWARD:
    case DG_OP_BATCH_NORM_RUNNING: case DG_OP_COUNT:
        break;
    }
    snprintf(buf, size, "%s", name);
    return DG_OK;
}

/* a plan's steps in order, each after the all-reduces it touches; the run
 * ends with every all-reduce done, also after a failed step (nothing may
 * still write the plan's memory) */
static dg_status cpu_run_steps(dg_backend *be, const dg_step *steps, int n, bool replay, void **cache) {
    (void)replay, (void)cache;
    cpu_ctx *c = ctx_of(be);
    dg_status st = DG_OK;
    c->in_run = true;
    for (int i = 0; i < n && st == DG_OK; i++) {
        st = dg__cpu_comm_before(c->comm, &steps[i]);
        /* through the interface, not cpu_compute: a wrapped compute (the
         * tests' planted faults, tests/test_seams.c) still runs every step */
        if (st == DG_OK) st = be->iface->compute(be, &steps[i]);
    }
    dg_status joined = dg__cpu_comm_join(c->comm);
    c->in_run = false;
    return st != DG_OK ? st : joined;
}

static dg_status cpu_compute(dg_backend *be, const dg_step *s) {
    cpu_ctx *c = ctx_of(be);
    int gemm = step_gemm(c, s->flags), conv = node_conv(c, s->node, s->flags);
    if (refused(gemm, conv)) return refuse_choice(c, s->flags);
    /* the row ops' and a 16-bit product output's float32 copies live in the
     * step's scratch alone; a float32-output product's widened operands
     * fall back to the backend's buffer (gemm_packed), as when the plan
     * reserved none for oneDNN and the default changed since */
    if (!s->scratch && lowp_floats(s->node, c->threads))
        return dg__fail(DG_ERR_INVALID, "cpu: %s (%s of %s) needs scratch for its float32 copies (a step from "
                        "dg_step_of: run it through a plan's steps)", s->node->name, dg_op_name(s->node->op),
                        dg_dtype_name(s->node->dtype));
    apply_threads(c);
    /* oneDNN's convolutions in every dtype, 16-bit ones by its own kernels:
     * never through the float32 strategies' paths */
    if (conv == DG_CPU_CONV_ONEDNN && is_conv(s->node->op)) return onednn_conv_step(c, s);
    switch (s->node->op) {
    /* a family goes to one entry, whose switch names its ops (ops.h) */
    case DG_OPS_UNARY:          dg__cpu_unary(s); break;
    case DG_OPS_BINARY:         dg__cpu_binary(s); break;
    case DG_OPS_UNARY_BACKWARD: dg__cpu_unary_backward(s); break;
    case DG_OP_MATMUL:       return cpu_matmul(c, (dg_cpu_gemm)gemm, s);
    case DG_OP_CAST:         return dg__cpu_cast(s);
    case DG_OP_PERMUTE:      dg__cpu_permute(s); break;
    case DG_OP_RESHAPE:      break; /* a view: nothing to compute */
    case DG_OP_ALL_REDUCE:   return dg__cpu_all_reduce(c->comm, s, c->in_run);
    case DG_OP_SIDE_OUTPUT:  break; /* written by its owner's step  */
    case DG_OP_SUM: case DG_OP_MEAN:
        dg__cpu_reduce(s); break;
    case DG_OP_BROADCAST_TO: dg__cpu_broadcast_to(s); break;
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX:
        dg__cpu_softmax(s); break;
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD:
        dg__cpu_softmax_backward(s); break;
    case DG_OP_SOFTMAX_CE:          return dg__cpu_softmax_ce(s);
    case DG_OP_SOFTMAX_CE_BACKWARD: return dg__cpu_softmax_ce_backward(s);
    case DG_OPS_OPTIM:       dg__cpu_update(s); break;
    case DG_OPS_CONV:
        return s->node->dtype == DG_F32 ? cpu_conv(c, (dg_cpu_gemm)gemm, (dg_cpu_conv)conv, s)
                                        : cpu_conv_widened(c, (dg_cpu_gemm)gemm, (dg_cpu_conv)conv, s);
    case DG_OPS_POOL:                  dg__cpu_pool(s); break;
    case DG_OP_BATCH_NORM:             dg__cpu_batch_norm(s); break;
    case DG_OP_BATCH_NORM_BACKWARD:    dg__cpu_batch_norm_backward(s); break;
    case DG_OP_BATCH_NORM_BACKWARD_SCALE: dg__cpu_batch_norm_backward_scale(s); break;
    case DG_OP_BATCH_NORM_RUNNING:     dg__cpu_batch_norm_running(s); break;
    case DG_OP_LAYER_NORM:             dg__cpu_layer_norm(s); break;
    case DG_OP_LAYER_NORM_BACKWARD:    dg__cpu_layer_norm_backward(s); break;
    case DG_OP_LAYER_NORM_BACKWARD_SCALE: dg__cpu_layer_norm_backward_scale(s); break;
    case DG_OP_EMBEDDING:              return dg__cpu_embedding(s);
    case DG_OP_EMBEDDING_BACKWARD:     return dg__cpu_embedding_backward(s);
    case DG_OP_ATTENTION:              dg__cpu_attention(s, ctx_of(be)->attn); break;
    case DG_OP_ATTENTION_BACKWARD:     dg__cpu_attention_backward(s, ctx_of(be)->attn); break;
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
    /* .version    = */ DG_BACKEND_IFACE_VERSION,
    /* .name       = */ cpu_name,
    /* .free       = */ cpu_free,
    /* .alloc      = */ cpu_alloc,
    /* .release    = */ cpu_release,
    /* .upload     = */ cpu_copy,
    /* .download   = */ cpu_copy,
    /* .sync       = */ NULL,
    /* .supports   = */ cpu_supports,
    /* .compute    = */ cpu_compute,
    /* .run_steps  = */ cpu_run_steps, /* compute in order, all-reduces overlapped */
    /* .cache_free = */ NULL,
    /* .gather_rows= */ cpu_gather_rows,
    /* events: NULL, the core's monotonic clock (compute returns when done) */
    /* .event_new  = */ NULL,
    /* .event_free = */ NULL,
    /* .event_record = */ NULL,
    /* .event_elapsed = */ NULL,
    /* .group      = */ NULL, /* no collectives in one process: all_reduce spans processes
                               * (dg_cpu_set_all_reduce) or is one replica's copy */
    /* host memory: the core's aligned malloc (copies are memcpy) */
    /* .host_alloc = */ NULL,
    /* .host_free  = */ NULL,
    /* .scratch_bytes = */ cpu_scratch_bytes, /* dg_node_scratch_bytes (im2col columns), f16 operands */
    /* .step_scratch_bytes = */ cpu_step_scratch_bytes, /* none for oneDNN's bf16 products */
    /* .step_impl  = */ cpu_step_impl,
};

dg_status dg_cpu_backend_new(dg_backend **out, int threads) {
    *out = NULL;
    if (threads <= 0) threads = omp_get_max_threads();
    cpu_ctx *c = calloc(1, sizeof *c);
    float *pack = malloc(dg_cpu_gemm_own_pack_floats(threads) * sizeof(float));
    float *attn = malloc((size_t)threads * dg__cpu_attention_work_floats() * sizeof(float));
    dg_backend *be = c && pack && attn ? dg__backend_new(&cpu_iface, c) : NULL;
    if (!be) {
        free(c); free(pack); free(attn);
        return dg__fail(DG_ERR_OOM, "cpu: out of memory creating the backend");
    }
    *c = (cpu_ctx){.threads = threads, .gemm = DG_CPU_GEMM_OPENBLAS, .conv = DG_CPU_CONV_AUTO, .pack = pack,
                   .attn = attn};
    apply_threads(c); /* so code around the backend sees the same count */
    *out = be;
    return DG_OK;
}

/* an implementation the enum has (a caller's cast may hold anything) */
static bool known_gemm(dg_cpu_gemm impl) { return (unsigned)impl <= DG_CPU_GEMM_ONEDNN; }

dg_status dg_cpu_sgemm(dg_backend *be, dg_cpu_gemm impl, bool ta, bool tb, int m, int n, int k, const float *A,
                       const float *B, float *C) {
    if (!known_gemm(impl)) return dg__fail(DG_ERR_INVALID, "dg_cpu_sgemm: no GEMM implementation %d", (int)impl);
    apply_threads(ctx_of(be));
    return gemm_packed(ctx_of(be), impl, (dg_onednn_gemm){DG_F32, ta, tb, 1, m, n, k, DG_F32}, A, B, C, NULL);
}

dg_status dg_cpu_gemm_ex(dg_backend *be, dg_cpu_gemm impl, dg_dtype dtype, bool ta, bool tb, int m, int n, int k,
                         const void *A, const void *B, float *C) {
    if (!be || !A || !B || !C || m < 1 || n < 1 || k < 1)
        return dg__fail(DG_ERR_INVALID, "dg_cpu_gemm_ex: NULL operand or empty product (%d x %d x %d)", m, n, k);
    if (!known_gemm(impl)) return dg__fail(DG_ERR_INVALID, "dg_cpu_gemm_ex: no GEMM implementation %d", (int)impl);
    if (dtype != DG_F32 && dtype != DG_BF16 && dtype != DG_F16)
        return dg__fail(DG_ERR_UNSUPPORTED, "dg_cpu_gemm_ex: no GEMM of %s operands", dg_dtype_name(dtype));
    apply_threads(ctx_of(be));
    return gemm_packed(ctx_of(be), impl, (dg_onednn_gemm){dtype, ta, tb, 1, m, n, k, DG_F32}, A, B, C, NULL);
}

int dg_cpu_threads(const dg_backend *be) { return ctx_of(be)->threads; }

void dg_cpu_set_gemm(dg_backend *be, dg_cpu_gemm impl) {
    if (known_gemm(impl)) ctx_of(be)->gemm = impl; /* anything else: the setting stays */
}
void dg_cpu_set_conv(dg_backend *be, dg_cpu_conv impl) {
    if ((unsigned)impl <= DG_CPU_CONV_AUTO) ctx_of(be)->conv = impl; /* anything else: the setting stays */
}

/* be's all_reduce nodes by comm (NULL: alone), the one before freed */
static void set_comm(dg_backend *be, cpu_comm *comm) {
    dg__cpu_comm_free(ctx_of(be)->comm);
    ctx_of(be)->comm = comm;
}

dg_status dg_cpu_set_all_reduce(dg_backend *be, dg_cpu_sum_fn sum_in_place, void *arg, int processes) {
    if (!be || be->iface != &cpu_iface)
        return dg__fail(DG_ERR_INVALID, "dg_cpu_set_all_reduce: %s", be ? "not a CPU backend" : "NULL backend");
    if (sum_in_place ? processes < 1 : processes != 1)
        return dg__fail(DG_ERR_INVALID, "dg_cpu_set_all_reduce: %d processes %s", processes,
                        sum_in_place ? "(1 or more)" : "without a sum (alone: 1)");
    cpu_comm *comm = NULL;
    dg_status st = sum_in_place ? dg__cpu_comm_new(&comm, sum_in_place, arg, NULL, processes, 0) : DG_OK;
    if (st == DG_OK) set_comm(be, comm);
    return st;
}

dg_status dg_cpu_set_all_reduce_overlap(dg_backend *be, const dg_cpu_async_sum *sum, int processes,
                                        long long bucket_bytes) {
    if (!be || be->iface != &cpu_iface)
        return dg__fail(DG_ERR_INVALID, "dg_cpu_set_all_reduce_overlap: %s", be ? "not a CPU backend" : "NULL backend");
    if (!sum || !sum->start || !sum->test || !sum->wait || processes < 1)
        return dg__fail(DG_ERR_INVALID, "dg_cpu_set_all_reduce_overlap: %s", processes < 1 ? "processes < 1"
                        : "a NULL sum or one of its functions NULL");
    cpu_comm *comm;
    dg_status st = dg__cpu_comm_new(&comm, NULL, NULL, sum, processes, bucket_bytes);
    if (st == DG_OK) set_comm(be, comm);
    return st;
}

const char *dg_cpu_blas_core(void) { return openblas_get_corename(); }

const char *dg_cpu_blas_info(char *buf, size_t n) {
    int par = openblas_get_parallel(); /* 0 sequential, 1 pthreads, 2 OpenMP */
    snprintf(buf, n, "%s (parallel: %s)", openblas_get_config(),
             par == 2 ? "OpenMP" : par == 1 ? "pthreads" : "sequential");
    return buf;
}

bool dg_cpu_has_onednn(void) {
#ifdef DG_HAVE_ONEDNN
    return true;
#else
    return false;
#endif
}

const char *dg_cpu_onednn_info(char *buf, size_t n) {
#ifdef DG_HAVE_ONEDNN
    return dg__onednn_info(buf, n);
#else
    snprintf(buf, n, "none (built with DG_ONEDNN=OFF: the default convolutions are the own)");
    return buf;
#endif
}

void dg_cpu_onednn_counts(const dg_backend *be, long *created, long *runs) {
#ifdef DG_HAVE_ONEDNN
    dg__onednn_counts(ctx_of(be)->onednn, created, runs);
#else
    (void)be;
    *created = *runs = 0;
#endif
}

void dg_cpu_onednn_conv_counts(const dg_backend *be, long *created, long *runs) {
#ifdef DG_HAVE_ONEDNN
    dg__onednn_conv_counts(ctx_of(be)->onednn_conv, created, runs);
#else
    (void)be;
    *created = *runs = 0;
#endif
}
