/* sweep_conv_report.c: the conv sweep's report. Charts conv_gflops_fwd,
 * conv_gflops_bwd-data and conv_gflops_bwd-weight: GFLOP/s of every
 * implementation per layer shape (x = the shape's number in the summary),
 * each at the largest batch it ran, against the sgemm ceilings. Summary:
 * the shapes, a table per direction for the 3x3 layers (GFLOP/s,
 * implicit/im2col, the CPU's fraction of its sgemm ceiling), and the
 * GPU/CPU crossover batch per shape family. */
#include <math.h>
#include <string.h>

#include "conv_cases.h"
#include "sweep.h"

/* the measured row of a case by im at batch `at`, or (at = 0) at the
 * largest batch it was measured; NULL where none */
static const csv_rec *pick(const bench_table *t, const char *name, const conv_impl *im, long long at) {
    const csv_rec *best = NULL;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, im->name) || r->transfer != im->transfer ||
            !bench_row_measured(r) || (at && r->batch != at))
            continue;
        if (!best || r->batch > best->batch) best = r;
    }
    return best;
}

/* a row's GFLOP/s as a chart point at x, its bar from the slowest and the
 * fastest run */
static void add_point(bench_series *s, double x, const csv_rec *r) {
    if (!r || s->n == BENCH_MAX_PTS || !isfinite(r->gflops)) return;
    bool bars = isfinite(r->min_ms) && isfinite(r->max_ms) && r->min_ms > 0;
    s->x[s->n] = x;
    s->y[s->n] = r->gflops;
    s->lo[s->n] = bars ? r->gflops * r->median_ms / r->max_ms : r->gflops;
    s->hi[s->n] = bars ? r->gflops * r->median_ms / r->min_ms : r->gflops;
    s->noisy[s->n++] = !strcmp(r->status, "noisy");
}

static const char *impl_title(const conv_impl *im, char *buf, size_t n) {
    snprintf(buf, n, "%s%s", im->name, im->transfer ? " incl. transfers" : "");
    return buf;
}

static void draw_direction(bench_report *rep, const bench_table *t, const conv_shape_list *l, int d) {
    char file[48], title[128], name[48];
    snprintf(file, sizeof file, "conv_gflops_%s", conv_dir_name[d]);
    snprintf(title, sizeof title, "conv2d %s: each implementation at its largest batch", conv_dir_name[d]);
    bench_chart c = {file, title, "layer shape (# in summary.md)", "GFLOP/s", true, true, .vline = NAN};
    for (int i = 0; i < CONV_N_IMPLS; i++) {
        bench_series s = {.n = 0};
        impl_title(&conv_impls[i], s.title, sizeof s.title);
        for (int k = 0; k < l->n; k++) {
            conv_case_name(&l->s[k], d, name, sizeof name);
            add_point(&s, k + 1, pick(t, name, &conv_impls[i], 0));
        }
        bench_chart_add(&c, s);
    }
    bench_chart_hline(&c, rep->ceil.cpu_gflops, "CPU sgemm ceiling (OpenBLAS)");
    bench_chart_hline(&c, rep->ceil.gpu_gflops, "GPU sgemm ceiling (cuBLAS fp32)");
    bench_chart_draw(rep, &c);
}

/* the largest batch any kernel row of the case was measured at; 0: none */
static long long largest_batch(const bench_table *t, const char *name) {
    long long b = 0;
    for (int i = 0; i < CONV_N_IMPLS; i++) {
        const csv_rec *r = conv_impls[i].transfer ? NULL : pick(t, name, &conv_impls[i], 0);
        if (r && r->batch > b) b = r->batch;
    }
    return b;
}

/* GFLOP/s of im at batch b into buf, else at its own largest batch (named
 * in buf); NaN and "-" where it was never measured */
static double cell(const bench_table *t, const char *name, const conv_impl *im, long long b, char *buf, size_t n) {
    const csv_rec *r = pick(t, name, im, b);
    bool elsewhere = !r && (r = pick(t, name, im, 0)) != NULL;
    double v = r ? r->gflops : NAN;
    bench_fmt_num(v, "%.1f", buf, n);
    if (elsewhere) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, " (batch %lld)", r->batch);
    }
    return v;
}

