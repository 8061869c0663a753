/* test_sweep_conv.c: the conv sweep. Its CPU rows through the CLI, read
 * back from conv.csv (status, check, GEMM columns, scratch, GFLOP/s) and
 * its summary section, and the rows that cannot run (skipped with the
 * reason and their columns, or an error where the graph cannot be built);
 * the report from rows written by hand, with and
 * without PyTorch's (bench/peers/torch_conv.py) beside duograd's; its
 * check (conv_check.h) against the CPU backend's three convolution nodes
 * on odd geometries (strides, padding, dilation, groups), and against
 * outputs made wrong on purpose: scaled by 1.001, one entry unwritten
 * (NaN), a kernel that correlates with flipped weights, a weight gradient
 * that misses the batch's last image; and a sweep on a CPU backend whose
 * convolutions are 0.1% off: wrong rows, none timed. The vendor rows
 * (cpu-onednn) on a backend that refuses the vendor's convolutions:
 * skipped with the backend's reason, said once on stderr; the report's own
 * / vendor table per dtype. The check in bf16 and fp16 (conv_prec.h): a
 * correctly rounded output passes, a reference from unrounded operands
 * and an unwritten entry do not; the 16-bit rows of the sweep, checked,
 * and made wrong by an output left unwritten (where the graph has 16-bit
 * convolutions). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/check/conv_check.h"
#include "core/check/round.h"
#include "core/autodiff.h"
#include "core/backend_impl.h"
#include "core/plan.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "sweeps/conv/conv_prec.h"
#include "writers/csv.h"
#include "held.h"
#include "shell_util.h"
#include "runner/sweep.h"
#include "test_util.h"

/* rows, backends, files and folders a failed assertion leaves: released */
TestSuite(conv_sweep, .fini = held_release);

/* every sweep here runs with --cpu-cap at its largest (CAP): a row must not
 * be skipped because the build is slow (the sanitizer build), except where
 * a test is about the cap */
#define CAP "--cpu-cap 86400"

/* ---- the CLI ---- */

Test(conv_sweep, cpu_rows_are_checked_and_timed) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep conv --sizes conv=2,3 --backends cpu --case 'cnn-conv2:*' --impl cpu-im2col "
             "--reps 2 --min-time 0 " CAP " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 6, "3 directions x 2 batches of cnn-conv2, got %d rows", n);
    /* cnn-conv2: x [b,32,14,14], w [64,32,3,3] padding 1: o = 64, cols = 196, r = c*kh*kw = 288 */
    static const char *const dirs[3] = {"fwd", "bwd-data", "bwd-weight"};
    for (int i = 0; i < n; i++) {
        long long b = 2 + i / 3, cols = b * 196;
        char name[48];
        snprintf(name, sizeof name, "cnn-conv2:%s", dirs[i % 3]);
        cr_assert_str_eq(r[i].name, name);
        cr_assert_str_eq(r[i].impl, "cpu-im2col");
        cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "%s: status %s (%s)", name,
                  r[i].status, r[i].note);
        cr_assert_str_eq(r[i].check, CONV_CHECK_WORD);
        cr_assert(r[i].max_rel_err <= CONV_CHECK_TOL, "%s: error %g", name, r[i].max_rel_err);
        cr_assert(r[i].batch == b && r[i].transfer == 0 && r[i].tf32 == 0 && r[i].reps >= 2);
        long long mnk[3][3] = {{64, cols, 288}, {288, cols, 64}, {64, 288, cols}};
        cr_assert(r[i].m == mnk[i % 3][0] && r[i].n == mnk[i % 3][1] && r[i].k == mnk[i % 3][2],
                  "%s: m, n, k = %lld, %lld, %lld", name, r[i].m, r[i].n, r[i].k);
        /* layout.h: col [288, b*196], and dyT [64, b*196] beside it for the weight gradient */
        long long scratch = 4 * cols * (288 + (i % 3 == 2 ? 64 : 0));
        cr_assert_eq(r[i].scratch_bytes, scratch, "%s: scratch %lld, want %lld", name, r[i].scratch_bytes, scratch);
        double flops = 2.0 * b * 64 * 196 * 288;
        cr_assert(r[i].gflops > 0 && fabs(r[i].gflops - flops / (r[i].median_ms * 1e6)) < 1e-3 * r[i].gflops,
                  "%s: %g GFLOP/s in %g ms", name, r[i].gflops, r[i].median_ms);
    }
    held_free(r);
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "## Convolutions") && strstr(sum, "| 24 | cnn-conv2 | 32x14x14 -> 64x14x14"),
              "summary: %s", sum);
    cr_assert(strstr(sum, "### bwd-weight: 3x3 layers") && strstr(sum, "| 24 | cnn-conv2 | 3 | "), "summary: %s", sum);
    held_free(sum);
}

/* cpu-im2col-batch's rows: at batch 1 skipped with the reason (it would
 * run as cpu-im2col), at batch 3 on 2 threads checked and timed */
Test(conv_sweep, batch_rows_run_or_say_why_not) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep conv --sizes conv=1,3 --backends cpu --threads 2 --case 'cnn-conv2:*' "
             "--impl cpu-im2col-batch --reps 2 --min-time 0 " CAP " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 6, "3 directions x 2 batches of cnn-conv2, got %d rows", n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].impl, "cpu-im2col-batch");
        if (r[i].batch == 1)
            cr_assert(!strcmp(r[i].status, "skipped") && strstr(r[i].note, "runs as cpu-im2col here"),
                      "%s at batch 1: %s (%s)", r[i].name, r[i].status, r[i].note);
        else
            cr_assert(r[i].batch == 3 && (!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy")) &&
                          r[i].max_rel_err <= CONV_CHECK_TOL && r[i].reps >= 2,
                      "%s at batch %lld: %s, error %g (%s)", r[i].name, r[i].batch, r[i].status, r[i].max_rel_err,
                      r[i].note);
    }
    held_free(r);
}

