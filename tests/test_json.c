/* test_json.c: NAME.json in Google Benchmark's layout (written from
 * synthetic rows, parsed back with cJSON), its reader, the raw samples
 * file, and Google Benchmark's own compare.py run on two duograd files. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "writers/json.h"
#include "writers/samples.h"
#include "shell_util.h"

#define META                                                                                                     \
    "# duograd bench 9.9.9\n# git commit: abc123\n# date: 2030-01-02T03:04:05Z\n# cpu: Test CPU @ 1 GHz\n"      \
    "# cores: 6\n# build: Release GNU 12 -O3\n"

static const double five[] = {2.0, 1.0, 4.0, 3.0, 10.0}; /* mean 4, median 3, sample stddev sqrt(12.5) */

/* a measured gemm row of size m with samples v[0..n) and their statistics */
static bench_row measured_row(int64_t m, const double *v, int n) {
    double sorted[64];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    bench_stats st = n ? bench_stats_of(sorted, n) : BENCH_NO_STATS;
    st.samples = v;
    return (bench_row){.sweep = "gemm", .name = "square", .impl = "cpu-openblas", .backend = "cpu", .m = m, .n = m,
                       .k = m, .batch = 1, .threads = 4, .warmup = 1, .st = st, .flops = 2e6, .max_rel_err = 1e-7,
                       .check = "f64-fwd", .status = "ok"};
}

static bench_row failed_row(int64_t m, const char *status, const char *note) {
    bench_row r = measured_row(m, five, 0);
    r.st = BENCH_NO_STATS;
    r.status = status;
    r.note = note;
    r.max_rel_err = NAN;
    return r;
}

/* writes DIR/NAME.json from rows r[0..n) */
static void write_json(const char *dir, const char *name, const bench_row *r, int n) {
    bench_json *j = bench_json_open(META);
    cr_assert_not_null(j, "%s", dg_last_error());
    for (int i = 0; i < n; i++) bench_json_add(j, &r[i]);
    cr_assert_eq(bench_json_finish(j, dir, name, true), DG_OK, "%s", dg_last_error());
}

static cJSON *parse_file(const char *path) {
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s does not parse as JSON: %.300s", path, text);
    free(text);
    return root;
}

static const char *str_of(const cJSON *o, const char *k) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    cr_assert_not_null(s, "no string '%s' in %s", k, cJSON_PrintUnformatted(o));
    return s;
}

static double num_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(v), "no number '%s'", k);
    return v->valuedouble;
}

Test(bench_json, context_holds_google_benchmarks_keys_and_every_metadata_key) {
    char dir[] = "/tmp/dg-json-XXXXXX", path[256];
    tmp_dir(dir);
    bench_row r = measured_row(64, five, 5);
    write_json(dir, "gemm", &r, 1);
    snprintf(path, sizeof path, "%s/gemm.json", dir);
    cJSON *root = parse_file(path);
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(root, "context");
    cr_assert(cJSON_IsObject(ctx));
    cr_assert_str_eq(str_of(ctx, "date"), "2030-01-02T03:04:05Z");
    cr_assert_gt(strlen(str_of(ctx, "host_name")), 0);
    cr_assert_gt(strlen(str_of(ctx, "executable")), 0);
    cr_assert_eq(num_of(ctx, "num_cpus"), 6);
    cr_assert_geq(num_of(ctx, "mhz_per_cpu"), 0);
    cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(ctx, "caches")));
    cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(ctx, "load_avg")));
    cr_assert_str_eq(str_of(ctx, "library_build_type"), "release");
    cr_assert_str_eq(str_of(ctx, "git commit"), "abc123");
    cr_assert_str_eq(str_of(ctx, "cpu"), "Test CPU @ 1 GHz");
    cr_assert_str_eq(str_of(ctx, "cores"), "6");
    cr_assert_str_eq(str_of(ctx, "title"), "duograd bench 9.9.9");
    cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "benchmarks")));
    cJSON_Delete(root);
    remove_dir(dir);
}

