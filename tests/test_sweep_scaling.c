/* test_sweep_scaling.c: the scaling sweep (bench/sweeps/scaling/) in
 * every precision. One process (not under MPI; tests/test_mpi.sh runs 2
 * ranks): the CPU rows of one rank in fp32, bf16 and fp16, each checked
 * at batch 2 against its float64 step with the precision's tolerances and
 * carrying its policy, the CPU's tf32 rows the fp32 step; the GPU rows
 * on 2 GPUs in bf16 and fp16 (skipped, with the reason, where fewer
 * answer), checked against each slice alone as in fp32; and bench plot's
 * efficiencies, each within one precision. */
#include <string.h>

#include "core/check/step_check.h"
#include "runner/step_policy.h"
#include "runner/step_tol.h"
#include "writers/csv.h"
#include "gpu_util.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"

TestSuite(scaling_sweep, .fini = held_release);

static bool measured(const csv_rec *r) { return !strcmp(r->status, "ok") || !strcmp(r->status, "noisy"); }

/* `bench --sweep scaling ARGS --out dir`'s rows (held), n of them */
static csv_rec *scaling_rows(const char *dir, const char *args, int *n) {
    char cmd[1024], out[1 << 14], path[256];
    snprintf(cmd, sizeof cmd, "%s --sweep scaling %s --out %s", DG_BENCH_PATH, args, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/scaling.csv", dir);
    csv_rec *r = held_ptr(bench_csv_read(path, n));
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

/* One CPU rank's rows, mlp and charlm, weak and strong, in fp32, tf32,
 * bf16 and fp16: checked ("f64-step@b2", in bf16 "f64-step@b2+bf16-policy
 * tol 0.02/0.15") and timed. A bf16 row whose step lost its precision on
 * the way to dp_graph_new is "wrong" here (its graph has no bf16 product),
 * as is an fp16 row without loss scaling. */
Test(scaling_sweep, one_cpu_rank_in_every_precision_is_checked_in_its_policy) {
    char dir[] = "/tmp/dg-scalesw-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = scaling_rows(dir, "--backends cpu --threads 1 --warmup 1 --reps 2 --dtype all", &n);
    cr_assert_eq(n, 16, "2 models, weak and strong, 4 precisions, 1 rank: %d rows", n);
    for (int i = 0; i < n; i++) {
        dg_precision p = (dg_precision)(i % DG_PREC_COUNT), step = p == DG_PREC_TF32 ? DG_PREC_FP32 : p;
        cr_assert(measured(&r[i]) && !strcmp(r[i].impl, "cpu-mpi") && r[i].m == 1, "%s %s %s: %s: %s", r[i].name,
                  r[i].impl, dg_precision_name(r[i].precision), r[i].status, r[i].note);
        cr_assert_eq(r[i].precision, p, "%s: dtype %s, want %s", r[i].name, dg_precision_name(r[i].precision),
                     dg_precision_name(p));
        /* the MLP's and the char-LM's step tolerances are the same (step_check.h) */
        dg_mlp_cfg cfg;
        dg_mlp_parse_widths("784-10", &cfg);
        bench_step_tol tol = bench_step_tol_in(step, bench_mlp_step(&cfg).tol);
        char tol_text[32], want[48];
        snprintf(tol_text, sizeof tol_text, "%.2g/%.2g", tol.loss, tol.update);
        bench_step_check_word(want, sizeof want, "f64-step@b2", step, tol_text);
        cr_assert_str_eq(r[i].check, want, "%s %s", r[i].name, dg_precision_name(p));
        cr_assert(r[i].max_rel_err <= tol.update, "%s %s: max_rel_err %g", r[i].name, dg_precision_name(p),
                  r[i].max_rel_err);
        if (step != p) cr_assert(strstr(r[i].note, "no TF32 on the CPU: the fp32 step"), "%s", r[i].note);
    }
    held_free(r);
}

/* 2 GPUs, one process: the MLP's weak and strong rows in bf16 and fp16 on
 * 1 and 2 GPUs, each checked (one GPU: against float64 at batch 2; two:
 * each replica against its slice alone) and carrying its policy. */
Test(scaling_sweep, gpu_rows_in_bf16_and_fp16_are_checked_in_their_policy) {
#ifdef DG_HAVE_CUDA
    gpu_usable_or_skip();
    int gpus = dg_gpu_device_count();
    if (gpus < 2) cr_skip_test("%d CUDA device%s: the scaling sweep's GPU rows need 2", gpus, gpus == 1 ? "" : "s");
#else
    GPU_SKIP_OR_FAIL("built without CUDA (DG_CUDA=OFF): no GPU rows to test");
#endif
    char dir[] = "/tmp/dg-scalesw-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    int n;
    csv_rec *r = scaling_rows(dir, "--backends gpu --quick --case 'mlp-*' --impl gpu-dp --dtype bf16,fp16 "
                                   "--warmup 1 --reps 3", &n);
    int checked[2][2] = {{0}}; /* [precision bf16, fp16][one GPU, several] */
    for (int i = 0; i < n; i++) {
        cr_assert(measured(&r[i]), "%s %lld GPUs %s: %s: %s", r[i].name, r[i].m, dg_precision_name(r[i].precision),
                  r[i].status, r[i].note);
        cr_assert(r[i].precision == DG_PREC_BF16 || r[i].precision == DG_PREC_FP16, "%s",
                  dg_precision_name(r[i].precision));
        char want[48];
        if (r[i].m == 1) {
            bench_step_tol tol = bench_step_tol_in(r[i].precision, (bench_step_tol){BENCH_STEP_LOSS_TOL,
                                                                                    BENCH_STEP_UPDATE_TOL, 0, false});
            char tol_text[32];
            snprintf(tol_text, sizeof tol_text, "%.2g/%.2g", tol.loss, tol.update);
            bench_step_check_word(want, sizeof want, "f64-step@b2", r[i].precision, tol_text);
        } else {
            bench_step_check_word(want, sizeof want, "dp=mean-of-slices", r[i].precision, "1e-5/1e-4");
        }
        cr_assert_str_eq(r[i].check, want);
        checked[r[i].precision == DG_PREC_FP16][r[i].m > 1]++;
    }
    for (int p = 0; p < 2; p++)
        cr_assert(checked[p][0] == 2 && checked[p][1] >= 2, "%s: %d rows on one GPU, %d on several", p ? "fp16" : "bf16",
                  checked[p][0], checked[p][1]);
    held_free(r);
}

/* rows of the scaling sweep written by hand: case, impl, precision, ranks
 * or GPUs, batch per one, step ms */
typedef struct hand_row { const char *name, *impl; dg_precision p; int m, per; double ms; } hand_row;

static void write_rows(const char *dir, const char *backend, const hand_row *rows, size_t n) {
    FILE *f = bench_csv_open(dir, "scaling", "# rows written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    for (size_t i = 0; i < n; i++) {
        double ms = rows[i].ms;
        bench_row r = {.sweep = "scaling", .name = rows[i].name, .impl = rows[i].impl, .backend = backend,
                       .precision = rows[i].p, .m = rows[i].m, .n = rows[i].per, .k = 2678824,
                       .batch = rows[i].m * rows[i].per, .threads = 1, .st = {ms, ms, ms, 0, 5, NULL, 0, false},
                       .max_rel_err = 1e-7, .check = "mpi=one-process", .status = "ok"};
        bench_csv_write(f, &r);
    }
    ASSERT_OK(bench_csv_finish(f, dir, "scaling", true));
}

/* bench plot's efficiencies within one precision: bf16's 2-rank row
 * against bf16's one rank (10/12.5 = 80%), not against fp32's (20/12.5 =
 * 160%); each precision its own table rows, and on GPUs its own chart. */
Test(scaling_sweep, efficiency_is_computed_within_one_precision) {
    char dir[] = "/tmp/dg-scalesw-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    static const hand_row cpu[] = {
        {"mlp-weak", "cpu-mpi", DG_PREC_FP32, 1, 128, 20.0}, {"mlp-weak", "cpu-mpi", DG_PREC_FP32, 2, 128, 25.0},
        {"mlp-weak", "cpu-mpi", DG_PREC_BF16, 1, 128, 10.0}, {"mlp-weak", "cpu-mpi", DG_PREC_BF16, 2, 128, 12.5},
    };
    write_rows(dir, "cpu", cpu, sizeof cpu / sizeof *cpu);
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| mlp | fp32 | 2 | 25.000 | - | 80.0% | - |") &&
              strstr(sum, "| mlp | bf16 | 2 | 12.500 | - | 80.0% | - |"), "summary: %s", sum);
    cr_assert_null(strstr(sum, "160.0%"), "an efficiency across precisions: %s", sum);
    held_free(sum);
    static const hand_row gpu[] = {
        {"mlp-weak", "gpu-dp", DG_PREC_FP32, 1, 1024, 2.0}, {"mlp-weak", "gpu-dp", DG_PREC_FP32, 2, 1024, 2.5},
        {"mlp-weak", "gpu-dp", DG_PREC_BF16, 1, 1024, 1.0}, {"mlp-weak", "gpu-dp", DG_PREC_BF16, 2, 1024, 1.25},
    };
    write_rows(dir, "gpu", gpu, sizeof gpu / sizeof *gpu);
    sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| mlp | fp32 | 2 | 2048 | 2.500 | 819200 | 80.0% | 20.0% |") &&
              strstr(sum, "| mlp | bf16 | 2 | 2048 | 1.250 | 1638400 | 80.0% | 20.0% |"), "summary: %s", sum);
    cr_assert_null(strstr(sum, "160.0%"), "an efficiency across precisions: %s", sum);
    held_free(sum);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        char path[256];
        snprintf(path, sizeof path, "%s/scaling_efficiency_bf16.png", dir);
        cr_assert(access(path, F_OK) == 0, "no %s", path);
        snprintf(path, sizeof path, "%s/scaling_efficiency.png", dir);
        cr_assert(access(path, F_OK) == 0, "no %s", path);
    }
}

