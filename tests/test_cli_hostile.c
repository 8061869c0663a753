/* test_cli_hostile.c: the bench CLI against hostile and careless input:
 * folder names that would be code in a shell or a gnuplot script, damaged
 * result files, a batch larger than the data set, results that a failed run
 * must not erase, and Ctrl-C inside a measurement. The option table is in
 * test_cli_options.c. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>

#include "writers/csv.h"
#include "shell_util.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* copies the committed CPU results (ceiling, gemm, ops, mlp, autodiff) into dir */
static void copy_cpu_results(const char *dir) {
    static const char *const sweeps[] = {"ceiling", "gemm", "ops", "mlp"};
    for (int i = 0; i < 4; i++) {
        char src[512], dst[1024];
        snprintf(src, sizeof src, "%s/reports/cpu-2core/%s.csv", DG_SOURCE_DIR, sweeps[i]);
        snprintf(dst, sizeof dst, "%s/%s.csv", dir, sweeps[i]);
        char *text = read_file(src);
        write_file(dst, text);
        free(text);
    }
}

/* A folder name is data: quotes, $( ), backquotes, a newline and spaces
 * reach neither a shell nor gnuplot as code, and the charts are drawn. */
Test(bench_hostile, folder_names_are_never_code) {
    static const char *const names[] = {"it's here", "x$(touch PWNED)", "x`touch PWNED`", "new\nline",
                                        "q\"uo'te\\ ; touch PWNED #"};
    char root[] = "/tmp/dg-hostile-XXXXXX";
    tmp_dir(root);
    bool gnuplot = system("command -v gnuplot >/dev/null 2>&1") == 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char dir[512], out[4096], err[4096], path[1024];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        cr_assert_eq(mkdir(dir, 0755), 0);
        copy_cpu_results(dir);
        const char *args[] = {"plot", names[i], NULL};
        int rc = run_bench(root, args, out, err, 60);
        cr_assert_eq(rc, 0, "bench plot on folder '%s': exit %d\n%s", names[i], rc, err);
        snprintf(path, sizeof path, "%s/summary.md", dir);
        cr_assert(exists(path), "no summary.md in '%s'", names[i]);
        snprintf(path, sizeof path, "%s/gemm_time.png", dir);
        if (gnuplot) cr_assert(exists(path), "no chart drawn in '%s': %s", names[i], err);
    }
    char pwned[512];
    snprintf(pwned, sizeof pwned, "%s/PWNED", root);
    cr_assert(!exists(pwned), "a folder name ran a command");
    remove_dir(root);
}

/* A row cut short by a crash (no newline) is skipped with a warning and the
 * file still drawn; a malformed row elsewhere fails that file with its name
 * and line, the folder's other files are still drawn, and the exit is 1. */
Test(bench_hostile, damaged_csv_files_are_named_and_the_rest_drawn) {
    char dir[] = "/tmp/dg-damaged-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    copy_cpu_results(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs("gemm,square,cpu-omp,cpu,f32,4096,40", f); /* killed in the middle of a row */
    fclose(f);
    const char *args[] = {"plot", dir, NULL};
    int rc = run_bench("/tmp", args, out, err, 60);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "gemm.csv:") && strstr(err, "incomplete last line"), "%s", err);
    cr_assert(strstr(out, "## GEMM"), "%s", out);

    snprintf(path, sizeof path, "%s/ops.csv", dir);
    char *ops = read_file(path), *row = strstr(ops, "\nsweep,");
    cr_assert_not_null(row, "no header in ops.csv");
    row = strchr(row + 1, '\n') + 1; /* the first data row: its m column (the 6th) becomes "z..." */
    for (int i = 0; i < 5; i++) row = strchr(row, ',') + 1;
    *row = 'z';
    write_file(path, ops);
    free(ops);
    rc = run_bench("/tmp", args, out, err, 60);
    cr_assert_eq(rc, 1, "a damaged ops.csv must fail the plot: exit %d\n%s", rc, err);
    cr_assert(strstr(err, "ops.csv:") && strstr(err, "column 'm'"), "no file, line and column named: %s", err);
    cr_assert(strstr(out, "## GEMM") && strstr(out, "## MLP"), "the other files must still be drawn:\n%s", out);
    remove_dir(dir);
}

