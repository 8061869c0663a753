/* test_cli_options.c: every option of every bench subcommand with empty,
 * negative, zero, huge, non-numeric and overlong values. Each must exit 2
 * with a message on stderr, print nothing on stdout and write nothing: the
 * result folder named by --out is never created. */
#include <ctype.h>
#include <sys/stat.h>

#include "shell_util.h"

/* one bad command line: the subcommand's words, the option and its value */
typedef struct bad_case { const char *sub, *opt, *value; } bad_case;

#define LONG_VALUE "L" /* replaced by a value of 2000 characters */
/* 57 valid sizes in 512 characters: cut at 511, still a valid list */
#define LONG_SIZES "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111,11111111,11111111,11111111,11111111,11111111,11111111,11111111," \
    "11111111"

static const bad_case cases[] = {
    /* bench [options] */
    {NULL, "--sweep", ""}, {NULL, "--sweep", "nope"}, {NULL, "--sweep", "gemm,"}, {NULL, "--sweep", "gemm,gemm"},
    {NULL, "--sweep", LONG_VALUE},
    {NULL, "--backends", ""}, {NULL, "--backends", "tpu"}, {NULL, "--backends", "cpu,"}, {NULL, "--backends", LONG_VALUE},
    {NULL, "--sizes", ""}, {NULL, "--sizes", "-1"}, {NULL, "--sizes", "0"}, {NULL, "--sizes", "2000000000"},
    {NULL, "--sizes", "99999999999999999999"}, {NULL, "--sizes", "abc"}, {NULL, "--sizes", "64,,128"},
    {NULL, "--sizes", "128:64"}, {NULL, "--sizes", "1:"}, {NULL, "--sizes", " 64"}, {NULL, "--sizes", LONG_VALUE},
    {NULL, "--sizes", LONG_SIZES},
    {NULL, "--threads", ""}, {NULL, "--threads", "-1"}, {NULL, "--threads", "0"}, {NULL, "--threads", "1025"},
    {NULL, "--threads", "4294967297"}, {NULL, "--threads", "four"}, {NULL, "--threads", "+4"}, {NULL, "--threads", LONG_VALUE},
    {NULL, "--reps", ""}, {NULL, "--reps", "-1"}, {NULL, "--reps", "0"}, {NULL, "--reps", "1e9"}, {NULL, "--reps", "x"},
    {NULL, "--warmup", ""}, {NULL, "--warmup", "-1"}, {NULL, "--warmup", "1001"}, {NULL, "--warmup", "2.5"},
    {NULL, "--min-time", ""}, {NULL, "--min-time", "-1"}, {NULL, "--min-time", "3601"}, {NULL, "--min-time", "1e400"},
    {NULL, "--min-time", "nan"}, {NULL, "--min-time", "inf"}, {NULL, "--min-time", "0.1s"},
    {NULL, "--cpu-cap", ""}, {NULL, "--cpu-cap", "-1"}, {NULL, "--cpu-cap", "0"}, {NULL, "--cpu-cap", "1e-300"},
    {NULL, "--cpu-cap", "inf"}, {NULL, "--cpu-cap", "abc"},
    {NULL, "--out", ""}, {NULL, "--out", LONG_VALUE}, {NULL, "--data", ""}, {NULL, "--data", LONG_VALUE},
    {NULL, "--nope", NULL}, {NULL, "--reps", NULL /* no value */}, {NULL, "extra", NULL},
    {NULL, "--max-reps", ""}, {NULL, "--max-reps", "0"}, {NULL, "--max-reps", "1000001"}, {NULL, "--max-reps", "2"} /* < --reps 5 */,
    {NULL, "--warmup-time", "-1"}, {NULL, "--warmup-time", "61"}, {NULL, "--warmup-time", "nan"},
    {NULL, "--max-cv", "-1"}, {NULL, "--max-cv", "1001"}, {NULL, "--max-cv", "5%"},
    {NULL, "--retries", "-1"}, {NULL, "--retries", "11"}, {NULL, "--wait-policy", "spin"}, {NULL, "--wait-policy", ""},
    {NULL, "--sizes", "nope=64"}, {NULL, "--sizes", "=64"}, {NULL, "--sizes", "gemm="}, {NULL, "--sizes", "train=64"} /* not run */,
    {NULL, "--shapes", ""}, {NULL, "--shapes", "64x64"}, {NULL, "--shapes", "64x64x64x64"}, {NULL, "--shapes", "0x64x64"},
    {NULL, "--shapes", "64x64x64:NX"}, {NULL, "--shapes", "64x64x64:N"}, {NULL, "--shapes", "64x64x2000000"},
    {NULL, "--shapes", "64x64x64,"}, {NULL, "--shapes", LONG_VALUE},
    {NULL, "--case", ""}, {NULL, "--case", "a,,b"}, {NULL, "--case", ","}, {NULL, "--case", LONG_VALUE},
    {NULL, "--impl", ""}, {NULL, "--impl", "cpu-*,"}, {NULL, "--impl", LONG_VALUE},
    {NULL, "--dtype", ""}, {NULL, "--dtype", "f32"}, {NULL, "--dtype", "bf16,"}, {NULL, "--dtype", "fp32,fp32"},
    {NULL, "--dtype", "all,fp16"}, {NULL, "--dtype", "FP16"}, {NULL, "--dtype", LONG_VALUE},
    /* bench train [options] */
    {"train", "--model", ""}, {"train", "--model", "resnet50"}, {"train", "--widths", ""}, {"train", "--widths", "784"},
    {"train", "--widths", "784-0-10"}, {"train", "--widths", "784--10"}, {"train", "--widths", "784-x-10"},
    {"train", "--widths", "784-99999999999-10"}, {"train", "--widths", LONG_VALUE},
    {"train", "--backend", ""}, {"train", "--backend", "tpu"},
    {"train", "--epochs", ""}, {"train", "--epochs", "-1"}, {"train", "--epochs", "0"},
    {"train", "--epochs", "4294967297"}, {"train", "--epochs", "ten"},
    {"train", "--batch", ""}, {"train", "--batch", "-1"}, {"train", "--batch", "0"}, {"train", "--batch", "60001"},
    {"train", "--batch", "4294967424"}, {"train", "--batch", "1e3"},
    {"train", "--optimizer", ""}, {"train", "--optimizer", "rmsprop"},
    {"train", "--lr", ""}, {"train", "--lr", "-1"}, {"train", "--lr", "0"}, {"train", "--lr", "1e-300"},
    {"train", "--lr", "100"}, {"train", "--lr", "nan"}, {"train", "--lr", "fast"},
    {"train", "--weight-decay", ""}, {"train", "--weight-decay", "-1e-4"}, {"train", "--weight-decay", "2"},
    {"train", "--weight-decay", "nan"},
    {"train", "--seed", ""}, {"train", "--seed", "-1"}, {"train", "--seed", "99999999999999999999"},
    {"train", "--seed", "0x"}, {"train", "--seed", " 1"},
    {"train", "--subset", ""}, {"train", "--subset", "0"}, {"train", "--subset", "-5"},
    {"train", "--subset", "4294967297"},
    {"train", "--threads", ""}, {"train", "--threads", "0"}, {"train", "--threads", "4294967297"},
    {"train", "--gpus", ""}, {"train", "--gpus", "0"}, {"train", "--gpus", "-1"}, {"train", "--gpus", "17"},
    {"train", "--gpus", "4294967298"}, {"train", "--gpus", "x"}, {"train", "--gpus", "2"} /* the cpu backend */,
    {"train", "--data", ""}, {"train", "--data", LONG_VALUE}, {"train", "--out", ""}, {"train", "--out", LONG_VALUE},
    {"train", "--nope", NULL}, {"train", "--epochs", NULL}, {"train", "extra", NULL},
    /* bench plot / compare: the folder count */
    {"plot", NULL, NULL}, {"compare", "onlyone", NULL},
};

