/* sweep_mlp.c: one training step (forward, backward, Adam update) of an MLP
 * as one plan, over batch sizes and widths, in every precision (the step
 * builder's policy, core/nn/train_step.h: bf16 and fp16 cast each product's
 * operands, fp16 scales its loss; tf32 lets the products use TF32 tensor
 * cores, which the CPU does not have: its tf32 rows run the fp32 step and
 * say so). GPU rows with CUDA-graph replay (impl gpu-graph) and without
 * (gpu). Check: the first step's loss and update against the float64
 * reference evaluation of the same graph (which rounds where the graph
 * casts). Data is uploaded once (transfer = 0): the step itself is timed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/status.h"
#include "core/check/step_check.h"
#include "runner/runner.h"
#include "runner/step_tol.h"

static const long long default_batches[] = {32, 128, 512, 2048, 8192};
static const long long quick_batches[] = {32, 256, 2048};
/* the networks timed (--quick: the first only); the report draws one chart
 * per entry, mlp_time_INDEX */
static const char *const widths_list[] = {"784-256-100-10", "784-1024-1024-10"};
#define N_WIDTHS (int)(sizeof widths_list / sizeof *widths_list)

static dg_status run_plan(void *arg) { return dg_plan_run(arg); }

/* ---- the runner's view (runner/runner.h): a point is a network at a
 * batch size; an implementation a backend, with CUDA-graph replay or not ---- */

static const bool replay = true, no_replay = false;
static const bench_impl mlp_impls[] = {
    {.name = "cpu", .data = &replay},
    {.name = "gpu", .gpu = true, .data = &no_replay},
    {.name = "gpu-graph", .gpu = true, .data = &replay},
};

/* every network (--quick: the first) at every batch size */
static void mlp_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)arg;
    const long long *sizes;
    int n_default = (int)(sizeof default_batches / sizeof *default_batches) - !ctx->extended; /* 8192: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches, ctx->quick ? 3 : n_default, &sizes);
    for (int wi = 0; wi < (ctx->quick ? 1 : N_WIDTHS); wi++) {
        dg_mlp_cfg cfg;
        dg_mlp_parse_widths(widths_list[wi], &cfg);
        const int *w = cfg.widths;
        double macs = 0;
        for (int i = 0; i + 1 < cfg.n_widths; i++) macs += (double)w[i] * w[i + 1];
        for (int i = 0; i < n; i++)
            bench_points_add(out, (bench_point){.name = widths_list[wi], .m = sizes[i], .n = w[1], .k = w[0],
                                                .batch = sizes[i],
                                                /* forward 2, backward 4 flops per weight and row */
                                                .flops = 6.0 * (double)sizes[i] * macs});
    }
}

/* one network at one batch: its data, and the float64 reference every
 * backend's step is checked against (same graph, same data: one reference) */
typedef struct mlp_state {
    dg_mlp_cfg     cfg;
    int            batch;
    float         *x;         /* [batch, widths[0]] uniform in [0, 1)   */
    int32_t       *y;         /* [batch] classes                        */
    bench_step_ref ref;
    bench_step     bs;        /* the implementation under way's step    */
} mlp_state;

static void mlp_teardown(void *arg) {
    mlp_state *s = arg;
    bench_step_ref_free(&s->ref);
    free(s->x);
    free(s->y);
    free(s);
}

static dg_status mlp_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    mlp_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "mlp: out of host memory");
    dg_mlp_parse_widths(pt->name, &s->cfg);
    const int *w = s->cfg.widths, nw = s->cfg.n_widths;
    int batch = s->batch = (int)pt->batch;
    s->x = malloc((size_t)batch * w[0] * 4);
    s->y = malloc((size_t)batch * 4);
    if (!s->x || !s->y) {
        mlp_teardown(s);
        return dg_fail(DG_ERR_OOM, "mlp: out of host memory");
    }
    dg_rng r = dg_rng_new((uint64_t)batch);
    for (long long i = 0; i < (long long)batch * w[0]; i++) s->x[i] = (float)dg_rng_uniform(&r);
    for (int i = 0; i < batch; i++) s->y[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)w[nw - 1]);
    *out = s;
    return DG_OK;
}

/* the step planned on the implementation's backend and checked against
 * float64 before it is timed */