static void write_shapes(FILE *f, const bench_table *t, const conv_shape_list *l) {
    fprintf(f, "| # | shape | layer (input -> output) | largest batch |\n|---|---|---|---|\n");
    for (int k = 0; k < l->n; k++) {
        const conv_shape *s = &l->s[k];
        long long b = 0;
        for (int d = 0; d < CONV_N_DIRS; d++) {
            char name[48];
            conv_case_name(s, d, name, sizeof name);
            long long bd = largest_batch(t, name);
            b = bd > b ? bd : b;
        }
        if (!b) continue; /* not in this folder's rows (--case, or not measured) */
        int oh = (s->h + 2 * s->pad - s->kh) / s->stride + 1, ow = (s->w + 2 * s->pad - s->kw) / s->stride + 1;
        fprintf(f, "| %d | %s | %dx%dx%d -> %dx%dx%d, %dx%d stride %d pad %d | %lld |\n", k + 1, s->name, s->c, s->h,
                s->w, s->o, oh, ow, s->kh, s->kw, s->stride, s->pad, b);
    }
    fprintf(f, "\n");
}

static void write_direction(bench_report *rep, const bench_table *t, const conv_shape_list *l, int d) {
    FILE *f = rep->sum;
    fprintf(f, "### %s: 3x3 layers, GFLOP/s at the largest batch\n\n"
               "| # | shape | batch | cpu-im2col | gpu-im2col | gpu-implicit | implicit / im2col | CPU / CPU sgemm "
               "ceiling |\n|---|---|---|---|---|---|---|---|\n", conv_dir_name[d]);
    for (int k = 0; k < l->n; k++) {
        const conv_shape *s = &l->s[k];
        char name[48], c[48], g[48], i[48], ratio[16], frac[16];
        conv_case_name(s, d, name, sizeof name);
        long long b = largest_batch(t, name);
        if (s->kh != 3 || s->kw != 3 || !b) continue;
        double cpu = cell(t, name, &conv_impls[CONV_CPU], b, c, sizeof c);
        cell(t, name, &conv_impls[CONV_GPU_IM2COL], b, g, sizeof g);
        cell(t, name, &conv_impls[CONV_GPU_IMPLICIT], b, i, sizeof i);
        /* the ratio at one batch only */
        const csv_rec *ri = pick(t, name, &conv_impls[CONV_GPU_IMPLICIT], b);
        const csv_rec *rg = pick(t, name, &conv_impls[CONV_GPU_IM2COL], b);
        bench_fmt_num(ri && rg ? ri->gflops / rg->gflops : NAN, "%.2f", ratio, sizeof ratio);
        bench_fmt_num(100.0 * cpu / rep->ceil.cpu_gflops, "%.0f%%", frac, sizeof frac);
        fprintf(f, "| %d | %s | %lld | %s | %s | %s | %s | %s |\n", k + 1, s->name, b, c, g, i, ratio, frac);
    }
    fprintf(f, "\n");
}

/* median ms of a case by im over the batch (x), in file order */
static bench_series by_batch(const bench_table *t, const char *name, const conv_impl *im) {
    bench_series s = {.n = 0};
    for (int i = 0; i < t->n && s.n < BENCH_MAX_PTS; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, im->name) || r->transfer != im->transfer ||
            !bench_row_measured(r))
            continue;
        s.x[s.n] = (double)r->batch;
        s.y[s.n] = r->median_ms;
        s.lo[s.n] = isfinite(r->min_ms) ? r->min_ms : r->median_ms;
        s.hi[s.n] = isfinite(r->max_ms) ? r->max_ms : r->median_ms;
        s.noisy[s.n++] = !strcmp(r->status, "noisy");
    }
    return s;
}

/* The crossover of the family's worst shape in direction d: the batch
 * from which gpu (kernels, or with transfers) beats cpu-im2col on every
 * shape of the family measured on both. */
