/* test_blas_core.c: the OpenBLAS core the bench runs its CPU rows on. The
 * decision from faked inputs (CPU features, the core OpenBLAS chose, the
 * cores its build accepts, the user's OPENBLAS_CORETYPE), the checked
 * sgemm that verifies a core, the fall-back when it fails, and the one
 * re-execution that applies the core beside the OpenMP wait policy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_backend/cpu_backend.h"
#include "machine/blas_core.h"
#include "machine/reexec.h"
#include "machine/wait_policy.h"
#include "shell_util.h"

/* CPUs by what they run */
static const bench_cpu_features sse3_only = {.sse3 = true};
static const bench_cpu_features avx2_cpu = {.sse3 = true, .ssse3 = true, .sse4_2 = true, .avx = true, .avx2 = true,
                                            .fma = true};
static const bench_cpu_features avx512_cpu = {.sse3 = true, .ssse3 = true, .sse4_2 = true, .avx = true,
                                              .avx2 = true, .fma = true, .avx512f = true, .avx512dq = true,
                                              .avx512cd = true, .avx512bw = true, .avx512vl = true};

static bench_cpu_features with_bf16(bool amx) {
    bench_cpu_features f = avx512_cpu;
    f.avx512_bf16 = true;
    f.amx_tile = f.amx_bf16 = amx;
    return f;
}

#define CONFIG_0321 "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Prescott MAX_THREADS=64"
#define CONFIG_0326 "OpenBLAS 0.3.26 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=128"

static bench_blas_choice choose(const bench_cpu_features *f, const char *core, const char *config, const char *user) {
    const char *cores[16];
    int n = bench_blas_cores_accepted(config, cores, 16);
    return bench_blas_core_choose(f, core, cores, n, user);
}

static void assert_switch(bench_blas_choice c, const char *core, const char *reason) {
    cr_assert_eq(c.action, BENCH_BLAS_SWITCH, "kept %s (%s), wanted %s", c.core, c.reason, core);
    cr_assert_str_eq(c.core, core);
    cr_assert_str_eq(c.reason, reason);
}

static void assert_keep(bench_blas_choice c, const char *core, const char *reason) {
    cr_assert_eq(c.action, BENCH_BLAS_KEEP, "switched to %s (%s)", c.core, c.reason);
    cr_assert_str_eq(c.core, core);
    cr_assert_str_eq(c.reason, reason);
}

Test(blas_core, the_names_a_build_accepts_follow_its_version_and_dynamic_arch) {
    const char *cores[16];
    int n = bench_blas_cores_accepted(CONFIG_0321, cores, 16);
    /* 0.3.21 answers Cooperlake and SapphireRapids with "Core not found" */
    cr_assert_eq(n, 6);
    cr_assert_str_eq(cores[0], "SkylakeX");
    cr_assert_str_eq(cores[1], "Haswell");
    cr_assert_str_eq(cores[5], "Prescott");
    n = bench_blas_cores_accepted(CONFIG_0326, cores, 16);
    cr_assert_eq(n, 8);
    cr_assert_str_eq(cores[0], "SapphireRapids");
    cr_assert_str_eq(cores[1], "Cooperlake");
    /* one core compiled in: OPENBLAS_CORETYPE means nothing to it */
    cr_assert_eq(bench_blas_cores_accepted("OpenBLAS 0.3.26 NO_AFFINITY SKYLAKEX MAX_THREADS=64", cores, 16), 0);
    cr_assert_eq(bench_blas_cores_accepted(NULL, cores, 16), 0);
    /* at most max names */
    cr_assert_eq(bench_blas_cores_accepted(CONFIG_0326, cores, 2), 2);
}

