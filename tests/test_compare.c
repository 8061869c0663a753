/* test_compare.c: the statistics of bench compare (Mann-Whitney U and the
 * geometric mean, against scipy) and the `bench compare` CLI on folders
 * written from synthetic rows: its verdicts, exit codes, --out, and that it
 * writes nothing into the folders it reads. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writers/csv.h"
#include "writers/json.h"
#include "shell_util.h"
#include "runner/stats.h"

/* Reference values from scipy 1.10.1 (Debian python3-scipy), the function
 * Google Benchmark's compare.py calls:
 *
 *   from scipy.stats import mannwhitneyu, gmean
 *   for a, b in CASES:  # the arrays below
 *       r = mannwhitneyu(a, b, alternative='two-sided')
 *       print(repr(float(r.statistic)), repr(float(r.pvalue)))
 *   print(gmean([0.5, 2.0, 1.5, 1.1]), gmean([1.25]*7 + [0.8]*3))
 */
typedef struct utest_case {
    const char  *what;
    double       a[12], b[12];
    int          na, nb;
    double       u, p;
    bool         exact;
} utest_case;

static const utest_case utest_cases[] = {
    {"exact, apart", {1.0, 1.2, 0.9, 1.1, 1.05}, {1.3, 1.4, 1.25, 1.5, 1.35}, 5, 5, 0.0, 0.007936507936507936, true},
    {"exact, overlapping", {3, 1, 4, 1.5, 5}, {9, 2, 6, 5.5, 3.5, 8}, 5, 6, 5.0, 0.08225108225108226, true},
    {"exact, 3 against 12", {2.5, 7.5, 11.5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 12, 20.0,
     0.8395604395604395, true},
    {"normal, 12 against 10", {1.01, 1.03, 0.98, 1.07, 1.02, 0.99, 1.05, 1.00, 1.04, 0.97, 1.06, 1.08},
     {1.06, 1.09, 1.10, 1.04, 1.12, 1.11, 1.07, 1.13, 1.08, 1.15}, 12, 10, 9.0, 0.0008571807198740303, false},
    {"ties, small: normal", {1, 2, 2, 3, 3, 3}, {2, 3, 4, 4, 5}, 6, 5, 5.5, 0.08871369199677616, false},
    {"ties, large", {1, 1, 2, 2, 2, 3, 3, 4, 4, 5}, {2, 3, 3, 4, 4, 4, 5, 5, 6, 6, 7}, 10, 11, 21.5,
     0.018309776009175376, false},
    {"all equal", {2, 2, 2}, {2, 2, 2, 2}, 3, 4, 6.0, 1.0, false},
};

Test(bench_stats, mann_whitney_u_matches_scipy) {
    for (size_t i = 0; i < sizeof utest_cases / sizeof *utest_cases; i++) {
        const utest_case *c = &utest_cases[i];
        bench_utest u;
        cr_assert_eq(bench_mann_whitney(c->a, c->na, c->b, c->nb, &u), DG_OK, "%s: %s", c->what, dg_last_error());
        cr_expect_float_eq(u.u, c->u, 1e-9, "%s: U %.17g, scipy %.17g", c->what, u.u, c->u);
        cr_expect_float_eq(u.p, c->p, 1e-12, "%s: p %.17g, scipy %.17g", c->what, u.p, c->p);
        cr_expect_eq(u.exact, c->exact, "%s: exact %d", c->what, u.exact);
        /* the test is symmetric: b against a has the same p */
        cr_assert_eq(bench_mann_whitney(c->b, c->nb, c->a, c->na, &u), DG_OK);
        cr_expect_float_eq(u.p, c->p, 1e-12, "%s, swapped: p %.17g", c->what, u.p);
    }
}

Test(bench_stats, no_test_below_two_repetitions_a_side) {
    const double a[] = {1, 2, 3}, b[] = {4};
    bench_utest u;
    cr_assert_eq(bench_mann_whitney(a, 3, b, 1, &u), DG_ERR_INVALID);
    cr_assert_eq(bench_mann_whitney(b, 1, a, 3, &u), DG_ERR_INVALID);
}

Test(bench_stats, geometric_mean_matches_scipy) {
    const double v[] = {0.5, 2.0, 1.5, 1.1}, w[] = {1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 0.8, 0.8, 0.8};
    cr_assert_float_eq(bench_geomean(v, 4), 1.1333681034273522, 1e-14);
    cr_assert_float_eq(bench_geomean(w, 10), 1.0933620739432781, 1e-14);
    cr_assert(isnan(bench_geomean(v, 0)));
    const double bad[] = {1.0, 0.0};
    cr_assert(isnan(bench_geomean(bad, 2)));
}

/* ---- bench compare on folders written from synthetic rows ---- */

#define META "# duograd bench test\n# date: 2030-01-01T00:00:00Z\n"

/* ten repetitions around 1 ms, spread 0.9 .. 1.9 apart by 0.1 */
static const double base[10] = {1.0, 1.9, 1.2, 1.7, 1.4, 1.1, 1.8, 1.3, 1.6, 1.5};

static bench_row row_of(int64_t m, const double *v, int n, const char *status, const char *note) {
    bench_row r = {.sweep = "gemm", .name = "square", .impl = "cpu-openblas", .backend = "cpu", .m = m, .n = m,
                   .k = m, .batch = 1, .threads = 2, .warmup = 1, .flops = 1e6, .max_rel_err = 1e-7,
                   .check = "f64-fwd", .status = status, .note = note};
    if (n > 0) {
        double sorted[64];
        memcpy(sorted, v, (size_t)n * sizeof *v);
        r.st = bench_stats_of(sorted, n);
        r.st.samples = v;
    } else {
        r.st = BENCH_NO_STATS;
    }
    return r;
}

/* DIR/NAME.csv and, when json, DIR/NAME.json from rows r[0..n), with metadata meta */
static void write_file_rows(const char *dir, const char *name, const char *meta, const bench_row *r, int n,
                            bool json) {
    FILE *csv = bench_csv_open(dir, name, meta, BENCH_CSV_HEADER);
    cr_assert_not_null(csv, "%s", dg_last_error());
    bench_json *j = json ? bench_json_open(meta) : NULL;
    for (int i = 0; i < n; i++) {
        bench_csv_write(csv, &r[i]);
        bench_json_add(j, &r[i]);
    }
    cr_assert_eq(bench_csv_finish(csv, dir, name, true), DG_OK, "%s", dg_last_error());
    if (j) cr_assert_eq(bench_json_finish(j, dir, name, true), DG_OK, "%s", dg_last_error());
}

/* DIR/gemm.csv and, when json, DIR/gemm.json from rows r[0..n) */
static void write_run(const char *dir, const bench_row *r, int n, bool json) {
    write_file_rows(dir, "gemm", META, r, n, json);
}

/* folders root/a and root/b: rows 64 (base in both), 128 (a128 in A, b128
 * in B) and 256 (ok in A, wrong in B) */
typedef struct runs {
    char root[32], a[64], b[64];
} runs;

static void make_runs(runs *r, const double *a128, const double *b128, bool json) {
    snprintf(r->root, sizeof r->root, "/tmp/dg-cmp-XXXXXX");
    tmp_dir(r->root);
    snprintf(r->a, sizeof r->a, "%s/a", r->root);
    snprintf(r->b, sizeof r->b, "%s/b", r->root);
    cr_assert_eq(mkdir(r->a, 0755), 0);
    cr_assert_eq(mkdir(r->b, 0755), 0);
    bench_row a[] = {row_of(64, base, 10, "ok", NULL), row_of(128, a128, 10, "ok", NULL),
                     row_of(256, base, 10, "ok", NULL)};
    bench_row b[] = {row_of(64, base, 10, "ok", NULL), row_of(128, b128, 10, "ok", NULL),
                     row_of(256, base, 10, "wrong", "max_rel_err 0.5")};
    write_run(r->a, a, 3, json);
    write_run(r->b, b, 3, json);
}

/* base scaled by f */
static void scaled(double *out, double f) {
    for (int i = 0; i < 10; i++) out[i] = base[i] * f;
}

static int compare(const runs *r, const char *opt1, const char *opt2, char *out, char *err) {
    const char *args[8];
    int n = 0;
    args[n++] = "compare";
    if (opt1) args[n++] = opt1;
    if (opt2) args[n++] = opt2;
    args[n++] = r->a;
    args[n++] = r->b;
    args[n] = NULL;
    return run_bench(r->root, args, out, err, 60);
}

/* the table line of B's 128 row */
static const char *line_128(const char *out) {
    const char *line = strstr(out, "| gemm | square | cpu-openblas | cpu | fp32 | 128 |");
    cr_assert_not_null(line, "no 128 row in:\n%s", out);
    return line;
}

static bool line_says(const char *line, const char *what) {
    const char *end = strchr(line, '\n');
    const char *hit = strstr(line, what);
    return hit && (!end || hit < end);
}

Test(bench_compare, equal_runs_exit_0_and_every_row_is_the_same) {
    runs r;
    char out[4096], err[4096];
    make_runs(&r, base, base, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out, err);
    cr_assert(line_says(line_128(out), "| same"), "%s", out);
    cr_assert(line_says(line_128(out), "| 1.000 | 1 |"), "equal samples: ratio 1, p 1:\n%s", out);
    cr_assert(strstr(out, "geometric mean of the ratios B/A 1.0000"), "%s", out);
    remove_dir(r.root);
}

/* Two rows that differ only in their dtype are two rows: each pairs with
 * the row of its own precision, however the folders order them (with the
 * dtype out of the key, B's bf16 row paired with A's fp32 one, twice as
 * fast, and the run failed as a regression). */
Test(bench_compare, rows_differing_only_in_dtype_are_two_rows) {
    runs r;
    char out[8192], err[4096];
    snprintf(r.root, sizeof r.root, "/tmp/dg-cmp-XXXXXX");
    tmp_dir(r.root);
    snprintf(r.a, sizeof r.a, "%s/a", r.root);
    snprintf(r.b, sizeof r.b, "%s/b", r.root);
    cr_assert_eq(mkdir(r.a, 0755), 0);
    cr_assert_eq(mkdir(r.b, 0755), 0);
    double slow[10];
    scaled(slow, 2.0);
    bench_row fp32 = row_of(128, base, 10, "ok", NULL), bf16 = row_of(128, slow, 10, "ok", NULL);
    bf16.precision = DG_PREC_BF16;
    bench_row a[] = {fp32, bf16}, b[] = {bf16, fp32};
    write_run(r.a, a, 2, true);
    write_run(r.b, b, 2, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out, err);
    const char *l32 = strstr(out, "| gemm | square | cpu-openblas | cpu | fp32 | 128 |");
    const char *l16 = strstr(out, "| gemm | square | cpu-openblas | cpu | bf16 | 128 |");
    cr_assert(l32 && l16, "a row per dtype:\n%s", out);
    cr_assert(line_says(l32, "| 1.000 |") && line_says(l16, "| 1.000 |"), "%s", out);
    cr_assert(strstr(out, "| sweep | case | impl | backend | dtype | m |"), "%s", out);
    cr_assert(strstr(out, "gemm: 2 rows matched, 2 compared"), "%s", out);
    remove_dir(r.root);
}

Test(bench_compare, a_significant_regression_beyond_the_threshold_exits_3) {
    runs r;
    char out[4096], err[4096];
    double slow[10];
    scaled(slow, 3.0); /* every repetition of B above every one of A */
    make_runs(&r, base, slow, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 3, "exit %d\n%s\n%s", rc, out, err);
    cr_assert(line_says(line_128(out), "| 3.000 |"), "%s", out);
    cr_assert(line_says(line_128(out), "| slower"), "%s", out);
    cr_assert(strstr(err, "1 rows of B slower"), "%s", err);
    /* ratios 1 and 3: geometric mean sqrt(3) */
    cr_assert(strstr(out, "gemm: 3 rows matched, 2 compared, geometric mean of the ratios B/A 1.7321"), "%s", out);
    /* the same runs with a threshold of 250%: within it, same */
    rc = compare(&r, "--threshold", "250", out, err);
    cr_assert_eq(rc, 0, "exit %d with --threshold 250\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| same"), "%s", out);
    remove_dir(r.root);
}