/* cpu-shift's rows: the forward and dx of the stride-1 layer cnn-conv2
 * checked and timed at batch 3 on 2 threads, its weight's gradient
 * skipped with the reason (the shift has none), the stride-2
 * r18c-l2.0-conv1's forward and dx skipped with theirs (they would run as
 * cpu-im2col-batch) */
Test(conv_sweep, shift_rows_run_or_say_why_not) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep conv --sizes conv=3 --backends cpu --threads 2 "
             "--case 'cnn-conv2:*,r18c-l2.0-conv1:*' --impl cpu-shift --reps 2 --min-time 0 " CAP " --out %s",
             DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n, timed = 0;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 6, "3 directions x 2 shapes, got %d rows", n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].impl, "cpu-shift");
        const char *why = strstr(r[i].name, "bwd-weight")        ? "the forward and dx only"
                          : strstr(r[i].name, "r18c-l2.0-conv1") ? "the shift does not apply"
                                                                 : NULL;
        if (why) {
            cr_assert(!strcmp(r[i].status, "skipped") && strstr(r[i].note, why), "%s: %s (%s)", r[i].name,
                      r[i].status, r[i].note);
            continue;
        }
        cr_assert((!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy")) &&
                      r[i].max_rel_err <= CONV_CHECK_TOL && r[i].reps >= 2,
                  "%s: %s, error %g (%s)", r[i].name, r[i].status, r[i].max_rel_err, r[i].note);
        timed++;
    }
    cr_assert_eq(timed, 2, "cnn-conv2's forward and dx timed, got %d rows", timed);
    held_free(r);
}

/* cpu-im2col-chan's rows: the weight's gradients checked and timed at
 * batch 3 on 2 threads (cnn-conv2 and the stride-2 r18c-l2.0-conv1), the
 * forward and dx skipped with the reason; on one thread every row is
 * skipped (it would run as cpu-im2col) */
