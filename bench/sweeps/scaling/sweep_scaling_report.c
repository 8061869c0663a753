/* sweep_scaling_report.c: the scaling sweep's report: the all-reduce's bus
 * bandwidth over message size per GPU count, NCCL's own call against the
 * graph's node (scaling_allreduce, fp32), each model's weak and strong
 * scaling efficiency against one GPU (scaling_efficiency, and
 * scaling_efficiency_P for each precision P other than fp32), and their
 * tables, and the same for the GPU ranks under MPI (gpu-mpi:
 * scaling_efficiency_mpi, scaling_efficiency_mpi_P) with their times
 * against one process's where rows of both meet; the CPU ranks' table,
 * blocking against overlapped; how many CPU ranks equal one GPU, where
 * rows of both meet. Every efficiency and
 * ratio sets rows of one precision against each other (a dtype column),
 * never a bf16 time against an fp32 one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/sweep.h"
#include "sweeps/scaling/sweep_scaling.h"

/* the measured row of case `name`, impl, m GPUs, column n (-1: any) and
 * precision p (NULL: none) */
static const csv_rec *find(const bench_table *t, const char *name, const char *impl, long long gpus, long long n,
                           dg_precision p) {
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (!strcmp(r->name, name) && !strcmp(r->impl, impl) && r->m == gpus && (n < 0 || r->n == n) &&
            r->precision == p && bench_row_measured(r))
            return r;
    }
    return NULL;
}

static void allreduce_report(bench_report *rep, const bench_table *t) {
    FILE *f = rep->sum;
    bench_chart ch = {"scaling_allreduce", "all-reduce (average, fp32): bus bandwidth per message size",
                      "message bytes per GPU", "bus GB/s", false, .vline = NAN};
    bool any = false;
    for (int c = 1; c < SCALING_N_COUNTS; c++)
        for (int impl = 0; impl < 2; impl++) {
            bench_series s = {.n = 0};
            snprintf(s.title, sizeof s.title, "%s, %d GPUs", impl ? "node" : "nccl", scaling_counts[c]);
            for (int i = 0; i < t->n && s.n < BENCH_MAX_PTS; i++) {
                const csv_rec *r = &t->r[i];
                if (strcmp(r->name, "allreduce") || strcmp(r->impl, impl ? "node" : "nccl") ||
                    r->m != scaling_counts[c] || !bench_row_measured(r))
                    continue;
                s.x[s.n] = (double)r->n;
                s.y[s.n] = s.lo[s.n] = s.hi[s.n] = r->gbps;
                s.noisy[s.n++] = !strcmp(r->status, "noisy");
            }
            if (!s.n) continue;
            if (!any)
                fprintf(f, "### All-reduce bus bandwidth (GB/s: bytes x 2(n-1)/n per second, as nccl-tests)\n\n"
                           "| GPUs | bytes | nccl | node | node / nccl |\n|---|---|---|---|---|\n");
            any = true;
            bench_chart_add(&ch, s);
        }
    for (int c = 1; c < SCALING_N_COUNTS && any; c++)
        for (int i = 0; i < t->n; i++) {
            const csv_rec *r = &t->r[i];
            if (strcmp(r->name, "allreduce") || strcmp(r->impl, "nccl") || r->m != scaling_counts[c]) continue;
            const csv_rec *nd = find(t, "allreduce", "node", r->m, r->n, DG_PREC_FP32);
            char b1[32], b2[32], b3[32];
            double nccl = bench_row_measured(r) ? r->gbps : NAN, node = nd ? nd->gbps : NAN;
            fprintf(f, "| %lld | %lld | %s | %s | %s |\n", r->m, r->n, bench_fmt_num(nccl, "%.1f", b1, sizeof b1),
                    bench_fmt_num(node, "%.1f", b2, sizeof b2),
                    bench_fmt_num(100 * node / nccl, "%.0f%%", b3, sizeof b3));
        }
    if (any) fprintf(f, "\n");
    bench_chart_draw(rep, &ch);
}

