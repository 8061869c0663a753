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
#include "options.h"
#include "plot.h"
#include "sweep.h"
#include "train.h"

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

/* runs one sweep into DIR/NAME.csv; 0, or 1 when it failed or wrote failed rows */
static int run_sweep(bench_ctx *ctx, const sweep_def *s) {
    ctx->csv = bench_csv_open(ctx->out_dir, s->name, ctx->meta, BENCH_CSV_HEADER);
    if (!ctx->csv) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        return 1;
    }
    ctx->rows = ctx->failed = 0;
    double t0 = bench_now_s();
    dg_status st = s->run(ctx);
    int rc = st != DG_OK || ctx->failed;
    if (ctx->progress) fprintf(stderr, "\r\033[K");
    if (st != DG_OK) fprintf(stderr, "bench: %s: %s\n", s->name, dg_last_error());
    /* a sweep that wrote no row leaves an earlier NAME.csv as it was */
    if (bench_csv_finish(ctx->csv, ctx->out_dir, s->name, ctx->rows > 0) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        return 1;
    }
    if (ctx->rows > 0)
        fprintf(stderr, "bench: %s: %d rows (%d failed) in %.1f s -> %s/%s.csv\n", s->name, ctx->rows, ctx->failed,
                bench_now_s() - t0, ctx->out_dir, s->name);
    else
        fprintf(stderr, "bench: %s: no rows\n", s->name);
    return rc;
}

static int run_sweeps(int argc, char **argv) {
    bench_ctx ctx;
    bench_choice ch;
    int rc = bench_parse_options(argc, argv, &ctx, &ch);
    if (rc != BENCH_OPTS_RUN) return rc;
    if (ch.want_cpu && bench_backend_open("cpu", ctx.threads, &ctx.cpu) != DG_OK) {
        fprintf(stderr, "bench: cpu backend: %s\n", dg_last_error());
        return 1;
    }
    if (ch.want_cpu && !ctx.threads) ctx.threads = dg_cpu_threads(ctx.cpu);
    if (ch.want_gpu && bench_backend_open("gpu", 0, &ctx.gpu) != DG_OK)
        fprintf(stderr, "bench: GPU rows skipped: %s\n", dg_last_error());
    rc = 0;
    if (!ctx.cpu && !ctx.gpu) {
        fprintf(stderr, "bench: no backend to run on\n");
        rc = 1;
    } else if (mkdir_p(ctx.out_dir)) {
        fprintf(stderr, "bench: cannot create %s: %s\n", ctx.out_dir, strerror(errno));
        rc = 1;
    }
    if (rc) {
        dg_backend_free(ctx.cpu);
        return rc;
    }
    ctx.progress = isatty(STDERR_FILENO);
    bench_env_meta(ctx.meta, sizeof ctx.meta, ctx.threads, ctx.gpu);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int i = 0; i < ch.n_sweeps && !bench_interrupted; i++) rc |= run_sweep(&ctx, ch.sweeps[i]);
    if (bench_interrupted) fprintf(stderr, "bench: interrupted; every finished row is in %s\n", ctx.out_dir);
    if (bench_plot(ctx.out_dir, stdout)) rc = 1;
    dg_backend_free(ctx.cpu);
    dg_backend_free(ctx.gpu);
    return bench_interrupted ? 130 : rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "plot")) {
        if (argc != 3) return bench_usage_error("bench", "plot takes one folder: bench plot DIR");
        return bench_plot(argv[2], stdout);
    }
    if (argc >= 2 && !strcmp(argv[1], "train")) return bench_train_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "compare")) return bench_compare_main(argc - 1, argv + 1);
    return run_sweeps(argc, argv);
}
