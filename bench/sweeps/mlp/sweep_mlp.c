/* sweep_mlp.c: one training step (forward, backward, Adam update) of an MLP
 * as one plan, over batch sizes and widths. GPU rows with CUDA-graph replay
 * (impl gpu-graph) and without (gpu). Check: the first step's loss against
 * the float64 reference evaluation of the same graph. Data is uploaded once
 * (transfer = 0): the step itself is timed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/status_internal.h"
#include "check/check.h"
#include "runner/sweep.h"

static const long long default_batches[] = {32, 128, 512, 2048, 8192};
static const long long quick_batches[] = {32, 256, 2048};
/* the networks timed (--quick: the first only); the report draws one chart
 * per entry, mlp_time_INDEX */
static const char *const widths_list[] = {"784-256-100-10", "784-1024-1024-10"};
#define N_WIDTHS (int)(sizeof widths_list / sizeof *widths_list)

static dg_status run_plan(void *arg) { return dg_plan_run(arg); }

/* replay: the plan may capture and replay the step (CUDA graphs on the GPU) */
static void run_one(bench_ctx *ctx, dg_backend *be, const char *impl, bool replay, const char *wspec,
                    const dg_mlp_cfg *cfg, int batch, bench_step_ref *ref) {
    const int *w = cfg->widths, nw = cfg->n_widths;
    bench_row row = {.sweep = "mlp", .name = wspec, .impl = impl, .backend = be == ctx->cpu ? "cpu" : "gpu",
                     .m = batch, .n = w[1], .k = w[0], .batch = batch, .threads = ctx->threads,
                     .warmup = ctx->timing.warmup, .max_rel_err = NAN, .check = BENCH_STEP_CHECK};
    if (!bench_wanted(ctx, wspec, impl)) return;
    double macs = 0;
    for (int i = 0; i + 1 < nw; i++) macs += (double)w[i] * w[i + 1];
    row.flops = 6.0 * batch * macs; /* forward 2, backward 4 flops per weight and row */
    float *x = malloc((size_t)batch * w[0] * 4);
    int32_t *y = malloc((size_t)batch * 4);
    bench_step bs = {0};
    bool ok = false;
    dg_status st = x && y ? DG_OK : dg__fail(DG_ERR_OOM, "mlp: out of host memory");
    if (st == DG_OK) {
        dg_rng r = dg_rng_new((uint64_t)batch);
        for (long long i = 0; i < (long long)batch * w[0]; i++) x[i] = (float)dg_rng_uniform(&r);
        for (int i = 0; i < batch; i++) y[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)w[nw - 1]);
        bench_step_spec spec = bench_mlp_step(cfg);
        st = bench_step_new(&bs, be, &spec, batch, x, y, &(dg_plan_opts){.no_replay = !replay}, ref,
                            &row.max_rel_err, &ok);
    }
    if (st == DG_OK) {
        row.status = ok ? "ok" : "wrong";
        if (!strcmp(row.status, "ok")) st = bench_time(be, be == ctx->gpu, run_plan, bs.p, &ctx->timing, &row.st);
    }
    if (st != DG_OK) {
        row.status = bench_status_word(st);
        row.note = dg_last_error();
    }
    bench_emit(ctx, &row);
    bench_step_free(&bs);
    free(x);
    free(y);
}

dg_status sweep_mlp(bench_ctx *ctx) {
    const long long *sizes;
    int n_default = (int)(sizeof default_batches / sizeof *default_batches) - !ctx->extended; /* 8192: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches, ctx->quick ? 3 : n_default, &sizes);
    bench_plan_rows(ctx, (ctx->quick ? 1 : N_WIDTHS) * n * (!!ctx->cpu + 2 * !!ctx->gpu));
    for (int wi = 0; wi < (ctx->quick ? 1 : N_WIDTHS); wi++) {
        dg_mlp_cfg cfg;
        dg_mlp_parse_widths(widths_list[wi], &cfg);
        for (int i = 0; i < n && !bench_interrupted; i++) {
            int batch = (int)sizes[i];
            bench_step_ref ref = {0}; /* same graph, same data on every backend: one reference */
            if (ctx->cpu) run_one(ctx, ctx->cpu, "cpu", true, widths_list[wi], &cfg, batch, &ref);
            if (ctx->gpu) {
                run_one(ctx, ctx->gpu, "gpu", false, widths_list[wi], &cfg, batch, &ref);
                run_one(ctx, ctx->gpu, "gpu-graph", true, widths_list[wi], &cfg, batch, &ref);
            }
            bench_step_ref_free(&ref);
        }
    }
    return DG_OK;
}

/* The CPU peers bench/numpy_mlp_peer.py appends to mlp.csv: the same step
 * in NumPy (its BLAS: OpenBLAS on Debian) and in PyTorch eager on the CPU. */
static const char *const peers[] = {"numpy", "torch-cpu"};
#define N_PEERS (int)(sizeof peers / sizeof *peers)

/* a cell: the row's median ms, its status where it has no time, "-" where there is no row */
static const char *ms_cell(const csv_rec *r, char *buf, size_t n) {
    if (!r) return "-";
    if (!bench_row_measured(r) || !isfinite(r->median_ms)) return r->status;
    snprintf(buf, n, "%.4g", r->median_ms);
    return buf;
}

