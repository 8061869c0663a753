/* gpu_attention16.cu: fused (flash) attention in bf16 and f16, forward and
 * backward (DG_OP_ATTENTION and DG_OP_ATTENTION_BACKWARD whose q is bf16 or
 * f16; gpu_attention.cu hands them here and keeps float32). The structure
 * of the float32 kernels (gpu_attention.cu's header: tiles, online
 * softmax, causal skipping, k_delta / k_dq / k_dkdv with no atomics, so
 * the same bits every run), FlashAttention-2's arithmetic:
 *
 *   mma.sync.m16n8k16 with bf16 or f16 operands and fp32 accumulation, one
 *   instruction per product (the float32 kernels' 3xTF32 takes three);
 *   operands from shared memory by ldmatrix (.trans for the [k][n] tiles:
 *   V in P V, dO, Q and K in the backward's second products); the
 *   accumulator fragment of S is the A fragment of P V once packed.
 *   Softmax, the row max and sum, lse, delta and every sum in fp32 (base 2,
 *   ex2.approx). What is rounded to the 16-bit type (to nearest even), as
 *   FlashAttention does: P before P V and P^T dO, dS before dS K and
 *   dS^T Q (the row sum l taken from P unrounded), and o, dq, dk, dv on
 *   store. core/check/attention_check.h derives the tolerance this meets
 *   (3 u over fp32's); the CPU's kernel (cpu_attention.c) rounds at the
 *   same places, so it is this one's reference path.
 *
 * Tiles. D = the head size rounded up to 32, 64 or 128 (zero columns in
 * shared memory past Dh). Shared tiles row-major, rows padded to
 * LD = D + 8 elements (16 bytes), so the 8 row addresses of an ldmatrix
 * fall in 8 different 16-byte bank groups. A block is 4 warps (128
 * threads), each owning 16 rows (the m16 of the instruction):
 *   k16_fwd   64 queries; loops over key tiles of 64: S = Q K^T, online
 *             softmax, O = O alpha + P V. Shared: Q, 2 stages x (K, V)
 *             (cp.async, the next tile loading while this one multiplies):
 *             46 KB at D = 64, 87 KB at 128.
 *   k16_delta delta_i = dO_i . o_i (fp32, a warp a row) into the scratch.
 *   k16_dq    64 queries; key tiles of BN (64; 32 at D = 128): S, P,
 *             dP = dO V^T, dS = P (dP - delta), dQ += dS K.
 *   k16_dkdv  64 keys; query tiles of BN: S^T = K Q^T, P^T,
 *             dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q.
 * The backward computes S and dP twice (7 products of T^2 Dh per head
 * where FlashAttention-2's atomic dQ takes 5), for determinism, as the
 * float32 kernels do.
 *
 * Causal (key j masked for query i when j > i): key tiles past a block's
 * last query are never loaded; a warp skips the tiles wholly above its 16
 * rows; diagonal tiles are masked element by element (probabilities 0).
 * Rows past T are computed on zeros and not stored; keys past T masked.
 * Global loads: 16-byte cp.async where Dh % 8 == 0 and the tensors are
 * 16-byte aligned, else element by element (synchronous).
 *
 * The kernels are in gpu_attention16_kernels.cuh, this file gives them the
 * device's primitives (mma, ldmatrix, ex2) and launches them; the same
 * kernels run on the host under tests/emu_attention16.cpp's emulation of
 * those primitives (docs/TESTING.md).
 *
 * Needs compute capability 8.0 (mma bf16, ldmatrix, cp.async): the launch
 * functions answer DG_ERR_UNSUPPORTED on an older device. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_lowp.cuh"
#include "gpu_tiles.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define A16_OLD_ARCH 1 /* compiled for a device without mma bf16: the kernels trap (never launched) */
#endif

/* ---- the two element types ---- */

template <typename E> struct a16;
template <> struct a16<__nv_bfloat16> {
    /* two floats rounded into one register, a in the low half (the lower column) */
    static __device__ __forceinline__ uint32_t pack(float a, float b) {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *(uint32_t *)&h;
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef A16_OLD_ARCH
        __trap();
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
    }
};
template <> struct a16<__half> {
    static __device__ __forceinline__ uint32_t pack(float a, float b) {
        __half2 h = __floats2half2_rn(a, b);
        return *(uint32_t *)&h;
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef A16_OLD_ARCH
        __trap();
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
    }
};

/* ---- the device's primitives (gpu_attention16_kernels.cuh lists them) ---- */

static __device__ __forceinline__ float a16_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* four 8x8 matrices of 16-bit elements; lane l gives the address of row
 * l % 8 of matrix l / 8; register j gets matrix j's (row l / 4, columns
 * 2 (l % 4), +1), or with trans its (rows 2 (l % 4), +1, column l / 4) */
template <bool TRANS> static __device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const void *p) {
#ifdef A16_OLD_ARCH
    r[0] = r[1] = r[2] = r[3] = 0u;
    (void)p;
#else
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#endif
}

#define A16_SHARED extern __shared__ float4 a16_smem[]
#include "gpu_attention16_kernels.cuh"

/* ---- launchers ---- */

struct a16_args {
    int BH, T, Dh;
    float scale, c2;
    bool causal, vec;
};

