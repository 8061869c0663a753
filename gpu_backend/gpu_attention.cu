/* gpu_attention.cu: fused (flash) attention, forward and backward, fp32
 * (DG_OP_ATTENTION and DG_OP_ATTENTION_BACKWARD, core/ops.h; a bf16 or f16
 * node goes to gpu_attention16.cu). The score
 * matrix is never stored: every kernel recomputes its tile of scores from q
 * and k, the backward from the forward's saved log-sum-exp.
 *
 * Arithmetic: fp32 accuracy on the tensor cores ("3xTF32", as PyTorch's
 * memory-efficient fp32 kernel does). Each operand x is split into
 * big = x rounded to TF32 (10 fraction bits) and small = x - big (exact in
 * fp32, |small| <= 2^-11 |x|), small rounded to TF32 in turn; a product is
 * a_small b_big + a_big b_small + a_big b_big, three mma.sync.m16n8k8 TF32
 * instructions accumulating in fp32. The dropped a_small b_small and the
 * rounding of small leave at most ~2^-21 relative error per product
 * (~2^-24 typical, unbiased); no TF32-level (2^-11) error anywhere, whatever
 * the plan's TF32 option. The tensor core's fp32 accumulation truncates, so
 * the long sums (O, dQ, dK, dV: over all of T) are summed per tile apart and
 * added to the running sum with an fp32 FMA (mm_pn). Softmax runs in fp32,
 * base 2 (ex2.approx). Measured against float64, max |err| / max |ref|, at
 * B 16, H 8, Dh 64, T 2048, standard normal q, k, v, dout, scale 1/8:
 * o 2.1e-6, lse 1.8e-7, dq 2.0e-6, dk 1.6e-6, dv 1.9e-6 (PyTorch's SDPA fp32
 * at the same shape: 1.2e-6 forward, 1.9e-6 with the backward); at T <= 512,
 * 1e-7 .. 3e-6.
 *
 * Tiles. D = the head size Dh rounded up to 32, 64 or 128 (the extra columns
 * are zeros in shared memory: they add nothing to q.k, and the output
 * columns they give are not stored). A block of NW warps owns BM = 16 NW
 * rows (queries; keys for dkdv), each warp 16 of them (the M side of
 * m16n8k8, so P and dS stay in the registers that computed them), and loops
 * over tiles of LT rows of the other side; at_cfg names a shape, at_pick
 * gives the ones used (timed on an H100). Shared tiles are row-major, rows
 * padded to LD = D + 8 floats, columns c and c ^ 8 swapped on rows with
 * (row & 4) (an XOR swizzle), so that both fragment patterns, "row g,
 * columns 2t, 2t+1" (one 8-byte load) and "rows 2t, 2t+1, column g", are
 * conflict-free. Tiles come in with cp.async (16 bytes where Dh % 4 == 0 and
 * the tensors are 16-byte aligned, else 4), zero-filled past T and Dh,
 * double-buffered: the next tile loads while this one is multiplied. The
 * mma's k index is permuted (k = t <-> 2t, k = t + 4 <-> 2t + 1 within each
 * 8, t = lane % 4), the same in A and B, so that an accumulator fragment is
 * an A fragment as it stands (no shuffles).
 *
 *   k_fwd    block = 128 queries of one (b, h), 8 warps, 256 threads; loops
 *            over key tiles of 64: S = Q K^T, online softmax (running max
 *            and sum per row, in registers), O = O alpha + P V. Shared: Q,
 *            2 stages x (K, V): 108 KB at D = 64, 2 blocks (16 warps) per
 *            SM; registers (128, the cap of 2 blocks): O 16 x D and S
 *            16 x 64 per warp. Writes o and lse = m + log(l).
 *   k_delta  delta_i = sum_d dout_id out_id into the step's scratch
 *            (B*H*T floats, a warp a row): all the scratch it uses.
 *   k_dq     block = 128 queries, 8 warps; loops over key tiles of 64:
 *            S = Q K^T, P = exp(S - lse), dP = dO V^T, dS = P (dP - delta),
 *            dQ += dS K. Shared: Q, dO, 2 stages x (K, V) pre-split (big and
 *            small: presplit, once per tile instead of by every warp):
 *            216 KB at D = 64, 1 block (8 warps) per SM, up to 255
 *            registers.
 *   k_dkdv   block = 128 keys, 8 warps; loops over query tiles of 64:
 *            S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T,
 *            dK += dS^T Q. Shared: K, V, 2 stages x (Q, dO pre-split,
 *            lse, delta): 217 KB at D = 64, 1 block per SM.
 *   D = 32: the same with tiles of 64 (fwd) and 32 (backward), all
 *   pre-split, 2 blocks per SM; D = 128: key tiles of 64 (fwd) and 32, 1
 *   block per SM, 204 KB. A device with less than that shared memory per
 *   block (at most 99 KB: Ampere, Ada) gets smaller shapes (at_pick's _s).
 *   Each output element is summed by one thread in a fixed order (no
 *   atomics): the same bits every run. The price is that the backward
 *   computes S and dP twice (7 tile products instead of FlashAttention-2's
 *   5 with atomic dQ).
 *
 * Causal (key j masked for query i when j > i): whole tiles above the
 * diagonal are skipped (blocks, then warps), the diagonal tiles are masked
 * element by element; masked probabilities are exactly 0. The forward and
 * dq grids start with their heaviest query tiles, dkdv's with its heaviest
 * key tiles (key tile 0 sees every query).
 *
 * Measured on an H100 SXM (B 16, H 8, Dh 64, fp32, median ms; PyTorch 2.11
 * SDPA, TF32 off, its faster fp32 backend, memory-efficient, in brackets):
 *   T 512:          forward 0.189 (0.282), forward + backward 0.768 (0.992)
 *   T 512 causal:   forward 0.117 (0.200), forward + backward 0.489 (0.706)
 *   T 2048:         forward 2.65 (4.10),   forward + backward 10.5 (13.9)
 *   T 2048 causal:  forward 1.35 (2.23),   forward + backward 5.45 (7.59)
 * (~50 TFLOP/s forward, ~43 backward, counting 4 and 10 B H T^2 Dh.)
 *
 * Needs compute capability 8.0 (mma TF32, cp.async): the launch functions
 * answer DG_ERR_UNSUPPORTED on an older device. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_tiles.cuh"

#define AT_LOG2E 1.4426950408889634f
#define AT_LN2 0.6931471805599453f

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define AT_OLD_ARCH 1 /* compiled for a device without mma TF32: the kernels trap (never launched) */
#endif