/* writes a tiny IDX data set: n images of side x side, labels 0..9 */
static void tiny_data_set(const char *dir, const char *split, int n, int side) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, (uint8_t)side, 0, 0, 0, (uint8_t)side};
    fwrite(head, 1, sizeof head, f);
    for (int i = 0; i < n * side * side; i++) fputc(i % 251, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint8_t lhead[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
    fwrite(lhead, 1, sizeof lhead, f);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    fclose(f);
}

/* The train sweep reads the first batch of the data set: a batch larger
 * than the data set, or images of another size than the model's input,
 * give a skipped row (under ASan this caught the heap overflow). */
Test(bench_hostile, train_sweep_batch_larger_than_the_data_set_is_skipped) {
    char dir[] = "/tmp/dg-tiny-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    tiny_data_set(dir, "train", 20, 28);
    tiny_data_set(dir, "t10k", 10, 28);
    snprintf(path, sizeof path, "%s/res", dir);
    const char *args[] = {"--sweep", "train", "--backends", "cpu", "--sizes", "64,65536", "--data", dir, "--out", path,
                          NULL};
    int rc = run_bench("/tmp", args, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "skipped: the data set has 20 images"), "%s", err);
    snprintf(path, sizeof path, "%s/res/train.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "train,logreg,cpu,cpu,fp32,65536,") && strstr(csv, ",skipped,the data set has 20 images"),
              "the skipped row names its reason: %s", csv);
    cr_assert_null(strstr(csv, ",ok,"), "no batch fits 20 images: %s", csv);
    free(csv);

    tiny_data_set(dir, "train", 20, 10); /* 100 pixels, the models want 784 */
    snprintf(path, sizeof path, "%s/res", dir);
    const char *small[] = {"--sweep", "train", "--backends", "cpu", "--sizes", "8", "--data", dir, "--out", path, NULL};
    rc = run_bench("/tmp", small, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "images of 10x10"), "%s", err);
    remove_dir(dir);
}

/* bench train checks every option and opens everything before it writes;
 * a run that fails leaves an earlier result as it was. */
Test(bench_hostile, a_failed_train_run_keeps_the_earlier_csv) {
    char dir[] = "/tmp/dg-keep-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/train-mlp-cpu.csv", dir);
    write_file(path, "# an earlier run\nepoch,model\n1,mlp\n");
    const char *bad_opt[] = {"train", "--out", dir, "--epochs", "0", NULL};
    cr_assert_eq(run_bench("/tmp", bad_opt, out, err, 30), 2, "%s", err);
    const char *no_data[] = {"train", "--out", dir, "--data", "/nonexistent", NULL};
    cr_assert_eq(run_bench("/tmp", no_data, out, err, 30), 1, "%s", err);
    /* training itself fails, after the result file was opened: 20 images
     * cannot make a batch of 128 */
    tiny_data_set(dir, "train", 20, 28);
    tiny_data_set(dir, "t10k", 10, 28);
    const char *failing[] = {"train", "--out", dir, "--data", dir, "--epochs", "1", NULL};
    cr_assert_eq(run_bench("/tmp", failing, out, err, 60), 1, "%s", err);
    cr_assert(strstr(err, "do not fit a data set of 20 examples"), "%s", err);
    char *kept = read_file(path);
    cr_assert_str_eq(kept, "# an earlier run\nepoch,model\n1,mlp\n");
    free(kept);
    remove_dir(dir);
}

/* bench train --dtype: the step's precision in every row and in the file's
 * name (beside fp32's file, which a bf16 run leaves alone), for the
 * classifiers and the language model; an unknown one is a usage error
 * naming the accepted values. */
