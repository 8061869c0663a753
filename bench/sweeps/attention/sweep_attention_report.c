/* sweep_attention_report.c: the attention sweep's report, with the rows of
 * bench/peers/torch_attention.py (DIR/torch_attention.csv: impl
 * torch-math-fwd, torch-efficient-fwdbwd, ...) beside duograd's where that
 * file is in the folder.
 *
 * Charts, per mask (full, causal), pass (fwd, fwdbwd) and precision in the
 * rows (fp32's files without a suffix, the others' with _DTYPE):
 *   attention_time_MASK_PASS[_DTYPE]    median ms over T: composed and fused
 *                                       on cpu, gpu, gpu-graph, and PyTorch's
 *                                       SDPA in the same precision
 *   attention_tflops_MASK_PASS[_DTYPE]  the same as TFLOP/s, with each
 *                                       device's measured GEMM ceiling in
 *                                       that precision
 * and attention_memory: the fp32 plans' arena over T (case full; also the
 * rows not run for want of memory: the plan is laid out before memory is
 * asked). Summary: time tables per precision, the arena table, the GPU/CPU
 * crossover in T and each implementation's best rate against its ceiling
 * per precision, the head-size variants (fp32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner/sweep.h"
#include "sweeps/attention/sweep_attention.h"

static const char *const masks[2] = {"full", "causal"};
/* PyTorch's SDPA backends; flash has bf16 and fp16 alone */
static const char *const peer_impls[3] = {"torch-math", "torch-efficient", "torch-flash"};
static int n_peers(dg_precision p) { return p == DG_PREC_BF16 || p == DG_PREC_FP16 ? 3 : 2; }

/* whether t has a row in precision p */
static bool has_prec(const bench_table *t, dg_precision p) {
    for (int i = 0; i < t->n; i++)
        if (t->r[i].precision == p) return true;
    return false;
}

/* the sequence lengths of the main cases in t, ascending, without repeats */
static int lengths_of(const bench_table *t, long long *out) {
    return bench_table_ms(t, "causal", out, bench_table_ms(t, "full", out, 0, BENCH_MAX_PTS), BENCH_MAX_PTS);
}

static bench_series scaled(bench_series s, double f) {
    for (int i = 0; i < s.n; i++) {
        s.y[i] *= f;
        s.lo[i] *= f;
        s.hi[i] *= f;
    }
    return s;
}

/* "BACKEND-FORM-PASS" of a backend index, form and pass */
static void impl_of(int bk, int form, int pass, char *buf, size_t n) { att_impl_name((bk * 2 + form) * 2 + pass, buf, n); }

static void draw_pass(bench_report *rep, const bench_table *t, const bench_table *peer, int mk, int pass,
                      dg_precision p) {
    const char *pass_words = pass == ATT_FWD ? "forward" : "forward + backward", *pn = dg_precision_name(p);
    char file[64], title[160], impl[32], suffix[8] = "";
    if (p != DG_PREC_FP32) snprintf(suffix, sizeof suffix, "_%s", pn);
    bench_chart time = {file, title, "T (sequence length)", "median ms", true, .vline = NAN};
    snprintf(file, sizeof file, "attention_time_%s_%s%s", masks[mk], att_passes[pass], suffix);
    snprintf(title, sizeof title, "attention (%s mask), %s, %s, B=16 H=8 Dh=64: time", masks[mk], pass_words, pn);
    bench_chart rate = time;
    char file2[64], title2[160];
    rate.file = file2;
    rate.title = title2;
    rate.ylabel = "TFLOP/s";
    snprintf(file2, sizeof file2, "attention_tflops_%s_%s%s", masks[mk], att_passes[pass], suffix);
    snprintf(title2, sizeof title2, "attention (%s mask), %s, %s, B=16 H=8 Dh=64: TFLOP/s (convention of core/ops.c)",
             masks[mk], pass_words, pn);
    for (int bk = 0; bk < ATT_N_BACKENDS; bk++)
        for (int form = 0; form < 2; form++) {
            impl_of(bk, form, pass, impl, sizeof impl);
            bench_chart_add(&time, bench_pick_prec(t, masks[mk], impl, NULL, p, false, BENCH_MS, impl));
            bench_chart_add(&rate, scaled(bench_pick_prec(t, masks[mk], impl, NULL, p, false, BENCH_GFLOPS, impl), 1e-3));
        }
    for (int i = 0; i < n_peers(p); i++) {
        snprintf(impl, sizeof impl, "%s-%s", peer_impls[i], att_passes[pass]);
        bench_chart_add(&time, bench_pick_prec(peer, masks[mk], impl, NULL, p, false, BENCH_MS, impl));
        bench_chart_add(&rate, scaled(bench_pick_prec(peer, masks[mk], impl, NULL, p, false, BENCH_GFLOPS, impl), 1e-3));
    }
    char cl[64], gl[64];
    snprintf(cl, sizeof cl, "CPU GEMM ceiling, %s", pn);
    snprintf(gl, sizeof gl, "GPU GEMM ceiling, %s", pn);
    bench_chart_hline(&rate, rep->ceil.cpu_gemm[p] / 1e3, cl);
    bench_chart_hline(&rate, rep->ceil.gpu_gemm[p] / 1e3, gl);
    bench_chart_draw(rep, &time);
    bench_chart_draw(rep, &rate);
}