/* ---- device helpers ---- */

/* the swizzle of a tile row: columns c and c ^ 8 swap on rows with bit 2 set */
static __device__ __forceinline__ int swz(int r) { return (r & 4) << 1; }

static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* rows [row0, row0 + R) of a [T, Dh] row-major matrix into a swizzled
 * R x LD tile (columns 0..D-1), zeros past row T and column Dh */
template <int R, int D, int NTH>
static __device__ __forceinline__ void load_tile(float *s, const float *__restrict__ g, int row0, int T, int Dh,
                                                 bool vec, int tid) {
    constexpr int LD = D + 8;
    if (vec) {
        constexpr int C4 = D / 4;
#pragma unroll
        for (int idx = tid; idx < R * C4; idx += NTH) {
            int r = idx / C4, c = (idx % C4) * 4, gr = row0 + r;
            bool ok = gr < T && c < Dh;
            cp_async16(s + r * LD + (c ^ swz(r)), ok ? g + (long long)gr * Dh + c : g, ok ? 16 : 0);
        }
    } else {
#pragma unroll 4
        for (int idx = tid; idx < R * D; idx += NTH) {
            int r = idx / D, c = idx % D, gr = row0 + r;
            bool ok = gr < T && c < Dh;
            cp_async4(s + r * LD + (c ^ swz(r)), ok ? g + (long long)gr * Dh + c : g, ok ? 4 : 0);
        }
    }
}

/* n floats of a vector from index i0 into s, zeros past T */
static __device__ __forceinline__ void load_vec(float *s, const float *__restrict__ g, int i0, int n, int T, int idx) {
    if (idx >= 0 && idx < n) {
        bool ok = i0 + idx < T;
        cp_async4(s + idx, ok ? g + i0 + idx : g, ok ? 4 : 0);
    }
}

/* A fragment (16 x 8, k permuted) of tile rows r0.., columns c0.. */
template <int LD>
static __device__ __forceinline__ void frag_a(const float *s, int r0, int c0, int g, int t, float (&a)[4]) {
    int r = r0 + g;
    float2 x = *(const float2 *)(s + r * LD + ((c0 ^ swz(r)) + 2 * t));
    float2 y = *(const float2 *)(s + (r + 8) * LD + ((c0 ^ swz(r)) + 2 * t));
    a[0] = x.x; a[1] = y.x; a[2] = x.y; a[3] = y.y;
}

/* B fragment (8 x 8, k permuted) of a tile stored [n][k]: rows n0.., columns k0.. */
template <int LD>
static __device__ __forceinline__ void frag_b_nk(const float *s, int n0, int k0, int g, int t, float (&b)[2]) {
    int r = n0 + g;
    float2 x = *(const float2 *)(s + r * LD + ((k0 ^ swz(r)) + 2 * t));
    b[0] = x.x; b[1] = x.y;
}

/* B fragment (8 x 8, k permuted) of a tile stored [k][n]: rows k0.., columns n0.. */
template <int LD>
static __device__ __forceinline__ void frag_b_kn(const float *s, int k0, int n0, int g, int t, float (&b)[2]) {
    int r = k0 + 2 * t, c = (n0 + g) ^ swz(r); /* rows r and r + 1 share the swizzle */
    b[0] = s[r * LD + c];
    b[1] = s[(r + 1) * LD + c];
}

/* x = big + small, each rounded to TF32 by adding half its last TF32 place
 * (0x1000) to the bit pattern: the tensor core reads the top 19 bits of an
 * operand (ignores the low 13), so that rounds half away from zero, and the
 * masking of big is needed only to form small */
template <int N>
static __device__ __forceinline__ void split(const float (&x)[N], uint32_t (&big)[N], uint32_t (&small)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        uint32_t b = __float_as_uint(x[i]) + 0x1000u;
        big[i] = b;
        small[i] = __float_as_uint(x[i] - __uint_as_float(b & 0xffffe000u)) + 0x1000u;
    }
}

/* the accumulator fragment c as the A fragment of the next product */
static __device__ __forceinline__ void acc_as_a(const float (&c)[4], float (&a)[4]) {
    a[0] = c[0]; a[1] = c[2]; a[2] = c[1]; a[3] = c[3];
}

static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef AT_OLD_ARCH
    __trap();
#else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* d += a b to fp32 accuracy (3xTF32), the small terms first */
static __device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ab)[4], const uint32_t (&as)[4],
                                            const uint32_t (&bb)[2], const uint32_t (&bs)[2]) {
    mma(d, as, bb);
    mma(d, ab, bs);
    mma(d, ab, bb);
}