/* the models of the rows, in file order, without repeats */
static int model_names(const bench_table *t, char names[][48], int max) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        const char *nm = t->r[i].name;
        size_t len = strlen(nm);
        if (len < 5 || strcmp(nm + len - 5, "-weak")) continue;
        bool seen = false;
        for (int j = 0; j < n; j++) seen |= !strncmp(names[j], nm, len - 5) && names[j][len - 5] == '\0';
        if (!seen && n < max) snprintf(names[n++], 48, "%.*s", (int)(len - 5), nm);
    }
    return n;
}

/* whether the file has a measured row of impl */
static bool has_impl(const bench_table *t, const char *impl) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->r[i].impl, impl) && bench_row_measured(&t->r[i])) return true;
    return false;
}

/* the same in precision p */
static bool has_impl_in(const bench_table *t, const char *impl, dg_precision p) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->r[i].impl, impl) && t->r[i].precision == p && bench_row_measured(&t->r[i])) return true;
    return false;
}

/* the GPU counts of impl's measured rows in precision p, ascending and
 * each once, into out (at most max); their number */
static int counts_of(const bench_table *t, const char *impl, dg_precision p, long long *out, int max) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->impl, impl) || r->precision != p || !bench_row_measured(r)) continue;
        int j = 0;
        while (j < n && out[j] < r->m) j++;
        if ((j < n && out[j] == r->m) || n == max) continue;
        memmove(out + j + 1, out + j, (size_t)(n - j) * sizeof *out);
        out[j] = r->m;
        n++;
    }
    return n;
}

enum { MAX_COUNTS = 64 };

/* one precision's efficiency chart of impl's rows (gpu-dp's fp32 chart
 * keeps the name of the runs before the precision axis; gpu-mpi's are
 * scaling_efficiency_mpi...) and table rows */
static void models_report_in(bench_report *rep, const bench_table *t, const char *impl, char models[][48],
                             int n_models, dg_precision p) {
    FILE *f = rep->sum;
    char file[64], title[96];
    const char *mpi = strcmp(impl, "gpu-mpi") ? "" : "_mpi";
    if (p == DG_PREC_FP32) snprintf(file, sizeof file, "scaling_efficiency%s", mpi);
    else snprintf(file, sizeof file, "scaling_efficiency%s_%s", mpi, dg_precision_name(p));
    snprintf(title, sizeof title, "scaling efficiency against one GPU%s, %s", *mpi ? " rank (MPI)" : "",
             dg_precision_name(p));
    long long counts[MAX_COUNTS];
    int n_counts = counts_of(t, impl, p, counts, MAX_COUNTS);
    bench_chart ch = {file, title, "GPUs", "efficiency %", false, true, .vline = NAN};
    ch.hline[ch.n_hline] = 100;
    ch.hline_title[ch.n_hline++] = "linear";
    for (int m = 0; m < n_models; m++) {
        char weak[64], strong[64];
        snprintf(weak, sizeof weak, "%.40s-weak", models[m]);
        snprintf(strong, sizeof strong, "%.40s-strong", models[m]);
        const csv_rec *w1 = find(t, weak, impl, 1, -1, p), *s1 = find(t, strong, impl, 1, -1, p);
        bench_series sw = {.n = 0}, ss = {.n = 0};
        snprintf(sw.title, sizeof sw.title, "%.40s weak", models[m]);
        snprintf(ss.title, sizeof ss.title, "%.40s strong", models[m]);
        for (int c = 0; c < n_counts; c++) {
            long long n = counts[c];
            const csv_rec *w = find(t, weak, impl, n, -1, p), *s = find(t, strong, impl, n, -1, p);
            if (!w && !s) continue;
            double we = w && w1 ? w1->median_ms / w->median_ms : NAN;
            double se = s && s1 ? s1->median_ms / (n * s->median_ms) : NAN;
            double exposed = w && w1 ? (w->median_ms - w1->median_ms) / w->median_ms : NAN;
            if (!isnan(we) && sw.n < BENCH_MAX_PTS) {
                sw.x[sw.n] = n;
                sw.y[sw.n] = sw.lo[sw.n] = sw.hi[sw.n] = 100 * we;
                sw.n++;
            }
            if (!isnan(se) && ss.n < BENCH_MAX_PTS) {
                ss.x[ss.n] = n;
                ss.y[ss.n] = ss.lo[ss.n] = ss.hi[ss.n] = 100 * se;
                ss.n++;
            }
            char b[9][32];
            fprintf(f, "| %s | %s | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", models[m],
                    dg_precision_name(p), n,
                    bench_fmt_num(w ? (double)w->batch : NAN, "%.0f", b[0], 32),
                    bench_fmt_num(w ? w->median_ms : NAN, "%.3f", b[1], 32),
                    bench_fmt_num(w ? 1e3 * w->batch / w->median_ms : NAN, "%.0f", b[2], 32),
                    bench_fmt_num(100 * we, "%.1f%%", b[3], 32), bench_fmt_num(100 * exposed, "%.1f%%", b[4], 32),
                    bench_fmt_num(s ? (double)s->n : NAN, "%.0f", b[5], 32),
                    bench_fmt_num(s ? s->median_ms : NAN, "%.3f", b[6], 32),
                    bench_fmt_num(100 * se, "%.1f%%", b[7], 32),
                    bench_fmt_num(w ? w->k / 1e6 : s ? s->k / 1e6 : NAN, "%.1f", b[8], 32));
        }
        bench_chart_add(&ch, sw);
        bench_chart_add(&ch, ss);
    }
    bench_chart_draw(rep, &ch);
}

