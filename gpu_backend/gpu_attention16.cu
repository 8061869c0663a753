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
 * Needs compute capability 8.0 (mma bf16, ldmatrix, cp.async): the launch
 * functions answer DG_ERR_UNSUPPORTED on an older device. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "gpu_common.cuh"
#include "gpu_lowp.cuh"
#include "gpu_tiles.cuh"

#define A16_LOG2E 1.4426950408889634f
#define A16_LN2 0.6931471805599453f
#define A16_NW 4             /* warps per block */
#define A16_NTH (32 * A16_NW)
#define A16_BM (16 * A16_NW) /* rows a block owns */

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

/* ---- device helpers ---- */

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

/* rows [row0, row0 + R) of a [T, Dh] row-major matrix into an R x LD tile
 * (columns 0..D-1), zeros past row T and column Dh; vec: 16-byte cp.async
 * (Dh % 8 == 0, aligned), else element by element */
template <typename E, int R, int D>
static __device__ __forceinline__ void load_rows(E *s, const E *__restrict__ g, int row0, int T, int Dh, bool vec,
                                                 int tid) {
    constexpr int LD = D + 8, C8 = D / 8;
    if (vec) {
#pragma unroll
        for (int idx = tid; idx < R * C8; idx += A16_NTH) {
            int r = idx / C8, c = idx % C8 * 8, gr = row0 + r;
            bool ok = gr < T && c < Dh;
            cp_async16((float *)(s + r * LD + c), (const float *)(ok ? g + (long long)gr * Dh + c : g), ok ? 16 : 0);
        }
    } else {
        for (int idx = tid; idx < R * D; idx += A16_NTH) {
            int r = idx / D, c = idx % D, gr = row0 + r;
            s[r * LD + c] = gr < T && c < Dh ? g[(long long)gr * Dh + c] : E(0.0f);
        }
    }
}

/* s[nb] += A B^T: A the 16 rows from ra of tile sA [m][k], B the NB * 8
 * rows from 0 of tile sB [n][k], over the D columns (k) */
