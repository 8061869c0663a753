/* conv_check.c: sampled float64 entries of a convolution's output
 * (conv_check.h), from the definition of each form, with its own index
 * arithmetic (the geometry from the node's shapes and its public options,
 * dg_node_conv2d_opts; none of the library's layout code, none of the
 * backends' im2col columns): x [N,C,H,W], w [O,cg,KH,KW],
 * y and dy [N,O,OH,OW], group g = channels [g*cg, (g+1)*cg) of x and
 * [g*og, (g+1)*og) of y,
 *   y[n,o,oy,ox]   = sum_{ci,ki,kj} x[n, g*cg+ci, iy, ix] w[o,ci,ki,kj]
 *   with iy = oy*sh - ph + ki*dh, ix = ox*sw - pw + kj*dw inside x;
 *   dx[n,c,iy,ix]  = sum over the (o, ki, kj, oy, ox) whose tap lands on
 *                    (iy, ix): dy[n,o,oy,ox] w[o, c - g*cg, ki, kj];
 *   dw[o,ci,ki,kj] = sum_{n,oy,ox} dy[n,o,oy,ox] x[n, g*cg+ci, iy, ix]. */
#include "core/check/conv_check.h"

#include <math.h>

#include "core/rng.h"
#include "core/status.h"

typedef struct dot { double sum, abs_sum; } dot;

/* a convolution's geometry: x [n,c,h,w], y [n,o,oh,ow], w [o,cg,kh,kw];
 * og output channels a group, cols = oh*ow */
typedef struct conv_geom {
    int64_t n, c, h, w, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, cg, og, cols;
} conv_geom;

/* read from the shapes each form has: conv2d (x, w) -> y, backward-data
 * (dy, w) -> dx, backward-weight (dy, x) -> dw */
static conv_geom geom_of(const dg_node *nd) {
    dg_shape xs = nd->shape, ys = nd->shape, ws = nd->shape;
    if (nd->op == DG_OP_CONV2D) {
        xs = nd->in[0]->shape;
        ws = nd->in[1]->shape;
    } else if (nd->op == DG_OP_CONV2D_BACKWARD_DATA) {
        ys = nd->in[0]->shape;
        ws = nd->in[1]->shape;
    } else {
        ys = nd->in[0]->shape;
        xs = nd->in[1]->shape;
    }
    dg_conv2d_opts o = dg_node_conv2d_opts(nd);
    int64_t groups = o.groups > 0 ? o.groups : 1;
    return (conv_geom){.n = xs.d[0], .c = xs.d[1], .h = xs.d[2], .w = xs.d[3], .o = ys.d[1], .oh = ys.d[2],
                       .ow = ys.d[3], .kh = ws.d[2], .kw = ws.d[3], .sh = o.stride[0], .sw = o.stride[1],
                       .ph = o.pad[0], .pw = o.pad[1], .dh = o.dilation[0], .dw = o.dilation[1], .cg = ws.d[1],
                       .og = ys.d[1] / groups, .cols = ys.d[2] * ys.d[3]};
}

static void add_term(dot *d, double a, double b) {
    d->sum += a * b;
    d->abs_sum += fabs(a * b);
}

/* the flat index of [n,c,y,x] in a [N,C,H,W] tensor */
static int64_t at4(int64_t n, int64_t c, int64_t y, int64_t x, int64_t C, int64_t H, int64_t W) {
    return ((n * C + c) * H + y) * W + x;
}

static dot forward_entry(const conv_geom *d, const float *x, const float *w, int64_t i) {
    int64_t ox = i % d->ow, oy = i / d->ow % d->oh, o = i / d->cols % d->o, n = i / (d->cols * d->o);
    int64_t g = o / d->og;
    dot r = {0, 0};
    for (int64_t ci = 0; ci < d->cg; ci++)
        for (int64_t ki = 0; ki < d->kh; ki++)
            for (int64_t kj = 0; kj < d->kw; kj++) {
                int64_t iy = oy * d->sh - d->ph + ki * d->dh, ix = ox * d->sw - d->pw + kj * d->dw;
                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                add_term(&r, x[at4(n, g * d->cg + ci, iy, ix, d->c, d->h, d->w)],
                         w[((o * d->cg + ci) * d->kh + ki) * d->kw + kj]);
            }
    return r;
}

/* the output position whose tap k (stride s, padding p, dilation dl) lands
 * on input position in, or -1 */