/* impl's rows (gpu-dp: one process driving the GPUs; gpu-mpi: a process
 * per GPU under MPI) */
static void models_report(bench_report *rep, const bench_table *t, const char *impl) {
    char models[8][48];
    int n_models = model_names(t, models, 8);
    if (!n_models || !has_impl(t, impl)) return;
    FILE *f = rep->sum;
    fprintf(f, "### Training steps on several GPUs%s (SGD with momentum, replayed CUDA graphs)\n\nWeak: the batch per "
               "GPU fixed; efficiency = one GPU's step time / n GPUs' step time. Strong: the global batch fixed; "
               "efficiency = one GPU's time / (n x n GPUs' time). Exposed exchange: the weak step's time over one "
               "GPU's, as a share of the step. Each against one GPU in the same dtype.\n\n| model | dtype | GPUs | "
               "weak batch | weak ms | samples/s | weak eff | exposed exchange | strong batch per GPU | strong ms | "
               "strong eff | gradient MB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            strcmp(impl, "gpu-mpi") ? ", one process (gpu-dp)" : ", a process per GPU under MPI (gpu-mpi)");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        if (has_impl_in(t, impl, (dg_precision)p)) models_report_in(rep, t, impl, models, n_models, (dg_precision)p);
    fprintf(f, "\n");
}

/* the GPU ranks' steps (gpu-mpi) against one process's (gpu-dp) on as
 * many GPUs, case by case, where rows of both meet (t: this folder's rows
 * and another run's copied in, cpu_gpu_report) */
static void mpi_report(bench_report *rep, const bench_table *t) {
    int rows = 0;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *r = &t->r[i];
        if (strcmp(r->impl, "gpu-mpi") || !bench_row_measured(r)) continue;
        const csv_rec *one = find(t, r->name, "gpu-dp", r->m, r->n, r->precision);
        if (!one) continue;
        if (!rows++)
            fprintf(rep->sum, "### GPU ranks (MPI, a process per GPU) against one process driving the GPUs\n\n"
                              "| case | dtype | GPUs | batch | one process ms | ranks ms | ranks / one |\n"
                              "|---|---|---|---|---|---|---|\n");
        char b[3][32];
        fprintf(rep->sum, "| %s | %s | %lld | %lld | %s | %s | %s |\n", r->name, dg_precision_name(r->precision),
                r->m, r->batch, bench_fmt_num(one->median_ms, "%.3f", b[0], 32),
                bench_fmt_num(r->median_ms, "%.3f", b[1], 32),
                bench_fmt_num(r->median_ms / one->median_ms, "%.3f", b[2], 32));
    }
    if (rows) fprintf(rep->sum, "\n");
}