Test(bench_hostile, train_dtype_names_its_rows_and_file) {
    char dir[] = "/tmp/dg-dtype-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    tiny_data_set(dir, "train", 20, 28);
    tiny_data_set(dir, "t10k", 10, 28);
    const char *bf16[] = {"train", "--model", "logreg", "--dtype", "bf16", "--epochs", "1", "--batch", "10",
                          "--data", dir, "--out", dir, NULL};
    int rc = run_bench("/tmp", bf16, out, err, 60);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/train-logreg-cpu-bf16.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "epoch,model,backend,optimizer,dtype,data,") && strstr(csv, "\n1,logreg,cpu,adam,bf16,"),
              "the rows name the precision: %s", csv);
    free(csv);
    snprintf(path, sizeof path, "%s/train-logreg-cpu.csv", dir);
    cr_assert(!exists(path), "a bf16 run wrote fp32's file");
    /* bench plot reads the rows with their dtype column back as a curve */
    const char *fp32[] = {"train", "--model", "logreg", "--epochs", "1", "--batch", "10", "--data", dir, "--out", dir,
                          NULL};
    cr_assert_eq(run_bench("/tmp", fp32, out, err, 60), 0, "%s", err);
    const char *plot[] = {"plot", dir, NULL};
    cr_assert_eq(run_bench("/tmp", plot, out, err, 60), 0, "%s", err);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    csv = read_file(path);
    cr_assert(strstr(csv, "| logreg | cpu | 1 |"), "the fp32 curve is missing from the summary: %s", csv);
    free(csv);
    /* the language model's curve: dtype as its last column */
    const char *lm[] = {"train", "--model", "charlm", "--dtype", "fp16", "--steps", "2", "--eval-every", "1",
                        "--context", "16", "--width", "16", "--heads", "2", "--layers", "1", "--batch", "4",
                        "--out", dir, NULL};
    rc = run_bench("/tmp", lm, out, err, 60);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/train-charlm-cpu-fp16.csv", dir);
    csv = read_file(path);
    cr_assert(strstr(csv, ",unigram_nats,dtype\n") && strstr(csv, ",fp16\n2,charlm,cpu,") && strstr(csv, ",fp16\n"),
              "the curve's rows name the precision: %s", csv);
    free(csv);
    const char *fp8[] = {"train", "--dtype", "fp8", "--out", dir, NULL};
    cr_assert_eq(run_bench("/tmp", fp8, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "bad --dtype (fp32, tf32, bf16 or fp16) 'fp8'"), "%s", err);
    remove_dir(dir);
}

/* bench train makes its whole --out path, as the sweeps do: a nested
 * folder in a fresh place, and the default reports/latest in a folder
 * without reports/ (a fresh checkout). Making one level only failed both. */
Test(bench_hostile, train_creates_its_nested_out_folder) {
    char dir[] = "/tmp/dg-trainout-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    tiny_data_set(dir, "train", 20, 28);
    tiny_data_set(dir, "t10k", 10, 28);
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    const char *nested[] = {"train", "--model", "logreg", "--epochs", "1", "--batch", "4", "--threads", "1",
                            "--data", dir, "--out", path, NULL};
    int rc = run_bench("/tmp", nested, out, err, 60);
    cr_assert_eq(rc, 0, "--out a/b/c: exit %d\n%s", rc, err);
    snprintf(path, sizeof path, "%s/a/b/c/train-logreg-cpu.csv", dir);
    cr_assert(exists(path), "no %s: %s", path, err);
    const char *fresh[] = {"train", "--model", "logreg", "--epochs", "1", "--batch", "4", "--threads", "1",
                           "--data", dir, NULL};
    rc = run_bench(dir, fresh, out, err, 60);
    cr_assert_eq(rc, 0, "the default --out in a fresh folder: exit %d\n%s", rc, err);
    snprintf(path, sizeof path, "%s/reports/latest/train-logreg-cpu.csv", dir);
    cr_assert(exists(path), "no %s: %s", path, err);
    remove_dir(dir);
}