/* the arena of FORM-PASS over T, from any backend's rows of case full
 * (the plan is the same on each), measured or not */
static bench_series arena_series(const bench_table *t, int form, int pass) {
    bench_series s = {.n = 0};
    snprintf(s.title, sizeof s.title, "%s %s", att_forms[form], att_passes[pass]);
    long long ts[BENCH_MAX_PTS];
    int n = lengths_of(t, ts);
    for (int i = 0; i < n; i++)
        for (int bk = 0; bk < ATT_N_BACKENDS; bk++) {
            char impl[32];
            impl_of(bk, form, pass, impl, sizeof impl);
            const csv_rec *r = bench_table_row(t, "full", impl, ts[i]);
            if (!r || r->arena_bytes <= 0) continue;
            s.x[s.n] = (double)ts[i];
            s.y[s.n] = s.lo[s.n] = s.hi[s.n] = (double)r->arena_bytes / 1e6;
            s.noisy[s.n++] = false;
            break;
        }
    return s;
}

/* a table cell: "ms (TFLOP/s)", the row's status, or "-" */
static void cell(FILE *f, const csv_rec *r) {
    if (r && bench_row_measured(r)) fprintf(f, " %.4g (%.3g) |", r->median_ms, r->gflops / 1e3);
    else fprintf(f, " %s |", r ? r->status : "-");
}

