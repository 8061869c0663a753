/* sweep_conv_report.c: the conv sweep's report. Charts conv_gflops_fwd,
 * conv_gflops_bwd-data and conv_gflops_bwd-weight: GFLOP/s of every
 * implementation per layer shape (x = the shape's number in the summary),
 * each at the largest batch it ran, against the sgemm ceilings. Summary:
 * the shapes, a table per direction for the 3x3 layers (GFLOP/s,
 * implicit/im2col, the fastest CPU implementation's fraction of its sgemm
 * ceiling), all of fp32 rows; where the vendor rows (cpu-onednn,
 * gpu-cudnn) ran, the fastest own implementation over the vendor's per
 * layer, direction, dtype and device; and the GPU/CPU crossover batch per
 * shape family (fp32).
 *
 * Where bench/peers/torch_conv.py appended PyTorch's rows of the same cases
 * to conv.csv (impls torch-cudnn, torch-cudnn-bench, torch-cpu), they are
 * drawn too, and each direction's table gets, per PyTorch impl present,
 * its GFLOP/s and duograd's fastest implementation on that device over it;
 * a folder without such rows gets the same summary as before them. */
#include <math.h>
#include <string.h>

#include "sweeps/conv/conv_cases.h"
#include "runner/sweep.h"

/* bench/peers/torch_conv.py's implementations, in the order of their columns */
static const conv_impl peer_impls[] = {
    {.name = "torch-cudnn", .gpu = true},       /* cuDNN, cudnn.benchmark off (PyTorch's default) */
    {.name = "torch-cudnn-bench", .gpu = true}, /* cuDNN, autotuned per shape                     */
    {.name = "torch-cpu", .gpu = false},        /* PyTorch's CPU convolution                      */
};
#define N_PEERS ((int)(sizeof peer_impls / sizeof peer_impls[0]))

/* whether any row of t (whatever its status) is by impl */
static bool has_rows(const bench_table *t, const char *impl) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->r[i].impl, impl)) return true;
    return false;
}

static bool any_peer(const bench_table *t) {
    for (int p = 0; p < N_PEERS; p++)
        if (has_rows(t, peer_impls[p].name)) return true;
    return false;
}

/* one of the sweep's own implementations (a peer's rows are not) */
static bool is_duograd(const char *impl) {
    for (int i = 0; i < CONV_N_IMPLS; i++)
        if (!strcmp(impl, conv_impls[i].name)) return true;
    return false;
}

/* the measured row of a case by im in precision p at batch `at`, or
 * (at = 0) at the largest batch it was measured; NULL where none */
static const csv_rec *pick_prec(const bench_table *t, const char *name, const conv_impl *im, dg_precision p,
                                long long at) {
    const csv_rec *best = NULL;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, im->name) || r->transfer != im->transfer ||
            r->precision != p || !bench_row_measured(r) || (at && r->batch != at))
            continue;
        if (!best || r->batch > best->batch) best = r;
    }
    return best;
}

/* the same in fp32, which the charts and the tables before the vendor's are of */
static const csv_rec *pick(const bench_table *t, const char *name, const conv_impl *im, long long at) {
    return pick_prec(t, name, im, DG_PREC_FP32, at);
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

/* im's GFLOP/s in direction d per shape, each at its largest batch; a
 * series without points is not drawn (bench_chart_add) */
static bench_series shape_series(const bench_table *t, const conv_shape_list *l, int d, const conv_impl *im) {
    bench_series s = {.n = 0};
    char name[48];
    impl_title(im, s.title, sizeof s.title);
    for (int k = 0; k < l->n; k++) {
        conv_case_name(&l->s[k], d, name, sizeof name);
        add_point(&s, k + 1, pick(t, name, im, 0));
    }
    return s;
}

static void draw_direction(bench_report *rep, const bench_table *t, const conv_shape_list *l, int d) {
    char file[48], title[128];
    snprintf(file, sizeof file, "conv_gflops_%s", conv_dir_name[d]);
    snprintf(title, sizeof title, "conv2d %s: each implementation at its largest batch", conv_dir_name[d]);
    bench_chart c = {file, title, "layer shape (# in summary.md)", "GFLOP/s", true, true, .vline = NAN};
    for (int i = 0; i < CONV_N_IMPLS; i++) bench_chart_add(&c, shape_series(t, l, d, &conv_impls[i]));
    for (int p = 0; p < N_PEERS; p++) bench_chart_add(&c, shape_series(t, l, d, &peer_impls[p]));
    bench_chart_hline(&c, rep->ceil.cpu_gemm[DG_PREC_FP32], "CPU sgemm ceiling (OpenBLAS)");
    bench_chart_hline(&c, rep->ceil.gpu_gemm[DG_PREC_FP32], "GPU sgemm ceiling (cuBLAS fp32)");
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

/* the highest GFLOP/s of the sweep's kernel rows (no transfers) of a case
 * on one device at batch b; NaN where none was measured */
static double duograd_best(const bench_table *t, const char *name, bool gpu, long long b) {
    double best = NAN;
    for (int i = 0; i < CONV_N_IMPLS; i++) {
        const conv_impl *im = &conv_impls[i];
        const csv_rec *r = im->gpu == gpu && !im->transfer ? pick(t, name, im, b) : NULL;
        if (r && isfinite(r->gflops) && (isnan(best) || r->gflops > best)) best = r->gflops;
    }
    return best;
}

/* duograd's fastest on the peer's device over the peer, at the largest
 * batch both measured (*at; 0 and NaN where there is none) */
static double peer_ratio(const bench_table *t, const char *name, const conv_impl *peer, long long *at) {
    double ratio = NAN;
    *at = 0;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, peer->name) || r->precision != DG_PREC_FP32 ||
            !bench_row_measured(r) || r->batch <= *at)
            continue;
        double best = duograd_best(t, name, peer->gpu, r->batch);
        if (isnan(best)) continue;
        ratio = best / r->gflops;
        *at = r->batch;
    }
    return ratio;
}

