/* cpu_conv_shift.c: the forward and dx of convolutions of both strides 1
 * without im2col (DG_CPU_CONV_SHIFT, cpu_backend.h).
 *
 * With strides 1, output (oy, ox) of tap (ki, kj) reads the zero-padded
 * input at (oy + ki*dh, ox + kj*dw). Lay each padded input plane out with
 * its rows WP = W + 2*pw apart and index the outputs on the same grid,
 * q = oy*WP + ox (ox in [0, WP): the last WP - OW of each row are not
 * outputs, the "wrap" columns). Then tap (ki, kj) reads the padded plane
 * at q + ki*dh*WP + kj*dw for every q: im2col's rows for that tap are the
 * padded planes themselves, shifted, rows (channels) L apart. So, per
 * group, with wt the weights tap by tap, wt[tap] [og, cg]:
 *   y_ext [og, OH*WP]  = sum over taps of wt[tap] xpad[cg, shifted by tap]
 * one sgemm a tap, accumulating, and y is y_ext without the wrap columns.
 * The padded copy is one pass over x where im2col writes KH*KW of them;
 * the GEMMs have K = cg instead of cg*KH*KW (measured as fast on
 * ResNet-18's 3x3 layers: docs/PERF.md).
 * dx is the same stride-1 convolution of dy, padded by dh*(KH-1) - ph
 * rows and dw*(KW-1) - pw columns, with the taps flipped and wt[tap]
 * transposed: no col2im. The weight's gradient runs as DEFAULT: shifted
 * (a GEMM a tap of dy on the grid against the shifted planes, summed from
 * per-thread partials) it never beat the batch strategy or the channel
 * split in the conv sweep (docs/PERF.md, "Pruning the own CPU
 * convolution"), and was removed.
 *
 * The work is spread as DG_CPU_CONV_BATCH's: the first `slots` threads
 * of the team take contiguous ranges of units, a unit being an image, or
 * with fewer images than threads a range of the result's rows (y's or
 * dx's); each thread pads its unit's input window into its slot and
 * multiplies with a one-thread sgemm. The scratch holds, from its start:
 * the weights tap by tap, then the slots. */
#include <string.h>

#include "../core/layout.h"
#include "cpu_conv_batch.h"
#include "cpu_kernels.h"

/* The stride-1 convolution that a direction computes, as a forward one:
 * source planes [cin, hin, win] padded by `top` rows and `left` columns
 * (as many after) into rows wp apart, result planes [cout, hout, wout] */
typedef struct shift_geom {
    int64_t cin, hin, win, top, left, wp;
    int64_t cout, hout, wout;
} shift_geom;

/* the forward reads x padded as the node says; dx is computed from dy
 * padded to the full correlation */
static shift_geom geom_of(const dg_conv_dims *d, dg_op op) {
    if (op == DG_OP_CONV2D_BACKWARD_DATA) {
        int64_t top = d->dh * (d->kh - 1) - d->ph, left = d->dw * (d->kw - 1) - d->pw;
        return (shift_geom){d->o, d->oh, d->ow, top, left, d->ow + 2 * left, d->c, d->h, d->w};
    }
    return (shift_geom){d->c, d->h, d->w, d->ph, d->pw, d->w + 2 * d->pw, d->o, d->oh, d->ow};
}

bool dg__cpu_conv_shift_applies(const dg_conv_dims *d) {
    return d->sh == 1 && d->sw == 1 && !d->direct && d->ph <= d->dh * (d->kh - 1) && d->pw <= d->dw * (d->kw - 1);
}

/* With fewer images than threads each image's result rows are cut into
 * `parts` units so that every thread has work; never less than a row */
static int64_t shift_parts(const dg_conv_dims *d, const shift_geom *g, int threads) {
    return d->n >= threads ? 1 : min64(threads / d->n, g->hout);
}

/* Unit u: image u / parts, result rows [r0, r1) */
typedef struct shift_unit { int64_t image, r0, r1; } shift_unit;

static shift_unit unit_of(const shift_geom *g, int64_t parts, int64_t u) {
    int64_t p = u % parts;
    return (shift_unit){u / parts, g->hout * p / parts, g->hout * (p + 1) / parts};
}

/* floats of one padded source channel for `rows` result rows: the rows
 * the taps read, and (KW-1)*dw behind them that the last wrap columns
 * read (their results are dropped; zero, so that nothing is undefined) */
static int64_t window_floats(const dg_conv_dims *d, const shift_geom *g, int64_t rows) {
    return (rows + d->dh * (d->kh - 1)) * g->wp + d->dw * (d->kw - 1);
}