Test(blas_core, a_generic_core_on_an_avx512_cpu_is_switched_to_the_best_the_build_accepts) {
    bench_cpu_features bf16 = with_bf16(false), amx = with_bf16(true);
    /* the machine of the issue: 0.3.21 on a Xeon with AVX512-BF16 */
    assert_switch(choose(&bf16, "Prescott", CONFIG_0321, NULL), "SkylakeX",
                  "auto: OpenBLAS chose Prescott (SSE3 kernels) on a CPU with AVX512-BF16");
    /* a later build takes the names 0.3.21 refuses */
    assert_switch(choose(&bf16, "Prescott", CONFIG_0326, ""), "Cooperlake",
                  "auto: OpenBLAS chose Prescott (SSE3 kernels) on a CPU with AVX512-BF16");
    assert_switch(choose(&amx, "Core2", CONFIG_0326, NULL), "SapphireRapids",
                  "auto: OpenBLAS chose Core2 (SSSE3 kernels) on a CPU with AMX");
    /* a core older than the CPU, not only a generic one */
    assert_switch(choose(&avx512_cpu, "Haswell", CONFIG_0321, NULL), "SkylakeX",
                  "auto: OpenBLAS chose Haswell (AVX2 kernels) on a CPU with AVX-512");
}

Test(blas_core, the_choice_never_needs_an_instruction_the_cpu_lacks) {
    /* SkylakeX's kernels on an AVX2 CPU would stop at the first AVX-512
     * instruction (SIGILL) */
    assert_switch(choose(&avx2_cpu, "Prescott", CONFIG_0326, NULL), "Haswell",
                  "auto: OpenBLAS chose Prescott (SSE3 kernels) on a CPU with AVX2");
    assert_keep(choose(&sse3_only, "Prescott", CONFIG_0326, NULL), "Prescott",
                "OpenBLAS's own choice, the best this build has for a CPU with SSE3");
}

Test(blas_core, a_core_as_good_as_the_best_accepted_is_kept) {
    bench_cpu_features bf16 = with_bf16(false);
    assert_keep(choose(&bf16, "SkylakeX", CONFIG_0321, NULL), "SkylakeX",
                "OpenBLAS's own choice, the best this build has for a CPU with AVX512-BF16");
    assert_keep(choose(&avx2_cpu, "Zen", CONFIG_0326, NULL), "Zen",
                "OpenBLAS's own choice, the best this build has for a CPU with AVX2");
    /* better than the best accepted name: never a step down */
    assert_keep(choose(&bf16, "Cooperlake", CONFIG_0321, NULL), "Cooperlake",
                "OpenBLAS's own choice, the best this build has for a CPU with AVX512-BF16");
}

Test(blas_core, the_users_core_a_single_core_build_and_unknown_names_are_kept) {
    bench_cpu_features bf16 = with_bf16(false);
    assert_keep(choose(&bf16, "Prescott", CONFIG_0321, "Prescott"), "Prescott", "user-set: OPENBLAS_CORETYPE=Prescott");
    assert_keep(choose(&bf16, "Prescott", "OpenBLAS 0.3.21 NO_AFFINITY Prescott MAX_THREADS=64", NULL), "Prescott",
                "OpenBLAS's own choice; its build has no other (no DYNAMIC_ARCH)");
    assert_keep(choose(&bf16, "neoversen1", CONFIG_0326, NULL), "neoversen1",
                "OpenBLAS's own choice; not a core this bench ranks");
}

/* ---- the checked sgemm ---- */

/* a kernel that forgets the last term of every dot product */
static void short_sgemm(bool ta, bool tb, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc, bool acc) {
    dg_cpu_sgemm_naive(ta, tb, m, n, k - 1, A, lda, B, ldb, C, ldc, acc);
}

/* a kernel that writes NaN into one element */
static void nan_sgemm(bool ta, bool tb, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                      float *C, int ldc, bool acc) {
    dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, acc);
    C[(m / 2) * ldc + n / 2] = NAN;
}

Test(blas_core, the_checked_sgemm_passes_sound_kernels_and_fails_wrong_ones) {
    double e = bench_blas_sgemm_error(dg_cpu_sgemm_openblas);
    cr_assert(e <= BENCH_BLAS_SGEMM_TOL, "OpenBLAS (%s): %g", dg_cpu_blas_core(), e);
    e = bench_blas_sgemm_error(dg_cpu_sgemm_naive);
    cr_assert(e <= BENCH_BLAS_SGEMM_TOL, "naive: %g", e);
    e = bench_blas_sgemm_error(short_sgemm);
    cr_assert(e > BENCH_BLAS_SGEMM_TOL, "a kernel one term short passed: %g", e);
    cr_assert(isnan(bench_blas_sgemm_error(nan_sgemm)), "a NaN in C was not reported");
}

