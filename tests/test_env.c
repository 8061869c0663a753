/* test_env.c: the '#' metadata of every CSV (what changes the numbers), the
 * recorded git commit, the NVML monitor without a driver, and the OpenMP
 * wait policy chosen before libgomp starts. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "machine/env.h"
#include "machine/gpu_monitor.h"
#include "shell_util.h"
#include "machine/reexec.h"
#include "machine/wait_policy.h"
#include "cpu_backend/cpu_backend.h"

extern char **environ;
extern const char *const dg_build_commit;

/* the line of text that starts with prefix, without its newline, into line */
static bool find_line(const char *text, const char *prefix, char *line, size_t n) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            size_t len = strcspn(p, "\n");
            snprintf(line, n, "%.*s", (int)len, p);
            return true;
        }
    return false;
}

static void assert_matches(const char *s, const char *pattern) {
    regex_t re;
    cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0, "bad pattern %s", pattern);
    int rc = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    cr_assert_eq(rc, 0, "'%s' does not match %s", s, pattern);
}

/* every line a '#' line, the text ending with a newline: nothing in the
 * metadata can start a CSV row */
static void assert_all_comment_lines(const char *text) {
    size_t len = strlen(text);
    cr_assert(len > 0 && text[len - 1] == '\n', "the metadata does not end with a newline:\n%s", text);
    for (const char *p = text; *p; p = strchr(p, '\n') + 1)
        cr_assert_eq(*p, '#', "a line that is not a '#' line: %.40s", p);
}

/* removes every variable the environment line lists */
static void clear_tuning_variables(void) {
    char names[64][128];
    int n = 0;
    for (char **e = environ; *e && n < 64; e++)
        if (!strncmp(*e, "OMP_", 4) || !strncmp(*e, "GOMP_", 5) || !strncmp(*e, "OPENBLAS_", 9) ||
            !strncmp(*e, "CUDA_", 5) || !strncmp(*e, "DG_GPU_", 7))
            snprintf(names[n++], sizeof names[0], "%.*s", (int)strcspn(*e, "="), *e);
    for (int i = 0; i < n; i++) unsetenv(names[i]);
}

static void meta_more(char *buf, size_t n, int argc, char *const *argv) {
    buf[0] = '\0';
    bench_env_meta_more(buf, n, argc, argv, NULL);
}

Test(bench_env, load_governor_wait_policy_and_blas_core_lines_are_there) {
    char buf[4096], line[512], want[600];
    char *argv[] = {"bench", NULL};
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(BENCH_WAIT_POLICY_MARK);
    meta_more(buf, sizeof buf, 1, argv);
    assert_all_comment_lines(buf);
    cr_assert(find_line(buf, "# load at start: ", line, sizeof line), "no load line:\n%s", buf);
    assert_matches(line, "^# load at start: [0-9]+\\.[0-9]{2} [0-9]+\\.[0-9]{2} [0-9]+\\.[0-9]{2} "
                         "\\(1, 5, 15 min; [1-9][0-9]* online cores\\)$");
    char governors[256];
    bench_cpu_governors("/sys/devices/system/cpu", governors, sizeof governors);
    snprintf(want, sizeof want, "# cpu governor: %s", governors);
    cr_assert(find_line(buf, "# cpu governor: ", line, sizeof line), "no governor line:\n%s", buf);
    cr_assert_str_eq(line, want);
    cr_assert(find_line(buf, "# openmp wait policy: ", line, sizeof line), "no wait-policy line:\n%s", buf);
    cr_assert_str_eq(line, "# openmp wait policy: passive (set by the user: OMP_WAIT_POLICY=passive)");
    /* the core this process's OpenBLAS runs, and that the user set one */
    snprintf(want, sizeof want, "# openblas core: %s (user-set: OPENBLAS_CORETYPE=Haswell)", dg_cpu_blas_core());
    cr_assert(find_line(buf, "# openblas core: ", line, sizeof line), "no openblas-core line:\n%s", buf);
    cr_assert_str_eq(line, want);
    cr_assert(find_line(buf, "# host caches: ", line, sizeof line), "no host-cache line:\n%s", buf);
    assert_matches(line, "^# host caches: L2 [0-9]+ KiB a core, last level [0-9]+ KiB x [1-9][0-9]* "
                         "\\(--cold writes [1-9][0-9]* MB first\\)$");
}

