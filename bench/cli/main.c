/* main.c: the bench CLI: subcommand dispatch, then the sweeps one by one
 * (options.c parses and checks the command line first). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/compare.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "machine/gpu_monitor.h"
#include "machine/host_cache.h"
#include "cli/options.h"
#include "profile/profile.h"
#include "charts/plot.h"
#include "runner/sweep.h"
#include "train/train.h"
#include "machine/reexec.h"
#include <duograd/testing.h>
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

/* The first SIGINT or SIGTERM finishes the row under way and draws the
 * summary; a second SIGINT stops at once (the finished rows stay in
 * NAME.csv.partial). */
static void on_signal(int sig) {
    bench_interrupted = 1;
    if (sig == SIGINT) signal(SIGINT, SIG_DFL);
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
    /* before anything starts OpenMP: it may execute the bench again (the
     * wait policy, the OpenBLAS core: machine/reexec.h) */
    char policy[256], load[256];
    if (bench_reexec_apply(ctx.wait_policy, argv, policy, sizeof policy))
        fprintf(stderr, "bench: warning: %s\n", policy);
    if (bench_env_loaded(load, sizeof load))
        fprintf(stderr, "bench: warning: the machine is loaded (%s): rows may be noisy\n", load);
    bool gpu_broken;
    if (open_backends(&ctx, &ch, &gpu_broken)) return 1;
    if (bench_mkdir_p(ctx.out_dir)) {
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
    for (int i = 0; i < ch.n_sweeps && !bench_interrupted; i++) rc |= bench_run_sweep(&ctx, ch.sweeps[i]);
    if (bench_interrupted) fprintf(stderr, "bench: interrupted; every finished row is in %s\n", ctx.out_dir);
    if (bench_plot(ctx.out_dir, stdout)) rc = 1;
    bench_gpu_monitor_close(ctx.gpu_mon);
    bench_host_flush_free();
    dg_backend_free(ctx.cpu);
    dg_backend_free(ctx.gpu);
    return bench_interrupted ? 130 : rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "plot")) {
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: bench plot DIR\n\nDraws the charts (DIR/*.png, *.svg, plot-data/) and writes DIR/summary.md "
                   "from the sweep CSV files in DIR, and the charts of each profile-MODEL.json, on any machine. Exit 1 when a file cannot be read (the others "
                   "are still drawn).\n");
            return 0;
        }
        if (argc != 3) return bench_usage_error("bench", "plot takes one folder: bench plot DIR");
        return bench_plot(argv[2], stdout) | bench_profile_replot(argv[2]);
    }
    if (argc >= 2 && !strcmp(argv[1], "train")) {
        /* before OpenMP starts: it may execute the bench again (OMP_WAIT_POLICY
         * and OPENBLAS_CORETYPE, if set, win) */
        char policy[256];
        if (bench_reexec_apply("auto", argv, policy, sizeof policy)) fprintf(stderr, "bench: warning: %s\n", policy);
        return bench_train_main(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "compare")) return bench_compare_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "profile")) {
        char policy[256];
        if (bench_reexec_apply("auto", argv, policy, sizeof policy)) fprintf(stderr, "bench: warning: %s\n", policy);
        return bench_profile_main(argc - 1, argv + 1);
    }
    return run_sweeps(argc, argv);
}
