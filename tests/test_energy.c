/* test_energy.c: the energy meters (bench/machine/energy.h) and the energy
 * window (bench/runner/energy_window.h), on a fake powercap tree whose
 * counters a thread of the test advances, and on the fake NVML
 * (fake_libnvml.c: a steady 300 W, updated every 10 ms): the units, the
 * wrap, the sum of domains, the refusals and their messages, the rule's
 * window, and the bench's energy columns and notes end to end. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "machine/energy.h"
#include "machine/gpu_monitor.h"
#include "runner/energy_window.h"
#include "writers/csv.h"
#include "shell_util.h"

/* ---- a fake powercap tree ---- */

/* ROOT/intel-rapl:0 (package, PKG_UW), its core subdomain (which a meter
 * must not add: it is inside the package's figure) and its DRAM (DRAM_UW),
 * every counter wrapping at RANGE_UJ: at 240 W they wrap every 0.21 s, so
 * any window of the tests below crosses several wraps.
 *
 * The counters are only as fresh as the writer thread's last turn: on a
 * loaded 2-core machine it can fall tens of milliseconds behind, which over
 * a 0.1 s window reads 15-20% low (CI once saw 169.6 W for 200). The power
 * bounds below are wide enough for that and still catch what they are for:
 * units (a factor 1000), a missed wrap (far off, or negative), the core
 * subdomain added (+150 W), the DRAM left out (-40 W, over a longer window).
 *
 * A test's fake_rapl is static: a failed assertion ends the test without
 * fake_rapl_stop, and the writer must not go on reading a dead stack. */
#define PKG_UW   200000000ull
#define DRAM_UW  40000000ull
#define CORE_UW  150000000ull
#define RANGE_UJ 50000000ull
#define TICK_NS  1000000     /* the counters' update period: 1 ms */

typedef struct fake_rapl {
    char        root[64];
    pthread_t   writer;
    atomic_bool stop;
    bool        running;
} fake_rapl;

static void domain_dir(const char *root, const char *entry, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, entry);
    cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/%s/name", root, entry);
    write_file(path, name);
    snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", root, entry);
    char range[32];
    snprintf(range, sizeof range, "%llu\n", RANGE_UJ);
    write_file(path, range);
    snprintf(path, sizeof path, "%s/%s/energy_uj", root, entry);
    write_file(path, "0\n");
}