/* ---- verification in the executed image ---- */

static void set_bench_choice(const char *core) {
    char mark[128];
    snprintf(mark, sizeof mark, "%s (auto: a test)", core);
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv(BENCH_BLAS_CORE_MARK, mark, 1);
}

Test(blas_core, a_verified_core_is_described_with_its_check) {
    const char *got = dg_cpu_blas_core();
    set_bench_choice(got);
    cr_assert_eq(bench_blas_core_verify(), 0);
    char why[512], want[512];
    cr_assert(bench_blas_core_describe(why, sizeof why));
    snprintf(want, sizeof want, "%s (auto: a test; checked: OpenBLAS runs %s, sgemm max rel err ", got, got);
    cr_assert(!strncmp(why, want, strlen(want)), "%s", why);
    cr_assert_str_eq(getenv("OPENBLAS_CORETYPE"), got);
}

Test(blas_core, a_core_that_did_not_take_falls_back_to_openblas_own_choice) {
    /* this process's OpenBLAS loaded before the test set anything: asking
     * for another core now is what a build refusing the name looks like */
    const char *got = dg_cpu_blas_core(), *asked = strcasecmp(got, "Haswell") ? "Haswell" : "Sandybridge";
    set_bench_choice(asked);
    cr_assert_eq(bench_blas_core_verify(), 1);
    cr_assert_null(getenv("OPENBLAS_CORETYPE"));
    char want[256], why[512];
    snprintf(want, sizeof want, "default (fallback: OPENBLAS_CORETYPE=%s did not take: OpenBLAS runs %s)", asked, got);
    cr_assert_str_eq(getenv(BENCH_BLAS_CORE_MARK), want);
    /* the image executed with the fall-back: nothing more to decide or check */
    cr_assert_eq(bench_blas_core_decide(), 0);
    cr_assert_eq(bench_blas_core_verify(), 0);
    cr_assert(bench_blas_core_describe(why, sizeof why));
    snprintf(want, sizeof want, "%s (fallback: OPENBLAS_CORETYPE=%s did not take: OpenBLAS runs %s)", got, asked, got);
    cr_assert_str_eq(why, want);
}

Test(blas_core, a_core_that_fails_the_checked_sgemm_falls_back) {
    const char *got = dg_cpu_blas_core();
    set_bench_choice(got);
    cr_assert_eq(bench_blas_core_verify_with(short_sgemm), 1);
    cr_assert_null(getenv("OPENBLAS_CORETYPE"));
    char want[128];
    snprintf(want, sizeof want, "default (fallback: %s failed the checked sgemm (max rel err ", got);
    cr_assert(!strncmp(getenv(BENCH_BLAS_CORE_MARK), want, strlen(want)), "%s", getenv(BENCH_BLAS_CORE_MARK));
}

Test(blas_core, the_users_core_is_neither_checked_nor_replaced) {
    /* a marker left by another process does not make the user's core the bench's */
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    setenv(BENCH_BLAS_CORE_MARK, "SkylakeX (auto: a parent's choice)", 1);
    cr_assert_eq(bench_blas_core_decide(), 0);
    cr_assert_eq(bench_blas_core_verify_with(short_sgemm), 0);
    cr_assert_str_eq(getenv("OPENBLAS_CORETYPE"), "Haswell");
    char why[512], want[256];
    cr_assert(bench_blas_core_describe(why, sizeof why));
    snprintf(want, sizeof want, "%s (user-set: OPENBLAS_CORETYPE=Haswell)", dg_cpu_blas_core());
    cr_assert_str_eq(why, want);
}

/* ---- the one re-execution ---- */

/* What this process would decide with nothing set: the test expects an
 * execution where the decision is SWITCH (a machine where OpenBLAS falls
 * back, as the development machines) and none where it is KEEP. */