Test(bench_env, governors_are_counted_per_value_and_a_machine_without_cpufreq_says_so) {
    char dir[] = "/tmp/dg-gov-XXXXXX", path[256], got[256];
    tmp_dir(dir);
    bench_cpu_governors(dir, got, sizeof got);
    cr_assert_str_eq(got, "unknown (no cpufreq)");
    const char *gov[] = {"performance\n", "powersave\n", "performance\n", NULL};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/cpu%d", dir, i);
        cr_assert_eq(mkdir(path, 0755), 0);
        if (!gov[i]) continue; /* cpu3: no cpufreq folder */
        snprintf(path, sizeof path, "%s/cpu%d/cpufreq", dir, i);
        cr_assert_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/cpu%d/cpufreq/scaling_governor", dir, i);
        write_file(path, gov[i]);
    }
    snprintf(path, sizeof path, "%s/cpufreq", dir); /* not a CPU */
    cr_assert_eq(mkdir(path, 0755), 0);
    bench_cpu_governors(dir, got, sizeof got);
    cr_assert_str_eq(got, "performance (2 cpus), powersave (1 cpu)");
    remove_dir(dir);
}

Test(bench_env, tuning_variables_are_listed_sorted_with_values_quoted_and_flattened) {
    char buf[4096], line[1024];
    char *argv[] = {"bench", NULL};
    clear_tuning_variables();
    meta_more(buf, sizeof buf, 1, argv);
    cr_assert(find_line(buf, "# environment ", line, sizeof line), "no environment line:\n%s", buf);
    cr_assert_str_eq(line, "# environment (OMP_*, GOMP_*, OPENBLAS_*, CUDA_*, DG_GPU_*): none set");
    setenv("OPENBLAS_VERBOSE", "2\nnot a row, x", 1);
    setenv("OMP_PROC_BIND", "spread,close", 1);
    setenv("GOMP_SPINCOUNT", "1000", 1);
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    setenv("OMPX_NOT_OURS", "1", 1);
    meta_more(buf, sizeof buf, 1, argv);
    assert_all_comment_lines(buf);
    cr_assert(find_line(buf, "# environment ", line, sizeof line));
    cr_assert_str_eq(line, "# environment (OMP_*, GOMP_*, OPENBLAS_*, CUDA_*, DG_GPU_*): CUDA_VISIBLE_DEVICES=1 "
                           "GOMP_SPINCOUNT=1000 OMP_PROC_BIND=spread,close OPENBLAS_VERBOSE='2?not a row, x'");
}

Test(bench_env, the_command_line_is_shell_quoted_on_one_line) {
    char buf[4096], line[1024];
    char *argv[] = {"./bench", "--out", "my results", "it's", "a\nb", "--sizes=64,128", "", NULL};
    meta_more(buf, sizeof buf, 7, argv);
    assert_all_comment_lines(buf);
    cr_assert(find_line(buf, "# command line: ", line, sizeof line), "no command line:\n%s", buf);
    cr_assert_str_eq(line, "# command line: ./bench --out 'my results' 'it'\\''s' 'a?b' --sizes=64,128 ''");
}

Test(bench_env, a_small_buffer_cuts_the_metadata_but_keeps_it_comment_lines) {
    char *argv[] = {"./bench", "--a-long-argument-that-does-not-fit-anywhere-near-the-end-of-a-small-buffer", NULL};
    for (size_t n = 40; n < 400; n += 37) {
        char buf[400];
        meta_more(buf, n, 2, argv);
        cr_assert_lt(strlen(buf), n);
        assert_all_comment_lines(buf);
    }
}