static int64_t tap_source(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dl, int64_t out_extent) {
    int64_t t = in + p - k * dl;
    if (t < 0 || t % s) return -1;
    return t / s < out_extent ? t / s : -1;
}

static dot backward_data_entry(const conv_geom *d, const float *dy, const float *w, int64_t i) {
    int64_t ix = i % d->w, iy = i / d->w % d->h, c = i / (d->h * d->w) % d->c, n = i / (d->h * d->w * d->c);
    int64_t g = c / d->cg, ci = c - g * d->cg;
    dot r = {0, 0};
    for (int64_t o = g * d->og; o < (g + 1) * d->og; o++)
        for (int64_t ki = 0; ki < d->kh; ki++) {
            int64_t oy = tap_source(iy, ki, d->sh, d->ph, d->dh, d->oh);
            if (oy < 0) continue;
            for (int64_t kj = 0; kj < d->kw; kj++) {
                int64_t ox = tap_source(ix, kj, d->sw, d->pw, d->dw, d->ow);
                if (ox < 0) continue;
                add_term(&r, dy[at4(n, o, oy, ox, d->o, d->oh, d->ow)],
                         w[((o * d->cg + ci) * d->kh + ki) * d->kw + kj]);
            }
        }
    return r;
}

static dot backward_weight_entry(const conv_geom *d, const float *dy, const float *x, int64_t i) {
    int64_t kj = i % d->kw, ki = i / d->kw % d->kh, ci = i / (d->kh * d->kw) % d->cg, o = i / (d->kh * d->kw * d->cg);
    int64_t c = o / d->og * d->cg + ci;
    dot r = {0, 0};
    for (int64_t n = 0; n < d->n; n++)
        for (int64_t oy = 0; oy < d->oh; oy++) {
            int64_t iy = oy * d->sh - d->ph + ki * d->dh;
            if (iy < 0 || iy >= d->h) continue;
            for (int64_t ox = 0; ox < d->ow; ox++) {
                int64_t ix = ox * d->sw - d->pw + kj * d->dw;
                if (ix < 0 || ix >= d->w) continue;
                add_term(&r, dy[at4(n, o, oy, ox, d->o, d->oh, d->ow)], x[at4(n, c, iy, ix, d->c, d->h, d->w)]);
            }
        }
    return r;
}

dg_status conv_check_sample(const dg_node *nd, const float *a, const float *b, uint64_t seed, conv_sample *s, int n) {
    if (!nd || !a || !b || !s || n < 2) return dg_fail(DG_ERR_INVALID, "conv check: NULL argument or %d samples", n);
    if (nd->op != DG_OP_CONV2D && nd->op != DG_OP_CONV2D_BACKWARD_DATA && nd->op != DG_OP_CONV2D_BACKWARD_WEIGHT)
        return dg_fail(DG_ERR_INVALID, "conv check: node '%s' is a %s, not a convolution", nd->name,
                        dg_op_name(nd->op));
    conv_geom d = geom_of(nd);
    int64_t numel = dg_node_numel(nd);
    dg_rng r = dg_rng_new(seed);
    for (int j = 0; j < n; j++)
        s[j].index = j == 0 ? 0 : j == 1 ? numel - 1 : (int64_t)(dg_rng_u64(&r) % (uint64_t)numel);
    /* backward-weight's dot products run over the whole batch: in parallel */
#pragma omp parallel for schedule(dynamic)
    for (int j = 0; j < n; j++) {
        dot e = nd->op == DG_OP_CONV2D             ? forward_entry(&d, a, b, s[j].index)
              : nd->op == DG_OP_CONV2D_BACKWARD_DATA ? backward_data_entry(&d, a, b, s[j].index)
                                                     : backward_weight_entry(&d, a, b, s[j].index);
        s[j].exact = e.sum;
        s[j].abs_sum = e.abs_sum;
    }
    return DG_OK;
}

double conv_check_error(const conv_sample *s, int n, const float *out) {
    double worst = 0;
    for (int j = 0; j < n; j++) {
        double got = out[s[j].index], diff = fabs(got - s[j].exact);
        if (!isfinite(got)) return INFINITY;
        /* no terms (every tap in the padding): the entry must be exactly 0 */
        double err = s[j].abs_sum > 0 ? diff / s[j].abs_sum : diff > 0 ? INFINITY : 0;
        worst = err > worst ? err : worst;
    }
    return worst;
}
