/* cpu_softmax.c: row-wise softmax, log-softmax, softmax cross-entropy and
 * their backward ops. A row is the last axis; every row is reduced with the
 * max subtracted first (log-sum-exp), so large logits cannot overflow. The
 * exponentials are SLEEF's vector ones (cpu_vmath.h), one per element.
 *
 * softmax and log_softmax (and their backward ops) carry dg_attr_softmax:
 * y = softmax(scale x) and, when causal, row i of each [R, C] matrix keeps
 * only its columns j <= i (R the second-last axis, 1 for a 1-D tensor): the
 * masked columns are never read and come out 0 (log_softmax: -inf), their
 * gradient 0. Without them, scale is 1 and every row is whole.
 *
 * softmax and log_softmax also take bf16 and f16 (their output in the same
 * dtype): each row widened to float32, the statistics (max, sum) in
 * float32 and double as for float32 rows, the row rounded on store. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/attrs.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"
#include "cpu_vmath.h"

#define MAX_THREADS 1024

static int64_t row_len(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }

/* log(sum_{j<n} exp(a x[j])), n >= 1, computed stably */
static double logsumexp(const dg_vmath *vm, const float *x, int64_t n, float a) {
    float mx = vm->max(x, n, a);
    return (double)mx + log(vm->exp_sum(NULL, x, n, a, mx));
}

/* How a softmax-family node reads its rows: c columns, rows of them; the
 * unmasked columns of flat row r are [0, row_keep(&g, r)). */
typedef struct sm_geom {
    int64_t c, rows, r_per; /* r_per: rows of one causal matrix, 0 unmasked */
    float   scale;
} sm_geom;

static sm_geom sm_geom_of(const dg_node *nd) {
    dg_attr_softmax a = dg_attr_softmax_of(nd);
    sm_geom g;
    g.c = row_len(nd);
    g.rows = dg_node_numel(nd) / g.c;
    g.r_per = a.causal ? (nd->shape.ndim >= 2 ? nd->shape.d[nd->shape.ndim - 2] : 1) : 0;
    g.scale = a.scale;
    return g;
}

static int64_t row_keep(const sm_geom *g, int64_t r) {
    if (!g->r_per) return g->c;
    int64_t i = r % g->r_per;
    return i + 1 < g->c ? i + 1 : g->c;
}

/* softmax:     y = exp(scale x - max) / sum(exp(scale x - max))
 * log_softmax: y = scale x - logsumexp(scale x)
 * over the n unmasked of c columns, the masked ones `masked` */
static void softmax_row(const dg_vmath *vm, bool log_out, float scale, const float *xr, float *yr, int64_t n,
                        int64_t c) {
    if (log_out) {
        float lse = (float)logsumexp(vm, xr, n, scale);
        for (int64_t j = 0; j < n; j++) yr[j] = scale * xr[j] - lse;
    } else {
        float mx = vm->max(xr, n, scale);
        vm->scale(yr, n, (float)(1.0 / vm->exp_sum(yr, xr, n, scale, mx)));
    }
    for (int64_t j = n; j < c; j++) yr[j] = log_out ? -INFINITY : 0.0f;
}

/* x and y of one dtype; a bf16 or f16 row is widened into the thread's
 * part of the scratch (x, then y: 2c floats), computed, and rounded out */
void dg__cpu_softmax(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype t = nd->dtype;
    sm_geom g = sm_geom_of(nd);
    int64_t c = g.c, rows = g.rows;
    bool log_out = nd->op == DG_OP_LOG_SOFTMAX;
    const dg_vmath *vm = dg__vmath();
#pragma omp parallel
    {
        float *buf = t == DG_F32 ? NULL : (float *)s->scratch + (int64_t)omp_get_thread_num() * 2 * c;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            float *ybuf = buf ? buf + c : NULL;
            const float *xr = dg__lp_load(t, s->in[0], r * c, c, buf);
            softmax_row(vm, log_out, g.scale, xr, dg__lp_dst(t, s->out, r * c, ybuf), row_keep(&g, r), c);
            dg__lp_store(t, s->out, r * c, c, ybuf);
        }
    }
}

/* softmax:     dx = scale y (dy - sum(dy * y))
 * log_softmax: dx = scale (dy - exp(y) sum(dy))     (y is the forward output);
 * the sums over the unmasked columns, the masked ones 0. dx is float32;
 * dy and y are read in their dtypes (a bf16 or f16 row widened into the
 * thread's scratch: dy, then y, 2c floats). */