/* one mask and pass in precision p: duograd's rows and PyTorch's */
static void time_table(FILE *f, const bench_table *t, const bench_table *peer, int mk, int pass, dg_precision p) {
    long long ts[BENCH_MAX_PTS];
    int n = lengths_of(t, ts);
    char impl[32];
    fprintf(f, "### %s mask, %s (%s): median ms (TFLOP/s)\n\n| T |", masks[mk],
            pass == ATT_FWD ? "forward" : "forward + backward", dg_precision_name(p));
    for (int bk = 0; bk < ATT_N_BACKENDS; bk++)
        for (int form = 0; form < 2; form++) fprintf(f, " %s-%s |", att_backends[bk].name, att_forms[form]);
    for (int i = 0; i < n_peers(p); i++) fprintf(f, " %s |", peer_impls[i]);
    fprintf(f, "\n|---|");
    for (int i = 0; i < 2 * ATT_N_BACKENDS + n_peers(p); i++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %lld |", ts[i]);
        for (int bk = 0; bk < ATT_N_BACKENDS; bk++)
            for (int form = 0; form < 2; form++) {
                impl_of(bk, form, pass, impl, sizeof impl);
                cell(f, bench_table_row_prec(t, masks[mk], impl, ts[i], p));
            }
        for (int j = 0; j < n_peers(p); j++) {
            snprintf(impl, sizeof impl, "%s-%s", peer_impls[j], att_passes[pass]);
            cell(f, bench_table_row_prec(peer, masks[mk], impl, ts[i], p));
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

static void memory_table(FILE *f, const bench_table *t) {
    bench_series s[2][2];
    for (int form = 0; form < 2; form++)
        for (int pass = 0; pass < 2; pass++) s[form][pass] = arena_series(t, form, pass);
    fprintf(f, "### Plan arena (MB), case full, fp32 (any backend; rows not run for want of memory included: the plan "
               "is laid out before memory is asked)\n\n| T | composed fwd | fused fwd | composed fwdbwd | fused "
               "fwdbwd | composed / fused, fwdbwd |\n|---|---|---|---|---|---|\n");
    long long ts[BENCH_MAX_PTS];
    int n = lengths_of(t, ts);
    for (int i = 0; i < n; i++) {
        double v[2][2];
        char b[2][2][32], ratio[32];
        for (int form = 0; form < 2; form++)
            for (int pass = 0; pass < 2; pass++) {
                v[form][pass] = NAN;
                for (int j = 0; j < s[form][pass].n; j++)
                    if (s[form][pass].x[j] == (double)ts[i]) v[form][pass] = s[form][pass].y[j];
                bench_fmt_num(v[form][pass], "%.1f", b[form][pass], sizeof b[form][pass]);
            }
        bench_fmt_num(v[ATT_COMPOSED][ATT_FWDBWD] / v[ATT_FUSED][ATT_FWDBWD], "%.2f", ratio, sizeof ratio);
        fprintf(f, "| %lld | %s | %s | %s | %s | %s |\n", ts[i], b[0][0], b[1][0], b[0][1], b[1][1], ratio);
    }
    fprintf(f, "\n");
}

/* per precision in the rows: fp32 always (n/a where nothing measured) */
static void crossovers(FILE *f, const bench_table *t) {
    fprintf(f, "### GPU vs CPU crossover in T (gpu-graph against cpu, same form, pass and precision)\n\n"
               "| mask | pass | dtype | composed | fused |\n|---|---|---|---|---|\n");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int mk = 0; mk < 2 && (p == DG_PREC_FP32 || has_prec(t, (dg_precision)p)); mk++)
        for (int pass = 0; pass < 2; pass++) {
            fprintf(f, "| %s | %s | %s |", masks[mk], att_passes[pass], dg_precision_name((dg_precision)p));
            for (int form = 0; form < 2; form++) {
                char c[32], g[32], x[96];
                impl_of(0, form, pass, c, sizeof c);
                impl_of(2, form, pass, g, sizeof g);
                bench_series cs = bench_pick_prec(t, masks[mk], c, NULL, (dg_precision)p, false, BENCH_MS, c);
                bench_series gs = bench_pick_prec(t, masks[mk], g, NULL, (dg_precision)p, false, BENCH_MS, g);
                bench_series sp = bench_speedup(&cs, &gs, "");
                bench_crossover_str(&sp, x, sizeof x);
                fprintf(f, " %s |", x);
            }
            fprintf(f, "\n");
        }
    fprintf(f, "\n");
}

static void best_rates(FILE *f, const bench_report *rep, const bench_table *t) {
    fprintf(f, "### Best rate of each implementation against its device's GEMM ceiling in the same precision\n\n"
               "| impl | dtype | mask | T | TFLOP/s | of ceiling |\n|---|---|---|---|---|---|\n");
    for (int ii = 0; ii < ATT_N_IMPLS; ii++)
        for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int mk = 0; mk < 2; mk++) {
            char impl[32], tf[32], frac[32];
            att_impl_name(ii, impl, sizeof impl);
            bench_series s = bench_pick_prec(t, masks[mk], impl, NULL, (dg_precision)p, false, BENCH_GFLOPS, impl);
            double at, best = bench_series_max(&s, &at);
            if (isnan(best)) continue;
            double ceil = att_backends[ii / 4].gpu ? rep->ceil.gpu_gemm[p] : rep->ceil.cpu_gemm[p];
            fprintf(f, "| %s | %s | %s | %.0f | %s | %s |\n", impl, dg_precision_name((dg_precision)p), masks[mk], at,
                    bench_fmt_num(best / 1e3, "%.3g", tf, sizeof tf),
                    bench_fmt_num(100 * best / ceil, "%.0f%%", frac, sizeof frac));
        }
    fprintf(f, "\n");
}

/* every case at ATT_VARIANT_T, when a variant was measured */
static void variants(FILE *f, const bench_table *t) {
    bool any = false;
    for (int i = 0; i < t->n; i++)
        for (int c = 0; c < ATT_N_CASES; c++) any |= att_cases[c].variant && !strcmp(t->r[i].name, att_cases[c].name);
    if (!any) return;
    fprintf(f, "### Heads and head size at T=%d (B=16, H*Dh = 512): forward + backward (fp32), median ms (TFLOP/s)\n\n"
               "| case | H | Dh |", ATT_VARIANT_T);
    for (int bk = 0; bk < ATT_N_BACKENDS; bk++)
        for (int form = 0; form < 2; form++) fprintf(f, " %s-%s |", att_backends[bk].name, att_forms[form]);
    fprintf(f, "\n|---|---|---|");
    for (int i = 0; i < 2 * ATT_N_BACKENDS; i++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int c = 0; c < ATT_N_CASES; c++) {
        fprintf(f, "| %s | %d | %d |", att_cases[c].name, att_cases[c].heads, att_cases[c].dh);
        for (int bk = 0; bk < ATT_N_BACKENDS; bk++)
            for (int form = 0; form < 2; form++) {
                char impl[32];
                impl_of(bk, form, ATT_FWDBWD, impl, sizeof impl);
                cell(f, bench_table_row(t, att_cases[c].name, impl, ATT_VARIANT_T));
            }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

bool bench_report_attention(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    bench_table peer = bench_table_load(rep->dir, "torch_attention");
    rep->failed |= peer.unreadable;
    FILE *f = rep->sum;
    fprintf(f, "## Attention: composed (matmul, softmax, matmul) vs fused, B=16 H=8 Dh=64\n\n"
               "Forward (fwd) and forward + backward (fwdbwd: dq, dk, dv of sum(o * w)), in each precision run "
               "(fp32: TF32 off; tf32: the GPU's composed products on TF32 tensor cores; bf16, fp16: the composed "
               "products' operands in the dtype, float32 accumulation, softmax and outputs, the fused op on q, k, v in "
               "the dtype, float32 softmax and sums, P rounded to it before P V; a form a backend has no "
               "path for in a precision is a skipped row, its note says why). TFLOP/s count "
               "the products with the score matrix (core/ops.c's dg_attention_flops): forward 4 B H T^2 Dh, "
               "forward + backward 14 B H T^2 Dh, causal x (T+1)/(2T), the same for both forms. Every row checked "
               "first (check f64-rows+ref@1x2xT': sampled rows of the full-size outputs against float64 sums, and "
               "the same graph at B=1 H=2 T'=min(T,128) against the float64 interpreter, at the precision's "
               "tolerance, which the check column names). oom: the plan did not "
               "fit (GPU: the allocation failed; CPU: predicted beyond the host memory, not tried). %s\n\n",
            peer.n ? "torch-*: bench/peers/torch_attention.py's rows (torch_attention.csv), PyTorch SDPA in the "
                     "table's precision." : "");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int mk = 1; mk >= 0 && has_prec(t, (dg_precision)p); mk--)
            for (int pass = 1; pass >= 0; pass--) time_table(f, t, &peer, mk, pass, (dg_precision)p);
    memory_table(f, t);
    crossovers(f, t);
    best_rates(f, rep, t);
    variants(f, t);
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int mk = 0; mk < 2 && has_prec(t, (dg_precision)p); mk++)
            for (int pass = 0; pass < 2; pass++) draw_pass(rep, t, &peer, mk, pass, (dg_precision)p);
    bench_chart mem = {"attention_memory", "attention plan arena, B=16 H=8 Dh=64: composed O(T^2), fused O(T)",
                       "T (sequence length)", "arena MB", true, .vline = NAN};
    for (int form = 0; form < 2; form++)
        for (int pass = 0; pass < 2; pass++) bench_chart_add(&mem, arena_series(t, form, pass));
    bench_chart_draw(rep, &mem);
    free(peer.r);
    return true;
}