/* writes every counter's value there is (microjoules since start, wrapped) */
static void write_counters(const char *root, unsigned long long elapsed_ns) {
    static const struct { const char *entry; unsigned long long uw; } d[] = {
        {"intel-rapl:0", PKG_UW}, {"intel-rapl:0:0", CORE_UW}, {"intel-rapl:0:1", DRAM_UW}};
    for (int i = 0; i < 3; i++) {
        char path[256], tmp[272], v[32];
        snprintf(path, sizeof path, "%s/%s/energy_uj", root, d[i].entry);
        if (access(path, F_OK) != 0) continue; /* a tree without that domain */
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        /* a whole number of microjoules per tick, as the hardware counts */
        unsigned long long uj = elapsed_ns / TICK_NS * (d[i].uw / 1000000 * TICK_NS / 1000);
        snprintf(v, sizeof v, "%llu\n", uj % (RANGE_UJ + 1));
        write_file(tmp, v);
        rename(tmp, path); /* a reader sees the old or the new value, whole */
    }
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *writer_main(void *arg) {
    fake_rapl *f = arg;
    double t0 = mono_s();
    struct timespec nap = {0, TICK_NS / 2};
    while (!atomic_load(&f->stop)) {
        write_counters(f->root, (unsigned long long)((mono_s() - t0) * 1e9));
        nanosleep(&nap, NULL);
    }
    return NULL;
}

static void fake_rapl_make(fake_rapl *f, bool with_dram) {
    snprintf(f->root, sizeof f->root, "/tmp/dg-rapl-XXXXXX");
    tmp_dir(f->root);
    domain_dir(f->root, "intel-rapl:0", "package-0\n");
    domain_dir(f->root, "intel-rapl:0:0", "core\n");
    if (with_dram) domain_dir(f->root, "intel-rapl:0:1", "dram\n");
    atomic_store(&f->stop, false);
    f->running = false;
}

static void fake_rapl_start(fake_rapl *f) {
    cr_assert_eq(pthread_create(&f->writer, NULL, writer_main, f), 0);
    f->running = true;
}

static void fake_rapl_stop(fake_rapl *f) {
    if (!f->running) return;
    atomic_store(&f->stop, true);
    pthread_join(f->writer, NULL);
    f->running = false;
}

static void fake_rapl_free(fake_rapl *f) {
    fake_rapl_stop(f);
    remove_dir(f->root);
}

/* ---- the arithmetic ---- */

/* Catches a wrap counted as a huge negative or positive step, and a
 * counter that never wraps (NVML: range 0) treated as one that does. */
Test(energy, counter_advance_through_the_wrap) {
    cr_assert_eq(bench_energy_advance(100, 350, 1000), 250);
    cr_assert_eq(bench_energy_advance(900, 100, 1000), 200);  /* 900 -> 1000 -> 0 -> 100 */
    cr_assert_eq(bench_energy_advance(1000, 0, 1000), 0);
    cr_assert_eq(bench_energy_advance(5, 5, 1000), 0);
    cr_assert_eq(bench_energy_advance(900, 100, 0), 100);     /* no range: a reset, counted from 0 */
    cr_assert_eq(bench_energy_advance(UINT64_MAX - 1, 3, UINT64_MAX), 4);
}

/* The package and DRAM of a tree that wraps every 0.21 s, read over 1.2
 * seconds: 240 W within 8% (the tick's quantisation and the writer's
 * scheduling on a loaded machine; 200 W without the DRAM), the core subdomain
 * left out (with it: 390 W), the unit microjoules (a meter in millijoules
 * reads 220 kW), several wraps crossed (a meter that ignores them reads
 * far less, or negative). */
Test(energy, rapl_sums_package_and_dram_across_wraps) {
    static fake_rapl f;
    fake_rapl_make(&f, true);
    fake_rapl_start(&f);
    char why[512] = "";
    bench_energy_meter *m = bench_energy_open_rapl(f.root, why, sizeof why);
    cr_assert_not_null(m, "%s", why);
    cr_assert(strstr(bench_energy_what(m), "package-0") && strstr(bench_energy_what(m), "dram-0"), "%s",
              bench_energy_what(m));
    cr_assert_null(strstr(bench_energy_what(m), "core"), "%s", bench_energy_what(m));
    cr_assert_float_eq(bench_energy_least_j(m), 1e-6, 1e-12);
    /* 1 ms written; up to 100 ms read where the writer is starved (26 ms
     * seen on a loaded machine): a period in the wrong unit is 1000x off */
    cr_assert(bench_energy_period_s(m) > 0.0002 && bench_energy_period_s(m) < 0.1, "period %g s",
              bench_energy_period_s(m));
    double j0, j1;
    cr_assert(bench_energy_read(m, &j0, why, sizeof why), "%s", why);
    double t0 = mono_s();
    struct timespec nap = {0, 20000000};
    for (int i = 0; i < 60; i++) {  /* read at least every 20 ms: wraps come every 210 ms */
        nanosleep(&nap, NULL);
        cr_assert(bench_energy_read(m, &j1, why, sizeof why), "%s", why);
    }
    double w = (j1 - j0) / (mono_s() - t0);
    cr_assert(fabs(w - 240) < 0.08 * 240, "%.1f W, not 240 (without the DRAM: 200)", w);
    bench_energy_close(m);
    fake_rapl_free(&f);
}

/* ---- the refusals ---- */

/* Each names the file or folder and what is wrong with it: no powercap
 * folder (a VM), no package domain, a counter that never moves (a
 * frozen or virtualised one), an energy_uj that holds no number. */
Test(energy, rapl_refusals_say_why) {
    char why[512] = "";
    cr_assert_null(bench_energy_open_rapl("/nonexistent-powercap", why, sizeof why));
    cr_assert(strstr(why, "RAPL not readable: /nonexistent-powercap: No such file"), "%s", why);

    static fake_rapl f;
    fake_rapl_make(&f, true);
    why[0] = '\0';
    cr_assert_null(bench_energy_open_rapl(f.root, why, sizeof why)); /* no writer: frozen */
    cr_assert(strstr(why, "did not advance"), "%s", why);

    char path[256];
    snprintf(path, sizeof path, "%s/intel-rapl:0:1/energy_uj", f.root);
    write_file(path, "lots\n");
    why[0] = '\0';
    cr_assert_null(bench_energy_open_rapl(f.root, why, sizeof why));
    cr_assert(strstr(why, "intel-rapl:0:1/energy_uj: no number in it"), "%s", why);
    fake_rapl_free(&f);

    char empty[] = "/tmp/dg-rapl-XXXXXX";
    tmp_dir(empty);
    why[0] = '\0';
    cr_assert_null(bench_energy_open_rapl(empty, why, sizeof why));
    cr_assert(strstr(why, "no package domain"), "%s", why);
    remove_dir(empty);
}

/* ---- the window's rule ---- */

static dg_status nap_1ms(void *arg) {
    (void)arg;
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
    return DG_OK;
}

static dg_status fails(void *arg) {
    (void)arg;
    return dg_fail(DG_ERR_INVALID, "the work failed on purpose");
}

/* A window over host work of about 1 ms a run: it lasts the rule's
 * seconds, the counter moved its least steps, the power is the tree's
 * 200 W (no DRAM domain here) and joules per run = watts x seconds / runs.
 * Then the counter stalls: no figure, and a message that says so, within
 * the window's cap. A failing run is returned as it is. */
Test(energy, window_follows_the_rule) {
    static fake_rapl f;
    fake_rapl_make(&f, false);
    fake_rapl_start(&f);
    char why[512] = "";
    bench_energy_meter *m = bench_energy_open_rapl(f.root, why, sizeof why);
    cr_assert_not_null(m, "%s", why);
    bench_energy e;
    cr_assert_eq(bench_energy_measure(m, NULL, nap_1ms, NULL, 0.001, 2.0, &e, why, sizeof why), DG_OK, "%s", why);
    cr_assert_geq(e.seconds, bench_energy_window_s(m));
    cr_assert_geq(e.seconds, BENCH_ENERGY_MIN_S);
    cr_assert(e.runs >= 10, "%d runs", e.runs);
    cr_assert(fabs(e.watts - 200) < 0.25 * 200, "%.1f W, not 200", e.watts);
    cr_assert_float_eq(e.joules * e.runs, e.watts * e.seconds, 1e-9 * e.watts * e.seconds);
    cr_assert_geq(e.joules * e.runs, BENCH_ENERGY_STEPS * bench_energy_least_j(m));

    cr_assert_eq(bench_energy_measure(m, NULL, fails, NULL, 0.001, 2.0, &e, why, sizeof why), DG_ERR_INVALID);

    fake_rapl_stop(&f);
    double t0 = mono_s();
    why[0] = '\0';
    cr_assert_eq(bench_energy_measure(m, NULL, nap_1ms, NULL, 0.001, 0.5, &e, why, sizeof why), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(why, "short of the rule"), "%s", why);
    cr_assert_lt(mono_s() - t0, 1.5, "the stalled window ran past its cap");
    bench_energy_close(m);
    fake_rapl_free(&f);
}

/* ---- NVML ---- */

/* The fake board's counter: millijoules (a meter in microjoules reads
 * 0.3 W), a period of 10 ms measured, an idle figure of 300 W. */
Test(energy, nvml_counter_in_millijoules) {
    void *fake = dlopen(DG_FAKE_NVML, RTLD_NOW | RTLD_GLOBAL);
    cr_assert_not_null(fake, "%s", dlerror());
    char why[512] = "";
    bench_gpu_monitor *mon = bench_gpu_monitor_open("0000:00:06.0", why, sizeof why);
    cr_assert_not_null(mon, "%s", why);
    bench_energy_meter *m = bench_energy_open_nvml(&mon, 1, why, sizeof why);
    cr_assert_not_null(m, "%s", why);
    cr_assert_str_eq(bench_energy_what(m), "NVML total energy: 1 GPU");
    cr_assert_float_eq(bench_energy_least_j(m), 1e-3, 1e-12);
    /* 10 ms, give or take where the test is not scheduled at every update */
    cr_assert(bench_energy_period_s(m) >= 0.005 && bench_energy_period_s(m) < 0.03, "period %g s",
              bench_energy_period_s(m));
    cr_assert_float_eq(bench_energy_window_s(m), 20 * bench_energy_period_s(m), 1e-12);
    double w = 0;
    cr_assert(bench_energy_idle_w(m, &w, why, sizeof why), "%s", why);
    cr_assert(fabs(w - 300) < 0.05 * 300, "%.1f W, not 300", w);
    bench_energy_close(m);
    why[0] = '\0';
    cr_assert_null(bench_energy_open_nvml(NULL, 0, why, sizeof why));
    cr_assert(strstr(why, "NVML energy not available"), "%s", why);
    bench_gpu_monitor_close(mon);
    dlclose(fake);
}

/* ---- end to end: the bench's columns and notes ---- */

static char *column_of(const char *csv, const char *row_start, int col, char *out, size_t n) {
    const char *r = strstr(csv, row_start);
    if (!r) return NULL;
    for (int i = 0; i < col && r; i++) r = strchr(r, ',') ? strchr(r, ',') + 1 : NULL;
    if (!r) return NULL;
    size_t len = strcspn(r, ",\n");
    snprintf(out, n, "%.*s", (int)len, r);
    return out;
}

/* With the fake tree as the machine's powercap (DG_POWERCAP_ROOT), a CPU
 * row carries energy_j and avg_w near 200 W (25%: the writer thread of the
 * fake counters shares the machine with the bench) and the metadata names the
 * meter and its idle figure; with --no-energy, or on a tree it cannot
 * read, the columns stay empty and the note says why. Columns by the
 * header's order: energy_j is the 25th (0-based 24), avg_w the 26th. */
Test(energy, bench_rows_carry_energy_or_say_why) {
    static fake_rapl f;
    fake_rapl_make(&f, false);
    fake_rapl_start(&f);
    char dir[] = "/tmp/dg-energy-XXXXXX", out[4096], err[4096], path[128], v[64];
    tmp_dir(dir);
    setenv("DG_POWERCAP_ROOT", f.root, 1);
    /* one thread: the other core is the fake counters' writer's (with
     * every core busy it falls behind, and the counters with it) */
    const char *args[] = {"--sweep", "ops", "--quick", "--backends", "cpu", "--case", "relu", "--impl", "cpu-fwd",
                          "--threads", "1", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "# energy: cpu: RAPL: package-0, updated every"), "%s", csv);
    const char *idle = strstr(csv, "# energy idle at start of sweep: cpu ");
    cr_assert_not_null(idle, "%s", csv);
    double idle_w = atof(idle + strlen("# energy idle at start of sweep: cpu "));
    cr_assert(fabs(idle_w - 200) < 0.25 * 200, "idle %.1f W, not 200", idle_w);
    cr_assert_not_null(column_of(csv, "ops,relu,cpu-fwd,cpu,fp32,1024,1,1,1,1,", 25, v, sizeof v), "%s", csv);
    double w = atof(v);
    cr_assert(fabs(w - 200) < 0.25 * 200, "avg_w '%s'\n%s", v, csv);
    cr_assert_not_null(column_of(csv, "ops,relu,cpu-fwd,cpu,fp32,1024,1,1,1,1,", 24, v, sizeof v));
    cr_assert_gt(atof(v), 0, "energy_j '%s'", v);
    free(csv);

    fake_rapl_stop(&f); /* frozen counters: the meter is refused */
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    csv = read_file(path);
    cr_assert(strstr(csv, "# energy: cpu: none (RAPL not readable: the counter"), "%s", csv);
    cr_assert_not_null(column_of(csv, "ops,relu,cpu-fwd,cpu,fp32,1024,1,1,1,1,", 24, v, sizeof v));
    cr_assert_str_eq(v, "NaN");
    cr_assert(strstr(csv, "no energy: RAPL not readable"), "%s", csv);
    free(csv);

    const char *no[] = {"--sweep", "ops", "--quick", "--backends", "cpu", "--case", "relu", "--impl", "cpu-fwd",
                        "--threads", "1", "--out", dir, "--no-energy", NULL};
    cr_assert_eq(run_bench(dir, no, out, err, 120), 0, "%s", err);
    csv = read_file(path);
    cr_assert(strstr(csv, "# energy: not measured (--no-energy)"), "%s", csv);
    cr_assert_null(strstr(csv, "no energy:"), "%s", csv);
    free(csv);
    unsetenv("DG_POWERCAP_ROOT");
    remove_dir(dir);
    fake_rapl_free(&f);
}