Test(bench_compare, faster_is_not_a_regression) {
    runs r;
    char out[4096], err[4096];
    double fast[10];
    scaled(fast, 0.3);
    make_runs(&r, base, fast, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| faster"), "%s", out);
    remove_dir(r.root);
}

Test(bench_compare, a_significant_change_below_the_threshold_is_the_same) {
    runs r;
    char out[4096], err[4096];
    double tight[10], above[10]; /* every B repetition above every A one (p 0.00018), medians 4% apart */
    for (int i = 0; i < 10; i++) {
        tight[i] = 1.0 + 0.001 * i;
        above[i] = 1.04 + 0.001 * i;
    }
    make_runs(&r, tight, above, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| 1.040 | 0.000183 | same"), "%s", out);
    /* a threshold of 3%: the same rows are a regression */
    rc = compare(&r, "--threshold", "3", out, err);
    cr_assert_eq(rc, 3, "exit %d with --threshold 3\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| slower"), "%s", out);
    remove_dir(r.root);
}

Test(bench_compare, overlapping_noisy_samples_are_not_significant) {
    runs r;
    char out[4096], err[4096];
    /* base + 0.1 (median +6.9%): nine values tie with base's; scipy: U 40.5, p 0.4948 */
    const double noisy[10] = {1.1, 2.0, 1.3, 1.8, 1.5, 1.2, 1.9, 1.4, 1.7, 1.6};
    make_runs(&r, base, noisy, true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s", rc, out);
    const char *line = line_128(out);
    cr_assert(line_says(line, "| 1.069 | 0.495 | not significant"), "%s", out);
    remove_dir(r.root);
}

/* Without repetitions to test (a baseline of CSV files alone), the medians
 * decide: a 3x regression still exits 3, saying no U test was possible;
 * within the threshold the rows are the same and the exit 0. (Such rows
 * were "untested" and the exit 0 before.) */
Test(bench_compare, folders_without_json_compare_medians_and_fail_a_gross_regression) {
    runs r;
    char out[4096], err[4096];
    double slow[10];
    scaled(slow, 3.0);
    make_runs(&r, base, slow, false);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 3, "exit %d\n%s", rc, out);
    cr_assert(strstr(out, "gemm.csv (medians only, no U test)"), "%s", out);
    cr_assert(line_says(line_128(out), "| 3.000 | - | slower (no U test: CSV medians only)"), "%s", out);
    cr_assert(strstr(out, "judged by the medians alone (no U test) 1;"), "%s", out);
    cr_assert(strstr(err, "1 rows of B slower") && strstr(err, "medians alone"), "%s", err);
    rc = compare(&r, "--threshold", "250", out, err);
    cr_assert_eq(rc, 0, "exit %d with --threshold 250\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| same"), "%s", out);
    remove_dir(r.root);
}