/* slots start on a 64-byte line of their own */
static int64_t round_line(int64_t floats) { return (floats + 15) / 16 * 16; }

/* the weights tap by tap at the scratch's start */
static int64_t shared_floats(const dg_conv_dims *d) { return round_line(d->o * d->cg * d->kh * d->kw); }

/* one slot: the padded window of the largest unit's source, then its
 * result on the wrap grid */
static int64_t slot_floats(const dg_conv_dims *d, const shift_geom *g, int64_t parts) {
    int64_t rows = (g->hout + parts - 1) / parts;
    return round_line(g->cin * window_floats(d, g, rows) + g->cout * rows * g->wp);
}

/* DEFAULT's rule, from the H100 host's conv sweep (16 threads, medians of
 * 2-5 runs at batch 32, docs/PERF.md): the forward and dx shifted gained
 * 19-25% and 3-12% on 64ch 32x32 and 56x56, 15-23% on 128ch 28x28, 1-5%
 * on 128ch 16x16, but lost where a GEMM's K or M is a few channels (the
 * 3-channel stem: 0.3-0.5x), where the wrap columns are a fifth of the
 * grid (256ch 8x8: 0.88-0.92x) and where units are short (128ch 16x16 at
 * batch 8, cut in 2: 144 columns, 0.8-1.0x). Measured again beside the
 * others (docs/PERF.md, "Pruning the own CPU convolution"): 64ch 32x32
 * forward / dx shifted 2.84 / 2.90 ms against the batch's 3.06 / 3.03 on
 * the 16-core AMX host (reports/h200/host/conv.csv, batch 32), and 16%
 * ahead of it in the medians of 16 alternated pairs on the 2-core VM at
 * batch 32; on 128ch 16x16 the two machines disagree (the host's shift
 * 4-11% behind the batch, the VM's batch 1.00-1.16x the shift's time),
 * inside both spreads, so the rule stays. */
#define SHIFT_MIN_CHANNELS 16
#define SHIFT_MIN_COLUMNS  256

bool dg__cpu_conv_shift_pays(const dg_conv_dims *d, int threads, dg_op op) {
    if (op == DG_OP_CONV2D_BACKWARD_WEIGHT || !dg__cpu_conv_shift_applies(d)) return false;
    if (d->cg < SHIFT_MIN_CHANNELS || d->og < SHIFT_MIN_CHANNELS) return false;
    shift_geom g = geom_of(d, op);
    int64_t parts = shift_parts(d, &g, threads), unit_rows = g.hout / parts; /* the shortest unit's */
    return 8 * (g.wp - g.wout) <= g.wp && unit_rows * g.wp >= SHIFT_MIN_COLUMNS;
}

int dg__cpu_conv_shift_slots(const dg_conv_dims *d, bool serial_ok, int threads, dg_op op) {
    if (op == DG_OP_CONV2D_BACKWARD_WEIGHT || !serial_ok || threads < 2 || !dg__cpu_conv_shift_applies(d)) return 0;
    shift_geom g = geom_of(d, op);
    int64_t parts = shift_parts(d, &g, threads), per = slot_floats(d, &g, parts);
    int64_t room = dg_conv_scratch_floats(d, false) - shared_floats(d);
    int64_t slots = min64(min64(threads, d->n * parts), room > 0 ? room / per : 0);
    return slots < 2 ? 0 : (int)slots;
}

/* dst [cin channels, L floats apart] = the padded rows [r0, r0 + rows)
 * of the source planes src [cin, hin, win] (r0 counted in padded rows),
 * the floats between a channel's last row and the next channel zero */
static void pad_window(float *restrict dst, const float *restrict src, const shift_geom *g, int64_t r0, int64_t rows,
                       int64_t L) {
    int64_t right = g->wp - g->left - g->win;
    for (int64_t c = 0; c < g->cin; c++) {
        float *out = dst + c * L;
        const float *plane = src + c * g->hin * g->win;
        for (int64_t r = 0; r < rows; r++, out += g->wp) {
            int64_t sr = r0 + r - g->top;
            if (sr < 0 || sr >= g->hin) {
                memset(out, 0, (size_t)g->wp * sizeof(float));
                continue;
            }
            memset(out, 0, (size_t)g->left * sizeof(float));
            memcpy(out + g->left, plane + sr * g->win, (size_t)g->win * sizeof(float));
            memset(out + g->left + g->win, 0, (size_t)right * sizeof(float));
        }
        memset(out, 0, (size_t)(L - rows * g->wp) * sizeof(float));
    }
}

