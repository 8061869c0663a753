/* cpu_conv.c: conv2d and its two backward ops as im2col + GEMM.
 *
 * x [N,C,H,W], w [O,cg,KH,KW], y and dy [N,O,OH,OW]; cols = OH*OW. Group g
 * holds input channels [g*cg, (g+1)*cg) and output channels [g*og,
 * (g+1)*og); its weights w_g are the matrix [og, R], R = cg*KH*KW.
 * Images are unfolded into the step's scratch as core/layout.h lays them
 * out, col [C*KH*KW, chunk*cols], the chunk's images side by side (conv2d
 * unfolds one image at a time into the first cols of each row, so the
 * GEMM reads its columns from cache). Then, per image and group (the
 * GEMMs multithreaded by the backend's sgemm):
 *   conv2d:          y_g = w_g col_g                 [og, cols]
 *   backward_data:   col_g = w_g^T dy_g, then col2im folds col into dx
 * and per group over all the unfolded columns at once, dyT [O, chunk*cols]
 * following col:
 *   backward_weight: dw_g = dyT_g col_g^T            [og, R]
 * A `direct` convolution (1x1, stride 1, no padding) reads x, and writes dx,
 * as its own columns. The unfolding loops run in parallel over images and
 * channels. backward_weight sums over the chunks: the first chunk's GEMM
 * writes dw, the later ones accumulate into it. */
#include <string.h>

#include "../core/layout.h"
#include "../core/status_internal.h"
#include "cpu_kernels.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The first ox >= 0 with ox*stride + off >= bound. */
static int64_t first_at_least(int64_t bound, int64_t off, int64_t stride) {
    int64_t v = bound - off;
    return v <= 0 ? 0 : (v + stride - 1) / stride;
}

/* One image's share of a span of the batch's columns [q0, q0 + count),
 * column q = image*cols + oy*OW + ox: its positions [p0, p1), which land
 * at column t0 of the span. */
typedef struct span_part { int64_t image, p0, p1, t0; } span_part;

static int64_t span_images(const dg_conv_dims *d, int64_t q0, int64_t count) {
    return (q0 + count - 1) / d->cols - q0 / d->cols + 1;
}

static span_part span_part_of(const dg_conv_dims *d, int64_t q0, int64_t count, int64_t j) {
    int64_t image = q0 / d->cols + j, begin = image * d->cols;
    int64_t a = q0 > begin ? q0 : begin, b = min64(q0 + count, begin + d->cols);
    return (span_part){image, a - begin, b - begin, a - q0};
}

/* dst[ox - ox0] = src[ox*sw + off] for ox in [ox0, ox1), 0 where that lies
 * outside [0, w) */
static void gather_row(float *dst, const float *src, int64_t w, int64_t ox0, int64_t ox1, int64_t sw, int64_t off) {
    int64_t lo = first_at_least(0, off, sw), hi = first_at_least(w, off, sw);
    lo = lo < ox0 ? ox0 : lo > ox1 ? ox1 : lo;
    hi = hi < lo ? lo : hi > ox1 ? ox1 : hi;
    for (int64_t ox = ox0; ox < lo; ox++) dst[ox - ox0] = 0.0f;
    for (int64_t ox = lo; ox < hi; ox++) dst[ox - ox0] = src[ox * sw + off];
    for (int64_t ox = hi; ox < ox1; ox++) dst[ox - ox0] = 0.0f;
}

/* col[(ci*KH + ki)*KW + kj][t], rows ld apart, for the span's columns t <
 * count: the tap (ki, kj) of channel ci under output position t (layout.h) */
static void im2col(const float *x, const dg_conv_dims *d, int64_t q0, int64_t count, float *col, int64_t ld) {
    int64_t parts = span_images(d, q0, count), taps = d->kh * d->kw;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t j = 0; j < parts; j++)
        for (int64_t ci = 0; ci < d->c; ci++) {
            span_part sp = span_part_of(d, q0, count, j);
            const float *plane = x + (sp.image * d->c + ci) * d->h * d->w;
            for (int64_t tap = 0; tap < taps; tap++) {
                int64_t ki = tap / d->kw, kj = tap % d->kw;
                float *dst = col + (ci * taps + tap) * ld + sp.t0;
                for (int64_t p = sp.p0; p < sp.p1;) { /* one output row's part at a time */
                    int64_t oy = p / d->ow, ox0 = p % d->ow, ox1 = min64(d->ow, ox0 + sp.p1 - p);
                    int64_t iy = oy * d->sh - d->ph + ki * d->dh;
                    float *out = dst + (p - sp.p0);
                    if (iy < 0 || iy >= d->h)
                        memset(out, 0, (size_t)(ox1 - ox0) * sizeof(float));
                    else
                        gather_row(out, plane + iy * d->w, d->w, ox0, ox1, d->sw, kj * d->dw - d->pw);
                    p += ox1 - ox0;
                }
            }
        }
}

/* dx of `nb` images (each [C,H,W]) = the sum of their col entries over
 * every tap that reads each pixel (the adjoint of im2col); each (image,
 * channel) plane is zeroed and summed by one thread */