/* A baseline with samples against one without (a CSV folder against a
 * JSON one) is judged on the medians too, either way round. */
Test(bench_compare, a_baseline_without_samples_still_fails_a_regression) {
    runs r;
    char out[4096], err[4096];
    double slow[10];
    scaled(slow, 3.0);
    make_runs(&r, base, slow, true);
    char path[128];
    snprintf(path, sizeof path, "%s/gemm.json", r.a); /* A: the CSV alone */
    cr_assert_eq(remove(path), 0);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 3, "exit %d\n%s", rc, out);
    cr_assert(line_says(line_128(out), "| slower (no U test: CSV medians only)"), "%s", out);
    remove_dir(r.root);
}

/* ---- one median per row: CSV, JSON and compare agree ---- */

/* 40 runs, 22 of 1 ms and 18 of 100 ms (the odd runs below 36): the
 * row's median is 1 ms, while each of the JSON's 16 repetitions (means of
 * 2 or 3 consecutive runs) holds a 100 ms run, so their median is above
 * 33 ms */
static void skewed_runs(double *v, int n) {
    for (int i = 0; i < n; i++) v[i] = i % 2 && i < 36 ? 100.0 : 1.0;
}

/* The same row read from NAME.csv (its median of all runs) and from
 * NAME.json (the repetitions are means of consecutive runs) compares as
 * ratio 1: the JSON's median is the CSV's. (With the JSON's median taken
 * from its block means, this row's ratio was far from 1.) */