static dg_status mlp_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    mlp_state *s = arg;
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    bench_step_spec spec = bench_mlp_step(&s->cfg);
    dg_precision p = row->precision;
    /* the CPU has no TF32 mode: its tf32 row is the fp32 step */
    spec.precision = !im->gpu && p == DG_PREC_TF32 ? DG_PREC_FP32 : p;
    spec.tol = bench_step_tol_in(spec.precision, spec.tol);
    if (!im->gpu && p == DG_PREC_TF32) row->note = "no TF32 on the CPU: the fp32 step";
    bool ok = false;
    dg_status st = bench_step_new(&s->bs, be, &spec, s->batch, s->x, s->y,
                                  &(dg_plan_opts){.no_replay = !*(const bool *)im->data}, &s->ref,
                                  &row->max_rel_err, &ok);
    if (st != DG_OK) return st;
    if (!ok) row->status = "wrong";
    *work = (bench_work){.fn = run_plan, .arg = s->bs.p, .be = be, .events = im->gpu};
    return DG_OK;
}

static void mlp_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    bench_step_free(&((mlp_state *)arg)->bs);
}

dg_status sweep_mlp(bench_ctx *ctx) {
    static const bench_sweep_spec spec = {
        .name = "mlp", .check_word = BENCH_STEP_CHECK, .impls = mlp_impls, .n_impls = 3, .points = mlp_points,
        .precisions = BENCH_PREC_ALL,
        .setup = mlp_setup, .teardown = mlp_teardown, .prepare = mlp_prepare, .release = mlp_release,
    };
    return bench_run_spec(ctx, &spec);
}

/* The CPU peers bench/peers/numpy_mlp.py appends to mlp.csv: the same step
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
    fprintf(f, "### MLP step on the CPU: duograd against its peers (bench/peers/numpy_mlp.py, same machine)\n\n"
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
                    bench_fmt_num(100 * gf / rep->ceil.cpu_gemm[DG_PREC_FP32], "%.0f%%", c2, sizeof c2));
            for (int p = 0; p < N_PEERS; p++)
                if (peer[p])
                    fprintf(f, " %s | %s |", ms_cell(pr[p], c3, sizeof c3), ratio_cell(duo, pr[p], c4, sizeof c4));
            fprintf(f, "\n");
        }
    }
    fprintf(f, "\n");
}

/* One table row per network, batch and precision that PyTorch's GPU step
 * (bench/peers/torch_mlp.py, DIR/torch_mlp.csv) measured: duograd's GPU
 * step with and without graph replay beside PyTorch's, captured as a CUDA
 * graph and eager. Nothing where the folder has no torch_mlp.csv. */
static void report_gpu_peer(bench_report *rep, const bench_table *t) {
    bench_table peer = bench_table_load(rep->dir, "torch_mlp");
    rep->failed |= peer.unreadable;
    if (!peer.n) {
        free(peer.r);
        return;
    }
    FILE *f = rep->sum;
    fprintf(f, "### MLP step on the GPU: duograd against PyTorch (bench/peers/torch_mlp.py, same machine)\n\n"
               "PyTorch: fp32, TF32 matmuls, bf16 autocast, fp16 autocast with GradScaler; duograd: the step "
               "builder's policy of the same name. Ratio > 1: duograd faster.\n\n"
               "| widths | batch | dtype | duograd gpu-graph ms | torch-graph ms | torch-graph / duograd | "
               "duograd gpu ms | torch-eager ms |\n|---|---|---|---|---|---|---|---|\n");
    for (int wi = 0; wi < N_WIDTHS; wi++) {
        long long batches[BENCH_MAX_PTS];
        int nb = bench_table_ms(&peer, widths_list[wi], batches, 0, BENCH_MAX_PTS);
        for (int b = 0; b < nb; b++)
            for (int pi = 0; pi < DG_PREC_COUNT; pi++) {
                dg_precision p = (dg_precision)pi;
                const char *w = widths_list[wi];
                const csv_rec *tg = bench_table_row_prec(&peer, w, "torch-graph", batches[b], p),
                              *te = bench_table_row_prec(&peer, w, "torch-eager", batches[b], p);
                if (!tg && !te) continue;
                const csv_rec *dg = bench_table_row_prec(t, w, "gpu-graph", batches[b], p),
                              *dn = bench_table_row_prec(t, w, "gpu", batches[b], p);
                char c0[32], c1[32], c2[32], c3[32], c4[32];
                fprintf(f, "| %s | %lld | %s | %s | %s | %s | %s | %s |\n", w, batches[b], dg_precision_name(p),
                        ms_cell(dg, c0, sizeof c0), ms_cell(tg, c1, sizeof c1), ratio_cell(dg, tg, c2, sizeof c2),
                        ms_cell(dn, c3, sizeof c3), ms_cell(te, c4, sizeof c4));
            }
    }
    fprintf(f, "\n");
    free(peer.r);
}

