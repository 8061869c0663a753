/* main.c: the bench CLI: subcommand dispatch, then the sweeps one by one
 * (options.c parses and checks the command line first). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends.h"
#include "compare.h"
#include "cpu_backend/cpu_backend.h"
#include "env.h"
#include "gpu_monitor.h"
#include "json.h"
#include "options.h"
#include "plot.h"
#include "samples.h"
#include "sweep.h"
#include "train.h"
#include "wait_policy.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

static int mkdir_p(const char *dir) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

/* The first SIGINT or SIGTERM finishes the row under way and draws the
 * summary; a second SIGINT stops at once (the finished rows stay in
 * NAME.csv.partial). */
static void on_signal(int sig) {
    bench_interrupted = 1;
    if (sig == SIGINT) signal(SIGINT, SIG_DFL);
}

/* the sweep's other files (NAME.json, NAME.samples.csv): closed, and kept
 * when its CSV is */
static int finish_extras(bench_ctx *ctx, const sweep_def *s, bool keep) {
    int rc = 0;
    if (ctx->json && bench_json_finish(ctx->json, ctx->out_dir, s->name, keep) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        rc = 1;
    }
    if (ctx->samples_csv && bench_samples_finish(ctx->samples_csv, ctx->out_dir, s->name, keep) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        rc = 1;
    }
    ctx->json = NULL;
    ctx->samples_csv = NULL;
    return rc;
}

/* runs one sweep into DIR/NAME.csv (and .json, .samples.csv); 0, or 1 when
 * it failed or wrote failed rows */
static int run_sweep(bench_ctx *ctx, const sweep_def *s) {
    /* the run's metadata, then the machine's state as this sweep starts */
    char meta[sizeof ctx->meta + 512], end[512] = "";
    snprintf(meta, sizeof meta, "%s", ctx->meta);
    bench_env_snapshot(meta, sizeof meta, "start of sweep");
    bench_gpu_monitor_snapshot(ctx->gpu_mon, meta, sizeof meta, "start of sweep");
    ctx->csv = bench_csv_open(ctx->out_dir, s->name, meta, BENCH_CSV_HEADER);
    ctx->json = ctx->csv ? bench_json_open(meta) : NULL;
    ctx->samples_csv = ctx->json && ctx->samples ? bench_samples_open(ctx->out_dir, s->name, meta) : NULL;
    if (!ctx->csv || !ctx->json || (ctx->samples && !ctx->samples_csv)) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        if (ctx->csv) bench_csv_finish(ctx->csv, ctx->out_dir, s->name, false);
        finish_extras(ctx, s, false);
        return 1;
    }
    ctx->sweep = s->name;
    ctx->rows = ctx->failed = ctx->noisy = ctx->planned = 0;
    ctx->t0 = bench_now_s();
    dg_status st = s->run(ctx);
    int rc = st != DG_OK || ctx->failed;
    if (ctx->progress) fprintf(stderr, "\r\033[K");
    if (st != DG_OK) fprintf(stderr, "bench: %s: %s\n", s->name, dg_last_error());
    /* and as it ends: '#' lines after the rows, which readers skip */
    bench_env_snapshot(end, sizeof end, "end of sweep");
    bench_gpu_monitor_snapshot(ctx->gpu_mon, end, sizeof end, "end of sweep");
    fputs(end, ctx->csv);
    /* a sweep that wrote no row leaves an earlier NAME.csv as it was */
    bool keep = ctx->rows > 0;
    if (bench_csv_finish(ctx->csv, ctx->out_dir, s->name, keep) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        finish_extras(ctx, s, false);
        return 1;
    }
    rc |= finish_extras(ctx, s, keep);
    if (keep)
        fprintf(stderr, "bench: %s: %d rows (%d failed, %d noisy) in %.1f s -> %s/%s.csv\n", s->name, ctx->rows,
                ctx->failed, ctx->noisy, bench_now_s() - ctx->t0, ctx->out_dir, s->name);
    else
        fprintf(stderr, "bench: %s: no rows%s\n", s->name,
                ctx->case_filter || ctx->impl_filter ? " (--case / --impl matched nothing here)" : "");
    ctx->sweep = NULL;
    return rc;
}

/* Opens what the command line asked for; a GPU that is there but broken
 * (an old driver, a failed initialisation) is an error, a missing one is
 * reported once and its rows are left out. 0, or 1 on failure. */
