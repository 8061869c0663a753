/* gpu_conv_implicit.cu: conv2d and its backward ops as implicit GEMMs, the
 * second implementation beside gpu_conv.cu's im2col + cuBLAS, chosen per
 * backend (DG_CONV_IMPLICIT in a plan's options, or dg_gpu_set_conv's
 * DG_GPU_CONV_IMPLICIT for a plan that leaves it at DEFAULT). No column matrix is
 * stored: each block gathers the column tile it needs from x (or dy)
 * straight into shared memory. Geometry from layout.h's dg_conv_dims;
 * x [n,c,h,w], y [n,o,oh,ow], w [o,cg,kh,kw], og = o/groups.
 *
 * Three GEMMs, per group g (rows and columns of C, reduction k):
 *   conv2d:          y[n, g*og+m, oy, ox] = sum over k = (ci, ki, kj) of
 *                    w[g*og+m, ci, ki, kj] x[n, g*cg+ci, oy*sh-ph+ki*dh, ox*sw-pw+kj*dw]
 *                    M = og, columns (n, oy, ox), K = cg*kh*kw
 *   backward_data:   dx positions split into the sh*sw residue classes
 *                    (iy, ix) = (ry + qy*sh, rx + qx*sw); in a class only the
 *                    taps ki with (ry + ph - ki*dh) % sh == 0 reach dy, an
 *                    arithmetic run ki = ki0 + t*(sh/gcd(sh,dh)), and for
 *                    them oy = qy + oyb - t*(dh/gcd(sh,dh)): a dense GEMM
 *                    per class with no wasted taps (a stride-2 3x3 kernel
 *                    gives classes of 1, 2, 2 and 4 taps, 9 in all)
 *                    dx[n, g*cg+m, iy, ix] = sum over k = (o', t, u) of
 *                    w[g*og+o', m, ki(t), kj(u)] dy[n, g*og+o', oy(qy,t), ox(qx,u)]
 *                    M = cg, columns (n, qy, qx), K = og*nt*nu
 *   backward_weight: dw[g*og+m, col = (ci, ki, kj)] = sum over k = (n, oy, ox) of
 *                    dy[n, g*og+m, oy, ox] x[n, g*cg+ci, oy*sh-ph+ki*dh, ox*sw-pw+kj*dw]
 *                    M = og, N = cg*kh*kw, K = n*oh*ow, split in S ranges
 *                    (split-K): block s writes its partial dw into the
 *                    step's scratch, k_sum_splits adds them in order s = 0..S-1
 * conv2d and backward_data are one kernel (k_conv_gather): a class is a
 * pair of axis maps (ig_axis): column q and tap t read the source at
 * q*cs + c0 + t*ts, the weight tap t0 + t*at, and write the destination
 * at q*ds + d0 (conv2d: cs = stride, c0 = -pad, ts = dilation, ds = 1).
 *
 * Tiling: a BM x BN tile of C per block of 256 threads (128x128, 64x128 or
 * 64x64, picked by pick_tile so that small problems still fill the SMs),
 * a thread computes (BM/16) x (BN/16) outputs in registers: rows
 * i*64 + ty*4 + 0..3, columns j*64 + tx*4 + 0..3 (tx = tid%16, ty = tid/16),
 * so its shared-memory reads are float4 and conflict-free. k advances in
 * slices of BK = 8; each slice is fetched from global memory into
 * registers while the previous one is multiplied, then stored into the
 * other of two shared buffers (one barrier per slice). Shared rows are
 * padded by 4 floats: the stores of the loaders below hit 32 banks.
 * Loaders (per slice):
 *   A (weights, or dy for backward_weight): AE = BM*8/256 consecutive k of
 *     one row each (rows of w and dy are contiguous along k);
 *   B (gather, conv2d/backward_data): warp = k row, lanes = columns
 *     lane + 32j, so a warp reads 32 neighbouring positions; the column's
 *     source offset and position are computed once per block, the k part
 *     (channel, tap) once per slice;
 *   B (backward_weight): lane%8 = k (8 neighbouring positions), columns
 *     lane/8 + 4*warp + 32j (fixed taps, precomputed per block).
 * Out-of-range taps (padding) read as 0 by an unsigned bounds test; columns
 * and k past the end carry a sentinel position that fails it. Every index is
 * 32-bit (dg__gpu_conv_implicit_fits checks that every tensor has fewer
 * than 2^31 elements and the geometry is below 2^28), divisions by a
 * launch-constant divisor are a multiply-high and a shift (ig_div).
 *
 * Each output element is summed by one thread in a fixed order, and split-K
 * partials are added in a fixed order: results are the same bits run to
 * run (on a given device: the split count follows its SM count).
 * FP32 FMAs only; a plan's TF32 option does not apply here. */
#include <limits.h>
#include <math.h>

#include "gpu_common.cuh"

#define IG_BK 8
#define IG_THREADS 256
#define IG_MAX_CLASSES 16               /* residue classes per backward_data launch (param space) */
#define IG_SENTINEL (-(1 << 29))        /* a position that fails every bounds test */
#define IG_GEOMETRY_MAX (1 << 28)       /* positions plus taps plus the sentinel stay inside int */

/* the loaders and the slice multiply are host + device code (the host
 * pass would warn about a bare #pragma unroll) */