/* --gpus out of range or not a number, without --backend gpu, or with a
 * batch it does not divide: usage errors naming the options, before
 * anything is opened or written. */
Test(bench_hostile, gpus_usage_errors_name_the_option) {
    static const struct { const char *args[7], *says[2]; } cases[] = {
        {{"--gpus", "0", "--backend", "gpu"}, {"--gpus (1 to 16)", "'0'"}},
        {{"--gpus", "17", "--backend", "gpu"}, {"--gpus (1 to 16)", "'17'"}},
        {{"--gpus", "x", "--backend", "gpu"}, {"--gpus (1 to 16)", "'x'"}},
        {{"--gpus", "2", "--backend", "cpu"}, {"--gpus needs --backend gpu", "cpu backend"}},
        {{"--backend", "gpu", "--gpus", "3", "--batch", "128"}, {"--batch 128", "--gpus 3"}},
    };
    char dir[] = "/tmp/dg-gpus-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/res", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *argv[12] = {"train", "--out", path};
        int n = 3;
        for (int j = 0; cases[i].args[j]; j++) argv[n++] = cases[i].args[j];
        int rc = run_bench("/tmp", argv, out, err, 30);
        cr_expect_eq(rc, 2, "case %zu: exit %d\n%s", i, rc, err);
        cr_expect(strstr(err, cases[i].says[0]) && strstr(err, cases[i].says[1]), "case %zu: want '%s' and '%s': %s",
                  i, cases[i].says[0], cases[i].says[1], err);
        cr_expect_str_empty(out, "case %zu", i);
        cr_expect_not(exists(path), "case %zu: a refused run created %s", i, path);
    }
    remove_dir(dir);
}

/* More GPUs than the machine has: exit 1 naming the devices, before the
 * data set is read (it does not exist here) and before anything is
 * written. Where two devices exist, they open and the missing data set
 * fails the run instead, just as cleanly. */
Test(bench_hostile, gpus_beyond_the_devices_write_nothing) {
#ifdef DG_HAVE_CUDA
    int have = dg_gpu_device_count();
#else
    int have = 0;
#endif
    char dir[] = "/tmp/dg-gpus-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/res", dir);
    static const char *const counts[] = {"2", "16"};
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"train", "--backend", "gpu", "--gpus", counts[i], "--data", "/nonexistent", "--out", path,
                              NULL};
        int rc = run_bench("/tmp", argv, out, err, 60);
        cr_assert_eq(rc, 1, "--gpus %s on %d devices: exit %d\n%s", counts[i], have, rc, err);
        if (have < atoi(counts[i]))
            cr_assert(strstr(err, "--gpus ") && strstr(err, "CUDA device"), "--gpus %s on %d devices: %s", counts[i],
                      have, err);
        else
            cr_assert(strstr(err, "/nonexistent"), "--gpus %s on %d devices: %s", counts[i], have, err);
        cr_assert_str_empty(out);
        cr_assert_not(exists(path), "--gpus %s: created %s", counts[i], path);
    }
    remove_dir(dir);
}

/* CIFAR-10 is in no package: resnet18-cifar without --data is a usage
 * error that says where the data comes from; a folder without the batches
 * names the first missing file; a corrupt batch is named with its problem.
 * Nothing is written to --out in any of these. */