Test(bench_json, one_entry_per_repetition_then_the_aggregates) {
    char dir[] = "/tmp/dg-json-XXXXXX", path[256];
    tmp_dir(dir);
    bench_row r = measured_row(512, five, 5);
    r.cold = true;
    write_json(dir, "gemm", &r, 1);
    snprintf(path, sizeof path, "%s/gemm.json", dir);
    cJSON *root = parse_file(path);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "benchmarks");
    cr_assert_eq(cJSON_GetArraySize(list), 5 + 4);
    const char *name = "gemm/square/cpu-openblas/cpu/dtype:fp32/m:512/n:512/k:512/batch:1/transfer:0/tf32:0/cold:1";
    for (int i = 0; i < 5; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        cr_assert_str_eq(str_of(e, "name"), name);
        cr_assert_str_eq(str_of(e, "run_name"), name);
        cr_assert_str_eq(str_of(e, "run_type"), "iteration");
        cr_assert_eq(num_of(e, "repetitions"), 5);
        cr_assert_eq(num_of(e, "repetition_index"), i);
        cr_assert_eq(num_of(e, "iterations"), 1);
        cr_assert_eq(num_of(e, "threads"), 4);
        cr_assert_eq(num_of(e, "real_time"), five[i], "repetition %d", i);
        cr_assert_eq(num_of(e, "cpu_time"), five[i]);
        cr_assert_str_eq(str_of(e, "time_unit"), "ms");
        cr_assert_float_eq(num_of(e, "gflops"), 2e6 / (five[i] * 1e6), 1e-12);
        cr_assert_str_eq(str_of(e, "status"), "ok");
        cr_assert_str_eq(str_of(e, "check"), "f64-fwd");
        cr_assert_float_eq(num_of(e, "max_rel_err"), 1e-7, 1e-20);
        cr_assert_null(cJSON_GetObjectItemCaseSensitive(e, "error_occurred"));
    }
    static const char *const aggs[] = {"mean", "median", "stddev", "cv"};
    double want[] = {4.0, 3.0, sqrt(12.5), sqrt(12.5) / 4.0};
    for (int a = 0; a < 4; a++) {
        const cJSON *e = cJSON_GetArrayItem(list, 5 + a);
        char agg_name[256];
        snprintf(agg_name, sizeof agg_name, "%s_%s", name, aggs[a]);
        cr_assert_str_eq(str_of(e, "name"), agg_name);
        cr_assert_str_eq(str_of(e, "run_name"), name);
        cr_assert_str_eq(str_of(e, "run_type"), "aggregate");
        cr_assert_str_eq(str_of(e, "aggregate_name"), aggs[a]);
        cr_assert_str_eq(str_of(e, "aggregate_unit"), a == 3 ? "percentage" : "time");
        cr_assert_eq(num_of(e, "repetitions"), 5);
        cr_assert_null(cJSON_GetObjectItemCaseSensitive(e, "repetition_index"));
        cr_assert_float_eq(num_of(e, "real_time"), want[a], 1e-12, "%s", aggs[a]);
        cr_assert_float_eq(num_of(e, "cpu_time"), want[a], 1e-12, "%s", aggs[a]);
    }
    cJSON_Delete(root);
    remove_dir(dir);
}

Test(bench_json, a_failed_row_is_an_error_entry_without_a_measured_time) {
    char dir[] = "/tmp/dg-json-XXXXXX", path[256];
    tmp_dir(dir);
    bench_row rows[] = {failed_row(64, "wrong", "max_rel_err 0.3 over 1e-4"), failed_row(128, "skipped", NULL)};
    write_json(dir, "gemm", rows, 2);
    snprintf(path, sizeof path, "%s/gemm.json", dir);
    char *text = read_file(path);
    /* JSON has no NaN: the missing max_rel_err is null */
    static const char *const not_json[] = {"nan", "NaN", "inf", "Inf"};
    for (int i = 0; i < 4; i++) cr_assert_null(strstr(text, not_json[i]), "%s", text);
    free(text);
    cJSON *root = parse_file(path);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "benchmarks");
    cr_assert_eq(cJSON_GetArraySize(list), 2);
    const cJSON *wrong = cJSON_GetArrayItem(list, 0), *skipped = cJSON_GetArrayItem(list, 1);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(wrong, "error_occurred")));
    cr_assert_str_eq(str_of(wrong, "error_message"), "wrong: max_rel_err 0.3 over 1e-4");
    cr_assert_str_eq(str_of(skipped, "error_message"), "skipped");
    cr_assert_str_eq(str_of(wrong, "note"), "max_rel_err 0.3 over 1e-4");
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(skipped, "note"));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(wrong, "max_rel_err")));
    /* no measured time: 0 iterations, and a unit of its own so compare.py never pairs it with a time */
    cr_assert_eq(num_of(wrong, "iterations"), 0);
    cr_assert_eq(num_of(wrong, "real_time"), 0);
    cr_assert_str_eq(str_of(wrong, "time_unit"), "s");
    cJSON_Delete(root);
    remove_dir(dir);
}