Test(bench_compare, a_row_has_one_median_in_csv_and_json) {
    double v[40];
    skewed_runs(v, 40);
    runs r;
    char out[4096], err[4096];
    make_runs(&r, base, base, true);
    bench_row row = row_of(128, v, 40, "ok", NULL);
    cr_assert_eq(row.st.median_ms, 1.0, "the row's median: %g", row.st.median_ms);
    write_run(r.a, &row, 1, true); /* the same row: A's from its CSV alone, B's from its JSON alone */
    write_run(r.b, &row, 1, true);
    char path[128];
    snprintf(path, sizeof path, "%s/gemm.json", r.a);
    cr_assert_eq(remove(path), 0);
    snprintf(path, sizeof path, "%s/gemm.csv", r.b);
    cr_assert_eq(remove(path), 0);
    int n = 0;
    snprintf(path, sizeof path, "%s/gemm.json", r.b);
    bench_json_rec *back = bench_json_read(path, &n);
    cr_assert(back && n == 1, "%s", dg_last_error());
    cr_assert_eq(back[0].rec.median_ms, 1.0, "the JSON's median %g is not the CSV's 1", back[0].rec.median_ms);
    bench_json_recs_free(back, n);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out, err);
    cr_assert(line_says(line_128(out), "| 1 | 1 | 1.000 |"), "%s", out);
    remove_dir(r.root);
}

