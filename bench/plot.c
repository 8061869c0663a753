/* plot.c: series extraction, crossover detection, gnuplot scripts, summary. */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "csv.h"

#define MAX_PTS 64

typedef struct series {
    char   title[64];
    int    n;
    double x[MAX_PTS], y[MAX_PTS];
} series;

typedef struct table { csv_rec *r; int n; } table;

static table load(const char *dir, const char *sweep) {
    char path[1024];
    table t = {NULL, 0};
    snprintf(path, sizeof path, "%s/%s.csv", dir, sweep);
    FILE *f = fopen(path, "r");
    if (!f) return t; /* that sweep was not run */
    fclose(f);
    t.r = bench_csv_read(path, &t.n);
    if (!t.r) fprintf(stderr, "bench plot: %s\n", dg_last_error());
    return t;
}

/* rows of `name` (or any if NULL) by impl with transfer flag; y: 0 time, 1 gflops, 2 gbps */
static series pick(const table *t, const char *name, const char *impl, int transfer, int what, const char *title) {
    series s = {.n = 0};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < t->n && s.n < MAX_PTS; i++) {
        const csv_rec *r = &t->r[i];
        if ((name && strcmp(r->name, name)) || strcmp(r->impl, impl) || r->transfer != transfer) continue;
        if (strcmp(r->status, "ok") || !isfinite(r->median_ms)) continue;
        double y = what == 0 ? r->median_ms : what == 1 ? r->gflops : r->gbps;
        if (!isfinite(y)) continue;
        s.x[s.n] = (double)r->m;
        s.y[s.n++] = y;
    }
    return s;
}

static double ceiling_of(const table *c, const char *impl, int what) {
    series s = pick(c, NULL, impl, 0, what, "");
    double best = NAN;
    for (int i = 0; i < s.n; i++) best = isnan(best) || s.y[i] > best ? s.y[i] : best;
    return best;
}

/* cpu time / gpu time where both were measured */
static series speedup(const series *cpu, const series *gpu, const char *title) {
    series s = {.n = 0};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < gpu->n; i++)
        for (int j = 0; j < cpu->n; j++)
            if (cpu->x[j] == gpu->x[i] && s.n < MAX_PTS) {
                s.x[s.n] = gpu->x[i];
                s.y[s.n++] = cpu->y[j] / gpu->y[i];
            }
    return s;
}

/* the smallest size from which the GPU is faster at every larger measured
 * size; NAN when it is not faster at the largest */
static double crossover(const series *sp) {
    double x = NAN;
    for (int i = sp->n - 1; i >= 0 && sp->y[i] >= 1.0; i--) x = sp->x[i];
    return x;
}

static void crossover_str(const series *sp, char *buf, size_t n) {
    double x = crossover(sp);
    if (sp->n == 0) snprintf(buf, n, "n/a (not measured on both)");
    else if (isnan(x)) snprintf(buf, n, "none: CPU faster at the largest size (%.0f)", sp->x[sp->n - 1]);
    else if (x == sp->x[0]) snprintf(buf, n, "<= %.0f (GPU faster at every size)", x);
    else snprintf(buf, n, "%.0f", x);
}

typedef struct chart {
    const char *file, *title, *xlabel, *ylabel;
    bool        logy;
    bool        linx;      /* epochs, seconds: a linear x axis */
    series      s[12];
    int         n;
    double      hline[4];
    const char *hline_title[4];
    int         n_hline;
    double      vline;     /* crossover mark, NAN for none */
} chart;

static void add(chart *c, series s) {
    if (s.n > 0 && c->n < 12) c->s[c->n++] = s;
}

static void add_hline(chart *c, double y, const char *title) {
    if (isfinite(y) && c->n_hline < 4) {
        c->hline[c->n_hline] = y;
        c->hline_title[c->n_hline++] = title;
    }
}

