/* test_bench_select.c: choosing what bench runs (--shapes, --case, --impl,
 * --sizes SWEEP=), --version, and the summary's provenance: which run,
 * machine and commit each CSV comes from, and a folder that mixes runs. */
#include <string.h>

#include "shell_util.h"

/* the data lines of DIR/NAME.csv (no '#' lines, no header) */
static int data_lines(const char *dir, const char *name, char *out, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -v '^#' '%s/%s.csv' | tail -n +2", dir, name);
    sh(cmd, out, n);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    return lines;
}

Test(bench_select, user_gemm_shapes_with_transposes_are_run_and_checked) {
    char dir[] = "/tmp/dg-select-XXXXXX", out[8192], err[8192], rows[8192];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "gemm", "--backends", "cpu", "--shapes", "33x17x9:TN,8x40x24:NT,5x6x7",
                          "--impl", "cpu-omp,cpu-openblas", "--min-time", "0", "--reps", "2", "--max-cv", "0",
                          "--cpu-cap", "86400", "--out", dir, NULL};
    int rc = run_bench(dir, args, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert_eq(data_lines(dir, "gemm", rows, sizeof rows), 6, "3 shapes x 2 impls:\n%s", rows);
    cr_assert(strstr(rows, "gemm,user-TN,cpu-omp,cpu,fp32,33,17,9,"), "%s", rows);
    cr_assert(strstr(rows, "gemm,user-NT,cpu-openblas,cpu,fp32,8,40,24,"), "%s", rows);
    cr_assert(strstr(rows, "gemm,user-NN,cpu-omp,cpu,fp32,5,6,7,"), "%s", rows);
    cr_assert_null(strstr(rows, "wrong"), "a transposed product failed its check:\n%s", rows);
    cr_assert_null(strstr(rows, "cpu-naive"), "--impl left cpu-naive out:\n%s", rows);
    remove_dir(dir);
}

Test(bench_select, case_and_impl_patterns_and_per_sweep_sizes_choose_the_rows) {
    char dir[] = "/tmp/dg-select-XXXXXX", out[8192], err[8192], rows[8192];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "ops,gemm", "--backends", "cpu", "--case", "relu,soft*,square", "--impl",
                          "*-fwd,cpu-omp", "--sizes", "ops=4096", "--sizes", "64", "--min-time", "0", "--reps", "2",
                          "--max-cv", "0", "--cpu-cap", "86400", "--out", dir, NULL};
    int rc = run_bench(dir, args, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    int n = data_lines(dir, "ops", rows, sizeof rows);
    cr_assert_eq(n, 3, "relu, softmax, softmax_ce forward at 4096:\n%s", rows);
    cr_assert(strstr(rows, "ops,relu,cpu-fwd,cpu,fp32,4096,") && strstr(rows, "ops,softmax,cpu-fwd") &&
              strstr(rows, "ops,softmax_ce,cpu-fwd"), "%s", rows);
    cr_assert_null(strstr(rows, "-bwd"), "%s", rows);
    n = data_lines(dir, "gemm", rows, sizeof rows);
    cr_assert_eq(n, 1, "one square 64 by cpu-omp (the other --sizes):\n%s", rows);
    cr_assert(strstr(rows, "gemm,square,cpu-omp,cpu,fp32,64,64,64,"), "%s", rows);
    remove_dir(dir);
}

Test(bench_select, version_names_the_commit_it_was_built_from) {
    char out[1024], err[1024];
    const char *args[] = {"--version", NULL};
    cr_assert_eq(run_bench("/tmp", args, out, err, 30), 0);
    cr_assert(strstr(out, "duograd bench ") && strstr(out, "(commit "), "%s", out);
}

Test(bench_select, every_subcommand_has_help) {
    const char *subs[] = {"plot", "compare", "train"};
    for (int i = 0; i < 3; i++) {
        char out[8192], err[1024];
        const char *args[] = {subs[i], "--help", NULL};
        int rc = run_bench("/tmp", args, out, err, 30);
        cr_assert_eq(rc, 0, "bench %s --help: exit %d: %s", subs[i], rc, err);
        cr_assert(strstr(out, "usage: bench ") && strstr(out, subs[i]), "bench %s --help: %s", subs[i], out);
    }
}

/* a minimal sweep CSV whose metadata names a run */
static void fake_csv(const char *dir, const char *name, const char *date, const char *commit) {
    char path[512], text[1024];
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    snprintf(text, sizeof text,
             "# date: %s\n# git commit: %s\n# cpu: test cpu\n# gpu: none\n"
             "sweep,case,impl,backend,m,n,k,batch,transfer,median_ms,min_ms,max_ms,status\n"
             "%s,square,cpu-omp,cpu,64,64,64,1,0,1.0,0.9,1.1,ok\n"
             "%s,square,cpu-omp,cpu,128,128,128,1,0,2.0,1.9,9.0,noisy\n",
             date, commit, name, name);
    write_file(path, text);
}

Test(bench_select, the_summary_names_each_files_run_and_a_mixed_folder_says_so) {
    char dir[] = "/tmp/dg-select-XXXXXX", out[16384], err[4096], path[256];
    tmp_dir(dir);
    fake_csv(dir, "gemm", "2026-01-01T00:00:00Z", "aaaaaaa");
    fake_csv(dir, "ops", "2026-01-01T00:00:00Z", "aaaaaaa");
    const char *args[] = {"plot", dir, NULL};
    run_bench(dir, args, out, err, 60);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = read_file(path);
    cr_assert(strstr(sum, "| gemm.csv | 2026-01-01T00:00:00Z | aaaaaaa | test cpu | none | 2 | 1 | 1 | 0 | 0 |"),
              "%s", sum);
    cr_assert_null(strstr(sum, "mixes"), "one run: %s", sum);
    free(sum);
    fake_csv(dir, "ops", "2026-02-02T00:00:00Z", "bbbbbbb-dirty");
    run_bench(dir, args, out, err, 60);
    sum = read_file(path);
    cr_assert(strstr(sum, "This folder mixes 2 runs"), "%s", sum);
    cr_assert(strstr(err, "mixes 2 runs"), "stderr: %s", err);
    free(sum);
    remove_dir(dir);
}