/* the weak steps with the gradients in buckets against each alone, where
 * the sweep measured both */
static void buckets_report(bench_report *rep, const bench_table *t) {
    char models[8][48];
    int n_models = model_names(t, models, 8), rows = 0;
    for (int i = 0; i < DG_PREC_COUNT * n_models; i++) { /* each precision's rows together */
        dg_precision p = (dg_precision)(i / n_models);
        int m = i % n_models;
        char weak[64];
        snprintf(weak, sizeof weak, "%.40s-weak", models[m]);
        const csv_rec *w1 = find(t, weak, "gpu-dp", 1, -1, p);
        for (int c = 1; c < SCALING_N_COUNTS; c++) {
            int n = scaling_counts[c];
            const csv_rec *b = find(t, weak, "gpu-dp", n, -1, p), *a = find(t, weak, "gpu-dp-unbucketed", n, -1, p);
            if (!a || !b) continue;
            if (!rows++)
                fprintf(rep->sum, "### Gradient buckets (weak steps)\n\nThe same step with the gradients packed into "
                                  "buckets, one NCCL call each (gpu-dp), and with every gradient its own call "
                                  "(gpu-dp-unbucketed).\n\n| model | dtype | GPUs | each alone ms | buckets ms | ratio | "
                                  "weak eff alone | weak eff buckets |\n|---|---|---|---|---|---|---|---|\n");
            char f[5][32];
            fprintf(rep->sum, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", models[m], dg_precision_name(p), n,
                    bench_fmt_num(a->median_ms, "%.3f", f[0], 32), bench_fmt_num(b->median_ms, "%.3f", f[1], 32),
                    bench_fmt_num(b->median_ms / a->median_ms, "%.3f", f[2], 32),
                    bench_fmt_num(w1 ? 100 * w1->median_ms / a->median_ms : NAN, "%.1f%%", f[3], 32),
                    bench_fmt_num(w1 ? 100 * w1->median_ms / b->median_ms : NAN, "%.1f%%", f[4], 32));
        }
    }
    if (rows) fprintf(rep->sum, "\n");
}

/* duograd's weak and strong rows beside PyTorch DistributedDataParallel's
 * (impl torch-ddp, bench/peers/torch_ddp.py) of the same file, where the
 * peer ran */