Test(bench_cli_table, every_bad_value_is_a_usage_error_that_writes_nothing) {
    char root[] = "/tmp/dg-opts-XXXXXX", never[512], long_value[2001];
    tmp_dir(root);
    snprintf(never, sizeof never, "%s/never", root);
    memset(long_value, '7', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    int n_cases = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n_cases; i++) {
        const bad_case *c = &cases[i];
        const char *args[12];
        int n = 0;
        if (c->sub) args[n++] = c->sub;
        bool takes_out = !c->sub || !strcmp(c->sub, "train");
        /* the folder that must not appear, unless --out itself is the case */
        if (takes_out && (!c->opt || strcmp(c->opt, "--out"))) { args[n++] = "--out"; args[n++] = never; }
        if (c->opt) args[n++] = c->opt;
        if (c->value) args[n++] = !strcmp(c->value, LONG_VALUE) ? long_value : c->value;
        args[n] = NULL;
        char out[4096], err[4096];
        int rc = run_bench(root, args, out, err, 60);
        const char *shown = c->value && !strcmp(c->value, LONG_VALUE) ? "<2000 characters>" : c->value;
        cr_expect_eq(rc, 2, "bench %s %s '%s': exit %d, not 2\n%s", c->sub ? c->sub : "", c->opt ? c->opt : "",
                     shown ? shown : "(none)", rc, err);
        cr_expect(strlen(err) > 10 && strstr(err, "bench"), "bench %s %s '%s': no message on stderr",
                  c->sub ? c->sub : "", c->opt ? c->opt : "", shown ? shown : "(none)");
        cr_expect_eq(strlen(out), 0, "bench %s %s '%s': printed on stdout: %s", c->sub ? c->sub : "",
                     c->opt ? c->opt : "", shown ? shown : "(none)", out);
        cr_expect_neq(access(never, F_OK), 0, "bench %s %s '%s': created the result folder", c->sub ? c->sub : "",
                      c->opt ? c->opt : "", shown ? shown : "(none)");
        rmdir(never);
        /* nothing else appeared where it ran */
        char cmd[1024], listing[256];
        snprintf(cmd, sizeof cmd, "ls -A '%s'", root);
        sh(cmd, listing, sizeof listing);
        cr_expect_str_empty(listing, "bench %s %s: wrote into its working folder: %s", c->sub ? c->sub : "",
                            c->opt ? c->opt : "", listing);
    }
    remove_dir(root);
}

