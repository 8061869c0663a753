/* cpu_softmax.c: row-wise softmax, log-softmax, softmax cross-entropy and
 * their backward ops. A row is the last axis; every row is reduced with the
 * max subtracted first (log-sum-exp), so large logits cannot overflow. */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "cpu_kernels.h"

#define MAX_THREADS 1024

static int64_t row_len(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }

/* log(sum_j exp(x[j])) computed stably */
static double logsumexp(const float *x, int64_t c) {
    float mx = x[0];
    for (int64_t j = 1; j < c; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0; /* expf per element (vectorisable), the sum in double */
    for (int64_t j = 0; j < c; j++) sum += expf(x[j] - mx);
    return (double)mx + log(sum);
}

void dg__cpu_softmax(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *x = s->in[0];
    float *y = s->out;
    int64_t c = row_len(nd), rows = dg_node_numel(nd) / c;
    bool log_out = nd->op == DG_OP_LOG_SOFTMAX;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        float lse = (float)logsumexp(xr, c);
        if (log_out)
            for (int64_t j = 0; j < c; j++) yr[j] = xr[j] - lse;
        else
            for (int64_t j = 0; j < c; j++) yr[j] = expf(xr[j] - lse);
    }
}

/* softmax:     dx = y * (dy - sum(dy * y))
 * log_softmax: dx = dy - exp(y) * sum(dy)        (y is the forward output) */
void dg__cpu_softmax_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *dy = s->in[0], *y = s->in[1];
    float *dx = s->out;
    int64_t c = row_len(nd), rows = dg_node_numel(nd) / c;
    bool log_out = nd->op == DG_OP_LOG_SOFTMAX_BACKWARD;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * c, *yr = y + r * c;
        float *dxr = dx + r * c;
        double dot = 0.0;
        for (int64_t j = 0; j < c; j++) dot += log_out ? dyr[j] : (double)dyr[j] * yr[j];
        for (int64_t j = 0; j < c; j++)
            dxr[j] = log_out ? dyr[j] - expf(yr[j]) * (float)dot : yr[j] * (dyr[j] - (float)dot);
    }
}

/* loss = mean_r (logsumexp(x_r) - x_r[label_r]); a label outside [0, c)
 * makes the loss NaN rather than reading out of bounds. Side output:
 * lse[r] = logsumexp(x_r), which the backward reads instead of
 * recomputing it. */
void dg__cpu_softmax_ce(const dg_step *s) {
    const dg_node *nd = s->node, *logits = nd->in[0];
    const float *x = s->in[0];
    const int32_t *label = s->in[1];
    float *lse = s->side[0];
    int64_t c = row_len(logits), rows = dg_node_numel(logits) / c;
    /* per-thread partial sums over a static partition, added in thread
     * order: the same loss on every run (an OpenMP reduction clause may
     * combine partials in any order) */
    double part[MAX_THREADS] = {0};
    int nt = omp_get_max_threads() < MAX_THREADS ? omp_get_max_threads() : MAX_THREADS;
#pragma omp parallel num_threads(nt)
    {
        double acc = 0.0;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int32_t l = label[r];
            double lr = logsumexp(x + r * c, c);
            lse[r] = (float)lr;
            acc += (l >= 0 && l < c) ? lr - x[r * c + l] : NAN;
        }
        part[omp_get_thread_num()] = acc;
    }
    double total = 0.0;
    for (int t = 0; t < nt; t++) total += part[t];
    *(float *)s->out = (float)(total / (double)rows);
}

/* dx = (softmax(x) - onehot(label)) * dloss / rows, softmax(x) = exp(x - lse)
 * with the forward's saved row log-sum-exp */
void dg__cpu_softmax_ce_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *dloss = s->in[0], *x = s->in[1];
    const int32_t *label = s->in[2];
    const float *lse = s->in[3];
    float *dx = s->out;
    int64_t c = row_len(nd), rows = dg_node_numel(nd) / c;
    double g = (double)dloss[0] / (double)rows;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *dxr = dx + r * c;
        float gf = (float)g;
        int32_t l = label[r];
        for (int64_t j = 0; j < c; j++) dxr[j] = expf(xr[j] - lse[r]) * gf;
        if (l >= 0 && l < c) dxr[l] -= gf;
        if (l < 0 || l >= c) dxr[0] = NAN;
    }
}
