/* sweep_transformer_report.c: the transformer sweep's report: per
 * attention form and precision in the rows a chart of tokens/s over the
 * context for every implementation and batch (transformer_tokens_FORM,
 * transformer_tokens_FORM_DTYPE beyond fp32; the first batch's crossover of
 * graph replay over the CPU marked), the crossovers in summary.md, and a
 * table of step time, tokens/s and plan memory per precision. Also
 * the curves of `bench train --model charlm` (train-charlm-BACKEND.csv),
 * drawn with the text's unigram entropy, whether or not the sweep ran. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runner/sweep.h"
#include "sweeps/transformer/sweep_transformer.h"

/* a step-time series over T as tokens per second: batch * T / time */
static bench_series tokens_per_s(bench_series s, int batch) {
    for (int i = 0; i < s.n; i++) {
        double ms = s.y[i], lo = s.lo[i], hi = s.hi[i], tok = (double)batch * s.x[i];
        s.y[i] = 1e3 * tok / ms;
        s.lo[i] = 1e3 * tok / hi;
        s.hi[i] = 1e3 * tok / lo;
    }
    return s;
}

/* whether t has a row in precision p */
static bool has_prec(const bench_table *t, dg_precision p) {
    for (int i = 0; i < t->n; i++)
        if (t->r[i].precision == p) return true;
    return false;
}

static void form_table(FILE *f, const bench_table *t, int form, dg_precision p) {
    bool any = false;
    for (int b = 0; b < LM_N_BATCHES; b++) {
        char name[48];
        snprintf(name, sizeof name, "charlm-%s-b%d", lm_forms[form], lm_batches[b]);
        long long cs[BENCH_MAX_PTS];
        int nc = bench_table_ms(t, name, cs, 0, BENCH_MAX_PTS);
        for (int k = 0; k < nc; k++) {
            if (!any)
                fprintf(f, "### %s attention (%s): step time and tokens/s per implementation, plan memory (MB)\n\n"
                           "| batch | T | cpu | gpu | gpu-graph | arena | peak live |\n|---|---|---|---|---|---|---|\n",
                        lm_forms[form], dg_precision_name(p));
            any = true;
            long long arena = 0, live = 0;
            fprintf(f, "| %d | %lld |", lm_batches[b], cs[k]);
            for (int i = 0; i < LM_N_IMPLS; i++) {
                const csv_rec *r = bench_table_row_prec(t, name, lm_impls[i].name, cs[k], p);
                if (r && bench_row_measured(r))
                    fprintf(f, " %.4g ms, %.0f/s |", r->median_ms, 1e3 * (double)lm_batches[b] * cs[k] / r->median_ms);
                else fprintf(f, " %s |", r ? r->status : "-");
                if (r && r->arena_bytes > 0 && !arena) {
                    arena = r->arena_bytes;
                    live = r->live_bytes;
                }
            }
            char b1[32], b2[32];
            fprintf(f, " %s | %s |\n", bench_fmt_num(arena ? (double)arena / 1e6 : NAN, "%.1f", b1, sizeof b1),
                    bench_fmt_num(live ? (double)live / 1e6 : NAN, "%.1f", b2, sizeof b2));
        }
    }
    if (any) fprintf(f, "\n");
}

/* Per form: a chart of tokens/s over T for every implementation and batch
 * (transformer_tokens_FORM; the first batch's crossover of graph replay
 * over the CPU marked), the crossovers, and a table. */
/* one train-charlm-BACKEND.csv: a row per evaluation; n = 0 when the
 * file is absent. unigram: NaN in files written before the column was. */
typedef struct lm_curve {
    int    n;
    double step[BENCH_MAX_PTS], train[BENCH_MAX_PTS], val[BENCH_MAX_PTS], secs[BENCH_MAX_PTS];
    double unigram;
} lm_curve;

static lm_curve load_lm_curve(const char *dir, const char *backend) {
    lm_curve c = {.unigram = NAN};
    char path[1200], line[512];
    snprintf(path, sizeof path, "%s/train-charlm-%s.csv", dir, backend);
    FILE *f = fopen(path, "r");
    /* more evaluations than a chart holds: the first BENCH_MAX_PTS */
    while (f && fgets(line, sizeof line, f) && c.n < BENCH_MAX_PTS) {
        int step;
        double tr, va, ts, uni = NAN;
        int got = line[0] == '#' ? 0 : sscanf(line, "%d,charlm,%*[^,],%lf,%lf,%lf,%lf", &step, &tr, &va, &ts, &uni);
        if (got < 4) continue; /* the header, metadata */
        c.step[c.n] = step; c.train[c.n] = tr; c.val[c.n] = va; c.secs[c.n++] = ts;
        if (got == 5) c.unigram = uni;
    }
    if (f) fclose(f);
    return c;
}

static bench_series lm_series(const lm_curve *c, const double *y, const char *title) {
    bench_series s = {.n = c->n};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < c->n; i++) { s.x[i] = c->step[i]; s.y[i] = s.lo[i] = s.hi[i] = y[i]; } /* one run: no bar */
    return s;
}

/* train and held-out loss per step on each backend against the unigram
 * entropy (train_charlm_loss), and a table of where each run got to */