static bool a16_aligned(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static a16_args a16_args_of(const dg_node *n, bool aligned) {
    const dg_shape sh = n->in[n->op == DG_OP_ATTENTION ? 0 : 1]->shape;
    dg_attr_attention a = dg_attr_attention_of(n);
    a16_args r;
    r.BH = (int)(sh.d[0] * sh.d[1]);
    r.T = (int)sh.d[2];
    r.Dh = (int)sh.d[3];
    r.scale = a.scale;
    r.c2 = a.scale * A16_LOG2E;
    r.causal = a.causal;
    r.vec = aligned && r.Dh % 8 == 0;
    return r;
}

/* blocks of the grid: 64-row tiles times (b, h); dg__gpu_attention_fits
 * bounds it */
static unsigned a16_grid(const a16_args &a) { return (unsigned)((a.T + A16_BM - 1) / A16_BM) * (unsigned)a.BH; }

/* a device that runs these kernels (mma bf16, the shared memory asked);
 * the kernel's dynamic shared memory limit raised to smem (a host-side
 * attribute: allowed during stream capture) */
template <typename K> static dg_status a16_prepare(const gpu_ctx *c, K kern, size_t smem, const char *what) {
    if (c->prop.major < 8)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s in bf16/f16 needs compute capability 8.0 (this device: %d.%d)",
                        what, c->prop.major, c->prop.minor);
    if (smem > c->prop.sharedMemPerBlockOptin)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s needs %zu bytes of shared memory per block (this device: %zu)",
                        what, smem, (size_t)c->prop.sharedMemPerBlockOptin);
    DG_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return DG_OK;
}


template <typename E, int D>
static dg_status a16_fwd(gpu_ctx *c, const a16_args &a, const E *q, const E *k, const E *v, E *o, float *lse) {
    constexpr int BN = a16_bn<D>::fwd;
    const size_t smem = a16_smem_fwd<E, D>();
    dg_status st = a16_prepare(c, k16_fwd<E, D, BN>, smem, "attention");
    if (st != DG_OK) return st;
    k16_fwd<E, D, BN><<<a16_grid(a), A16_NTH, smem, c->stream>>>(q, k, v, o, lse, a.BH, a.T, a.Dh, a.c2, a.causal,
                                                                 a.vec);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <typename E, int D>
static dg_status a16_bwd(gpu_ctx *c, const a16_args &a, const E *dout, const E *q, const E *k, const E *v,
                         const E *out, const float *lse, float *delta, E *dq, E *dk, E *dv) {
    constexpr int BN = a16_bn<D>::bwd;
    const size_t tiles = a16_smem_dq<E, D>(), smem_dkdv = a16_smem_dkdv<E, D>();
    long long rows = (long long)a.BH * a.T;
    k16_delta<E><<<grid_for(rows * 32, 256), 256, 0, c->stream>>>(dout, out, delta, rows, a.Dh);
    DG_CUDA_CHECK_LAUNCH();
    dg_status st = a16_prepare(c, k16_dq<E, D, BN>, tiles, "attention_backward");
    if (st != DG_OK) return st;
    k16_dq<E, D, BN><<<a16_grid(a), A16_NTH, tiles, c->stream>>>(dout, q, k, v, lse, delta, dq, a.BH, a.T, a.Dh,
                                                                 a.c2, a.scale, a.causal, a.vec);
    DG_CUDA_CHECK_LAUNCH();
    st = a16_prepare(c, k16_dkdv<E, D, BN>, smem_dkdv, "attention_backward");
    if (st != DG_OK) return st;
    k16_dkdv<E, D, BN><<<a16_grid(a), A16_NTH, smem_dkdv, c->stream>>>(dout, q, k, v, lse, delta, dk, dv, a.BH, a.T,
                                                                       a.Dh, a.c2, a.scale, a.causal, a.vec);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <typename E> static dg_status a16_forward(gpu_ctx *c, const dg_step *s) {
    const E *q = (const E *)s->in[0], *k = (const E *)s->in[1], *v = (const E *)s->in[2];
    E *o = (E *)s->out;
    float *lse = (float *)s->side[0];
    a16_args a = a16_args_of(s->node, a16_aligned(q) && a16_aligned(k) && a16_aligned(v) && a16_aligned(o));
    if (a.Dh <= 32) return a16_fwd<E, 32>(c, a, q, k, v, o, lse);
    if (a.Dh <= 64) return a16_fwd<E, 64>(c, a, q, k, v, o, lse);
    return a16_fwd<E, 128>(c, a, q, k, v, o, lse);
}

template <typename E> static dg_status a16_backward(gpu_ctx *c, const dg_step *s) {
    const E *dout = (const E *)s->in[0], *q = (const E *)s->in[1], *k = (const E *)s->in[2];
    const E *v = (const E *)s->in[3], *out = (const E *)s->in[4];
    const float *lse = (const float *)s->in[5];
    E *dq = (E *)s->out, *dk = (E *)s->side[0], *dv = (E *)s->side[1];
    a16_args a = a16_args_of(s->node, a16_aligned(dout) && a16_aligned(q) && a16_aligned(k) && a16_aligned(v));
    float *delta = (float *)s->scratch;
    if (a.Dh <= 32) return a16_bwd<E, 32>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
    if (a.Dh <= 64) return a16_bwd<E, 64>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
    return a16_bwd<E, 128>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
}

dg_status dg__gpu_attention16(gpu_ctx *c, const dg_step *s) {
    return s->node->dtype == DG_BF16 ? a16_forward<__nv_bfloat16>(c, s) : a16_forward<__half>(c, s);
}

dg_status dg__gpu_attention16_backward(gpu_ctx *c, const dg_step *s) {
    return s->node->dtype == DG_BF16 ? a16_backward<__nv_bfloat16>(c, s) : a16_backward<__half>(c, s);
}