static bench_blas_choice this_machines_choice(void) {
    char config[256];
    const char *cores[16];
    dg_cpu_blas_info(config, sizeof config);
    int n = bench_blas_cores_accepted(config, cores, 16);
    bench_cpu_features f = bench_cpu_features_read();
    return bench_blas_core_choose(&f, dg_cpu_blas_core(), cores, n, NULL);
}

/* bench_reexec_apply_exe(choice, exe) in a child with OMP_WAIT_POLICY
 * `policy` and OPENBLAS_CORETYPE `core` (NULL: unset; no markers); its
 * stdout into out: what the executed sh printed, or "returned RC [env
 * OMP_WAIT_POLICY OPENBLAS_CORETYPE]", and the warning after it for RC 1 */
static void reexec_in_child(const char *choice, const char *policy, const char *core, const char *exe, char *out,
                            size_t n) {
    static char *const show[] = {"sh", "-c", "printf '%s|%s|%s' \"$OMP_WAIT_POLICY\" \"$OPENBLAS_CORETYPE\" "
                                 "\"$DG_BLAS_CORE_WHY\"", NULL};
    child_capture cc;
    if (child_capture_fork(&cc)) {
        unsetenv("GOMP_SPINCOUNT");
        unsetenv(BENCH_WAIT_POLICY_MARK);
        unsetenv(BENCH_BLAS_CORE_MARK);
        if (policy) setenv("OMP_WAIT_POLICY", policy, 1);
        else unsetenv("OMP_WAIT_POLICY");
        if (core) setenv("OPENBLAS_CORETYPE", core, 1);
        else unsetenv("OPENBLAS_CORETYPE");
        char warn[512];
        int rc = bench_reexec_apply_exe(choice, exe, (char **)show, warn, sizeof warn);
        const char *pol = getenv("OMP_WAIT_POLICY"), *cor = getenv("OPENBLAS_CORETYPE");
        printf("returned %d [env %s %s]%s%s", rc, pol ? pol : "-", cor ? cor : "-", rc == 1 ? " " : "",
               rc == 1 ? warn : "");
        fflush(stdout);
        _exit(0);
    }
    child_capture_finish(&cc, out, n);
}

Test(blas_core, the_core_and_the_wait_policy_are_applied_by_one_execution) {
    bench_blas_choice c = this_machines_choice();
    char out[1024], want[600];
    reexec_in_child("passive", NULL, NULL, "/bin/sh", out, sizeof out);
    if (c.action == BENCH_BLAS_SWITCH)
        snprintf(want, sizeof want, "passive|%s|%s (%s)", c.core, c.core, c.reason);
    else
        snprintf(want, sizeof want, "passive||");
    cr_assert_str_eq(out, want);
    /* the wait policy set by the user: the core alone still executes */
    reexec_in_child("auto", "active", NULL, "/bin/sh", out, sizeof out);
    if (c.action == BENCH_BLAS_SWITCH)
        snprintf(want, sizeof want, "active|%s|%s (%s)", c.core, c.core, c.reason);
    else
        snprintf(want, sizeof want, "returned 0 [env active -]");
    cr_assert_str_eq(out, want);
}

Test(blas_core, the_users_core_executes_nothing) {
    char out[1024];
    reexec_in_child("auto", "active", "Haswell", "/bin/sh", out, sizeof out);
    cr_assert_str_eq(out, "returned 0 [env active Haswell]");
}

Test(blas_core, a_failed_execution_restores_the_environment) {
    bench_blas_choice c = this_machines_choice();
    char out[1024], want[1024];
    reexec_in_child("auto", "active", NULL, "/nonexistent/bench", out, sizeof out);
    /* the warning says the core kept, the one wanted, and why it is not in force */
    if (c.action == BENCH_BLAS_SWITCH)
        snprintf(want, sizeof want, "returned 1 [env active -] openblas core: %s (%s; %s would serve it better; not "
                 "applied: OPENBLAS_CORETYPE=%s: could not execute /nonexistent/bench again: No such file or "
                 "directory)", dg_cpu_blas_core(), c.reason, c.core, c.core);
    else
        snprintf(want, sizeof want, "returned 0 [env active -]");
    cr_assert_str_eq(out, want);
}