Test(conv_sweep, channel_rows_run_the_weight_gradient_or_say_why_not) {
    static const struct { int threads, timed; } runs[] = {{2, 2}, {1, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
        tmp_dir(dir);
        held_dir(dir);
        snprintf(cmd, sizeof cmd, "%s --sweep conv --sizes conv=3 --backends cpu --threads %d "
                 "--case 'cnn-conv2:*,r18c-l2.0-conv1:*' --impl cpu-im2col-chan --reps 2 --min-time 0 " CAP " --out %s",
                 DG_BENCH_PATH, runs[k].threads, dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
        snprintf(path, sizeof path, "%s/conv.csv", dir);
        int n, timed = 0;
        csv_rec *r = held_ptr(bench_csv_read(path, &n));
        cr_assert_not_null(r, "%s", dg_last_error());
        cr_assert_eq(n, 6, "3 directions x 2 shapes, got %d rows", n);
        for (int i = 0; i < n; i++) {
            cr_assert_str_eq(r[i].impl, "cpu-im2col-chan");
            bool weight = strstr(r[i].name, "bwd-weight") != NULL;
            if (weight && runs[k].threads > 1) {
                cr_assert((!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy")) &&
                              r[i].max_rel_err <= CONV_CHECK_TOL && r[i].reps >= 2,
                          "%s: %s, error %g (%s)", r[i].name, r[i].status, r[i].max_rel_err, r[i].note);
                timed++;
                continue;
            }
            const char *why = weight ? "runs as cpu-im2col here" : "the weight's gradient only";
            cr_assert(!strcmp(r[i].status, "skipped") && strstr(r[i].note, why), "%s on %d threads: %s (%s)",
                      r[i].name, runs[k].threads, r[i].status, r[i].note);
        }
        cr_assert_eq(timed, runs[k].timed, "%d weight gradients timed on %d threads", timed, runs[k].threads);
        held_free(r);
    }
}

/* Rows that cannot run say why. Skipped before anything of theirs is
 * made, they keep the columns of what they would have run (m, n, k and the
 * scratch of their kernels): r18i-l4.0-conv2's forward (x [b,256,14,14],
 * w [512,256,3,3] stride 2: M = 512, N = b*49, K = 4608) on the CPU
 * measured at batch 1, predicted above --cpu-cap at 8 and 32, past the
 * CPU's ImageNet batches at 128; lenet-c2's (x [b,6,14,14], w [16,6,5,5]:
 * M = 16, N = b*100, K = 150) at batch 5e8, beyond any host's memory. At
 * batch 2^30 its graph cannot be built (x has more than 2^40 elements):
 * an error row, with the message and no columns, and the exit code 1. */
Test(conv_sweep, rows_that_cannot_run_say_why) {
    static const struct { const char *args; int rows, rc; } runs[] = {
        {"--case 'r18i-l4.0-conv2:fwd' --cpu-cap 0.001", 4, 0},
        {"--case 'lenet-c2:fwd' --sizes conv=500000000 " CAP, 1, 0},
        {"--case 'lenet-c2:fwd' --sizes conv=1073741824 " CAP, 1, 1},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
        tmp_dir(dir);
        held_dir(dir);
        snprintf(cmd, sizeof cmd, "%s --sweep conv --backends cpu --impl cpu-im2col %s --reps 1 --warmup 0 "
                 "--min-time 0 --out %s", DG_BENCH_PATH, runs[k].args, dir);
        cr_assert_eq(sh(cmd, out, sizeof out), runs[k].rc, "%s", out);
        snprintf(path, sizeof path, "%s/conv.csv", dir);
        int n;
        csv_rec *r = held_ptr(bench_csv_read(path, &n));
        cr_assert_not_null(r, "%s", dg_last_error());
        cr_assert_eq(n, runs[k].rows, "%s: %d rows", runs[k].args, n);
        for (int i = 0; i < n; i++) {
            if (k == 2) {
                cr_assert(!strcmp(r[i].status, "error") && strstr(r[i].note, "more than 2^40 elements") &&
                              r[i].m == 0 && r[i].scratch_bytes == 0,
                          "%s (%s), m %lld", r[i].status, r[i].note, r[i].m);
                continue;
            }
            const char *why = k == 1 ? "of host memory" : r[i].batch == 128 ? "ImageNet-sized" : "--cpu-cap";
            if (k == 0 && r[i].batch == 1)
                cr_assert(!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy"), "batch 1: %s (%s)",
                          r[i].status, r[i].note);
            else
                cr_assert(!strcmp(r[i].status, "skipped") && strstr(r[i].note, why), "batch %lld: %s (%s)",
                          r[i].batch, r[i].status, r[i].note);
            long long m = k ? 16 : 512, cols = r[i].batch * (k ? 100 : 49), kk = k ? 150 : 4608;
            cr_assert(r[i].m == m && r[i].n == cols && r[i].k == kk && r[i].scratch_bytes > 0,
                      "batch %lld: m, n, k = %lld, %lld, %lld, scratch %lld", r[i].batch, r[i].m, r[i].n, r[i].k,
                      r[i].scratch_bytes);
        }
        held_free(r);
    }
}

/* the CPU backend's compute, then every convolution output 0.1% off */
static const dg_backend_i *cpu_iface;
static dg_status off_by_a_thousandth(dg_backend *be, const dg_step *s) {
    dg_status st = cpu_iface->compute(be, s);
    dg_op op = s->node->op;
    if (st == DG_OK && (op == DG_OP_CONV2D || op == DG_OP_CONV2D_BACKWARD_DATA || op == DG_OP_CONV2D_BACKWARD_WEIGHT))
        for (int64_t i = 0; i < dg_node_numel(s->node); i++) ((float *)s->out)[i] *= 1.001f;
    return st;
}

Test(conv_sweep, a_wrong_kernel_gives_wrong_rows_untimed) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    cpu_iface = be->iface;
    held_backend(be, cpu_iface);
    dg_backend_i wrong = *be->iface;
    wrong.compute = off_by_a_thousandth;
    be->iface = &wrong;
    char dir[] = "/tmp/dg-convsweep-XXXXXX", path[256];
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = be, .threads = 2, .size_lists = {{.v = {2}, .n = 1}}, .n_size_lists = 1,
                     .case_filter = "cnn-conv2:*", .impl_filter = "cpu-im2col",
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir, "conv", "# a wrong kernel\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    ASSERT_OK(sweep_conv(&ctx));
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "conv", true));
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 3, "the three directions of cnn-conv2, got %d rows", n);
    for (int i = 0; i < n; i++)
        cr_assert(!strcmp(r[i].status, "wrong") && r[i].max_rel_err > CONV_CHECK_TOL && r[i].reps == 0 &&
                  isnan(r[i].median_ms), "%s: status %s, error %g, %d reps", r[i].name, r[i].status,
                  r[i].max_rel_err, r[i].reps);
    cr_assert_eq(ctx.failed, 3);
    held_free(r);
    held_free(be);
}

/* the CPU backend refusing the vendor's convolutions, as a build without
 * oneDNN does: the words of its refusal are the test's own */
#define NO_VENDOR "no oneDNN in this test's backend"
static const dg_backend_i *vendor_iface;
static dg_status no_vendor(const dg_backend *be, const dg_node *n, unsigned flags, char *buf, size_t size) {
    if (DG_STEP_CONV(flags) == DG_CONV_VENDOR) return dg_fail(DG_ERR_UNSUPPORTED, "cpu: " NO_VENDOR);
    return vendor_iface->step_impl(be, n, flags, buf, size);
}

/* sweep_conv on ctx with its stderr into err (n bytes) */
static void sweep_capturing_stderr(bench_ctx *ctx, char *err, size_t n) {
    char path[] = "/tmp/dg-convsweep-err-XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    cr_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    dg_status st = sweep_conv(ctx);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    ASSERT_OK(st);
    char *text = read_file(path);
    remove(path);
    snprintf(err, n, "%s", text);
    free(text);
}

/* cpu-onednn's rows on a backend that refuses them, in fp32 and bf16 at
 * two batches: every row skipped with the backend's reason (where the
 * graph has a bf16 convolution: else the bf16 rows are skipped with the
 * graph's), none failed, and the reason said once on stderr, not once per
 * row */
