/* options.c: see options.h. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/dataset.h"
#include "list_ops.h"

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
            "  --sweep LIST      comma-separated sweeps, each once (default: " DEFAULT_SWEEPS "); 'all'\n"
            "                    runs them with their largest sizes too (gemm 8192, ops 64M, mlp batch\n"
            "                    8192), and the autodiff and train sweeps\n"
            "  --backends LIST   cpu,gpu (default both; a missing GPU is reported once)\n"
            "  --sizes LIST      sizes instead of each sweep's defaults: 64,128,... or A:B (doubling);\n"
            "                    1 to 2^30, at most %d\n"
            "  --threads N       CPU threads for OpenMP and OpenBLAS, 1 to 1024 (default: all cores)\n"
            "  --reps N          at least N timed runs, 1 to 100000 (default 5)\n"
            "  --warmup N        untimed runs first, 0 to 1000 (default 2)\n"
            "  --min-time S      at least S seconds of timed runs, 0 to 3600 (default 0.1)\n"
            "  --cpu-cap S       skip CPU runs predicted to take longer than S seconds (default 3); runs\n"
            "                    that need more host memory than is available are skipped too\n"
            "  --quick           smaller sizes, for a fast look\n"
            "  --out DIR         result folder (default reports/latest)\n"
            "  --data DIR        Fashion-MNIST folder for the train sweep (default " DG_FASHION_MNIST_DIR ")\n"
            "  --list            sweeps and what they measure\n"
            "  --list-ops        op coverage: forward/backward support per backend\n"
            "  -h, --help        this help\n"
            "\n"
            "Every result is checked against a reference before its time is written; a wrong result is a\n"
            "row with status 'wrong'. GPU kernel times come from CUDA events; rows with transfer=1 include\n"
            "the host-device copies. TF32 is off except in rows with tf32=1 (impl gpu-cublas-tf32).\n"
            "A sweep's rows go to DIR/NAME.csv.partial as they are measured; the file replaces DIR/NAME.csv\n"
            "when the sweep ends or is interrupted with rows in it, so a failed run never erases an\n"
            "earlier result. Ctrl-C or SIGTERM: the row being measured is finished with the runs it has,\n"
            "then the charts and summary are drawn.\n",
            BENCH_MAX_SIZES);
}

int bench_usage_error(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see %s --help)\n", prog);
    va_end(ap);
    return 2;
}

/* strtoll and strtod skip leading blanks and take a sign; a value given on a
 * command line has neither */
static bool plain_start(const char *s, bool negative_ok) {
    return *s && !isspace((unsigned char)*s) && *s != '+' && (negative_ok || *s != '-');
}