static void col2im(const float *col, int64_t ld, const dg_conv_dims *d, int64_t nb, float *dx) {
    int64_t taps = d->kh * d->kw;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t j = 0; j < nb; j++)
        for (int64_t ci = 0; ci < d->c; ci++) {
            float *plane = dx + (j * d->c + ci) * d->h * d->w;
            memset(plane, 0, (size_t)(d->h * d->w) * sizeof(float));
            for (int64_t tap = 0; tap < taps; tap++) {
                int64_t ki = tap / d->kw, kj = tap % d->kw, off = kj * d->dw - d->pw;
                int64_t lo = first_at_least(0, off, d->sw), hi = first_at_least(d->w, off, d->sw);
                hi = min64(hi, d->ow);
                const float *src = col + (ci * taps + tap) * ld + j * d->cols;
                for (int64_t oy = 0; oy < d->oh; oy++) {
                    int64_t iy = oy * d->sh - d->ph + ki * d->dh;
                    if (iy < 0 || iy >= d->h) continue;
                    float *row = plane + iy * d->w;
                    for (int64_t ox = lo; ox < hi; ox++) row[ox * d->sw + off] += src[oy * d->ow + ox];
                }
            }
        }
}

/* dyT[o][t] = dy of the span's column t, channel o (rows ld apart) */
static void transpose_dy(const float *dy, const dg_conv_dims *d, int64_t q0, int64_t count, float *dyT, int64_t ld) {
    int64_t parts = span_images(d, q0, count);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t j = 0; j < parts; j++)
        for (int64_t o = 0; o < d->o; o++) {
            span_part sp = span_part_of(d, q0, count, j);
            memcpy(dyT + o * ld + sp.t0, dy + (sp.image * d->o + o) * d->cols + sp.p0,
                   (size_t)(sp.p1 - sp.p0) * sizeof(float));
        }
}

static void gemm(const dg_cpu_blas *b, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    b->sgemm(b->ctx, ta, tb, (int)m, (int)n, (int)k, A, (int)lda, B, (int)ldb, C, (int)ldc, accumulate);
}

static dg_status need_scratch(const dg_step *s, const dg_conv_dims *d) {
    if (d->direct || s->scratch) return DG_OK;
    return dg__fail(DG_ERR_INVALID, "cpu: %s '%s' needs %zu bytes of scratch and its step has none (a step "
                    "from dg_step_of: run it through a plan's steps)", dg_op_name(s->node->op), s->node->name,
                    dg_node_scratch_bytes(s->node));
}

/* Where image j of a chunk finds its columns: at j*image_stride from the
 * chunk's first, rows ld apart (x itself, or dx, when direct) */
typedef struct col_strides { int64_t ld, image_stride; } col_strides;

static col_strides col_strides_of(const dg_conv_dims *d) {
    if (d->direct) return (col_strides){d->cols, d->c * d->cols};
    return (col_strides){d->chunk * d->cols, d->cols};
}

dg_status dg__cpu_conv2d(const dg_step *s, const dg_cpu_blas *blas) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    const float *x = s->in[0], *w = s->in[1];
    float *y = s->out;
    int64_t r = d.cg * d.kh * d.kw;
    col_strides cs = col_strides_of(&d);
    /* one image at a time: its columns (rows x cols floats, a few MB) are
     * still in cache when the GEMMs read them */
    if (!d.direct) cs = (col_strides){d.cols, 0};
    for (int64_t n = 0; n < d.n; n++) {
        const float *col = x + n * d.c * d.cols;
        if (!d.direct) {
            im2col(x, &d, n * d.cols, d.cols, s->scratch, cs.ld);
            col = s->scratch;
        }
        for (int64_t g = 0; g < d.groups; g++)
            gemm(blas, false, false, d.og, d.cols, r, w + g * d.og * r, r, col + g * r * cs.ld, cs.ld,
                 y + (n * d.o + g * d.og) * d.cols, d.cols, false);
    }
    return DG_OK;
}

dg_status dg__cpu_conv2d_backward_data(const dg_step *s, const dg_cpu_blas *blas) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    const float *dy = s->in[0], *w = s->in[1];
    float *dx = s->out;
    int64_t r = d.cg * d.kh * d.kw;
    col_strides cs = col_strides_of(&d);
    for (int64_t n0 = 0; n0 < d.n; n0 += d.chunk) {
        int64_t nb = min64(d.chunk, d.n - n0);
        float *dx_chunk = dx + n0 * d.c * d.h * d.w, *col = d.direct ? dx_chunk : s->scratch;
        for (int64_t j = 0; j < nb; j++)
            for (int64_t g = 0; g < d.groups; g++)
                gemm(blas, true, false, r, d.cols, d.og, w + g * d.og * r, r,
                     dy + ((n0 + j) * d.o + g * d.og) * d.cols, d.cols, col + j * cs.image_stride + g * r * cs.ld,
                     cs.ld, false);
        if (!d.direct) col2im(col, cs.ld, &d, nb, dx_chunk);
    }
    return DG_OK;
}

dg_status dg__cpu_conv2d_backward_weight(const dg_step *s, const dg_cpu_blas *blas) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    const float *dy = s->in[0], *x = s->in[1];
    float *dw = s->out;
    /* layout.h: col [rows, chunk*cols], then dyT [o, chunk*cols]; per group
     * dw_g [og, r] = dyT_g col_g^T, the first chunk writing, the others adding */
    int64_t r = d.cg * d.kh * d.kw, ld = d.chunk * d.cols;
    float *col = s->scratch, *dyT = col + d.rows * ld;
    for (int64_t n0 = 0; n0 < d.n; n0 += d.chunk) {
        int64_t count = min64(d.chunk, d.n - n0) * d.cols;
        im2col(x, &d, n0 * d.cols, count, col, ld);
        transpose_dy(dy, &d, n0 * d.cols, count, dyT, ld);
        for (int64_t g = 0; g < d.groups; g++)
            gemm(blas, false, true, d.og, r, count, dyT + g * d.og * ld, ld, col + g * r * ld, ld, dw + g * d.og * r,
                 r, n0 > 0);
    }
    return DG_OK;
}