Test(conv_sweep, vendor_rows_refused_are_skipped_with_the_reason_once) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    vendor_iface = be->iface;
    held_backend(be, vendor_iface);
    dg_backend_i refusing = *be->iface;
    refusing.step_impl = no_vendor;
    be->iface = &refusing;
    char dir[] = "/tmp/dg-convsweep-XXXXXX", path[256], err[8192];
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = be, .threads = 2, .size_lists = {{.v = {2, 3}, .n = 2}},
                     .n_size_lists = 1, .case_filter = "cnn-conv2:*", .impl_filter = "cpu-onednn",
                     .precisions = {DG_PREC_FP32, DG_PREC_BF16}, .n_precisions = 2,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir, "conv", "# the vendor refused\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    sweep_capturing_stderr(&ctx, err, sizeof err);
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "conv", true));
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 12, "3 directions x 2 batches x 2 dtypes, got %d rows", n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(r[i].impl, "cpu-onednn");
        bool graph_refused = r[i].precision == DG_PREC_BF16 && strstr(r[i].note, "conv2d takes float32");
        cr_assert(!strcmp(r[i].status, "skipped") && (strstr(r[i].note, NO_VENDOR) || graph_refused),
                  "%s %s at batch %lld: %s (%s)", r[i].name, dg_precision_name(r[i].precision), r[i].batch,
                  r[i].status, r[i].note);
        cr_assert(r[i].reps == 0 && isnan(r[i].median_ms) && r[i].m > 0, "%s: %d reps, m %lld", r[i].name,
                  r[i].reps, r[i].m);
    }
    cr_assert_eq(ctx.failed, 0);
    int said = 0;
    for (const char *p = err; (p = strstr(p, NO_VENDOR)) != NULL; p++) said++;
    cr_assert_eq(said, 1, "the reason said %d times on stderr: %s", said, err);
    cr_assert(strstr(err, "cpu-onednn rows in fp32 skipped: cpu: " NO_VENDOR), "stderr: %s", err);
    held_free(r);
    held_free(be);
}

/* the CPU backend's compute, with the last entry of a 16-bit convolution's
 * output left as it was before the step */
static const dg_backend_i *lowp_iface;
static dg_status last_entry_unwritten(dg_backend *be, const dg_step *s) {
    const dg_node *nd = s->node;
    bool conv = nd->op == DG_OP_CONV2D || nd->op == DG_OP_CONV2D_BACKWARD_DATA ||
                nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    size_t bytes = dg_node_bytes(nd);
    uint16_t before = 0;
    bool lowp = conv && nd->dtype != DG_F32;
    if (lowp) memcpy(&before, (char *)s->out + bytes - 2, 2);
    dg_status st = lowp_iface->compute(be, s);
    if (lowp) memcpy((char *)s->out + bytes - 2, &before, 2);
    return st;
}

/* The bf16 and fp16 rows of cpu-im2col: checked against the rounded
 * operands and timed; on a backend that leaves the last entry of a 16-bit
 * output unwritten, wrong and untimed (the sweep's NaN fill is what the
 * step leaves there). Skipped where the graph or the CPU backend has no
 * 16-bit convolution. */
Test(conv_sweep, lowp_rows_are_checked_and_an_unwritten_entry_is_wrong) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX", cmd[512], out[16384], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep conv --sizes conv=2 --backends cpu --case 'cnn-conv2:*' --impl cpu-im2col "
             "--dtype bf16,fp16 --reps 2 --min-time 0 " CAP " --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/conv.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 6, "3 directions x 2 dtypes, got %d rows", n);
    if (!strcmp(r[0].status, "skipped")) /* the graph's or the CPU backend's reason */
        cr_skip_test("no 16-bit convolution on the CPU in this build: %s", r[0].note);
    for (int i = 0; i < n; i++)
        cr_assert((!strcmp(r[i].status, "ok") || !strcmp(r[i].status, "noisy")) && r[i].reps >= 2 &&
                      r[i].max_rel_err <= CONV_CHECK_TOL &&
                      (r[i].precision == DG_PREC_BF16 || r[i].precision == DG_PREC_FP16),
                  "%s %s: %s, error %g (%s)", r[i].name, dg_precision_name(r[i].precision), r[i].status,
                  r[i].max_rel_err, r[i].note);
    held_free(r);

    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    lowp_iface = be->iface;
    held_backend(be, lowp_iface);
    dg_backend_i wrong = *be->iface;
    wrong.compute = last_entry_unwritten;
    be->iface = &wrong;
    char dir2[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir2);
    held_dir(dir2);
    bench_ctx ctx = {.out_dir = dir2, .cpu = be, .threads = 2, .size_lists = {{.v = {2}, .n = 1}}, .n_size_lists = 1,
                     .case_filter = "cnn-conv2:*", .impl_filter = "cpu-im2col",
                     .precisions = {DG_PREC_BF16, DG_PREC_FP16}, .n_precisions = 2,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir2, "conv", "# an unwritten entry\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    ASSERT_OK(sweep_conv(&ctx));
    held_drop(ctx.csv, true);
    ASSERT_OK(bench_csv_finish(ctx.csv, dir2, "conv", true));
    snprintf(path, sizeof path, "%s/conv.csv", dir2);
    r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++)
        cr_assert(!strcmp(r[i].status, "wrong") && r[i].reps == 0, "%s %s: status %s, error %g", r[i].name,
                  dg_precision_name(r[i].precision), r[i].status, r[i].max_rel_err);
    cr_assert_eq(ctx.failed, 6);
    held_free(r);
    held_free(be);
}

/* rows written by hand: a case by an impl on a device at batches 1, 8 and
 * 32 (ms 0: no row at that batch), 1e6 FLOPs per image */
typedef struct hand_series { const char *name, *impl; bool gpu; double ms[3]; dg_precision prec; } hand_series;

