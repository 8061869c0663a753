/* attention_check.c: see attention_check.h. Plain double loops, one query
 * row at a time; the score row of T doubles is the only buffer. */
#include "core/check/attention_check.h"

#include "core/check/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/status.h"

static double dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* the unmasked keys of query i */
static int64_t keys_of(const att_dims *d, int64_t i) { return d->causal ? i + 1 : d->t; }

/* Query row r (of the [b*h*t, dh] view): p[0..keys) its probabilities,
 * its o (dh doubles) and its log-sum-exp; p holds T doubles. */
static double query_row(const att_dims *d, int64_t r, const float *q, const float *k, const float *v, double *p,
                        double *o) {
    const int64_t t = d->t, dh = d->dh, base = r / t * t, keys = keys_of(d, r % t);
    double m = -INFINITY, z = 0;
    for (int64_t j = 0; j < keys; j++) {
        p[j] = d->scale * dot(q + r * dh, k + (base + j) * dh, dh);
        m = fmax(m, p[j]);
    }
    for (int64_t j = 0; j < keys; j++) z += p[j] = exp(p[j] - m);
    for (int64_t c = 0; c < dh; c++) o[c] = 0;
    for (int64_t j = 0; j < keys; j++) {
        p[j] /= z;
        for (int64_t c = 0; c < dh; c++) o[c] += p[j] * v[(base + j) * dh + c];
    }
    return m + log(z);
}

/* dq of query row r from its probabilities p and its o */
static void query_dq(const att_dims *d, int64_t r, const float *k, const float *v, const float *dout, const double *p,
                     const double *o, double *dq) {
    const int64_t t = d->t, dh = d->dh, base = r / t * t, keys = keys_of(d, r % t);
    const float *g = dout + r * dh;
    double di = 0;
    for (int64_t c = 0; c < dh; c++) di += g[c] * o[c];
    for (int64_t c = 0; c < dh; c++) dq[c] = 0;
    for (int64_t j = 0; j < keys; j++) {
        double ds = p[j] * (dot(g, v + (base + j) * dh, dh) - di);
        for (int64_t c = 0; c < dh; c++) dq[c] += ds * k[(base + j) * dh + c];
    }
    for (int64_t c = 0; c < dh; c++) dq[c] *= d->scale;
}

/* n distinct values in [0, t): `edges` first (those < t), then random */
static int pick_rows(dg_rng *r, int64_t t, const int64_t *edges, int n_edges, int64_t *out, int n) {
    int got = 0;
    for (int e = 0; e < n_edges && got < n; e++) {
        bool seen = edges[e] >= t;
        for (int i = 0; i < got && !seen; i++) seen = out[i] == edges[e];
        if (!seen) out[got++] = edges[e];
    }
    for (int tries = 0; got < n && tries < 64 * n; tries++) {
        int64_t x = (int64_t)(dg_rng_u64(r) % (uint64_t)t);
        bool seen = false;
        for (int i = 0; i < got && !seen; i++) seen = out[i] == x;
        if (!seen) out[got++] = x;
    }
    return got;
}