Test(bench_json, a_run_that_is_not_kept_leaves_the_earlier_file_as_it_was) {
    char dir[] = "/tmp/dg-json-XXXXXX", path[256], partial[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.json", dir);
    snprintf(partial, sizeof partial, "%s/gemm.json.partial", dir);
    write_file(path, "earlier\n");
    bench_json *j = bench_json_open(META);
    bench_row r = measured_row(64, five, 5);
    bench_json_add(j, &r);
    cr_assert_eq(bench_json_finish(j, dir, "gemm", false), DG_OK);
    char *text = read_file(path);
    cr_assert_str_eq(text, "earlier\n");
    free(text);
    cr_assert_neq(access(partial, F_OK), 0, "gemm.json.partial left behind");
    /* a folder it cannot write: an error, and the file stays */
    j = bench_json_open(META);
    bench_json_add(j, &r);
    cr_assert_eq(bench_json_finish(j, "/nonexistent-dg-folder", "gemm", true), DG_ERR_IO);
    write_json(dir, "gemm", &r, 1);
    cr_assert_neq(access(partial, F_OK), 0, "gemm.json.partial left behind after a kept run");
    cJSON *root = parse_file(path);
    cJSON_Delete(root);
    remove_dir(dir);
}

Test(bench_json, reads_back_every_repetition_and_the_failed_rows) {
    char dir[] = "/tmp/dg-json-XXXXXX", path[256];
    tmp_dir(dir);
    bench_row rows[] = {measured_row(64, five, 5), failed_row(128, "wrong", "off by 1"), measured_row(256, five, 2)};
    rows[2].cold = true;
    rows[2].precision = DG_PREC_TF32;
    /* a training epoch: timed once, no samples kept: its median is its one repetition */
    rows[2].st.samples = five + 3;
    bench_row epoch = measured_row(32, five, 1);
    epoch.st.samples = NULL;
    epoch.st.median_ms = 7.5;
    epoch.precision = DG_PREC_BF16;
    bench_row all[] = {rows[0], rows[1], rows[2], epoch};
    write_json(dir, "gemm", all, 4);
    snprintf(path, sizeof path, "%s/gemm.json", dir);
    int n = 0;
    bench_json_rec *recs = bench_json_read(path, &n);
    cr_assert_not_null(recs, "%s", dg_last_error());
    cr_assert_eq(n, 4);
    cr_assert_eq(recs[0].n_samples, 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(recs[0].samples[i], five[i]);
    cr_assert_eq(recs[0].rec.median_ms, 3.0);
    cr_assert_eq(recs[0].rec.m, 64);
    cr_assert_str_eq(recs[0].rec.status, "ok");
    cr_assert_str_eq(recs[1].rec.status, "wrong");
    cr_assert_str_eq(recs[1].message, "wrong: off by 1");
    cr_assert_eq(recs[1].n_samples, 0);
    cr_assert(isnan(recs[1].rec.median_ms));
    cr_assert_eq(recs[2].n_samples, 2);
    cr_assert_eq(recs[2].samples[0], five[3]);
    cr_assert_eq(recs[2].samples[1], five[4]);
    cr_assert_eq(recs[2].cold, 1);
    cr_assert_eq(recs[2].rec.tf32, 1);
    cr_assert(recs[0].rec.precision == DG_PREC_FP32 && recs[2].rec.precision == DG_PREC_TF32 &&
              recs[3].rec.precision == DG_PREC_BF16, "the dtype of each row read back");
    cr_assert_eq(recs[3].n_samples, 1);
    cr_assert_eq(recs[3].samples[0], 7.5);
    bench_json_recs_free(recs, n);
    /* not JSON, or not duograd's: an error naming the file */
    write_file(path, "{\"benchmarks\": [ {\"name\": 1} ]");
    cr_assert_null(bench_json_read(path, &n));
    cr_assert(strstr(dg_last_error(), "gemm.json"), "%s", dg_last_error());
    write_file(path, "{\"benchmarks\": [{\"name\": \"x\", \"run_type\": \"iteration\", \"real_time\": 1}]}");
    cr_assert_null(bench_json_read(path, &n));
    cr_assert(strstr(dg_last_error(), "'sweep'"), "%s", dg_last_error());
    remove_dir(dir);
}

Test(bench_samples, one_line_per_repetition_in_the_order_run) {
    char dir[] = "/tmp/dg-samples-XXXXXX", path[256];
    tmp_dir(dir);
    FILE *f = bench_samples_open(dir, "gemm", META);
    cr_assert_not_null(f, "%s", dg_last_error());
    bench_row ok = measured_row(64, five, 5), wrong = failed_row(128, "wrong", "bad");
    ok.cold = true;
    bench_samples_write(f, &ok);
    bench_samples_write(f, &wrong);
    cr_assert_eq(bench_samples_finish(f, dir, "gemm", true), DG_OK);
    snprintf(path, sizeof path, "%s/gemm.samples.csv", dir);
    char *text = read_file(path);
    const char *want = META BENCH_SAMPLES_HEADER "\n"
                       "gemm,square,cpu-openblas,cpu,fp32,64,64,64,1,0,0,1,0,2\n"
                       "gemm,square,cpu-openblas,cpu,fp32,64,64,64,1,0,0,1,1,1\n"
                       "gemm,square,cpu-openblas,cpu,fp32,64,64,64,1,0,0,1,2,4\n"
                       "gemm,square,cpu-openblas,cpu,fp32,64,64,64,1,0,0,1,3,3\n"
                       "gemm,square,cpu-openblas,cpu,fp32,64,64,64,1,0,0,1,4,10\n";
    cr_assert_str_eq(text, want);
    free(text);
    remove_dir(dir);
}

/* Google Benchmark's own compare.py (Debian: libbenchmark-tools) on two
 * duograd files: it must run unchanged, pair the rows by name, and name the
 * benchmark that got slower with its change. */
#define COMPARE_PY "/usr/share/benchmark/compare.py"
#define PYTHON     "/usr/bin/python3"

Test(bench_json, google_benchmarks_compare_py_reads_two_duograd_runs) {
    if (access(COMPARE_PY, R_OK)) cr_skip_test("no " COMPARE_PY ": apt-get install libbenchmark-tools");
    if (sh(PYTHON " -c 'import scipy'", NULL, 0)) cr_skip_test("no scipy for " PYTHON ": apt-get install python3-scipy");
    char dir[] = "/tmp/dg-gbench-XXXXXX", cmd[1024], out[1 << 16];
    tmp_dir(dir);
    double same[10], fast[10], slow[10];
    for (int i = 0; i < 10; i++) {
        same[i] = 1.0 + 0.01 * i;
        fast[i] = 2.0 + 0.01 * i;
        slow[i] = 3.0 + 0.01 * i; /* the 2 ms row takes 3 ms: +50% */
    }
    bench_row a[] = {measured_row(64, same, 10), measured_row(128, fast, 10), failed_row(256, "wrong", "off"),
                     measured_row(512, same, 10)};
    bench_row b[] = {measured_row(64, same, 10), measured_row(128, slow, 10), measured_row(256, same, 10),
                     failed_row(512, "oom", NULL)};
    write_json(dir, "a", a, 4);
    write_json(dir, "b", b, 4);
    snprintf(cmd, sizeof cmd, PYTHON " " COMPARE_PY " --no-color benchmarks %s/a.json %s/b.json", dir, dir);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "compare.py failed (exit %d):\n%s", rc, out);
    /* the slower row, each repetition and its aggregates: +0.5000 in time and CPU */
    const char *slower = "gemm/square/cpu-openblas/cpu/dtype:fp32/m:128/n:128/k:128/batch:1/transfer:0/tf32:0/cold:0 ";
    const char *line = strstr(out, slower);
    cr_assert_not_null(line, "compare.py did not report the slower row:\n%s", out);
    cr_assert(!strncmp(line + strspn(line + strlen(slower), " ") + strlen(slower), "+0.5000", 7),
              "compare.py's change for the slower row is not +0.5000:\n%.300s", line);
    char mean[256];
    snprintf(mean, sizeof mean, "%.*s_mean ", (int)strlen(slower) - 1, slower);
    cr_assert(strstr(out, mean), "no aggregate %s in:\n%s", mean, out);
    /* its U test: all ten repetitions of B above A's, p tiny */
    char pvalue[256];
    snprintf(pvalue, sizeof pvalue, "%.*s_pvalue ", (int)strlen(slower) - 1, slower);
    line = strstr(out, pvalue);
    cr_assert_not_null(line, "no U test line %s:\n%s", pvalue, out);
    cr_assert(strstr(line, "0.0002"), "p of 10 vs 10 disjoint repetitions is 0.0002: %.200s", line);
    /* the unchanged row: +0.0000; a row failed on either side is never compared */
    cr_assert(strstr(out, "gemm/square/cpu-openblas/cpu/dtype:fp32/m:64/n:64/k:64/batch:1/transfer:0/tf32:0/cold:0 "), "%s", out);
    cr_assert_null(strstr(out, "m:256/"), "a failed row was compared:\n%s", out);
    cr_assert_null(strstr(out, "m:512/"), "a failed row was compared:\n%s", out);
    remove_dir(dir);
}