/* --dtype: an unknown precision is named, with the accepted ones; the
 * help lists the option (bench help prints the same text) */
Test(bench_cli_help, dtype_names_the_unknown_precision_and_is_in_the_help) {
    char out[4096], err[4096];
    const char *bad[] = {"--dtype", "fp32,bf17", "--list", "gemm", NULL};
    cr_assert_eq(run_bench("/tmp", bad, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "'bf17'") && strstr(err, "fp32, tf32, bf16, fp16, or all"), "%s", err);
    const char *help[] = {"help", NULL};
    cr_assert_eq(run_bench("/tmp", help, out, err, 30), 0, "%s", err);
    cr_assert(strstr(out, "--dtype LIST"), "%s", out);
    /* bench --list shows each row's precision; a sweep without tf32 says
     * so in one line on stderr, with its reason, and that is not an error */
    const char *gemm[] = {"--list", "gemm", "--dtype", "fp16", "--backends", "cpu", "--quick", NULL};
    cr_assert_eq(run_bench("/tmp", gemm, out, err, 30), 0, "%s", err);
    cr_assert(strstr(out, "gemm square cpu-openblas cpu fp16 m=1024 ") && !strstr(out, " fp32 ") &&
                  !strstr(out, "cpu-naive"), "%s", out);
    const char *ops[] = {"--list", "ops", "--dtype", "tf32,fp32", "--backends", "cpu", "--quick", NULL};
    cr_assert_eq(run_bench("/tmp", ops, out, err, 30), 0, "%s", err);
    cr_assert(strstr(err, "bench: ops: no rows in tf32 (--dtype): the sweep runs in fp32, bf16, fp16: tf32 rounds a "
                          "product's operands, and these ops have none\n"), "%s", err);
    cr_assert(strstr(out, " fp32 ") && !strstr(out, " tf32 "), "%s", out);
}

/* ---- discoverable: every subcommand in --help, bench help SUB, and each
 * option's missing value named as such ---- */

static const char *const subcommands[] = {"plot", "compare", "train", "profile", "onnx-run"};
#define N_SUBCOMMANDS (int)(sizeof subcommands / sizeof *subcommands)

/* bench --help names every subcommand, and `bench help SUB` prints SUB's
 * own help (profile was missing from --help; `bench help` did not exist) */
