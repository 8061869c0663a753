// emu_attention16.cpp: gpu_attention16.cu's kernels (the very text of
// gpu_backend/gpu_attention16_kernels.cuh) run on the host, under an
// emulation of the primitives they call, against float64: so the kernels'
// index arithmetic (mma and ldmatrix fragments, tiles, stages, masks,
// causal skipping, rows and keys past T, the scalar path for Dh % 8 != 0)
// is checked where no GPU is, before any device time is spent.
//
// The emulation, from the PTX ISA's definitions: a block's threads are
// coroutines (ucontext) switched at barriers; __syncthreads a block
// barrier; __shfl_xor_sync, ldmatrix.x4 (.trans) and mma.m16n8k16 warp
// collectives through an exchange area, each lane's registers laid out as
// the PTX ISA gives the fragments (the product summed in double); cp.async
// a copy (zero-filled past its bytes); ex2 exp2f. Shared memory is checked:
// every ldmatrix row inside the block's allocation and 16-byte aligned, no
// write past it (a guard filled with a pattern). What the emulation cannot
// show: the hardware's own timing (cp.async completing late: the kernels'
// cp_wait and barriers are the same on both), mma's internal rounding of
// its sums, ex2.approx's 2^-22.
//
// Usage: emu_attention16 bf16|f16. Inputs q, k (uniform in [-2.5, 2.5)),
// v, dout (in [-1, 1)) rounded to the dtype; o, lse, dq, dk, dv against
// float64 sums from the definition (lse absolutely, the others as
// max |err| / max |ref| per tensor) at 1e-4 + 3 u (attention_check.h: the
// outputs' own rounding is u here, the reference being unrounded).
// Shapes [2 heads, T, Dh], T 1, 17, 100, 130, Dh 20 (the scalar loads),
// 32, 64, 80, 128, causal and not. Exit 0 when every case passes.
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/dtype_convert.h"

using std::min;

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(x)

struct alignas(16) float4 { float x, y, z, w; };
struct emu_dim { unsigned x; };
static emu_dim blockIdx, blockDim, gridDim;
static int emu_tid; /* the running thread of the block */
#define threadIdx (emu_dim{(unsigned)emu_tid})

/* ---- threads: coroutines, switched at barriers ---- */

struct emu_barrier { int needed, arrived; long gen; };
static ucontext_t emu_sched;
static std::vector<ucontext_t> emu_ctx;
static std::vector<char> emu_done;

static void emu_yield() {
    int me = emu_tid;
    swapcontext(&emu_ctx[me], &emu_sched);
    emu_tid = me;
}

static void emu_wait(emu_barrier &b) {
    long gen = b.gen;
    if (++b.arrived == b.needed) {
        b.arrived = 0;
        b.gen++;
        return;
    }
    while (b.gen == gen) emu_yield();
}

static emu_barrier emu_block_bar, emu_warp_bar[32];
static void __syncthreads() { emu_wait(emu_block_bar); }
static void emu_warp_sync() { emu_wait(emu_warp_bar[emu_tid / 32]); }

/* a warp's exchange area for its collectives */
struct emu_xch { float f[32]; const void *p[32]; uint32_t a[32][4], b[32][2]; };
static emu_xch emu_x[32];

static float __shfl_xor_sync(unsigned, float v, int m) {
    emu_xch &x = emu_x[emu_tid / 32];
    int lane = emu_tid & 31;
    x.f[lane] = v;
    emu_warp_sync();
    float r = x.f[lane ^ m];
    emu_warp_sync();
    return r;
}