/* Samples per joule against the batch, for the network w at precision p:
 * one series per implementation that has energy; no chart when none has. */
static void energy_chart(bench_report *rep, const bench_table *t, const char *w, int i, dg_precision p) {
    static const char *const impls[] = {"cpu", "gpu", "gpu-graph"};
    char file[64], title[128];
    if (p == DG_PREC_FP32) snprintf(file, sizeof file, "mlp_energy_%d", i);
    else snprintf(file, sizeof file, "mlp_energy_%d_%s", i, dg_precision_name(p));
    snprintf(title, sizeof title, "MLP %s training step: samples per joule, %s", w, dg_precision_name(p));
    bench_chart ch = {file, title, "batch", "samples / J", true, .vline = NAN};
    int points = 0;
    for (int k = 0; k < 3; k++) {
        bench_series s = bench_pick_prec(t, w, impls[k], NULL, p, false, BENCH_SAMPLES_PER_J, impls[k]);
        points += s.n;
        bench_chart_add(&ch, s);
    }
    if (points) bench_chart_draw(rep, &ch);
}

/* One chart per network: step time of cpu, gpu and gpu-graph over the batch
 * size, the crossover of the graph replay marked, and the CPU peers' steps
 * where mlp.csv has them; the summary's crossovers, and duograd's CPU step
 * against its peers. */
bool bench_report_mlp(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## MLP training step (Adam), crossover in batch size\n\n"
                      "| widths | dtype | GPU (graph replay) vs CPU | GPU (no graph) vs CPU | energy: GPU (graph "
                      "replay) vs CPU |\n|---|---|---|---|---|\n");
    for (int i = 0; i < N_WIDTHS; i++)
        for (int pi = 0; pi < DG_PREC_COUNT; pi++) {
            dg_precision p = (dg_precision)pi;
            const char *w = widths_list[i];
            bench_series c = bench_pick_prec(t, w, "cpu", NULL, p, false, BENCH_MS, "cpu");
            bench_series g = bench_pick_prec(t, w, "gpu", NULL, p, false, BENCH_MS, "gpu");
            bench_series gg = bench_pick_prec(t, w, "gpu-graph", NULL, p, false, BENCH_MS, "gpu (CUDA graph)");
            if (!c.n && !g.n && !gg.n) continue;
            /* fp32 keeps the chart names of the runs before the precision axis */
            char file[64], title[128], c0[96], c1[96];
            if (p == DG_PREC_FP32) snprintf(file, sizeof file, "mlp_time_%d", i);
            else snprintf(file, sizeof file, "mlp_time_%d_%s", i, dg_precision_name(p));
            snprintf(title, sizeof title, "MLP %s training step time (Adam), %s", w, dg_precision_name(p));
            bench_chart ch = {file, title, "batch", "median ms", true, .vline = NAN};
            bench_chart_add(&ch, c);
            bench_chart_add(&ch, g);
            bench_chart_add(&ch, gg);
            /* the CPU peers' rows (bench/peers/numpy_mlp.py), where present */
            for (int q = 0; q < N_PEERS; q++)
                bench_chart_add(&ch, bench_pick_prec(t, w, peers[q], "cpu", p, false, BENCH_MS, peers[q]));
            bench_series s0 = bench_speedup(&c, &gg, ""), s1 = bench_speedup(&c, &g, "");
            ch.vline = bench_crossover(&s0);
            bench_crossover_str(&s0, c0, sizeof c0);
            bench_crossover_str(&s1, c1, sizeof c1);
            /* the energy crossover: from which batch a step on the GPU
             * board costs fewer joules than on the CPU packages and DRAM */
            bench_series ce = bench_pick_prec(t, w, "cpu", NULL, p, false, BENCH_JOULES, "");
            bench_series ge = bench_pick_prec(t, w, "gpu-graph", NULL, p, false, BENCH_JOULES, "");
            bench_series se = bench_speedup(&ce, &ge, "");
            char c2[96];
            bench_energy_crossover_str(&se, c2, sizeof c2);
            fprintf(rep->sum, "| %s | %s | %s | %s | %s |\n", w, dg_precision_name(p), c0, c1, c2);
            bench_chart_draw(rep, &ch);
            energy_chart(rep, t, w, i, p);
        }
    fprintf(rep->sum, "\n");
    report_peers(rep, t);
    report_gpu_peer(rep, t);
    return true;
}