/* CSV-only folders keep each row's cold column: a cold row pairs with the
 * other run's cold row, never with a hot one */
Test(bench_compare, csv_rows_keep_their_cold_column) {
    runs r;
    char out[4096], err[4096];
    make_runs(&r, base, base, false); /* the folders; their gemm.csv is replaced below */
    bench_row cold = row_of(512, base, 10, "ok", NULL), hot = row_of(512, base, 10, "ok", NULL);
    cold.cold = true;
    write_run(r.a, &cold, 1, false);
    write_run(r.b, &hot, 1, false);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s", rc, out);
    cr_assert(strstr(out, "gemm: 0 rows matched") && strstr(out, "only in A 1; only in B 1"),
              "A's cold row paired with B's hot one:\n%s", out);
    remove_dir(r.root);
}

Test(bench_compare, a_row_not_ok_in_either_run_is_listed_with_why) {
    runs r;
    char out[4096], err[4096];
    make_runs(&r, base, base, true);
    cr_assert_eq(compare(&r, NULL, NULL, out, err), 0, "%s", out);
    const char *listed = strstr(out, "not compared:");
    cr_assert_not_null(listed, "%s", out);
    cr_assert(strstr(listed, "| 256 |") && strstr(listed, "A: ok; B: wrong: max_rel_err 0.5"), "%s", out);
    cr_assert(strstr(out, "not compared 1;"), "%s", out);
    remove_dir(r.root);
}

/* ls -A of every folder under root, recursively */
static void listing(const char *root, char *out, size_t n) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cd '%s' && ls -AlR --time-style=full-iso .", root);
    cr_assert_eq(sh(cmd, out, n), 0);
}

Test(bench_compare, writes_nothing_into_its_folders_and_out_writes_the_report) {
    runs r;
    char out[4096], err[4096], before[8192], after[8192], report[128], partial[160];
    double slow[10];
    scaled(slow, 3.0);
    make_runs(&r, base, slow, true);
    listing(r.root, before, sizeof before);
    cr_assert_eq(compare(&r, NULL, NULL, out, err), 3);
    listing(r.root, after, sizeof after);
    cr_assert_str_eq(after, before, "bench compare changed its folders");
    snprintf(report, sizeof report, "%s/report.md", r.root);
    snprintf(partial, sizeof partial, "%s.partial", report);
    cr_assert_eq(compare(&r, "--out", report, out, err), 3, "%s", err);
    cr_assert(strstr(out, report), "stdout does not name the report: %s", out);
    char *text = read_file(report);
    cr_assert(strstr(text, "# bench compare") && line_says(line_128(text), "| slower"), "%s", text);
    free(text);
    cr_assert_neq(access(partial, F_OK), 0, "report.md.partial left behind");
    remove(report);
    listing(r.root, after, sizeof after);
    cr_assert_str_eq(after, before, "bench compare --out changed the folders it read");
    remove_dir(r.root);
}