Test(bench_env, the_load_snapshot_is_appended_and_the_loaded_verdict_matches_its_numbers) {
    char buf[256] = "# earlier line\n";
    bench_env_snapshot(buf, sizeof buf, "end of sweep");
    assert_matches(buf, "^# earlier line\n# load at end of sweep: [0-9.]+ [0-9.]+ [0-9.]+ \\(1, 5, 15 min; "
                        "[0-9]+ online cores\\)\n$");
    char why[160], op[3];
    double busy, bar;
    long cores;
    int ms;
    bool loaded = bench_env_loaded(why, sizeof why);
    cr_assert_eq(sscanf(why, "%lf of %ld cores busy over %d ms %2s %lf", &busy, &cores, &ms, op, &bar), 5, "%s",
                 why);
    cr_assert_eq(cores, sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert_eq(ms, BENCH_BUSY_SAMPLE_MS);
    cr_assert(busy >= 0 && busy <= cores + 0.005, "%s", why);
    cr_assert_str_eq(op, loaded ? ">=" : "<", "%s", why);
    cr_assert_eq(loaded, busy >= 0.5, "%s", why);
}

Test(bench_env, cpu_ticks_count_user_nice_system_irq_softirq_as_busy_and_idle_iowait_as_idle) {
    char path[] = "/tmp/dg-stat-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    /*                                      user nice sys idle iowait irq softirq steal guest guest_nice */
    static const char stat[] = "cpu  1000 20 300 5000 40 6 7 800 0 0\ncpu0 500 10 150 2500 20 3 3 400 0 0\n";
    cr_assert_eq(write(fd, stat, sizeof stat - 1), (ssize_t)(sizeof stat - 1));
    close(fd);
    unsigned long long busy = 0, idle = 0;
    cr_assert(bench_cpu_ticks(path, &busy, &idle));
    cr_assert_eq(busy, 1000 + 20 + 300 + 6 + 7, "busy %llu", busy);
    cr_assert_eq(idle, 5000 + 40, "idle %llu", idle);
    unlink(path);
    cr_assert_not(bench_cpu_ticks(path, &busy, &idle), "a missing file reads as ticks");
}

Test(bench_env, busy_cores_are_the_busy_share_of_the_ticks_between_two_samples_times_the_cores) {
    /* 2 cores, 200 ticks passed, 50 of them busy: half a core */
    cr_assert_float_eq(bench_busy_cores(1000, 5000, 1050, 5150, 2), 0.5, 1e-12);
    cr_assert_float_eq(bench_busy_cores(1000, 5000, 1200, 5000, 2), 2.0, 1e-12);
    cr_assert_float_eq(bench_busy_cores(1000, 5000, 1000, 5400, 16), 0.0, 1e-12);
    cr_assert_lt(bench_busy_cores(1000, 5000, 1000, 5000, 2), 0, "no tick passed");
    cr_assert_lt(bench_busy_cores(1000, 5000, 900, 5200, 2), 0, "a counter went back");
}

/* runs scripts/build_info.cmake on the git repository `repo`; the
 * generated C text */
static char *build_info(const char *repo, const char *out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmake -DSRC='%s' -DOUT='%s' -P '%s/scripts/build_info.cmake'", repo, out,
             DG_SOURCE_DIR);
    cr_assert_eq(sh(cmd, NULL, 0), 0, "%s", cmd);
    return read_file(out);
}

Test(bench_env, the_build_commit_is_the_short_hash_and_dash_dirty_for_a_changed_tree) {
    assert_matches(dg_build_commit, "^([0-9a-f]{7,40}(-dirty)?|unknown)$");
    char dir[] = "/tmp/dg-git-XXXXXX", cmd[1024], hash[64], out[300], want[256];
    tmp_dir(dir);
    snprintf(out, sizeof out, "%s/build_info.c", dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir repo && cd repo && git init -q && echo a > f && git add f && "
             "git -c user.name=t -c user.email=t@t commit -q -m one && git rev-parse --short HEAD",
             dir);
    cr_assert_eq(sh(cmd, hash, sizeof hash), 0, "%s: %s", cmd, hash);
    hash[strcspn(hash, "\n")] = '\0';
    snprintf(cmd, sizeof cmd, "%s/repo", dir);
    char *clean = build_info(cmd, out);
    snprintf(want, sizeof want, "const char *const dg_build_commit = \"%s\";", hash);
    cr_assert(strstr(clean, want), "want %s in:\n%s", want, clean);
    snprintf(cmd, sizeof cmd, "echo b >> '%s/repo/f'", dir);
    cr_assert_eq(sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "%s/repo", dir);
    char *dirty = build_info(cmd, out);
    snprintf(want, sizeof want, "const char *const dg_build_commit = \"%s-dirty\";", hash);
    cr_assert(strstr(dirty, want), "want %s in:\n%s", want, dirty);
    free(clean);
    free(dirty);
    remove_dir(dir);
}