/* B fragments, split: from a raw tile (split here, by every warp that
 * reads them) or from a pre-split pair of tiles (big, small: presplit) */
template <int LD, bool PS>
static __device__ __forceinline__ void bfrag_nk(const float *sb, const float *sbs, int n0, int k0, int g, int t,
                                                uint32_t (&bb)[2], uint32_t (&bs)[2]) {
    if constexpr (PS) {
        int r = n0 + g, off = r * LD + ((k0 ^ swz(r)) + 2 * t);
        uint2 x = *(const uint2 *)(sb + off), y = *(const uint2 *)(sbs + off);
        bb[0] = x.x; bb[1] = x.y; bs[0] = y.x; bs[1] = y.y;
    } else {
        float bf[2];
        frag_b_nk<LD>(sb, n0, k0, g, t, bf);
        split(bf, bb, bs);
    }
}

template <int LD, bool PS>
static __device__ __forceinline__ void bfrag_kn(const float *sb, const float *sbs, int k0, int n0, int g, int t,
                                                uint32_t (&bb)[2], uint32_t (&bs)[2]) {
    if constexpr (PS) {
        int r = k0 + 2 * t, c = (n0 + g) ^ swz(r);
        bb[0] = __float_as_uint(sb[r * LD + c]); bb[1] = __float_as_uint(sb[(r + 1) * LD + c]);
        bs[0] = __float_as_uint(sbs[r * LD + c]); bs[1] = __float_as_uint(sbs[(r + 1) * LD + c]);
    } else {
        float bf[2];
        frag_b_kn<LD>(sb, k0, n0, g, t, bf);
        split(bf, bb, bs);
    }
}

/* a raw R x D tile split in place: big stays, small goes to the twin tile */
template <int R, int D, int NTH>
static __device__ __forceinline__ void presplit(float *big, float *small, int tid) {
    constexpr int LD = D + 8, C4 = D / 4;
#pragma unroll
    for (int idx = tid; idx < R * C4; idx += NTH) {
        int r = idx / C4, c = (idx % C4) * 4, off = r * LD + (c ^ swz(r));
        float4 x = *(const float4 *)(big + off);
        float xs[4] = {x.x, x.y, x.z, x.w};
        uint32_t b[4], sm[4];
        split(xs, b, sm);
        *(uint4 *)(big + off) = make_uint4(b[0], b[1], b[2], b[3]);
        *(uint4 *)(small + off) = make_uint4(sm[0], sm[1], sm[2], sm[3]);
    }
}

/* acc[16 x NT*8] += A (16 rows r0.. of tile sa) B^T, B the rows n0.. of tile
 * sb stored [n][k] (sbs: its small parts when PS), over the KT*8 columns of
 * both */
/* With PS, splits two stage tiles of R rows into their big and small
 * parts in place (each tile's small part R * LD floats after it). */
template <int R, int D, int NTH, int LD, bool PS>
static __device__ __forceinline__ void presplit_pair(float *a, float *b, int tid) {
    if constexpr (PS) {
        presplit<R, D, NTH>(a, a + R * LD, tid);
        presplit<R, D, NTH>(b, b + R * LD, tid);
        __syncthreads();
    }
}

/* The stage kb of nk of a double-buffered pair of streamed tiles (K and V
 * of R rows each, stage buffers TS floats apart): starts the copy of stage
 * kb + 1 into the other buffer, waits for stage kb's, then splits it (PS).
 * Returns stage kb's buffer offset. Every thread of the block calls it. */
template <int R, int D, int NTH, int TS, int LD, bool PS>
static __device__ __forceinline__ int stream_kv(float *sK, float *sV, const float *__restrict__ k,
                                                const float *__restrict__ v, int kb, int nk, int T, int Dh, bool vec,
                                                int tid) {
    int st = kb & 1;
    if (kb + 1 < nk) {
        load_tile<R, D, NTH>(sK + (st ^ 1) * TS, k, (kb + 1) * R, T, Dh, vec, tid);
        load_tile<R, D, NTH>(sV + (st ^ 1) * TS, v, (kb + 1) * R, T, Dh, vec, tid);
        cp_commit();
        cp_wait<1>();
    } else {
        cp_wait<0>();
    }
    __syncthreads();
    presplit_pair<R, D, NTH, LD, PS>(sK + st * TS, sV + st * TS, tid);
    return st * TS;
}

template <int LD, int KT, int NT, bool PS>
static __device__ __forceinline__ void mm_nt(float (&acc)[NT][4], const float *sa, int r0, const float *sb,
                                             const float *sbs, int n0, int g, int t) {
#pragma unroll
    for (int kk = 0; kk < KT; kk++) {
        float af[4];
        uint32_t ab[4], as[4];
        frag_a<LD>(sa, r0, kk * 8, g, t, af);
        split(af, ab, as);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            uint32_t bb[2], bs[2];
            bfrag_nk<LD, PS>(sb, sbs, n0 + nt * 8, kk * 8, g, t, bb, bs);
            mma3(acc[nt], ab, as, bb, bs);
        }
    }
}

/* acc[16 x NT*8] = acc * alpha + P B, P the warp's accumulator fragments
 * p[KT] (16 x KT*8) and B the rows 0..KT*8-1 of tile sb stored [k][n]. The
 * product is summed apart, G column tiles at a time, and added to acc in
 * one fp32 FMA: the tensor core's fp32 accumulation truncates, so a long
 * sum (over all of T) kept in its accumulator would drift (~T/8 truncations
 * of the running sum: 10x the error at T = 2048), while each tile's part
 * sees KT*3 of its own size. */
