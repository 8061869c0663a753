/* cpu_attention.c: fused attention on the CPU, by tiles of ATT_TILE query
 * rows and ATT_TILE keys, so the score matrix [T, T] is never stored: the
 * forward streams the key tiles through an online softmax (running max m
 * and sum l per row, the output rescaled when the max grows) and saves
 * each row's log-sum-exp; the backward recomputes P = exp(S - lse) tile by
 * tile, in two passes that each own what they write (key tiles: dK, dV;
 * query tiles: dQ), so the result is the same bits on every run.
 *
 * Tensors [B,H,T,Dh] row-major: head h of batch b is the [T, Dh] matrix at
 * offset (b H + h) T Dh. The tile products go to OpenBLAS, called from
 * inside the OpenMP loop over (head, tile) pairs (its OpenMP build then
 * runs each call on the calling thread). Each thread works in its own
 * slice of the backend's attention workspace (dg__cpu_attention_work_floats
 * per thread, allocated with the backend).
 *
 * bf16 and f16 (the node's dtype; the log-sum-exp stays float32): each
 * tile of q, k, v, dout is widened (exactly) into the workspace, all the
 * arithmetic is float32, and what the GPU's 16-bit kernels round is
 * rounded here too, so this is their reference path: P to the dtype
 * before P V and P^T dO (the row sum l from P unrounded), dS before dS K
 * and dS^T Q, and o, dq, dk, dv on store (to nearest even). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../core/attrs.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"

#define ATT_TILE 64

#define ATT_ROWS (ATT_TILE * DG_ATTENTION_MAX_HEAD) /* one tile of rows [tile, Dh max] */

size_t dg__cpu_attention_work_floats(void) {
    /* S or P, dP or dS [tile, tile]; two accumulators, m, l; the 16-bit
     * inputs' tiles widened: q, k, v, dout (forward: the output's rows) */
    return 2 * ATT_TILE * ATT_TILE + 2 * ATT_ROWS + 2 * ATT_TILE + 4 * ATT_ROWS;
}

typedef struct att_dims {
    int64_t  heads, t, dh, tiles;
    float    scale;
    bool     causal;
    dg_dtype type; /* of q, k, v, the output and the gradients */
} att_dims;

static att_dims att_dims_of(const dg_node *n, const dg_node *q) {
    dg_attr_attention a = dg_attr_attention_of(n);
    att_dims d = {q->shape.d[0] * q->shape.d[1], q->shape.d[2], q->shape.d[3], 0, a.scale, a.causal, q->dtype};
    d.tiles = (d.t + ATT_TILE - 1) / ATT_TILE;
    return d;
}

/* rows [r0, r0 + n) of head `off` of x (the dtype's storage) as float32:
 * x's own floats, or widened into buf [tile, Dh max] */
static const float *rows_of(const att_dims *d, const void *x, int64_t off, int64_t r0, int n, float *buf) {
    return dg__lp_load(d->type, x, off + r0 * d->dh, n * d->dh, buf);
}

/* n floats of buf into x from element off, rounded to the dtype */
static void store_rows(const att_dims *d, void *x, int64_t off, int64_t n, const float *buf) {
    if (d->type == DG_F32) memcpy((float *)x + off, buf, (size_t)n * sizeof *buf);
    else dg__cvt_narrow(d->type, buf, (uint16_t *)x + off, n);
}

/* x [n] rounded to the 16-bit dtype (a value the tensor cores would read);
 * nothing for float32 */
static void round_to_type(const att_dims *d, float *x, int64_t n) {
    if (d->type == DG_BF16)
        for (int64_t i = 0; i < n; i++) x[i] = dg__bf16_to_f32(dg__f32_to_bf16(x[i]));
    else if (d->type == DG_F16)
        for (int64_t i = 0; i < n; i++) x[i] = dg__f16_to_f32(dg__f32_to_f16(x[i]));
}

/* S [rq, rk] = scale q k^T of a query tile q [rq, Dh] (rows from i0) and a
 * key tile k [rk, Dh] (from j0); masked entries (key > query) -inf */
static void scores(const att_dims *d, const float *q, const float *k, int64_t i0, int rq, int64_t j0, int rk,
                   float *s) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rq, rk, (int)d->dh, d->scale, q, (int)d->dh, k, (int)d->dh,
                0.0f, s, rk);
    if (!d->causal || j0 + rk - 1 <= i0) return;
    for (int r = 0; r < rq; r++)
        for (int c = 0; c < rk; c++)
            if (j0 + c > i0 + r) s[r * rk + c] = -INFINITY;
}

