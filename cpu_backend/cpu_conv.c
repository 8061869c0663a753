/* cpu_conv.c: conv2d and its two backward ops as im2col + GEMM.
 *
 * x [N,C,H,W], w [O,cg,KH,KW], y and dy [N,O,OH,OW]; cols = OH*OW. Group g
 * holds input channels [g*cg, (g+1)*cg) and output channels [g*og,
 * (g+1)*og); its weights w_g are the matrix [og, R], R = cg*KH*KW.
 * The batch is worked in passes of nb images, unfolded at once into the
 * step's scratch as core/layout.h lays them out, col [C*KH*KW, nb*cols]
 * with the pass's images side by side; the GEMMs (multithreaded by the
 * backend's sgemm) read the columns while they are still in cache. A pass
 * holds as many images as fit its budget, at least 1 and at most the chunk
 * the scratch holds:
 *   conv2d:          y_g = w_g col_g                 per image [og, cols]
 *   backward_data:   col_g = w_g^T dy_g              per image [R, cols],
 *                    then col2im folds the pass's col into its dx
 * in passes of up to 1 MiB of columns (UNFOLD_BYTES): one image of
 * ResNet-18's large layers, several of the small ones; and
 *   backward_weight: dw_g (+)= dyT_g col_g^T         per pass  [og, R]
 * in passes of up to 4 MiB (WEIGHT_PASS_BYTES), as it sums over the
 * columns and wants them long; dyT [O, nb*cols] is dy of the pass with the
 * channel axis first (a one-image pass reads dy in place), and the first
 * pass writes dw, the later ones accumulate into it. A `direct`
 * convolution (1x1, stride 1, no padding) reads x, and writes dx, as its
 * own columns. A pass of several images is multiplied side by side where
 * it can be, one GEMM per group over the pass's nb*cols columns, and
 * images of fewer than SIDE_COLUMNS columns come in passes of at least
 * that many:
 *   conv2d:          yT_g [og, nb*cols] = w_g col_g, into the pass's y,
 *                    then back to [nb, og, cols] through the columns
 *   backward_data:   col_g = w_g^T dyT_g, dyT [o, nb*cols] in the pass's dx
 * The unfolding loops run in parallel over images and channels. That is
 * DG_CPU_CONV_PASSES (cpu_backend.h).
 *
 * DG_CPU_CONV_BATCH instead runs OpenMP over the batch: the first `slots`
 * threads of the whole team take contiguous ranges of images (the rest
 * idle: a smaller team would end pool threads, cpu_conv_batch.h), or of
 * units of images when there are fewer images than threads (image_parts:
 * output rows for the forward and dw, input channels for dx). Each
 * thread unfolds one unit at a time, in blocks of its output rows
 * (BLOCK_BYTES), into its own slot of
 * the scratch (slot t at t*slot_floats) and multiplies each block with
 * the sgemm on its own thread (blas.serial_in_parallel:
 * inside the parallel region OpenBLAS's OpenMP build runs on the calling
 * thread; the unfolding loops' own regions are off there). Its columns
 * stay in its core's L2 and no GEMM of a few dozen MFLOP is split
 * between cores. For the weight's gradient each thread sums its units
 * into a partial dw [o, R] (thread 0 into dw itself, thread t into its
 * slot behind its columns), and the partials are added into dw after. A
 * team smaller than `slots` (OMP_THREAD_LIMIT, a caller's parallel
 * region) splits the images, and sums the partials, by its real size.
 *
 * DG_CPU_CONV_CHANNELS splits only the weight's gradient, and by input
 * channels: in passes as the scratch lays them out, every thread unfolds
 * its own channels' rows of col for the pass's images, dyT is transposed
 * by all of them, and each multiplies with a one-thread sgemm straight
 * into its own columns of dw, summing over the whole pass: no partials,
 * one parallel region (the passes' GEMM of a deep layer, 256 x 2304 x
 * 384 for 256ch 8x8, is a few dozen MFLOP a thread between fork-joins). */
#include <omp.h>
#include <string.h>

#include "../core/layout.h"
#include "../core/status_internal.h"
#include "cpu_conv_batch.h"
#include "cpu_kernels.h"

/* The first ox >= 0 with ox*stride + off >= bound. */
static int64_t first_at_least(int64_t bound, int64_t off, int64_t stride) {
    int64_t v = bound - off;
    return v <= 0 ? 0 : (v + stride - 1) / stride;
}

/* The output columns [lo, hi) of a tap whose input column ox*sw + off lies
 * inside [0, w); 0 <= lo <= hi <= ow. Computed once per tap: the divisions
 * cost more than copying a row of 14..56 floats. */
typedef struct ox_range { int64_t lo, hi; } ox_range;

static ox_range inside(const dg_conv_dims *d, int64_t off) {
    int64_t lo = min64(first_at_least(0, off, d->sw), d->ow), hi = min64(first_at_least(d->w, off, d->sw), d->ow);
    return (ox_range){lo, hi < lo ? lo : hi};
}

/* dst[ox] = src[ox*sw + off] for ox in [0, ow), 0 outside `in`; the unit
 * stride a loop of its own, so that it is vectorised */
static void gather_row(float *restrict dst, const float *restrict src, ox_range in, int64_t ow, int64_t sw,
                       int64_t off) {
    for (int64_t ox = 0; ox < in.lo; ox++) dst[ox] = 0.0f;
    if (sw == 1)
        for (int64_t ox = in.lo; ox < in.hi; ox++) dst[ox] = src[ox + off];
    else
        for (int64_t ox = in.lo; ox < in.hi; ox++) dst[ox] = src[ox * sw + off];
    for (int64_t ox = in.hi; ox < ow; ox++) dst[ox] = 0.0f;
}

