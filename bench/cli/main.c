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
#include "cli/onnx_run.h"
#include "cli/ranks.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "machine/gpu_monitor.h"
#include "machine/host_cache.h"
#include "cli/options.h"
#include "profile/profile.h"
#include "charts/plot.h"
#include "runner/energy_window.h"
#include "runner/sweep.h"
#include "sweeps/model/model_file.h"
#include "train/train.h"
#include "machine/reexec.h"
#include <duograd/testing.h>
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

/* The first SIGINT or SIGTERM finishes the row under way and draws the
 * summary, and the bench exits as the signal would have had it (128 + its
 * number: 130, 143); a second SIGINT stops at once (the finished rows stay
 * in NAME.csv.partial). */
static void on_signal(int sig) {
    bench_interrupted = sig;
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

/* bench --list SWEEP: each sweep's rows as a run on these backends, with
 * these options, would have them (runner.h); nothing is measured, nothing
 * written, no folder made. 0, or 1 when a sweep could not list its rows. */
static int list_sweeps(bench_ctx *ctx, const bench_choice *ch) {
    bool gpu_broken;
    if (open_backends(ctx, ch, &gpu_broken)) return 1;
    int rc = gpu_broken;
    for (int i = 0; i < ch->n_sweeps; i++) {
        ctx->sweep = ch->sweeps[i]->name;
        ctx->precisions_run = 0;
        ctx->precisions_why = NULL;
        if (ch->sweeps[i]->run(ctx) != DG_OK) {
            fprintf(stderr, "bench: %s: cannot list its rows: %s\n", ctx->sweep, dg_last_error());
            rc = 1;
        }
        bench_note_precisions(ctx);
    }
    dg_backend_free(ctx->cpu);
    dg_backend_free(ctx->gpu);
    return rc;
}

/* "# dtype: fp32,bf16": the precisions the run asked for (--dtype) */
static void meta_precisions(bench_ctx *ctx) {
    dg_precision p[DG_PREC_COUNT];
    int n = bench_precisions(ctx, p);
    size_t len = strlen(ctx->meta);
    len += (size_t)snprintf(ctx->meta + len, len < sizeof ctx->meta ? sizeof ctx->meta - len : 0, "# dtype:");
    for (int i = 0; i < n && len < sizeof ctx->meta; i++)
        len += (size_t)snprintf(ctx->meta + len, sizeof ctx->meta - len, "%s%s", i ? "," : " ", dg_precision_name(p[i]));
    if (len < sizeof ctx->meta) snprintf(ctx->meta + len, sizeof ctx->meta - len, "\n");
}

/* --model FILE.onnx: loaded and checked before anything opens, its name
 * and digest in every sweep's metadata; 0, or 1 with the refusal on stderr */
static int load_model(bench_ctx *ctx) {
    if (!ctx->model_path) return 0;
    dg_onnx *o;
    if (bench_model_load(ctx->model_path, &o, &ctx->model_has_batch_norm) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        return 1;
    }
    ctx->model = o;
    return 0;
}

/* the sweeps of the command line (ctx, ch parsed), on this process's rank
 * of mpi (ranks.h) */
static int run_sweeps_on(int argc, char **argv, bench_ctx *pctx, const bench_choice *ch, const bench_mpi *mpi) {
    bench_ctx ctx = *pctx;
    int rc;
    char load[256], rank_dir[1024] = "";
    if (bench_env_loaded(load, sizeof load))
        fprintf(stderr, "bench: warning: the machine is loaded (%s): rows may be noisy\n", load);
    bool gpu_broken;
    if (open_backends(&ctx, ch, &gpu_broken)) return 1;
    bench_env_meta(ctx.meta, sizeof ctx.meta, ctx.threads, ctx.gpu);
    bench_env_meta_more(ctx.meta, sizeof ctx.meta, argc, argv, ctx.gpu);
    meta_precisions(&ctx);
    if (ctx.model) bench_model_meta(ctx.model, ctx.model_path, ctx.meta, sizeof ctx.meta);
    if ((rc = bench_ranks_start(&ctx, ch, mpi, argc, argv, rank_dir, sizeof rank_dir)) == 0 &&
        bench_mkdir_p(ctx.out_dir)) {
        fprintf(stderr, "bench: cannot create %s: %s\n", ctx.out_dir, strerror(errno));
        rc = 1;
    }
    if (rc) {
        dg_backend_free(ctx.cpu);
        dg_backend_free(ctx.gpu);
        bench_ranks_end(rank_dir);
        return rc;
    }
    ctx.progress = isatty(STDERR_FILENO) && !ctx.discard;
    ctx.gpu_mon = bench_gpu_monitor_for(ctx.gpu);
    bench_energy_open_all(&ctx);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rc = gpu_broken;
    ctx.sweeps_left = ch->n_sweeps;
    for (int i = 0; i < ch->n_sweeps && !bench_interrupted; i++) rc |= bench_run_sweep(&ctx, ch->sweeps[i]);
    if (bench_interrupted) fprintf(stderr, "bench: interrupted; every finished row is in %s\n", ctx.out_dir);
    if (!ctx.discard && bench_plot(ctx.out_dir, stdout)) rc = 1;
    bench_energy_close_all(&ctx);
    bench_gpu_monitor_close(ctx.gpu_mon);
    bench_host_flush_free();
    dg_backend_free(ctx.cpu);
    dg_backend_free(ctx.gpu);
    bench_ranks_end(rank_dir);
    return bench_interrupted ? 128 + bench_interrupted : rc;
}

/* the main form: options, then (launched by MPI) MPI_Init, the sweeps, and
 * the end of every rank (a rank that fails ends them all: train_mpi.h) */
static int run_sweeps(int argc, char **argv) {
    bench_ctx ctx;
    bench_choice ch;
    int rc = bench_parse_options(argc, argv, &ctx, &ch);
    if (rc != BENCH_OPTS_RUN) return rc;
    if (load_model(&ctx)) return 1;
    if (ctx.list) {
        rc = list_sweeps(&ctx, &ch);
        dg_onnx_free(ctx.model);
        return rc;
    }
    /* before anything starts OpenMP or MPI: it may execute the bench again
     * (the wait policy, the OpenBLAS core: machine/reexec.h) */
    char policy[256];
    if (bench_reexec_apply(ctx.wait_policy, argv, policy, sizeof policy))
        fprintf(stderr, "bench: warning: %s\n", policy);
    bench_mpi mpi;
    if (bench_mpi_start(&mpi)) {
        dg_onnx_free(ctx.model);
        return 1;
    }
    rc = bench_mpi_end(&mpi, run_sweeps_on(argc, argv, &ctx, &ch, &mpi));
    dg_onnx_free(ctx.model); /* after the backends (run_sweeps_on frees them): nothing reads its weights now */
    return rc;
}

/* `bench plot DIR` (argv[0] = "plot") */
static int plot_main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: bench plot DIR\n\nDraws the charts (DIR/*.png, *.svg, plot-data/) and writes DIR/summary.md "
               "from the sweep CSV files in DIR, and the charts of each profile-MODEL.json, on any machine. Exit 1 when a file cannot be read (the others "
               "are still drawn).\n");
        return 0;
    }
    if (argc != 2) return bench_usage_error("bench", "plot takes one folder: bench plot DIR");
    return bench_plot(argv[1], stdout) | bench_profile_replot(argv[1]);
}

/* the subcommands, each called with argv[0] = its name; `wait`: OpenMP
 * and OpenBLAS run in it, so the wait policy and the OpenBLAS core are
 * chosen first (machine/reexec.h: it may execute the bench again;
 * OMP_WAIT_POLICY and OPENBLAS_CORETYPE, if set, win) */
static const struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
    bool wait;
} subcommands[] = {
    {"plot", plot_main, false},
    {"compare", bench_compare_main, false},
    {"train", bench_train_main, true},
    {"profile", bench_profile_main, true},
    {"onnx-run", bench_onnx_run_main, true},
};
#define N_SUBCOMMANDS (int)(sizeof subcommands / sizeof *subcommands)

static const struct subcommand *find_subcommand(const char *name) {
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        if (!strcmp(subcommands[i].name, name)) return &subcommands[i];
    return NULL;
}

/* `bench help [SUBCOMMAND]`: the main help, or the subcommand's --help */
static int help_main(int argc, char **argv) {
    if (argc == 2) {
        char *args[] = {"bench", "--help", NULL};
        bench_ctx ctx;
        bench_choice ch;
        return bench_parse_options(2, args, &ctx, &ch);
    }
    const struct subcommand *sub = argc == 3 ? find_subcommand(argv[2]) : NULL;
    if (!sub) return bench_usage_error("bench", "help takes one subcommand: plot, compare, train, profile or onnx-run");
    char *args[] = {(char *)sub->name, "--help", NULL};
    return sub->main(2, args);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "help")) return help_main(argc, argv);
    const struct subcommand *sub = argc >= 2 ? find_subcommand(argv[1]) : NULL;
    if (!sub) return run_sweeps(argc, argv);
    /* before OpenMP starts: it may execute the bench again (OMP_WAIT_POLICY
     * and OPENBLAS_CORETYPE, if set, win) */
    char policy[256];
    if (sub->wait && bench_reexec_apply("auto", argv, policy, sizeof policy))
        fprintf(stderr, "bench: warning: %s\n", policy);
    return sub->main(argc - 1, argv + 1);
}