static int open_backends(bench_ctx *ctx, const bench_choice *ch, bool *gpu_broken) {
    *gpu_broken = false;
    if (ch->want_cpu && bench_backend_open("cpu", ctx->threads, &ctx->cpu) != DG_OK) {
        fprintf(stderr, "bench: cpu backend: %s\n", dg_last_error());
        return 1;
    }
    if (ch->want_cpu && !ctx->threads) ctx->threads = dg_cpu_threads(ctx->cpu);
    if (ch->want_gpu && bench_backend_open("gpu", 0, &ctx->gpu) != DG_OK) {
        fprintf(stderr, "bench: GPU rows skipped: %s\n", dg_last_error());
#ifdef DG_HAVE_CUDA
        char why[256];
        *gpu_broken = dg_gpu_probe(why, sizeof why) == DG_GPU_BROKEN;
#endif
    }
    if (!ctx->cpu && !ctx->gpu) {
        fprintf(stderr, "bench: no backend to run on\n");
        return 1;
    }
    return 0;
}

/* NVML's view of the GPU being measured (clocks, throttling), NULL where
 * there is none */
static bench_gpu_monitor *open_monitor(dg_backend *gpu) {
    bench_gpu_monitor *m = NULL;
#ifdef DG_HAVE_CUDA
    char bus[64], why[256];
    if (gpu && dg_gpu_pci_bus_id(gpu, bus, sizeof bus) == DG_OK) m = bench_gpu_monitor_open(bus, why, sizeof why);
    if (gpu && !m) fprintf(stderr, "bench: no GPU clocks or throttling in the metadata: %s\n", why);
#else
    (void)gpu;
#endif
    return m;
}

static int run_sweeps(int argc, char **argv) {
    bench_ctx ctx;
    bench_choice ch;
    int rc = bench_parse_options(argc, argv, &ctx, &ch);
    if (rc != BENCH_OPTS_RUN) return rc;
    /* before anything starts OpenMP: it may execute the bench again */
    char policy[256], load[256];
    if (bench_wait_policy_apply(ctx.wait_policy, argv, policy, sizeof policy))
        fprintf(stderr, "bench: warning: %s\n", policy);
    if (bench_env_loaded(load, sizeof load))
        fprintf(stderr, "bench: warning: the machine is loaded (%s): rows may be noisy\n", load);
    bool gpu_broken;
    if (open_backends(&ctx, &ch, &gpu_broken)) return 1;
    if (mkdir_p(ctx.out_dir)) {
        fprintf(stderr, "bench: cannot create %s: %s\n", ctx.out_dir, strerror(errno));
        dg_backend_free(ctx.cpu);
        dg_backend_free(ctx.gpu);
        return 1;
    }
    ctx.progress = isatty(STDERR_FILENO);
    ctx.gpu_mon = open_monitor(ctx.gpu);
    bench_env_meta(ctx.meta, sizeof ctx.meta, ctx.threads, ctx.gpu);
    bench_env_meta_more(ctx.meta, sizeof ctx.meta, argc, argv, ctx.gpu);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rc = gpu_broken;
    for (int i = 0; i < ch.n_sweeps && !bench_interrupted; i++) rc |= run_sweep(&ctx, ch.sweeps[i]);
    if (bench_interrupted) fprintf(stderr, "bench: interrupted; every finished row is in %s\n", ctx.out_dir);
    if (bench_plot(ctx.out_dir, stdout)) rc = 1;
    bench_gpu_monitor_close(ctx.gpu_mon);
    dg_backend_free(ctx.cpu);
    dg_backend_free(ctx.gpu);
    return bench_interrupted ? 130 : rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "plot")) {
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: bench plot DIR\n\nDraws the charts (DIR/*.png, *.svg, plot-data/) and writes DIR/summary.md "
                   "from the sweep CSV files in DIR, on any machine. Exit 1 when a file cannot be read (the others "
                   "are still drawn).\n");
            return 0;
        }
        if (argc != 3) return bench_usage_error("bench", "plot takes one folder: bench plot DIR");
        return bench_plot(argv[2], stdout);
    }
    if (argc >= 2 && !strcmp(argv[1], "train")) {
        /* before OpenMP starts: it may execute the bench again (OMP_WAIT_POLICY, if set, wins) */
        char policy[256];
        if (bench_wait_policy_apply("auto", argv, policy, sizeof policy)) fprintf(stderr, "bench: warning: %s\n", policy);
        return bench_train_main(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "compare")) return bench_compare_main(argc - 1, argv + 1);
    return run_sweeps(argc, argv);
}