/* row[ox*sw + off] += src[ox] for ox in `in` */
static void scatter_add_row(float *restrict row, const float *restrict src, ox_range in, int64_t sw, int64_t off) {
    if (sw == 1)
        for (int64_t ox = in.lo; ox < in.hi; ox++) row[ox + off] += src[ox];
    else
        for (int64_t ox = in.lo; ox < in.hi; ox++) row[ox * sw + off] += src[ox];
}

/* The output rows [oy0, oy0 + noy) of every output row's columns: a whole
 * image when noy = oh, or one block of it (DG_CPU_CONV_BATCH) */
typedef struct out_rows { int64_t oy0, noy; } out_rows;

static out_rows all_rows(const dg_conv_dims *d) { return (out_rows){0, d->oh}; }

/* A tap's valid output rows read consecutive input rows, W apart, into
 * consecutive column rows, OW = W apart, when both strides are 1 and
 * OW = W (every 3x3 stride-1 "same" layer of ResNet-18 and the CNN): they
 * are one span of the plane shifted by the tap's column offset, copied
 * (unfold_span) or added (fold_span) in one go: row by row cost about 60
 * cycles for 32 floats with x in the core's cache (the conv sweep's
 * forward gained 10-20%; a training step, where x comes from other
 * cores, did not move: docs/PERF.md). The span carries the neighbouring
 * rows' ends into the padding columns; those are zeroed. */
static bool span_rows(const dg_conv_dims *d) { return d->sh == 1 && d->sw == 1 && d->ow == d->w; }

/* The output rows of rs whose input row oy + shift lies in [0, h) (strides
 * 1, shift = ki*dh - ph); none from rs.oy0 when none does */
static out_rows valid_rows(const dg_conv_dims *d, out_rows rs, int64_t shift) {
    int64_t lo = rs.oy0 > -shift ? rs.oy0 : -shift, hi = min64(rs.oy0 + rs.noy, d->h - shift);
    return hi > lo ? (out_rows){lo, hi - lo} : (out_rows){rs.oy0, 0};
}

/* the columns outside `in` of `nrows` rows of OW floats: 0 */
static void zero_outside(float *rows, int64_t nrows, int64_t ow, ox_range in) {
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t ox = 0; ox < in.lo; ox++) rows[r * ow + ox] = 0.0f;
        for (int64_t ox = in.hi; ox < ow; ox++) rows[r * ow + ox] = 0.0f;
    }
}

/* One tap's column rows [rs.noy, OW] when span_rows: the valid rows v the
 * plane's span from input row v.oy0 + shift, shifted by off (out[L] =
 * plane[(v.oy0 + shift)*W + off + L]), their columns outside `in` and the
 * other rows zero */
static void unfold_span(float *restrict dst, const float *restrict plane, const dg_conv_dims *d, out_rows rs,
                        int64_t shift, int64_t off, ox_range in) {
    int64_t ow = d->ow;
    out_rows v = valid_rows(d, rs, shift);
    int64_t head = v.oy0 - rs.oy0, n = v.noy * ow;
    float *out = dst + head * ow;
    memset(dst, 0, (size_t)(head * ow) * sizeof(float));
    memset(out + n, 0, (size_t)((rs.noy - head - v.noy) * ow) * sizeof(float));
    if (in.lo >= in.hi) {
        memset(out, 0, (size_t)n * sizeof(float));
        return;
    }
    if (n == 0) return;
    const float *from = plane + (v.oy0 + shift) * d->w + off + in.lo; /* out[in.lo]'s source, off + in.lo >= 0 */
    memcpy(out + in.lo, from, (size_t)(n - in.lo - (ow - in.hi)) * sizeof(float));
    zero_outside(out, v.noy, ow, in);
}

/* The input channels [c0, c1) that im2col unfolds or col2im folds */
typedef struct chan_range { int64_t c0, c1; } chan_range;

static chan_range all_channels(const dg_conv_dims *d) { return (chan_range){0, d->c}; }

/* col[((ci - cr.c0)*KH + ki)*KW + kj][j*bc + (oy - oy0)*OW + ox], rows ld
 * apart, bc = rs.noy*OW, for the nb images from n0, the output rows rs and
 * the channels cr: the tap (ki, kj) of channel ci under output position
 * (oy, ox) of image n0 + j (layout.h for every row and channel), 0 in the
 * padding */
static void im2col(const float *x, const dg_conv_dims *d, int64_t n0, int64_t nb, out_rows rs, chan_range cr,
                   float *col, int64_t ld) {
    int64_t taps = d->kh * d->kw, bc = rs.noy * d->ow;
    bool span = span_rows(d);
#pragma omp parallel for collapse(2) schedule(static) if (!omp_in_parallel())
    for (int64_t j = 0; j < nb; j++)
        for (int64_t ci = cr.c0; ci < cr.c1; ci++) {
            const float *plane = x + ((n0 + j) * d->c + ci) * d->h * d->w;
            for (int64_t tap = 0; tap < taps; tap++) {
                int64_t ki = tap / d->kw, off = tap % d->kw * d->dw - d->pw;
                ox_range in = inside(d, off);
                float *dst = col + ((ci - cr.c0) * taps + tap) * ld + j * bc;
                if (span) {
                    unfold_span(dst, plane, d, rs, ki * d->dh - d->ph, off, in);
                    continue;
                }
                int64_t oy = rs.oy0, iy = oy * d->sh + ki * d->dh - d->ph;
                for (; oy < rs.oy0 + rs.noy; oy++, iy += d->sh, dst += d->ow) {
                    if (iy < 0 || iy >= d->h)
                        memset(dst, 0, (size_t)d->ow * sizeof(float));
                    else
                        gather_row(dst, plane + iy * d->w, in, d->ow, d->sw, off);
                }
            }
        }
}