static void write_hand_rows(const char *dir, const hand_series *s, size_t n) {
    static const long long batches[3] = {1, 8, 32};
    FILE *f = bench_csv_open(dir, "conv", "# rows written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 3; b++) {
            double ms = s[i].ms[b];
            if (ms == 0) continue;
            bench_row r = {.sweep = "conv", .name = s[i].name, .impl = s[i].impl, .backend = s[i].gpu ? "gpu" : "cpu",
                           .precision = s[i].prec, .m = 64, .n = 196 * batches[b], .k = 288, .batch = batches[b],
                           .st = {ms, ms, ms, 0, 5, NULL, 0, false}, .flops = 1e6 * (double)batches[b],
                           .max_rel_err = 1e-7, .check = CONV_CHECK_WORD, .status = "ok"};
            bench_csv_write(f, &r);
        }
    ASSERT_OK(bench_csv_finish(f, dir, "conv", true));
}

/* The report from rows written by hand: cnn-conv2's GPU beats the CPU
 * from batch 8, cnn-conv1's only at 32, so the family's crossover is 32;
 * gpu-implicit is twice gpu-im2col at the largest batch. No PyTorch rows:
 * no PyTorch columns. */
Test(conv_sweep, report_tables_and_crossover) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    static const hand_series series[] = {
        {"cnn-conv2:fwd", "cpu-im2col", false, {1, 2, 4}, DG_PREC_FP32},   {"cnn-conv2:fwd", "gpu-im2col", true, {2, 1.5, 1}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "gpu-implicit", true, {2, 1, 0.5}, DG_PREC_FP32}, {"cnn-conv1:fwd", "cpu-im2col", false, {1, 2, 4}, DG_PREC_FP32},
        {"cnn-conv1:fwd", "gpu-im2col", true, {3, 3, 1}, DG_PREC_FP32},
    };
    write_hand_rows(dir, series, sizeof series / sizeof *series);
    char *sum = held_ptr(plot_summary(dir));
    /* 32e6 flops in 4, 1 and 0.5 ms */
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | 32 | 8.0 | 32.0 | 64.0 | 2.00 | - |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| cnn | fwd | 32 (worst: cnn-conv1; 2 shapes) |"), "summary: %s", sum);
    cr_assert(!strstr(sum, "torch"), "summary: %s", sum);
    held_free(sum);
}

/* PyTorch's rows (bench/peers/torch_conv.py) beside duograd's: each
 * present impl's GFLOP/s and duograd's fastest on its device over it, at
 * the largest batch both measured: torch-cudnn 128 GFLOP/s at 32 against
 * gpu-implicit's 64; torch-cudnn-bench only up to batch 8 (32 GFLOP/s
 * there, gpu-implicit's 8); torch-cpu 16 against cpu-im2col's 8. */
Test(conv_sweep, report_sets_pytorch_beside_duograd) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    static const hand_series series[] = {
        {"cnn-conv2:fwd", "cpu-im2col", false, {1, 2, 4}, DG_PREC_FP32},       {"cnn-conv2:fwd", "gpu-im2col", true, {2, 1.5, 1}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "gpu-implicit", true, {2, 1, 0.5}, DG_PREC_FP32},     {"cnn-conv2:fwd", "torch-cudnn", true, {2, 1, 0.25}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "torch-cudnn-bench", true, {1, 0.25, 0}, DG_PREC_FP32}, {"cnn-conv2:fwd", "torch-cpu", false, {0.5, 1, 2}, DG_PREC_FP32},
    };
    write_hand_rows(dir, series, sizeof series / sizeof *series);
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| CPU / CPU sgemm ceiling | torch-cudnn | duograd GPU / torch-cudnn | torch-cudnn-bench | "
                          "duograd GPU / torch-cudnn-bench | torch-cpu | duograd CPU / torch-cpu |\n"
                          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | 32 | 8.0 | 32.0 | 64.0 | 2.00 | - | 128.0 | 0.50 | 32.0 (batch 8) | "
                          "0.25 (batch 8) | 16.0 | 0.50 |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "PyTorch beside it (bench/peers/torch_conv.py"), "summary: %s", sum);
    held_free(sum);
    /* duograd on the GPU only, PyTorch on the CPU: no ratio, and no
     * crossover (PyTorch's CPU rows are not duograd's) */
    char dir2[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir2);
    held_dir(dir2);
    const hand_series apart[] = {series[1], series[2], series[5]};
    write_hand_rows(dir2, apart, sizeof apart / sizeof *apart);
    sum = held_ptr(plot_summary(dir2));
    cr_assert(!strstr(sum, "| torch-cudnn"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | 32 | - | 32.0 | 64.0 | 2.00 | - | 16.0 | - |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "GPU/CPU crossover: n/a (rows of only one device in conv.csv)."), "summary: %s", sum);
    held_free(sum);
}

/* cpu-im2col-batch, cpu-shift and cpu-im2col-chan beside cpu-im2col:
 * their own columns, the fraction of the ceiling (32 GFLOP/s, a
 * hand-written ceiling row) from the fastest CPU implementation (chan:
 * 29.1 GFLOP/s at 32, shift 25.6, batch 16, the passes 8), and the
 * crossover against the fastest CPU at each batch (CPU 1, 1, 1.1 ms
 * against the GPU's 2, 1.5, 1: from 32; against the passes alone it would
 * be 8) */