Test(bench_cli_help, help_lists_every_subcommand_and_help_sub_prints_its_help) {
    char out[4096], err[4096];
    const char *help[] = {"--help", NULL};
    cr_assert_eq(run_bench("/tmp", help, out, err, 30), 0, "%s", err);
    for (int i = 0; i < N_SUBCOMMANDS; i++) {
        char line[64], usage[64];
        snprintf(line, sizeof line, "\n       bench %s ", subcommands[i]);
        cr_expect(strstr(out, line), "bench --help does not list '%s':\n%s", subcommands[i], out);
        const char *args[] = {"help", subcommands[i], NULL};
        int rc = run_bench("/tmp", args, out, err, 30);
        snprintf(usage, sizeof usage, "usage: bench %s", subcommands[i]);
        cr_expect_eq(rc, 0, "bench help %s: exit %d\n%s", subcommands[i], rc, err);
        cr_expect(!strncmp(out, usage, strlen(usage)), "bench help %s printed:\n%s", subcommands[i], out);
        cr_assert_eq(run_bench("/tmp", help, out, err, 30), 0);
    }
    const char *plain[] = {"help", NULL};
    cr_assert_eq(run_bench("/tmp", plain, out, err, 30), 0, "%s", err);
    cr_assert(!strncmp(out, "usage: bench [options]", 22), "%s", out);
    const char *unknown[] = {"help", "nope", NULL};
    cr_assert_eq(run_bench("/tmp", unknown, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "plot, compare, train, profile or onnx-run"), "%s", err);
}

/* the options of a --help text that take a value ("  --reps N", "  --sizes [SWEEP=]LIST"),
 * less those it also shows without one ("  --list  " beside "  --list SWEEP") */
static int options_with_values(const char *help, char names[][32], int max) {
    int n = 0;
    for (const char *p = help; (p = strstr(p, "\n  --")) != NULL && n < max;) {
        p += 5; /* past "\n  --" */
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-");
        char bare[48];
        snprintf(bare, sizeof bare, "\n  --%.*s  ", (int)len, p);
        if (len < sizeof names[0] && p[len] == ' ' && (isupper((unsigned char)p[len + 1]) || p[len + 1] == '[') &&
            !strstr(help, bare))
            snprintf(names[n++], sizeof names[0], "%.*s", (int)len, p);
    }
    return n;
}

/* Every option that takes a value, given last without one, is "missing
 * value for --X" (exit 2, nothing on stdout), in every subcommand, as read
 * from each one's --help; before, it was "unknown or incomplete option" or
 * "bad option (unknown or without its value)". */
Test(bench_cli_help, a_missing_value_is_named_as_missing) {
    static const char *const prefixes[][3] = {{NULL}, {"compare"}, {"train"}, {"train", "--model", "charlm"}, {"profile"},
                                                     {"onnx-run"}};
    int checked = 0;
    for (size_t s = 0; s < sizeof prefixes / sizeof *prefixes; s++) {
        const char *args[8];
        int n = 0;
        for (int k = 0; k < 3 && prefixes[s][k]; k++) args[n++] = prefixes[s][k];
        args[n] = "--help";
        args[n + 1] = NULL;
        char out[4096], err[4096], names[64][32];
        cr_assert_eq(run_bench("/tmp", args, out, err, 30), 0, "%s", err);
        int n_opts = options_with_values(out, names, 64);
        cr_assert_geq(n_opts, 3, "too few options read from:\n%s", out);
        for (int i = 0; i < n_opts; i++) {
            char opt[40], want[64];
            snprintf(opt, sizeof opt, "--%.31s", names[i]);
            snprintf(want, sizeof want, "missing value for %s\n", opt);
            args[n] = opt;
            int rc = run_bench("/tmp", args, out, err, 30);
            cr_expect_eq(rc, 2, "%s %s: exit %d\n%s", args[0], opt, rc, err);
            cr_expect(strstr(err, want), "%s %s (no value): %s", n ? args[0] : "bench", opt, err);
            cr_expect_str_empty(out, "%s", opt);
            checked++;
        }
    }
    cr_assert_geq(checked, 50, "only %d options checked", checked);
    /* and a value given to an option that takes none */
    char out[4096], err[4096];
    const char *quick[] = {"--quick=yes", NULL};
    cr_assert_eq(run_bench("/tmp", quick, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "--quick takes no value"), "%s", err);
    const char *unknown[] = {"--nope", NULL};
    cr_assert_eq(run_bench("/tmp", unknown, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "unknown option '--nope'"), "%s", err);
}

/* A build without CUDA says so when GPU rows are asked for, not that nvcc
 * was not found (which it said also where nvcc was there and DG_CUDA=OFF) */