static double abs_max(const float *x, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

double att_check_tol(dg_dtype t) {
    switch (t) {
    case DG_BF16: return ATT_CHECK_TOL + ATT_CHECK_LOW_ROUNDINGS * 0x1p-8;
    case DG_F16:  return ATT_CHECK_TOL + ATT_CHECK_LOW_ROUNDINGS * 0x1p-11;
    case DG_F32: case DG_I32: break;
    }
    return ATT_CHECK_TOL;
}

void att_scales(const att_dims *d, const float *q, const float *k, const float *v, const float *dout, int64_t n,
                double scale[ATT_N_OUT]) {
    double qm = abs_max(q, n), km = abs_max(k, n), vm = abs_max(v, n), gm = dout ? abs_max(dout, n) : 0;
    double dots = fabs((double)d->scale) * (double)d->dh * gm * vm;
    scale[ATT_O] = vm;
    scale[ATT_DQ] = dots * km;
    scale[ATT_DK] = dots * qm;
    scale[ATT_DV] = gm;
}

dg_status att_sample_new(att_sample *s, att_dims d, const float *q, const float *k, const float *v,
                         const float *dout, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->d = d;
    if (d.dh < 1 || d.dh > DG_ATTENTION_MAX_HEAD || d.t < 1 || d.b < 1 || d.h < 1)
        return dg_fail(DG_ERR_INVALID, "attention check: shape [%lld,%lld,%lld,%lld] out of range", (long long)d.b,
                        (long long)d.h, (long long)d.t, (long long)d.dh);
    att_scales(&d, q, k, v, dout, d.b * d.h * d.t * d.dh, s->scale);
    dg_rng r = dg_rng_new(seed);
    const int64_t heads = d.b * d.h, t = d.t;
    /* the mask's edges in the first and last head, then rows anywhere */
    int64_t edges[4] = {0, 1, t - 1, t / 2};
    int64_t i_of[ATT_CHECK_QROWS];
    int n = pick_rows(&r, t, edges, 4, i_of, ATT_CHECK_QROWS);
    for (int a = 0; a < ATT_CHECK_QROWS; a++) {
        int64_t head = a == 0 ? 0 : a == 1 ? heads - 1 : (int64_t)(dg_rng_u64(&r) % (uint64_t)heads);
        s->qrow[a] = head * t + i_of[a % n];
    }
    s->head = (int64_t)(dg_rng_u64(&r) % (uint64_t)heads);
    int64_t kedges[3] = {0, 1, t - 1};
    int nk = pick_rows(&r, t, kedges, 3, s->krow, ATT_CHECK_KROWS);
    for (int a = nk; a < ATT_CHECK_KROWS; a++) s->krow[a] = s->krow[a % nk]; /* t < KROWS: repeats */
    double *p = malloc((size_t)t * sizeof *p);
    if (!p) return dg_fail(DG_ERR_OOM, "attention check: out of host memory");
    for (int a = 0; a < ATT_CHECK_QROWS; a++) {
        query_row(&s->d, s->qrow[a], q, k, v, p, s->ref[ATT_O][a]);
        query_dq(&s->d, s->qrow[a], k, v, dout, p, s->ref[ATT_O][a], s->ref[ATT_DQ][a]);
    }
    free(p);
    return DG_OK;
}

dg_status att_sample_keys(att_sample *s, const float *q, const float *k, const float *v, const float *dout) {
    if (s->keys_done) return DG_OK;
    const att_dims *d = &s->d;
    const int64_t t = d->t, dh = d->dh, base = s->head * t;
    /* every query of the head: its log-sum-exp and dO[i].o[i] */
    double *lse = malloc((size_t)t * sizeof *lse), *di = malloc((size_t)t * sizeof *di);
    int failed = !lse || !di;
    if (!failed) {
#pragma omp parallel
        {
            double *p = malloc((size_t)t * sizeof *p), o[DG_ATTENTION_MAX_HEAD];
#pragma omp for schedule(dynamic, 16)
            for (int64_t i = 0; i < t; i++) {
                if (!p) continue;
                lse[i] = query_row(d, base + i, q, k, v, p, o);
                double x = 0;
                for (int64_t c = 0; c < dh; c++) x += dout[(base + i) * dh + c] * o[c];
                di[i] = x;
            }
            if (!p) {
#pragma omp atomic write
                failed = 1;
            }
            free(p);
        }
    }
    if (failed) {
        free(lse);
        free(di);
        return dg_fail(DG_ERR_OOM, "attention check: out of host memory");
    }
#pragma omp parallel for
    for (int a = 0; a < ATT_CHECK_KROWS; a++) {
        const int64_t j = s->krow[a];
        double *dk = s->ref[ATT_DK][a], *dv = s->ref[ATT_DV][a];
        for (int64_t c = 0; c < dh; c++) dk[c] = dv[c] = 0;
        for (int64_t i = d->causal ? j : 0; i < t; i++) {
            const float *qi = q + (base + i) * dh, *g = dout + (base + i) * dh;
            double pij = exp(d->scale * dot(qi, k + (base + j) * dh, dh) - lse[i]);
            double ds = pij * (dot(g, v + (base + j) * dh, dh) - di[i]);
            for (int64_t c = 0; c < dh; c++) {
                dv[c] += pij * g[c];
                dk[c] += ds * qi[c];
            }
        }
        for (int64_t c = 0; c < dh; c++) dk[c] *= d->scale;
    }
    free(lse);
    free(di);
    s->keys_done = true;
    return DG_OK;
}

double att_sample_error(const att_sample *s, att_out which, const float *x) {
    const bool keys = which == ATT_DK || which == ATT_DV;
    const int64_t dh = s->d.dh;
    if (keys && !s->keys_done) return NAN;
    double num = 0, den = 0;
    for (int a = 0; a < (keys ? ATT_CHECK_KROWS : ATT_CHECK_QROWS); a++) {
        int64_t row = keys ? s->head * s->d.t + s->krow[a] : s->qrow[a];
        for (int64_t c = 0; c < dh; c++) {
            double e = fabs((double)x[row * dh + c] - s->ref[which][a][c]);
            num = fmax(num, isnan(e) ? INFINITY : e);
            den = fmax(den, fabs(s->ref[which][a][c]));
        }
    }
    return dg_check_rel_err(num, den, s->scale[which]);
}