Test(conv_sweep, report_sets_the_batch_strategies_beside_the_passes) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    static const hand_series series[] = {
        {"cnn-conv2:fwd", "cpu-im2col", false, {1, 2, 4}, DG_PREC_FP32},    {"cnn-conv2:fwd", "cpu-im2col-batch", false, {1.5, 1, 2}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "cpu-shift", false, {3, 1.2, 1.25}, DG_PREC_FP32}, {"cnn-conv2:fwd", "cpu-im2col-chan", false, {5, 5, 1.1}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "gpu-im2col", true, {2, 1.5, 1}, DG_PREC_FP32},    {"cnn-conv2:fwd", "gpu-implicit", true, {2, 1, 0.5}, DG_PREC_FP32},
    };
    write_hand_rows(dir, series, sizeof series / sizeof *series);
    FILE *f = bench_csv_open(dir, "ceiling", "# a ceiling written by hand\n", BENCH_CSV_HEADER);
    cr_assert_not_null(f, "%s", dg_last_error());
    bench_row ceiling = {.sweep = "ceiling", .name = "sgemm", .impl = "cpu-openblas", .backend = "cpu", .m = 200,
                         .n = 200, .k = 400, .batch = 1, .st = {1, 1, 1, 0, 5, NULL, 0, false}, .flops = 32e6,
                         .max_rel_err = 1e-7, .check = "f64", .status = "ok"};
    bench_csv_write(f, &ceiling);
    ASSERT_OK(bench_csv_finish(f, dir, "ceiling", true));
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| # | shape | batch | cpu-im2col | cpu-im2col-batch | cpu-shift | cpu-im2col-chan | "
                          "gpu-im2col | gpu-implicit | implicit / im2col | best CPU / CPU sgemm ceiling |\n"
                          "|---|---|---|---|---|---|---|---|---|---|---|\n"),
              "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | 32 | 8.0 | 16.0 | 25.6 | 29.1 | 32.0 | 64.0 | 2.00 | 91% |\n"),
              "summary: %s", sum);
    cr_assert(strstr(sum, "(gpu-im2col vs the fastest CPU implementation; the worst shape's)"), "summary: %s", sum);
    cr_assert(strstr(sum, "| cnn | fwd | 32 (worst: cnn-conv2; 1 shapes) |"), "summary: %s", sum);
    held_free(sum);
}

/* The own / vendor table from rows written by hand, per dtype and device
 * (1e6 FLOPs per image): on the CPU at batch 32 in fp32 the fastest own
 * row (cpu-shift, 2 ms: 16 GFLOP/s) over cpu-onednn's (1 ms: 32), in bf16
 * cpu-im2col's 16 over cpu-onednn's 64; on the GPU gpu-cudnn only up to
 * batch 8, where gpu-implicit's 8 GFLOP/s are half its 16. The bf16 rows
 * (written first) stay out of the fp32 tables. */
Test(conv_sweep, report_sets_own_over_vendor_per_dtype) {
    char dir[] = "/tmp/dg-convsweep-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    static const hand_series series[] = {
        {"cnn-conv2:fwd", "cpu-im2col", false, {0, 0, 2}, DG_PREC_BF16},
        {"cnn-conv2:fwd", "cpu-onednn", false, {0, 0, 0.5}, DG_PREC_BF16},
        {"cnn-conv2:fwd", "cpu-im2col", false, {1, 2, 4}, DG_PREC_FP32},    {"cnn-conv2:fwd", "cpu-shift", false, {1, 2, 2}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "cpu-onednn", false, {1, 1, 1}, DG_PREC_FP32},    {"cnn-conv2:fwd", "gpu-implicit", true, {2, 1, 0.5}, DG_PREC_FP32},
        {"cnn-conv2:fwd", "gpu-cudnn", true, {1, 0.5, 0}, DG_PREC_FP32},
    };
    write_hand_rows(dir, series, sizeof series / sizeof *series);
    char *sum = held_ptr(plot_summary(dir));
    cr_assert(strstr(sum, "| # | shape | direction | dtype | device | batch | best own GFLOP/s | vendor GFLOP/s | "
                          "own / vendor |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | fwd | fp32 | cpu | 32 | 16.0 | 32.0 | 0.50 |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | fwd | fp32 | gpu | 8 | 8.0 | 16.0 | 0.50 |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | fwd | bf16 | cpu | 32 | 16.0 | 64.0 | 0.25 |\n"), "summary: %s", sum);
    cr_assert(strstr(sum, "| 24 | cnn-conv2 | 32 | 8.0 | 16.0 | - | 64.0 | - |"), "summary: %s", sum);
    held_free(sum);
}

/* ---- the check ---- */

/* a convolution with its two gradients run on the CPU backend */
typedef struct small_conv {
    dg_backend *be;
    dg_graph   *g;
    dg_plan    *p;
    dg_node    *x, *w, *gy, *out[3]; /* y, dx, dw                          */
    float      *val[3];              /* x, w, gy (= dy, exactly: 1 * gy)    */
    float      *res[3];              /* y, dx, dw                           */
} small_conv;

typedef struct geometry { int n, c, h, w, o, kh, kw, stride, pad, dilation, groups; } geometry;

/* stride 2 with padding; a non-square dilated kernel in two groups */
static const geometry geometries[] = {
    {2, 3, 9, 7, 4, 3, 3, 2, 1, 1, 1},
    {3, 4, 8, 9, 6, 3, 2, 1, 2, 2, 2},
};

static float *fill(int64_t n, dg_rng *r) {
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(2 * dg_rng_uniform(r) - 1);
    return v;
}

