/* cpu_reduce.c: sum and mean over a set of axes. Accumulates in double so
 * long reductions keep float32 accuracy. Two fast paths cover the shapes
 * training produces (a suffix of axes: row sums; a prefix: column sums such
 * as a bias gradient); any other mask takes the general path. Row sums
 * read bf16 and f16 in blocks widened by cpu_lowp.h's vector converters
 * (float32 in place), the others element by element. x and y of one dtype
 * (f32, bf16, f16), or a 16-bit x summed into a float32 y (dg_sum_ex). */
#include <stdint.h>

#include "../core/layout.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"

#define COL_BLOCK 64
#define ROW_BLOCK ((int64_t)1024) /* floats a row is widened by at a time */

/* y[r] = scale * sum_j x[r*w + j]; x of dtype tx, y of ty */
static void reduce_rows(dg_dtype tx, dg_dtype ty, const void *x, void *y, int64_t rows, int64_t w, double scale) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        float buf[ROW_BLOCK];
        double acc = 0.0;
        for (int64_t j0 = 0; j0 < w; j0 += ROW_BLOCK) {
            int64_t n = w - j0 < ROW_BLOCK ? w - j0 : ROW_BLOCK;
            const float *xr = dg__lp_load(tx, x, r * w + j0, n, buf);
            for (int64_t j = 0; j < n; j++) acc += xr[j];
        }
        dg__lp_st(ty, y, r, (float)(acc * scale));
    }
}

/* y[j] = scale * sum_r x[r*w + j], parallel over blocks of columns */
static void reduce_cols(dg_dtype tx, dg_dtype ty, const void *x, void *y, int64_t rows, int64_t w, double scale) {
    int64_t blocks = (w + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t j0 = b * COL_BLOCK, nj = w - j0 < COL_BLOCK ? w - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        /* element by element: widening 64 columns at a time by the
         * vector converters measured 3-4x slower (a call a row) */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < nj; j++) acc[j] += dg__lp_ld(tx, x, r * w + j0 + j);
        for (int64_t j = 0; j < nj; j++) dg__lp_st(ty, y, j0 + j, (float)(acc[j] * scale));
    }
}

/* the sums in double whatever the dtypes, the result rounded on store */
void dg__cpu_reduce(const dg_step *s) {
    const void *x = s->in[0];
    void *y = s->out;
    const dg_dtype tx = s->node->in[0]->dtype, ty = s->node->dtype;
    dg_reduce_layout l = dg_reduce_layout_of(s->node);
    switch (l.kind) {
    case DG_REDUCE_ROWS: reduce_rows(tx, ty, x, y, l.n_out, l.n_red, l.scale); return;
    case DG_REDUCE_COLS: reduce_cols(tx, ty, x, y, l.n_red, l.n_out, l.scale); return;
    case DG_REDUCE_GENERAL: break;
    }
    const int64_t *st = l.st.d, *os = l.os.d, *rs = l.rs.d;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < l.n_out; o++) {
        int64_t base = 0, t = o;
        for (int i = 3; i >= 0; i--) { base += (t % os[i]) * st[i]; t /= os[i]; }
        double acc = 0.0;
        for (int64_t r = 0; r < l.n_red; r++) {
            int64_t off = 0, u = r;
            for (int i = 3; i >= 0; i--) { off += (u % rs[i]) * st[i]; u /= rs[i]; }
            acc += dg__lp_ld(tx, x, base + off);
        }
        dg__lp_st(ty, y, o, (float)(acc * l.scale));
    }
}