template <typename E, int NB, int D>
static __device__ __forceinline__ void mm_abt(float (&s)[NB][4], const E *sA, int ra, const E *sB, int lane) {
    constexpr int LD = D + 8;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[4];
        ldsm4<false>(a, sA + (ra + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int nb = 0; nb < NB; nb += 2) {
            uint32_t b[4];
            ldsm4<false>(b, sB + (nb * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + (lane >> 3 & 1) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            a16<E>::mma(s[nb], a, b0);
            a16<E>::mma(s[nb + 1], a, b1);
        }
    }
}

/* o += P B: P [16, KB] the fp32 accumulators p (rounded to E here), B the
 * KB rows from 0 of tile sB [k][n] (D columns) */
template <typename E, int KB, int D>
static __device__ __forceinline__ void mm_pb(float (&o)[D / 8][4], const float (&p)[KB / 8][4], const E *sB,
                                             int lane) {
    constexpr int LD = D + 8;
#pragma unroll
    for (int kk = 0; kk < KB / 16; kk++) {
        const uint32_t a[4] = {a16<E>::pack(p[2 * kk][0], p[2 * kk][1]), a16<E>::pack(p[2 * kk][2], p[2 * kk][3]),
                               a16<E>::pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                               a16<E>::pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int nd = 0; nd < D / 8; nd += 2) {
            uint32_t b[4];
            ldsm4<true>(b, sB + (kk * 16 + (lane & 15)) * LD + nd * 8 + (lane >> 4) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            a16<E>::mma(o[nd], a, b0);
            a16<E>::mma(o[nd + 1], a, b1);
        }
    }
}

template <int N> static __device__ __forceinline__ void zero(float (&x)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++) x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.0f;
}

/* the accumulators' rows g and g + 8 (of the warp's 16, from row r0 of a
 * [T, Dh] matrix) times mul into it, rounded to E */
template <typename E, int D>
static __device__ __forceinline__ void store_acc(E *g, const float (&x)[D / 8][4], int r0, int T, int Dh, float mul0,
                                                 float mul1, int lane) {
    int ra = r0 + (lane >> 2), c0 = 2 * (lane & 3);
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int r = e < 2 ? ra : ra + 8, c = nd * 8 + c0 + (e & 1);
            if (r < T && c < Dh) st(g, (long long)r * Dh + c, x[nd][e] * (e < 2 ? mul0 : mul1));
        }
}

/* ---- forward ---- */

template <typename E, int D, int BN>
__global__ void __launch_bounds__(A16_NTH) k16_fwd(const E *__restrict__ q, const E *__restrict__ k,
                                                   const E *__restrict__ v, E *__restrict__ o,
                                                   float *__restrict__ lse, int BH, int T, int Dh, float c2,
                                                   bool causal, bool vec) {
    constexpr int LD = D + 8, NB = BN / 8;
    extern __shared__ float4 a16_smem[];
    E *sQ = (E *)a16_smem, *sK = sQ + A16_BM * LD, *sV = sK + 2 * BN * LD;
    const int tid = threadIdx.x, lane = tid & 31, wr = (tid >> 5) * 16, g = lane >> 2, t = lane & 3;
    const int nqb = (T + A16_BM - 1) / A16_BM;
    const int i0 = (nqb - 1 - (int)(blockIdx.x / BH)) * A16_BM, bh = (int)(blockIdx.x % BH); /* heaviest first */
    const long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; o += base;
    const int nkt = causal ? min((T + BN - 1) / BN, (i0 + A16_BM - 1) / BN + 1) : (T + BN - 1) / BN;
    load_rows<E, A16_BM, D>(sQ, q, i0, T, Dh, vec, tid);
    load_rows<E, BN, D>(sK, k, 0, T, Dh, vec, tid);
    load_rows<E, BN, D>(sV, v, 0, T, Dh, vec, tid);
    cp_commit();
    float acc[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    zero(acc);
    const int qa = i0 + wr + g; /* this thread's rows: qa, qa + 8 */
    for (int jt = 0; jt < nkt; jt++) {
        if (jt + 1 < nkt) { /* the next stage loads while this one multiplies */
            int st = (jt + 1) & 1;
            load_rows<E, BN, D>(sK + st * BN * LD, k, (jt + 1) * BN, T, Dh, vec, tid);
            load_rows<E, BN, D>(sV + st * BN * LD, v, (jt + 1) * BN, T, Dh, vec, tid);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const int j0 = jt * BN;
        const E *Ks = sK + (jt & 1) * BN * LD, *Vs = sV + (jt & 1) * BN * LD;
        if (!(causal && j0 > i0 + wr + 15)) { /* else every key of the tile is masked for this warp */
            float s[NB][4];
            zero(s);
            mm_abt<E, NB, D>(s, sQ, wr, Ks, lane);
            const bool mask = j0 + BN > T || (causal && j0 + BN - 1 > i0 + wr);
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[nb][e] * c2;
                    int j = j0 + nb * 8 + 2 * t + (e & 1), i = e < 2 ? qa : qa + 8;
                    if (mask && (j >= T || (causal && j > i))) x = -INFINITY;
                    s[nb][e] = x;
                    mx[e >> 1] = fmaxf(mx[e >> 1], x);
                }
            float corr[2], mu[2];
#pragma unroll
            for (int h = 0; h < 2; h++) { /* the row's max over its quad of threads */
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                float mn = fmaxf(m[h], mx[h]);
                mu[h] = mn == -INFINITY ? 0.0f : mn; /* a row masked so far: P 0, no NaN */
                corr[h] = a16_ex2(m[h] - mu[h]);
                m[h] = mn;
                l[h] *= corr[h];
            }
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = a16_ex2(s[nb][e] - mu[e >> 1]);
                    s[nb][e] = p;
                    l[e >> 1] += p; /* this thread's part of the row sum (unrounded P) */
                }
#pragma unroll
            for (int nd = 0; nd < D / 8; nd++) {
                acc[nd][0] *= corr[0]; acc[nd][1] *= corr[0];
                acc[nd][2] *= corr[1]; acc[nd][3] *= corr[1];
            }
            mm_pb<E, BN, D>(acc, s, Vs, lane);
        }
        __syncthreads(); /* the stage read here is the next iteration's load target */
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    store_acc<E, D>(o, acc, i0 + wr, T, Dh, l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f, lane);
    if (t == 0)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int i = qa + 8 * h;
            if (i < T) lse[(long long)bh * T + i] = l[h] > 0.0f ? m[h] * A16_LN2 + logf(l[h]) : -INFINITY;
        }
}

/* ---- backward ---- */

/* delta[r] = sum_d dout[r, d] out[r, d] in fp32, a warp a row */
template <typename E>
__global__ void k16_delta(const E *__restrict__ dout, const E *__restrict__ out, float *__restrict__ delta,
                          long long rows, int Dh) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float s = 0.0f;
        for (int d = lane; d < Dh; d += 32) s += ld(dout, r * Dh + d) * ld(out, r * Dh + d);
        s = warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

/* dq: a block owns 64 queries, loops over key tiles of BN */
template <typename E, int D, int BN>
__global__ void __launch_bounds__(A16_NTH) k16_dq(const E *__restrict__ dout, const E *__restrict__ q,
                                                  const E *__restrict__ k, const E *__restrict__ v,
                                                  const float *__restrict__ lse, const float *__restrict__ delta,
                                                  E *__restrict__ dq, int BH, int T, int Dh, float c2, float scale,
                                                  bool causal, bool vec) {
    constexpr int LD = D + 8, NB = BN / 8;
    extern __shared__ float4 a16_smem[];
    E *sQ = (E *)a16_smem, *sO = sQ + A16_BM * LD, *sK = sO + A16_BM * LD, *sV = sK + 2 * BN * LD;
    const int tid = threadIdx.x, lane = tid & 31, wr = (tid >> 5) * 16, g = lane >> 2, t = lane & 3;
    const int nqb = (T + A16_BM - 1) / A16_BM;
    const int i0 = (nqb - 1 - (int)(blockIdx.x / BH)) * A16_BM, bh = (int)(blockIdx.x % BH);
    const long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; dout += base; dq += base;
    lse += (long long)bh * T;
    delta += (long long)bh * T;
    const int nkt = causal ? min((T + BN - 1) / BN, (i0 + A16_BM - 1) / BN + 1) : (T + BN - 1) / BN;
    load_rows<E, A16_BM, D>(sQ, q, i0, T, Dh, vec, tid);
    load_rows<E, A16_BM, D>(sO, dout, i0, T, Dh, vec, tid);
    load_rows<E, BN, D>(sK, k, 0, T, Dh, vec, tid);
    load_rows<E, BN, D>(sV, v, 0, T, Dh, vec, tid);
    cp_commit();
    const int qa = i0 + wr + g;
    float l2[2], dl[2]; /* each row's lse (base 2) and delta; rows past T: P = 0 */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = qa + 8 * h;
        l2[h] = i < T ? lse[i] * A16_LOG2E : INFINITY;
        dl[h] = i < T ? delta[i] : 0.0f;
    }
    float acc[D / 8][4];
    zero(acc);
    for (int jt = 0; jt < nkt; jt++) {
        if (jt + 1 < nkt) {
            int st = (jt + 1) & 1;
            load_rows<E, BN, D>(sK + st * BN * LD, k, (jt + 1) * BN, T, Dh, vec, tid);
            load_rows<E, BN, D>(sV + st * BN * LD, v, (jt + 1) * BN, T, Dh, vec, tid);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const int j0 = jt * BN;
        const E *Ks = sK + (jt & 1) * BN * LD, *Vs = sV + (jt & 1) * BN * LD;
        if (!(causal && j0 > i0 + wr + 15)) {
            float s[NB][4], dp[NB][4];
            zero(s);
            zero(dp);
            mm_abt<E, NB, D>(s, sQ, wr, Ks, lane);  /* S = Q K^T   */
            mm_abt<E, NB, D>(dp, sO, wr, Vs, lane); /* dP = dO V^T */
            const bool mask = j0 + BN > T || (causal && j0 + BN - 1 > i0 + wr);
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int j = j0 + nb * 8 + 2 * t + (e & 1), i = e < 2 ? qa : qa + 8;
                    float p = a16_ex2(s[nb][e] * c2 - l2[e >> 1]);
                    if (mask && (j >= T || (causal && j > i))) p = 0.0f;
                    s[nb][e] = p * (dp[nb][e] - dl[e >> 1]); /* dS */
                }
            mm_pb<E, BN, D>(acc, s, Ks, lane); /* dQ += dS K (dS rounded) */
        }
        __syncthreads();
    }
    store_acc<E, D>(dq, acc, i0 + wr, T, Dh, scale, scale, lane);
}

