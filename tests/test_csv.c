/* test_csv.c: the result CSV is read by column name: extra and reordered
 * columns, missing optional ones and a missing required one; `bench
 * compare` on the committed older folder, as written and with the columns
 * an older bench would not have had. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "writers/csv.h"
#include "shell_util.h"
#include "test_util.h"

/* the columns bench_csv_read cannot do without */
static const char *const required[] = {"sweep", "case", "impl", "backend", "m", "n", "k", "batch", "transfer",
                                       "median_ms", "min_ms", "max_ms", "status"};
#define N_REQUIRED (int)(sizeof required / sizeof *required)

Test(bench_csv, columns_are_found_by_name_in_any_order_and_extra_ones_ignored) {
    char dir[] = "/tmp/dg-csv-XXXXXX", path[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    /* reordered, an unknown column (note) in the middle, optional ones absent
     * (threads, reps, cv_pct, gbps, max_rel_err) */
    write_file(path, "# written by a newer bench\n"
                     "status,impl,note,max_ms,sweep,case,tf32,backend,m,n,k,batch,transfer,min_ms,median_ms,gflops\n"
                     "ok,gpu-cublas-tf32,hello,3.5,gemm,square,1,gpu,64,32,16,1,0,1.5,2.5,42\n"
                     "oom,cpu-omp,,NaN,gemm,tall,0,cpu,8192,1024,1024,1,1,NaN,NaN,NaN\n");
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 2);
    cr_assert_str_eq(r[0].sweep, "gemm");
    cr_assert_str_eq(r[0].name, "square");
    cr_assert_str_eq(r[0].impl, "gpu-cublas", "an older file's TF32 implementation is read as IMPL at tf32");
    cr_assert(r[0].precision == DG_PREC_TF32 && r[1].precision == DG_PREC_FP32, "no dtype column: tf32 = 1 is tf32");
    cr_assert_str_eq(r[0].backend, "gpu");
    cr_assert_str_eq(r[0].status, "ok");
    cr_assert(r[0].m == 64 && r[0].n == 32 && r[0].k == 16 && r[0].batch == 1 && r[0].transfer == 0 && r[0].tf32 == 1);
    cr_assert(r[0].median_ms == 2.5 && r[0].min_ms == 1.5 && r[0].max_ms == 3.5 && r[0].gflops == 42);
    cr_assert(r[0].threads == 0 && r[0].reps == 0, "absent integer columns read as 0");
    cr_assert(isnan(r[0].cv_pct) && isnan(r[0].gbps) && isnan(r[0].max_rel_err), "absent numbers read as NaN");
    cr_assert_str_eq(r[1].status, "oom");
    cr_assert_str_eq(r[1].name, "tall");
    cr_assert(r[1].m == 8192 && r[1].transfer == 1 && r[1].tf32 == 0 && isnan(r[1].median_ms));
    free(r);
    remove_dir(dir);
}

/* The dtype column holds the precision: written from the row and read back;
 * "f32" (the files before the precision axis) reads as fp32, or tf32 where
 * tf32 = 1; the tf32 column is 1 exactly at tf32; anything else is refused
 * naming the value. */