/* the key tiles a query tile [i0, i0 + rq) sees */
static int64_t key_tiles_for(const att_dims *d, int64_t i0, int rq) {
    return d->causal ? (i0 + rq - 1) / ATT_TILE + 1 : d->tiles;
}

void dg__cpu_attention(const dg_step *s, float *work) {
    att_dims d = att_dims_of(s->node, s->node->in[0]);
    const void *Q = s->in[0], *K = s->in[1], *V = s->in[2];
    void *O = s->out;
    float *LSE = s->side[0];
    int64_t pairs = d.heads * d.tiles;
#pragma omp parallel
    {
        float *S = work + (size_t)omp_get_thread_num() * dg__cpu_attention_work_floats();
        float *acc = S + 2 * ATT_TILE * ATT_TILE, *m = acc + 2 * ATT_ROWS, *l = m + ATT_TILE;
        float *qb = l + ATT_TILE, *kb = qb + ATT_ROWS, *vb = kb + ATT_ROWS, *ob = vb + ATT_ROWS;
#pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < pairs; p++) {
            int64_t h = p / d.tiles, i0 = p % d.tiles * ATT_TILE, off = h * d.t * d.dh;
            int rq = (int)(d.t - i0 < ATT_TILE ? d.t - i0 : ATT_TILE);
            const float *q = rows_of(&d, Q, off, i0, rq, qb);
            memset(acc, 0, (size_t)rq * (size_t)d.dh * sizeof *acc);
            for (int r = 0; r < rq; r++) { m[r] = -INFINITY; l[r] = 0; }
            for (int64_t jt = 0, nk = key_tiles_for(&d, i0, rq); jt < nk; jt++) {
                int64_t j0 = jt * ATT_TILE;
                int rk = (int)(d.t - j0 < ATT_TILE ? d.t - j0 : ATT_TILE);
                scores(&d, q, rows_of(&d, K, off, j0, rk, kb), i0, rq, j0, rk, S);
                for (int r = 0; r < rq; r++) { /* online softmax: S becomes P */
                    float *sr = S + r * rk, mx = m[r];
                    for (int c = 0; c < rk; c++) mx = sr[c] > mx ? sr[c] : mx;
                    if (mx == -INFINITY) continue; /* nothing unmasked yet: P stays 0 */
                    float corr = expf(m[r] - mx), sum = 0;
                    for (int c = 0; c < rk; c++) { sr[c] = expf(sr[c] - mx); sum += sr[c]; }
                    l[r] = l[r] * corr + sum;
                    m[r] = mx;
                    for (int64_t c = 0; c < d.dh; c++) acc[r * d.dh + c] *= corr;
                }
                for (int r = 0; r < rq; r++) /* rows still fully masked: no NaN into the product */
                    if (m[r] == -INFINITY) memset(S + r * rk, 0, (size_t)rk * sizeof *S);
                round_to_type(&d, S, (int64_t)rq * rk);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rq, (int)d.dh, rk, 1.0f, S, rk,
                            rows_of(&d, V, off, j0, rk, vb), (int)d.dh, 1.0f, acc, (int)d.dh);
            }
            float *o = dg__lp_dst(d.type, O, off + i0 * d.dh, ob); /* float32: O's own rows */
            for (int r = 0; r < rq; r++) {
                float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
                for (int64_t c = 0; c < d.dh; c++) o[r * d.dh + c] = acc[r * d.dh + c] * inv;
                LSE[h * d.t + i0 + r] = l[r] > 0 ? m[r] + logf(l[r]) : -INFINITY;
            }
            dg__lp_store(d.type, O, off + i0 * d.dh, (int64_t)rq * d.dh, o);
        }
    }
}

/* P = exp(S - lse) in place and dS = P * (dP - delta) for one tile pair:
 * q, dout [rq, Dh] (rows from i0), k, v [rk, Dh] (from j0), lse and delta
 * of the head; S, dP [rq, rk]. 16-bit: P and dS rounded to the dtype, the
 * operands of the products that follow. */
static void probs_and_dscores(const att_dims *d, const float *q, const float *k, const float *v, const float *dout,
                              const float *lse, const float *delta, int64_t i0, int rq, int64_t j0, int rk, float *P,
                              float *dS) {
    scores(d, q, k, i0, rq, j0, rk, P);
    for (int r = 0; r < rq; r++)
        for (int c = 0; c < rk; c++) P[r * rk + c] = expf(P[r * rk + c] - lse[i0 + r]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rq, rk, (int)d->dh, 1.0f, dout, (int)d->dh, v, (int)d->dh,
                0.0f, dS, rk);
    for (int r = 0; r < rq; r++)
        for (int c = 0; c < rk; c++) dS[r * rk + c] = P[r * rk + c] * (dS[r * rk + c] - delta[i0 + r]);
    round_to_type(d, P, (int64_t)rq * rk);
    round_to_type(d, dS, (int64_t)rq * rk);
}