Test(bench_compare, bad_flags_exit_2_and_a_missing_folder_exits_1) {
    runs r;
    char out[4096], err[4096];
    make_runs(&r, base, base, true);
    static const char *const bad[][2] = {
        {"--threshold", "abc"}, {"--threshold", "-1"}, {"--alpha", "0"}, {"--alpha", "2"}, {"--alpha", "nan"},
        {"--nope", NULL},       {"--out", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = compare(&r, bad[i][0], bad[i][1], out, err);
        cr_expect_eq(rc, 2, "%s %s: exit %d\n%s", bad[i][0], bad[i][1] ? bad[i][1] : "", rc, err);
        cr_expect(strstr(err, "bench compare"), "%s", err);
    }
    const char *one[] = {"compare", r.a, NULL};
    cr_assert_eq(run_bench(r.root, one, out, err, 60), 2);
    cr_assert(strstr(err, "compare takes two folders"), "%s", err);
    const char *missing[] = {"compare", r.a, "/nonexistent-dg-folder", NULL};
    cr_assert_eq(run_bench(r.root, missing, out, err, 60), 1, "%s", err);
    cr_assert(strstr(err, "/nonexistent-dg-folder"), "%s", err);
    const char *help[] = {"compare", "--help", NULL};
    cr_assert_eq(run_bench(r.root, help, out, err, 60), 0);
    cr_assert(strstr(out, "--threshold") && strstr(out, "exit: 0"), "%s", out);
    remove_dir(r.root);
}

/* ---- runs of one machine, or of two ---- */

#define META_ON(cpu, cores, blas, gpu)                                                                            \
    "# duograd bench test\n# date: 2030-01-01T00:00:00Z\n# cpu: " cpu "\n# cores: " cores                          \
    "\n# threads: 2\n# openblas: OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP " blas             \
    " MAX_THREADS=64 (parallel: OpenMP) (OPENBLAS_CORETYPE=unset)\n# gpu: " gpu "\n"
#define XEON "Intel(R) Xeon(R) Processor @ 2.80GHz"
#define H100 "NVIDIA H100 80GB HBM3, 132 SMs, cc 9.0, driver 13.0, runtime 13.0, cuBLAS 130100"

/* folders root/a and root/b of one row each, equal times, with metadata ma and mb */
static void make_machines(runs *r, const char *ma, const char *mb, bool json) {
    make_runs(r, base, base, json);
    bench_row row = row_of(128, base, 10, "ok", NULL);
    write_file_rows(r->a, "gemm", ma, &row, 1, json);
    write_file_rows(r->b, "gemm", mb, &row, 1, json);
}

/* A CPU model, a core count, an OpenBLAS core or a GPU model that differs:
 * exit 2 before any report, naming both folders and both machines, and
 * how to compare them all the same; with --across-machines the report's
 * first line says it compares runs of two machines. (Before, any two
 * folders were compared and the exit was 0.) */
Test(bench_compare, runs_from_different_machines_are_refused_unless_asked) {
    static const struct { const char *a, *b, *field, *says_a, *says_b; } cases[] = {
        {META_ON(XEON, "2", "SkylakeX", "none (built without CUDA)"), META_ON("AMD EPYC 9654", "2", "SkylakeX", "none"),
         "cpu differs", XEON, "AMD EPYC 9654"},
        {META_ON(XEON, "16", "SkylakeX", H100), META_ON(XEON, "2", "SkylakeX", H100), "cores differs", "16 cores",
         "2 cores"},
        {META_ON(XEON, "2", "SkylakeX", "none"), META_ON(XEON, "2", "Prescott", "none"), "BLAS core differs",
         "BLAS core SkylakeX", "BLAS core Prescott"},
        {META_ON(XEON, "16", "SkylakeX", H100),
         META_ON(XEON, "16", "SkylakeX", "NVIDIA H200, 132 SMs, cc 9.0, driver 13.0, runtime 13.0, cuBLAS 130100"),
         "gpu differs", "gpu NVIDIA H100 80GB HBM3,", "gpu NVIDIA H200,"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int json = 0; json < 2; json++) {
            runs r;
            char out[4096], err[4096];
            make_machines(&r, cases[i].a, cases[i].b, json);
            if (json) { /* the machine from NAME.json's context alone */
                char path[128];
                snprintf(path, sizeof path, "%s/gemm.csv", r.a);
                cr_assert_eq(remove(path), 0);
                snprintf(path, sizeof path, "%s/gemm.csv", r.b);
                cr_assert_eq(remove(path), 0);
            }
            int rc = compare(&r, NULL, NULL, out, err);
            cr_expect_eq(rc, 2, "case %zu json %d: exit %d\n%s\n%s", i, json, rc, out, err);
            cr_expect(strstr(err, r.a) && strstr(err, r.b) && strstr(err, "different machines") &&
                          strstr(err, cases[i].field) && strstr(err, cases[i].says_a) && strstr(err, cases[i].says_b) &&
                          strstr(err, "--across-machines"),
                      "case %zu json %d: the message names neither both machines nor the way out:\n%s", i, json, err);
            cr_expect_str_empty(out, "case %zu json %d: a refused comparison printed a report", i, json);
            rc = compare(&r, "--across-machines", NULL, out, err);
            cr_expect_eq(rc, 0, "case %zu json %d --across-machines: exit %d\n%s", i, json, rc, err);
            cr_expect(!strncmp(out, "# bench compare: B against A, runs from different machines", 58) &&
                          strstr(out, cases[i].field),
                      "case %zu json %d: the first line does not say so:\n%s", i, json, out);
            remove_dir(r.root);
        }
}

/* One machine: the same CPU, cores and OpenBLAS core; a run that measured
 * no GPU ("none") says nothing against one that did. Compared, exit 0. */
Test(bench_compare, runs_of_one_machine_compare) {
    runs r;
    char out[4096], err[4096];
    make_machines(&r, META_ON(XEON, "16", "SkylakeX", H100), META_ON(XEON, "16", "SkylakeX", "none (no CUDA device answered)"),
                  true);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out, err);
    cr_assert(!strncmp(out, "# bench compare: B against A\n", 29), "%s", out);
    remove_dir(r.root);
}

/* --out and a refusal: no report file, nothing left behind */
Test(bench_compare, a_refused_comparison_writes_no_report) {
    runs r;
    char out[4096], err[4096], report[128], partial[160];
    make_machines(&r, META_ON(XEON, "16", "SkylakeX", "none"), META_ON(XEON, "2", "SkylakeX", "none"), true);
    snprintf(report, sizeof report, "%s/report.md", r.root);
    snprintf(partial, sizeof partial, "%s.partial", report);
    cr_assert_eq(compare(&r, "--out", report, out, err), 2, "%s", err);
    cr_assert_neq(access(report, F_OK), 0, "a refused comparison wrote %s", report);
    cr_assert_neq(access(partial, F_OK), 0, "%s left behind", partial);
    remove_dir(r.root);
}

/* ---- the peers' rows ---- */

static bench_row peer_row(const double *v, const char *impl) {
    bench_row r = row_of(128, v, 10, "ok", NULL);
    r.impl = impl;
    r.st.samples = NULL; /* a peer writes the CSV row alone */
    return r;
}

/* appends row to DIR/NAME.csv, as a peer appends its rows after the sweep */
static void append_row(const char *dir, const char *name, const bench_row *row) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f, "%s", path);
    bench_csv_write(f, row);
    fclose(f);
}