/* how many times longer the peer's step takes than duograd's, "-" where either has no time */
static const char *ratio_cell(const csv_rec *duo, const csv_rec *peer, char *buf, size_t n) {
    bool both = duo && peer && bench_row_measured(duo) && bench_row_measured(peer) && duo->median_ms > 0;
    return bench_fmt_num(both ? peer->median_ms / duo->median_ms : NAN, "%.2fx", buf, n);
}

/* One table row per network and batch that a peer measured: duograd's cpu
 * step (ms, GFLOP/s and its share of the CPU sgemm ceiling) beside each
 * peer's. Nothing where mlp.csv has no peer rows, so older folders redraw
 * as before. */
static void report_peers(bench_report *rep, const bench_table *t) {
    bool peer[N_PEERS] = {false}, any = false;
    for (int i = 0; i < t->n; i++)
        for (int p = 0; p < N_PEERS; p++)
            if (!strcmp(t->r[i].impl, peers[p])) any = peer[p] = true;
    if (!any) return;
    FILE *f = rep->sum;
    fprintf(f, "### MLP step on the CPU: duograd against its peers (bench/numpy_mlp_peer.py, same machine)\n\n"
               "| widths | batch | duograd cpu ms | duograd GFLOP/s | of CPU sgemm ceiling |");
    for (int p = 0; p < N_PEERS; p++)
        if (peer[p]) fprintf(f, " %s ms | %s / duograd |", peers[p], peers[p]);
    fprintf(f, "\n|---|---|---|---|---|");
    for (int p = 0; p < N_PEERS; p++)
        if (peer[p]) fprintf(f, "---|---|");
    fprintf(f, "\n");
    for (int wi = 0; wi < N_WIDTHS; wi++) {
        long long batches[BENCH_MAX_PTS];
        int nb = bench_table_ms(t, widths_list[wi], batches, 0, BENCH_MAX_PTS);
        for (int b = 0; b < nb; b++) {
            const csv_rec *duo = bench_table_row(t, widths_list[wi], "cpu", batches[b]), *pr[N_PEERS];
            bool has_peer = false;
            for (int p = 0; p < N_PEERS; p++) {
                pr[p] = bench_table_row(t, widths_list[wi], peers[p], batches[b]);
                has_peer |= pr[p] != NULL;
            }
            if (!has_peer) continue;
            bool timed = duo && bench_row_measured(duo);
            double gf = timed ? duo->gflops : NAN;
            char c0[32], c1[32], c2[32], c3[32], c4[32];
            fprintf(f, "| %s | %lld | %s | %s | %s |", widths_list[wi], batches[b], ms_cell(duo, c0, sizeof c0),
                    bench_fmt_num(gf, "%.1f", c1, sizeof c1),
                    bench_fmt_num(100 * gf / rep->ceil.cpu_gflops, "%.0f%%", c2, sizeof c2));
            for (int p = 0; p < N_PEERS; p++)
                if (peer[p])
                    fprintf(f, " %s | %s |", ms_cell(pr[p], c3, sizeof c3), ratio_cell(duo, pr[p], c4, sizeof c4));
            fprintf(f, "\n");
        }
    }
    fprintf(f, "\n");
}

/* One chart per network: step time of cpu, gpu and gpu-graph over the batch
 * size, the crossover of the graph replay marked, and the CPU peers' steps
 * where mlp.csv has them; the summary's crossovers, and duograd's CPU step
 * against its peers. */
bool bench_report_mlp(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## MLP training step (Adam), crossover in batch size\n\n"
                      "| widths | GPU (graph replay) vs CPU | GPU (no graph) vs CPU |\n|---|---|---|\n");
    for (int i = 0; i < N_WIDTHS; i++) {
        const char *w = widths_list[i];
        bench_series c = bench_pick(t, w, "cpu", NULL, false, BENCH_MS, "cpu");
        bench_series g = bench_pick(t, w, "gpu", NULL, false, BENCH_MS, "gpu");
        bench_series gg = bench_pick(t, w, "gpu-graph", NULL, false, BENCH_MS, "gpu (CUDA graph)");
        if (!c.n && !g.n && !gg.n) continue;
        char file[64], title[128], c0[96], c1[96];
        snprintf(file, sizeof file, "mlp_time_%d", i);
        snprintf(title, sizeof title, "MLP %s training step time (Adam)", w);
        bench_chart ch = {file, title, "batch", "median ms", true, .vline = NAN};
        bench_chart_add(&ch, c);
        bench_chart_add(&ch, g);
        bench_chart_add(&ch, gg);
        /* the CPU peers' rows (bench/numpy_mlp_peer.py), where present */
        for (int p = 0; p < N_PEERS; p++)
            bench_chart_add(&ch, bench_pick(t, w, peers[p], "cpu", false, BENCH_MS, peers[p]));
        bench_series s0 = bench_speedup(&c, &gg, ""), s1 = bench_speedup(&c, &g, "");
        ch.vline = bench_crossover(&s0);
        bench_crossover_str(&s0, c0, sizeof c0);
        bench_crossover_str(&s1, c1, sizeof c1);
        fprintf(rep->sum, "| %s | %s | %s |\n", w, c0, c1);
        bench_chart_draw(rep, &ch);
    }
    fprintf(rep->sum, "\n");
    report_peers(rep, t);
    return true;
}