Test(bench_csv, the_dtype_column_holds_the_precision_and_reads_older_files) {
    char dir[] = "/tmp/dg-csv-XXXXXX", path[256];
    tmp_dir(dir);
    FILE *f = bench_csv_open(dir, "gemm", "# meta\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        bench_row row = {.sweep = "gemm", .name = "square", .impl = "gpu-cublas", .backend = "gpu", .m = 64,
                         .n = 64, .k = 64, .batch = 1, .precision = (dg_precision)p, .st = BENCH_NO_STATS,
                         .max_rel_err = NAN, .status = "skipped"};
        bench_csv_write(f, &row);
    }
    ASSERT_OK(bench_csv_finish(f, dir, "gemm", true));
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    char *text = read_file(path);
    cr_assert(strstr(text, "gemm,square,gpu-cublas,gpu,fp32,64,64,64,1,0,0,0,") &&
                  strstr(text, "gemm,square,gpu-cublas,gpu,tf32,64,64,64,1,0,0,1,") &&
                  strstr(text, "gemm,square,gpu-cublas,gpu,bf16,64,64,64,1,0,0,0,") &&
                  strstr(text, "gemm,square,gpu-cublas,gpu,fp16,64,64,64,1,0,0,0,"), "%s", text);
    free(text);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, DG_PREC_COUNT);
    for (int p = 0; p < n; p++) cr_assert(r[p].precision == (dg_precision)p && r[p].tf32 == (p == DG_PREC_TF32));
    free(r);
    write_file(path, "sweep,case,impl,backend,dtype,m,n,k,batch,transfer,tf32,median_ms,min_ms,max_ms,status\n"
                     "gemm,square,gpu-cublas,gpu,f32,8,8,8,1,0,0,1,1,1,ok\n"
                     "gemm,square,gpu-cublas-tf32,gpu,f32,8,8,8,1,0,1,1,1,1,ok\n"
                     "gemm,square,gpu-tiled,gpu,tf32,8,8,8,1,0,0,1,1,1,ok\n");
    r = bench_csv_read(path, &n);
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert(r[0].precision == DG_PREC_FP32 && r[0].tf32 == 0);
    cr_assert(r[1].precision == DG_PREC_TF32 && r[1].tf32 == 1 && !strcmp(r[1].impl, "gpu-cublas"));
    cr_assert(r[2].precision == DG_PREC_TF32 && r[2].tf32 == 1, "dtype tf32 sets the tf32 column");
    free(r);
    write_file(path, "sweep,case,impl,backend,dtype,m,n,k,batch,transfer,median_ms,min_ms,max_ms,status\n"
                     "gemm,square,cpu-omp,cpu,int8,8,8,8,1,0,1,1,1,ok\n");
    cr_assert_null(bench_csv_read(path, &n));
    cr_assert(strstr(dg_last_error(), "gemm.csv:2: column 'dtype': 'int8' is not a precision"), "%s", dg_last_error());
    remove_dir(dir);
}