static void peer_report(bench_report *rep, const bench_table *t) {
    char models[8][48];
    int n_models = model_names(t, models, 8), rows = 0;
    for (int i = 0; i < DG_PREC_COUNT * n_models; i++) { /* each precision's rows together */
        dg_precision p = (dg_precision)(i / n_models);
        int m = i % n_models;
        char weak[64], strong[64];
        snprintf(weak, sizeof weak, "%.40s-weak", models[m]);
        snprintf(strong, sizeof strong, "%.40s-strong", models[m]);
        const csv_rec *dw1 = find(t, weak, "gpu-dp", 1, -1, p), *ds1 = find(t, strong, "gpu-dp", 1, -1, p);
        const csv_rec *pw1 = find(t, weak, "torch-ddp", 1, -1, p), *ps1 = find(t, strong, "torch-ddp", 1, -1, p);
        for (int c = 0; c < SCALING_N_COUNTS; c++) {
            int n = scaling_counts[c];
            const csv_rec *dw = find(t, weak, "gpu-dp", n, -1, p), *ds = find(t, strong, "gpu-dp", n, -1, p);
            const csv_rec *pw = find(t, weak, "torch-ddp", n, -1, p), *ps = find(t, strong, "torch-ddp", n, -1, p);
            if (!pw && !ps) continue;
            if (!rows++)
                fprintf(rep->sum, "### Beside PyTorch DistributedDataParallel (same file)\n\nPyTorch eager, one "
                                  "process per GPU, DDP's default buckets (bench/peers/torch_ddp.py); each side's "
                                  "efficiency against its own one-GPU step in the same dtype.\n\n| model | dtype | GPUs | "
                                  "weak ms duograd | weak ms PyTorch | weak eff duograd | weak eff PyTorch | strong ms "
                                  "duograd | strong ms PyTorch | strong eff duograd | strong eff PyTorch |\n"
                                  "|---|---|---|---|---|---|---|---|---|---|---|\n");
            char f[8][32];
            fprintf(rep->sum, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", models[m],
                    dg_precision_name(p), n,
                    bench_fmt_num(dw ? dw->median_ms : NAN, "%.3f", f[0], 32),
                    bench_fmt_num(pw ? pw->median_ms : NAN, "%.3f", f[1], 32),
                    bench_fmt_num(dw && dw1 ? 100 * dw1->median_ms / dw->median_ms : NAN, "%.1f%%", f[2], 32),
                    bench_fmt_num(pw && pw1 ? 100 * pw1->median_ms / pw->median_ms : NAN, "%.1f%%", f[3], 32),
                    bench_fmt_num(ds ? ds->median_ms : NAN, "%.3f", f[4], 32),
                    bench_fmt_num(ps ? ps->median_ms : NAN, "%.3f", f[5], 32),
                    bench_fmt_num(ds && ds1 ? 100 * ds1->median_ms / (n * ds->median_ms) : NAN, "%.1f%%", f[6], 32),
                    bench_fmt_num(ps && ps1 ? 100 * ps1->median_ms / (n * ps->median_ms) : NAN, "%.1f%%", f[7], 32));
        }
    }
    if (rows) fprintf(rep->sum, "\n");
}

/* the CPU ranks' rows (sweep_scaling_mpi.c): per model and rank count the
 * weak and strong times, blocking (cpu-mpi) and overlapped
 * (cpu-mpi-overlap), each efficiency against one rank's blocking row (one
 * rank has no all-reduce to overlap) */