template <int LD, int KT, int NT, int G, bool PS>
static __device__ __forceinline__ void mm_pn(float (&acc)[NT][4], const float (&p)[KT][4], const float *sb,
                                             const float *sbs, int g, int t, float alpha0 = 1.0f,
                                             float alpha1 = 1.0f) {
    static_assert(G > 0 && NT % G == 0, "column tiles in whole groups");
#pragma unroll
    for (int n0 = 0; n0 < NT; n0 += G) {
        float tmp[G][4];
#pragma unroll
        for (int n = 0; n < G; n++) tmp[n][0] = tmp[n][1] = tmp[n][2] = tmp[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            float af[4];
            uint32_t ab[4], as[4];
            acc_as_a(p[kk], af);
            split(af, ab, as);
#pragma unroll
            for (int n = 0; n < G; n++) {
                uint32_t bb[2], bs[2];
                bfrag_kn<LD, PS>(sb, sbs, kk * 8, (n0 + n) * 8, g, t, bb, bs);
                mma3(tmp[n], ab, as, bb, bs);
            }
        }
#pragma unroll
        for (int n = 0; n < G; n++) {
            acc[n0 + n][0] = fmaf(acc[n0 + n][0], alpha0, tmp[n][0]);
            acc[n0 + n][1] = fmaf(acc[n0 + n][1], alpha0, tmp[n][1]);
            acc[n0 + n][2] = fmaf(acc[n0 + n][2], alpha1, tmp[n][2]);
            acc[n0 + n][3] = fmaf(acc[n0 + n][3], alpha1, tmp[n][3]);
        }
    }
}

template <int N> static __device__ __forceinline__ void zero(float (&a)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++) a[i][0] = a[i][1] = a[i][2] = a[i][3] = 0.0f;
}

static __device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

static __device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* store a warp's 16 x D accumulator (times mul) as rows ra, ra + 8 of a
 * [T, Dh] matrix: columns below Dh, rows below T */
template <int KT>
static __device__ __forceinline__ void store_rows(float *__restrict__ dst, const float (&acc)[KT][4], int ra, int T,
                                                  int Dh, float mul0, float mul1, int t) {
#pragma unroll
    for (int nt = 0; nt < KT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int c = nt * 8 + 2 * t + e;
            if (c < Dh) {
                if (ra < T) dst[(long long)ra * Dh + c] = acc[nt][e] * mul0;
                if (ra + 8 < T) dst[(long long)(ra + 8) * Dh + c] = acc[nt][2 + e] * mul1;
            }
        }
}

/* A kernel's shape: head size D (padded), NW warps, so a block owns
 * BM = 16 NW rows (queries, or keys for dkdv), LT rows of the other side per
 * loop step, at least MINB blocks per SM (the register budget); G: column
 * tiles of a long product summed apart (mm_pn); PS: the loop's tiles are
 * split into big and small once, in shared memory (presplit), instead of by
 * every warp at every read (twice their shared memory; a B fragment is then
 * one more shared load instead of 8 integer and float instructions). */
template <int D_, int NW_, int LT_, int MINB_, int G_, bool PS_> struct at_cfg {
    static constexpr int D = D_, NW = NW_, BM = 16 * NW_, LT = LT_, MINB = MINB_, NTH = 32 * NW_, LD = D_ + 8;
    static constexpr int G = G_, SPL = PS_ ? 2 : 1;
    static constexpr bool PS = PS_;
    static constexpr size_t fwd_smem = (size_t)(BM + 2 * SPL * 2 * LT) * LD * sizeof(float);
    static constexpr size_t dq_smem = (size_t)(2 * BM + 2 * SPL * 2 * LT) * LD * sizeof(float);
    static constexpr size_t dkdv_smem = dq_smem + 4 * LT * sizeof(float);
    static_assert(NTH >= 2 * LT, "dkdv loads lse and delta with one thread an element");
};

/* ---- forward ---- */