/* bench plot on the GPU ranks' rows (gpu-mpi): their own efficiency table
 * at every rank count they have (3 is no power of two, as 3 hosts of one
 * GPU give), and, where a one-process run's rows are copied in as
 * scaling-gpu.csv, each row's time against one process's on as many
 * GPUs. Catches the table missing the MPI rows or the counts the
 * one-process sweep never has, and the comparison not drawn. */
Test(scaling_sweep, gpu_ranks_rows_are_reported_and_set_against_one_process) {
    char dir[] = "/tmp/dg-scalesw-XXXXXX", one[] = "/tmp/dg-scalesw-XXXXXX", path[2][320];
    tmp_dir(dir);
    held_dir(dir);
    tmp_dir(one);
    held_dir(one);
    static const hand_row mpi[] = {
        {"mlp-weak", "gpu-mpi", DG_PREC_FP32, 1, 1024, 2.0},
        {"mlp-weak", "gpu-mpi", DG_PREC_FP32, 2, 1024, 2.5},
        {"mlp-weak", "gpu-mpi", DG_PREC_FP32, 3, 1024, 4.0},
    };
    write_rows(dir, "gpu", mpi, sizeof mpi / sizeof *mpi);
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "a process per GPU under MPI (gpu-mpi)") &&
              strstr(sum, "| mlp | fp32 | 2 | 2048 | 2.500 | 819200 | 80.0% | 20.0% |") &&
              strstr(sum, "| mlp | fp32 | 3 | 3072 | 4.000 | 768000 | 50.0% | 50.0% |"), "summary: %s", sum);
    cr_assert_null(strstr(sum, "against one process driving the GPUs"), "a comparison without its rows: %s", sum);
    held_free(sum);
    static const hand_row dp[] = {{"mlp-weak", "gpu-dp", DG_PREC_FP32, 2, 1024, 2.45}};
    write_rows(one, "gpu", dp, 1);
    snprintf(path[0], sizeof path[0], "%s/scaling.csv", one);
    snprintf(path[1], sizeof path[1], "%s/scaling-gpu.csv", dir);
    cr_assert_eq(rename(path[0], path[1]), 0, "%s -> %s", path[0], path[1]);
    sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "against one process driving the GPUs") &&
              strstr(sum, "| mlp-weak | fp32 | 2 | 2048 | 2.450 | 2.500 | 1.020 |"), "summary: %s", sum);
    held_free(sum);
}
