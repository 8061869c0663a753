/* gpu_attention16_kernels.cuh: the kernels of gpu_attention16.cu (its
 * header comment says what they do), apart from the hardware primitives
 * they call, which the includer defines first:
 *   a16<E>::pack (two floats rounded to E in one register, the first in
 *   the low half) and a16<E>::mma (mma.sync.m16n8k16, fp32 accumulation),
 *   a16_ex2 (2^x), ldsm4<TRANS> (ldmatrix.x4), cp_async16, cp_commit,
 *   cp_wait (gpu_tiles.cuh), ld, st (gpu_lowp.cuh), warp_sum,
 *   __shfl_xor_sync, __syncthreads, a16_red2 (p[0] += a and, when two,
 *   p[1] += b in global memory, atomically, nothing returned), and
 *   A16_SHARED, the declaration of the block's dynamic shared memory
 *   a16_smem (float4 aligned).
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

/* delta[r] = sum_d dout[r, d] out[r, d] in fp32, a warp a row; the row's
 * float32 dQ accumulator dqa[r, 0..Dh) zeroed for k16_dkdv's reductions */
template <typename E>
__global__ void k16_delta(const E *__restrict__ dout, const E *__restrict__ out, float *__restrict__ delta,
                          float *__restrict__ dqa, long long rows, int Dh) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float s = 0.0f;
        for (int d = lane; d < Dh; d += 32) {
            s += ld(dout, r * Dh + d) * ld(out, r * Dh + d);
            dqa[r * Dh + d] = 0.0f;
        }
        s = warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

/* dq[x] = scale dqa[x] rounded to E, x < n: the accumulator k16_dkdv
 * filled, into the gradient's dtype */
template <typename E>
__global__ void k16_dq_store(const float *__restrict__ dqa, E *__restrict__ dq, long long n, float scale) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n; x += step) st(dq, x, dqa[x] * scale);
}

/* dQ tile += dS K for the BN queries from i0: dS^T [A16_BM keys][BN
 * queries] in shared memory (row stride LDS), K the block's keys (sK
 * [A16_BM][D]); the warps split the [BN, D] product, each 16 queries by
 * D * BN / 64 columns, and add their part to the float32 dqa [T, Dh] by
 * reductions (rows past T and columns past Dh left out) */