/* A peer's rows appended to the sweep's CSV after its JSON was written are
 * compared like the sweep's own, on their medians; the header says how
 * many rows came from the CSV alone; a 3x slower peer row exits 3. (They
 * were never read where NAME.json existed.) */
Test(bench_compare, peer_rows_in_the_sweeps_csv_are_compared) {
    runs r;
    char out[4096], err[4096];
    double slow[10];
    scaled(slow, 3.0);
    make_runs(&r, base, base, true);
    bench_row pa = peer_row(base, "torch-cpu"), pb = peer_row(slow, "torch-cpu");
    append_row(r.a, "gemm", &pa);
    append_row(r.b, "gemm", &pb);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 3, "exit %d\n%s\n%s", rc, out, err);
    const char *line = strstr(out, "| gemm | square | torch-cpu | cpu | fp32 | 128 |");
    cr_assert(line && line_says(line, "| 3.000 | - | slower (no U test: CSV medians only)"), "%s", out);
    cr_assert(strstr(out, "B: gemm.json and 1 rows of gemm.csv alone"), "%s", out);
    cr_assert(line_says(line_128(out), "| 1.000 | 1 | same"), "the sweep's own row from the JSON:\n%s", out);
    remove_dir(r.root);
}

/* A peer's own file (torch_ops.csv) present in both folders is compared
 * as a section of its own. */
Test(bench_compare, a_peers_own_file_is_compared) {
    runs r;
    char out[4096], err[4096];
    double slow[10];
    scaled(slow, 3.0);
    make_runs(&r, base, base, true);
    bench_row pa = peer_row(base, "torch-cuda"), pb = peer_row(slow, "torch-cuda");
    write_file_rows(r.a, "torch_ops", META, &pa, 1, false);
    write_file_rows(r.b, "torch_ops", META, &pb, 1, false);
    int rc = compare(&r, NULL, NULL, out, err);
    cr_assert_eq(rc, 3, "exit %d\n%s\n%s", rc, out, err);
    const char *section = strstr(out, "## torch_ops");
    cr_assert(section && strstr(section, "| torch-cuda | cpu | fp32 | 128 |"), "%s", out);
    remove_dir(r.root);
}
