/* main.c: the bench CLI: argument parsing and dispatch. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends.h"
#include "compare.h"
#include "core/data/dataset.h"
#include "cpu_backend/cpu_backend.h"
#include "env.h"
#include "list_ops.h"
#include "plot.h"
#include "sweep.h"
#include "train.h"

#define DEFAULT_SWEEPS "ceiling,gemm,ops,mlp"
#define ALL_SWEEPS DEFAULT_SWEEPS ",autodiff,train"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench [options]            run sweeps, write CSV, charts and summary.md\n"
            "       bench plot DIR             redraw charts and summary.md from DIR's CSV files\n"
            "       bench compare DIR_A DIR_B  ratio of medians B/A per matching row\n"
            "       bench train [options]      train on Fashion-MNIST (bench train --help)\n"
            "\n"
            "options:\n"
            "  --sweep LIST      comma-separated sweeps (default: " DEFAULT_SWEEPS "); 'all' runs\n"
            "                    them with their largest sizes too (gemm 8192, ops 64M, mlp batch 8192),\n"
            "                    and the autodiff and train sweeps\n"
            "  --backends LIST   cpu,gpu (default both; a missing GPU is reported once)\n"
            "  --sizes LIST      sizes instead of each sweep's defaults: 64,128,... or A:B (doubling)\n"
            "  --threads N       CPU threads for OpenMP and OpenBLAS (default: all cores)\n"
            "  --reps N          at least N timed runs (default 5)\n"
            "  --warmup N        untimed runs first (default 2)\n"
            "  --min-time S      at least S seconds of timed runs (default 0.1)\n"
            "  --cpu-cap S       skip CPU runs predicted to take longer than S seconds (default 3)\n"
            "  --quick           smaller sizes, for a fast look\n"
            "  --out DIR         result folder (default reports/latest)\n"
            "  --data DIR        Fashion-MNIST folder for the train sweep (default " DG_FASHION_MNIST_DIR ")\n"
            "  --list            sweeps and what they measure\n"
            "  --list-ops        op coverage: forward/backward support per backend\n"
            "  -h, --help        this help\n"
            "\n"
            "Every result is checked against a reference before its time is written; a wrong result is a\n"
            "row with status 'wrong'. GPU kernel times come from CUDA events; rows with transfer=1 include\n"
            "the host-device copies. TF32 is off except in rows with tf32=1 (impl gpu-cublas-tf32).\n");
}

static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see bench --help)\n");
    return 2;
}

static bool parse_long(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* "64,128" or "64:4096" (doubling) */
static bool parse_sizes(const char *spec, bench_ctx *ctx) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strchr(buf, ':');
    ctx->n_sizes = 0;
    if (colon) {
        long long a, b;
        *colon = '\0';
        if (!parse_long(buf, 1, 1LL << 30, &a) || !parse_long(colon + 1, a, 1LL << 30, &b)) return false;
        for (long long v = a; v <= b && ctx->n_sizes < BENCH_MAX_SIZES; v *= 2) ctx->sizes[ctx->n_sizes++] = v;
        return true;
    }
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (ctx->n_sizes == BENCH_MAX_SIZES || !parse_long(tok, 1, 1LL << 30, &ctx->sizes[ctx->n_sizes++]))
            return false;
    }
    return ctx->n_sizes > 0;
}

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

static void on_sigint(int sig) {
    (void)sig;
    bench_interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C stops at once */
}