/* writes DIR/plot-data/FILE-i.dat and FILE.gp, runs gnuplot */
static int draw(const char *dir, const chart *c) {
    if (c->n == 0) return 0;
    char path[1200], gp[1200];
    snprintf(path, sizeof path, "%s/plot-data", dir);
    mkdir(path, 0755);
    snprintf(gp, sizeof gp, "%s/plot-data/%s.gp", dir, c->file);
    FILE *g = fopen(gp, "w");
    if (!g) { fprintf(stderr, "bench plot: cannot write %s: %s\n", gp, strerror(errno)); return 1; }
    fprintf(g, "set datafile missing NaN\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\n"
               "set grid\nset key outside right\n", c->title, c->xlabel, c->ylabel);
    if (!c->linx) fprintf(g, "set logscale x 2\nset format x '%%.0s%%c'\n");
    if (c->logy) fprintf(g, "set logscale y 10\n");
    if (isfinite(c->vline))
        fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'red'\n"
                   "set label 'crossover %g' at %g, graph 0.95 tc rgb 'red' offset 0.5,0\n",
                c->vline, c->vline, c->vline, c->vline);
    for (int i = 0; i < c->n; i++) {
        snprintf(path, sizeof path, "%s/plot-data/%s-%d.dat", dir, c->file, i);
        FILE *d = fopen(path, "w");
        if (!d) { fclose(g); return 1; }
        for (int j = 0; j < c->s[i].n; j++) fprintf(d, "%.9g %.9g\n", c->s[i].x[j], c->s[i].y[j]);
        fclose(d);
    }
    fprintf(g, "plot ");
    for (int i = 0; i < c->n; i++)
        fprintf(g, "%s'%s/plot-data/%s-%d.dat' using 1:2 with linespoints lw 2 title '%s'", i ? ", \\\n     " : "",
                dir, c->file, i, c->s[i].title);
    for (int i = 0; i < c->n_hline; i++)
        fprintf(g, ", \\\n     %g with lines dt 3 lw 2 title '%s'", c->hline[i], c->hline_title[i]);
    fprintf(g, "\n");
    fclose(g);
    /* one script, two terminals */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal pngcairo size 1000,600 noenhanced; set output '%s/%s.png'; load '%s'; "
             "set terminal svg size 1000,600 noenhanced; set output '%s/%s.svg'; replot\" 2>&1",
             dir, c->file, gp, dir, c->file);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "bench plot: gnuplot failed on %s\n", gp);
    return rc != 0;
}

/* a number, or "-" where nothing was measured */
static const char *fmt_num(double v, const char *fmt, char *buf, size_t n) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "-");
    return buf;
}

/* a train-MODEL-BACKEND.csv written by bench train: loss, accuracy, time
 * per epoch; n = 0 when the file is absent */
typedef struct curve { int n; double epoch[MAX_PTS], loss[MAX_PTS], acc[MAX_PTS], total_s[MAX_PTS]; } curve;

static curve load_curve(const char *dir, const char *model, const char *backend) {
    curve c = {0};
    char path[1200], line[512];
    snprintf(path, sizeof path, "%s/train-%s-%s.csv", dir, model, backend);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f) && c.n < MAX_PTS) {
        int ep;
        char m[32], b[32], o[32], d[32];
        int batch;
        double lr, seed, loss, acc, es, ts;
        if (line[0] == '#' || sscanf(line, "%d,%31[^,],%31[^,],%31[^,],%31[^,],%d,%lf,%lf,%lf,%lf,%lf,%lf", &ep, m, b, o,
                                     d, &batch, &lr, &seed, &loss, &acc, &es, &ts) != 12)
            continue;
        c.epoch[c.n] = ep; c.loss[c.n] = loss; c.acc[c.n] = 100 * acc; c.total_s[c.n++] = ts;
    }
    if (f) fclose(f);
    return c;
}

static series curve_series(const curve *c, const double *x, const double *y, const char *title) {
    series s = {.n = c->n};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < c->n; i++) { s.x[i] = x[i]; s.y[i] = y[i]; }
    return s;
}

static bool have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

