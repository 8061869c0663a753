/* cpu_reduce.c: sum and mean over a set of axes. Accumulates in double so
 * long reductions keep float32 accuracy. Two fast paths cover the shapes
 * training produces (a suffix of axes: row sums; a prefix: column sums such
 * as a bias gradient); any other mask takes the general path. */
#include <stdint.h>

#include "../core/layout.h"
#include "cpu_kernels.h"

#define COL_BLOCK 64

/* y[r] = scale * sum_j x[r*w + j] */
static void reduce_rows(const float *x, float *y, int64_t rows, int64_t w, double scale) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        double acc = 0.0;
        for (int64_t j = 0; j < w; j++) acc += x[r * w + j];
        y[r] = (float)(acc * scale);
    }
}

/* y[j] = scale * sum_r x[r*w + j], parallel over blocks of columns */
static void reduce_cols(const float *x, float *y, int64_t rows, int64_t w, double scale) {
    int64_t blocks = (w + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t j0 = b * COL_BLOCK, nj = w - j0 < COL_BLOCK ? w - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < nj; j++) acc[j] += x[r * w + j0 + j];
        for (int64_t j = 0; j < nj; j++) y[j0 + j] = (float)(acc[j] * scale);
    }
}

void dg__cpu_reduce(const dg_step *s) {
    const dg_node *nd = s->node, *in = nd->in[0];
    const float *x = s->in[0];
    float *y = s->out;
    int nd_in = in->shape.ndim, pad = 4 - nd_in;
    dg_dims4 d = dg_dims4_of(in->shape);
    bool red[4] = {false, false, false, false};
    for (int i = 0; i < nd_in; i++) red[pad + i] = nd->p.axes >> i & 1u;
    int64_t n_out = dg_node_numel(nd), n_red = dg_node_numel(in) / n_out;
    double scale = nd->op == DG_OP_MEAN ? 1.0 / (double)n_red : 1.0;

    /* axes of size 1 change nothing: ignore them when classifying the mask */
    bool suffix = true, prefix = true, seen_red = false, seen_keep = false;
    for (int i = 0; i < 4; i++) {
        if (d.d[i] == 1) continue;
        if (red[i]) { seen_red = true; if (seen_keep) prefix = false; }
        else        { seen_keep = true; if (seen_red) suffix = false; }
    }
    if (suffix) { reduce_rows(x, y, n_out, n_red, scale); return; }
    if (prefix) { reduce_cols(x, y, n_red, n_out, scale); return; }

    int64_t st[4], os[4], rs[4];
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) { st[i] = stride; stride *= d.d[i]; }
    for (int i = 0; i < 4; i++) { os[i] = red[i] ? 1 : d.d[i]; rs[i] = red[i] ? d.d[i] : 1; }
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base = 0, t = o;
        for (int i = 3; i >= 0; i--) { base += (t % os[i]) * st[i]; t /= os[i]; }
        double acc = 0.0;
        for (int64_t r = 0; r < n_red; r++) {
            int64_t off = 0, u = r;
            for (int i = 3; i >= 0; i--) { off += (u % rs[i]) * st[i]; u /= rs[i]; }
            acc += x[base + off];
        }
        y[o] = (float)(acc * scale);
    }
}