Test(bench_hostile, resnet18_cifar_without_its_data_says_how_to_get_it) {
    char dir[] = "/tmp/dg-cifar-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/res", dir);
    const char *no_flag[] = {"train", "--model", "resnet18-cifar", "--out", path, NULL};
    cr_assert_eq(run_bench("/tmp", no_flag, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "needs CIFAR-10") && strstr(err, "--data DIR"), "%s", err);
    const char *empty[] = {"train", "--model", "resnet18-cifar", "--data", dir, "--out", path, NULL};
    cr_assert_eq(run_bench("/tmp", empty, out, err, 30), 1, "%s", err);
    cr_assert(strstr(err, "data_batch_1.bin not found") && strstr(err, "--data DIR"), "%s", err);
    /* five batches present, the first one record and a byte long */
    for (int i = 1; i <= 5; i++) {
        char f[1100];
        snprintf(f, sizeof f, "%s/data_batch_%d.bin", dir, i);
        write_file(f, "x");
    }
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_file(path, "x");
    snprintf(path, sizeof path, "%s/res", dir);
    cr_assert_eq(run_bench("/tmp", empty, out, err, 30), 1, "%s", err);
    cr_assert(strstr(err, "data_batch_1.bin") && strstr(err, "not a multiple of the 3073-byte record"), "%s", err);
    cr_assert_not(exists(path), "a refused run created %s", path);
    remove_dir(dir);
}

/* The same sweep twice would write its CSV twice, the second run erasing
 * the first: refused before anything runs. */
Test(bench_hostile, a_sweep_given_twice_is_refused) {
    char out[4096], err[4096];
    const char *args[] = {"--sweep", "ops,gemm,ops", "--out", "/nonexistent/never", NULL};
    cr_assert_eq(run_bench("/tmp", args, out, err, 30), 2, "%s", err);
    cr_assert(strstr(err, "'ops' given twice"), "%s", err);
}

/* The first size of a GEMM sweep is predicted like the others: 30000^3 is
 * skipped (memory or --cpu-cap) before its 11 GB are allocated. */
Test(bench_hostile, a_huge_first_gemm_size_is_skipped_before_allocation) {
    char dir[] = "/tmp/dg-huge-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "gemm", "--backends", "cpu", "--sizes", "30000", "--out", dir, NULL};
    double t0 = (double)time(NULL);
    int rc = run_bench("/tmp", args, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert_lt((double)time(NULL) - t0, 60, "took too long: the matrices were made");
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "gemm,square,cpu-omp,cpu,fp32,30000,30000,30000,") &&
                  strstr(csv, "gemm,square,cpu-openblas,cpu,fp32,30000,"), "%s", csv);
    cr_assert_null(strstr(csv, ",ok,"), "%s", csv);
    cr_assert(strstr(csv, ",skipped,predicted") || strstr(csv, ",skipped,needs"), "the reason is in the row: %s", csv);
    free(csv);
    /* 2^30: 1.5e19 bytes, more than any machine has, whatever the time */
    const char *huge[] = {"--sweep", "gemm", "--backends", "cpu", "--sizes", "1073741824", "--out", dir, NULL};
    rc = run_bench("/tmp", huge, out, err, 60);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    csv = read_file(path);
    cr_assert(strstr(csv, "gemm,square,cpu-openblas,cpu,fp32,1073741824,1073741824,1073741824,") &&
                  strstr(csv, ",skipped,needs "), "%s", csv);
    free(csv);
    remove_dir(dir);
}

/* Ctrl-C during a measurement that would run for an hour: the row is
 * finished with the runs done so far and marked interrupted, the summary
 * drawn, exit 128 + the signal (130, 143). With a complete gemm.csv of an
 * earlier run in the folder, that result stays and the interrupted rows go
 * beside it into gemm.interrupted.csv. */
