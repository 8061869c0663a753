/* test_sweep_train.c: the train sweep (bench/sweeps/train/) in every
 * precision, on a tiny IDX data set of the Fashion-MNIST layout: each
 * row's dtype, its check word, its float64 error within the precision's
 * tolerance and its precision's policy (a row whose step lost its dtype on
 * the way to the step builder is "wrong", not an fp32 row named bf16);
 * bench plot's section with a table row and a chart per precision, and
 * bench train's curves of each precision apart; the
 * GPU's rows (skipped, with the reason, where no CUDA device answers);
 * and bench_step_policy itself, against every step built in another
 * precision. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "core/check/step_check.h"
#include "runner/step_policy.h"
#include "runner/step_tol.h"
#include "writers/csv.h"
#include "gpu_util.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"

TestSuite(train_sweep, .fini = held_release);

/* n images of 28 x 28 (the models' 784 inputs) and labels 0..9, as
 * dg_dataset_load reads them: DIR/SPLIT-images-idx3-ubyte and -labels- */
static void write_idx(const char *dir, const char *split, int n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, 28, 0, 0, 0, 28};
    fwrite(head, 1, sizeof head, f);
    for (int i = 0; i < n * 28 * 28; i++) fputc((i * 37) % 251, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint8_t lhead[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
    fwrite(lhead, 1, sizeof lhead, f);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    fclose(f);
}

static bool measured(const csv_rec *r) { return !strcmp(r->status, "ok") || !strcmp(r->status, "noisy"); }

/* `bench --sweep train` on backend `be` at batch 16 over 64 images in
 * every precision into dir; its rows (held), n of them */
static csv_rec *train_rows(const char *dir, const char *be, int *n) {
    char cmd[1024], out[1 << 14], path[256];
    write_idx(dir, "train", 64);
    write_idx(dir, "t10k", 32);
    snprintf(cmd, sizeof cmd, "%s --sweep train --backends %s --sizes 16 --dtype all --threads 1 --data %s --out %s",
             DG_BENCH_PATH, be, dir, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/train.csv", dir);
    csv_rec *r = held_ptr(bench_csv_read(path, n));
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

/* Each row: measured, in the precision asked (logreg and mlp, fp32, tf32,
 * bf16, fp16 in --dtype's order), its float64 error within the
 * precision's tolerance (bench_step_tol_in of the MLP step's), its check
 * word naming what was checked. tf32_step: the precision a tf32 row's
 * step runs in (the CPU's: fp32). */
static void expect_rows(const csv_rec *r, int n, const char *be, dg_precision tf32_step) {
    static const char *const models[] = {"logreg", "mlp"};
    cr_assert_eq(n, 8, "2 models in 4 precisions on %s: %d rows", be, n);
    for (int i = 0; i < n; i++) {
        dg_precision p = (dg_precision)(i % DG_PREC_COUNT), step = p == DG_PREC_TF32 ? tf32_step : p;
        cr_assert(measured(&r[i]), "%s %s: %s: %s", r[i].name, dg_precision_name(r[i].precision), r[i].status,
                  r[i].note);
        cr_assert_str_eq(r[i].name, models[i / DG_PREC_COUNT]);
        cr_assert_str_eq(r[i].backend, be);
        cr_assert_eq(r[i].precision, p, "row %d: dtype %s, want %s", i, dg_precision_name(r[i].precision),
                     dg_precision_name(p));
        dg_mlp_cfg cfg;
        dg_mlp_parse_widths("784-10", &cfg);
        bench_step_tol tol = bench_step_tol_in(step, bench_mlp_step(&cfg).tol);
        char tol_text[32], want[48];
        snprintf(tol_text, sizeof tol_text, "%.2g/%.2g", tol.loss, tol.update);
        bench_step_check_word(want, sizeof want, BENCH_STEP_CHECK, step, tol_text);
        cr_assert_str_eq(r[i].check, want, "%s %s", r[i].name, dg_precision_name(p));
        cr_assert(r[i].max_rel_err >= 0 && r[i].max_rel_err <= tol.update, "%s %s: max_rel_err %g", r[i].name,
                  dg_precision_name(p), r[i].max_rel_err);
        cr_assert(r[i].median_ms > 0, "%s %s: %g ms", r[i].name, dg_precision_name(p), r[i].median_ms);
        if (step != p) cr_assert(strstr(r[i].note, "no TF32 on the CPU: the fp32 step"), "%s", r[i].note);
    }
}

/* CPU rows in every precision: bf16 and fp16 checked against the float64
 * step of their own graph and carrying their policy (a bf16 row that
 * trained fp32 fails here as "wrong": the planted bug of a precision not
 * handed to the step builder), the CPU's tf32 rows the fp32 step; bench
 * plot keeps the precisions apart: a table row and a chart each. */
Test(train_sweep, cpu_rows_in_every_precision_are_checked_in_their_policy) {
    char dir[] = "/tmp/dg-trainsw-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = train_rows(dir, "cpu", &n);
    expect_rows(r, n, "cpu", DG_PREC_FP32);
    held_free(r);
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| model | dtype | GPU vs CPU crossover | CPU epoch s at 128 | GPU epoch s at 128 |"),
              "%s", sum);
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        char row[64];
        snprintf(row, sizeof row, "| mlp | %s | n/a (not measured on both) |", dg_precision_name((dg_precision)p));
        cr_assert(strstr(sum, row), "no '%s' in: %s", row, sum);
    }
    held_free(sum);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        static const char *const charts[] = {"train_epoch_time", "train_epoch_time_tf32", "train_epoch_time_bf16",
                                             "train_epoch_time_fp16"};
        for (int i = 0; i < 4; i++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s.png", dir, charts[i]);
            cr_assert(access(path, F_OK) == 0, "no %s", path);
        }
    }
}