/* A Fashion-MNIST stand-in of n images (IDX files, as tests/test_data.c's)
 * in dir, for the train sweep */
static void write_idx(const char *dir, const char *split, int n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, 28, 0, 0, 0, 28};
    fwrite(head, 1, sizeof head, f);
    for (int i = 0; i < n * 28 * 28; i++) fputc(i % 251, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    const uint8_t lhead[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
    fwrite(lhead, 1, sizeof lhead, f);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    fclose(f);
}

/* A row that brought its own samples (the train sweep times an epoch
 * itself: no work to run again) gets no energy window, and says so, where
 * a meter is there. Before, the window called its NULL work: the train
 * sweep crashed on every GPU (NVML) and wherever RAPL is readable. */
Test(energy, rows_timed_by_their_sweep_say_why_they_have_no_energy) {
    static fake_rapl f;
    fake_rapl_make(&f, false);
    fake_rapl_start(&f);
    char dir[] = "/tmp/dg-energy-XXXXXX", out[4096], err[8192], path[128];
    tmp_dir(dir);
    write_idx(dir, "train", 64);
    write_idx(dir, "t10k", 32);
    setenv("DG_POWERCAP_ROOT", f.root, 1);
    const char *args[] = {"--sweep", "train", "--backends", "cpu", "--sizes", "16", "--case", "logreg",
                          "--threads", "1", "--data", dir, "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    snprintf(path, sizeof path, "%s/train.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "# energy: cpu: RAPL"), "the meter was not there: %s", csv);
    cr_assert(strstr(csv, "no energy: an epoch is timed once by the trainer"), "%s", csv);
    free(csv);
    unsetenv("DG_POWERCAP_ROOT");
    remove_dir(dir);
    fake_rapl_free(&f);
}