void dg__cpu_softmax_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype tg = nd->in[0]->dtype, ty = nd->in[1]->dtype;
    sm_geom g = sm_geom_of(nd);
    int64_t c = g.c, rows = g.rows;
    bool log_out = nd->op == DG_OP_LOG_SOFTMAX_BACKWARD;
    float scale = g.scale;
    float *dx = s->out;
    const dg_vmath *vm = dg__vmath();
#pragma omp parallel
    {
        float *buf = tg == DG_F32 && ty == DG_F32 ? NULL
                                                  : (float *)s->scratch + (int64_t)omp_get_thread_num() * 2 * c;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *dyr = dg__lp_load(tg, s->in[0], r * c, c, buf);
            const float *yr = dg__lp_load(ty, s->in[1], r * c, c, buf ? buf + c : NULL);
            float *dxr = dx + r * c;
            int64_t n = row_keep(&g, r);
            double dot = 0.0;
            for (int64_t j = 0; j < n; j++) dot += log_out ? dyr[j] : (double)dyr[j] * yr[j];
            float d = (float)dot;
            if (log_out) {
                vm->exp_scaled(dxr, yr, n, 1.0f, 0.0f, -d); /* -d exp(y) */
                for (int64_t j = 0; j < n; j++) dxr[j] = scale * (dyr[j] + dxr[j]);
            } else {
                for (int64_t j = 0; j < n; j++) dxr[j] = scale * (yr[j] * (dyr[j] - d));
            }
            for (int64_t j = n; j < c; j++) dxr[j] = 0.0f;
        }
    }
}

/* Labels name a column of their row: one outside [0, c) is refused before
 * any row is read (one pass over the rows' ints beside their c
 * exponentials each). dg_plan_set refuses it earlier; labels can also
 * reach the plan's memory by a gather or through dg_plan_data. */
static dg_status check_labels(const dg_node *nd, const dg_node *logits, const dg_node *labels, const int32_t *label) {
    char range[160];
    snprintf(range, sizeof range, "the classes of logits '%s'", logits->name);
    int64_t c = row_len(logits);
    return dg__cpu_check_index(nd, labels, label, dg_node_numel(logits) / c, c, range);
}

/* loss = mean_r (logsumexp(x_r) - x_r[label_r]). Side output:
 * lse[r] = logsumexp(x_r), which the backward reads instead of
 * recomputing it. */
dg_status dg__cpu_softmax_ce(const dg_step *s) {
    const dg_node *nd = s->node, *logits = nd->in[0];
    const float *x = s->in[0];
    const int32_t *label = s->in[1];
    float *lse = s->side[0];
    int64_t c = row_len(logits), rows = dg_node_numel(logits) / c;
    dg_status st = check_labels(nd, logits, nd->in[1], label);
    if (st != DG_OK) return st;
    /* per-thread partial sums over a static partition, added in thread
     * order: the same loss on every run (an OpenMP reduction clause may
     * combine partials in any order) */
    double part[MAX_THREADS] = {0};
    const dg_vmath *vm = dg__vmath();
    int nt = omp_get_max_threads() < MAX_THREADS ? omp_get_max_threads() : MAX_THREADS;
#pragma omp parallel num_threads(nt)
    {
        double acc = 0.0;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            double lr = logsumexp(vm, x + r * c, c, 1.0f);
            lse[r] = (float)lr;
            acc += lr - x[r * c + label[r]];
        }
        part[omp_get_thread_num()] = acc;
    }
    double total = 0.0;
    for (int t = 0; t < nt; t++) total += part[t];
    *(float *)s->out = (float)(total / (double)rows);
    return DG_OK;
}

/* dx = (softmax(x) - onehot(label)) * dloss / rows, softmax(x) = exp(x - lse)
 * with the forward's saved row log-sum-exp */
dg_status dg__cpu_softmax_ce_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *dloss = s->in[0], *x = s->in[1];
    const int32_t *label = s->in[2];
    const float *lse = s->in[3];
    float *dx = s->out;
    int64_t c = row_len(nd), rows = dg_node_numel(nd) / c;
    dg_status st = check_labels(nd, nd->in[1], nd->in[2], label);
    if (st != DG_OK) return st;
    double g = (double)dloss[0] / (double)rows;
    const dg_vmath *vm = dg__vmath();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *dxr = dx + r * c;
        float gf = (float)g;
        vm->exp_scaled(dxr, xr, c, 1.0f, lse[r], gf);
        dxr[label[r]] -= gf;
    }
    return DG_OK;
}