static void family_crossover(const bench_table *t, const conv_shape_list *l, const char *family, int d, int gpu,
                             char *buf, size_t n) {
    int measured = 0, none = 0, at_first = 0; /* shapes: on both, never crossed, GPU faster at every batch */
    double worst = NAN;
    const char *worst_name = NULL, *none_name = NULL;
    for (int k = 0; k < l->n; k++) {
        if (strcmp(l->s[k].family, family)) continue;
        char name[48];
        conv_case_name(&l->s[k], d, name, sizeof name);
        bench_series c = by_batch(t, name, &conv_impls[CONV_CPU]), g = by_batch(t, name, &conv_impls[gpu]);
        bench_series sp = bench_speedup(&c, &g, "");
        if (!sp.n) continue;
        measured++;
        double x = bench_crossover(&sp);
        if (isnan(x)) {
            none_name = none++ ? none_name : l->s[k].name;
            continue;
        }
        at_first += x == sp.x[0];
        if (isnan(worst) || x > worst) {
            worst = x;
            worst_name = l->s[k].name;
        }
    }
    if (!measured) snprintf(buf, n, "n/a (not measured on both)");
    else if (none) snprintf(buf, n, "none for %d of %d shapes (CPU faster at the largest batch, e.g. %s)", none,
                            measured, none_name);
    else if (at_first == measured) snprintf(buf, n, "<= %.0f (GPU faster at every batch, %d shapes)", worst, measured);
    else snprintf(buf, n, "%.0f (worst: %s; %d shapes)", worst, worst_name, measured);
}

static void write_crossovers(FILE *f, const bench_table *t, const conv_shape_list *l) {
    bool both[2] = {false, false}; /* cpu, gpu rows measured */
    for (int i = 0; i < t->n; i++)
        if (bench_row_measured(&t->r[i])) both[!strcmp(t->r[i].backend, "gpu")] = true;
    if (!both[0] || !both[1]) {
        fprintf(f, "GPU/CPU crossover: n/a (rows of only one device in conv.csv).\n\n");
        return;
    }
    fprintf(f, "### GPU/CPU crossover batch per shape family (gpu-im2col vs cpu-im2col; the worst shape's)\n\n"
               "| family | direction | kernels only | with host-device transfers |\n|---|---|---|---|\n");
    for (int k = 0; k < l->n; k++) {
        bool first = true; /* each family once, where its first shape is */
        for (int j = 0; j < k; j++) first &= strcmp(l->s[j].family, l->s[k].family) != 0;
        for (int d = 0; first && d < CONV_N_DIRS; d++) {
            char c0[128], c1[128];
            family_crossover(t, l, l->s[k].family, d, CONV_GPU_IM2COL, c0, sizeof c0);
            family_crossover(t, l, l->s[k].family, d, CONV_GPU_TRANSFER, c1, sizeof c1);
            fprintf(f, "| %s | %s | %s | %s |\n", l->s[k].family, conv_dir_name[d], c0, c1);
        }
    }
    fprintf(f, "\n");
}

bool bench_report_conv(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    conv_shape_list l;
    if (conv_shapes(&l) != DG_OK) {
        fprintf(stderr, "bench plot: conv: %s\n", dg_last_error());
        return false;
    }
    fprintf(rep->sum, "## Convolutions: conv2d forward, backward-data, backward-weight\n\n"
                      "Each node timed alone as its plan step, checked first (f64-sampled: 256 output entries "
                      "as exact float64 dot products, error relative to the sum of |terms|). GFLOP/s count "
                      "2*batch*o*oh*ow*c*kh*kw in every direction; TF32 off. Charts conv_gflops_DIRECTION: x = "
                      "the shape's number below, each implementation at its largest batch.\n\n");
    write_shapes(rep->sum, t, &l);
    for (int d = 0; d < CONV_N_DIRS; d++) write_direction(rep, t, &l, d);
    write_crossovers(rep->sum, t, &l);
    for (int d = 0; d < CONV_N_DIRS; d++) draw_direction(rep, t, &l, d);
    return true;
}