/* the peer's two cells of a table row at batch b: its GFLOP/s and the
 * ratio, each naming its batch where that is not b */
static void write_peer_cells(FILE *f, const bench_table *t, const char *name, const conv_impl *peer, long long b) {
    char v[48], ratio[48];
    long long at;
    cell(t, name, peer, b, v, sizeof v);
    bench_fmt_num(peer_ratio(t, name, peer, &at), "%.2f", ratio, sizeof ratio);
    if (at && at != b) {
        size_t len = strlen(ratio);
        snprintf(ratio + len, sizeof ratio - len, " (batch %lld)", at);
    }
    fprintf(f, " %s | %s |", v, ratio);
}

/* the CPU strategies beside cpu-im2col, each a column where it has rows
 * (folders from before them stay as they were) */
enum { FIRST_OTHER_CPU = CONV_CPU_BATCH, LAST_OTHER_CPU = CONV_CPU_CHANNELS };

static bool any_other_cpu(const bench_table *t) {
    for (int i = FIRST_OTHER_CPU; i <= LAST_OTHER_CPU; i++)
        if (has_rows(t, conv_impls[i].name)) return true;
    return false;
}

static void write_direction(bench_report *rep, const bench_table *t, const conv_shape_list *l, int d) {
    FILE *f = rep->sum;
    bool peer[N_PEERS], other[LAST_OTHER_CPU + 1] = {false};
    fprintf(f, "### %s: 3x3 layers, GFLOP/s at the largest batch\n\n| # | shape | batch | cpu-im2col |",
            conv_dir_name[d]);
    for (int i = FIRST_OTHER_CPU; i <= LAST_OTHER_CPU; i++)
        if ((other[i] = has_rows(t, conv_impls[i].name))) fprintf(f, " %s |", conv_impls[i].name);
    fprintf(f, " gpu-im2col | gpu-implicit | implicit / im2col | %sCPU / CPU sgemm ceiling |",
            any_other_cpu(t) ? "best " : "");
    for (int p = 0; p < N_PEERS; p++)
        if ((peer[p] = has_rows(t, peer_impls[p].name)))
            fprintf(f, " %s | duograd %s / %s |", peer_impls[p].name, peer_impls[p].gpu ? "GPU" : "CPU",
                    peer_impls[p].name);
    fprintf(f, "\n|---|---|---|---|---|---|---|---|");
    for (int i = FIRST_OTHER_CPU; i <= LAST_OTHER_CPU; i++)
        if (other[i]) fprintf(f, "---|");
    for (int p = 0; p < N_PEERS; p++)
        if (peer[p]) fprintf(f, "---|---|");
    fprintf(f, "\n");
    for (int k = 0; k < l->n; k++) {
        const conv_shape *s = &l->s[k];
        char name[48], c[48], co[LAST_OTHER_CPU + 1][48], g[48], i[48], ratio[16], frac[16];
        conv_case_name(s, d, name, sizeof name);
        long long b = largest_batch(t, name);
        if (s->kh != 3 || s->kw != 3 || !b) continue;
        /* the fastest CPU implementation, each at batch b or else its own largest */
        double cpu = cell(t, name, &conv_impls[CONV_CPU], b, c, sizeof c);
        for (int o = FIRST_OTHER_CPU; o <= LAST_OTHER_CPU; o++)
            cpu = fmax(cpu, cell(t, name, &conv_impls[o], b, co[o], sizeof co[o]));
        cell(t, name, &conv_impls[CONV_GPU_IM2COL], b, g, sizeof g);
        cell(t, name, &conv_impls[CONV_GPU_IMPLICIT], b, i, sizeof i);
        /* the ratio at one batch only */
        const csv_rec *ri = pick(t, name, &conv_impls[CONV_GPU_IMPLICIT], b);
        const csv_rec *rg = pick(t, name, &conv_impls[CONV_GPU_IM2COL], b);
        bench_fmt_num(ri && rg ? ri->gflops / rg->gflops : NAN, "%.2f", ratio, sizeof ratio);
        bench_fmt_num(100.0 * cpu / rep->ceil.cpu_gemm[DG_PREC_FP32], "%.0f%%", frac, sizeof frac);
        fprintf(f, "| %d | %s | %lld | %s |", k + 1, s->name, b, c);
        for (int o = FIRST_OTHER_CPU; o <= LAST_OTHER_CPU; o++)
            if (other[o]) fprintf(f, " %s |", co[o]);
        fprintf(f, " %s | %s | %s | %s |", g, i, ratio, frac);
        for (int p = 0; p < N_PEERS; p++)
            if (peer[p]) write_peer_cells(f, t, name, &peer_impls[p], b);
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

/* median ms of a case by im over the batch (x), in file order */
static bench_series by_batch(const bench_table *t, const char *name, const conv_impl *im) {
    bench_series s = {.n = 0};
    for (int i = 0; i < t->n && s.n < BENCH_MAX_PTS; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, im->name) || r->transfer != im->transfer ||
            r->precision != DG_PREC_FP32 || !bench_row_measured(r))
            continue;
        s.x[s.n] = (double)r->batch;
        s.y[s.n] = r->median_ms;
        s.lo[s.n] = isfinite(r->min_ms) ? r->min_ms : r->median_ms;
        s.hi[s.n] = isfinite(r->max_ms) ? r->max_ms : r->median_ms;
        s.noisy[s.n++] = !strcmp(r->status, "noisy");
    }
    return s;
}