bool bench_parse_long(const char *s, long long lo, long long hi, long long *out) {
    if (!plain_start(s, lo < 0)) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool bench_parse_double(const char *s, double lo, double hi, double *out) {
    if (!plain_start(s, lo < 0)) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* "64,128" or "64:4096" (doubling); false with a message */
static bool parse_sizes(const char *spec, bench_ctx *ctx) {
    char buf[512];
    if (strlen(spec) >= sizeof buf) {
        fprintf(stderr, "bench: --sizes is longer than %zu characters\n", sizeof buf - 1);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strchr(buf, ':');
    ctx->n_sizes = 0;
    if (colon) {
        long long a, b;
        *colon = '\0';
        if (!bench_parse_long(buf, 1, 1LL << 30, &a) || !bench_parse_long(colon + 1, a, 1LL << 30, &b)) return false;
        for (long long v = a; v <= b; v *= 2) ctx->sizes[ctx->n_sizes++] = v; /* at most 31 */
        return true;
    }
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (ctx->n_sizes == BENCH_MAX_SIZES) {
            fprintf(stderr, "bench: --sizes has more than %d sizes\n", BENCH_MAX_SIZES);
            return false;
        }
        if (!bench_parse_long(tok, 1, 1LL << 30, &ctx->sizes[ctx->n_sizes++])) return false;
    }
    return true;
}

static const sweep_def *find_sweep(const char *name) {
    for (int i = 0; i < bench_n_sweeps; i++)
        if (!strcmp(bench_sweeps[i].name, name)) return &bench_sweeps[i];
    return NULL;
}

static int parse_sweeps(const char *spec, bench_ctx *ctx, bench_choice *ch) {
    char list[256];
    ctx->extended = !strcmp(spec, "all");
    if (strlen(spec) >= sizeof list) return bench_usage_error("bench", "--sweep is longer than 255 characters");
    snprintf(list, sizeof list, "%s", ctx->extended ? ALL_SWEEPS : spec);
    ch->n_sweeps = 0;
    for (char *p = list, *tok; (tok = strsep(&p, ",")) != NULL;) {
        const sweep_def *s = find_sweep(tok);
        if (!s) return bench_usage_error("bench", "unknown sweep '%s' (bench --list shows them)", tok);
        for (int i = 0; i < ch->n_sweeps; i++) /* a second run would replace the first one's CSV */
            if (ch->sweeps[i] == s) return bench_usage_error("bench", "sweep '%s' given twice", tok);
        ch->sweeps[ch->n_sweeps++] = s; /* distinct sweeps: never more than bench_n_sweeps */
    }
    return BENCH_OPTS_RUN;
}

static int parse_backends(const char *spec, bench_choice *ch) {
    char bl[64];
    if (strlen(spec) >= sizeof bl) return bench_usage_error("bench", "--backends is longer than 63 characters");
    snprintf(bl, sizeof bl, "%s", spec);
    ch->want_cpu = ch->want_gpu = false;
    for (char *p = bl, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (!strcmp(tok, "cpu")) ch->want_cpu = true;
        else if (!strcmp(tok, "gpu")) ch->want_gpu = true;
        else return bench_usage_error("bench", "unknown backend '%s' (cpu, gpu)", tok);
    }
    return BENCH_OPTS_RUN;
}

static bool path_ok(const char *s) { return *s && strlen(s) <= BENCH_MAX_PATH; }

int bench_parse_options(int argc, char **argv, bench_ctx *ctx, bench_choice *ch) {
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
    *ctx = (bench_ctx){.out_dir = "reports/latest", .timing = {2, 5, 200, 0.1}, .cpu_cap_s = 3.0};
    *ch = (bench_choice){0};
    const char *sweep_list = DEFAULT_SWEEPS, *backends = "cpu,gpu";
    long long v;
    int c;
    optind = 0; /* glibc: start over, the parse may run more than once in a process */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': sweep_list = optarg; break;
        case 'b': backends = optarg; break;
        case 'z': if (!parse_sizes(optarg, ctx)) return bench_usage_error("bench", "bad --sizes '%.80s' (e.g. 64,128,256 or 64:4096)", optarg); break;
        case 't': if (!bench_parse_long(optarg, 1, 1024, &v)) return bench_usage_error("bench", "bad --threads '%.80s' (1 to 1024)", optarg);
                  ctx->threads = (int)v; break;
        case 'r': if (!bench_parse_long(optarg, 1, 100000, &v)) return bench_usage_error("bench", "bad --reps '%.80s' (1 to 100000)", optarg);
                  ctx->timing.min_reps = (int)v;
                  if (ctx->timing.max_reps < ctx->timing.min_reps) ctx->timing.max_reps = ctx->timing.min_reps;
                  break;
        case 'w': if (!bench_parse_long(optarg, 0, 1000, &v)) return bench_usage_error("bench", "bad --warmup '%.80s' (0 to 1000)", optarg);
                  ctx->timing.warmup = (int)v; break;
        case 'm': if (!bench_parse_double(optarg, 0, 3600, &ctx->timing.min_time_s)) return bench_usage_error("bench", "bad --min-time '%.80s' (0 to 3600 s)", optarg); break;
        case 'c': if (!bench_parse_double(optarg, 0.001, 86400, &ctx->cpu_cap_s)) return bench_usage_error("bench", "bad --cpu-cap '%.80s' (0.001 to 86400 s)", optarg); break;
        case 'q': ctx->quick = true; break;
        case 'o': if (!path_ok(optarg)) return bench_usage_error("bench", "bad --out '%.80s' (1 to 900 characters)", optarg);
                  ctx->out_dir = optarg; break;
        case 'd': if (!path_ok(optarg)) return bench_usage_error("bench", "bad --data '%.80s' (1 to 900 characters)", optarg);
                  ctx->data_dir = optarg; break;
        case 'l':
            for (int i = 0; i < bench_n_sweeps; i++) printf("%-8s %s\n", bench_sweeps[i].name, bench_sweeps[i].what);
            return 0;
        case 'L': return bench_list_ops(stdout);
        case 'h': usage(stdout); return 0;
        default:
            return bench_usage_error("bench", "unknown or incomplete option '%.80s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return bench_usage_error("bench", "unexpected argument '%.80s'", argv[optind]);
    int rc = parse_sweeps(sweep_list, ctx, ch);
    return rc != BENCH_OPTS_RUN ? rc : parse_backends(backends, ch);
}