Test(bench_gpu_monitor, without_nvml_or_device_open_gives_null_with_the_reason_and_null_is_accepted) {
    char why[256] = "";
    bench_gpu_monitor *m = bench_gpu_monitor_open("0000:ff:1f.7", why, sizeof why);
    /* here no driver; on a GPU machine no device sits at that address */
    cr_assert_null(m);
    cr_assert(!strncmp(why, "NVML not available: ", 20), "%s", why);
    cr_assert_gt(strlen(why), 20, "no cause given: %s", why);
    why[0] = '\0';
    cr_assert_null(bench_gpu_monitor_open(NULL, why, sizeof why));
    cr_assert(!strncmp(why, "NVML not available: ", 20), "%s", why);
    char buf[64] = "# kept\n";
    bench_gpu_monitor_snapshot(NULL, buf, sizeof buf, "start");
    cr_assert_str_eq(buf, "# kept\n");
    cr_assert_not(bench_gpu_monitor_throttled(NULL, why, sizeof why));
    bench_gpu_monitor_close(NULL);
}

/* Through a fake NVML with known readings (tests/fake_libnvml.c): each
 * value printed is the one the library answered. Catches reading a value
 * before the call that fills it (the monitor once printed "sm 0 MHz, 0 C,
 * 0 W" on an H100 at 345 MHz, 35 C, 73 W). */
Test(bench_gpu_monitor, prints_the_readings_nvml_answers) {
    void *fake = dlopen(DG_FAKE_NVML, RTLD_NOW | RTLD_GLOBAL);
    cr_assert_not_null(fake, "%s", dlerror());
    char why[256] = "";
    cr_assert_null(bench_gpu_monitor_open("0000:00:07.0", why, sizeof why));
    cr_assert(strstr(why, "0000:00:07.0: Not Found"), "%s", why);
    bench_gpu_monitor *m = bench_gpu_monitor_open("0000:00:06.0", why, sizeof why);
    cr_assert_not_null(m, "%s", why);
    char buf[512] = "";
    bench_gpu_monitor_snapshot(m, buf, sizeof buf, "start of sweep");
    cr_assert_str_eq(buf, "# gpu at start of sweep: sm 1980 MHz, mem 2619 MHz, 38 C, 204 W, "
                          "throttle: sw power cap (gpu idle)\n");
    cr_assert(bench_gpu_monitor_throttled(m, why, sizeof why));
    cr_assert_str_eq(why, "sw power cap (gpu idle)");
    bench_gpu_monitor_close(m);
    dlclose(fake);
}