#ifdef __CUDA_ARCH__
#define IG_UNROLL _Pragma("unroll")
#else
#define IG_UNROLL
#endif

/* n / d for 0 <= n < 2^31 by a multiply-high and a shift, d fixed per launch
 * (Granlund-Montgomery; magic fits 32 bits for 1 <= d <= 2^31) */
struct ig_div {
    unsigned d, magic, shift;
};

static ig_div ig_div_of(long long d) {
    ig_div v;
    v.d = d < 1 ? 1u : (unsigned)d; /* an empty axis divides nothing: any divisor */
    v.shift = 0;
    while ((1ull << v.shift) < v.d) v.shift++;
    v.magic = (unsigned)(((1ull << 32) * ((1ull << v.shift) - v.d)) / v.d + 1);
    return v;
}

__host__ __device__ __forceinline__ int ig_quot(const ig_div &v, int n) {
#ifdef __CUDA_ARCH__
    unsigned t = __umulhi((unsigned)n, v.magic);
#else
    unsigned t = (unsigned)(((unsigned long long)(unsigned)n * v.magic) >> 32);
#endif
    return (int)((t + (unsigned)n) >> v.shift);
}

/* a read-only global load (the non-coherent cache path on the device) */
__host__ __device__ __forceinline__ float ig_load(const float *p) {
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

/* ---- shared memory and the multiply of one slice (all three GEMMs) ---- */

template <int BM, int BN> struct ig_smem {
    float a[2][IG_BK][BM + 4]; /* a[buf][p][r] = A(m0 + r, k0 + p) */
    float b[2][IG_BK][BN + 4]; /* b[buf][p][j] = B(k0 + p, col0 + j) */
};

/* acc[i][j] += sum over the slice of A(row i) B(column j); rows
 * (i/4)*64 + ty*4 + i%4, columns (j/4)*64 + tx*4 + j%4 */
template <int BM, int BN>
__host__ __device__ __forceinline__ void ig_fma(const ig_smem<BM, BN> &s, int buf, int tid,
                                                float (&acc)[BM / 16][BN / 16]) {
    int tx = tid % 16, ty = tid / 16;
IG_UNROLL
    for (int p = 0; p < IG_BK; p++) {
        float a[BM / 16], b[BN / 16];
IG_UNROLL
        for (int i = 0; i < BM / 64; i++) {
            float4 v = *(const float4 *)&s.a[buf][p][i * 64 + ty * 4];
            a[4 * i] = v.x; a[4 * i + 1] = v.y; a[4 * i + 2] = v.z; a[4 * i + 3] = v.w;
        }
IG_UNROLL
        for (int j = 0; j < BN / 64; j++) {
            float4 v = *(const float4 *)&s.b[buf][p][j * 64 + tx * 4];
            b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
        }
IG_UNROLL
        for (int i = 0; i < BM / 16; i++)
IG_UNROLL
            for (int j = 0; j < BN / 16; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* row and column (in the tile) of this thread's output (i, j) */
__host__ __device__ __forceinline__ int ig_out_row(int tid, int i) { return (i / 4) * 64 + (tid / 16) * 4 + i % 4; }
__host__ __device__ __forceinline__ int ig_out_col(int tid, int j) { return (j / 4) * 64 + (tid % 16) * 4 + j % 4; }

/* ---- conv2d and backward_data: the gather GEMM ---- */

/* One axis of a gather class: column coordinate q < nq reads the source
 * at q*cs + c0 + t*ts for tap t < nt (weight tap t0 + t*at) and writes the
 * destination at q*ds + d0. */
struct ig_axis {
    int nq, cs, c0, nt, ts, t0, at, ds, d0;
};

/* conv2d along one axis: q = the output position, t = the kernel tap */
static ig_axis axis_forward(long long out, long long k, long long stride, long long pad, long long dil) {
    return ig_axis{(int)out, (int)stride, (int)-pad, (int)k, (int)dil, 0, 1, 1, 0};
}

static long long gcd_ll(long long a, long long b) { return b ? gcd_ll(b, a % b) : a; }

/* backward_data along one axis, residue class r < stride of the input
 * positions i = r + q*stride: the taps k with (r + pad - k*dil) % stride == 0
 * are k0, k0 + kst, ... (kst = stride / gcd); each reads dy at
 * (i + pad - k*dil) / stride = q + (r + pad - k0*dil)/stride - t*(dil/gcd) */
static ig_axis axis_backward(long long r, long long in, long long k, long long stride, long long pad,
                             long long dil) {
    long long gd = gcd_ll(stride, dil), kst = stride / gd, k0 = -1;
    for (long long t = 0; t < kst && t < k; t++)
        if ((r + pad - t * dil) % stride == 0) {
            k0 = t;
            break;
        }
    ig_axis a;
    a.nq = r < in ? (int)((in - r + stride - 1) / stride) : 0;
    a.nt = k0 < 0 ? 0 : (int)((k - k0 + kst - 1) / kst);
    a.cs = 1;
    a.c0 = k0 < 0 ? 0 : (int)((r + pad - k0 * dil) / stride);
    a.ts = (int)-(dil / gd);
    a.t0 = k0 < 0 ? 0 : (int)k0;
    a.at = (int)kst;
    a.ds = (int)stride;
    a.d0 = (int)r;
    return a;
}

/* one gather GEMM: columns (image, qy, qx), k = (channel, t, u) */
struct ig_class {
    int    nq, nqx;         /* columns per image: nqy*nqx              */
    ig_div q_div, qx_div;   /* column -> (image, qy, qx)               */
    int    csy, cy0, csx, cx0;
    int    nt, nu, tys, txs;
    ig_div u_div, tu_div;   /* k -> (channel, t, u)                    */
    int    t0, at, u0, au;
    int    a_dt, a_dc;          /* weight offset steps when u, then t, wraps */
    int    dsy, dy0, dsx, dx0;
};

/* wc, kw: the weight's channel and row strides (ig_gather) */
static ig_class class_of(const ig_axis &y, const ig_axis &x, int wc, int kw) {
    ig_class q;
    q.nq = y.nq * x.nq;
    q.nqx = x.nq;
    q.q_div = ig_div_of(q.nq);
    q.qx_div = ig_div_of(x.nq);
    q.csy = y.cs; q.cy0 = y.c0; q.csx = x.cs; q.cx0 = x.c0;
    q.nt = y.nt; q.nu = x.nt; q.tys = y.ts; q.txs = x.ts;
    q.u_div = ig_div_of(x.nt);
    q.tu_div = ig_div_of((long long)y.nt * x.nt);
    q.t0 = y.t0; q.at = y.at; q.u0 = x.t0; q.au = x.at;
    /* k + 1 moves the weight offset by au; when u wraps by at*kw - (nu-1)*au
     * in all (au + a_dt); when t wraps too by wc - (nt-1)*at*kw - (nu-1)*au */
    q.a_dt = q.at * kw - q.nu * q.au;
    q.a_dc = wc - q.nt * q.at * kw;
    q.dsy = y.ds; q.dy0 = y.d0; q.dsx = x.ds; q.dx0 = x.d0;
    return q;
}

/* out[nn, g*M + m, position of column] = sum_k A(m, k) B(k, column):
 *   A(m, (kc, t, u)) = wt[g*wg + m*wm + kc*wc + (t0 + t*at)*kw + u0 + u*au]
 *   B((kc, t, u), (nn, qy, qx)) = src[nn, g*kchan + kc, qy*csy + cy0 + t*tys, qx*csx + cx0 + u*txs]
 * with src [n, src_c, src_h, src_w] (0 outside), dst [n, dst_c, dst_hw]; one
 * class per blockIdx.z, (column tile, group) in blockIdx.x */
struct ig_gather {
    const float *src, *wt;
    float       *dst;
    int          n, M, kchan, groups, col_tiles, n_cls;
    int          src_c, src_h, src_w, dst_c, dst_hw, dst_w;
    int          wg, wm, wc, kw;
    ig_class     cls[IG_MAX_CLASSES];
};

/* one thread's loader state and its part of the slice (gather GEMM);
 * ONE: the launch has one class, whose fields are then at fixed offsets of
 * the parameters (no indexed load) */
template <int BM, int BN, bool ONE> struct ig_gather_thread {
    static constexpr int AE = BM * IG_BK / IG_THREADS; /* A: consecutive k of one row */
    static constexpr int BE = BN / 32;                 /* B: columns lane + 32 j of the warp's k row */
    int   tid, g, m0, col0, ncols, kend, cls;
    int   a_row, a_k, a_base;                 /* a_row < M: weight offset of (g, a_row) */

    __host__ __device__ const ig_class &cl(const ig_gather &a) const { return a.cls[ONE ? 0 : cls]; }

    int   b_off[BE], b_y[BE], b_x[BE];        /* column: src offset of (image, channel g*kchan, y, x); y, x */
    float a_reg[AE], b_reg[BE];

    /* false for a block past its class's columns (the whole block returns) */
    __host__ __device__ bool init(const ig_gather &a, int t, int bx, int by, int bz) {
        tid = t;
        cls = bz;
        const ig_class &q = cl(a);
        g = bx / a.col_tiles;
        col0 = (bx - g * a.col_tiles) * BN;
        m0 = by * BM;
        ncols = a.n * q.nq;
        kend = a.kchan * q.nt * q.nu;
        if (col0 >= ncols) return false;
        a_row = m0 + tid / (IG_BK / AE);
        a_k = tid % (IG_BK / AE) * AE;
        a_base = g * a.wg + a_row * a.wm;
        int src_hw = a.src_h * a.src_w;
IG_UNROLL
        for (int j = 0; j < BE; j++) {
            int col = col0 + tid % 32 + 32 * j;
            if (col < ncols) {
                int nn = ig_quot(q.q_div, col), r = col - nn * q.nq;
                int qy = ig_quot(q.qx_div, r), qx = r - qy * q.nqx;
                b_y[j] = qy * q.csy + q.cy0;
                b_x[j] = qx * q.csx + q.cx0;
                b_off[j] = (nn * a.src_c + g * a.kchan) * src_hw + b_y[j] * a.src_w + b_x[j];
            } else {
                b_y[j] = IG_SENTINEL;
                b_x[j] = 0;
                b_off[j] = 0;
            }
        }
        return true;
    }

    /* registers <- the slice starting at k0 */
    __host__ __device__ void fetch(const ig_gather &a, int k0) {
        const ig_class &q = cl(a);
        int k = k0 + a_k;
        int kc = ig_quot(q.tu_div, k), r = k - kc * q.nt * q.nu;
        int t = ig_quot(q.u_div, r), u = r - t * q.nu;
        int off = a_base + kc * a.wc + (q.t0 + t * q.at) * a.kw + q.u0 + u * q.au;
        bool row_ok = a_row < a.M;
IG_UNROLL
        for (int e = 0; e < AE; e++) {
            a_reg[e] = row_ok && k + e < kend ? ig_load(a.wt + off) : 0.0f;
            off += q.au; /* to k + e + 1 */
            bool wrap_u = ++u == q.nu;
            u = wrap_u ? 0 : u;
            t += wrap_u;
            off += wrap_u ? q.a_dt : 0;
            bool wrap_t = t == q.nt;
            t = wrap_t ? 0 : t;
            off += wrap_t ? q.a_dc : 0;
        }
        k = k0 + tid / 32;
        int koff = 0, dy = IG_SENTINEL, dx = 0;
        if (k < kend) {
            kc = ig_quot(q.tu_div, k);
            r = k - kc * q.nt * q.nu;
            t = ig_quot(q.u_div, r);
            u = r - t * q.nu;
            dy = t * q.tys;
            dx = u * q.txs;
            koff = kc * a.src_h * a.src_w + dy * a.src_w + dx;
        }
IG_UNROLL
        for (int j = 0; j < BE; j++) {
            int iy = b_y[j] + dy, ix = b_x[j] + dx;
            bool ok = (unsigned)iy < (unsigned)a.src_h && (unsigned)ix < (unsigned)a.src_w;
            b_reg[j] = ok ? ig_load(a.src + b_off[j] + koff) : 0.0f;
        }
    }

    __host__ __device__ void stash(ig_smem<BM, BN> &s, int buf) const {
IG_UNROLL
        for (int e = 0; e < AE; e++) s.a[buf][a_k + e][tid / (IG_BK / AE)] = a_reg[e];
IG_UNROLL
        for (int j = 0; j < BE; j++) s.b[buf][tid / 32][tid % 32 + 32 * j] = b_reg[j];
    }

    __host__ __device__ void store(const ig_gather &a, const float (&acc)[BM / 16][BN / 16]) const {
        const ig_class &q = cl(a);
IG_UNROLL
        for (int j = 0; j < BN / 16; j++) {
            int col = col0 + ig_out_col(tid, j);
            if (col >= ncols) continue;
            int nn = ig_quot(q.q_div, col), r = col - nn * q.nq;
            int qy = ig_quot(q.qx_div, r), qx = r - qy * q.nqx;
            int off = nn * a.dst_c * a.dst_hw + (qy * q.dsy + q.dy0) * a.dst_w + qx * q.dsx + q.dx0;
IG_UNROLL
            for (int i = 0; i < BM / 16; i++) {
                int m = m0 + ig_out_row(tid, i);
                if (m < a.M) a.dst[off + (g * a.M + m) * a.dst_hw] = acc[i][j];
            }
        }
    }
};

/* ---- backward_weight: split-K over the positions ---- */

/* out[s][g*og + m][col] = sum over k in split s of dy[nn, g*og+m, p] x[...]
 * (k = nn*oh*ow + p); out is dw when S = 1, else the scratch's partials */
struct ig_weight {
    const float *dy, *x;
    float       *out;
    int          c, h, w, o, ohow, ow, sh, sw, ph, pw, dh, dw, kw;
    int          og, cg, ncols, col_tiles, L, klen;
    ig_div       khkw_div, kw_div, ohow_div, ow_div;
};

template <int BM, int BN> struct ig_weight_thread {
    static constexpr int AE = BM * IG_BK / IG_THREADS; /* A: consecutive positions of one dy row */
    static constexpr int BE = BN / 32;                 /* B: k = lane % 8, columns lane/8 + 4 warp + 32 j */
    int   tid, g, m0, col0, split, kbeg, kend;
    int   a_row, a_k, a_base;                 /* dy offset of (image 0, channel g*og + a_row) */
    /* column (ci, ki, kj): x offset of (image 0, g*cg+ci, ki*dh, kj*dw); ki*dh, kj*dw */
    int   b_off[BE], b_y[BE], b_x[BE];
    float a_reg[AE], b_reg[BE];

    __host__ __device__ int b_col(int j) const { return tid % 32 / 8 + 4 * (tid / 32) + 32 * j; }

    __host__ __device__ bool init(const ig_weight &a, int t, int bx, int by, int bz) {
        tid = t;
        split = bz;
        g = bx / a.col_tiles;
        col0 = (bx - g * a.col_tiles) * BN;
        m0 = by * BM;
        kbeg = split * a.klen;
        kend = a.L - kbeg < a.klen ? a.L : kbeg + a.klen;
        a_row = m0 + tid / (IG_BK / AE);
        a_k = tid % (IG_BK / AE) * AE;
        a_base = (g * a.og + a_row) * a.ohow;
        int khkw = (int)a.khkw_div.d;
IG_UNROLL
        for (int j = 0; j < BE; j++) {
            int col = col0 + b_col(j);
            if (col < a.ncols) {
                int ci = ig_quot(a.khkw_div, col), r = col - ci * khkw;
                int ki = ig_quot(a.kw_div, r), kj = r - ki * a.kw;
                b_y[j] = ki * a.dh;
                b_x[j] = kj * a.dw;
                b_off[j] = (g * a.cg + ci) * a.h * a.w + b_y[j] * a.w + b_x[j];
            } else {
                b_y[j] = IG_SENTINEL;
                b_x[j] = 0;
                b_off[j] = 0;
            }
        }
        return true;
    }

    __host__ __device__ void fetch(const ig_weight &a, int k0) {
        int k = k0 + a_k;
        int nn = ig_quot(a.ohow_div, k), p = k - nn * a.ohow;
IG_UNROLL
        for (int e = 0; e < AE; e++) {
            bool ok = a_row < a.og && k + e < kend;
            a_reg[e] = ok ? ig_load(a.dy + nn * a.o * a.ohow + a_base + p) : 0.0f;
            if (++p == a.ohow) {
                p = 0;
                nn++;
            }
        }
        k = k0 + tid % 8;
        int kb = 0, yy = IG_SENTINEL, xx = 0;
        if (k < kend) {
            nn = ig_quot(a.ohow_div, k);
            p = k - nn * a.ohow;
            int oy = ig_quot(a.ow_div, p), ox = p - oy * a.ow;
            yy = oy * a.sh - a.ph;
            xx = ox * a.sw - a.pw;
            kb = nn * a.c * a.h * a.w + yy * a.w + xx;
        }
IG_UNROLL
        for (int j = 0; j < BE; j++) {
            int iy = yy + b_y[j], ix = xx + b_x[j];
            bool ok = (unsigned)iy < (unsigned)a.h && (unsigned)ix < (unsigned)a.w;
            b_reg[j] = ok ? ig_load(a.x + kb + b_off[j]) : 0.0f;
        }
    }

    __host__ __device__ void stash(ig_smem<BM, BN> &s, int buf) const {
IG_UNROLL
        for (int e = 0; e < AE; e++) s.a[buf][a_k + e][tid / (IG_BK / AE)] = a_reg[e];
IG_UNROLL
        for (int j = 0; j < BE; j++) s.b[buf][tid % 8][b_col(j)] = b_reg[j];
    }

    __host__ __device__ void store(const ig_weight &a, const float (&acc)[BM / 16][BN / 16]) const {
        float *out = a.out + (long long)split * a.o * a.ncols;
IG_UNROLL
        for (int i = 0; i < BM / 16; i++) {
            int m = m0 + ig_out_row(tid, i);
            if (m >= a.og) continue;
IG_UNROLL
            for (int j = 0; j < BN / 16; j++) {
                int col = col0 + ig_out_col(tid, j);
                if (col < a.ncols) out[(g * a.og + m) * a.ncols + col] = acc[i][j];
            }
        }
    }
};

/* ---- the kernels: the slice loop is the same for every loader ---- */

template <int BM, int BN, class Thread, class Args>
__device__ __forceinline__ void ig_block(const Args &a, ig_smem<BM, BN> &sm, int kbeg, Thread &t) {
    float acc[BM / 16][BN / 16];
IG_UNROLL
    for (int i = 0; i < BM / 16; i++)
IG_UNROLL
        for (int j = 0; j < BN / 16; j++) acc[i][j] = 0.0f;
    if (kbeg < t.kend) {
        t.fetch(a, kbeg);
        t.stash(sm, 0);
        __syncthreads();
        int buf = 0;
        for (int k0 = kbeg; k0 < t.kend; k0 += IG_BK) {
            bool more = k0 + IG_BK < t.kend;
            if (more) t.fetch(a, k0 + IG_BK); /* in flight during the FMAs */
            ig_fma<BM, BN>(sm, buf, t.tid, acc);
            if (more) t.stash(sm, buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }
    t.store(a, acc);
}

/* 128x128 and 64x128 tiles hold 64 and 32 accumulators a thread: two
 * blocks an SM (128 registers a thread); 64x64 (16) three (85: at four,
 * 64 registers, the loaders spill) */
template <int BM, int BN> struct ig_occupancy { static constexpr int blocks = BM * BN >= 64 * 128 ? 2 : 3; };

template <int BM, int BN, bool ONE>
__global__ void __launch_bounds__(IG_THREADS, ig_occupancy<BM, BN>::blocks)
    k_conv_gather(const __grid_constant__ ig_gather a) {
    __shared__ __align__(16) ig_smem<BM, BN> sm;
    ig_gather_thread<BM, BN, ONE> t;
    if (!t.init(a, threadIdx.x, blockIdx.x, blockIdx.y, blockIdx.z)) return; /* the whole block */
    ig_block<BM, BN>(a, sm, 0, t);
}

template <int BM, int BN>
__global__ void __launch_bounds__(IG_THREADS, ig_occupancy<BM, BN>::blocks)
    k_conv_weight(const __grid_constant__ ig_weight a) {
    __shared__ __align__(16) ig_smem<BM, BN> sm;
    ig_weight_thread<BM, BN> t;
    t.init(a, threadIdx.x, blockIdx.x, blockIdx.y, blockIdx.z);
    ig_block<BM, BN>(a, sm, t.kbeg, t);
}

/* dw[i] = sum over s = 0..splits-1 of part[s][i], in that order */
__global__ void k_sum_splits(const float *__restrict__ part, float *__restrict__ dw, int n, int splits) {
    GRID_STRIDE(i, n) {
        float acc = 0.0f;
        for (int s = 0; s < splits; s++) acc += part[(long long)s * n + i];
        dw[i] = acc;
    }
}

/* ---- host side ---- */

enum ig_tile { IG_128x128, IG_64x128, IG_64x64, IG_N_TILES };
static const int ig_tile_dims[IG_N_TILES][2] = {{128, 128}, {64, 128}, {64, 64}};

static int ig_tile_blocks_per_sm(ig_tile t) {
    switch (t) {
    case IG_128x128: return ig_occupancy<128, 128>::blocks;
    case IG_64x128:  return ig_occupancy<64, 128>::blocks;
    case IG_64x64:   return ig_occupancy<64, 64>::blocks;
    case IG_N_TILES: break;
    }
    return 1;
}

static long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/* One GEMM of a launch: `cols` columns, reduction length k (M rows, every
 * group) */
struct ig_problem {
    long long cols, k;
};

/* The tile for problems 0..n-1 (problem(i) -> ig_problem) of M rows in
 * each of `groups`: the least estimated time. Blocks spread evenly over the
 * SMs; an SM takes its share of blocks times a block's work (BM*BN*k, k
 * averaged over the blocks) over the tile's FLOP rate relative to 128x128
 * (measured on an H100 on ResNet layers: 64x128 0.9, 64x64 0.72); and no
 * less than one block of the longest reduction (backward_data's classes
 * differ in taps). This picks, on the ResNet-18 layers, the fastest tile or
 * one within 1% of it: 64x128 for 64 rows or few columns, else 128x128. */
template <class Problem>
static ig_tile pick_tile(const gpu_ctx *c, long long M, long long groups, long long n, Problem problem) {
    static const double efficiency[IG_N_TILES] = {1.0, 0.9, 0.72};
    ig_tile best = IG_64x128;
    double best_cost = -1.0;
    for (int t = 0; t < IG_N_TILES; t++) {
        long long bm = ig_tile_dims[t][0], bn = ig_tile_dims[t][1];
        if (bm > 64 && M <= 64) continue; /* half the tile's rows would be empty */
        double blocks = 0.0, work = 0.0, longest = 0.0;
        for (long long i = 0; i < n; i++) {
            ig_problem p = problem(i);
            double b = (double)(ceil_div(M, bm) * ceil_div(p.cols, bn) * groups);
            blocks += b;
            work += b * (double)p.k;
            longest = p.cols > 0 && (double)p.k > longest ? (double)p.k : longest;
        }
        if (blocks == 0.0) return best;
        double per_sm = ceil(blocks / c->prop.multiProcessorCount) * work / blocks;
        double cost = (per_sm > longest ? per_sm : longest) * (double)(bm * bn) / efficiency[t];
        if (best_cost < 0.0 || cost < best_cost) {
            best = (ig_tile)t;
            best_cost = cost;
        }
    }
    return best;
}

template <int BM, int BN>
static dg_status launch_gather_tile(gpu_ctx *c, const ig_gather &a, long long max_cols) {
    ig_gather args = a;
    args.col_tiles = (int)ceil_div(max_cols, BN);
    dim3 grid((unsigned)(args.col_tiles * args.groups), (unsigned)ceil_div(a.M, BM), (unsigned)a.n_cls);
    if (a.n_cls == 1) k_conv_gather<BM, BN, true><<<grid, IG_THREADS, 0, c->stream>>>(args);
    else k_conv_gather<BM, BN, false><<<grid, IG_THREADS, 0, c->stream>>>(args);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

static dg_status launch_gather(gpu_ctx *c, const ig_gather &a, ig_tile tile) {
    long long max_cols = 0;
    for (int i = 0; i < a.n_cls; i++) max_cols = a.cls[i].nq > max_cols ? a.cls[i].nq : max_cols;
    max_cols *= a.n;
    if (max_cols == 0) return DG_OK; /* no class has a position (no launch of an empty grid) */
    switch (tile) {
    case IG_128x128: return launch_gather_tile<128, 128>(c, a, max_cols);
    case IG_64x128:  return launch_gather_tile<64, 128>(c, a, max_cols);
    case IG_64x64:   return launch_gather_tile<64, 64>(c, a, max_cols);
    case IG_N_TILES: break;
    }
    return dg__fail(DG_ERR_INVALID, "gpu: implicit convolution: no tile %d", (int)tile);
}

/* every tensor the kernels index (x, y, w) below 2^31 elements, every
 * position, padding and tap span below 2^28, every grid axis in range */
bool dg__gpu_conv_implicit_fits(const dg_node *nd) {
    dg_conv_dims d = dg_conv_dims_of(nd);
    long long big = d.c > d.o ? d.c : d.o;
    long long cols = d.n * (d.h * d.w > d.oh * d.ow ? d.h * d.w : d.oh * d.ow);
    const long long geo[] = {d.h, d.w, d.oh, d.ow, d.ph, d.pw, d.sh, d.sw, d.kh * d.dh, d.kw * d.dw};
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++)
        if (geo[i] >= IG_GEOMETRY_MAX) return false;
    return d.n * d.c * d.h * d.w <= INT_MAX && d.n * d.o * d.oh * d.ow <= INT_MAX &&
           d.o * d.cg * d.kh * d.kw <= INT_MAX && ceil_div(big, 64) <= 65535 &&
           (ceil_div(cols, 64) + 1) * d.groups <= INT_MAX &&
           (ceil_div(d.cg * d.kh * d.kw, 64) + 1) * d.groups <= INT_MAX;
}

/* the gather GEMM of conv2d (one class) */
static ig_gather gather_forward(const dg_conv_dims &d, const float *x, const float *w, float *y) {
    ig_gather a = {};
    a.src = x; a.wt = w; a.dst = y;
    a.n = (int)d.n; a.M = (int)d.og; a.kchan = (int)d.cg; a.groups = (int)d.groups;
    a.src_c = (int)d.c; a.src_h = (int)d.h; a.src_w = (int)d.w;
    a.dst_c = (int)d.o; a.dst_hw = (int)(d.oh * d.ow); a.dst_w = (int)d.ow;
    long long k = d.cg * d.kh * d.kw;
    a.wg = (int)(d.og * k); a.wm = (int)k; a.wc = (int)(d.kh * d.kw); a.kw = (int)d.kw;
    a.n_cls = 1;
    a.cls[0] = class_of(axis_forward(d.oh, d.kh, d.sh, d.ph, d.dh), axis_forward(d.ow, d.kw, d.sw, d.pw, d.dw), a.wc,
                        a.kw);
    return a;
}

/* the gather GEMMs of backward_data without their classes */
static ig_gather gather_backward(const dg_conv_dims &d, const float *dy, const float *w, float *dx) {
    ig_gather a = {};
    a.src = dy; a.wt = w; a.dst = dx;
    a.n = (int)d.n; a.M = (int)d.cg; a.kchan = (int)d.og; a.groups = (int)d.groups;
    a.src_c = (int)d.o; a.src_h = (int)d.oh; a.src_w = (int)d.ow;
    a.dst_c = (int)d.c; a.dst_hw = (int)(d.h * d.w); a.dst_w = (int)d.w;
    long long khkw = d.kh * d.kw;
    a.wg = (int)(d.og * d.cg * khkw); a.wm = (int)khkw; a.wc = (int)(d.cg * khkw); a.kw = (int)d.kw;
    return a;
}

/* (x [n,c,h,w], w [o,cg,kh,kw]) -> y [n,o,oh,ow] */
dg_status dg__gpu_conv2d_implicit(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    ig_gather a = gather_forward(d, (const float *)s->in[0], (const float *)s->in[1], (float *)s->out);
    ig_problem p = {d.n * d.oh * d.ow, d.cg * d.kh * d.kw};
    return launch_gather(c, a, pick_tile(c, d.og, d.groups, 1, [&](long long) { return p; }));
}

/* (dy [n,o,oh,ow], w [o,cg,kh,kw]) -> dx [n,c,h,w], every element written:
 * the classes cover every position, a class without taps writes zeros */
dg_status dg__gpu_conv2d_backward_data_implicit(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    ig_gather a = gather_backward(d, (const float *)s->in[0], (const float *)s->in[1], (float *)s->out);
    long long classes = d.sh * d.sw;
    /* one tile for every launch: the classes together */
    ig_tile tile = pick_tile(c, d.cg, d.groups, classes, [&](long long i) {
        ig_axis y = axis_backward(i / d.sw, d.h, d.kh, d.sh, d.ph, d.dh);
        ig_axis x = axis_backward(i % d.sw, d.w, d.kw, d.sw, d.pw, d.dw);
        return ig_problem{d.n * y.nq * x.nq, d.og * y.nt * x.nt};
    });
    for (long long first = 0; first < classes; first += IG_MAX_CLASSES) {
        a.n_cls = (int)(classes - first < IG_MAX_CLASSES ? classes - first : IG_MAX_CLASSES);
        for (int i = 0; i < a.n_cls; i++) {
            long long ry = (first + i) / d.sw, rx = (first + i) % d.sw;
            a.cls[i] = class_of(axis_backward(ry, d.h, d.kh, d.sh, d.ph, d.dh),
                                axis_backward(rx, d.w, d.kw, d.sw, d.pw, d.dw), a.wc, a.kw);
        }
        dg_status st = launch_gather(c, a, tile);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

/* Split count of backward_weight: the blocks (tiles * splits) fill whole
 * waves of the SMs' slots, the fewest waves that are at least 90% full (a
 * block beyond a full wave runs alone for a block's whole length: on an
 * H100, 53 splits of 5 tiles, 265 blocks for 264 slots, took 1.43 times as
 * long as 52 splits). Each split is at least 32 slices long, and the
 * partials fit the scratch (without scratch, one split writes dw itself);
 * a bound reached first is taken as it is. */
static long long weight_splits(const gpu_ctx *c, const dg_conv_dims &d, ig_tile tile, size_t scratch_bytes) {
    long long ncols = d.cg * d.kh * d.kw, L = d.n * d.oh * d.ow, out = d.o * ncols;
    long long tiles = ceil_div(d.og, ig_tile_dims[tile][0]) * ceil_div(ncols, ig_tile_dims[tile][1]) * d.groups;
    long long slots = (long long)ig_tile_blocks_per_sm(tile) * c->prop.multiProcessorCount;
    long long cap = L / (32 * IG_BK), by_scratch = (long long)(scratch_bytes / sizeof(float)) / out;
    cap = by_scratch < cap ? by_scratch : cap;
    cap = cap < 65535 ? cap : 65535;
    cap = cap < INT_MAX / out ? cap : INT_MAX / out;
    if (cap <= 1) return 1;
    const int most_waves = 8;
    for (int waves = 1; waves <= most_waves; waves++) {
        long long s = waves * slots / tiles;
        if (s < 1) continue;
        if (s >= cap) return cap;
        long long blocks = tiles * s;
        if (blocks * 10 >= ceil_div(blocks, slots) * slots * 9) return s;
    }
    long long s = most_waves * slots / tiles;
    return s < 1 ? 1 : s;
}

template <int BM, int BN>
static dg_status launch_weight_tile(gpu_ctx *c, const ig_weight &a, long long splits, int groups) {
    ig_weight args = a;
    args.col_tiles = (int)ceil_div(a.ncols, BN);
    dim3 grid((unsigned)(args.col_tiles * groups), (unsigned)ceil_div(a.og, BM), (unsigned)splits);
    k_conv_weight<BM, BN><<<grid, IG_THREADS, 0, c->stream>>>(args);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* backward_weight with a given tile and split count; splits > 1 needs
 * splits * o * cg*kh*kw floats of scratch */
static dg_status launch_weight(gpu_ctx *c, const dg_conv_dims &d, const float *dy, const float *x, float *dw,
                               float *scratch, ig_tile tile, long long splits) {
    ig_weight a;
    a.dy = dy; a.x = x; a.out = splits > 1 ? scratch : dw;
    a.c = (int)d.c; a.h = (int)d.h; a.w = (int)d.w; a.o = (int)d.o;
    a.ohow = (int)(d.oh * d.ow); a.ow = (int)d.ow;
    a.sh = (int)d.sh; a.sw = (int)d.sw; a.ph = (int)d.ph; a.pw = (int)d.pw;
    a.dh = (int)d.dh; a.dw = (int)d.dw; a.kw = (int)d.kw;
    a.og = (int)d.og; a.cg = (int)d.cg; a.ncols = (int)(d.cg * d.kh * d.kw);
    a.col_tiles = 0;
    a.L = (int)(d.n * d.oh * d.ow);
    a.klen = (int)(ceil_div(ceil_div(a.L, splits), IG_BK) * IG_BK);
    a.khkw_div = ig_div_of(d.kh * d.kw);
    a.kw_div = ig_div_of(d.kw);
    a.ohow_div = ig_div_of(a.ohow);
    a.ow_div = ig_div_of(d.ow);
    dg_status st = DG_OK;
    switch (tile) {
    case IG_128x128: st = launch_weight_tile<128, 128>(c, a, splits, (int)d.groups); break;
    case IG_64x128:  st = launch_weight_tile<64, 128>(c, a, splits, (int)d.groups); break;
    case IG_64x64:   st = launch_weight_tile<64, 64>(c, a, splits, (int)d.groups); break;
    case IG_N_TILES: return dg__fail(DG_ERR_INVALID, "gpu: implicit convolution: no tile %d", (int)tile);
    }
    if (st != DG_OK || splits == 1) return st;
    int total = (int)(d.o * a.ncols);
    k_sum_splits<<<grid_for(total, 256), 256, 0, c->stream>>>(scratch, dw, total, (int)splits);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* backward_weight's tile: the split count, not the tile, fills the SMs, so
 * the largest tile that fits */
static ig_tile weight_tile(const dg_conv_dims &d) {
    long long ncols = d.cg * d.kh * d.kw;
    return d.og <= 64 ? (ncols <= 64 ? IG_64x64 : IG_64x128) : IG_128x128;
}

/* With the implicit kernels selected: no columns for the forward and
 * backward-data, and for backward-weight the partials of the split count
 * that the im2col columns' room would allow (so the split, and the result,
 * are those of a plan that reserved the columns). Else the columns. */
size_t dg__gpu_conv_scratch_bytes(const gpu_ctx *c, const dg_node *n, dg_gpu_conv impl) {
    size_t cols = dg_node_scratch_bytes(n);
    if (impl != DG_GPU_CONV_IMPLICIT || !dg__gpu_conv_implicit_fits(n)) return cols;
    if (n->op != DG_OP_CONV2D_BACKWARD_WEIGHT) return 0;
    dg_conv_dims d = dg_conv_dims_of(n);
    long long splits = weight_splits(c, d, weight_tile(d), cols);
    return splits > 1 ? (size_t)splits * (size_t)(d.o * d.cg * d.kh * d.kw) * sizeof(float) : 0;
}

/* (dy [n,o,oh,ow], x [n,c,h,w]) -> dw [o,cg,kh,kw] */
dg_status dg__gpu_conv2d_backward_weight_implicit(gpu_ctx *c, const dg_step *s) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    ig_tile tile = weight_tile(d);
    /* the room the plan reserved (the columns, or what the line above asks) */
    size_t scratch_bytes = s->scratch ? dg__gpu_conv_scratch_bytes(c, s->node, DG_GPU_CONV_IMPLICIT) : 0;
    return launch_weight(c, d, (const float *)s->in[0], (const float *)s->in[1], (float *)s->out,
                         (float *)s->scratch, tile, weight_splits(c, d, tile, scratch_bytes));
}
