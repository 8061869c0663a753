/* options.c: see options.h. */
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/dataset.h"
#include "cli/list_ops.h"
#include "profile/profile.h"

#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif
/* written at build time by scripts/build_info.cmake */
extern const char *const dg_build_commit;

/* the registry's sweeps, comma-separated: those run by default (all
 * false), or those --sweep all runs */
static const char *sweep_names(bool all, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < bench_n_sweeps; i++)
        if (all ? !bench_sweeps[i].not_in_all : bench_sweeps[i].by_default)
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? "," : "", bench_sweeps[i].name);
    return buf;
}

static void usage(FILE *f) {
    char by_default[256], all[256];
    sweep_names(false, by_default, sizeof by_default);
    sweep_names(true, all, sizeof all);
    fprintf(f,
            "usage: bench [options]            run sweeps, write CSV, JSON, charts and summary.md\n"
            "       bench plot DIR             redraw charts and summary.md from DIR's CSV files\n"
            "       bench compare DIR_A DIR_B  B against A: ratios, U test; exit 3 on a regression\n"
            "                                  (bench compare --help)\n"
            "       bench train [options]      train on Fashion-MNIST (bench train --help)\n"
            "       bench profile [options]    time one training step node by node (bench profile --help)\n"
            "       bench onnx-run FILE.onnx --input X.f32 --out Y.f32\n"
            "                                  an ONNX model's forward on given examples (bench onnx-run --help)\n"
            "       bench help [SUBCOMMAND]    this help, or a subcommand's (plot, compare, train, profile,\n"
            "                                  onnx-run)\n"
            "\n"
            "what to run:\n"
            "  --sweep LIST       comma-separated sweeps, each once (default: %s)\n"
            "                     'all': %s,\n"
            "                     with their largest sizes (gemm 8192, ops 64M, mlp batch 8192)\n"
            "  --backends LIST    cpu,gpu (default both; a missing GPU is reported once)\n"
            "  --sizes [SWEEP=]LIST  sizes instead of the sweeps' defaults: 64,128,... or A:B (doubling),\n"
            "                     1 to 2^30, at most %d; SWEEP= gives one sweep its own list (repeatable);\n"
            "                     attention=LIST: sequence lengths T, transformer=LIST: context lengths\n"
            "  --shapes LIST      the gemm sweep runs these shapes instead: MxNxK[:OP] comma-separated,\n"
            "                     OP = NN, NT, TN or TT (op(A) op(B), T = transposed), e.g. 512x64x4096:NT\n"
            "  --case LIST        only the cases (gemm shape names, op names, model names...) matching\n"
            "                     these comma-separated glob patterns\n"
            "  --impl LIST        only the implementations matching these patterns (cpu-openblas,\n"
            "                     gpu-*, cpu-fwd ...; bench --list shows the sweeps)\n"
            "  --dtype LIST       precisions, comma-separated: fp32, tf32 (fp32 storage, TF32 tensor-core\n"
            "                     products where the backend has them), bf16, fp16 (2-byte operands,\n"
            "                     float32 accumulation; the models' steps: mixed precision, fp16 with loss\n"
            "                     scaling), or 'all' (default fp32). Every sweep has rows in each, except:\n"
            "                     ops has no tf32 (no products) and keeps softmax_ce fp32;\n"
            "                     autodiff's manual step and scaling's all-reduce rows are fp32 alone; the\n"
            "                     CPU has no TF32 (its tf32 rows run the fp32 kernels and say so, or are\n"
            "                     skipped); a sweep says once which asked precisions it has no rows in\n"
            "  --quick            smaller sizes, for a fast look\n"
            "  --model FILE.onnx  the model sweep's network: an ONNX file (opset >= 13, its input's first\n"
            "                     axis the batch, its output [batch, classes]: core/onnx/onnx.h); alone it\n"
            "                     runs --sweep model; a file that cannot load or train is refused first\n"
            "\n"
            "how to time:\n"
            "  --threads N        CPU threads for OpenMP and OpenBLAS, 1 to 1024 (default: all cores)\n"
            "  --warmup N         untimed runs first, 0 to 1000 (default 2)\n"
            "  --warmup-time S    and at least S seconds of them, 0 to 60 (default 0)\n"
            "  --reps N           at least N timed runs, 1 to 100000 (default 5)\n"
            "  --min-time S       at least S seconds of timed runs, 0 to 3600 (default 0.1)\n"
            "  --max-reps N       at most N timed runs, even before --min-time, 1 to 1000000 (default\n"
            "                     10000; a row it cut short says so in its note)\n"
            "  --max-cv PCT       a row whose coefficient of variation is above PCT is measured again,\n"
            "                     then marked 'noisy' (default 5; 0: never)\n"
            "  --retries N        at most N more measurements of a noisy row, 0 to 10 (default 2)\n"
            "  --cold             empty the caches before every run, outside its time: the GPU's L2 for\n"
            "                     GPU rows, every core's caches for CPU rows (a buffer of twice the\n"
            "                     host's caches written by all threads; --min-time then counts the\n"
            "                     flushes too); the scaling and train sweeps stay hot\n"
            "                     (default: hot, each run finds what the one before left in cache)\n"
            "  --cpu-cap S        skip CPU runs predicted to take longer than S seconds (default 3); a\n"
            "                     run that takes longer than predicted ends its row after one timed run;\n"
            "                     runs that need more host memory than is available are skipped too\n"
            "  --budget S         the whole run's wall time, 1 to 604800 s (default: none): each sweep\n"
            "                     gets an equal share of what is left; rows its share cannot hold are\n"
            "                     timed leaner (1 warm-up run, no re-measuring), rows after the share\n"
            "                     is spent are skipped, each saying so in its note\n"
            "  --no-energy        no energy windows: the energy columns stay empty (default: after its\n"
            "                     timed runs each row runs again in a window read by the GPU's NVML\n"
            "                     energy counter or the CPU's RAPL counters, where they can be read:\n"
            "                     at least 0.1 s and 20 counter updates; README.md, Energy)\n"
            "  --wait-policy P    OpenMP waiting threads: active (spin), passive (sleep) or auto (passive\n"
            "                     when half a core or more is busy beside the bench; default);\n"
            "                     OMP_WAIT_POLICY, if set, wins\n"
            "\n"
            "output:\n"
            "  --out DIR          result folder (default reports/latest)\n"
            "  --samples          also DIR/NAME.samples.csv: every timed run of every row\n"
            "  --data DIR         Fashion-MNIST folder for the train sweep (default " DG_FASHION_MNIST_DIR ")\n"
            "  --list             sweeps and what they measure\n"
            "  --list SWEEP       the rows a run of SWEEP (or of --sweep LIST) would write with the other\n"
            "                     options given, and their --case and --impl names; nothing runs\n"
            "  --list-ops         op coverage: forward/backward support per backend\n"
            "  --version          the version and the commit it was built from\n"
            "  -h, --help         this help\n"
            "\n"
            "Every result is checked against a reference before its time is written (column check says\n"
            "against what, max_rel_err by how much); a wrong result is a row with status 'wrong' and no\n"
            "time. Status: ok, noisy (cv_pct above --max-cv), wrong, failed, error, oom, unsupported,\n"
            "skipped, interrupted; column note says why. GPU kernel times come from CUDA events; rows\n"
            "with transfer=1 include the host-device copies. Column dtype is the row's precision; TF32 is\n"
            "off except in rows with dtype tf32 (tf32=1).\n"
            "A sweep's rows go to DIR/NAME.csv.partial as they are measured; the file replaces DIR/NAME.csv\n"
            "(and NAME.json is written beside it) when the sweep ends with rows in it, so a failed run\n"
            "never erases an earlier result; a run on a --budget writes the rows it could hold and the\n"
            "skipped ones with their reason. Ctrl-C or SIGTERM: the row being measured is finished with\n"
            "the runs it has (status interrupted), the sweep's rows go to DIR/NAME.interrupted.csv where\n"
            "an earlier DIR/NAME.csv exists (else to DIR/NAME.csv), the charts and summary are drawn,\n"
            "and the exit status is 128 + the signal (130, 143).\n",
            by_default, all, BENCH_MAX_SIZES);
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

int bench_option_error(const char *prog, const struct option *opts, int c, char *const *argv) {
    const char *word = argv[optind - 1];
    const struct option *o = opts;
    while (o->name && (!optopt || o->val != optopt)) o++; /* optopt 0: a name no option has */
    if (c == ':' && o->name) return bench_usage_error(prog, "missing value for --%s", o->name);
    if (o->name && o->has_arg == no_argument && !strncmp(word, "--", 2) && strchr(word, '='))
        return bench_usage_error(prog, "--%s takes no value ('%.80s')", o->name, word);
    return bench_usage_error(prog, "unknown option '%.80s'", word);
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

/* "64,128" or "64:4096" (doubling) into *l; false with a message */
static bool parse_size_list(const char *spec, bench_size_list *l) {
    char buf[512];
    if (strlen(spec) >= sizeof buf) {
        fprintf(stderr, "bench: --sizes is longer than %zu characters\n", sizeof buf - 1);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strchr(buf, ':');
    l->n = 0;
    if (colon) {
        long long a, b;
        *colon = '\0';
        if (!bench_parse_long(buf, 1, 1LL << 30, &a) || !bench_parse_long(colon + 1, a, 1LL << 30, &b)) return false;
        for (long long v = a; v <= b; v *= 2) l->v[l->n++] = v; /* at most 31 */
        return true;
    }
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (l->n == BENCH_MAX_SIZES) {
            fprintf(stderr, "bench: --sizes has more than %d sizes\n", BENCH_MAX_SIZES);
            return false;
        }
        if (!bench_parse_long(tok, 1, 1LL << 30, &l->v[l->n++])) return false;
    }
    return true;
}

static const sweep_def *find_sweep(const char *name);

/* --sizes [SWEEP=]LIST: one list per sweep, and one for the others */
static int parse_sizes(const char *spec, bench_ctx *ctx) {
    const char *eq = strchr(spec, '='), *list = eq ? eq + 1 : spec;
    char name[32] = "";
    if (eq) {
        if ((size_t)(eq - spec) >= sizeof name) return bench_usage_error("bench", "bad --sizes '%.80s': unknown sweep", spec);
        memcpy(name, spec, (size_t)(eq - spec));
        name[eq - spec] = '\0';
    }
    const sweep_def *sw = eq ? find_sweep(name) : NULL;
    if (eq && !sw) return bench_usage_error("bench", "bad --sizes '%.80s': unknown sweep '%s' (bench --list)", spec, name);
    for (int i = 0; i < ctx->n_size_lists; i++)
        if ((ctx->size_lists[i].sweep == NULL) == (sw == NULL) && (!sw || !strcmp(ctx->size_lists[i].sweep, sw->name)))
            return bench_usage_error("bench", "--sizes given twice for %s", sw ? sw->name : "all sweeps");
    if (ctx->n_size_lists == BENCH_MAX_SIZE_LISTS)
        return bench_usage_error("bench", "--sizes given more than %d times", BENCH_MAX_SIZE_LISTS);
    bench_size_list *l = &ctx->size_lists[ctx->n_size_lists];
    if (!parse_size_list(list, l))
        return bench_usage_error("bench", "bad --sizes '%.80s' (e.g. 64,128,256 or 64:4096, or gemm=64:4096)", spec);
    l->sweep = sw ? sw->name : NULL;
    ctx->n_size_lists++;
    return BENCH_OPTS_RUN;
}

/* one "MxNxK[:OP]" */
static bool parse_shape(char *tok, bench_gemm_shape *sh) {
    char *op = strchr(tok, ':');
    if (op) {
        *op++ = '\0';
        if (strlen(op) != 2 || !strchr("NT", op[0]) || !strchr("NT", op[1])) return false;
        sh->ta = op[0] == 'T';
        sh->tb = op[1] == 'T';
    }
    long long d[3];
    char *p = tok;
    for (int i = 0; i < 3; i++) {
        char *x = strsep(&p, "x");
        if (!x || !bench_parse_long(x, 1, 1 << 20, &d[i])) return false;
    }
    if (p) return false; /* a fourth dimension */
    sh->m = (int)d[0];
    sh->n = (int)d[1];
    sh->k = (int)d[2];
    return true;
}

static int parse_shapes(const char *spec, bench_ctx *ctx) {
    char buf[512];
    if (strlen(spec) >= sizeof buf) return bench_usage_error("bench", "--shapes is longer than %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    ctx->n_shapes = 0;
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (ctx->n_shapes == BENCH_MAX_SHAPES) return bench_usage_error("bench", "--shapes has more than %d shapes", BENCH_MAX_SHAPES);
        bench_gemm_shape *sh = &ctx->shapes[ctx->n_shapes++];
        *sh = (bench_gemm_shape){0};
        if (!parse_shape(tok, sh))
            return bench_usage_error("bench", "bad --shapes entry '%.80s' (MxNxK with 1 to 2^20 each, then :NN, :NT, :TN or :TT)", tok);
    }
    return BENCH_OPTS_RUN;
}

/* --case, --impl: non-empty glob patterns, no empty entry */
static bool filter_ok(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != ',' && s[n - 1] != ',' && !strstr(s, ",,");
}

static const sweep_def *find_sweep(const char *name) {
    for (int i = 0; i < bench_n_sweeps; i++)
        if (!strcmp(bench_sweeps[i].name, name)) return &bench_sweeps[i];
    return NULL;
}

static int parse_sweeps(const char *spec, bench_ctx *ctx, bench_choice *ch) {
    char list[256];
    ctx->extended = spec && !strcmp(spec, "all");
    if (spec && strlen(spec) >= sizeof list) return bench_usage_error("bench", "--sweep is longer than 255 characters");
    if (!spec || ctx->extended) sweep_names(ctx->extended, list, sizeof list);
    else snprintf(list, sizeof list, "%s", spec);
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

enum {
    OPT_SWEEP = 256, OPT_BACKENDS, OPT_SIZES, OPT_SHAPES, OPT_CASE, OPT_IMPL, OPT_THREADS, OPT_REPS, OPT_WARMUP,
    OPT_WARMUP_TIME, OPT_MIN_TIME, OPT_MAX_REPS, OPT_MAX_CV, OPT_RETRIES, OPT_COLD, OPT_CPU_CAP, OPT_BUDGET, OPT_WAIT,
    OPT_QUICK, OPT_DTYPE, OPT_OUT, OPT_SAMPLES, OPT_DATA, OPT_LIST, OPT_LIST_OPS, OPT_VERSION, OPT_NO_ENERGY,
    OPT_MODEL,
};

bench_ctx bench_default_ctx(void) {
    return (bench_ctx){
        .out_dir = "reports/latest",
        .timing = {.warmup = 2, .min_reps = 5, .max_reps = 10000, .min_time_s = 0.1, .max_cv_pct = 5,
                   .max_retries = 2},
        .cpu_cap_s = 3.0,
        .wait_policy = "auto",
    };
}

/* one option's value into ctx / ch; BENCH_OPTS_RUN or an exit code */
static int take_option(int c, const char *arg, bench_ctx *ctx, const char **sweeps, const char **backends,
                       long long *max_reps) {
    long long v;
    switch (c) {
    case OPT_SWEEP: *sweeps = arg; break;
    case OPT_BACKENDS: *backends = arg; break;
    case OPT_SIZES: return parse_sizes(arg, ctx);
    case OPT_SHAPES: return parse_shapes(arg, ctx);
    case OPT_CASE:
        if (!filter_ok(arg)) return bench_usage_error("bench", "bad --case '%.80s' (comma-separated patterns)", arg);
        ctx->case_filter = arg; break;
    case OPT_IMPL:
        if (!filter_ok(arg)) return bench_usage_error("bench", "bad --impl '%.80s' (comma-separated patterns)", arg);
        ctx->impl_filter = arg; break;
    case OPT_THREADS:
        if (!bench_parse_long(arg, 1, 1024, &v)) return bench_usage_error("bench", "bad --threads '%.80s' (1 to 1024)", arg);
        ctx->threads = (int)v; break;
    case OPT_REPS:
        if (!bench_parse_long(arg, 1, 100000, &v)) return bench_usage_error("bench", "bad --reps '%.80s' (1 to 100000)", arg);
        ctx->timing.min_reps = (int)v; break;
    case OPT_MAX_REPS:
        if (!bench_parse_long(arg, 1, 1000000, max_reps)) return bench_usage_error("bench", "bad --max-reps '%.80s' (1 to 1000000)", arg);
        break;
    case OPT_WARMUP:
        if (!bench_parse_long(arg, 0, 1000, &v)) return bench_usage_error("bench", "bad --warmup '%.80s' (0 to 1000)", arg);
        ctx->timing.warmup = (int)v; break;
    case OPT_WARMUP_TIME:
        if (!bench_parse_double(arg, 0, 60, &ctx->timing.warmup_s)) return bench_usage_error("bench", "bad --warmup-time '%.80s' (0 to 60 s)", arg);
        break;
    case OPT_MIN_TIME:
        if (!bench_parse_double(arg, 0, 3600, &ctx->timing.min_time_s)) return bench_usage_error("bench", "bad --min-time '%.80s' (0 to 3600 s)", arg);
        break;
    case OPT_MAX_CV:
        if (!bench_parse_double(arg, 0, 1000, &ctx->timing.max_cv_pct)) return bench_usage_error("bench", "bad --max-cv '%.80s' (0 to 1000 percent)", arg);
        break;
    case OPT_RETRIES:
        if (!bench_parse_long(arg, 0, 10, &v)) return bench_usage_error("bench", "bad --retries '%.80s' (0 to 10)", arg);
        ctx->timing.max_retries = (int)v; break;
    case OPT_COLD: ctx->timing.cold = true; break;
    case OPT_NO_ENERGY: ctx->no_energy = true; break;
    case OPT_CPU_CAP:
        if (!bench_parse_double(arg, 0.001, 86400, &ctx->cpu_cap_s)) return bench_usage_error("bench", "bad --cpu-cap '%.80s' (0.001 to 86400 s)", arg);
        break;
    case OPT_BUDGET:
        if (!bench_parse_double(arg, 1, 604800, &ctx->budget_s)) return bench_usage_error("bench", "bad --budget '%.80s' (1 to 604800 s)", arg);
        break;
    case OPT_WAIT:
        if (strcmp(arg, "auto") && strcmp(arg, "active") && strcmp(arg, "passive"))
            return bench_usage_error("bench", "bad --wait-policy '%.80s' (auto, active or passive)", arg);
        ctx->wait_policy = arg; break;
    case OPT_QUICK: ctx->quick = true; break;
    case OPT_DTYPE:
        if (bench_parse_precisions(arg, ctx) != DG_OK) return bench_usage_error("bench", "%s", dg_last_error());
        break;
    case OPT_SAMPLES: ctx->samples = true; break;
    case OPT_OUT:
        if (!path_ok(arg)) return bench_usage_error("bench", "bad --out '%.80s' (1 to 900 characters)", arg);
        ctx->out_dir = arg; break;
    case OPT_DATA:
        if (!path_ok(arg)) return bench_usage_error("bench", "bad --data '%.80s' (1 to 900 characters)", arg);
        ctx->data_dir = arg; break;
    case OPT_MODEL:
        if (!path_ok(arg) || !bench_prof_onnx_model(arg)) /* its stem names the rows: onnx-STEM */
            return bench_usage_error("bench", "bad --model '%.80s' (an ONNX file named STEM.onnx, STEM of "
                                     "letters, digits, '.', '_', '-')", arg);
        ctx->model_path = arg; break;
    case OPT_LIST: ctx->list = stdout; break; /* the sweeps, or a sweep's rows: after the parse */
    case OPT_LIST_OPS: return bench_list_ops(stdout);
    case OPT_VERSION: printf("duograd bench %s (commit %s)\n", DG_VERSION, dg_build_commit); return 0;
    case 'h': usage(stdout); return 0;
    }
    return BENCH_OPTS_RUN;
}

int bench_parse_options(int argc, char **argv, bench_ctx *ctx, bench_choice *ch) {
    static const struct option opts[] = {
        {"sweep", required_argument, NULL, OPT_SWEEP},        {"backends", required_argument, NULL, OPT_BACKENDS},
        {"sizes", required_argument, NULL, OPT_SIZES},        {"shapes", required_argument, NULL, OPT_SHAPES},
        {"case", required_argument, NULL, OPT_CASE},          {"impl", required_argument, NULL, OPT_IMPL},
        {"threads", required_argument, NULL, OPT_THREADS},    {"reps", required_argument, NULL, OPT_REPS},
        {"warmup", required_argument, NULL, OPT_WARMUP},      {"warmup-time", required_argument, NULL, OPT_WARMUP_TIME},
        {"min-time", required_argument, NULL, OPT_MIN_TIME},  {"max-reps", required_argument, NULL, OPT_MAX_REPS},
        {"max-cv", required_argument, NULL, OPT_MAX_CV},      {"retries", required_argument, NULL, OPT_RETRIES},
        {"cold", no_argument, NULL, OPT_COLD},                {"cpu-cap", required_argument, NULL, OPT_CPU_CAP},
        {"budget", required_argument, NULL, OPT_BUDGET},      {"no-energy", no_argument, NULL, OPT_NO_ENERGY},
        {"wait-policy", required_argument, NULL, OPT_WAIT},   {"quick", no_argument, NULL, OPT_QUICK},
        {"dtype", required_argument, NULL, OPT_DTYPE},        {"model", required_argument, NULL, OPT_MODEL},
        {"out", required_argument, NULL, OPT_OUT},            {"samples", no_argument, NULL, OPT_SAMPLES},
        {"data", required_argument, NULL, OPT_DATA},          {"list", no_argument, NULL, OPT_LIST},
        {"list-ops", no_argument, NULL, OPT_LIST_OPS},        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, 'h'},                     {NULL, 0, NULL, 0},
    };
    *ctx = bench_default_ctx();
    *ch = (bench_choice){0};
    ctx->argc = argc;
    ctx->argv = argv;
    const char *sweep_list = NULL, *backends = "cpu,gpu"; /* NULL: the registry's default sweeps */
    long long max_reps = 0; /* 0: not given */
    int c, rc;
    optind = 0; /* glibc: start over, the parse may run more than once in a process */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == '?' || c == ':') return bench_option_error("bench", opts, c, argv);
        if ((rc = take_option(c, optarg, ctx, &sweep_list, &backends, &max_reps)) != BENCH_OPTS_RUN) return rc;
    }
    if (ctx->list && optind < argc) { /* bench --list SWEEP: as --list --sweep SWEEP */
        if (sweep_list) return bench_usage_error("bench", "--list takes a sweep or --sweep, not both");
        sweep_list = argv[optind++];
    }
    if (optind < argc) return bench_usage_error("bench", "unexpected argument '%.80s'", argv[optind]);
    if (ctx->model_path && !sweep_list) sweep_list = "model"; /* --model alone: its sweep */
    if (ctx->list && !sweep_list) {
        for (int i = 0; i < bench_n_sweeps; i++) printf("%-11s %s\n", bench_sweeps[i].name, bench_sweeps[i].what);
        return 0;
    }
    bench_timing *t = &ctx->timing;
    if (max_reps && max_reps < t->min_reps)
        return bench_usage_error("bench", "--max-reps %lld is below --reps %d", max_reps, t->min_reps);
    if (max_reps) t->max_reps = (int)max_reps;
    else if (t->max_reps < t->min_reps) t->max_reps = t->min_reps;
    if ((rc = parse_sweeps(sweep_list, ctx, ch)) != BENCH_OPTS_RUN) return rc;
    bool model = false;
    for (int i = 0; i < ch->n_sweeps; i++) model |= !strcmp(ch->sweeps[i]->name, "model");
    if (model != (ctx->model_path != NULL))
        return bench_usage_error("bench", model ? "--sweep model needs --model FILE.onnx"
                                                : "--model is for the model sweep, which --sweep leaves out");
    if (ctx->n_shapes) {
        bool gemm = false;
        for (int i = 0; i < ch->n_sweeps; i++) gemm |= !strcmp(ch->sweeps[i]->name, "gemm");
        if (!gemm) return bench_usage_error("bench", "--shapes is for the gemm sweep, which --sweep leaves out");
    }
    for (int i = 0; i < ctx->n_size_lists; i++) {
        bool run = !ctx->size_lists[i].sweep;
        for (int j = 0; j < ch->n_sweeps; j++) run |= ctx->size_lists[i].sweep == ch->sweeps[j]->name;
        if (!run) return bench_usage_error("bench", "--sizes %s=... names a sweep that --sweep leaves out", ctx->size_lists[i].sweep);
    }
    return parse_backends(backends, ch);
}