Test(bench_csv, a_missing_required_column_is_named_with_file_and_line) {
    char dir[] = "/tmp/dg-csv-XXXXXX", path[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    for (int drop = 0; drop < N_REQUIRED; drop++) {
        char header[512] = "", row[512] = "";
        for (int c = 0; c < N_REQUIRED; c++) {
            if (c == drop) continue;
            strcat(header, *header ? "," : "");
            strcat(header, required[c]);
            strcat(row, *row ? ",1" : "1");
        }
        char text[1200];
        snprintf(text, sizeof text, "# meta\n# more meta\n%s,gflops\n%s,2\n", header, row);
        write_file(path, text);
        int n = -1;
        cr_assert_null(bench_csv_read(path, &n), "read without column %s", required[drop]);
        cr_assert_eq(n, 0);
        char want[64];
        snprintf(want, sizeof want, "'%s'", required[drop]);
        const char *e = dg_last_error();
        cr_assert(strstr(e, want) && strstr(e, path) && strstr(e, ":3:"),
                  "the error should name the column %s, the file and line 3: %s", want, e);
    }
    remove_dir(dir);
}

/* Damage a reader meets after a crash or from a hostile file: each is read
 * as far as it can be, or refused with the file, the line and the reason. */
Test(bench_csv, damaged_files_are_read_or_refused_with_the_reason) {
    char dir[] = "/tmp/dg-csv-XXXXXX", path[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    const char *head = "sweep,case,impl,backend,m,n,k,batch,transfer,median_ms,min_ms,max_ms,status\n";
    const char *row = "gemm,square,cpu,cpu,64,64,64,1,0,1.5,1,2,ok\n";
    char text[8192];
    int n = -1;

    /* killed while writing the metadata: no header, no rows, no error */
    write_file(path, "# duograd bench\n# git com");
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert(r && n == 0, "%s", dg_last_error());
    free(r);

    /* a blank line written with CRLF is a blank line */
    snprintf(text, sizeof text, "%s\r\n%s\r\n%s", head, row, row);
    write_file(path, text);
    r = bench_csv_read(path, &n);
    cr_assert(r && n == 2, "%s", dg_last_error());
    free(r);

    /* too many fields: said so, not "-1 fields" */
    char wide[400] = "";
    for (int i = 0; i < 70; i++) strcat(wide, "1,");
    snprintf(text, sizeof text, "%s%s1\n", head, wide);
    write_file(path, text);
    cr_assert_null(bench_csv_read(path, &n));
    cr_assert(strstr(dg_last_error(), ":2: more than 64 fields"), "%s", dg_last_error());

    /* a NUL byte in a short line */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(head, f);
    fwrite("gemm,sq\0are,cpu\n", 1, 17, f);
    fclose(f);
    cr_assert_null(bench_csv_read(path, &n));
    cr_assert(strstr(dg_last_error(), ":2: a NUL byte"), "%s", dg_last_error());

    /* a number that is not one */
    snprintf(text, sizeof text, "%sgemm,square,cpu,cpu,64,64,64,1,0,fast,1,2,ok\n", head);
    write_file(path, text);
    cr_assert_null(bench_csv_read(path, &n));
    cr_assert(strstr(dg_last_error(), ":2: column 'median_ms': 'fast' is not a number"), "%s", dg_last_error());
    remove_dir(dir);
}

/* copies the CSV files of FOLDER (relative to the source tree) into dir */
static void copy_results(const char *folder, const char *dir) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/%s/*.csv %s/", dir, DG_SOURCE_DIR, folder, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* drops the named columns of every CSV row in path and appends one unknown
 * column: a file from an older (or newer) bench */
static void reshape(const char *path, const char *const *drop, int n_drop) {
    char *text = read_file(path), *out = malloc(strlen(text) + 4096 * 64), *o = out;
    cr_assert_not_null(out);
    bool keep[64] = {false};
    bool header = true;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') { o += sprintf(o, "%s\n", line); continue; }
        int f = 0, w = 0;
        for (char *p = line, *tok; (tok = strsep(&p, ",")) != NULL; f++) {
            cr_assert(f < 64);
            if (header) {
                keep[f] = true;
                for (int d = 0; d < n_drop; d++) keep[f] &= strcmp(tok, drop[d]) != 0;
            }
            if (keep[f]) o += sprintf(o, "%s%s", w++ ? "," : "", tok);
        }
        o += sprintf(o, header ? ",comment\n" : ",x\n");
        header = false;
    }
    write_file(path, out);
    free(out);
    free(text);
}

static int rows_matched(const char *out) {
    const char *m = strstr(out, " rows matched");
    cr_assert_not_null(m, "%s", out);
    while (m > out && m[-1] >= '0' && m[-1] <= '9') m--;
    return atoi(m);
}

Test(bench_compare, the_committed_older_folder_still_compares) {
    char root[] = "/tmp/dg-cmp-XXXXXX", a[256], b[256], cmd[1024], out[1 << 16];
    tmp_dir(root);
    snprintf(a, sizeof a, "%s/h100-run1", root); /* ceiling, gemm, ops, mlp only */
    snprintf(b, sizeof b, "%s/h100", root);
    copy_results("tests/data/h100-run1", a); /* the first bench's CSV, kept as a test input */
    copy_results("reports/h100", b);
    /* the first run's OpenBLAS fell back to its Prescott core, the later one
     * ran SkylakeX: runs of two machines to bench compare, compared here
     * on purpose; their medians alone (CSV files) may find a regression */
    snprintf(cmd, sizeof cmd, "%s compare --across-machines --out %s/compare.md %s %s", DG_BENCH_PATH, root, a, b);
    int rc = sh(cmd, out, sizeof out);
    cr_assert(rc == 0 || rc == 3, "exit %d: %s", rc, out);
    int matched = rows_matched(out);
    cr_assert_gt(matched, 400, "%s", out);
    char path[512];
    snprintf(path, sizeof path, "%s/compare.md", root);
    char *want = read_file(path);
    cr_assert(strstr(want, "runs from different machines (--across-machines): ceiling.csv: BLAS core differs"), "%.300s",
              want);
    static const char *const sweeps[] = {"ceiling", "gemm", "ops", "mlp"};
    for (int s = 0; s < 4; s++) {
        char cell[32];
        snprintf(cell, sizeof cell, "\n| %s | ", sweeps[s]);
        cr_assert(strstr(want, cell), "compare.md has no %s rows", sweeps[s]);
    }

    /* the same folder as an older bench would have written it: fewer
     * columns, the optional ones gone, and one this reader does not know */
    static const char *const drop[] = {"dtype", "threads", "warmup", "reps", "cv_pct", "gflops", "gbps", "max_rel_err"};
    for (int s = 0; s < 4; s++) {
        snprintf(path, sizeof path, "%s/%s.csv", a, sweeps[s]);
        reshape(path, drop, 8);
    }
    snprintf(path, sizeof path, "%s/gemm.csv", a);
    char *text = read_file(path);
    const char *header = "\nsweep,case,impl,backend,m,n,k,batch,transfer,tf32,median_ms,min_ms,max_ms,status,comment\n";
    cr_assert(strstr(text, header), "reshape: %.400s", text);
    free(text);
    cr_assert_eq(sh(cmd, out, sizeof out), rc, "%s", out);
    cr_assert_eq(rows_matched(out), matched, "%s", out);
    snprintf(path, sizeof path, "%s/compare.md", root);
    char *got = read_file(path);
    cr_assert_str_eq(got, want, "compare.md differs once the older folder lost its optional columns");
    free(got);
    free(want);
    remove_dir(root);
}