static float warp_sum(float v) {
    for (int m = 16; m; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

/* ---- the element types: the project's conversions (to nearest even) ---- */

struct emu_bf16 {
    uint16_t x;
    emu_bf16() = default;
    explicit emu_bf16(float f) : x(dg__f32_to_bf16(f)) {}
    static float widen(uint16_t h) { return dg__bf16_to_f32(h); }
};
struct emu_f16 {
    uint16_t x;
    emu_f16() = default;
    explicit emu_f16(float f) : x(dg__f32_to_f16(f)) {}
    static float widen(uint16_t h) { return dg__f16_to_f32(h); }
};
template <typename E> static float ld(const E *p, long long i) { return E::widen(p[i].x); }
template <typename E> static void st(E *p, long long i, float v) { p[i] = E(v); }

/* ---- the primitives the kernels call ---- */

static float4 *emu_smem;
static size_t emu_smem_bytes;
#define A16_SHARED float4 *a16_smem = emu_smem

template <typename E> struct a16 {
    static uint32_t pack(float a, float b) { return (uint32_t)E(a).x | (uint32_t)E(b).x << 16; }
    /* d += A B: A 16x16 from the lanes' a (a[0]: row g, columns 2t, 2t+1;
     * a[1]: row g+8; a[2], a[3]: columns + 8), B 16x8 from b (b[0]: rows
     * 2t, 2t+1, column g; b[1]: rows + 8); d[0], d[1]: row g, columns 2t,
     * 2t+1; d[2], d[3]: row g+8 (g = lane / 4, t = lane % 4) */
    static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
        emu_xch &x = emu_x[emu_tid / 32];
        int lane = emu_tid & 31, g = lane >> 2, t = lane & 3;
        memcpy(x.a[lane], a, sizeof a);
        memcpy(x.b[lane], b, sizeof b);
        emu_warp_sync();
        float out[4];
        for (int e = 0; e < 4; e++) {
            int r = e < 2 ? g : g + 8, n = 2 * t + (e & 1);
            double s = 0;
            for (int k = 0; k < 16; k++) {
                uint32_t ar = x.a[(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)];
                uint32_t br = x.b[n * 4 + (k % 8) / 2][k >= 8];
                s += (double)E::widen((uint16_t)(ar >> 16 * (k & 1))) * E::widen((uint16_t)(br >> 16 * (k & 1)));
            }
            out[e] = d[e] + (float)s;
        }
        emu_warp_sync();
        for (int e = 0; e < 4; e++) d[e] = out[e];
    }
};

static float a16_ex2(float x) { return exp2f(x); }

/* lane l gives the address of row l % 8 of matrix l / 8; register j gets
 * matrix j's (row l / 4, columns 2 (l % 4), +1), with TRANS its (rows
 * 2 (l % 4), +1, column l / 4), the first in the low half */
template <bool TRANS> static void ldsm4(uint32_t (&r)[4], const void *p) {
    emu_xch &x = emu_x[emu_tid / 32];
    int lane = emu_tid & 31, g = lane >> 2, t = lane & 3;
    const char *c = (const char *)p, *lo = (const char *)emu_smem;
    if (c < lo || c + 16 > lo + emu_smem_bytes || ((uintptr_t)c & 15u)) {
        fprintf(stderr, "ldmatrix: row address %td bytes into %zu of shared memory, or unaligned\n", c - lo,
                emu_smem_bytes);
        exit(3);
    }
    x.p[lane] = p;
    emu_warp_sync();
    for (int j = 0; j < 4; j++) {
        const uint16_t *a = (const uint16_t *)x.p[j * 8 + (TRANS ? 2 * t : g)];
        const uint16_t *b = (const uint16_t *)x.p[j * 8 + (TRANS ? 2 * t + 1 : g)];
        uint16_t first = TRANS ? a[g] : a[2 * t], second = TRANS ? b[g] : b[2 * t + 1];
        r[j] = (uint32_t)first | (uint32_t)second << 16;
    }
    emu_warp_sync();
}

static void cp_async16(float *dst, const float *src, int bytes) {
    memset(dst, 0, 16);
    if (bytes) memcpy(dst, src, (size_t)bytes);
}
static void cp_commit() {}
template <int N> static void cp_wait() {}

#include "gpu_backend/gpu_attention16_kernels.cuh"

/* ---- launches: each block in turn, its threads as coroutines ---- */

static void (*emu_body)(void *);
static void *emu_arg;
static void emu_entry() {
    emu_body(emu_arg);
    emu_done[(size_t)emu_tid] = 1;
    swapcontext(&emu_ctx[(size_t)emu_tid], &emu_sched);
}

/* the block's nth threads from their start to their end; getcontext and
 * swapcontext return twice, so this function's own state is volatile */
static void emu_block(int nth, std::vector<std::vector<char>> &stacks) {
    emu_done.assign((size_t)nth, 0);
    for (volatile size_t i = 0; i < (size_t)nth; i++) {
        getcontext(&emu_ctx[i]);
        emu_ctx[i].uc_stack.ss_sp = stacks[i].data();
        emu_ctx[i].uc_stack.ss_size = stacks[i].size();
        emu_ctx[i].uc_link = nullptr;
        makecontext(&emu_ctx[i], emu_entry, 0);
    }
    for (volatile bool left = true; left;) {
        left = false;
        for (volatile int i = 0; i < nth; i++)
            if (!emu_done[(size_t)i]) {
                emu_tid = i;
                swapcontext(&emu_sched, &emu_ctx[(size_t)i]);
                left = left || !emu_done[(size_t)i];
            }
    }
}

template <class F> static void launch(unsigned grid, int nth, size_t smem, F f) {
    const size_t guard = 4096;
    std::vector<std::vector<char>> stacks((size_t)nth, std::vector<char>(1 << 17));
    std::vector<char> mem(smem + guard + 16);
    emu_body = [](void *a) { (*(F *)a)(); };
    emu_arg = &f;
    gridDim.x = grid;
    blockDim.x = (unsigned)nth;
    emu_ctx.assign((size_t)nth, ucontext_t());
    for (unsigned blk = 0; blk < grid; blk++) {
        blockIdx.x = blk;
        unsigned char *base = (unsigned char *)(((uintptr_t)mem.data() + 15) & ~(uintptr_t)15);
        memset(base, 0x5a, smem + guard);
        emu_smem = (float4 *)base;
        emu_smem_bytes = smem;
        emu_block_bar = {nth, 0, 0};
        for (int w = 0; w < nth / 32; w++) emu_warp_bar[w] = {32, 0, 0};
        emu_block(nth, stacks);
        for (size_t i = smem; i < smem + guard; i++)
            if (base[i] != 0x5a) {
                fprintf(stderr, "shared memory written %zu bytes past its %zu\n", i - smem, smem);
                exit(3);
            }
    }
}

/* ---- one case: the kernels as gpu_attention16.cu launches them ---- */

template <typename E> struct tensors {
    std::vector<E> q, k, v, dout, o, dq, dk, dv;
    std::vector<float> lse, delta;
};

template <typename E, int D> static void run(tensors<E> &x, int BH, int T, int Dh, bool causal) {
    constexpr int BN = a16_bn<D>::fwd, BB = a16_bn<D>::bwd;
    const float scale = 1.0f / sqrtf((float)Dh), c2 = scale * A16_LOG2E;
    const bool vec = Dh % 8 == 0;
    const unsigned grid = (unsigned)((T + A16_BM - 1) / A16_BM) * (unsigned)BH;
    const long long rows = (long long)BH * T;
    launch(grid, A16_NTH, a16_smem_fwd<E, D>(), [&] {
        k16_fwd<E, D, BN>(x.q.data(), x.k.data(), x.v.data(), x.o.data(), x.lse.data(), BH, T, Dh, c2, causal, vec);
    });
    launch(4, 256, 0, [&] { k16_delta<E>(x.dout.data(), x.o.data(), x.delta.data(), rows, Dh); });
    launch(grid, A16_NTH, a16_smem_dq<E, D>(), [&] {
        k16_dq<E, D, BB>(x.dout.data(), x.q.data(), x.k.data(), x.v.data(), x.lse.data(), x.delta.data(), x.dq.data(),
                         BH, T, Dh, c2, scale, causal, vec);
    });
    launch(grid, A16_NTH, a16_smem_dkdv<E, D>(), [&] {
        k16_dkdv<E, D, BB>(x.dout.data(), x.q.data(), x.k.data(), x.v.data(), x.lse.data(), x.delta.data(),
                           x.dk.data(), x.dv.data(), BH, T, Dh, c2, scale, causal, vec);
    });
}

/* the worst error of o, lse, dq, dk, dv */
template <typename E> static double check(int BH, int T, int Dh, bool causal, uint64_t seed) {
    const size_t n = (size_t)BH * T * Dh;
    tensors<E> x;
    for (auto *t : {&x.q, &x.k, &x.v, &x.dout}) t->resize(n);
    for (auto *t : {&x.o, &x.dq, &x.dk, &x.dv}) t->assign(n, E(NAN)); /* an entry left unwritten fails */
    x.lse.assign((size_t)BH * T, NAN);
    x.delta.assign((size_t)BH * T, NAN);
    for (size_t i = 0; i < n; i++) { /* xorshift, uniform in [-1, 1) */
        float u[4];
        for (float &ui : u) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            ui = (float)((double)(seed >> 11) * 0x1p-52 - 1.0);
        }
        x.q[i] = E(2.5f * u[0]), x.k[i] = E(2.5f * u[1]), x.v[i] = E(u[2]), x.dout[i] = E(u[3]);
    }
    if (Dh <= 32) run<E, 32>(x, BH, T, Dh, causal);
    else if (Dh <= 64) run<E, 64>(x, BH, T, Dh, causal);
    else run<E, 128>(x, BH, T, Dh, causal);

    const double s = (double)(1.0f / sqrtf((float)Dh));
    std::vector<double> ro(n), rdq(n, 0), rdk(n, 0), rdv(n, 0), rl((size_t)BH * T), P((size_t)T * T);
    for (int h = 0; h < BH; h++) {
        const size_t b = (size_t)h * T * Dh;
        auto at = [&](const std::vector<E> &t, int i, int c) { return (double)ld(t.data(), (long long)(b + (size_t)i * Dh + c)); };
        for (int i = 0; i < T; i++) {
            int keys = causal ? i + 1 : T;
            double m = -INFINITY, z = 0;
            for (int j = 0; j < keys; j++) {
                double d = 0;
                for (int c = 0; c < Dh; c++) d += at(x.q, i, c) * at(x.k, j, c);
                P[(size_t)i * T + j] = s * d;
                m = std::max(m, s * d);
            }
            for (int j = 0; j < keys; j++) z += P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - m);
            for (int j = 0; j < T; j++) P[(size_t)i * T + j] = j < keys ? P[(size_t)i * T + j] / z : 0;
            rl[(size_t)h * T + i] = m + log(z);
            for (int c = 0; c < Dh; c++) {
                double a = 0;
                for (int j = 0; j < keys; j++) a += P[(size_t)i * T + j] * at(x.v, j, c);
                ro[b + (size_t)i * Dh + c] = a;
            }
        }
        for (int i = 0; i < T; i++) {
            double di = 0;
            for (int c = 0; c < Dh; c++) di += at(x.dout, i, c) * ro[b + (size_t)i * Dh + c];
            for (int j = 0; j < T; j++) {
                double p = P[(size_t)i * T + j], dp = 0;
                if (p == 0) continue;
                for (int c = 0; c < Dh; c++) dp += at(x.dout, i, c) * at(x.v, j, c);
                for (int c = 0; c < Dh; c++) {
                    rdq[b + (size_t)i * Dh + c] += s * p * (dp - di) * at(x.k, j, c);
                    rdk[b + (size_t)j * Dh + c] += s * p * (dp - di) * at(x.q, i, c);
                    rdv[b + (size_t)j * Dh + c] += p * at(x.dout, i, c);
                }
            }
        }
    }
    const std::vector<E> *got[4] = {&x.o, &x.dq, &x.dk, &x.dv};
    const std::vector<double> *ref[4] = {&ro, &rdq, &rdk, &rdv};
    double worst = 0;
    for (int w = 0; w < 4; w++) {
        double err = 0, top = 1e-3; /* floor: dq, dk are 0 at T = 1 */
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)ld(got[w]->data(), (long long)i) - (*ref[w])[i]);
            err = std::max(err, std::isnan(e) ? INFINITY : e);
            top = std::max(top, fabs((*ref[w])[i]));
        }
        worst = std::max(worst, err / top);
    }
    for (size_t i = 0; i < rl.size(); i++) {
        double e = fabs((double)x.lse[i] - rl[i]);
        worst = std::max(worst, std::isnan(e) ? INFINITY : e / std::max(1.0, fabs(rl[i])));
    }
    return worst;
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "bf16") && strcmp(argv[1], "f16"))) {
        fprintf(stderr, "usage: %s bf16|f16\n", argv[0]);
        return 2;
    }
    const bool f16 = !strcmp(argv[1], "f16");
    const int ts[] = {1, 17, 100, 130}, dhs[] = {20, 32, 64, 80, 128};
    const double u = f16 ? 0x1p-11 : 0x1p-8, tol = 1e-4 + 3 * u;
    double worst = 0;
    int bad = 0;
    for (int c = 0; c < 2; c++)
        for (int t : ts)
            for (int dh : dhs) {
                uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(t * 1000 + dh * 10 + c);
                double e = f16 ? check<emu_f16>(2, t, dh, c, seed) : check<emu_bf16>(2, t, dh, c, seed);
                worst = std::max(worst, e);
                if (!(e <= tol)) {
                    bad++;
                    printf("FAIL %s T %d Dh %d %s: error %.3g > %.3g (%.2f u)\n", argv[1], t, dh,
                           c ? "causal" : "full", e, tol, e / u);
                }
            }
    printf("%s: %d cases, worst error %.3g (%.2f u), tolerance %.3g, %d failed\n", argv[1], 2 * 4 * 5, worst,
           worst / u, tol, bad);
    return bad ? 1 : 0;
}