static void ranks_report(bench_report *rep, const bench_table *t) {
    static const char *const impls[] = {"cpu-mpi", "cpu-mpi-overlap"};
    char models[8][48];
    int n_models = model_names(t, models, 8);
    if (!n_models || !has_impl(t, "cpu-mpi")) return;
    FILE *f = rep->sum;
    fprintf(f, "### Training steps on CPU ranks (MPI, one process each; the slowest rank's time)\n\nblocking: each "
               "gradient's MPI_Allreduce in its node; overlapped: MPI_Iallreduce per bucket during the backward. "
               "Weak efficiency = one rank's step time / n ranks' step time; strong = one rank's / (n x n ranks'), "
               "both against one rank's blocking row in the same dtype.\n\n| model | dtype | ranks | weak ms blocking | "
               "weak ms overlapped | weak eff blocking | weak eff overlapped | strong ms blocking | strong ms "
               "overlapped | strong eff blocking | strong eff overlapped |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < DG_PREC_COUNT * n_models; i++) { /* each precision's rows together */
        dg_precision p = (dg_precision)(i / n_models);
        int m = i % n_models;
        char weak[64], strong[64];
        snprintf(weak, sizeof weak, "%.40s-weak", models[m]);
        snprintf(strong, sizeof strong, "%.40s-strong", models[m]);
        const csv_rec *w1 = find(t, weak, "cpu-mpi", 1, -1, p), *s1 = find(t, strong, "cpu-mpi", 1, -1, p);
        long long done = 0; /* the rank counts in file order, each once */
        for (int j = 0; j < t->n; j++) {
            const csv_rec *r = &t->r[j];
            if (strcmp(r->impl, "cpu-mpi") || strcmp(r->name, weak) || r->precision != p || r->m <= done) continue;
            done = r->m;
            double ms[4], eff[4];
            for (int k = 0; k < 4; k++) {
                const csv_rec *x = find(t, k < 2 ? weak : strong, impls[k % 2], r->m, -1, p), *one = k < 2 ? w1 : s1;
                ms[k] = x ? x->median_ms : NAN;
                eff[k] = one ? one->median_ms / ((k < 2 ? 1 : r->m) * ms[k]) : NAN;
            }
            char b[8][32];
            fprintf(f, "| %s | %s | %lld | %s | %s | %s | %s | %s | %s | %s | %s |\n", models[m], dg_precision_name(p),
                    r->m,
                    bench_fmt_num(ms[0], "%.3f", b[0], 32), bench_fmt_num(ms[1], "%.3f", b[1], 32),
                    bench_fmt_num(100 * eff[0], "%.1f%%", b[2], 32), bench_fmt_num(100 * eff[1], "%.1f%%", b[3], 32),
                    bench_fmt_num(ms[2], "%.3f", b[4], 32), bench_fmt_num(ms[3], "%.3f", b[5], 32),
                    bench_fmt_num(100 * eff[2], "%.1f%%", b[6], 32), bench_fmt_num(100 * eff[3], "%.1f%%", b[7], 32));
        }
    }
    fprintf(f, "\n");
}

/* samples per second of a training-step row: its global batch per median step */
static double samples_per_s(const csv_rec *r) { return 1e3 * (double)r->batch / r->median_ms; }

/* "How many CPU hosts equal one GPU?" from the rows of t: each one-GPU row
 * (gpu-dp, 1 GPU) against the CPU ranks' rows of the same case, the same
 * model (gradient bytes, column k) and the same global batch (overlapped
 * from 2 ranks on, cpu-mpi at 1). Measured where some rank count reaches
 * the GPU's samples/s; otherwise extrapolated, and said so, from the
 * largest rank count at its measured samples/s per rank (linear: no
 * further loss of efficiency assumed). Returns the GPU rows answered. */
static int equal_report(bench_report *rep, const bench_table *t) {
    int answers = 0;
    for (int i = 0; i < t->n; i++) {
        const csv_rec *g = &t->r[i];
        if (strcmp(g->impl, "gpu-dp") || g->m != 1 || !bench_row_measured(g)) continue;
        const csv_rec *most = NULL, *reach = NULL;
        double gs = samples_per_s(g);
        for (int j = 0; j < t->n; j++) {
            const csv_rec *c = &t->r[j];
            if (strcmp(c->impl, c->m > 1 ? "cpu-mpi-overlap" : "cpu-mpi") || strcmp(c->name, g->name) ||
                c->precision != g->precision || c->k != g->k || c->batch != g->batch || !bench_row_measured(c))
                continue;
            if (!answers && !most)
                fprintf(rep->sum, "### How many CPU ranks equal one GPU (same case, model, dtype and global batch)\n\nThe CPU "
                                  "ranks' samples/s (MPI, overlapped from 2 ranks on; the slowest rank's step) beside "
                                  "one GPU's (gpu-dp, 1 GPU), from the folder's scaling.csv and, where present, "
                                  "scaling-cpu.csv or scaling-gpu.csv (another run's scaling.csv copied in).\n\n");
            if (!most)
                fprintf(rep->sum, "| case | dtype | global batch | ranks | CPU samples/s | GPU samples/s | GPU / CPU |\n"
                                  "|---|---|---|---|---|---|---|\n");
            double cs = samples_per_s(c);
            char b[3][32];
            fprintf(rep->sum, "| %s | %s | %lld | %lld | %s | %s | %s |\n", g->name, dg_precision_name(g->precision),
                    g->batch, c->m,
                    bench_fmt_num(cs, "%.0f", b[0], 32), bench_fmt_num(gs, "%.0f", b[1], 32),
                    bench_fmt_num(gs / cs, "%.2f", b[2], 32));
            if (!most || c->m > most->m) most = c;
            if (cs >= gs && (!reach || c->m < reach->m)) reach = c;
        }
        if (!most) continue;
        answers++;
        double per_rank = samples_per_s(most) / (double)most->m;
        if (reach)
            fprintf(rep->sum, "\n%s, %s, global batch %lld: %lld CPU ranks equal one GPU (measured: %.0f samples/s "
                              "against %.0f).\n\n", g->name, dg_precision_name(g->precision), g->batch, reach->m,
                    samples_per_s(reach), gs);
        else
            fprintf(rep->sum, "\n%s, %s, global batch %lld: about %.0f CPU ranks equal one GPU (extrapolated, not "
                              "measured: %lld ranks give %.0f samples/s, %.0f per rank, against the GPU's %.0f; "
                              "assumes each further rank adds as much).\n\n", g->name,
                    dg_precision_name(g->precision), g->batch, ceil(gs / per_rank),
                    most->m, samples_per_s(most), per_rank, gs);
    }
    return answers;
}

