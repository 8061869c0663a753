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
    const char *row = strstr(csv, "\nceiling,sgemm,cpu-openblas,cpu,fp32,");
    cr_assert_not_null(row, "no CPU sgemm ceiling row:\n%s", csv);
    int m = atoi(row + strlen("\nceiling,sgemm,cpu-openblas,cpu,fp32,"));
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

/* --dtype: the CPU's GEMM ceiling in fp32 and bf16 (its low-precision
 * path; no fp16 ceiling row, which the sweep says on stderr), each with its
 * dtype, and the summary's ceiling table has a column per precision */
Test(sweep_ceiling, a_gemm_ceiling_row_per_precision_of_the_cpu) {
    char dir[] = "/tmp/dg-ceil-XXXXXX", out[8192], err[8192], path[600];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "ceiling", "--backends", "cpu", "--cpu-cap", "0.05", "--dtype", "bf16,fp16,fp32",
                          "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/ceiling.csv", dir);
    char *csv = read_file(path);
    const char *bf16 = strstr(csv, "\nceiling,sgemm,cpu-openblas,cpu,bf16,");
    const char *fp32 = strstr(csv, "\nceiling,sgemm,cpu-openblas,cpu,fp32,");
    cr_assert(bf16 && fp32 && bf16 < fp32, "the bf16 row, then the fp32 one (--dtype's order):\n%s", csv);
    cr_assert(!strstr(csv, "\nceiling,sgemm,cpu-openblas,cpu,fp16,"), "%s", csv);
    cr_assert(strstr(err, "bench: ceiling: no rows in fp16 (--dtype): the sweep runs in fp32, bf16"), "%s", err);
    cr_assert(strstr(out, "| device | GEMM fp32 GFLOP/s | GEMM tf32 GFLOP/s | GEMM bf16 GFLOP/s | GEMM fp16 GFLOP/s |"),
              "%s", out);
    const char *cpu = strstr(out, "| CPU | ");
    cr_assert(cpu, "%s", out);
    double f32, b16;
    cr_assert_eq(sscanf(cpu, "| CPU | %lf | - | %lf | - |", &f32, &b16), 2, "%s", cpu);
    cr_assert(f32 > 0 && b16 > 0);
    free(csv);
    remove_dir(dir);
}
