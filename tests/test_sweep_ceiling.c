/* test_sweep_ceiling.c: the CPU's sgemm ceiling is measured on every
 * machine: where --cpu-cap would skip the 4096 square (a slow CPU, a
 * generic OpenBLAS core), the ceiling sweep measures a smaller one, so the
 * summary and every chart keep their CPU ceiling. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shell_util.h"

Test(sweep_ceiling, a_cap_that_skips_the_large_square_still_leaves_a_cpu_sgemm_row) {
    char dir[] = "/tmp/dg-ceil-XXXXXX", out[8192], err[8192], path[600];
    tmp_dir(dir);
    /* 50 ms: a 4096 sgemm (137 GFLOP) needs 1.4 TFLOP/s to fit, 256 a few GFLOP/s */
    const char *args[] = {"--sweep", "ceiling", "--backends", "cpu", "--cpu-cap", "0.05", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/ceiling.csv", dir);
    char *csv = read_file(path);
    const char *row = strstr(csv, "\nceiling,sgemm,cpu-openblas,cpu,f32,");
    cr_assert_not_null(row, "no CPU sgemm ceiling row:\n%s", csv);
    int m = atoi(row + strlen("\nceiling,sgemm,cpu-openblas,cpu,f32,"));
    cr_assert(m >= 256 && m < 4096, "square %d", m);
    const char *end = strchr(row + 1, '\n');
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(end ? end - row - 1 : (long)strlen(row + 1)), row + 1);
    cr_assert(strstr(line, ",ok,") || strstr(line, ",noisy,"), "not measured: %s", line);
    /* and the summary shows it: a number, not '-' */
    cr_assert(strstr(out, "| CPU | ") && !strstr(out, "| CPU | - |"), "%s", out);
    free(csv);
    remove_dir(dir);
}
