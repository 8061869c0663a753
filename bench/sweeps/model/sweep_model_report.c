/* sweep_model_report.c: bench plot's section of model.csv (sweep_model.c):
 * per model file (case onnx-STEM) a chart of examples per second over the
 * batch in fp32 for every implementation, the crossover of graph replay
 * over the CPU marked, and per precision a table of step time and
 * examples/s per implementation, with the plan's memory and the check's
 * error (rows a peer script appends, such as torch-eager, are reported
 * beside the sweep's own). */
#include <math.h>
#include <string.h>

#include "runner/sweep.h"

#define MAX_MODELS 8
#define MAX_IMPLS  8

/* the distinct values of a string column over t's rows (of case `name` in
 * precision p for implementations, any row for cases), in file order */
static int distinct(const bench_table *t, const char *name, dg_precision p, bool impls, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (impls && (strcmp(r->name, name) || r->precision != p)) continue;
        const char *v = impls ? r->impl : r->name;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(out[j], v);
        if (!seen && n < max) out[n++] = v;
    }
    return n;
}

/* a step-time series as examples per second: batch / time */
static bench_series per_s(bench_series s) {
    for (int i = 0; i < s.n; i++) {
        double ms = s.y[i], lo = s.lo[i], hi = s.hi[i];
        s.y[i] = 1e3 * s.x[i] / ms;
        s.lo[i] = 1e3 * s.x[i] / hi;
        s.hi[i] = 1e3 * s.x[i] / lo;
    }
    return s;
}

static void chart(bench_report *rep, const bench_table *t, const char *name, int index) {
    const char *im[MAX_IMPLS];
    int n_im = distinct(t, name, DG_PREC_FP32, true, im, MAX_IMPLS);
    if (!n_im) return;
    char file[32], title[128], c0[96], c1[96];
    snprintf(file, sizeof file, "model_%d", index);
    snprintf(title, sizeof title, "%s training step: examples/s", name);
    bench_chart ch = {file, title, "batch", "examples/s", true, .vline = NAN};
    for (int j = 0; j < n_im; j++) bench_chart_add(&ch, per_s(bench_pick(t, name, im[j], NULL, false, BENCH_MS, im[j])));
    bench_series cpu = bench_pick(t, name, "cpu", NULL, false, BENCH_MS, "cpu");
    bench_series gpu = bench_pick(t, name, "gpu", NULL, false, BENCH_MS, "gpu");
    bench_series graph = bench_pick(t, name, "gpu-graph", NULL, false, BENCH_MS, "gpu-graph");
    bench_series s0 = bench_speedup(&cpu, &graph, ""), s1 = bench_speedup(&cpu, &gpu, "");
    ch.vline = bench_crossover(&s0);
    bench_crossover_str(&s0, c0, sizeof c0);
    bench_crossover_str(&s1, c1, sizeof c1);
    fprintf(rep->sum, "| %s | %s | %s |\n", name, c0, c1);
    bench_chart_draw(rep, &ch);
}

/* one table row: per implementation its step ms and examples/s (or the
 * row's status), then the first arena and check error found */
static void table_row(FILE *f, const bench_table *t, const char *name, dg_precision p, const char *const *im,
                      int n_im, long long batch) {
    long long arena = 0;
    double err = NAN;
    fprintf(f, "| %lld |", batch);
    for (int j = 0; j < n_im; j++) {
        const csv_rec *r = bench_table_row_prec(t, name, im[j], batch, p);
        if (r && bench_row_measured(r)) {
            double rate = 1e3 * (double)batch / r->median_ms;
            fprintf(f, " %.3g ms, %.*f/s |", r->median_ms, rate < 100 ? 1 : 0, rate);
        } else {
            fprintf(f, " %s |", r ? r->status : "-");
        }
        if (r && r->arena_bytes > 0 && !arena) arena = r->arena_bytes;
        if (r && isfinite(r->max_rel_err) && !isfinite(err)) err = r->max_rel_err;
    }
    char b0[32], b1[32];
    fprintf(f, " %s | %s |\n", bench_fmt_num(arena ? (double)arena / 1e6 : NAN, "%.2f", b0, sizeof b0),
            bench_fmt_num(err, "%.1e", b1, sizeof b1));
}

bool bench_report_model(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    FILE *f = rep->sum;
    const char *models[MAX_MODELS];
    int n_models = distinct(t, NULL, DG_PREC_FP32, false, models, MAX_MODELS);
    fprintf(f, "## ONNX model training step (--model FILE.onnx: softmax cross-entropy, SGD momentum), "
               "examples/s\n\n| model | GPU (graph replay) vs CPU | GPU (no graph) vs CPU |\n|---|---|---|\n");
    for (int i = 0; i < n_models; i++) chart(rep, t, models[i], i);
    fprintf(f, "\n");
    for (int i = 0; i < n_models; i++)
        for (int p = 0; p < DG_PREC_COUNT; p++) {
            const char *im[MAX_IMPLS];
            long long batches[BENCH_MAX_PTS];
            int n_im = distinct(t, models[i], (dg_precision)p, true, im, MAX_IMPLS);
            int n_b = bench_table_ms(t, models[i], batches, 0, BENCH_MAX_PTS);
            if (!n_im) continue;
            fprintf(f, "### %s in %s: step time and examples/s per implementation\n\n| batch |", models[i],
                    dg_precision_name((dg_precision)p));
            for (int j = 0; j < n_im; j++) fprintf(f, " %s |", im[j]);
            fprintf(f, " arena MB | check error (batch 2) |\n|---|");
            for (int j = 0; j < n_im + 2; j++) fprintf(f, "---|");
            fprintf(f, "\n");
            for (int b = 0; b < n_b; b++) table_row(f, t, models[i], (dg_precision)p, im, n_im, batches[b]);
            fprintf(f, "\n");
        }
    return true;
}