/* dst's planes [cout, hout, wout], rows [r0, r0 + rows) = ext [cout,
 * rows*wp] without the wrap columns */
static void compact_rows(float *restrict dst, const float *restrict ext, const shift_geom *g, int64_t r0,
                         int64_t rows) {
    for (int64_t c = 0; c < g->cout; c++)
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + (c * g->hout + r0 + r) * g->wout, ext + (c * rows + r) * g->wp,
                   (size_t)g->wout * sizeof(float));
}

/* wt[g][tap] [og, cg] = w[g*og + o][c][tap]: by every thread of the region,
 * then a barrier */
static void weights_by_tap(float *restrict wt, const float *restrict w, const dg_conv_dims *d) {
    int64_t taps = d->kh * d->kw, size = d->o * d->cg * taps;
#pragma omp for schedule(static)
    for (int64_t e = 0; e < size; e++) { /* e = (o*cg + c)*taps + tap, w's order */
        int64_t tap = e % taps, c = e / taps % d->cg, o = e / taps / d->cg;
        int64_t g = o / d->og;
        wt[((g * taps + tap) * d->og + o % d->og) * d->cg + c] = w[e];
    }
}

/* the shift of tap t in a padded window */
static int64_t tap_offset(const dg_conv_dims *d, const shift_geom *g, int64_t t) {
    return t / d->kw * d->dh * g->wp + t % d->kw * d->dw;
}

/* forward and dx: ext [cout, rows*wp] = sum over taps of A_tap win_tap,
 * group by group; the forward's A_tap is wt[tap], dx's wt[flipped tap]^T */
static void multiply_taps(const dg_cpu_blas *blas, const dg_conv_dims *d, const shift_geom *g, const float *wt,
                          const float *win, int64_t L, int64_t rows, float *ext, bool data) {
    int64_t taps = d->kh * d->kw, n = rows * g->wp, gin = g->cin / d->groups, gout = g->cout / d->groups;
    for (int64_t grp = 0; grp < d->groups; grp++)
        for (int64_t t = 0; t < taps; t++) {
            int64_t wtap = data ? taps - 1 - t : t;
            const float *a = wt + (grp * taps + wtap) * d->og * d->cg;
            blas->sgemm(blas->ctx, data, false, (int)gout, (int)n, (int)gin, a, (int)d->cg, /* [og, cg] either way */
                        win + grp * gin * L + tap_offset(d, g, t), (int)L, ext + grp * gout * n, (int)n, t > 0);
        }
}

/* the forward (y from x) or dx (from dy): src and dst the op's */
static void shift_forward(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas, int slots, dg_op op) {
    bool data = op == DG_OP_CONV2D_BACKWARD_DATA;
    const float *src = s->in[0], *w = s->in[1];
    float *dst = s->out, *wt = s->scratch;
    shift_geom g = geom_of(d, op);
    int64_t parts = shift_parts(d, &g, omp_get_max_threads()), per = slot_floats(d, &g, parts);
    int64_t unit_rows = (g.hout + parts - 1) / parts, L = window_floats(d, &g, unit_rows);
#pragma omp parallel
    {
        weights_by_tap(wt, w, d);
        int64_t lo, hi;
        float *slot = dg__conv_my_units(wt + shared_floats(d), d->n * parts, per,
                                        dg__conv_batch_workers(slots), &lo, &hi);
        float *ext = slot ? slot + g.cin * L : NULL;
        for (int64_t u = lo; u < hi; u++) {
            shift_unit un = unit_of(&g, parts, u);
            int64_t rows = un.r1 - un.r0;
            pad_window(slot, src + un.image * g.cin * g.hin * g.win, &g, un.r0, rows + d->dh * (d->kh - 1), L);
            multiply_taps(blas, d, &g, wt, slot, L, rows, ext, data);
            compact_rows(dst + un.image * g.cout * g.hout * g.wout, ext, &g, un.r0, rows);
        }
    }
}

dg_status dg__cpu_conv2d_shift(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas, int slots) {
    shift_forward(s, d, blas, slots, DG_OP_CONV2D);
    return DG_OK;
}

dg_status dg__cpu_conv2d_backward_data_shift(const dg_step *s, const dg_conv_dims *d, const dg_cpu_blas *blas,
                                             int slots) {
    shift_forward(s, d, blas, slots, DG_OP_CONV2D_BACKWARD_DATA);
    return DG_OK;
}