int bench_plot(const char *dir, FILE *out) {
    table ceil = load(dir, "ceiling"), gemm = load(dir, "gemm"), ops = load(dir, "ops"), mlp = load(dir, "mlp");
    table trn = load(dir, "train"), ad = load(dir, "autodiff");
    curve cur[2][2]; /* [logreg, mlp][cpu, gpu] */
    const char *models[2] = {"logreg", "mlp"}, *bks[2] = {"cpu", "gpu"};
    int n_curves = 0;
    for (int m = 0; m < 2; m++)
        for (int b = 0; b < 2; b++) n_curves += (cur[m][b] = load_curve(dir, models[m], bks[b])).n > 0;
    if (!ceil.n && !gemm.n && !ops.n && !mlp.n && !trn.n && !ad.n && !n_curves) {
        fprintf(stderr, "bench plot: no bench CSV files (ceiling, gemm, ops, mlp, train, train-*) in %s\n", dir);
        return 1;
    }
    bool gp = have_gnuplot();
    int bad = 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    FILE *sum = fopen(path, "w");
    if (!sum) { fprintf(stderr, "bench plot: cannot write %s: %s\n", path, strerror(errno)); return 1; }
    fprintf(sum, "# duograd bench summary\n\nFrom the CSV files in this folder (metadata in their `#` lines). "
                 "Crossover: the smallest size from which the GPU is faster at every larger measured size.\n\n");
    double cpu_gf = ceiling_of(&ceil, "cpu-openblas", 1), gpu_gf = ceiling_of(&ceil, "gpu-cublas", 1);
    double gpu_tf = ceiling_of(&ceil, "gpu-cublas-tf32", 1);
    double cpu_bw = ceiling_of(&ceil, "cpu-memcpy", 2), gpu_bw = ceiling_of(&ceil, "gpu-memcpy", 2);
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    fprintf(sum, "## Ceilings (measured)\n\n| device | sgemm GFLOP/s | TF32 GFLOP/s | copy GB/s |\n|---|---|---|---|\n"
                 "| CPU | %s | - | %s |\n| GPU | %s | %s | %s |\n\n", fmt_num(cpu_gf, "%.1f", b1, 32),
            fmt_num(cpu_bw, "%.1f", b2, 32), fmt_num(gpu_gf, "%.1f", b3, 32), fmt_num(gpu_tf, "%.1f", b4, 32),
            fmt_num(gpu_bw, "%.1f", b5, 32));

    if (gemm.n) {
        static const char *impls[] = {"cpu-naive", "cpu-omp", "cpu-openblas", "gpu-naive", "gpu-tiled", "gpu-cublas",
                                      "gpu-cublas-tf32"};
        chart t = {"gemm_time", "sgemm time, square n x n x n", "n", "median ms", true, .vline = NAN};
        chart f = {"gemm_gflops", "sgemm throughput against measured ceilings", "n", "GFLOP/s", true, .vline = NAN};
        for (int i = 0; i < 7; i++) {
            add(&t, pick(&gemm, "square", impls[i], 0, 0, impls[i]));
            add(&f, pick(&gemm, "square", impls[i], 0, 1, impls[i]));
        }
        add(&t, pick(&gemm, "square", "gpu-cublas", 1, 0, "gpu-cublas incl. transfers"));
        add_hline(&f, cpu_gf, "CPU ceiling (OpenBLAS)");
        add_hline(&f, gpu_gf, "GPU ceiling (cuBLAS fp32)");
        add_hline(&f, gpu_tf, "GPU ceiling (cuBLAS TF32)");
        series cpu = pick(&gemm, "square", "cpu-openblas", 0, 0, "");
        series g0 = pick(&gemm, "square", "gpu-cublas", 0, 0, ""), g1 = pick(&gemm, "square", "gpu-cublas", 1, 0, "");
        series s0 = speedup(&cpu, &g0, "gpu-cublas / cpu-openblas");
        series s1 = speedup(&cpu, &g1, "incl. host-device transfers");
        chart sp = {"gemm_speedup", "sgemm speedup, GPU over CPU (>1: GPU faster)", "n", "speedup", true,
                    .vline = crossover(&s1)};
        add(&sp, s0);
        add(&sp, s1);
        add_hline(&sp, 1.0, "break-even");
        char c0[96], c1[96];
        crossover_str(&s0, c0, sizeof c0);
        crossover_str(&s1, c1, sizeof c1);
        fprintf(sum, "## GEMM (square, gpu-cublas fp32 vs cpu-openblas)\n\n| timing | crossover n |\n|---|---|\n"
                     "| kernels only | %s |\n| with host-device transfers | %s |\n\n", c0, c1);
        fprintf(sum, "| impl | peak GFLOP/s | at n |\n|---|---|---|\n");
        for (int i = 0; i < 7; i++) {
            series s = pick(&gemm, "square", impls[i], 0, 1, "");
            double best = 0, at = 0;
            for (int j = 0; j < s.n; j++) if (s.y[j] > best) { best = s.y[j]; at = s.x[j]; }
            if (s.n) fprintf(sum, "| %s | %.1f | %.0f |\n", impls[i], best, at);
        }
        fprintf(sum, "\n");
        if (gp) bad |= draw(dir, &t) | draw(dir, &f) | draw(dir, &sp);
    }
    if (ops.n) {
        static const char *names[] = {"add", "add_bcast", "mul", "relu", "gelu", "exp", "sum_rows", "sum_cols",
                                      "softmax", "softmax_ce", "transpose"};
        chart bw = {"ops_gbps", "forward ops: bandwidth against measured copy ceilings", "elements", "GB/s", true,
                    .vline = NAN};
        chart sp = {"ops_speedup", "forward ops: speedup, GPU over CPU (>1: GPU faster)", "elements", "speedup", true,
                    .vline = NAN};
        fprintf(sum, "## Ops (crossover in elements; GPU GB/s at the largest size)\n\n"
                     "| op | fwd crossover | bwd crossover | GPU fwd GB/s | GPU bwd GB/s | CPU fwd GB/s |\n"
                     "|---|---|---|---|---|---|\n");
        for (int i = 0; i < 11; i++) {
            char t1[64], t2[64];
            snprintf(t1, sizeof t1, "gpu %s", names[i]);
            snprintf(t2, sizeof t2, "cpu %s", names[i]);
            series gf = pick(&ops, names[i], "gpu-fwd", 0, 2, t1), cf = pick(&ops, names[i], "cpu-fwd", 0, 2, t2);
            if (i == 0 || i == 3 || i == 6 || i == 8) { add(&bw, gf); add(&bw, cf); }
            series gt = pick(&ops, names[i], "gpu-fwd", 0, 0, ""), ct = pick(&ops, names[i], "cpu-fwd", 0, 0, "");
            series gb = pick(&ops, names[i], "gpu-bwd", 0, 0, ""), cb = pick(&ops, names[i], "cpu-bwd", 0, 0, "");
            series gbb = pick(&ops, names[i], "gpu-bwd", 0, 2, "");
            series s = speedup(&ct, &gt, names[i]), sb = speedup(&cb, &gb, "");
            if (i == 0 || i == 6 || i == 8 || i == 9) add(&sp, s);
            char c0[96], c1[96];
            crossover_str(&s, c0, sizeof c0);
            if (sb.n) crossover_str(&sb, c1, sizeof c1);
            else snprintf(c1, sizeof c1, "-");
            fprintf(sum, "| %s | %s | %s | %s | %s | %s |\n", names[i], c0, c1,
                    fmt_num(gf.n ? gf.y[gf.n - 1] : NAN, "%.0f", b1, 32), fmt_num(gbb.n ? gbb.y[gbb.n - 1] : NAN, "%.0f", b2, 32),
                    fmt_num(cf.n ? cf.y[cf.n - 1] : NAN, "%.1f", b3, 32));
        }
        fprintf(sum, "\n");
        add_hline(&bw, cpu_bw, "CPU copy ceiling");
        add_hline(&bw, gpu_bw, "GPU copy ceiling");
        add_hline(&sp, 1.0, "break-even");
        if (gp) bad |= draw(dir, &bw) | draw(dir, &sp);
    }
    if (mlp.n) {
        static const char *w[] = {"784-256-100-10", "784-1024-1024-10"};
        fprintf(sum, "## MLP training step (Adam), crossover in batch size\n\n"
                     "| widths | GPU (graph replay) vs CPU | GPU (no graph) vs CPU |\n|---|---|---|\n");
        for (int i = 0; i < 2; i++) {
            series c = pick(&mlp, w[i], "cpu", 0, 0, "cpu"), g = pick(&mlp, w[i], "gpu", 0, 0, "gpu");
            series gg = pick(&mlp, w[i], "gpu-graph", 0, 0, "gpu (CUDA graph)");
            if (!c.n && !g.n && !gg.n) continue;
            char file[64], title[128], c0[96], c1[96];
            snprintf(file, sizeof file, "mlp_time_%d", i);
            snprintf(title, sizeof title, "MLP %s training step time (Adam)", w[i]);
            chart t = {file, title, "batch", "median ms", true, .vline = NAN};
            add(&t, c); add(&t, g); add(&t, gg);
            series s0 = speedup(&c, &gg, ""), s1 = speedup(&c, &g, "");
            t.vline = crossover(&s0);
            crossover_str(&s0, c0, sizeof c0);
            crossover_str(&s1, c1, sizeof c1);
            fprintf(sum, "| %s | %s | %s |\n", w[i], c0, c1);
            if (gp) bad |= draw(dir, &t);
        }
        fprintf(sum, "\n");
    }
    if (ad.n) {
        fprintf(sum, "## Autodiff: hand-written step vs dg_grad graph (MLP 784-256-100-10, Adam), median ms\n\n"
                     "| backend | batch | manual | graph | graph / manual | graph + CUDA graph |\n|---|---|---|---|---|---|\n");
        chart t = {"autodiff_time", "MLP training step: hand-written vs autodiff graph", "batch", "median ms", true,
                   .vline = NAN};
        const char *bk[2] = {"cpu", "gpu"};
        for (int b = 0; b < 2; b++) {
            char t1[48], t2[48], t3[48];
            snprintf(t1, sizeof t1, "%s manual", bk[b]);
            snprintf(t2, sizeof t2, "%s graph", bk[b]);
            snprintf(t3, sizeof t3, "%s graph + CUDA graph", bk[b]);
            series m = {.n = 0}, gr = {.n = 0}, gc = {.n = 0};
            table sub = {NULL, 0};
            csv_rec *rows = malloc((size_t)ad.n * sizeof *rows);
            for (int i = 0; rows && i < ad.n; i++)
                if (!strcmp(ad.r[i].backend, bk[b])) rows[sub.n++] = ad.r[i];
            sub.r = rows;
            m = pick(&sub, NULL, "manual", 0, 0, t1);
            gr = pick(&sub, NULL, "graph", 0, 0, t2);
            gc = pick(&sub, NULL, "graph-cuda", 0, 0, t3);
            add(&t, m); add(&t, gr); add(&t, gc);
            for (int i = 0; i < m.n; i++) {
                double g1 = NAN, g2 = NAN;
                for (int j = 0; j < gr.n; j++) if (gr.x[j] == m.x[i]) g1 = gr.y[j];
                for (int j = 0; j < gc.n; j++) if (gc.x[j] == m.x[i]) g2 = gc.y[j];
                fprintf(sum, "| %s | %.0f | %.4f | %s | %s | %s |\n", bk[b], m.x[i], m.y[i], fmt_num(g1, "%.4f", b1, 32),
                        fmt_num(g1 / m.y[i], "%.3f", b2, 32), fmt_num(g2, "%.4f", b3, 32));
            }
            free(rows);
        }
        fprintf(sum, "\n");
        if (gp) bad |= draw(dir, &t);
    }
    if (trn.n) {
        fprintf(sum, "## Fashion-MNIST epoch time (Adam, data resident on the backend), crossover in batch size\n\n"
                     "| model | GPU vs CPU crossover | CPU epoch s at 128 | GPU epoch s at 128 |\n|---|---|---|---|\n");
        chart t = {"train_epoch_time", "Fashion-MNIST: time of one training epoch", "batch", "epoch ms", true,
                   .vline = NAN};
        for (int m = 0; m < 2; m++) {
            char tc[48], tg[48], c0[96];
            snprintf(tc, sizeof tc, "%s cpu", models[m]);
            snprintf(tg, sizeof tg, "%s gpu", models[m]);
            series c = pick(&trn, models[m], "cpu", 0, 0, tc), g = pick(&trn, models[m], "gpu", 0, 0, tg);
            add(&t, c);
            add(&t, g);
            series sp = speedup(&c, &g, "");
            crossover_str(&sp, c0, sizeof c0);
            double c128 = NAN, g128 = NAN;
            for (int i = 0; i < c.n; i++) if (c.x[i] == 128) c128 = c.y[i] / 1e3;
            for (int i = 0; i < g.n; i++) if (g.x[i] == 128) g128 = g.y[i] / 1e3;
            fprintf(sum, "| %s | %s | %s | %s |\n", models[m], c0, fmt_num(c128, "%.3f", b1, 32), fmt_num(g128, "%.3f", b2, 32));
        }
        fprintf(sum, "\n");
        if (gp) bad |= draw(dir, &t);
    }
    if (n_curves) {
        fprintf(sum, "## Fashion-MNIST training (bench train)\n\n| model | backend | epochs | final test accuracy | "
                     "training s |\n|---|---|---|---|---|\n");
        for (int m = 0; m < 2; m++) {
            char file[64], title[96];
            snprintf(file, sizeof file, "train_%s_loss", models[m]);
            snprintf(title, sizeof title, "%s: training loss per epoch", models[m]);
            chart l = {file, title, "epoch", "loss", false, true, .vline = NAN};
            char f2[64], t2[96], f3[64], t3[96];
            snprintf(f2, sizeof f2, "train_%s_acc", models[m]);
            snprintf(t2, sizeof t2, "%s: test accuracy per epoch", models[m]);
            chart a = {f2, t2, "epoch", "test accuracy %", false, true, .vline = NAN};
            snprintf(f3, sizeof f3, "train_%s_acc_time", models[m]);
            snprintf(t3, sizeof t3, "%s: test accuracy against training time", models[m]);
            chart at = {f3, t3, "training seconds", "test accuracy %", false, true, .vline = NAN};
            for (int b = 0; b < 2; b++) {
                const curve *c = &cur[m][b];
                if (!c->n) continue;
                add(&l, curve_series(c, c->epoch, c->loss, bks[b]));
                add(&a, curve_series(c, c->epoch, c->acc, bks[b]));
                add(&at, curve_series(c, c->total_s, c->acc, bks[b]));
                fprintf(sum, "| %s | %s | %d | %.2f%% | %.2f |\n", models[m], bks[b], c->n, c->acc[c->n - 1],
                        c->total_s[c->n - 1]);
            }
            if (gp) bad |= draw(dir, &l) | draw(dir, &a) | draw(dir, &at);
        }
        fprintf(sum, "\n");
    }
    if (!gp)
        fprintf(sum, "Charts were not drawn: gnuplot is not installed (`apt-get install gnuplot-nox`, then "
                     "`bench plot %s`).\n", dir);
    fclose(sum);
    if (!gp) fprintf(stderr, "bench: gnuplot not found: CSV and summary written; install gnuplot-nox and run "
                             "'bench plot %s' for the charts\n", dir);
    if (out) {
        FILE *s = fopen(path, "r");
        char line[512];
        while (s && fgets(line, sizeof line, s)) fputs(line, out);
        if (s) fclose(s);
    }
    free(ceil.r); free(gemm.r); free(ops.r); free(mlp.r); free(trn.r); free(ad.r);
    return bad ? 1 : 0;
}