/* runs the plan on sc's inputs (x, w, gy as given) into res */
static void run(small_conv *sc, const float *x, const float *w, const float *gy, float **res) {
    const float *in[3] = {x, w, gy};
    dg_node *leaf[3] = {sc->x, sc->w, sc->gy};
    for (int i = 0; i < 3; i++) ASSERT_OK(dg_plan_set(sc->p, leaf[i], in[i], dg_node_bytes(leaf[i])));
    ASSERT_OK(dg_plan_run(sc->p));
    for (int d = 0; d < 3; d++) {
        res[d] = malloc(dg_node_bytes(sc->out[d]));
        cr_assert_not_null(res[d]);
        ASSERT_OK(dg_plan_get(sc->p, sc->out[d], res[d], dg_node_bytes(sc->out[d])));
    }
}

static void small_conv_new(small_conv *sc, const geometry *ge, uint64_t seed) {
    ASSERT_OK(dg_cpu_backend_new(&sc->be, 0));
    sc->g = dg_graph_new();
    sc->x = dg_input(sc->g, "x", DG_SHAPE(ge->n, ge->c, ge->h, ge->w));
    sc->w = dg_input(sc->g, "w", DG_SHAPE(ge->o, ge->c / ge->groups, ge->kh, ge->kw));
    dg_conv2d_opts o = {{ge->stride, ge->stride}, {ge->pad, ge->pad}, {ge->dilation, ge->dilation}, ge->groups};
    dg_node *y = dg_conv2d(sc->g, sc->x, sc->w, NULL, o);
    cr_assert_not_null(y, "%s", dg_last_error());
    sc->gy = dg_input(sc->g, "gy", y->shape);
    dg_node *wrt[2] = {sc->x, sc->w}, *grads[2];
    ASSERT_OK(dg_grad(sc->g, dg_sum(sc->g, dg_mul(sc->g, y, sc->gy), DG_ALL_AXES, false), wrt, 2, grads));
    sc->out[0] = y;
    sc->out[1] = grads[0];
    sc->out[2] = grads[1];
    cr_assert(grads[0]->op == DG_OP_CONV2D_BACKWARD_DATA && grads[1]->op == DG_OP_CONV2D_BACKWARD_WEIGHT);
    ASSERT_OK(dg_plan_new(&sc->p, sc->g, sc->be, sc->out, 3, NULL));
    dg_rng r = dg_rng_new(seed);
    dg_node *leaf[3] = {sc->x, sc->w, sc->gy};
    for (int i = 0; i < 3; i++) sc->val[i] = fill(dg_node_numel(leaf[i]), &r);
    run(sc, sc->val[0], sc->val[1], sc->val[2], sc->res);
}

static void small_conv_free(small_conv *sc) {
    for (int i = 0; i < 3; i++) {
        free(sc->val[i]);
        free(sc->res[i]);
    }
    dg_plan_free(sc->p);
    dg_graph_free(sc->g);
    dg_backend_free(sc->be);
}

/* direction d's samples from the true inputs: (x, w), (dy, w), (dy, x) */
static void sample(const small_conv *sc, int d, conv_sample *s) {
    static const int inputs[3][2] = {{0, 1}, {2, 1}, {2, 0}};
    ASSERT_OK(conv_check_sample(sc->out[d], sc->val[inputs[d][0]], sc->val[inputs[d][1]], 99u + (uint64_t)d, s,
                                CONV_CHECK_SAMPLES));
}

Test(conv_check, agrees_with_the_cpu_backend) {
    uint64_t seed = test_seed();
    for (size_t k = 0; k < sizeof geometries / sizeof *geometries; k++) {
        small_conv sc;
        small_conv_new(&sc, &geometries[k], seed);
        for (int d = 0; d < 3; d++) {
            conv_sample s[CONV_CHECK_SAMPLES];
            sample(&sc, d, s);
            double err = conv_check_error(s, CONV_CHECK_SAMPLES, sc.res[d]);
            cr_assert(err <= CONV_CHECK_TOL, "geometry %zu, direction %d [seed %llu]: error %g", k, d,
                      (unsigned long long)seed, err);
        }
        small_conv_free(&sc);
    }
}

Test(conv_check, flags_wrong_outputs) {
    uint64_t seed = test_seed();
    for (size_t k = 0; k < sizeof geometries / sizeof *geometries; k++) {
        const geometry *ge = &geometries[k];
        small_conv sc;
        small_conv_new(&sc, ge, seed);
        /* wrong kernels: convolution instead of correlation (weights
         * flipped in both axes), and a weight gradient without the last
         * image (a chunk of the batch missed) */
        int64_t nw = dg_node_numel(sc.w), taps = (int64_t)ge->kh * ge->kw, per_image = dg_node_numel(sc.gy) / ge->n;
        float *flipped = malloc((size_t)nw * sizeof *flipped), *short_dy = malloc(dg_node_bytes(sc.gy));
        cr_assert(flipped && short_dy);
        for (int64_t i = 0; i < nw; i++) flipped[i] = sc.val[1][i / taps * taps + taps - 1 - i % taps];
        memcpy(short_dy, sc.val[2], dg_node_bytes(sc.gy));
        for (int64_t i = (ge->n - 1) * per_image; i < ge->n * per_image; i++) short_dy[i] = 0;
        float *by_flipped[3], *by_short[3];
        run(&sc, sc.val[0], flipped, sc.val[2], by_flipped);
        run(&sc, sc.val[0], sc.val[1], short_dy, by_short);
        const float *wrong[3] = {by_flipped[0], by_flipped[1], by_short[2]};
        for (int d = 0; d < 3; d++) {
            conv_sample s[CONV_CHECK_SAMPLES];
            sample(&sc, d, s);
            double err = conv_check_error(s, CONV_CHECK_SAMPLES, wrong[d]);
            cr_assert(err > CONV_CHECK_TOL, "geometry %zu, direction %d: a wrong kernel passes (%g)", k, d, err);
            int64_t n = dg_node_numel(sc.out[d]);
            float *bad = malloc((size_t)n * sizeof *bad);
            cr_assert_not_null(bad);
            for (int64_t i = 0; i < n; i++) bad[i] = sc.res[d][i] * 1.001f;
            err = conv_check_error(s, CONV_CHECK_SAMPLES, bad);
            cr_assert(err > CONV_CHECK_TOL, "geometry %zu, direction %d: scaled by 1.001 passes (%g)", k, d, err);
            memcpy(bad, sc.res[d], (size_t)n * sizeof *bad);
            bad[s[5].index] = NAN;
            cr_assert(isinf(conv_check_error(s, CONV_CHECK_SAMPLES, bad)), "geometry %zu, direction %d: NaN", k, d);
            free(bad);
        }
        for (int d = 0; d < 3; d++) {
            free(by_flipped[d]);
            free(by_short[d]);
        }
        free(flipped);
        free(short_dy);
        small_conv_free(&sc);
    }
}