/* equal_report over t's rows and those of DIR/scaling-cpu.csv and
 * DIR/scaling-gpu.csv where present (another run's scaling.csv copied in:
 * the CPU ranks and the GPU are measured on different machines); where
 * nothing meets, a line saying what is missing */
static void cpu_gpu_report(bench_report *rep, const bench_table *t) {
    bench_table all = {malloc((size_t)t->n * sizeof *t->r), 0, false};
    if (!all.r && t->n) return;
    memcpy(all.r, t->r, (size_t)t->n * sizeof *t->r);
    all.n = t->n;
    static const char *const others[] = {"scaling-cpu", "scaling-gpu"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        bench_table other = bench_table_load(rep->dir, others[o]); /* unreadable: said on stderr, left out */
        csv_rec *grown = other.n ? realloc(all.r, (size_t)(all.n + other.n) * sizeof *all.r) : NULL;
        if (grown) {
            memcpy(grown + all.n, other.r, (size_t)other.n * sizeof *other.r);
            all.r = grown;
            all.n += other.n;
        }
        free(other.r);
    }
    mpi_report(rep, &all);
    bool gpu = has_impl(&all, "gpu-dp"), cpu = has_impl(&all, "cpu-mpi");
    if (!equal_report(rep, &all) && (gpu || cpu))
        fprintf(rep->sum, "How many CPU ranks equal one GPU: not answered here: %s.\n\n",
                gpu && cpu ? "no one-GPU row and CPU ranks' row of the same case, model (gradient bytes), dtype and "
                             "global batch"
                : gpu      ? "no CPU ranks' rows (copy a CPU run's scaling.csv in as scaling-cpu.csv)"
                           : "no one-GPU rows (copy a GPU run's scaling.csv in as scaling-gpu.csv)");
    free(all.r);
}

bool bench_report_scaling(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## Data parallelism: several GPUs (NCCL), CPU ranks (MPI)\n\n");
    int skipped = 0;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->r[i].name, "scaling") && !strcmp(t->r[i].status, "skipped")) {
            fprintf(rep->sum, "Not run: %s.\n\n", t->r[i].note);
            skipped++;
        }
    if (skipped == t->n) return true;
    allreduce_report(rep, t);
    models_report(rep, t, "gpu-dp");
    models_report(rep, t, "gpu-mpi");
    ranks_report(rep, t);
    buckets_report(rep, t);
    peer_report(rep, t);
    cpu_gpu_report(rep, t);
    return true;
}
