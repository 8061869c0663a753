/* test_bench.c: the bench CLI (good and bad input), its statistics, the CSV
 * writer and reader, and `bench plot` on the committed results: the same
 * summary.md and chart scripts as committed. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend/cpu_backend.h"
#include "writers/csv.h"
#include "charts/gnuplot.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"
#include "runner/timing.h"

static void expect_usage_error(const char *args, const char *needle) {
    char cmd[512], out[8192];
    snprintf(cmd, sizeof cmd, "%s %s", DG_BENCH_PATH, args);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 2, "bench %s: exit %d, want 2; output: %s", args, rc, out);
    cr_assert(strstr(out, needle), "bench %s: output lacks '%s': %s", args, needle, out);
}

Test(bench_cli, bad_input_is_a_usage_error) {
    expect_usage_error("--no-such-flag", "unknown");
    expect_usage_error("--sizes 64,abc", "bad --sizes");
    expect_usage_error("--sizes 0", "bad --sizes");
    expect_usage_error("--sizes 4096:64", "bad --sizes");
    expect_usage_error("--threads -3", "bad --threads");
    expect_usage_error("--reps 0", "bad --reps");
    expect_usage_error("--sweep gemm,nope", "unknown sweep 'nope'");
    expect_usage_error("--backends cpu,tpu", "unknown backend 'tpu'");
    expect_usage_error("extra", "unexpected argument");
    expect_usage_error("plot", "plot takes one folder");
    expect_usage_error("compare onlyone", "compare takes two folders");
    expect_usage_error("train --model resnet50", "bad --model");
    expect_usage_error("train --batch 0", "bad --batch");
}

Test(bench_cli, help_and_lists) {
    char cmd[512], out[16384];
    snprintf(cmd, sizeof cmd, "%s --help", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0);
    cr_assert(strstr(out, "--sweep") && strstr(out, "--min-time") && strstr(out, "bench plot DIR"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s --list", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0);
    cr_assert(strstr(out, "gemm") && strstr(out, "autodiff") && strstr(out, "train"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s --list-ops", DG_BENCH_PATH);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "an op lacks support: %s", out);
    cr_assert(strstr(out, "softmax_cross_entropy") && strstr(out, "36 forward ops"), "%s", out);
}

Test(bench_cli, missing_inputs_fail_cleanly) {
    char cmd[512], out[8192];
    snprintf(cmd, sizeof cmd, "%s plot /nonexistent/dir", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "no bench CSV files"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s train --data /nonexistent/fashion", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "dataset-fashion-mnist"), "%s", out);
}

/* the rows and folders a failed assertion leaves: released */
TestSuite(bench_cli, .fini = held_release);

/* `bench --sweep gemm --backends cpu --reps 2 --min-time 0 FLAGS --out
 * dir` (asserted to exit 0), then dir/gemm.csv's rows (n of them, held);
 * --cpu-cap at its largest: no row skipped because the build is slow */