Test(conv_check, refuses_what_is_no_convolution) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(4));
    float v[4] = {1, 2, 3, 4};
    conv_sample s[2];
    cr_assert_eq(conv_check_sample(dg_relu(g, a), v, v, 1, s, 2), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "not a convolution"), "%s", dg_last_error());
    cr_assert_eq(conv_check_sample(NULL, v, v, 1, s, 2), DG_ERR_INVALID);
    dg_graph_free(g);
}

/* What a 16-bit convolution accumulating in float32 gives: the CPU's
 * float32 convolution of the operands rounded to bf16 (fp16), its output
 * rounded to the dtype. Against the float64 entries of the rounded
 * operands it passes its precision's tolerance (the output's rounding
 * taken out: without that it would not); against those of the unrounded
 * operands (a reference that forgot the kernel's rounding) it does not;
 * an entry left NaN is infinitely wrong. */
Test(conv_prec, a_rounded_output_passes_an_unrounded_reference_does_not) {
    static const struct { dg_dtype t; dg_precision p; uint16_t nan; } dts[] = {
        {DG_BF16, DG_PREC_BF16, 0x7fc0u}, {DG_F16, DG_PREC_FP16, 0x7e00u}};
    static const int inputs[3][2] = {{0, 1}, {2, 1}, {2, 0}};
    uint64_t seed = test_seed();
    for (size_t k = 0; k < sizeof geometries / sizeof *geometries; k++)
        for (size_t q = 0; q < sizeof dts / sizeof *dts; q++) {
            small_conv sc;
            small_conv_new(&sc, &geometries[k], seed);
            dg_node *leaf[3] = {sc.x, sc.w, sc.gy};
            float *rounded[3], *res[3];
            for (int i = 0; i < 3; i++) {
                size_t n = (size_t)dg_node_numel(leaf[i]);
                uint16_t *lo = malloc(n * sizeof *lo);
                rounded[i] = malloc(n * sizeof(float));
                cr_assert(lo && rounded[i]);
                memcpy(rounded[i], sc.val[i], n * sizeof(float));
                dg_check_round(dts[q].t, rounded[i], lo, n);
                free(lo);
            }
            run(&sc, rounded[0], rounded[1], rounded[2], res);
            for (int d = 0; d < 3; d++) {
                size_t n = (size_t)dg_node_numel(sc.out[d]);
                uint16_t *out = malloc(n * sizeof *out);
                cr_assert_not_null(out);
                dg_check_round(dts[q].t, res[d], out, n); /* res[d]: now the widened output */
                conv_sample s[CONV_CHECK_SAMPLES], un[CONV_CHECK_SAMPLES];
                ASSERT_OK(conv_check_sample(sc.out[d], rounded[inputs[d][0]], rounded[inputs[d][1]], 7u + (uint64_t)d,
                                            s, CONV_CHECK_SAMPLES));
                sample(&sc, d, un);
                double tol = conv_prec_tol(dts[q].p, 1, false);
                double ok = conv_prec_error(s, CONV_CHECK_SAMPLES, out, dts[q].t);
                double plain = conv_check_error(s, CONV_CHECK_SAMPLES, res[d]);
                double unrounded = conv_prec_error(un, CONV_CHECK_SAMPLES, out, dts[q].t);
                cr_assert(ok <= tol, "geometry %zu, %s, direction %d [seed %llu]: error %g > %g", k,
                          dg_dtype_name(dts[q].t), d, (unsigned long long)seed, ok, tol);
                cr_assert(plain > tol, "geometry %zu, %s, direction %d: the output's rounding alone passes (%g)", k,
                          dg_dtype_name(dts[q].t), d, plain);
                cr_assert(unrounded > tol, "geometry %zu, %s, direction %d: an unrounded reference passes (%g)", k,
                          dg_dtype_name(dts[q].t), d, unrounded);
                out[s[5].index] = dts[q].nan;
                cr_assert(isinf(conv_prec_error(s, CONV_CHECK_SAMPLES, out, dts[q].t)), "geometry %zu, %s: NaN", k,
                          dg_dtype_name(dts[q].t));
                free(out);
                free(res[d]);
            }
            for (int i = 0; i < 3; i++) free(rounded[i]);
            small_conv_free(&sc);
        }
}