Test(bench_gpu_monitor, reason_bits_are_named_and_only_slowdowns_count_as_throttling) {
    static const struct {
        uint64_t    bits;
        const char *text;
        bool        throttled;
    } cases[] = {
        {0, "none", false},
        {0x1, "none (gpu idle)", false},
        {0x2, "none (applications clocks setting)", false},
        {0x100, "none (display clock setting)", false},
        {0x4, "sw power cap", true},
        {0x8, "hw slowdown", true},
        {0x10, "sync boost", true},
        {0x20, "sw thermal", true},
        {0x40, "hw thermal", true},
        {0x80, "power brake", true},
        {0x4 | 0x40 | 0x1, "sw power cap, hw thermal (gpu idle)", true},
        {0x200, "none (other bits 0x200)", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        bool t = bench_gpu_reasons_text(cases[i].bits, buf, sizeof buf);
        cr_assert_str_eq(buf, cases[i].text, "bits 0x%llx", (unsigned long long)cases[i].bits);
        cr_assert_eq(t, cases[i].throttled, "bits 0x%llx", (unsigned long long)cases[i].bits);
    }
}

/* Runs bench_reexec_apply_exe(choice, exe, argv) in a child with the given
 * OMP_WAIT_POLICY (NULL: unset) and marker, and the OpenBLAS core the
 * process runs as the user's OPENBLAS_CORETYPE (so only the wait policy
 * may execute anything: test_blas_core.c covers the core); the child's
 * stdout (what an executed program printed, or "returned RC: WHY" with
 * WHY the policy described) into out. */
static void apply_in_child(const char *choice, const char *policy, const char *mark, const char *exe,
                           char *const *argv, char *out, size_t n) {
    child_capture cc;
    if (child_capture_fork(&cc)) {
        unsetenv("GOMP_SPINCOUNT");
        if (policy) setenv("OMP_WAIT_POLICY", policy, 1);
        else unsetenv("OMP_WAIT_POLICY");
        if (mark) setenv(BENCH_WAIT_POLICY_MARK, mark, 1);
        else unsetenv(BENCH_WAIT_POLICY_MARK);
        setenv("OPENBLAS_CORETYPE", dg_cpu_blas_core(), 1);
        char why[512];
        int rc = bench_reexec_apply_exe(choice, exe, (char **)argv, why, sizeof why);
        if (rc >= 0) bench_wait_policy_describe(why, sizeof why);
        const char *pol = getenv("OMP_WAIT_POLICY"), *left = getenv(BENCH_WAIT_POLICY_MARK);
        printf("returned %d: %s [env %s %s]", rc, why, pol ? pol : "-", left ? left : "-");
        fflush(stdout);
        _exit(0);
    }
    child_capture_finish(&cc, out, n);
}

static char *const show_env[] = {"sh", "-c", "printf '%s|%s' \"$OMP_WAIT_POLICY\" \"$DG_WAIT_POLICY_WHY\"", NULL};

Test(bench_wait_policy, a_user_set_policy_is_kept_without_executing_anything) {
    char out[1024];
    apply_in_child("passive", "active", NULL, "/bin/sh", show_env, out, sizeof out);
    cr_assert_str_eq(out, "returned 0: active (set by the user: OMP_WAIT_POLICY=active) [env active -]");
    /* a marker left by another choice does not hide the user's */
    apply_in_child("auto", "active", "passive (auto: ...)", "/bin/sh", show_env, out, sizeof out);
    cr_assert_str_eq(out, "returned 0: active (set by the user: OMP_WAIT_POLICY=active) [env active passive "
                          "(auto: ...)]");
}

Test(bench_wait_policy, the_choice_is_set_and_the_program_executed_again_with_its_reason) {
    char out[1024];
    apply_in_child("passive", NULL, NULL, "/bin/sh", show_env, out, sizeof out);
    cr_assert_str_eq(out, "passive|passive (asked for with --wait-policy passive)");
    apply_in_child("active", NULL, "stale (marker)", "/bin/sh", show_env, out, sizeof out);
    cr_assert_str_eq(out, "active|active (asked for with --wait-policy active)");
    apply_in_child("auto", NULL, NULL, "/bin/sh", show_env, out, sizeof out);
    assert_matches(out, "^(active|passive)\\|(active|passive) \\(auto: [0-9.]+ of [0-9]+ cores busy over [0-9]+ ms "
                        "(>=|<) 0\\.5\\)$");
    cr_assert_eq(strncmp(out, "passive", 7) == 0, strstr(out, " >= ") != NULL, "passive exactly when loaded: %s",
                 out);
}

Test(bench_wait_policy, the_executed_image_reports_the_policy_in_force) {
    char out[1024];
    apply_in_child("auto", "passive", "passive (auto: 1.90 of 2 cores busy over 200 ms >= 0.5)", "/bin/sh",
                   show_env, out, sizeof out);
    cr_assert_str_eq(out, "returned 0: passive (auto: 1.90 of 2 cores busy over 200 ms >= 0.5) [env passive "
                          "passive (auto: 1.90 of 2 cores busy over 200 ms >= 0.5)]");
}

Test(bench_wait_policy, a_failed_exec_restores_the_environment_and_says_what_libgomp_keeps) {
    char out[1024];
    apply_in_child("passive", NULL, NULL, "/nonexistent/bench", show_env, out, sizeof out);
    cr_assert_str_eq(out, "returned 1: libgomp default (OMP_WAIT_POLICY unset: spin about 300000 iterations, then "
                          "sleep); could not execute /nonexistent/bench again: No such file or directory [env - -]");
}

Test(bench_wait_policy, an_unknown_choice_is_refused) {
    char why[256];
    cr_assert_eq(bench_reexec_apply("spin\n", NULL, why, sizeof why), -1);
    cr_assert_str_eq(why, "unknown wait policy 'spin?' (auto, active or passive)");
}