static csv_rec *cpu_gemm_sweep(const char *dir, const char *flags, int *n) {
    char cmd[512], out[16384], path[256];
    snprintf(cmd, sizeof cmd, "%s --sweep gemm --backends cpu --reps 2 --min-time 0 --cpu-cap 86400 %s --out %s",
             DG_BENCH_PATH, flags, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    csv_rec *r = held_ptr(bench_csv_read(path, n));
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

Test(bench_cli, a_small_sweep_writes_checked_rows) {
    char dir[] = "/tmp/dg-bench-XXXXXX", path[256];
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = cpu_gemm_sweep(dir, "--sizes 32,48", &n);
    int impls = 3 + dg_cpu_has_onednn(); /* naive, omp, openblas (, onednn) */
    cr_assert_eq(n, 2 * impls, "%d CPU implementations x 2 sizes, got %d rows", impls, n);
    for (int i = 0; i < n; i++) {
        /* noisy: checked and timed, its spread above --max-cv (a loaded machine) */
        cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "status %s", r[i].status);
        cr_assert_str_eq(r[i].check, "f64-freivalds");
        cr_assert(r[i].max_rel_err < 1e-4 && r[i].median_ms > 0 && r[i].reps >= 2);
        cr_assert(fabs(r[i].gflops - 2.0 * r[i].m * r[i].n * r[i].k / (r[i].median_ms * 1e6)) < 1e-3 * r[i].gflops);
        cr_assert_eq(r[i].cold, 0, "a hot row says cold");
    }
    snprintf(path, sizeof path, "%s/summary.md", dir);
    cr_assert_eq(access(path, R_OK), 0, "no summary.md");
}

Test(bench_cli, a_cold_cpu_sweep_says_so_in_its_rows) {
    char dir[] = "/tmp/dg-bench-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = cpu_gemm_sweep(dir, "--sizes 32 --cold", &n);
    cr_assert_eq(n, 3 + dg_cpu_has_onednn(), "3 CPU implementations (and oneDNN), got %d rows", n);
    for (int i = 0; i < n; i++) cr_assert_eq(r[i].cold, 1, "%s: a row timed after a flush says hot", r[i].impl);
}

Test(bench_stats, median_min_max_cv) {
    double odd[5] = {5, 1, 4, 2, 3};
    bench_stats s = bench_stats_of(odd, 5);
    cr_assert(s.median_ms == 3 && s.min_ms == 1 && s.max_ms == 5 && s.reps == 5);
    cr_assert_float_eq(s.cv_pct, 100.0 * sqrt(2.5) / 3.0, 1e-9);
    double even[4] = {4, 1, 3, 2};
    s = bench_stats_of(even, 4);
    cr_assert(s.median_ms == 2.5 && s.min_ms == 1 && s.max_ms == 4);
    double one[1] = {7};
    s = bench_stats_of(one, 1);
    cr_assert(s.median_ms == 7 && s.cv_pct == 0);
    s = bench_stats_of(one, 0);
    cr_assert(isnan(s.median_ms));
}

Test(bench_csv, write_then_read_back_and_reject_malformed) {
    char dir[] = "/tmp/dg-csv-XXXXXX";
    tmp_dir(dir);
    FILE *f = bench_csv_open(dir, "unit", "# meta: yes\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f);
    bench_row ok = {.sweep = "unit", .name = "sq", .impl = "cpu-x", .backend = "cpu", .m = 8, .n = 9, .k = 10,
                    .batch = 1, .threads = 2, .warmup = 1, .st = {2.0, 1.0, 3.0, 10.0, 5}, .flops = 4e6,
                    .bytes = 2e6, .scratch_bytes = 3LL << 32, .arena_bytes = 12345, .live_bytes = 999, .max_rel_err = 1e-7,
                    .status = "ok"};
    bench_row bad = ok;
    bad.status = "oom";
    bad.st = BENCH_NO_STATS;
    bench_csv_write(f, &ok);
    bench_csv_write(f, &bad);
    ASSERT_OK(bench_csv_finish(f, dir, "unit", true));
    char path[256];
    snprintf(path, sizeof path, "%s/unit.csv", dir);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 2);
    cr_assert(r[0].median_ms == 2.0 && r[0].gflops == 2.0 && r[0].gbps == 1.0 && r[0].m == 8 && r[0].k == 10);
    cr_assert(r[0].scratch_bytes == 3LL << 32 && r[0].arena_bytes == 12345 && r[0].live_bytes == 999,
              "memory columns: %lld %lld %lld", r[0].scratch_bytes, r[0].arena_bytes, r[0].live_bytes);
    cr_assert_str_eq(r[1].status, "oom");
    cr_assert(isnan(r[1].median_ms) && isnan(r[1].gflops) && r[1].reps == 0);
    free(r);
    f = fopen(path, "a");
    fprintf(f, "unit,sq,cpu-x,cpu,f32,1,2\n"); /* a truncated row */
    fclose(f);
    cr_assert_null(bench_csv_read(path, &n));
    cr_assert(strstr(dg_last_error(), "fields"), "%s", dg_last_error());
    remove_dir(dir);
}

/* The charts of reports/h100 are not committed: bench plot draws them again
 * from what is (the CSV files and the profiles' JSON). Every chart the folders
 * merged into reports/h100 held when charts were committed (commit 238ab47)
 * must come back, and the chart scripts and data must not depend on the
 * folder's name or on the run: two copies under different names give the
 * same plot-data byte for byte. */
static void copy_h100_sources(const char *dir) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "cp %s/reports/h100/*.csv %s/reports/h100/profile-*.json %s/", DG_SOURCE_DIR,
             DG_SOURCE_DIR, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
}

