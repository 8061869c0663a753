/* test_charts.c: what a chart shows beside its series (bench/charts/plot.c).
 * Its provenance (machine, date, commit from the CSV's `#` lines) is on the
 * image; a log2 x axis is labelled at powers of two as 4K, 64K, 1M (not
 * gnuplot's 66k); a title that promises ceilings draws them or says that
 * none was measured. The scripts are read back from plot-data/; drawing
 * needs gnuplot (the tests that draw skip without it). */
#include <math.h>
#include <string.h>

#include "charts/gnuplot.h"
#include "charts/plot.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"

TestSuite(charts, .fini = held_release);

Test(charts, powers_of_two_read_as_k_m_g) {
    static const struct { double v; const char *want; } cases[] = {
        {1, "1"},       {512, "512"},         {1024, "1K"},      {4096, "4K"},       {65536, "64K"},
        {1 << 20, "1M"}, {1 << 30, "1G"},     {3000, "3000"},    {1536, "1536"},     {0.5, "0.5"},
        {16777216, "16M"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[32];
        bench_pow2_label(cases[i].v, buf, sizeof buf);
        cr_assert_str_eq(buf, cases[i].want, "%g", cases[i].v);
    }
}

Test(charts, provenance_comes_from_the_csv_metadata) {
    char dir[] = "/tmp/dg-charts-XXXXXX", buf[256];
    tmp_dir(dir);
    held_dir(dir);
    FILE *f = bench_csv_open(dir, "gemm", "# cpu: Test CPU 9000\n# cores: 4\n# gpu: none (built without CUDA)\n"
                                          "# date: 2026-11-28T10:00:00Z\n# git commit: abc1234\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    ASSERT_OK(bench_csv_finish(f, dir, "gemm", true));
    bench_csv_provenance(dir, "gemm", buf, sizeof buf);
    cr_assert_str_eq(buf, "cpu Test CPU 9000 (4 cores), gpu none (built without CUDA), 2026-11-28T10:00:00Z, "
                          "commit abc1234");
    bench_csv_provenance(dir, "ops", buf, sizeof buf);
    cr_assert_str_eq(buf, "", "no ops.csv: no provenance");
    /* the same from a text of '#' lines (a profile JSON's context) */
    bench_meta_provenance("# duograd bench 0.1.0\n# git commit: abc1234\n# cpu: Test CPU 9000\n# cores: 4\n"
                          "# gpu: H200, 132 SMs\n# date: 2026-11-28T10:00:00Z\n# cpuish: no", buf, sizeof buf);
    cr_assert_str_eq(buf, "cpu Test CPU 9000 (4 cores), gpu H200, 132 SMs, 2026-11-28T10:00:00Z, commit abc1234");
    bench_meta_provenance("no metadata", buf, sizeof buf);
    cr_assert_str_eq(buf, "");
    bench_meta_provenance(NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, "");
}

/* draws c in dir and returns its script's text (held) */
static char *drawn(bench_report *rep, const bench_chart *c) {
    bench_chart_draw(rep, c);
    cr_assert(!rep->failed, "gnuplot failed on %s", c->file);
    char path[256];
    snprintf(path, sizeof path, "%s/plot-data/%s.gp", rep->dir, c->file);
    return held_ptr(read_file(path));
}

Test(charts, a_chart_carries_provenance_pow2_ticks_and_the_ceilings_it_promises) {
    if (!bench_gnuplot_found()) cr_skip_test("gnuplot not found: no chart is drawn");
    char dir[] = "/tmp/dg-charts-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    bench_report rep = {.dir = dir, .gnuplot = true,
                        .provenance = "cpu Test CPU (4 cores), gpu none, 2026, commit c0ffee"};
    bench_chart c = {"rate", "rate against measured ceilings", "elements", "GFLOP/s", true, .vline = NAN};
    bench_series s = {.title = "cpu-x", .n = 3, .x = {4096, 65536, 1 << 20}, .y = {1, 2, 3}, .lo = {1, 2, 3},
                      .hi = {1, 2, 3}};
    bench_chart_add(&c, s);
    char *gp = drawn(&rep, &c);
    cr_assert(strstr(gp, "'4K' 4096") && strstr(gp, "'64K' 65536") && strstr(gp, "'1M' 1048576"), "%s", gp);
    cr_assert(!strstr(gp, "%c"), "gnuplot's SI prefixes (65536 as 66k) are gone: %s", gp);
    cr_assert(strstr(gp, "set label 'cpu Test CPU (4 cores), gpu none, 2026, commit c0ffee' at screen"), "%s", gp);
    cr_assert(strstr(gp, "set title 'rate against measured ceilings (no ceiling measured"), "%s", gp);
    bench_chart_hline(&c, 10, "CPU ceiling");
    gp = drawn(&rep, &c);
    cr_assert(strstr(gp, "set title 'rate against measured ceilings'\n") && strstr(gp, "10 with lines"), "%s", gp);
    /* a folder without metadata: no label */
    rep.provenance[0] = '\0';
    gp = drawn(&rep, &c);
    cr_assert(!strstr(gp, "set label"), "%s", gp);
}