/* dk, dv: a block owns 64 keys, loops over query tiles of BN */
template <typename E, int D, int BN>
__global__ void __launch_bounds__(A16_NTH) k16_dkdv(const E *__restrict__ dout, const E *__restrict__ q,
                                                    const E *__restrict__ k, const E *__restrict__ v,
                                                    const float *__restrict__ lse, const float *__restrict__ delta,
                                                    E *__restrict__ dk, E *__restrict__ dv, int BH, int T, int Dh,
                                                    float c2, float scale, bool causal, bool vec) {
    constexpr int LD = D + 8, NB = BN / 8;
    extern __shared__ float4 a16_smem[];
    E *sK = (E *)a16_smem, *sV = sK + A16_BM * LD, *sQ = sV + A16_BM * LD, *sO = sQ + 2 * BN * LD;
    float *sL = (float *)(sO + 2 * BN * LD), *sD = sL + 2 * BN; /* per stage: lse (base 2), delta */
    const int tid = threadIdx.x, lane = tid & 31, wr = (tid >> 5) * 16, g = lane >> 2, t = lane & 3;
    /* key block 0 sees every query: the heaviest first */
    const int j0 = (int)(blockIdx.x / BH) * A16_BM, bh = (int)(blockIdx.x % BH);
    const long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; dout += base; dk += base; dv += base;
    lse += (long long)bh * T;
    delta += (long long)bh * T;
    const int it0 = causal ? j0 / BN : 0, nit = (T + BN - 1) / BN; /* query tiles it0 .. nit-1 */
    load_rows<E, A16_BM, D>(sK, k, j0, T, Dh, vec, tid);
    load_rows<E, A16_BM, D>(sV, v, j0, T, Dh, vec, tid);
    auto load_q = [&](int it, int st) {
        load_rows<E, BN, D>(sQ + st * BN * LD, q, it * BN, T, Dh, vec, tid);
        load_rows<E, BN, D>(sO + st * BN * LD, dout, it * BN, T, Dh, vec, tid);
        for (int x = tid; x < BN; x += A16_NTH) {
            int i = it * BN + x;
            sL[st * BN + x] = i < T ? lse[i] * A16_LOG2E : INFINITY;
            sD[st * BN + x] = i < T ? delta[i] : 0.0f;
        }
    };
    if (it0 < nit) load_q(it0, 0);
    cp_commit();
    const int ka = j0 + wr + g; /* this thread's keys: ka, ka + 8 */
    float ak[D / 8][4], av[D / 8][4];
    zero(ak);
    zero(av);
    for (int it = it0; it < nit; it++) {
        const int stage = (it - it0) & 1;
        if (it + 1 < nit) {
            load_q(it + 1, stage ^ 1);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const int i0 = it * BN;
        const E *Qs = sQ + stage * BN * LD, *Os = sO + stage * BN * LD;
        const float *Ls = sL + stage * BN, *Ds = sD + stage * BN;
        if (!(causal && j0 + wr > i0 + BN - 1)) { /* else every query of the tile precedes the warp's keys */
            float s[NB][4], dp[NB][4];
            zero(s);
            zero(dp);
            mm_abt<E, NB, D>(s, sK, wr, Qs, lane); /* S^T = K Q^T: rows keys, columns queries */
            const bool mask = i0 + BN > T || (causal && j0 + wr + 15 > i0);
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int x = nb * 8 + 2 * t + (e & 1), i = i0 + x, j = e < 2 ? ka : ka + 8;
                    float p = a16_ex2(s[nb][e] * c2 - Ls[x]);
                    if (mask && (i >= T || (causal && j > i))) p = 0.0f;
                    s[nb][e] = p;
                }
            mm_pb<E, BN, D>(av, s, Os, lane);      /* dV += P^T dO (P rounded) */
            mm_abt<E, NB, D>(dp, sV, wr, Os, lane); /* dP^T = V dO^T */
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[nb][e] *= dp[nb][e] - Ds[nb * 8 + 2 * t + (e & 1)]; /* dS^T */
            mm_pb<E, BN, D>(ak, s, Qs, lane); /* dK += dS^T Q (dS rounded) */
        }
        __syncthreads();
    }
    store_acc<E, D>(dk, ak, j0 + wr, T, Dh, scale, scale, lane);
    store_acc<E, D>(dv, av, j0 + wr, T, Dh, 1.0f, 1.0f, lane);
}

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

/* the backward's query or key tile: 32 at D = 128 (registers), else 64 */
template <int D> struct a16_bn { static constexpr int fwd = 64, bwd = D == 128 ? 32 : 64; };

template <typename E, int D>
static dg_status a16_fwd(gpu_ctx *c, const a16_args &a, const E *q, const E *k, const E *v, E *o, float *lse) {
    constexpr int BN = a16_bn<D>::fwd;
    const size_t smem = (size_t)(A16_BM + 4 * BN) * (D + 8) * sizeof(E);
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
    const size_t tiles = (size_t)(2 * A16_BM + 4 * BN) * (D + 8) * sizeof(E);
    const size_t smem_dkdv = tiles + 4 * BN * sizeof(float);
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