Test(bench_plot, redraws_every_h100_chart_from_the_committed_sources) {
    char dir[] = "/tmp/dg-plot-XXXXXX", twin[] = "/tmp/dg-plot-other-name-XXXXXX", cmd[1024], out[1 << 16];
    tmp_dir(dir);
    copy_h100_sources(dir);
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    /* both backends were measured there, so every crossover is a size, not n/a */
    const char *k = strstr(out, "| kernels only | fp32 | ");
    cr_assert(k && k[24] >= '0' && k[24] <= '9', "no GEMM crossover size in: %s", out);
    cr_assert(strstr(out, "| mlp | gpu | 10 | "), "no training curve summary in: %s", out);
    cr_assert(!strstr(out, "| kernels only | n/a"), "%s", out);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        /* the charts committed in reports/h100, -cnn, -resnet, -attention,
         * -charlm and -profile at 238ab47 */
        static const char *const charts[] = {
            "autodiff_time", "gemm_gflops", "gemm_speedup", "gemm_time", "mlp_time_0", "mlp_time_1", "ops_gbps",
            "ops_speedup", "train_epoch_time", "train_logreg_acc", "train_logreg_acc_time", "train_logreg_loss",
            "train_mlp_acc", "train_mlp_acc_time", "train_mlp_loss", "transfer_gbps", "train_cnn_acc",
            "train_cnn_acc_time", "train_cnn_loss", "conv_gflops_fwd", "conv_gflops_bwd-data",
            "conv_gflops_bwd-weight", "resnet_cifar", "resnet_imagenet", "profile-mlp-ops", "profile-mlp-live",
            "profile-mlp-roofline-cpu", "profile-mlp-roofline-gpu", "profile-cnn-ops", "profile-resnet18-cifar-ops",
            "profile-resnet18-ops", "profile-charlm-ops", "profile-charlm-composed-ops",
            "profile-charlm-composed-roofline-gpu"};
        int n_charts = (int)(sizeof charts / sizeof *charts);
        for (int i = 0; i < n_charts; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.png", dir, charts[i]);
            cr_assert_eq(access(path, R_OK), 0, "%s.png not drawn", charts[i]);
            snprintf(path, sizeof path, "%s/%s.svg", dir, charts[i]);
            cr_assert_eq(access(path, R_OK), 0, "%s.svg not drawn", charts[i]);
        }
        /* the same sources under another name: the same scripts and data,
         * none of which names its folder (gnuplot runs inside it) */
        tmp_dir(twin);
        copy_h100_sources(twin);
        snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, twin);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
        char pd[1100];
        snprintf(pd, sizeof pd, "%s/plot-data", dir);
        DIR *d = opendir(pd);
        cr_assert_not_null(d);
        int files = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            char path[1400];
            snprintf(path, sizeof path, "%s/plot-data/%s", dir, e->d_name);
            char *got = read_file(path);
            snprintf(path, sizeof path, "%s/plot-data/%s", twin, e->d_name);
            char *again = read_file(path);
            cr_assert_null(strstr(got, dir), "plot-data/%s names the result folder", e->d_name);
            cr_assert_str_eq(got, again, "plot-data/%s depends on the folder's name or the run", e->d_name);
            free(got);
            free(again);
            files++;
        }
        closedir(d);
        /* reports/h100 alone held 90 plot-data files at 238ab47 */
        cr_assert_gt(files, 90, "only %d plot-data files", files);
        remove_dir(twin);
    }
    remove_dir(dir);
}

/* summary.md is not committed beside the results either; the summaries of
 * three sets of older CSV files are kept under tests/data/summaries/ as the
 * expected text (rewritten where the report's layout changed on purpose:
 * the precision axis's dtype columns): bench plot (here without gnuplot, so
 * no chart is drawn) must write them byte for byte, plus the note that
 * charts were not drawn. */