/* plane (+)= one tap's column rows src [rs.noy, OW] when span_rows, the
 * adjoint of unfold_span: the valid rows' columns outside `in` are zeroed
 * in src first (padding taps, whose values are discarded), so that the
 * span adds zero where it wraps into the neighbouring rows */
static void fold_span(float *restrict plane, float *restrict src, const dg_conv_dims *d, out_rows rs, int64_t shift,
                      int64_t off, ox_range in) {
    int64_t ow = d->ow;
    out_rows v = valid_rows(d, rs, shift);
    if (v.noy == 0 || in.lo >= in.hi) return;
    float *from = src + (v.oy0 - rs.oy0) * ow;
    zero_outside(from, v.noy, ow, in);
    float *to = plane + (v.oy0 + shift) * d->w + off + in.lo; /* from[in.lo]'s pixel, off + in.lo >= 0 */
    int64_t count = v.noy * ow - in.lo - (ow - in.hi);
    from += in.lo;
    for (int64_t e = 0; e < count; e++) to[e] += from[e];
}

/* dx of `nb` images (each [C,H,W]) (+)= the sum of their col entries,
 * laid out as im2col's for the output rows rs, over every tap that reads
 * each pixel (the adjoint of im2col), for the channels cr only, whose rows
 * col holds from its first (a unit of DG_CPU_CONV_BATCH may hold a range
 * of channels alone); `first` zeroes each plane before, so that the
 * blocks of an image's rows add up; each (image, channel) plane is summed
 * by one thread. When span_rows, col's padding entries are zeroed. */
static void col2im(float *col, int64_t ld, const dg_conv_dims *d, int64_t nb, out_rows rs, chan_range cr, bool first,
                   float *dx) {
    int64_t taps = d->kh * d->kw, bc = rs.noy * d->ow;
    bool span = span_rows(d);
#pragma omp parallel for collapse(2) schedule(static) if (!omp_in_parallel())
    for (int64_t j = 0; j < nb; j++)
        for (int64_t ci = cr.c0; ci < cr.c1; ci++) {
            float *plane = dx + (j * d->c + ci) * d->h * d->w;
            if (first) memset(plane, 0, (size_t)(d->h * d->w) * sizeof(float));
            for (int64_t tap = 0; tap < taps; tap++) {
                int64_t ki = tap / d->kw, off = tap % d->kw * d->dw - d->pw;
                ox_range in = inside(d, off);
                float *src = col + ((ci - cr.c0) * taps + tap) * ld + j * bc;
                if (span) {
                    fold_span(plane, src, d, rs, ki * d->dh - d->ph, off, in);
                    continue;
                }
                int64_t oy = rs.oy0, iy = oy * d->sh + ki * d->dh - d->ph;
                for (; oy < rs.oy0 + rs.noy; oy++, iy += d->sh, src += d->ow)
                    if (iy >= 0 && iy < d->h) scatter_add_row(plane + iy * d->w, src, in, d->sw, off);
            }
        }
}

/* dyT[o][j*cols + p] = dy[n0 + j][o][p] for the nb images from n0 (rows ld
 * apart), shared by the threads of the calling region (the passes open
 * one; the channel split calls it inside its own) */
static void transpose_dy(const float *dy, const dg_conv_dims *d, int64_t n0, int64_t nb, float *dyT, int64_t ld) {
#pragma omp for collapse(2) schedule(static)
    for (int64_t j = 0; j < nb; j++)
        for (int64_t o = 0; o < d->o; o++)
            memcpy(dyT + o * ld + j * d->cols, dy + ((n0 + j) * d->o + o) * d->cols, (size_t)d->cols * sizeof(float));
}

/* y[n0 + j][o][p] = yT[o][j*cols + p] for the nb images from n0 (yT's
 * rows ld apart): transpose_dy's inverse */