static void interrupt_after(int sig, bool earlier) {
    char dir[] = "/tmp/dg-int-XXXXXX", path[1024], aside[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    snprintf(aside, sizeof aside, "%s/gemm.interrupted.csv", dir);
    char out[4096], err0[4096];
    const char *first[] = {"--sweep", "gemm", "--backends", "cpu", "--sizes", "32", "--reps", "1", "--warmup", "0",
                           "--min-time", "0", "--out", dir, NULL};
    if (earlier) cr_assert_eq(run_bench("/tmp", first, out, err0, 120), 0, "%s", err0);
    char *argv[] = {DG_BENCH_PATH, "--sweep", "gemm", "--backends", "cpu", "--sizes", "64", "--reps", "100000",
                    "--min-time", "3600", "--out", dir, NULL};
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s.out", dir);
    snprintf(err_path, sizeof err_path, "%s.err", dir);
    pid_t pid = spawn_in("/tmp", argv, out_path, err_path);
    struct timespec two = {2, 0};
    nanosleep(&two, NULL);
    kill(pid, sig);
    int rc = wait_exit(pid, 30);
    char *err = read_file(err_path);
    cr_assert_eq(rc, 128 + sig, "signal %d: exit %d (-1: still running 30 s later)\n%s", sig, rc, err);
    char *csv = read_file(earlier ? aside : path);
    cr_assert(strstr(csv, "gemm,square,cpu-naive,cpu,fp32,64,64,64,"), "the row under way is lost:\n%s\n%s", csv, err);
    cr_assert(strstr(csv, ",interrupted,"), "the row cut short is not marked interrupted:\n%s", csv);
    free(csv);
    if (earlier) {
        csv = read_file(path);
        cr_assert(strstr(csv, "gemm,square,cpu-openblas,cpu,fp32,32,32,32,") && !strstr(csv, ",64,64,64,"),
                  "the earlier complete result was replaced:\n%s", csv);
        cr_assert(strstr(err, "gemm.interrupted.csv"), "not said on stderr:\n%s", err);
        free(csv);
        remove(aside);
    } else {
        cr_assert(!exists(aside), "no earlier result: the rows belong in gemm.csv");
    }
    snprintf(path, sizeof path, "%s/summary.md", dir);
    cr_assert(exists(path), "no summary after signal %d", sig);
    free(err);
    remove(out_path);
    remove(err_path);
    remove_dir(dir);
}

Test(bench_hostile, ctrl_c_inside_a_measurement_keeps_the_row) { interrupt_after(SIGINT, false); }
Test(bench_hostile, sigterm_writes_the_rows_and_the_summary) { interrupt_after(SIGTERM, false); }
Test(bench_hostile, an_interrupted_rerun_keeps_the_complete_result) { interrupt_after(SIGINT, true); }

/* An environment value with a newline would end its '#' metadata line and
 * start a row: it is written flattened, and the file reads back. */
Test(bench_hostile, a_newline_in_the_environment_stays_in_its_metadata_line) {
    char dir[] = "/tmp/dg-env-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    cr_assert_eq(setenv("OPENBLAS_CORETYPE", "Haswell\nsweep,case", 1), 0);
    const char *args[] = {"--sweep", "ops", "--sizes", "1024", "--backends", "cpu", "--reps", "1", "--warmup", "0",
                          "--min-time", "0", "--out", dir, NULL};
    int rc = run_bench("/tmp", args, out, err, 120);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "(OPENBLAS_CORETYPE=Haswell?sweep,case)\n"), "%s", csv);
    free(csv);
    int n;
    csv_rec *r = bench_csv_read(path, &n);
    cr_assert(r && n > 10, "%s", dg_last_error());
    free(r);
    remove_dir(dir);
}

#define ONNX_DATA DG_SOURCE_DIR "/tests/data/onnx/"

/* Files that are not files: a pipe with no writer blocked the open for
 * ever (bench --model and onnx-run --input hung), /dev/zero was read to
 * 2 GiB before the size limit refused it (8 s, 2 GiB of memory), and a
 * directory said only "read error". Each is refused at once by kind. */