/* a block owns BM queries of one (b, h) and loops over key tiles of LT */
template <class C>
__global__ void __launch_bounds__(C::NTH, C::MINB)
    k_fwd(const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v, float *__restrict__ o,
          float *__restrict__ lse, int BH, int T, int Dh, float c2, bool causal, bool vec) {
    constexpr int D = C::D, BM = C::BM, BN = C::LT, LD = C::LD, NTH = C::NTH, KT = D / 8, NT = BN / 8;
    constexpr int TS = C::SPL * BN * LD; /* a stage of K (or V): the raw tile, or big and small */
    extern __shared__ float4 at_smem[];
    float *sQ = (float *)at_smem, *sK = sQ + BM * LD, *sV = sK + 2 * TS;
    int nqb = (T + BM - 1) / BM;
    int qb = nqb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; o += base;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int i0 = qb * BM, rw = warp * 16, ia = i0 + rw + g, ib = ia + 8;
    int nkb = (T + BN - 1) / BN;
    if (causal) nkb = min(nkb, (i0 + BM - 1) / BN + 1);

    load_tile<BM, D, NTH>(sQ, q, i0, T, Dh, vec, tid);
    load_tile<BN, D, NTH>(sK, k, 0, T, Dh, vec, tid);
    load_tile<BN, D, NTH>(sV, v, 0, T, Dh, vec, tid);
    cp_commit();

    float acc[KT][4];
    zero(acc);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* rows ia, ib (base 2); l: this lane's part */
    for (int kb = 0; kb < nkb; kb++) {
        int j0 = kb * BN, at = stream_kv<BN, D, NTH, TS, LD, C::PS>(sK, sV, k, v, kb, nkb, T, Dh, vec, tid);
        const float *tK = sK + at, *tV = sV + at, *tKs = tK + BN * LD, *tVs = tV + BN * LD;
        if (!causal || j0 <= i0 + rw + 15) { /* the warp's rows see a key of this tile */
            float s[NT][4];
            zero(s);
            mm_nt<LD, KT, NT, C::PS>(s, sQ, rw, tK, tKs, 0, g, t);
            bool mask = j0 + BN > T || (causal && j0 + BN - 1 > i0 + rw);
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float xa = s[nt][e] * c2, xb = s[nt][2 + e] * c2;
                    if (mask) {
                        int j = j0 + nt * 8 + 2 * t + e;
                        if (j >= T || (causal && j > ia)) xa = -INFINITY;
                        if (j >= T || (causal && j > ib)) xb = -INFINITY;
                    }
                    s[nt][e] = xa; s[nt][2 + e] = xb;
                    mx0 = fmaxf(mx0, xa); mx1 = fmaxf(mx1, xb);
                }
            mx0 = fmaxf(m0, quad_max(mx0));
            mx1 = fmaxf(m1, quad_max(mx1));
            float u0 = mx0 == -INFINITY ? 0.0f : mx0, u1 = mx1 == -INFINITY ? 0.0f : mx1;
            float al0 = ex2(m0 - u0), al1 = ex2(m1 - u1);
            m0 = mx0; m1 = mx1;
            float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float pa = ex2(s[nt][e] - u0), pb = ex2(s[nt][2 + e] - u1);
                    s[nt][e] = pa; s[nt][2 + e] = pb;
                    r0 += pa; r1 += pb;
                }
            l0 = l0 * al0 + r0;
            l1 = l1 * al1 + r1;
            mm_pn<LD, NT, KT, C::G, C::PS>(acc, s, tV, tVs, g, t, al0, al1); /* O = O alpha + P V */
        }
        __syncthreads(); /* this stage is refilled by the next iteration's prefetch */
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    store_rows<KT>(o, acc, ia, T, Dh, 1.0f / l0, 1.0f / l1, t);
    if (t == 0) {
        if (ia < T) lse[(long long)bh * T + ia] = (m0 + log2f(l0)) * AT_LN2;
        if (ib < T) lse[(long long)bh * T + ib] = (m1 + log2f(l1)) * AT_LN2;
    }
}

/* ---- backward ---- */

/* delta[r] = sum_d dout[r, d] out[r, d], a warp a row */
__global__ void k_delta(const float *__restrict__ dout, const float *__restrict__ out, float *__restrict__ delta,
                        long long rows, int Dh) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        const float *a = dout + r * Dh, *b = out + r * Dh;
        float s = 0.0f;
        for (int d = lane; d < Dh; d += 32) s += a[d] * b[d];
        s = warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

/* dq: a block owns BM queries, loops over key tiles of LT */
template <class C>
__global__ void __launch_bounds__(C::NTH, C::MINB)
    k_dq(const float *__restrict__ dout, const float *__restrict__ q, const float *__restrict__ k,
         const float *__restrict__ v, const float *__restrict__ lse, const float *__restrict__ delta,
         float *__restrict__ dq, int BH, int T, int Dh, float c2, float scale, bool causal, bool vec) {
    constexpr int D = C::D, BM = C::BM, BN = C::LT, LD = C::LD, NTH = C::NTH, KT = D / 8, NT = BN / 8;
    constexpr int TS = C::SPL * BN * LD;
    extern __shared__ float4 at_smem[];
    float *sQ = (float *)at_smem, *sO = sQ + BM * LD, *sK = sO + BM * LD, *sV = sK + 2 * TS;
    int nqb = (T + BM - 1) / BM;
    int qb = nqb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; dout += base; dq += base;
    lse += (long long)bh * T;
    delta += (long long)bh * T;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int i0 = qb * BM, rw = warp * 16, ia = i0 + rw + g, ib = ia + 8;
    int nkb = (T + BN - 1) / BN;
    if (causal) nkb = min(nkb, (i0 + BM - 1) / BN + 1);

    load_tile<BM, D, NTH>(sQ, q, i0, T, Dh, vec, tid);
    load_tile<BM, D, NTH>(sO, dout, i0, T, Dh, vec, tid);
    load_tile<BN, D, NTH>(sK, k, 0, T, Dh, vec, tid);
    load_tile<BN, D, NTH>(sV, v, 0, T, Dh, vec, tid);
    cp_commit();
    float la = ia < T ? lse[ia] * AT_LOG2E : 0.0f, lb = ib < T ? lse[ib] * AT_LOG2E : 0.0f;
    float da = ia < T ? delta[ia] : 0.0f, db = ib < T ? delta[ib] : 0.0f;

    float acc[KT][4];
    zero(acc);
    for (int kb = 0; kb < nkb; kb++) {
        int j0 = kb * BN, at = stream_kv<BN, D, NTH, TS, LD, C::PS>(sK, sV, k, v, kb, nkb, T, Dh, vec, tid);
        const float *tK = sK + at, *tV = sV + at, *tKs = tK + BN * LD, *tVs = tV + BN * LD;
        if (!causal || j0 <= i0 + rw + 15) {
            float s[NT][4], dp[NT][4];
            zero(s);
            zero(dp);
            mm_nt<LD, KT, NT, C::PS>(s, sQ, rw, tK, tKs, 0, g, t);  /* S = Q K^T */
            mm_nt<LD, KT, NT, C::PS>(dp, sO, rw, tV, tVs, 0, g, t); /* dP = dO V^T */
            bool mask = j0 + BN > T || (causal && j0 + BN - 1 > i0 + rw);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float pa = ex2(fmaf(s[nt][e], c2, -la)), pb = ex2(fmaf(s[nt][2 + e], c2, -lb));
                    if (mask) {
                        int j = j0 + nt * 8 + 2 * t + e;
                        if (j >= T || (causal && j > ia)) pa = 0.0f;
                        if (j >= T || (causal && j > ib)) pb = 0.0f;
                    }
                    s[nt][e] = pa * (dp[nt][e] - da);
                    s[nt][2 + e] = pb * (dp[nt][2 + e] - db);
                }
            mm_pn<LD, NT, KT, C::G, C::PS>(acc, s, tK, tKs, g, t); /* dQ += dS K */
        }
        __syncthreads();
    }
    store_rows<KT>(dq, acc, ia, T, Dh, scale, scale, t);
}