static void untranspose_y(const float *yT, int64_t ld, const dg_conv_dims *d, int64_t n0, int64_t nb, float *y) {
#pragma omp parallel for collapse(2) schedule(static) if (!omp_in_parallel())
    for (int64_t j = 0; j < nb; j++)
        for (int64_t o = 0; o < d->o; o++)
            memcpy(y + ((n0 + j) * d->o + o) * d->cols, yT + o * ld + j * d->cols, (size_t)d->cols * sizeof(float));
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

/* Pass budgets (see the top). 1 MiB: a pass of the forward or of dx is
 * one image as soon as its columns are as large as 128ch 16x16's (1.2 MB):
 * the GEMM then reads them from cache (two images per pass measured 4-10%
 * slower there); smaller images are batched so that one parallel region
 * unfolds, or folds, several (one image per pass made dx of the 1x1
 * stride-2 downsampling 1.5x slower: a parallel region per image for a few
 * microseconds of folding). 4 MiB: the weight's gradient sums over a
 * pass's columns, so longer passes serve it better: one image of the
 * 64-channel 32x32 and 56x56 layers, 2 of 256ch 14x14, 12 of the 4x4 ones,
 * whose GEMMs would otherwise sum over 16 columns at a time. */
#define UNFOLD_BYTES      ((int64_t)1 << 20)
#define WEIGHT_PASS_BYTES ((int64_t)4 << 20)

/* images per pass: as many as fit `bytes` with `floats_per_image` each, at
 * least 1 and at most the chunk the scratch holds (layout.h) */
static int64_t pass_images(const dg_conv_dims *d, int64_t floats_per_image, int64_t bytes) {
    int64_t nb = floats_per_image > 0 ? bytes / (floats_per_image * (int64_t)sizeof(float)) : d->chunk;
    return nb < 1 ? 1 : min64(nb, d->chunk);
}

/* A pass of the forward or dx whose images have fewer than SIDE_COLUMNS
 * columns each holds enough of them for that many (as the scratch
 * allows), and multiplies them side by side, one GEMM per group over the
 * pass's nb*cols columns: the weights are packed once per pass, not once
 * per image, and the GEMM is wide enough to split between the threads
 * (512ch 4x4: 32 images of 16 columns). */
#define SIDE_COLUMNS 512

int64_t dg__cpu_conv_pass_images(const dg_conv_dims *d, bool side_by_side) {
    int64_t nb = pass_images(d, d->rows * d->cols, UNFOLD_BYTES); /* <= chunk <= n */
    if (side_by_side && d->cols < SIDE_COLUMNS) {
        int64_t wide = min64(d->chunk, (SIDE_COLUMNS + d->cols - 1) / d->cols);
        if (wide > nb) nb = wide;
    }
    return nb;
}

/* Side by side, the forward's GEMM writes y^T [o, nb*cols] into the pass's
 * y, which then goes back to [nb, o, cols] through the columns [rows,
 * nb*cols]: they must hold it, rows = C*KH*KW >= o (every 3x3 layer of
 * ResNet-18; not its 1x1 downsampling, which doubles the channels) */
static bool forward_side_by_side(const dg_conv_dims *d) { return !d->direct && d->rows >= d->o; }

/* dx side by side reads dy^T [o, nb*cols] from the pass's dx before
 * col2im overwrites it: it must fit there */
static bool data_side_by_side(const dg_conv_dims *d) { return !d->direct && d->o * d->cols <= d->c * d->h * d->w; }

/* Where image j of a pass of nb images finds its columns: at
 * j*image_stride from the pass's first, rows ld apart (x itself, or dx,
 * when direct) */
typedef struct col_strides { int64_t ld, image_stride; } col_strides;

static col_strides col_strides_of(const dg_conv_dims *d, int64_t nb) {
    if (d->direct) return (col_strides){d->cols, d->c * d->cols};
    return (col_strides){nb * d->cols, d->cols};
}

/* ---- DG_CPU_CONV_BATCH (see the top) ---- */

/* A thread works an image whose columns are larger than BLOCK_BYTES (half
 * of a 2 MiB L2) in blocks of whole output rows, at least BLOCK_COLUMNS
 * columns each: a block's columns, 0.6 MB for 64ch 56x56 (5 rows, 280
 * columns), are still in the core's L2 when the sgemm reads them, where
 * the whole image's (7.2 MB) had to come back from L3 or memory. Fewer
 * columns would repack the weights too often; an image of small columns
 * (the CNN's 28x28 layer with 9 rows: 28 KB) is one block, as tiny GEMMs
 * measured up to 1.4x slower in blocks (docs/PERF.md). */
#define BLOCK_BYTES   ((int64_t)1 << 20)
#define BLOCK_COLUMNS 256

/* output rows per block: every row of a small image */
static int64_t block_rows(const dg_conv_dims *d) {
    bool small = d->rows * d->cols * (int64_t)sizeof(float) <= BLOCK_BYTES;
    return small ? d->oh : (BLOCK_COLUMNS + d->ow - 1) / d->ow;
}

/* the block of output rows from oy0 within a unit's rows, which end at end */
static out_rows block_of(const dg_conv_dims *d, int64_t oy0, int64_t end) {
    return (out_rows){oy0, min64(block_rows(d), end - oy0)};
}

/* With fewer images than threads, each image is cut into `parts` units so
 * that every thread has work (batch 8 on 16 threads left half the cores
 * idle): the forward and dw cut its output rows, each unit unfolding and
 * multiplying its own; dx cuts its input channels, so that each unit's
 * col2im writes planes of its own (two units of one image's rows would
 * fold into the input rows their taps share), and only where there is one
 * group. Units are never smaller than a row or a channel. */
static int64_t image_parts(const dg_conv_dims *d, int threads, dg_op op) {
    if (d->n >= threads) return 1;
    int64_t parts = threads / d->n;
    if (op == DG_OP_CONV2D_BACKWARD_DATA) return d->groups == 1 ? min64(parts, d->c) : 1;
    return min64(parts, d->oh);
}

/* Unit u of the batch, cut in `parts` per image: image u / parts, and its
 * output rows [oy0, oy_end) (forward, dw; all of them for dx) and input
 * channels (dx; all of them otherwise) */
typedef struct unit { int64_t image, oy0, oy_end; chan_range chans; } unit;

static unit unit_of(const dg_conv_dims *d, int64_t parts, dg_op op, int64_t u) {
    int64_t i = u / parts, p = u % parts;
    if (op == DG_OP_CONV2D_BACKWARD_DATA)
        return (unit){i, 0, d->oh, {d->c * p / parts, d->c * (p + 1) / parts}};
    return (unit){i, d->oh * p / parts, d->oh * (p + 1) / parts, all_channels(d)};
}

/* floats of one thread's slot: the columns of its largest block (none when
 * direct): the block's rows of its largest unit by every tap of every
 * channel, or of its largest range of channels (dx cut); and for the
 * weight's gradient a partial dw [o, R] behind them */
static int64_t slot_floats(const dg_conv_dims *d, int64_t parts, dg_op op) {
    bool data = op == DG_OP_CONV2D_BACKWARD_DATA, weight = op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    int64_t unit_rows = data ? d->oh : (d->oh + parts - 1) / parts;
    int64_t rows = data && parts > 1 ? (d->c + parts - 1) / parts * d->kh * d->kw : d->rows;
    int64_t cols = min64(block_rows(d), unit_rows) * d->ow;
    return (d->direct ? 0 : rows * cols) + (weight ? d->o * d->cg * d->kh * d->kw : 0);
}

/* Below this many columns an image's forward and dx run as the passes by
 * default, side by side (SIDE_COLUMNS): the 4x4 layers, 1.2-2x the batch
 * at batch 32 (the 7x7 ones measured 0.5-0.8x there), where the forward
 * can be: not the widening 1x1 downsampling, whose dx also measured
 * slower side by side (docs/PERF.md) */
#define PASSES_BELOW_COLUMNS 32

int dg__cpu_conv_slots(const dg_conv_dims *d, bool serial_ok, dg_cpu_conv impl, int threads, dg_op op) {
    bool weight = op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    if (impl == DG_CPU_CONV_PASSES || impl == DG_CPU_CONV_CHANNELS || !serial_ok || threads < 2 || d->n < 2) return 0;
    int64_t parts = image_parts(d, threads, op), per = slot_floats(d, parts, op);
    int64_t slots = min64(threads, d->n * parts);
    if (per > 0) slots = min64(slots, dg_conv_scratch_floats(d, weight) / per);
    if (slots < 2) return 0;
    if (impl == DG_CPU_CONV_DEFAULT) {
        if (!weight) {
            bool side = forward_side_by_side(d) && (op == DG_OP_CONV2D || data_side_by_side(d));
            if (side && d->cols < PASSES_BELOW_COLUMNS) return 0;
            return 2 * slots >= threads ? (int)slots : 0;
        }
        bool partial_fits = d->o * d->cg * d->kh * d->kw <= d->rows * d->cols;
        return slots == threads && partial_fits ? (int)slots : 0;
    }
    return (int)slots;
}

/* DEFAULT's choice, which the conv sweep of ResNet-18's CIFAR layers
 * supports (docs/PERF.md, "Pruning the own CPU convolution";
 * reports/h200/host/conv.csv: 16 threads, batch 32, median ms):
 *   forward and dx: shifted where dg__cpu_conv_shift_pays (64ch 32x32 fwd
 *     2.84 / dx 2.90 against the batch's 3.06 / 3.03; on the 2-core VM
 *     16% ahead of the batch in 16 alternated pairs); else the batch
 *     strategy, 1.2x to 17x faster than the passes elsewhere (128ch 16x16
 *     stride 2 dx 1.84 against 2.25, the 1x1 downsampling 0.17-0.21
 *     against 1.1-3.0); the passes where an image has fewer than
 *     PASSES_BELOW_COLUMNS columns, the 4x4 layers (512ch 4x4 fwd 3.22 /
 *     dx 3.65 against the batch's 4.17 / 4.74);
 *   the weight's gradient: the channel split from CHANNELS_MIN_COLUMNS
 *     columns of dw a thread (256ch 8x8 2.84 against the passes' 3.20,
 *     512ch 4x4 2.62 against 2.88), else the batch strategy where
 *     dg__cpu_conv_slots lets it (64ch 32x32 6.92 against the split's
 *     10.2), else the passes (the 256->512ch 1x1 shortcut 0.31 against
 *     the split's 0.36). */
dg_cpu_conv_run dg__cpu_conv_strategy(const dg_conv_dims *d, dg_op op, dg_cpu_conv impl, bool serial_ok,
                                      int threads, int *slots) {
    int none;
    if (!slots) slots = &none;
    *slots = 0;
    bool weight = op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    /* the channel split computes the weight's gradient only, the shift the
     * forward and dx only: their other directions run as DEFAULT */
    if ((impl == DG_CPU_CONV_CHANNELS && !weight) || (impl == DG_CPU_CONV_SHIFT && weight)) impl = DG_CPU_CONV_DEFAULT;
    if (weight) {
        bool channels = impl == DG_CPU_CONV_CHANNELS ||
                        (impl == DG_CPU_CONV_DEFAULT && dg__cpu_conv_channels_pay(d, threads));
        if (channels && dg__cpu_conv_channels_run(d, serial_ok, threads)) return DG_CPU_CONV_RUN_CHANNELS;
    }
    /* the shifted kernels (cpu_conv_shift.c): asked for, or DEFAULT where
     * they pay */
    bool shift = impl == DG_CPU_CONV_SHIFT || (impl == DG_CPU_CONV_DEFAULT && dg__cpu_conv_shift_pays(d, threads, op));
    if (shift && (*slots = dg__cpu_conv_shift_slots(d, serial_ok, threads, op)) > 0) return DG_CPU_CONV_RUN_SHIFT;
    if ((*slots = dg__cpu_conv_slots(d, serial_ok, impl, threads, op)) > 0) return DG_CPU_CONV_RUN_BATCH;
    return DG_CPU_CONV_RUN_PASSES;
}

const char *dg__cpu_conv_run_name(dg_cpu_conv_run run) {
    switch (run) {
    case DG_CPU_CONV_RUN_PASSES:   return "cpu-im2col";
    case DG_CPU_CONV_RUN_BATCH:    return "cpu-im2col-batch";
    case DG_CPU_CONV_RUN_SHIFT:    return "cpu-shift";
    case DG_CPU_CONV_RUN_CHANNELS: return "cpu-im2col-chan";
    }
    return "cpu-im2col";
}

/* the strategy of step s on the threads of the region it runs in */
static dg_cpu_conv_run strategy_of(const dg_conv_dims *d, dg_op op, const dg_cpu_blas *blas, dg_cpu_conv impl,
                                   int *slots) {
    return dg__cpu_conv_strategy(d, op, impl, blas->serial_in_parallel, omp_get_max_threads(), slots);
}

static dg_status conv2d_batch(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas, int slots) {
    const float *x = s->in[0], *w = s->in[1];
    float *y = s->out;
    int64_t r = d->cg * d->kh * d->kw, parts = image_parts(d, omp_get_max_threads(), DG_OP_CONV2D);
    int64_t per = slot_floats(d, parts, DG_OP_CONV2D);
#pragma omp parallel
    {
        int64_t lo, hi;
        int workers = dg__conv_batch_workers(slots);
        float *slot = dg__conv_my_units(s->scratch, d->n * parts, per, workers, &lo, &hi); /* NULL when direct */
        for (int64_t u = lo; u < hi; u++) {
            unit un = unit_of(d, parts, DG_OP_CONV2D, u);
            int64_t i = un.image;
            if (d->direct) { /* y_g [og, uc] = w_g x_g of image i's columns [p0, p0 + uc), the unit's */
                int64_t uc = (un.oy_end - un.oy0) * d->ow, p0 = un.oy0 * d->ow;
                for (int64_t g = 0; g < d->groups; g++)
                    gemm(blas, false, false, d->og, uc, r, w + g * d->og * r, r,
                         x + i * d->c * d->cols + g * r * d->cols + p0, d->cols,
                         y + (i * d->o + g * d->og) * d->cols + p0, d->cols, false);
                continue;
            }
            for (out_rows b = block_of(d, un.oy0, un.oy_end); b.noy > 0; b = block_of(d, b.oy0 + b.noy, un.oy_end)) {
                int64_t bc = b.noy * d->ow, p0 = b.oy0 * d->ow;
                im2col(x, d, i, 1, b, all_channels(d), slot, bc);
                for (int64_t g = 0; g < d->groups; g++) /* y_g [og, bc] of image i's block */
                    gemm(blas, false, false, d->og, bc, r, w + g * d->og * r, r, slot + g * r * bc, bc,
                         y + (i * d->o + g * d->og) * d->cols + p0, d->cols, false);
            }
        }
    }
    return DG_OK;
}

/* dx of a unit: its channels [c0, c1) of image i are the col rows
 * [c0*KH*KW, c1*KH*KW) of each group, col_g = w_g[:, those rows]^T dy_g
 * (a cut unit has one group; an uncut one every channel, R rows a group) */
static dg_status conv2d_backward_data_batch(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas,
                                            int slots) {
    const float *dy = s->in[0], *w = s->in[1];
    float *dx = s->out;
    int64_t r = d->cg * d->kh * d->kw, image = d->c * d->h * d->w, taps = d->kh * d->kw;
    int64_t parts = image_parts(d, omp_get_max_threads(), DG_OP_CONV2D_BACKWARD_DATA);
    int64_t per = slot_floats(d, parts, DG_OP_CONV2D_BACKWARD_DATA);
#pragma omp parallel
    {
        int64_t lo, hi;
        int workers = dg__conv_batch_workers(slots);
        float *slot = dg__conv_my_units(s->scratch, d->n * parts, per, workers, &lo, &hi); /* NULL when direct */
        for (int64_t u = lo; u < hi; u++) {
            unit un = unit_of(d, parts, DG_OP_CONV2D_BACKWARD_DATA, u);
            int64_t i = un.image, c0 = un.chans.c0;
            int64_t ur = parts > 1 ? (un.chans.c1 - c0) * taps : r; /* col rows of a group of the unit */
            if (d->direct) { /* dx_g [ur, cols] = w_g[:, c0..]^T dy_g of image i, into dx itself */
                for (int64_t g = 0; g < d->groups; g++)
                    gemm(blas, true, false, ur, d->cols, d->og, w + g * d->og * r + c0, r,
                         dy + (i * d->o + g * d->og) * d->cols, d->cols, dx + i * image + (g * r + c0) * d->cols,
                         d->cols, false);
                continue;
            }
            for (out_rows b = block_of(d, 0, d->oh); b.noy > 0; b = block_of(d, b.oy0 + b.noy, d->oh)) {
                int64_t bc = b.noy * d->ow, p0 = b.oy0 * d->ow;
                for (int64_t g = 0; g < d->groups; g++) /* col_g [ur, bc] of image i's block */
                    gemm(blas, true, false, ur, bc, d->og, w + g * d->og * r + c0 * taps, r,
                         dy + (i * d->o + g * d->og) * d->cols + p0, d->cols, slot + g * ur * bc, bc, false);
                col2im(slot, bc, d, 1, b, un.chans, b.oy0 == 0, dx + i * image);
            }
        }
    }
    return DG_OK;
}

static dg_status conv2d_backward_weight_batch(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas,
                                              int slots) {
    const float *dy = s->in[0], *x = s->in[1];
    float *dw = s->out;
    int64_t r = d->cg * d->kh * d->kw, wsize = d->o * r;
    int64_t parts = image_parts(d, omp_get_max_threads(), DG_OP_CONV2D_BACKWARD_WEIGHT);
    int64_t per = slot_floats(d, parts, DG_OP_CONV2D_BACKWARD_WEIGHT), part_at = per - wsize;
#pragma omp parallel
    {
        int64_t lo, hi;
        int workers = dg__conv_batch_workers(slots); /* the partials written */
        /* worker 0: columns in slot 0, partial = dw; worker t > 0: columns
         * in slot t, its partial right behind them */
        float *col = dg__conv_my_units(s->scratch, d->n * parts, per, workers, &lo, &hi);
        float *part = omp_get_thread_num() == 0 ? dw : col ? col + part_at : NULL;
        for (int64_t u = lo; u < hi; u++) {
            unit un = unit_of(d, parts, DG_OP_CONV2D_BACKWARD_WEIGHT, u);
            int64_t i = un.image;
            for (out_rows b = block_of(d, un.oy0, un.oy_end); b.noy > 0; b = block_of(d, b.oy0 + b.noy, un.oy_end)) {
                int64_t bc = b.noy * d->ow, p0 = b.oy0 * d->ow;
                bool acc = u > lo || b.oy0 > un.oy0; /* the worker's first block writes its partial */
                im2col(x, d, i, 1, b, all_channels(d), col, bc);
                for (int64_t g = 0; g < d->groups; g++) /* part_g [og, r] (+)= dy_g col_g^T, image i's block */
                    gemm(blas, false, true, d->og, r, bc, dy + (i * d->o + g * d->og) * d->cols + p0, d->cols,
                         col + g * r * bc, bc, part + g * d->og * r, r, acc);
            }
        }
#pragma omp barrier
        /* dw += the partials of workers 1.., each element by one thread, in worker order */
#pragma omp for schedule(static)
        for (int64_t e = 0; e < wsize; e++) {
            float acc = dw[e];
            for (int u = 1; u < workers; u++) acc += ((const float *)s->scratch)[u * per + part_at + e];
            dw[e] = acc;
        }
    }
    return DG_OK;
}

/* ---- DG_CPU_CONV_CHANNELS (see the top): the weight's gradient ---- */

/* A pass holds as many images as keep each thread's columns under this
 * (its L2 share): 256ch 8x8 on 16 threads, 16 channels a thread, is one
 * pass of 32 images (1.2 MB) */
#define CHANNEL_COLUMN_BYTES ((int64_t)1 << 20)

bool dg__cpu_conv_channels_run(const dg_conv_dims *d, bool serial_ok, int threads) {
    return serial_ok && threads >= 2 && d->c >= 2;
}

/* DEFAULT's rule, from the H100 host's conv sweep (16 threads, batch 32,
 * medians of 3 runs, docs/PERF.md), in columns of dw a thread (its
 * channels by the taps): with 144 (the 256- and 512-channel 3x3 layers)
 * the split measured 1.04-1.12x the passes that DEFAULT ran there on the
 * stride-1 layers and 0.97-1.05x on the stride-2 ones; with 72 (128ch
 * 3x3) 0.77-0.85x the batch strategy, with 36 (64ch) 0.69-0.72x, and with
 * 16 (the 1x1 downsampling of 256 channels) 0.75-0.8x the passes */
#define CHANNELS_MIN_COLUMNS 144

bool dg__cpu_conv_channels_pay(const dg_conv_dims *d, int threads) {
    return d->c * d->kh * d->kw >= CHANNELS_MIN_COLUMNS * (int64_t)threads;
}

/* thread t of `team` takes input channels [c*t/team, c*(t+1)/team) */
static chan_range my_channels(const dg_conv_dims *d, int t, int team) {
    return (chan_range){d->c * t / team, d->c * (t + 1) / team};
}

/* Per pass of nb images (count = nb*cols columns), in the scratch's layout
 * (layout.h): col [rows, count], then dyT [o, count] = the pass's dy,
 * transposed by all threads; each thread unfolds its channels' rows of col
 * and, per group g its channels meet, multiplies
 *   dw_g[:, its rows] [og, (cb - ca)*KH*KW] (+)= dyT_g [og, count] col_rows^T
 * the first pass writing. A barrier ends each pass but the last, before
 * dyT is overwritten. */
static dg_status conv2d_backward_weight_channels(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas) {
    const float *dy = s->in[0], *x = s->in[1];
    float *dw = s->out, *col = s->scratch;
    int64_t taps = d->kh * d->kw, r = d->cg * taps;
    int threads = omp_get_max_threads();
    int64_t widest = (d->c + threads - 1) / threads; /* channels of the widest thread's range */
    int64_t pass = pass_images(d, widest * taps * d->cols, CHANNEL_COLUMN_BYTES);
#pragma omp parallel
    {
        chan_range mine = my_channels(d, omp_get_thread_num(), omp_get_num_threads());
        for (int64_t n0 = 0; n0 < d->n; n0 += pass) {
            int64_t nb = min64(pass, d->n - n0), count = nb * d->cols;
            float *dyT = col + d->rows * count;
            im2col(x, d, n0, nb, all_rows(d), mine, col + mine.c0 * taps * count, count);
            transpose_dy(dy, d, n0, nb, dyT, count); /* its implicit barrier: dyT is whole */
            for (int64_t ca = mine.c0; ca < mine.c1;) { /* [ca, cb): mine within group g */
                int64_t g = ca / d->cg, cb = min64(mine.c1, (g + 1) * d->cg);
                gemm(blas, false, true, d->og, (cb - ca) * taps, count, dyT + g * d->og * count, count,
                     col + ca * taps * count, count, dw + g * d->og * r + (ca - g * d->cg) * taps, r, n0 > 0);
                ca = cb;
            }
            if (n0 + pass < d->n) {
#pragma omp barrier
            }
        }
    }
    return DG_OK;
}

/* ---- the ops ---- */

dg_status dg__cpu_conv2d(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    int slots;
    switch (strategy_of(&d, DG_OP_CONV2D, blas, impl, &slots)) {
    case DG_CPU_CONV_RUN_SHIFT:    return dg__cpu_conv2d_shift(s, &d, blas, slots);
    case DG_CPU_CONV_RUN_BATCH:    return conv2d_batch(s, &d, blas, slots);
    case DG_CPU_CONV_RUN_CHANNELS: /* the weight's gradient only: never here */
    case DG_CPU_CONV_RUN_PASSES:   break;
    }
    const float *x = s->in[0], *w = s->in[1];
    float *y = s->out, *col = s->scratch;
    bool side = forward_side_by_side(&d);
    int64_t r = d.cg * d.kh * d.kw, pass = dg__cpu_conv_pass_images(&d, side);
    for (int64_t n0 = 0; n0 < d.n; n0 += pass) {
        int64_t nb = min64(pass, d.n - n0), ld = nb * d.cols;
        if (side && nb > 1) {
            float *yT = y + n0 * d.o * d.cols; /* [o, nb*cols], then [nb, o, cols] */
            im2col(x, &d, n0, nb, all_rows(&d), all_channels(&d), col, ld);
            for (int64_t g = 0; g < d.groups; g++) /* yT_g [og, nb*cols] */
                gemm(blas, false, false, d.og, ld, r, w + g * d.og * r, r, col + g * r * ld, ld, yT + g * d.og * ld,
                     ld, false);
            memcpy(col, yT, (size_t)(d.o * ld) * sizeof(float));
            untranspose_y(col, ld, &d, n0, nb, y);
            continue;
        }
        col_strides cs = col_strides_of(&d, nb);
        const float *src = d.direct ? x + n0 * d.c * d.cols : col;
        if (!d.direct) im2col(x, &d, n0, nb, all_rows(&d), all_channels(&d), col, cs.ld);
        for (int64_t j = 0; j < nb; j++) /* y_g [og, cols] of image n0 + j */
            for (int64_t g = 0; g < d.groups; g++)
                gemm(blas, false, false, d.og, d.cols, r, w + g * d.og * r, r,
                     src + j * cs.image_stride + g * r * cs.ld, cs.ld, y + ((n0 + j) * d.o + g * d.og) * d.cols,
                     d.cols, false);
    }
    return DG_OK;
}

dg_status dg__cpu_conv2d_backward_data(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    int slots;
    switch (strategy_of(&d, DG_OP_CONV2D_BACKWARD_DATA, blas, impl, &slots)) {
    case DG_CPU_CONV_RUN_SHIFT:    return dg__cpu_conv2d_backward_data_shift(s, &d, blas, slots);
    case DG_CPU_CONV_RUN_BATCH:    return conv2d_backward_data_batch(s, &d, blas, slots);
    case DG_CPU_CONV_RUN_CHANNELS: /* the weight's gradient only: never here */
    case DG_CPU_CONV_RUN_PASSES:   break;
    }
    const float *dy = s->in[0], *w = s->in[1];
    float *dx = s->out;
    bool side = data_side_by_side(&d);
    int64_t r = d.cg * d.kh * d.kw, pass = dg__cpu_conv_pass_images(&d, side);
    for (int64_t n0 = 0; n0 < d.n; n0 += pass) {
        int64_t nb = min64(pass, d.n - n0), ld = nb * d.cols;
        float *dx_pass = dx + n0 * d.c * d.h * d.w;
        if (side && nb > 1) {
            float *dyT = dx_pass; /* [o, nb*cols], read before col2im writes dx */
#pragma omp parallel if (!omp_in_parallel())
            transpose_dy(dy, &d, n0, nb, dyT, ld);
            for (int64_t g = 0; g < d.groups; g++) /* col_g [r, nb*cols] */
                gemm(blas, true, false, r, ld, d.og, w + g * d.og * r, r, dyT + g * d.og * ld, ld,
                     (float *)s->scratch + g * r * ld, ld, false);
            col2im(s->scratch, ld, &d, nb, all_rows(&d), all_channels(&d), true, dx_pass);
            continue;
        }
        col_strides cs = col_strides_of(&d, nb);
        float *col = d.direct ? dx_pass : s->scratch;
        for (int64_t j = 0; j < nb; j++) /* col_g [r, cols] of image n0 + j */
            for (int64_t g = 0; g < d.groups; g++)
                gemm(blas, true, false, r, d.cols, d.og, w + g * d.og * r, r,
                     dy + ((n0 + j) * d.o + g * d.og) * d.cols, d.cols, col + j * cs.image_stride + g * r * cs.ld,
                     cs.ld, false);
        if (!d.direct) col2im(col, cs.ld, &d, nb, all_rows(&d), all_channels(&d), true, dx_pass);
    }
    return DG_OK;
}

dg_status dg__cpu_conv2d_backward_weight(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl) {
    dg_conv_dims d = dg_conv_dims_of(s->node);
    dg_status st = need_scratch(s, &d);
    if (st) return st;
    int slots;
    switch (strategy_of(&d, DG_OP_CONV2D_BACKWARD_WEIGHT, blas, impl, &slots)) {
    case DG_CPU_CONV_RUN_CHANNELS: return conv2d_backward_weight_channels(s, &d, blas);
    case DG_CPU_CONV_RUN_BATCH:    return conv2d_backward_weight_batch(s, &d, blas, slots);
    case DG_CPU_CONV_RUN_SHIFT:    /* the forward and dx only: never here */
    case DG_CPU_CONV_RUN_PASSES:   break;
    }
    const float *dy = s->in[0], *x = s->in[1];
    float *dw = s->out;
    /* per pass col [rows, count], then dyT [o, count] behind it (one image's
     * dy is already [o, cols]: read in place); per group dw_g [og, r] =
     * dyT_g col_g^T, the first pass writing, the others adding */
    int64_t r = d.cg * d.kh * d.kw, pass = pass_images(&d, (d.rows + d.o) * d.cols, WEIGHT_PASS_BYTES);
    for (int64_t n0 = 0; n0 < d.n; n0 += pass) {
        int64_t nb = min64(pass, d.n - n0), count = nb * d.cols;
        float *col = s->scratch;
        const float *dyT = dy + n0 * d.o * d.cols;
        im2col(x, &d, n0, nb, all_rows(&d), all_channels(&d), col, count);
        if (nb > 1) {
#pragma omp parallel if (!omp_in_parallel())
            transpose_dy(dy, &d, n0, nb, col + d.rows * count, count);
            dyT = col + d.rows * count;
        }
        for (int64_t g = 0; g < d.groups; g++)
            gemm(blas, false, true, d.og, r, count, dyT + g * d.og * count, count, col + g * r * count, count,
                 dw + g * d.og * r, r, n0 > 0);
    }
    return DG_OK;
}