void dg__cpu_attention_backward(const dg_step *s, float *work) {
    att_dims d = att_dims_of(s->node, s->node->in[1]);
    const void *dO = s->in[0], *Q = s->in[1], *K = s->in[2], *V = s->in[3], *O = s->in[4];
    const float *LSE = s->in[5];
    void *dQ = s->out, *dK = s->side[0], *dV = s->side[1];
    float *delta = s->scratch;
    int64_t rows = d.heads * d.t, pairs = d.heads * d.tiles;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) { /* delta_i = dO_i . O_i */
        float acc = 0;
        for (int64_t c = 0; c < d.dh; c++)
            acc += dg__lp_ld(d.type, dO, r * d.dh + c) * dg__lp_ld(d.type, O, r * d.dh + c);
        delta[r] = acc;
    }
#pragma omp parallel
    {
        float *P = work + (size_t)omp_get_thread_num() * dg__cpu_attention_work_floats();
        float *dS = P + ATT_TILE * ATT_TILE, *dk = dS + ATT_TILE * ATT_TILE, *dv = dk + ATT_ROWS;
        float *qb = dv + ATT_ROWS + 2 * ATT_TILE, *kb = qb + ATT_ROWS, *vb = kb + ATT_ROWS, *ob = vb + ATT_ROWS;
        /* pass 1, by key tiles: dV = P^T dO, dK = scale dS^T Q */
#pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < pairs; p++) {
            int64_t h = p / d.tiles, j0 = p % d.tiles * ATT_TILE, off = h * d.t * d.dh;
            int rk = (int)(d.t - j0 < ATT_TILE ? d.t - j0 : ATT_TILE);
            const float *k = rows_of(&d, K, off, j0, rk, kb), *v = rows_of(&d, V, off, j0, rk, vb);
            memset(dk, 0, (size_t)rk * (size_t)d.dh * sizeof *dk);
            memset(dv, 0, (size_t)rk * (size_t)d.dh * sizeof *dv);
            for (int64_t i0 = d.causal ? j0 : 0; i0 < d.t; i0 += ATT_TILE) {
                int rq = (int)(d.t - i0 < ATT_TILE ? d.t - i0 : ATT_TILE);
                const float *q = rows_of(&d, Q, off, i0, rq, qb), *g = rows_of(&d, dO, off, i0, rq, ob);
                probs_and_dscores(&d, q, k, v, g, LSE + h * d.t, delta + h * d.t, i0, rq, j0, rk, P, dS);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rk, (int)d.dh, rq, 1.0f, P, rk, g, (int)d.dh,
                            1.0f, dv, (int)d.dh);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rk, (int)d.dh, rq, d.scale, dS, rk, q,
                            (int)d.dh, 1.0f, dk, (int)d.dh);
            }
            store_rows(&d, dK, off + j0 * d.dh, (int64_t)rk * d.dh, dk);
            store_rows(&d, dV, off + j0 * d.dh, (int64_t)rk * d.dh, dv);
        }
        /* pass 2, by query tiles: dQ = scale dS K */
#pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < pairs; p++) {
            int64_t h = p / d.tiles, i0 = p % d.tiles * ATT_TILE, off = h * d.t * d.dh;
            int rq = (int)(d.t - i0 < ATT_TILE ? d.t - i0 : ATT_TILE);
            const float *q = rows_of(&d, Q, off, i0, rq, qb), *g = rows_of(&d, dO, off, i0, rq, ob);
            float *dq = dg__lp_dst(d.type, dQ, off + i0 * d.dh, dk);
            memset(dq, 0, (size_t)rq * (size_t)d.dh * sizeof *dq);
            for (int64_t jt = 0, nk = key_tiles_for(&d, i0, rq); jt < nk; jt++) {
                int64_t j0 = jt * ATT_TILE;
                int rk = (int)(d.t - j0 < ATT_TILE ? d.t - j0 : ATT_TILE);
                const float *k = rows_of(&d, K, off, j0, rk, kb);
                probs_and_dscores(&d, q, k, rows_of(&d, V, off, j0, rk, vb), g, LSE + h * d.t, delta + h * d.t, i0,
                                  rq, j0, rk, P, dS);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rq, (int)d.dh, rk, d.scale, dS, rk, k,
                            (int)d.dh, 1.0f, dq, (int)d.dh);
            }
            dg__lp_store(d.type, dQ, off + i0 * d.dh, (int64_t)rq * d.dh, dq);
        }
    }
}
