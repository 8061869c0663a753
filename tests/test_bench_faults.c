/* test_bench_faults.c: a sweep meets a failing backend. An allocation that
 * fails in the middle gives an oom row and the sweep goes on with the
 * backend still usable (CPU and GPU, through dg_backend_fail_alloc_after);
 * a sticky GPU fault (a kernel storing through a null pointer) makes the
 * GPU rows after it failed rows naming the fault while the CPU rows still
 * run. GPU tests skip, with the reason, where no CUDA device answers. */
#include <math.h>

#include <duograd/testing.h>

#include "cpu_backend/cpu_backend.h"
#include "held.h"
#include "shell_util.h"
#include "runner/sweep.h"
#include "test_util.h"
#ifdef DG_HAVE_CUDA
#include "gpu_util.h"
#endif

/* the backends, rows, file and folder a failed assertion leaves: released */
TestSuite(bench_faults, .fini = held_release);

/* the rows of one ops sweep at 4096 elements on cpu and/or gpu (held);
 * --cpu-cap at its largest: no row skipped because the build is slow */
typedef struct sweep_rows { csv_rec *r; int n; } sweep_rows;

static sweep_rows run_ops(dg_backend *cpu, dg_backend *gpu) {
    char dir[] = "/tmp/dg-faults-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = cpu, .gpu = gpu, .threads = 2,
                     .size_lists = {{.v = {4096}, .n = 1}}, .n_size_lists = 1,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir, "ops", "# faults\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    ASSERT_OK(sweep_ops(&ctx));
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "ops", true));
    char path[256];
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    sweep_rows rows;
    rows.r = held_ptr(bench_csv_read(path, &rows.n));
    cr_assert_not_null(rows.r, "%s", dg_last_error());
    return rows;
}

/* one allocation fails: the oom rows are those of one case (its forward
 * and backward rows share the plan), and ok rows follow them */
static void expect_one_oom_then_ok(const sweep_rows *s, const char *be) {
    int first_oom = -1, ok_after = 0;
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->r[i].backend, be)) continue;
        if (!strcmp(s->r[i].status, "oom")) {
            if (first_oom < 0) first_oom = i;
            cr_assert_str_eq(s->r[i].name, s->r[first_oom].name, "one failed allocation, oom rows of two cases");
        } else if (first_oom >= 0 && !strcmp(s->r[i].status, "ok")) {
            ok_after++;
        }
    }
    cr_assert_geq(first_oom, 0, "no oom row on %s", be);
    cr_assert_gt(ok_after, 3, "the %s backend did not go on after the oom row (%d ok rows after it)", be, ok_after);
}

Test(bench_faults, an_allocation_failure_is_an_oom_row_and_the_cpu_sweep_goes_on) {
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    held_backend(cpu, cpu->iface);
    dg_backend_fail_alloc_after(cpu, 5); /* an allocation of the third or so case */
    sweep_rows s = run_ops(cpu, NULL);
    expect_one_oom_then_ok(&s, "cpu");
}

#ifdef DG_HAVE_CUDA
/* counts rows of backend be ("cpu", "gpu") with status st */
static int count(const sweep_rows *s, const char *be, const char *st) {
    int n = 0;
    for (int i = 0; i < s->n; i++) n += !strcmp(s->r[i].backend, be) && !strcmp(s->r[i].status, st);
    return n;
}

static dg_backend *gpu_or_skip(void) { return gpu_open_or_skip(NULL); }

Test(bench_faults, an_allocation_failure_is_an_oom_row_and_the_gpu_sweep_goes_on) {
    dg_backend *gpu = gpu_or_skip();
    held_backend(gpu, gpu->iface);
    dg_backend_fail_alloc_after(gpu, 5);
    sweep_rows s = run_ops(NULL, gpu);
    expect_one_oom_then_ok(&s, "gpu");
}

Test(bench_faults, after_a_sticky_gpu_fault_gpu_rows_fail_and_cpu_rows_run) {
    dg_backend *gpu = gpu_or_skip(), *cpu;
    held_backend(gpu, gpu->iface);
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    held_backend(cpu, cpu->iface);
    cr_assert_eq(dg_gpu_inject_fault(gpu), DG_ERR_BACKEND);
    cr_assert(strstr(dg_last_error(), "cudaErrorIllegalAddress") && strstr(dg_last_error(), "unusable"), "%s",
              dg_last_error());
    char why[256];
    cr_assert(dg_gpu_faulted(gpu, why, sizeof why));
    sweep_rows s = run_ops(cpu, gpu);
    cr_assert_gt(count(&s, "cpu", "ok"), 10, "the CPU rows must still run");
    cr_assert_eq(count(&s, "gpu", "ok"), 0, "no GPU row can pass after the fault");
    cr_assert_gt(count(&s, "gpu", "error"), 10, "the GPU rows must be failed rows");
    /* every later call fails at once, naming the fault */
    void *p = NULL;
    cr_assert_eq(dg_backend_alloc(gpu, 64, &p), DG_ERR_BACKEND);
    cr_assert(strstr(dg_last_error(), "unusable since its fault (cudaErrorIllegalAddress)"), "%s", dg_last_error());
}
#else
Test(bench_faults, gpu_fault_tests_need_a_cuda_build) { cr_skip_test("built without CUDA: the GPU fault tests are not compiled"); }
#endif