Test(bench_plot, reproduces_the_summaries_an_older_bench_wrote) {
    /* cpu-2core-run1: the default sweeps and training on the CPU alone (the
     * 2-core folder of 3a96ec5, kept as test input);
     * h100-transfer: the transfer ceilings (PyTorch's beside them, from
     * torch_ops.csv) and the gemm copies' table; h100-run1: the CSV of the
     * first bench, with fewer columns */
    static const struct {
        const char *csv, *summary;
    } sets[] = {
        {"tests/data/cpu-2core-run1", "cpu-2core.md"},
        {"reports/h100/transfer", "h100-transfer.md"},
        {"tests/data/h100-run1", "h100-run1.md"},
    };
    for (int i = 0; i < 3; i++) {
        char dir[] = "/tmp/dg-sum-XXXXXX", cmd[1024], out[1 << 16], path[512];
        tmp_dir(dir);
        snprintf(cmd, sizeof cmd, "cp %s/%s/*.csv %s/ && env PATH=/nonexistent %s plot %s", DG_SOURCE_DIR,
                 sets[i].csv, dir, DG_BENCH_PATH, dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
        snprintf(path, sizeof path, "%s/tests/data/summaries/%s", DG_SOURCE_DIR, sets[i].summary);
        char *want = read_file(path);
        snprintf(path, sizeof path, "%s/summary.md", dir);
        char *got = read_file(path);
        size_t n = strlen(want);
        cr_assert(strncmp(got, want, n) == 0, "%s: summary.md differs from %s:\n%s", sets[i].csv, sets[i].summary,
                  got);
        cr_assert(strncmp(got + n, "Charts were not drawn", 21) == 0, "%s: ends with: %s", sets[i].csv, got + n);
        free(want);
        free(got);
        remove_dir(dir);
    }
}

/* Titles reach gnuplot as single-quoted strings: a quote, backquotes, a
 * macro, a newline and a shell command stay text, and gnuplot accepts the
 * script. */
Test(bench_plot, hostile_titles_are_quoted_for_gnuplot) {
    static const char *const titles[] = {"it's", "`touch PWNED`", "@cmd", "two\nlines", "x' ; system('touch PWNED') ; '"};
    char dir[] = "/tmp/dg-quote-XXXXXX", path[512];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/t.gp", dir);
    FILE *g = fopen(path, "w");
    cr_assert_not_null(g);
    fprintf(g, "cmd = \"system('touch PWNED')\"\nset terminal dumb\nset output 'out.txt'\n");
    for (size_t i = 0; i < sizeof titles / sizeof *titles; i++) {
        fprintf(g, "set title ");
        bench_gnuplot_quote(g, titles[i]);
        fprintf(g, "\n");
    }
    fprintf(g, "plot x title ");
    bench_gnuplot_quote(g, titles[0]);
    fprintf(g, "\n");
    fclose(g);
    char *script = read_file(path);
    cr_assert(strstr(script, "set title 'it''s'\n") && strstr(script, "set title 'two?lines'\n"), "%s", script);
    free(script);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        char cmd[1024], out[4096];
        snprintf(cmd, sizeof cmd, "cd %s && gnuplot t.gp && ls", dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "gnuplot refused the quoted titles: %s", out);
        cr_assert_null(strstr(out, "PWNED"), "a title ran a command: %s", out);
    }
    remove_dir(dir);
}

/* bench plot's scaling report: duograd's efficiency tables, and PyTorch
 * DDP's rows (bench/peers/torch_ddp.py) beside them when the file has them */