/* cpu-im2col's median ms over the batch, each point replaced by another
 * CPU strategy's where that measured faster at the same batch */
static bench_series cpu_fastest_by_batch(const bench_table *t, const char *name) {
    bench_series c = by_batch(t, name, &conv_impls[CONV_CPU]);
    for (int other = FIRST_OTHER_CPU; other <= LAST_OTHER_CPU; other++) {
        bench_series b = by_batch(t, name, &conv_impls[other]);
        for (int i = 0; i < c.n; i++)
            for (int j = 0; j < b.n; j++)
                if (b.x[j] == c.x[i] && b.y[j] < c.y[i]) {
                    c.y[i] = b.y[j];
                    c.lo[i] = b.lo[j];
                    c.hi[i] = b.hi[j];
                    c.noisy[i] = b.noisy[j];
                }
    }
    return c;
}

/* The crossover of the family's worst shape in direction d: the batch
 * from which gpu (kernels, or with transfers) beats the faster CPU
 * implementation on every shape of the family measured on both. */
static void family_crossover(const bench_table *t, const conv_shape_list *l, const char *family, int d, int gpu,
                             char *buf, size_t n) {
    int measured = 0, none = 0, at_first = 0; /* shapes: on both, never crossed, GPU faster at every batch */
    double worst = NAN;
    const char *worst_name = NULL, *none_name = NULL;
    for (int k = 0; k < l->n; k++) {
        if (strcmp(l->s[k].family, family)) continue;
        char name[48];
        conv_case_name(&l->s[k], d, name, sizeof name);
        bench_series c = cpu_fastest_by_batch(t, name), g = by_batch(t, name, &conv_impls[gpu]);
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
    bool both[2] = {false, false}; /* cpu, gpu rows of the sweep measured */
    for (int i = 0; i < t->n; i++)
        if (bench_row_measured(&t->r[i]) && is_duograd(t->r[i].impl)) both[!strcmp(t->r[i].backend, "gpu")] = true;
    if (!both[0] || !both[1]) {
        fprintf(f, "GPU/CPU crossover: n/a (rows of only one device in conv.csv).\n\n");
        return;
    }
    fprintf(f, "### GPU/CPU crossover batch per shape family (gpu-im2col vs %s; the worst shape's)\n\n"
               "| family | direction | kernels only | with host-device transfers |\n|---|---|---|---|\n",
            any_other_cpu(t) ? "the fastest CPU implementation" : "cpu-im2col");
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

/* The fastest own implementation's GFLOP/s over the vendor library's on
 * one device, of a case in precision p, at the largest batch the vendor
 * measured where an own row was measured too: *at that batch, *own and
 * *vendor the two rates (NaN and 0 where there is none). */
static double own_over_vendor(const bench_table *t, const char *name, bool gpu, dg_precision p, long long *at,
                              double *own, double *vendor) {
    const conv_impl *v = &conv_impls[gpu ? CONV_GPU_CUDNN : CONV_CPU_ONEDNN];
    *at = 0;
    *own = *vendor = NAN;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->name, name) || strcmp(r->impl, v->name) || r->precision != p || !bench_row_measured(r) ||
            r->batch <= *at)
            continue;
        double best = NAN;
        for (int k = 0; k < CONV_N_IMPLS; k++) {
            const conv_impl *im = &conv_impls[k];
            const csv_rec *o = im->gpu == gpu && !im->transfer && im->conv != DG_CONV_VENDOR
                                   ? pick_prec(t, name, im, p, r->batch) : NULL;
            if (o && isfinite(o->gflops) && (isnan(best) || o->gflops > best)) best = o->gflops;
        }
        if (isnan(best)) continue;
        *at = r->batch;
        *own = best;
        *vendor = r->gflops;
    }
    return *own / *vendor;
}

