/* gpu_attention16_kernels.cuh: the kernels of gpu_attention16.cu (its
 * header comment says what they do), apart from the hardware primitives
 * they call, which the includer defines first:
 *   a16<E>::pack (two floats rounded to E in one register, the first in
 *   the low half) and a16<E>::mma (mma.sync.m16n8k16, fp32 accumulation),
 *   a16_ex2 (2^x), ldsm4<TRANS> (ldmatrix.x4), cp_async16, cp_commit,
 *   cp_wait (gpu_tiles.cuh), ld, st (gpu_lowp.cuh), warp_sum,
 *   __shfl_xor_sync, __syncthreads, and A16_SHARED, the declaration of the
 *   block's dynamic shared memory a16_smem (float4 aligned).
 * gpu_attention16.cu includes it with the device's primitives;
 * tests/emu_attention16.cpp with a host emulation of them, so the kernels'
 * index arithmetic (fragments, tiles, masks, stages) is checked against
 * float64 on a machine without a GPU. */
#ifndef DG_GPU_ATTENTION16_KERNELS_CUH
#define DG_GPU_ATTENTION16_KERNELS_CUH

#include <stddef.h>

#define A16_LOG2E 1.4426950408889634f
#define A16_LN2 0.6931471805599453f
#define A16_NW 4             /* warps per block */
#define A16_NTH (32 * A16_NW)
#define A16_BM (16 * A16_NW) /* rows a block owns */

/* ---- tiles and warp products ---- */

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
    A16_SHARED;
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
    A16_SHARED;
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
    A16_SHARED;
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

/* the backward's query or key tile: 32 at D = 128 (registers), else 64 */
template <int D> struct a16_bn { static constexpr int fwd = 64, bwd = D == 128 ? 32 : 64; };

/* each kernel's dynamic shared memory, bytes: k16_fwd Q and 2 stages of
 * K, V; k16_dq Q, dO and 2 stages of K, V; k16_dkdv K, V and 2 stages of
 * Q, dO, lse, delta */
template <typename E, int D> constexpr size_t a16_smem_fwd() {
    return (size_t)(A16_BM + 4 * a16_bn<D>::fwd) * (D + 8) * sizeof(E);
}
template <typename E, int D> constexpr size_t a16_smem_dq() {
    return (size_t)(2 * A16_BM + 4 * a16_bn<D>::bwd) * (D + 8) * sizeof(E);
}
template <typename E, int D> constexpr size_t a16_smem_dkdv() {
    return a16_smem_dq<E, D>() + 4 * a16_bn<D>::bwd * sizeof(float);
}

#endif
