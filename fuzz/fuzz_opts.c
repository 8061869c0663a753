/* fuzz_opts.c: the bench command line (bench_parse_options) on any argv.
 * The input is split at NUL bytes into at most 30 arguments after "bench".
 * The parse must end in one of its three outcomes, and a command line it
 * accepts must hold only checked values. The sweep table, the op list
 * and the ONNX model's naming are stand-ins: the parser needs their names,
 * not what they run. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/list_ops.h"
#include "cli/options.h"
#include "profile/profile.h"

const sweep_def bench_sweeps[] = {{.name = "ceiling", .by_default = true}, {.name = "gemm", .by_default = true},
                                  {.name = "ops", .by_default = true},     {.name = "mlp", .by_default = true},
                                  {.name = "autodiff"},                    {.name = "train"}};
const int bench_n_sweeps = (int)(sizeof bench_sweeps / sizeof *bench_sweeps);
int bench_list_ops(FILE *out) { return out ? 0 : 1; }
/* --model's file: the bench's rule in part (STEM.onnx; the bench also
 * checks the stem's characters, in charts/gnuplot.c, not linked here) */
const bench_prof_model *bench_prof_onnx_model(const char *path) {
    static const bench_prof_model m = {"onnx-fuzz", "an ONNX file's model", 32, 2};
    size_t n = path ? strlen(path) : 0;
    return n >= 6 && !strcmp(path + n - 5, ".onnx") ? &m : NULL;
}
const char *const dg_build_commit = "fuzz"; /* written by the build in the bench */

#define MAX_ARGS 30

static void check_accepted(const bench_ctx *c, const bench_choice *ch) {
    if (ch->n_sweeps < 1 || ch->n_sweeps > bench_n_sweeps || !(ch->want_cpu || ch->want_gpu)) abort();
    for (int i = 0; i < ch->n_sweeps; i++)
        for (int j = 0; j < i; j++)
            if (ch->sweeps[i] == ch->sweeps[j]) abort();
    if (c->n_size_lists < 0 || c->n_size_lists > BENCH_MAX_SIZE_LISTS) abort();
    for (int l = 0; l < c->n_size_lists; l++) {
        const bench_size_list *sl = &c->size_lists[l];
        if (sl->n < 1 || sl->n > BENCH_MAX_SIZES) abort();
        for (int i = 0; i < sl->n; i++)
            if (sl->v[i] < 1 || sl->v[i] > (1LL << 30)) abort();
    }
    if (c->n_shapes < 0 || c->n_shapes > BENCH_MAX_SHAPES) abort();
    for (int i = 0; i < c->n_shapes; i++)
        if (c->shapes[i].m < 1 || c->shapes[i].n < 1 || c->shapes[i].k < 1 || c->shapes[i].k > (1 << 20)) abort();
    if (!(c->timing.max_cv_pct >= 0 && c->timing.max_cv_pct <= 1000) || c->timing.max_retries < 0 ||
        c->timing.max_retries > 10 || !(c->timing.warmup_s >= 0 && c->timing.warmup_s <= 60))
        abort();
    if (c->threads < 0 || c->threads > 1024 || c->timing.min_reps < 1 || c->timing.max_reps < c->timing.min_reps ||
        c->timing.warmup < 0 || !(c->timing.min_time_s >= 0 && c->timing.min_time_s <= 3600) ||
        !(c->cpu_cap_s > 0 && c->cpu_cap_s <= 86400))
        abort();
    if (!c->out_dir || !*c->out_dir || strlen(c->out_dir) > BENCH_MAX_PATH) abort();
    if (c->data_dir && (!*c->data_dir || strlen(c->data_dir) > BENCH_MAX_PATH)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) quiet = freopen("/dev/null", "w", stdout) != NULL; /* --help and --list print */
    char *buf = malloc(size + 1), *argv[MAX_ARGS + 2] = {"bench"};
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    int argc = 1;
    for (char *p = buf; p <= buf + size && argc <= MAX_ARGS; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;
    bench_ctx ctx;
    bench_choice ch;
    int rc = bench_parse_options(argc, argv, &ctx, &ch);
    if (rc == BENCH_OPTS_RUN) check_accepted(&ctx, &ch);
    else if (rc != 0 && rc != 2) abort();
    free(buf);
    return 0;
}