/* own / vendor per layer, direction, dtype and device, where both ran */
static void write_vendor(FILE *f, const bench_table *t, const conv_shape_list *l) {
    bool header = false;
    for (int k = 0; k < l->n; k++)
        for (int d = 0; d < CONV_N_DIRS; d++)
            for (int p = 0; p < DG_PREC_COUNT; p++)
                for (int gpu = 0; gpu < 2; gpu++) {
                    char name[48], ratio[16];
                    conv_case_name(&l->s[k], d, name, sizeof name);
                    long long at;
                    double own, vendor, r = own_over_vendor(t, name, gpu, (dg_precision)p, &at, &own, &vendor);
                    if (!at) continue;
                    if (!header) {
                        header = true;
                        fprintf(f, "### Own kernels against the vendor's (cpu-onednn, gpu-cudnn)\n\n"
                                   "own / vendor: the fastest own implementation's GFLOP/s on the device over the "
                                   "vendor library's, in the same dtype, at the largest batch both measured.\n\n"
                                   "| # | shape | direction | dtype | device | batch | best own GFLOP/s | vendor "
                                   "GFLOP/s | own / vendor |\n|---|---|---|---|---|---|---|---|---|\n");
                    }
                    fprintf(f, "| %d | %s | %s | %s | %s | %lld | %.1f | %.1f | %s |\n", k + 1, l->s[k].name,
                            conv_dir_name[d], dg_precision_name((dg_precision)p), gpu ? "gpu" : "cpu", at, own,
                            vendor, bench_fmt_num(r, "%.2f", ratio, sizeof ratio));
                }
    if (header) fprintf(f, "\n");
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
    if (any_peer(t))
        fprintf(rep->sum, "PyTorch beside it (bench/peers/torch_conv.py, impls torch-*): F.conv2d and "
                          "aten.convolution_backward with the direction's output mask, fp32 NCHW, TF32 off, checked "
                          "the same way; torch-cudnn: cuDNN with cudnn.benchmark off (PyTorch's default), "
                          "torch-cudnn-bench: on (autotuned), torch-cpu: PyTorch's CPU convolution. In the tables, "
                          "duograd GPU (CPU) / torch-*: the fastest of duograd's GPU (CPU) implementations over "
                          "PyTorch's, at the largest batch both measured (named where it is not the row's).\n\n");
    write_shapes(rep->sum, t, &l);
    for (int d = 0; d < CONV_N_DIRS; d++) write_direction(rep, t, &l, d);
    write_vendor(rep->sum, t, &l);
    write_crossovers(rep->sum, t, &l);
    for (int d = 0; d < CONV_N_DIRS; d++) draw_direction(rep, t, &l, d);
    return true;
}