static const sweep_def *find_sweep(const char *name) {
    for (int i = 0; i < bench_n_sweeps; i++)
        if (!strcmp(bench_sweeps[i].name, name)) return &bench_sweeps[i];
    return NULL;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "plot")) {
        if (argc != 3) return bad_usage("plot takes one folder: bench plot DIR%s", "");
        return bench_plot(argv[2], stdout);
    }
    if (argc >= 2 && !strcmp(argv[1], "train")) return bench_train_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "compare")) {
        if (argc != 4) return bad_usage("compare takes two folders: bench compare DIR_A DIR_B%s", "");
        return bench_compare(argv[2], argv[3], stdout);
    }
    static const struct option opts[] = {
        {"sweep", required_argument, NULL, 's'},   {"backends", required_argument, NULL, 'b'},
        {"sizes", required_argument, NULL, 'z'},   {"threads", required_argument, NULL, 't'},
        {"reps", required_argument, NULL, 'r'},    {"warmup", required_argument, NULL, 'w'},
        {"min-time", required_argument, NULL, 'm'}, {"cpu-cap", required_argument, NULL, 'c'},
        {"quick", no_argument, NULL, 'q'},         {"out", required_argument, NULL, 'o'},
        {"data", required_argument, NULL, 'd'},
        {"list", no_argument, NULL, 'l'},          {"list-ops", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    bench_ctx ctx = {.out_dir = "reports/latest", .timing = {2, 5, 200, 0.1}, .cpu_cap_s = 3.0};
    const char *sweep_list = DEFAULT_SWEEPS, *backends = "cpu,gpu";
    long long v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': sweep_list = optarg; break;
        case 'b': backends = optarg; break;
        case 'z': if (!parse_sizes(optarg, &ctx)) return bad_usage("bad --sizes '%s' (e.g. 64,128,256 or 64:4096)", optarg); break;
        case 't': if (!parse_long(optarg, 1, 1024, &v)) return bad_usage("bad --threads '%s' (1 to 1024)", optarg);
                  ctx.threads = (int)v; break;
        case 'r': if (!parse_long(optarg, 1, 100000, &v)) return bad_usage("bad --reps '%s'", optarg);
                  ctx.timing.min_reps = (int)v;
                  if (ctx.timing.max_reps < ctx.timing.min_reps) ctx.timing.max_reps = ctx.timing.min_reps;
                  break;
        case 'w': if (!parse_long(optarg, 0, 1000, &v)) return bad_usage("bad --warmup '%s'", optarg);
                  ctx.timing.warmup = (int)v; break;
        case 'm': if (!parse_double(optarg, 0, 3600, &ctx.timing.min_time_s)) return bad_usage("bad --min-time '%s'", optarg); break;
        case 'c': if (!parse_double(optarg, 0.001, 86400, &ctx.cpu_cap_s)) return bad_usage("bad --cpu-cap '%s'", optarg); break;
        case 'q': ctx.quick = true; break;
        case 'o': ctx.out_dir = optarg; break;
        case 'd': ctx.data_dir = optarg; break;
        case 'l':
            for (int i = 0; i < bench_n_sweeps; i++) printf("%-8s %s\n", bench_sweeps[i].name, bench_sweeps[i].what);
            return 0;
        case 'L': return bench_list_ops(stdout);
        case 'h': usage(stdout); return 0;
        default:
            return bad_usage("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return bad_usage("unexpected argument '%s'", argv[optind]);

    /* validate the sweeps before doing anything */
    const sweep_def *chosen[16];
    int n_chosen = 0;
    char list[256];
    ctx.extended = !strcmp(sweep_list, "all");
    snprintf(list, sizeof list, "%s", ctx.extended ? ALL_SWEEPS : sweep_list);
    for (char *p = list, *tok; (tok = strsep(&p, ",")) != NULL;) {
        const sweep_def *s = find_sweep(tok);
        if (!s) return bad_usage("unknown sweep '%s' (bench --list shows them)", tok);
        if (n_chosen < 16) chosen[n_chosen++] = s;
    }
    bool want_cpu = false, want_gpu = false;
    char bl[64];
    snprintf(bl, sizeof bl, "%s", backends);
    for (char *p = bl, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (!strcmp(tok, "cpu")) want_cpu = true;
        else if (!strcmp(tok, "gpu")) want_gpu = true;
        else return bad_usage("unknown backend '%s' (cpu, gpu)", tok);
    }
    if (want_cpu && bench_backend_open("cpu", ctx.threads, &ctx.cpu) != DG_OK) {
        fprintf(stderr, "bench: cpu backend: %s\n", dg_last_error());
        return 1;
    }
    if (want_cpu && !ctx.threads) ctx.threads = dg_cpu_threads(ctx.cpu);
    if (want_gpu && bench_backend_open("gpu", 0, &ctx.gpu) != DG_OK)
        fprintf(stderr, "bench: GPU rows skipped: %s\n", dg_last_error());
    if (!ctx.cpu && !ctx.gpu) {
        fprintf(stderr, "bench: no backend to run on\n");
        return 1;
    }
    if (mkdir_p(ctx.out_dir)) {
        fprintf(stderr, "bench: cannot create %s: %s\n", ctx.out_dir, strerror(errno));
        return 1;
    }
    ctx.progress = isatty(STDERR_FILENO);
    bench_env_meta(ctx.meta, sizeof ctx.meta, ctx.threads, ctx.gpu);
    signal(SIGINT, on_sigint);

    int rc = 0;
    for (int i = 0; i < n_chosen && !bench_interrupted; i++) {
        ctx.csv = bench_csv_open(ctx.out_dir, chosen[i]->name, ctx.meta);
        if (!ctx.csv) {
            fprintf(stderr, "bench: %s\n", dg_last_error());
            rc = 1;
            break;
        }
        ctx.rows = ctx.failed = 0;
        double t0 = bench_now_s();
        dg_status st = chosen[i]->run(&ctx);
        fclose(ctx.csv);
        if (ctx.progress) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "bench: %s: %d rows (%d failed) in %.1f s -> %s/%s.csv\n", chosen[i]->name, ctx.rows,
                ctx.failed, bench_now_s() - t0, ctx.out_dir, chosen[i]->name);
        if (st != DG_OK) {
            fprintf(stderr, "bench: %s: %s\n", chosen[i]->name, dg_last_error());
            rc = 1;
        }
        if (ctx.failed) rc = 1;
    }
    if (bench_interrupted) fprintf(stderr, "bench: interrupted; every finished row is in %s\n", ctx.out_dir);
    if (bench_plot(ctx.out_dir, stdout)) rc = 1;
    dg_backend_free(ctx.cpu);
    dg_backend_free(ctx.gpu);
    return bench_interrupted ? 130 : rc;
}