template <typename E, int D, int BN>
static __device__ __forceinline__ void dq_tile(float *__restrict__ dqa, const E *sdS, const E *sK, int i0, int T,
                                               int Dh, int tid) {
    constexpr int LD = D + 8, LDS = BN + 8, RG = BN / 16, CW = D * BN / 64;
    const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
    const int qr = w % RG * 16, c0 = w / RG * CW; /* the warp's queries and columns */
    float acc[CW / 8][4];
    zero(acc);
#pragma unroll
    for (int kk = 0; kk < A16_BM / 16; kk++) {
        uint32_t a[4]; /* dS [queries][keys] from its transpose: matrix j keys + 8 (j / 2), queries + 8 (j % 2) */
        ldsm4<true>(a, sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + qr + (lane >> 3 & 1) * 8);
#pragma unroll
        for (int nd = 0; nd < CW / 8; nd += 2) {
            uint32_t b[4];
            ldsm4<true>(b, sK + (kk * 16 + (lane & 15)) * LD + c0 + nd * 8 + (lane >> 4) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            a16<E>::mma(acc[nd], a, b0);
            a16<E>::mma(acc[nd + 1], a, b1);
        }
    }
#pragma unroll
    for (int nd = 0; nd < CW / 8; nd++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int i = i0 + qr + g + 8 * h, c = c0 + nd * 8 + 2 * t;
            if (i < T && c < Dh) a16_red2(dqa + (long long)i * Dh + c, acc[nd][2 * h], acc[nd][2 * h + 1], c + 1 < Dh);
        }
}

/* dk, dv, and dq's float32 accumulator: a block owns 64 keys, loops over
 * query tiles of BN; per tile S^T, P^T, dV += P^T dO, dP^T, dS^T,
 * dK += dS^T Q, and dS^T through shared memory to dq_tile (dQ += dS K,
 * reductions into dqa, zeroed by k16_delta): 5 products */
template <typename E, int D, int BN>
__global__ void __launch_bounds__(A16_NTH) k16_dkdv(const E *__restrict__ dout, const E *__restrict__ q,
                                                    const E *__restrict__ k, const E *__restrict__ v,
                                                    const float *__restrict__ lse, const float *__restrict__ delta,
                                                    float *__restrict__ dqa, E *__restrict__ dk, E *__restrict__ dv,
                                                    int BH, int T, int Dh, float c2, float scale, bool causal,
                                                    bool vec) {
    constexpr int LD = D + 8, NB = BN / 8, LDS = BN + 8;
    A16_SHARED;
    E *sK = (E *)a16_smem, *sV = sK + A16_BM * LD, *sQ = sV + A16_BM * LD, *sO = sQ + 2 * BN * LD;
    float *sL = (float *)(sO + 2 * BN * LD), *sD = sL + 2 * BN; /* per stage: lse (base 2), delta */
    E *sdS = (E *)(sD + 2 * BN);                                 /* dS^T [A16_BM keys][BN queries], rounded */
    const int tid = threadIdx.x, lane = tid & 31, wr = (tid >> 5) * 16, g = lane >> 2, t = lane & 3;
    /* key block 0 sees every query: the heaviest first */
    const int j0 = (int)(blockIdx.x / BH) * A16_BM, bh = (int)(blockIdx.x % BH);
    const long long base = (long long)bh * T * Dh;
    q += base; k += base; v += base; dout += base; dk += base; dv += base; dqa += base;
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
        float s[NB][4]; /* dS^T; stays 0 where every query of the tile precedes the warp's keys */
        zero(s);
        const bool live = !(causal && j0 + wr > i0 + BN - 1);
        if (live) {
            float dp[NB][4];
            zero(dp);
            mm_abt<E, NB, D>(s, sK, wr, Qs, lane); /* S^T = K Q^T: rows keys, columns queries */
            /* keys past T too: their zero rows of K must not give P = 2^-lse (inf) times K = 0 in dQ */
            const bool mask = i0 + BN > T || j0 + wr + 16 > T || (causal && j0 + wr + 15 > i0);
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int x = nb * 8 + 2 * t + (e & 1), i = i0 + x, j = e < 2 ? ka : ka + 8;
                    float p = a16_ex2(s[nb][e] * c2 - Ls[x]);
                    if (mask && (i >= T || j >= T || (causal && j > i))) p = 0.0f;
                    s[nb][e] = p;
                }
            mm_pb<E, BN, D>(av, s, Os, lane);      /* dV += P^T dO (P rounded) */
            mm_abt<E, NB, D>(dp, sV, wr, Os, lane); /* dP^T = V dO^T */
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[nb][e] *= dp[nb][e] - Ds[nb * 8 + 2 * t + (e & 1)]; /* dS^T */
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb++) /* dS^T rounded as mm_pb rounds it, zeros for a warp not live */
#pragma unroll
            for (int h = 0; h < 2; h++)
                *(uint32_t *)(sdS + (wr + g + 8 * h) * LDS + nb * 8 + 2 * t) =
                    a16<E>::pack(s[nb][2 * h], s[nb][2 * h + 1]);
        if (live) mm_pb<E, BN, D>(ak, s, Qs, lane); /* dK += dS^T Q (dS rounded) */
        __syncthreads(); /* every warp's dS^T in place */
        dq_tile<E, D, BN>(dqa, sdS, sK, i0, T, Dh, tid);
        __syncthreads(); /* the stage read here is the next iteration's load target, sdS its dS^T */
    }
    store_acc<E, D>(dk, ak, j0 + wr, T, Dh, scale, scale, lane);
    store_acc<E, D>(dv, av, j0 + wr, T, Dh, 1.0f, 1.0f, lane);
}

/* the backward's query or key tile: 32 at D = 128 (registers), else 64 */
template <int D> struct a16_bn { static constexpr int fwd = 64, bwd = D == 128 ? 32 : 64; };

/* each kernel's dynamic shared memory, bytes: k16_fwd Q and 2 stages of
 * K, V; k16_dkdv K, V, 2 stages of Q, dO, lse, delta, and dS^T */
template <typename E, int D> constexpr size_t a16_smem_fwd() {
    return (size_t)(A16_BM + 4 * a16_bn<D>::fwd) * (D + 8) * sizeof(E);
}
template <typename E, int D> constexpr size_t a16_smem_dkdv() {
    constexpr int BN = a16_bn<D>::bwd;
    return (size_t)(2 * A16_BM + 4 * BN) * (D + 8) * sizeof(E) + 4 * BN * sizeof(float) +
           (size_t)A16_BM * (BN + 8) * sizeof(E);
}

#endif