/* The GPU's rows in every precision, tf32 on its tensor cores. */
Test(train_sweep, gpu_rows_in_every_precision_are_checked_in_their_policy) {
    dg_backend_free(test_backend_open(true)); /* skips without a device */
    char dir[] = "/tmp/dg-trainsw-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = train_rows(dir, "gpu", &n);
    expect_rows(r, n, "gpu", DG_PREC_TF32);
    held_free(r);
}

/* bench_step_policy tells every policy from the others on the MLP's step
 * graph: a step built in precision b passes as c exactly where both have
 * the same product dtype and loss scaling (fp32 and tf32 share one graph).
 * What it catches: a bf16 or fp16 row whose step was built in fp32, an
 * fp16 row without its loss scaling (built as bf16 here, the graph's
 * only other 16-bit form), a bf16 row built as fp16 and the reverse. */
Test(train_sweep, step_policy_tells_each_precision_from_the_others) {
    dg_mlp_cfg cfg;
    dg_mlp_parse_widths("784-32-10", &cfg);
    bench_step_spec spec = bench_mlp_step(&cfg);
    for (int b = 0; b < DG_PREC_COUNT; b++) {
        dg_graph *g = dg_graph_new();
        cr_assert_not_null(g);
        dg_model m;
        dg_train_step ts;
        ASSERT_OK(dg_mlp_new(g, &cfg, 1, &m));
        ASSERT_OK(dg_train_step_build_opts(g, &m, 4, &spec.optim, &(dg_train_step_opts){.precision = (dg_precision)b},
                                           &ts));
        for (int c = 0; c < DG_PREC_COUNT; c++) {
            dg_precision pb = (dg_precision)b, pc = (dg_precision)c;
            bool same = dg_precision_dtype(pb) == dg_precision_dtype(pc) &&
                        (pb == DG_PREC_FP16) == (pc == DG_PREC_FP16);
            char why[128];
            bool ok = bench_step_policy(g, &ts, pc, why, sizeof why);
            cr_expect_eq(ok, same, "built %s, checked as %s: %s (%s)", dg_precision_name(pb), dg_precision_name(pc),
                         ok ? "passes" : "fails", why);
            if (same) cr_expect(strstr(why, "2 of 2 forward products"), "%s", why);
        }
        dg_graph_free(g);
    }
}

/* bench train's curves in two precisions (train-logreg-cpu.csv and
 * train-logreg-cpu-bf16.csv) are drawn and tabled apart: "cpu" and
 * "cpu bf16", each its own line and row. */
Test(train_sweep, curves_of_each_precision_are_kept_apart) {
    char dir[] = "/tmp/dg-trainsw-XXXXXX", cmd[1024], out[1 << 14];
    tmp_dir(dir);
    held_dir(dir);
    write_idx(dir, "train", 64);
    write_idx(dir, "t10k", 32);
    static const char *const dtypes[] = {"fp32", "bf16"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s train --model logreg --dtype %s --epochs 2 --batch 16 --threads 1 --data %s "
                 "--out %s", DG_BENCH_PATH, dtypes[i], dir, dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    }
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| logreg | cpu | 2 | ") && strstr(sum, "| logreg | cpu bf16 | 2 | "), "%s", sum);
    /* no curve where no file is: each row read from its own precision's file */
    cr_assert(!strstr(sum, "| logreg | cpu fp16 |") && !strstr(sum, "| logreg | cpu tf32 |"), "%s", sum);
    held_free(sum);
}