/* ---- the summary's energy crossover ---- */

/* A gemm.csv whose CPU is faster below n = 512 and uses less energy below
 * n = 1024: the summary gives both crossovers, each from its own columns
 * (an energy crossover read from the times would say 512), and the peak
 * GFLOP/J of each implementation (flops / joules: at n = 1024 the GPU's
 * 2.1 GFLOP / 0.01 J = 215 GFLOP/J). */
Test(energy, summary_gives_the_energy_crossover) {
    char dir[] = "/tmp/dg-esum-XXXXXX", path[128];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    char csv[4096] = "# duograd bench\n" BENCH_CSV_HEADER "\n";
    static const struct { const char *impl, *backend; long long n; double ms, j; } rows[] = {
        {"cpu-openblas", "cpu", 256, 0.1, 0.001},  {"gpu-cublas", "gpu", 256, 0.2, 0.02},
        {"cpu-openblas", "cpu", 512, 1.0, 0.01},   {"gpu-cublas", "gpu", 512, 0.5, 0.05},
        {"cpu-openblas", "cpu", 1024, 8.0, 0.08},  {"gpu-cublas", "gpu", 1024, 1.0, 0.01},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double flops = 2.0 * rows[i].n * rows[i].n * rows[i].n, gflops = flops / (rows[i].ms * 1e6);
        size_t len = strlen(csv);
        snprintf(csv + len, sizeof csv - len,
                 "gemm,square,%s,%s,fp32,%lld,%lld,%lld,0,2,0,0,0,2,10,%g,%g,%g,1,%g,NaN,0,0,0,%g,%g,%g,NaN,1e-7,"
                 "f64,ok,\n", rows[i].impl, rows[i].backend, rows[i].n, rows[i].n, rows[i].n, rows[i].ms, rows[i].ms,
                 rows[i].ms, gflops, rows[i].j, rows[i].j / rows[i].ms * 1e3, flops / 1e9 / rows[i].j);
    }
    write_file(path, csv);
    char out[4096], err[4096];
    const char *args[] = {"plot", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 60), 0, "%s", err);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = read_file(path);
    cr_assert(strstr(sum, "| kernels only | fp32 | 512 | 1024 |"), "%s", sum);
    cr_assert(strstr(sum, "| gpu-cublas | fp32 | 2147.5 | 1024 | 214.7 | 1024 |"), "%s", sum);
    free(sum);
    remove_dir(dir);
}