Test(bench_cli_help, a_build_without_cuda_says_so) {
#ifdef DG_HAVE_CUDA
    cr_skip_test("built with CUDA: the message of a build without it is not compiled");
#else
    char out[4096], err[4096];
    const char *args[] = {"--sweep", "ceiling", "--backends", "gpu", "--out", "/nonexistent/never", NULL};
    cr_assert_eq(run_bench("/tmp", args, out, err, 30), 1, "%s", err);
    cr_assert(strstr(err, "built without CUDA"), "%s", err);
    cr_assert_null(strstr(err, "nvcc"), "%s", err);
#endif
}

/* "sweep case impl backend m=.. n=.. k=.. batch=.." of each CSV row of path, one per line, into buf */
static void csv_rows_as_listed(const char *path, char *buf, size_t n) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "grep -v '^#' '%s' | tail -n +2 | awk -F, '{print $1\" \"$2\" \"$3\" \"$4\" \"$5\" m=\"$6\" n=\"$7\" k=\"$8\" "
             "batch=\"$9}' | sort",
             path);
    cr_assert_eq(sh(cmd, buf, n), 0, "%s", buf);
}

/* bench --list SWEEP prints the rows a run with the same options writes,
 * and their --case and --impl names, from the sweep's own points and
 * implementations; it runs nothing and makes no folder. The listed rows
 * are those of the run, one for one (add_bcast's backward is listed and
 * not written: its gradient turns out to be no node of its own only once
 * the case is built, which listing does not do). */
Test(bench_cli_help, list_sweep_prints_the_rows_a_run_would_write) {
    char root[] = "/tmp/dg-list-XXXXXX", out[4096], err[4096], dir[512], path[600], cmd[2048];
    tmp_dir(root);
    snprintf(dir, sizeof dir, "%s/res", root);
    const char *list[] = {"--list", "ops", "--sizes", "ops=1024", "--backends", "cpu", "--case", "add,relu",
                          "--out", dir, NULL};
    cr_assert_eq(run_bench(root, list, out, err, 60), 0, "%s", err);
    cr_assert_neq(access(dir, F_OK), 0, "--list made %s", dir);
    cr_assert(strstr(out, "ops: 3 rows; --case: add, relu; --impl: cpu-fwd, cpu-bwd\n"), "%s", out);
    char listed[4096], ran[4096];
    snprintf(path, sizeof path, "%s/listed", root);
    write_file(path, out);
    snprintf(cmd, sizeof cmd, "grep -v ' rows; ' '%s' | sort", path);
    cr_assert_eq(sh(cmd, listed, sizeof listed), 0);
    const char *run[] = {"--sweep", "ops", "--sizes", "ops=1024", "--backends", "cpu", "--case", "add,relu",
                         "--warmup", "0", "--reps", "1", "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(root, run, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    csv_rows_as_listed(path, ran, sizeof ran);
    cr_assert_str_eq(listed, ran, "listed:\n%s\nthe run wrote:\n%s", listed, ran);
    /* --list --sweep LIST: the same; --impl filters; the sweeps alone without a sweep */
    const char *gemm[] = {"--list", "--sweep", "gemm", "--sizes", "gemm=64", "--backends", "cpu", "--impl", "cpu-om*,cpu-op*",
                          NULL};
    cr_assert_eq(run_bench(root, gemm, out, err, 60), 0, "%s", err);
    cr_assert(strstr(out, "gemm square cpu-omp cpu fp32 m=64 n=64 k=64 batch=1\n") &&
                  strstr(out, "--impl: cpu-omp, cpu-openblas\n") && !strstr(out, "cpu-naive"), "%s", out);
    const char *plain[] = {"--list", NULL};
    cr_assert_eq(run_bench(root, plain, out, err, 60), 0, "%s", err);
    cr_assert(strstr(out, "gemm ") && strstr(out, "ops ") && !strstr(out, "rows;"), "%s", out);
    const char *both[] = {"--list", "gemm", "--sweep", "ops", NULL};
    cr_assert_eq(run_bench(root, both, out, err, 60), 2, "%s", err);
    const char *unknown[] = {"--list", "nope", NULL};
    cr_assert_eq(run_bench(root, unknown, out, err, 60), 2, "%s", err);
    cr_assert(strstr(err, "unknown sweep 'nope'"), "%s", err);
    remove_dir(root);
}