/* dk, dv: a block owns BM keys, loops over query tiles of LT */
template <class C>
__global__ void __launch_bounds__(C::NTH, C::MINB)
    k_dkdv(const float *__restrict__ dout, const float *__restrict__ q, const float *__restrict__ k,
           const float *__restrict__ v, const float *__restrict__ lse, const float *__restrict__ delta,
           float *__restrict__ dk, float *__restrict__ dv, int BH, int T, int Dh, float c2, float scale, bool causal,
           bool vec) {
    constexpr int D = C::D, BN = C::BM, BM = C::LT, LD = C::LD, NTH = C::NTH, KT = D / 8, MT = BM / 8;
    constexpr int TS = C::SPL * BM * LD; /* a stage of Q (or dO) */
    extern __shared__ float4 at_smem[];
    float *sK = (float *)at_smem, *sV = sK + BN * LD, *sQ = sV + BN * LD, *sO = sQ + 2 * TS;
    float *sL = sO + 2 * TS, *sD = sL + 2 * BM;
    int kb = (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; dout += base; dk += base; dv += base;
    lse += (long long)bh * T;
    delta += (long long)bh * T;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int j0 = kb * BN, rw = warp * 16, ja = j0 + rw + g, jb = ja + 8;
    int nqb = (T + BM - 1) / BM, qb0 = causal ? j0 / BM : 0;

    load_tile<BN, D, NTH>(sK, k, j0, T, Dh, vec, tid);
    load_tile<BN, D, NTH>(sV, v, j0, T, Dh, vec, tid);
    load_tile<BM, D, NTH>(sQ, q, qb0 * BM, T, Dh, vec, tid);
    load_tile<BM, D, NTH>(sO, dout, qb0 * BM, T, Dh, vec, tid);
    load_vec(sL, lse, qb0 * BM, BM, T, tid);
    load_vec(sD, delta, qb0 * BM, BM, T, tid - BM);
    cp_commit();

    float ak[KT][4], av[KT][4];
    zero(ak);
    zero(av);
    for (int qb = qb0; qb < nqb; qb++) {
        int st = (qb - qb0) & 1, i0 = qb * BM;
        if (qb + 1 < nqb) {
            int n = st ^ 1;
            load_tile<BM, D, NTH>(sQ + n * TS, q, i0 + BM, T, Dh, vec, tid);
            load_tile<BM, D, NTH>(sO + n * TS, dout, i0 + BM, T, Dh, vec, tid);
            load_vec(sL + n * BM, lse, i0 + BM, BM, T, tid);
            load_vec(sD + n * BM, delta, i0 + BM, BM, T, tid - BM);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const float *tQ = sQ + st * TS, *tO = sO + st * TS, *tQs = tQ + BM * LD, *tOs = tO + BM * LD;
        const float *tL = sL + st * BM, *tD = sD + st * BM;
        presplit_pair<BM, D, NTH, LD, C::PS>(sQ + st * TS, sO + st * TS, tid);
        if (!causal || i0 + BM - 1 >= j0 + rw) { /* some query of the tile sees a key of the warp */
            float s[MT][4], dp[MT][4];
            zero(s);
            zero(dp);
            mm_nt<LD, KT, MT, C::PS>(s, sK, rw, tQ, tQs, 0, g, t); /* S^T = K Q^T: rows keys, columns queries */
            bool mask = i0 + BM > T || (causal && i0 < j0 + rw + 15);
#pragma unroll
            for (int nt = 0; nt < MT; nt++) {
                float2 l2 = *(const float2 *)(tL + nt * 8 + 2 * t);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float l = (e ? l2.y : l2.x) * AT_LOG2E;
                    float pa = ex2(fmaf(s[nt][e], c2, -l)), pb = ex2(fmaf(s[nt][2 + e], c2, -l));
                    if (mask) {
                        int i = i0 + nt * 8 + 2 * t + e;
                        if (i >= T || (causal && ja > i)) pa = 0.0f;
                        if (i >= T || (causal && jb > i)) pb = 0.0f;
                    }
                    s[nt][e] = pa; s[nt][2 + e] = pb;
                }
            }
            mm_pn<LD, MT, KT, C::G, C::PS>(av, s, tO, tOs, g, t);  /* dV += P^T dO */
            mm_nt<LD, KT, MT, C::PS>(dp, sV, rw, tO, tOs, 0, g, t); /* dP^T = V dO^T */
#pragma unroll
            for (int nt = 0; nt < MT; nt++) {
                float2 d2 = *(const float2 *)(tD + nt * 8 + 2 * t);
                s[nt][0] *= dp[nt][0] - d2.x; s[nt][1] *= dp[nt][1] - d2.y;
                s[nt][2] *= dp[nt][2] - d2.x; s[nt][3] *= dp[nt][3] - d2.y;
            }
            mm_pn<LD, MT, KT, C::G, C::PS>(ak, s, tQ, tQs, g, t); /* dK += dS^T Q */
        }
        __syncthreads();
    }
    store_rows<KT>(dk, ak, ja, T, Dh, scale, scale, t);
    store_rows<KT>(dv, av, ja, T, Dh, 1.0f, 1.0f, t);
}

/* ---- launchers ---- */

struct at_args {
    int BH, T, Dh;
    float scale, c2;
    bool causal, vec;
};

static bool at_aligned(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static at_args at_args_of(const dg_node *n, bool vec_ptrs) {
    const dg_shape sh = n->in[0]->shape;
    dg_attr_attention a = dg_attr_attention_of(n);
    at_args r;
    r.BH = (int)(sh.d[0] * sh.d[1]);
    r.T = (int)sh.d[2];
    r.Dh = (int)sh.d[3];
    r.scale = a.scale;
    r.c2 = a.scale * AT_LOG2E;
    r.causal = a.causal;
    r.vec = vec_ptrs && r.Dh % 4 == 0;
    return r;
}

/* blocks of the grid: BM-row tiles times (b, h) */
static unsigned at_grid(const at_args &a, int bm) { return (unsigned)((a.T + bm - 1) / bm) * (unsigned)a.BH; }

/* a device that runs these kernels (mma TF32 and the shared memory asked);
 * the kernel's dynamic shared memory limit raised to smem (a host-side
 * attribute: allowed during stream capture) */
template <typename K> static dg_status at_prepare(const gpu_ctx *c, K kern, size_t smem, const char *what) {
    if (c->prop.major < 8)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s needs compute capability 8.0 (this device: %d.%d)", what,
                        c->prop.major, c->prop.minor);
    if (smem > c->prop.sharedMemPerBlockOptin)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s needs %zu bytes of shared memory per block (this device: %zu)",
                        what, smem, (size_t)c->prop.sharedMemPerBlockOptin);
    DG_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return DG_OK;
}