Test(bench_plot, scaling_report_sets_pytorch_ddp_beside_duograd) {
    char dir[] = "/tmp/dg-scaling-XXXXXX";
    tmp_dir(dir);
    FILE *f = bench_csv_open(dir, "scaling", "# rows written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    /* weak: 1024 examples per GPU; strong: 2048 split */
    static const struct { const char *name, *impl; int gpus, per; double ms; } rows[] = {
        {"mlp-weak", "gpu-dp", 1, 1024, 1.0},      {"mlp-weak", "gpu-dp", 2, 1024, 1.25},
        {"mlp-strong", "gpu-dp", 1, 2048, 2.0},    {"mlp-strong", "gpu-dp", 2, 1024, 1.25},
        {"mlp-weak", "torch-ddp", 1, 1024, 2.0},   {"mlp-weak", "torch-ddp", 2, 1024, 4.0},
        {"mlp-strong", "torch-ddp", 1, 2048, 4.0}, {"mlp-strong", "torch-ddp", 2, 1024, 2.5},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        double ms = rows[i].ms;
        bench_row r = {.sweep = "scaling", .name = rows[i].name, .impl = rows[i].impl, .backend = "gpu",
                       .m = rows[i].gpus, .n = rows[i].per, .k = 4000000, .batch = rows[i].gpus * rows[i].per,
                       .st = {ms, ms, ms, 0, 5, NULL, 0, false}, .max_rel_err = 1e-7, .check = "dp=mean-of-slices",
                       .status = "ok"};
        bench_csv_write(f, &r);
    }
    ASSERT_OK(bench_csv_finish(f, dir, "scaling", true));
    char *sum = plot_summary(dir);
    /* duograd: weak 1/1.25 = 80%, strong 2/(2 x 1.25) = 80%; PyTorch: weak
     * 2/4 = 50%, strong 4/(2 x 2.5) = 80% */
    cr_assert(strstr(sum, "| mlp | fp32 | 2 | 2048 | 1.250 | 1638400 | 80.0% | 20.0% | 1024 | 1.250 | 80.0% | 4.0 |"),
              "summary: %s", sum);
    cr_assert(strstr(sum, "| mlp | fp32 | 1 | 1.000 | 2.000 | 100.0% | 100.0% | 2.000 | 4.000 | 100.0% | 100.0% |"),
              "summary: %s", sum);
    cr_assert(strstr(sum, "| mlp | fp32 | 2 | 1.250 | 4.000 | 80.0% | 50.0% | 1.250 | 2.500 | 80.0% | 80.0% |"),
              "summary: %s", sum);
    free(sum);
    remove_dir(dir);
}

/* bench plot's scaling report of the CPU ranks (sweep_scaling_mpi.c): one
 * row per rank count, blocking and overlapped side by side, each
 * efficiency against one rank's blocking row; no GPU table without GPU rows */
Test(bench_plot, scaling_report_sets_the_cpu_ranks_blocking_beside_overlapped) {
    char dir[] = "/tmp/dg-scaling-XXXXXX";
    tmp_dir(dir);
    FILE *f = bench_csv_open(dir, "scaling", "# rows written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    /* weak: 128 examples per rank; strong: 256 split */
    static const struct { const char *name, *impl; int ranks, per; double ms; } rows[] = {
        {"mlp-weak", "cpu-mpi", 1, 128, 10.0},         {"mlp-strong", "cpu-mpi", 1, 256, 20.0},
        {"mlp-weak", "cpu-mpi", 2, 128, 20.0},         {"mlp-weak", "cpu-mpi-overlap", 2, 128, 12.5},
        {"mlp-strong", "cpu-mpi", 2, 128, 20.0},       {"mlp-strong", "cpu-mpi-overlap", 2, 128, 12.5},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        double ms = rows[i].ms;
        bench_row r = {.sweep = "scaling", .name = rows[i].name, .impl = rows[i].impl, .backend = "cpu",
                       .m = rows[i].ranks, .n = rows[i].per, .k = 2678824, .batch = rows[i].ranks * rows[i].per,
                       .threads = 1, .st = {ms, ms, ms, 0, 5, NULL, 0, false}, .max_rel_err = 1e-7,
                       .check = "mpi=one-process", .status = "ok"};
        bench_csv_write(f, &r);
    }
    ASSERT_OK(bench_csv_finish(f, dir, "scaling", true));
    char *sum = plot_summary(dir);
    /* weak 10/20 = 50% blocking, 10/12.5 = 80% overlapped; strong 20/(2 x 20)
     * = 50%, 20/(2 x 12.5) = 80% */
    cr_assert(strstr(sum, "| mlp | fp32 | 1 | 10.000 | - | 100.0% | - | 20.000 | - | 100.0% | - |"), "summary: %s", sum);
    cr_assert(strstr(sum, "| mlp | fp32 | 2 | 20.000 | 12.500 | 50.0% | 80.0% | 20.000 | 12.500 | 50.0% | 80.0% |"),
              "summary: %s", sum);
    cr_assert_null(strstr(sum, "Training steps on several GPUs"), "a GPU table without GPU rows: %s", sum);
    free(sum);
    remove_dir(dir);
}

/* rows of the scaling sweep written by hand into DIR/FILE.csv */
typedef struct scaling_row { const char *name, *impl, *backend; int m, per; long long k; double ms; } scaling_row;
static void write_scaling(const char *dir, const char *file, const scaling_row *rows, size_t n) {
    FILE *f = bench_csv_open(dir, file, "# rows written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    for (size_t i = 0; i < n; i++) {
        double ms = rows[i].ms;
        bench_row r = {.sweep = "scaling", .name = rows[i].name, .impl = rows[i].impl, .backend = rows[i].backend,
                       .m = rows[i].m, .n = rows[i].per, .k = rows[i].k, .batch = rows[i].m * rows[i].per,
                       .threads = 1, .st = {ms, ms, ms, 0, 5, NULL, 0, false}, .max_rel_err = 1e-7,
                       .check = "mpi=one-process", .status = "ok"};
        bench_csv_write(f, &r);
    }
    ASSERT_OK(bench_csv_finish(f, dir, file, true));
}

/* "How many CPU ranks equal one GPU": the CPU ranks' scaling.csv with a
 * GPU run's copied in as scaling-gpu.csv; only rows of the same case,
 * model (gradient bytes) and global batch meet; measured where a rank
 * count reaches the GPU, extrapolated (and said so) from the largest
 * count's samples/s per rank otherwise; without GPU rows, a line saying
 * what to copy in */
Test(bench_plot, scaling_report_counts_the_cpu_ranks_one_gpu_equals) {
    char dir[] = "/tmp/dg-scaling-XXXXXX";
    tmp_dir(dir);
    static const scaling_row cpu[] = {
        {"mlp-weak", "cpu-mpi", "cpu", 1, 128, 2678824, 10.0},
        {"mlp-weak", "cpu-mpi", "cpu", 2, 128, 2678824, 20.0},
        {"mlp-weak", "cpu-mpi-overlap", "cpu", 2, 128, 2678824, 12.5},
        {"mlp-strong", "cpu-mpi", "cpu", 1, 256, 2678824, 20.0},
        {"mlp-strong", "cpu-mpi", "cpu", 2, 128, 2678824, 20.0},
        {"mlp-strong", "cpu-mpi-overlap", "cpu", 2, 128, 2678824, 12.5},
    };
    write_scaling(dir, "scaling", cpu, sizeof cpu / sizeof *cpu);
    char *sum = plot_summary(dir);
    cr_assert(strstr(sum, "How many CPU ranks equal one GPU: not answered here: no one-GPU rows (copy a GPU run's "
                          "scaling.csv in as scaling-gpu.csv)."), "summary: %s", sum);
    free(sum);
    /* weak at 256: the GPU 20 ms (12800/s), 2 ranks 12.5 ms (20480/s);
     * strong at 256: the GPU 1 ms (256000/s), 1 rank 20 ms (12800/s), 2
     * ranks 12.5 ms (20480/s, 10240 per rank: 25 ranks extrapolated); a
     * larger model's GPU row (other gradient bytes) meets nothing */
    static const scaling_row gpu[] = {
        {"mlp-weak", "gpu-dp", "gpu", 1, 256, 2678824, 20.0},
        {"mlp-strong", "gpu-dp", "gpu", 1, 256, 2678824, 1.0},
        {"mlp-strong", "gpu-dp", "gpu", 1, 256, 16000000, 0.5},
    };
    write_scaling(dir, "scaling-gpu", gpu, sizeof gpu / sizeof *gpu);
    sum = plot_summary(dir);
    cr_assert(strstr(sum, "| mlp-weak | fp32 | 256 | 2 | 20480 | 12800 | 0.62 |\n\nmlp-weak, fp32, global batch 256: 2 CPU ranks "
                          "equal one GPU (measured: 20480 samples/s against 12800)."), "summary: %s", sum);
    cr_assert(strstr(sum, "| mlp-strong | fp32 | 256 | 1 | 12800 | 256000 | 20.00 |\n| mlp-strong | fp32 | 256 | 2 | 20480 | "
                          "256000 | 12.50 |\n\nmlp-strong, fp32, global batch 256: about 25 CPU ranks equal one GPU "
                          "(extrapolated, not measured: 2 ranks give 20480 samples/s, 10240 per rank, against the "
                          "GPU's 256000;"), "summary: %s", sum);
    cr_assert_null(strstr(sum, "512000"), "the larger model's GPU row met the CPU ranks: %s", sum);
    cr_assert_null(strstr(sum, "not answered here"), "summary: %s", sum);
    free(sum);
    remove_dir(dir);
}