Test(bench_hostile, special_files_as_a_model_or_an_input_are_refused_at_once) {
    char dir[] = "/tmp/dg-special-XXXXXX", out[4096], err[4096], path[1024];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/pipe.onnx", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/zero.onnx", dir);
    cr_assert_eq(symlink("/dev/zero", path), 0);
    snprintf(path, sizeof path, "%s/dir.onnx", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    static const char *const models[][2] = {{"pipe.onnx", "a pipe, not a file"},
                                            {"zero.onnx", "a device, not a file"},
                                            {"dir.onnx", "a directory, not a file"}};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"--model", models[i][0], "--out", "res", NULL};
        int rc = run_bench(dir, args, out, err, 20);
        cr_assert_eq(rc, 1, "--model %s: exit %d (-1: still running after 20 s): %s", models[i][0], rc, err);
        cr_assert(strstr(err, models[i][1]), "--model %s: %s", models[i][0], err);
        const char *run[] = {"onnx-run", ONNX_DATA "mlp.onnx", "--input", models[i][0], "--out", "y.f32", NULL};
        rc = run_bench(dir, run, out, err, 20);
        cr_assert_eq(rc, 1, "onnx-run --input %s: exit %d: %s", models[i][0], rc, err);
        cr_assert(strstr(err, "not a file"), "onnx-run --input %s: %s", models[i][0], err);
    }
    snprintf(path, sizeof path, "%s/res", dir);
    cr_assert(!exists(path), "a refused --model made its results folder");
    snprintf(path, sizeof path, "%s/y.f32", dir);
    cr_assert(!exists(path), "a refused input made an output file");
    remove_dir(dir);
}

/* onnx-run's output under a file size limit (a full disk alike): the
 * write fails part way. It left the first bytes as Y.f32, in place of the
 * earlier complete output; now the output is whole or not written, and the
 * earlier file stays. mlp.onnx: [N, 6] -> [N, 3]; 100 examples make 1200
 * bytes of output, past `ulimit -f 1` (512 or 1024 bytes). */
Test(bench_hostile, onnx_run_leaves_no_half_written_output) {
    char dir[] = "/tmp/dg-fsize-XXXXXX", cmd[2048], out[4096], path[1024];
    tmp_dir(dir);
    char *ex = read_file(ONNX_DATA "mlp.in.f32"); /* 4 examples, 96 bytes */
    snprintf(path, sizeof path, "%s/x.f32", dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 25; i++) cr_assert_eq(fwrite(ex, 1, 96, f), 96);
    fclose(f);
    free(ex);
    snprintf(path, sizeof path, "%s/y.f32", dir);
    write_file(path, "the earlier output");
    /* SIGXFSZ ignored (inherited through exec): the write fails with EFBIG */
    snprintf(cmd, sizeof cmd, "cd %s && sh -c \"trap '' XFSZ; ulimit -f 1; exec %s onnx-run %smlp.onnx --input x.f32 "
             "--out y.f32\"", dir, DG_BENCH_PATH, ONNX_DATA);
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "cannot write y.f32: File too large"), "%s", out);
    char *kept = read_file(path);
    cr_assert_str_eq(kept, "the earlier output", "the failed write replaced y.f32 (%zu bytes)", strlen(kept));
    free(kept);
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) files += e->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(files, 2, "a temporary file was left beside y.f32");
    /* without the limit: the output, readable as any file the user makes */
    snprintf(cmd, sizeof cmd, "cd %s && %s onnx-run %smlp.onnx --input x.f32 --out y.f32", dir, DG_BENCH_PATH,
             ONNX_DATA);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_size, 1200);
    cr_assert(sb.st_mode & S_IRGRP, "y.f32 is mode %o", (unsigned)sb.st_mode);
    /* --out a symbolic link: the file it names gets the output, the link
     * stays (a rename over the link would replace it) */
    char real[1024];
    snprintf(real, sizeof real, "%s/real.f32", dir);
    cr_assert_eq(remove(path), 0);
    write_file(real, "old");
    cr_assert_eq(symlink("real.f32", path), 0);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_eq(lstat(path, &sb), 0);
    cr_assert(S_ISLNK(sb.st_mode), "y.f32, a link, was replaced by a file");
    cr_assert_eq(stat(real, &sb), 0);
    cr_assert_eq(sb.st_size, 1200);
    remove_dir(dir);
}