template <class C>
static dg_status at_launch_fwd(gpu_ctx *c, const at_args &a, const float *q, const float *k, const float *v, float *o,
                               float *lse) {
    dg_status st = at_prepare(c, k_fwd<C>, C::fwd_smem, "attention");
    if (st != DG_OK) return st;
    k_fwd<C><<<at_grid(a, C::BM), C::NTH, C::fwd_smem, c->stream>>>(q, k, v, o, lse, a.BH, a.T, a.Dh, a.c2, a.causal,
                                                                     a.vec);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static dg_status at_launch_delta(gpu_ctx *c, const at_args &a, const float *dout, const float *out, float *delta) {
    long long rows = (long long)a.BH * a.T;
    k_delta<<<grid_for(rows * 32, 256), 256, 0, c->stream>>>(dout, out, delta, rows, a.Dh);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <class C>
static dg_status at_launch_dq(gpu_ctx *c, const at_args &a, const float *dout, const float *q, const float *k,
                              const float *v, const float *lse, const float *delta, float *dq) {
    dg_status st = at_prepare(c, k_dq<C>, C::dq_smem, "attention_backward");
    if (st != DG_OK) return st;
    k_dq<C><<<at_grid(a, C::BM), C::NTH, C::dq_smem, c->stream>>>(dout, q, k, v, lse, delta, dq, a.BH, a.T, a.Dh,
                                                                   a.c2, a.scale, a.causal, a.vec);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <class C>
static dg_status at_launch_dkdv(gpu_ctx *c, const at_args &a, const float *dout, const float *q, const float *k,
                                const float *v, const float *lse, const float *delta, float *dk, float *dv) {
    dg_status st = at_prepare(c, k_dkdv<C>, C::dkdv_smem, "attention_backward");
    if (st != DG_OK) return st;
    k_dkdv<C><<<at_grid(a, C::BM), C::NTH, C::dkdv_smem, c->stream>>>(dout, q, k, v, lse, delta, dk, dv, a.BH, a.T,
                                                                       a.Dh, a.c2, a.scale, a.causal, a.vec);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* The shapes used, per padded head size, chosen by timing on an H100 at
 * B 16, H 8 (see the top of the file); the _s ones are for a device whose
 * blocks get less shared memory than the first need (at most 99 KB each:
 * consumer Ampere/Ada). */
template <int D> struct at_pick;
template <> struct at_pick<32> {
    typedef at_cfg<32, 8, 64, 2, 4, true> fwd;
    typedef at_cfg<32, 8, 32, 2, 4, true> dq;
    typedef at_cfg<32, 8, 32, 2, 4, true> dkdv;
    typedef at_cfg<32, 8, 64, 2, 4, false> fwd_s;
    typedef dq dq_s;
    typedef dkdv dkdv_s;
};
template <> struct at_pick<64> {
    typedef at_cfg<64, 8, 64, 2, 8, false> fwd;
    typedef at_cfg<64, 8, 64, 1, 8, true> dq;
    typedef at_cfg<64, 8, 64, 1, 8, true> dkdv;
    typedef at_cfg<64, 4, 32, 1, 8, false> fwd_s;
    typedef at_cfg<64, 4, 32, 1, 8, false> dq_s;
    typedef at_cfg<64, 4, 32, 1, 8, false> dkdv_s;
};
template <> struct at_pick<128> {
    typedef at_cfg<128, 8, 64, 1, 4, false> fwd;
    typedef at_cfg<128, 8, 32, 1, 4, false> dq;
    typedef at_cfg<128, 8, 32, 1, 2, false> dkdv;
    typedef at_cfg<128, 4, 16, 1, 4, false> fwd_s;
    typedef at_cfg<128, 4, 8, 1, 4, false> dq_s;
    typedef at_cfg<128, 4, 8, 1, 2, false> dkdv_s;
};
#define AT_MIN_BM 64 /* the smallest BM of at_pick: bounds the grid in fits */

static bool at_fits_smem(const gpu_ctx *c, size_t smem) { return smem <= c->prop.sharedMemPerBlockOptin; }

template <int D>
static dg_status at_fwd(gpu_ctx *c, const at_args &a, const float *q, const float *k, const float *v, float *o,
                        float *lse) {
    typedef typename at_pick<D>::fwd F;
    if (at_fits_smem(c, F::fwd_smem)) return at_launch_fwd<F>(c, a, q, k, v, o, lse);
    return at_launch_fwd<typename at_pick<D>::fwd_s>(c, a, q, k, v, o, lse);
}

template <int D>
static dg_status at_bwd(gpu_ctx *c, const at_args &a, const float *dout, const float *q, const float *k,
                        const float *v, const float *out, const float *lse, float *delta, float *dq, float *dk,
                        float *dv) {
    typedef typename at_pick<D>::dq Q;
    typedef typename at_pick<D>::dkdv K;
    dg_status st = at_launch_delta(c, a, dout, out, delta);
    if (st != DG_OK) return st;
    if (at_fits_smem(c, Q::dq_smem)) st = at_launch_dq<Q>(c, a, dout, q, k, v, lse, delta, dq);
    else st = at_launch_dq<typename at_pick<D>::dq_s>(c, a, dout, q, k, v, lse, delta, dq);
    if (st != DG_OK) return st;
    if (at_fits_smem(c, K::dkdv_smem)) return at_launch_dkdv<K>(c, a, dout, q, k, v, lse, delta, dk, dv);
    return at_launch_dkdv<typename at_pick<D>::dkdv_s>(c, a, dout, q, k, v, lse, delta, dk, dv);
}

bool dg__gpu_attention_fits(const dg_node *n) {
    if (!n || n->n_in < 1 || !n->in[0]) return false;
    const dg_shape sh = n->in[0]->shape;
    if (sh.ndim != 4) return false;
    int64_t B = sh.d[0], H = sh.d[1], T = sh.d[2], Dh = sh.d[3];
    if (B < 1 || H < 1 || T < 1 || Dh < 1 || Dh > 128) return false;
    if (T > (1 << 30)) return false;                 /* row indices (plus a tile) stay inside int */
    if (B > INT_MAX / H) return false;               /* B*H is an int */
    int64_t blocks = (T + AT_MIN_BM - 1) / AT_MIN_BM; /* the grid: blocks * B * H < 2^31 */
    return B * H <= (int64_t)INT_MAX / blocks;
}

dg_status dg__gpu_attention(gpu_ctx *c, const dg_step *s) {
    const dg_node *n = s->node;
    if (!dg__gpu_attention_fits(n))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (attention): shape outside the fused kernels' range",
                        n->name);
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (attention): the step gives no storage for lse", n->name);
    if (n->dtype != DG_F32) return dg__gpu_attention16(c, s); /* bf16, f16: gpu_attention16.cu */
    const float *q = (const float *)s->in[0], *k = (const float *)s->in[1], *v = (const float *)s->in[2];
    float *o = (float *)s->out, *lse = (float *)s->side[0];
    at_args a = at_args_of(n, at_aligned(q) && at_aligned(k) && at_aligned(v));
    if (a.Dh <= 32) return at_fwd<32>(c, a, q, k, v, o, lse);
    if (a.Dh <= 64) return at_fwd<64>(c, a, q, k, v, o, lse);
    return at_fwd<128>(c, a, q, k, v, o, lse);
}

dg_status dg__gpu_attention_backward(gpu_ctx *c, const dg_step *s) {
    const dg_node *n = s->node;
    if (!dg__gpu_attention_fits(n))
        return dg__fail(DG_ERR_UNSUPPORTED,
                        "gpu: node '%s' (attention_backward): shape outside the fused kernels' range", n->name);
    if (!s->side[0] || !s->side[1] || !s->scratch)
        return dg__fail(DG_ERR_INVALID,
                        "gpu: node '%s' (attention_backward): the step gives no storage for dk, dv or its scratch",
                        n->name);
    if (n->dtype != DG_F32) return dg__gpu_attention16_backward(c, s);
    const float *dout = (const float *)s->in[0], *q = (const float *)s->in[1], *k = (const float *)s->in[2];
    const float *v = (const float *)s->in[3], *out = (const float *)s->in[4], *lse = (const float *)s->in[5];
    float *dq = (float *)s->out, *dk = (float *)s->side[0], *dv = (float *)s->side[1];
    float *delta = (float *)s->scratch;
    at_args a = at_args_of(n, at_aligned(dout) && at_aligned(q) && at_aligned(k) && at_aligned(v));
    if (a.Dh <= 32) return at_bwd<32>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
    if (a.Dh <= 64) return at_bwd<64>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
    return at_bwd<128>(c, a, dout, q, k, v, out, lse, delta, dq, dk, dv);
}