static bool report_lm_curves(bench_report *rep) {
    static const char *const backends[2] = {"cpu", "gpu"};
    lm_curve c[2];
    for (int b = 0; b < 2; b++) c[b] = load_lm_curve(rep->dir, backends[b]);
    if (!c[0].n && !c[1].n) return false;
    FILE *f = rep->sum;
    fprintf(f, "## Char-LM training (bench train --model charlm)\n\nLosses in nats per character; held-out: fixed "
               "windows of the text's last tenth. The unigram entropy is the loss of a model of character "
               "frequencies alone.\n\n| backend | steps | first held-out | best held-out (step) | last held-out | "
               "unigram entropy | training s |\n|---|---|---|---|---|---|---|\n");
    bench_chart ch = {"train_charlm_loss", "char-LM: loss per step", "step", "loss (nats per character)", false,
                      true, .vline = NAN};
    for (int b = 0; b < 2; b++) {
        const lm_curve *k = &c[b];
        if (!k->n) continue;
        char tt[32], tv[32], u[32];
        snprintf(tt, sizeof tt, "%s train", backends[b]);
        snprintf(tv, sizeof tv, "%s held-out", backends[b]);
        bench_chart_add(&ch, lm_series(k, k->train, tt));
        bench_chart_add(&ch, lm_series(k, k->val, tv));
        int best = 0;
        for (int i = 1; i < k->n; i++) if (k->val[i] < k->val[best]) best = i;
        fprintf(f, "| %s | %.0f | %.4f | %.4f (%.0f) | %.4f | %s | %.2f |\n", backends[b], k->step[k->n - 1],
                k->val[0], k->val[best], k->step[best], k->val[k->n - 1], bench_fmt_num(k->unigram, "%.4f", u,
                sizeof u), k->secs[k->n - 1]);
        if (!isnan(k->unigram) && ch.n_hline == 0) {
            ch.hline[ch.n_hline] = k->unigram;
            ch.hline_title[ch.n_hline++] = "unigram entropy";
        }
    }
    fprintf(f, "\n");
    bench_chart_draw(rep, &ch);
    return true;
}

bool bench_report_transformer(bench_report *rep, const bench_table *t) {
    bool curves = report_lm_curves(rep);
    if (!t->n) return curves;
    FILE *f = rep->sum;
    fprintf(f, "## Transformer (char-LM) training step, tokens/s\n\n"
               "Vocabulary %d, width %d, %d heads of %d, %d pre-norm blocks, causal attention, Adam; one step = "
               "forward, loss over every position, backward, update, as one plan. Checked first (f64-step+grad: "
               "the step at batch %d, context min(T, %d), its loss, gradients and updates against the float64 "
               "evaluation of its graph, at the precision's tolerances, which the check column names; the "
               "full-size loss finite). Precisions: the step builder's policy (fp32; tf32: the GPU's products on "
               "TF32 tensor cores; bf16, fp16: mixed precision, 16-bit products from float32 masters, fp16 with "
               "loss scaling; the fused attention float32 in every one). Crossover: the smallest context T from "
               "which the GPU is faster at every larger T.\n\n| attention | dtype | batch | GPU (graph replay) vs "
               "CPU | GPU (no graph) vs CPU |\n|---|---|---|---|---|\n", LM_VOCAB, LM_WIDTH, LM_HEADS,
            LM_WIDTH / LM_HEADS, LM_LAYERS, LM_CHECK_BATCH, LM_CHECK_CONTEXT);
    for (int p = 0; p < DG_PREC_COUNT; p++)
    for (int form = 0; form < 2 && (p == DG_PREC_FP32 || has_prec(t, (dg_precision)p)); form++) {
        const char *pn = dg_precision_name((dg_precision)p);
        char file[48], title[128];
        snprintf(file, sizeof file, "transformer_tokens_%s%s%s", lm_forms[form], p == DG_PREC_FP32 ? "" : "_",
                 p == DG_PREC_FP32 ? "" : pn);
        snprintf(title, sizeof title, "char-LM training step, %s attention, %s: tokens/s", lm_forms[form], pn);
        bench_chart ch = {file, title, "context T", "tokens/s", true, .vline = NAN};
        for (int b = 0; b < LM_N_BATCHES; b++) {
            char name[48], c0[96], c1[96];
            snprintf(name, sizeof name, "charlm-%s-b%d", lm_forms[form], lm_batches[b]);
            bench_series s[LM_N_IMPLS];
            for (int i = 0; i < LM_N_IMPLS; i++) {
                char title_s[64];
                snprintf(title_s, sizeof title_s, "%s, batch %d", lm_impls[i].name, lm_batches[b]);
                s[i] = bench_pick_prec(t, name, lm_impls[i].name, NULL, (dg_precision)p, false, BENCH_MS, title_s);
                bench_chart_add(&ch, tokens_per_s(s[i], lm_batches[b]));
            }
            if (!s[0].n && !s[1].n && !s[2].n) continue;
            bench_series s0 = bench_speedup(&s[0], &s[2], ""), s1 = bench_speedup(&s[0], &s[1], "");
            if (isnan(ch.vline)) ch.vline = bench_crossover(&s0);
            bench_crossover_str(&s0, c0, sizeof c0);
            bench_crossover_str(&s1, c1, sizeof c1);
            fprintf(f, "| %s | %s | %d | %s | %s |\n", lm_forms[form], pn, lm_batches[b], c0, c1);
        }
        bench_chart_draw(rep, &ch);
    }
    fprintf(f, "\n");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int form = 0; form < 2; form++) form_table(f, t, form, (dg_precision)p);
    return true;
}