/* `bench profile` gives the step's joules from the same window, and says
 * why where there is no counter. */
Test(energy, profile_gives_the_step_energy) {
    static fake_rapl f;
    fake_rapl_make(&f, false);
    fake_rapl_start(&f);
    char dir[] = "/tmp/dg-eprof-XXXXXX", out[4096], err[4096];
    tmp_dir(dir);
    setenv("DG_POWERCAP_ROOT", f.root, 1);
    const char *args[] = {"profile", "--model", "mlp", "--backend", "cpu", "--batch", "32", "--steps", "3",
                          "--threads", "1", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    const char *e = strstr(out, "energy: ");
    cr_assert_not_null(e, "%s", out);
    cr_assert(strstr(e, " J a step, ") && strstr(e, "W, ") && strstr(e, "samples/J (RAPL: package-0, "), "%s", e);
    double w = atof(strstr(e, " J a step, ") + strlen(" J a step, "));
    cr_assert(fabs(w - 200) < 0.25 * 200, "%.1f W, not 200: %s", w, e);
    fake_rapl_stop(&f);
    cr_assert_eq(run_bench(dir, args, out, err, 120), 0, "%s", err);
    cr_assert(strstr(out, "energy: - (no energy: RAPL not readable)"), "%s", out);
    unsetenv("DG_POWERCAP_ROOT");
    remove_dir(dir);
    fake_rapl_free(&f);
}

/* The resnet summary's energy crossover, from a resnet.csv whose GPU step
 * is faster from batch 8 but cheaper in joules only from batch 32: the
 * energy column reads the joules, not the times (it would say 8). */
Test(energy, resnet_summary_gives_the_energy_crossover) {
    char dir[] = "/tmp/dg-eres-XXXXXX", path[128];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/resnet.csv", dir);
    char csv[4096] = "# duograd bench\n" BENCH_CSV_HEADER "\n";
    static const struct { const char *impl, *backend; long long b; double ms, j; } rows[] = {
        {"cpu", "cpu", 8, 40, 2.0},    {"gpu-graph", "gpu", 8, 5, 3.0},
        {"cpu", "cpu", 32, 160, 8.0},  {"gpu-graph", "gpu", 32, 10, 4.0},
        {"cpu", "cpu", 128, 640, 32},  {"gpu-graph", "gpu", 128, 30, 12},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t len = strlen(csv);
        snprintf(csv + len, sizeof csv - len,
                 "resnet,resnet18-cifar,%s,%s,fp32,%lld,32,10,%lld,2,0,0,0,2,5,%g,%g,%g,1,NaN,NaN,0,1000,900,%g,%g,"
                 "NaN,%g,1e-6,f64-step@b2,ok,\n", rows[i].impl, rows[i].backend, rows[i].b, rows[i].b, rows[i].ms,
                 rows[i].ms, rows[i].ms, rows[i].j, rows[i].j / rows[i].ms * 1e3, (double)rows[i].b / rows[i].j);
    }
    write_file(path, csv);
    char out[4096], err[4096];
    const char *args[] = {"plot", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 60), 0, "%s", err);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = read_file(path);
    cr_assert(strstr(sum, "| cifar | <= 8 (GPU faster at every size) | n/a (not measured on both) | 32 |"), "%s", sum);
    free(sum);
    remove_dir(dir);
}
