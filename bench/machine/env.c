#include "machine/env.h"

#include <glob.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_backend/cpu_backend.h"
#include "machine/host_cache.h"
#include "machine/host_load.h"
#include "machine/blas_core.h"
#include "machine/wait_policy.h"
#include <duograd/testing.h>
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif
/* written at build time by scripts/build_info.cmake */
extern const char *const dg_build_commit;
extern char **environ;
#ifndef DG_BUILD_FLAGS
#define DG_BUILD_FLAGS "unknown"
#endif

const char *bench_cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return buf;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + (v[1] == ' ');
                v[strcspn(v, "\n")] = '\0';
                snprintf(buf, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
    return buf;
}

double bench_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* a cut last line would swallow the header written after it */
static void end_with_newline(char *buf) {
    size_t len = strlen(buf);
    if (len > 0 && buf[len - 1] != '\n') buf[len - 1] = '\n';
}

void bench_env_meta(char *buf, size_t n, int threads, dg_backend *gpu) {
    char cpu[256], blas[256], gpuinfo[256] = "none", date[64], coretype[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
#ifdef DG_HAVE_CUDA
    if (gpu) dg_gpu_info(gpu, gpuinfo, sizeof gpuinfo);
#else
    (void)gpu;
    snprintf(gpuinfo, sizeof gpuinfo, "none (built without CUDA)");
#endif
    if (!gpu && strcmp(gpuinfo, "none") == 0) snprintf(gpuinfo, sizeof gpuinfo, "none (no CUDA device answered)");
    snprintf(coretype, sizeof coretype, "%s", getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    bench_cpu_model(cpu, sizeof cpu);
    dg_cpu_blas_info(blas, sizeof blas);
    char onednn[160];
    dg_cpu_onednn_info(onednn, sizeof onednn);
    snprintf(buf, n,
             "# duograd bench %s\n# git commit: %s\n# date: %s\n# cpu: %s\n# cores: %ld\n# threads: %d\n"
             "# openblas: %s (OPENBLAS_CORETYPE=%s)\n# onednn: %s\n# gpu: %s\n# precision: per row (column dtype; TF32 where it is tf32)\n# build: %s\n"
             "# timing: median of repeated runs after warm-up; GPU rows without transfers use CUDA events, "
             "rows with transfer=1 and CPU rows use CLOCK_MONOTONIC around a synchronised region\n",
             DG_VERSION, dg_build_commit, date, bench_one_line(cpu), sysconf(_SC_NPROCESSORS_ONLN),
             threads, bench_one_line(blas), bench_one_line(coretype), bench_one_line(onednn), bench_one_line(gpuinfo),
             DG_BUILD_FLAGS);
    end_with_newline(buf);
}

/* appends printf-like text to the NUL-terminated text in buf; output that
 * does not fit is cut (end_with_newline mends the last line) */
static void appendf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t n, const char *fmt, ...) {
    size_t len = strnlen(buf, n);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

void bench_env_snapshot(char *buf, size_t n, const char *when) {
    double l[3];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (getloadavg(l, 3) == 3)
        appendf(buf, n, "# load at %s: %.2f %.2f %.2f (1, 5, 15 min; %ld online cores)\n", when, l[0], l[1], l[2],
                cores);
    else
        appendf(buf, n, "# load at %s: unknown (getloadavg failed)\n", when);
    end_with_newline(buf);
}

void bench_cpu_governors(const char *cpu_dir, char *buf, size_t n) {
    enum { MAX_KINDS = 8 };
    char kinds[MAX_KINDS][64], pattern[512];
    int count[MAX_KINDS] = {0}, n_kinds = 0, other = 0;
    snprintf(pattern, sizeof pattern, "%s/cpu[0-9]*/cpufreq/scaling_governor", cpu_dir);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            FILE *f = fopen(g.gl_pathv[i], "r");
            char v[64] = "";
            if (!f) continue;
            if (!fgets(v, sizeof v, f)) v[0] = '\0';
            fclose(f);
            v[strcspn(v, "\n")] = '\0';
            if (!v[0]) continue;
            bench_one_line(v);
            int k = 0;
            while (k < n_kinds && strcmp(kinds[k], v)) k++;
            if (k == n_kinds && n_kinds == MAX_KINDS) {
                other++;
                continue;
            }
            if (k == n_kinds) snprintf(kinds[n_kinds++], sizeof kinds[0], "%s", v);
            count[k]++;
        }
    }
    globfree(&g);
    buf[0] = '\0';
    if (n_kinds == 0) {
        snprintf(buf, n, "unknown (no cpufreq)");
        return;
    }
    for (int k = 0; k < n_kinds; k++)
        appendf(buf, n, "%s%s (%d cpu%s)", k ? ", " : "", kinds[k], count[k], count[k] == 1 ? "" : "s");
    if (other) appendf(buf, n, ", %d cpus with other governors", other);
}

/* s as a POSIX shell word: bare when every character is harmless, else
 * single-quoted ('\'' for a quote); cut with "..." where out is too small */
static void shell_quote(const char *s, char *out, size_t n) {
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
    if (n < 8) {
        if (n) out[0] = '\0';
        return;
    }
    if (*s && strspn(s, safe) == strlen(s)) {
        if ((size_t)snprintf(out, n, "%s", s) >= n) strcpy(out + n - 4, "...");
        return;
    }
    size_t j = 0;
    out[j++] = '\'';
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t len = piece ? 4 : 1;
        if (j + len + 5 > n) { /* room for "'..." and the NUL */
            strcpy(out + j, "'...");
            return;
        }
        if (piece) memcpy(out + j, piece, len);
        else out[j] = *s;
        j += len;
    }
    out[j++] = '\'';
    out[j] = '\0';
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the variables that change how the OpenMP runtime, OpenBLAS or CUDA run */
static bool tuning_variable(const char *entry) {
    static const char *const prefixes[] = {"OMP_", "GOMP_", "OPENBLAS_", "CUDA_", "DG_GPU_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(entry, prefixes[i], strlen(prefixes[i]))) return true;
    return false;
}

static void append_environment(char *buf, size_t n) {
    enum { MAX_VARS = 64 };
    const char *vars[MAX_VARS];
    int n_vars = 0, more = 0;
    for (char **e = environ; *e; e++)
        if (tuning_variable(*e)) {
            if (n_vars < MAX_VARS) vars[n_vars++] = *e;
            else more++;
        }
    qsort(vars, (size_t)n_vars, sizeof vars[0], by_name);
    appendf(buf, n, "# environment (OMP_*, GOMP_*, OPENBLAS_*, CUDA_*, DG_GPU_*):");
    if (!n_vars) appendf(buf, n, " none set");
    for (int i = 0; i < n_vars; i++) {
        const char *eq = strchr(vars[i], '=');
        int name_len = eq ? (int)(eq - vars[i]) : (int)strlen(vars[i]);
        char word[320], entry[400];
        shell_quote(eq ? eq + 1 : "", word, sizeof word);
        snprintf(entry, sizeof entry, "%.*s=%s", name_len > 64 ? 64 : name_len, vars[i], word);
        appendf(buf, n, " %s", bench_one_line(entry));
    }
    if (more) appendf(buf, n, " and %d more", more);
    appendf(buf, n, "\n");
}

static void append_command_line(char *buf, size_t n, int argc, char *const *argv) {
    appendf(buf, n, "# command line:");
    for (int i = 0; i < argc; i++) {
        char word[512];
        shell_quote(argv[i], word, sizeof word);
        appendf(buf, n, " %s", bench_one_line(word));
    }
    appendf(buf, n, "\n");
}

static void append_gpu_device(char *buf, size_t n, dg_backend *gpu) {
#ifdef DG_HAVE_CUDA
    if (!gpu) return;
    char bus[64];
    if (dg_gpu_pci_bus_id(gpu, bus, sizeof bus) != DG_OK) snprintf(bus, sizeof bus, "unknown");
    size_t l2 = dg_gpu_l2_bytes(gpu);
    appendf(buf, n, "# gpu device: l2 %.1f MiB (%zu bytes), pci bus id %s\n", (double)l2 / (1 << 20), l2,
            bench_one_line(bus));
#else
    (void)buf, (void)n, (void)gpu;
#endif
}

/* the caches a cold CPU run empties, and what it writes to empty them */
static void append_host_caches(char *buf, size_t n) {
    bench_host_caches c = bench_host_caches_of();
    appendf(buf, n, "# host caches: L2 %lld KiB a core, last level %lld KiB x %d (--cold writes %.0f MB first)\n",
            (long long)(c.l2_bytes >> 10), (long long)(c.llc_bytes >> 10), c.llcs,
            (double)bench_host_flush_bytes(c, omp_get_num_procs()) / 1e6);
}

void bench_env_meta_more(char *buf, size_t n, int argc, char *const *argv, dg_backend *gpu) {
    char governors[256], policy[512], core[512];
    bench_env_snapshot(buf, n, "start");
    bench_cpu_governors("/sys/devices/system/cpu", governors, sizeof governors);
    appendf(buf, n, "# cpu governor: %s\n", governors);
    append_environment(buf, n);
    append_command_line(buf, n, argc, argv);
    bench_wait_policy_describe(policy, sizeof policy);
    appendf(buf, n, "# openmp wait policy: %s\n", policy);
    bench_blas_core_describe(core, sizeof core);
    appendf(buf, n, "# openblas core: %s\n", core);
    append_host_caches(buf, n);
    append_gpu_device(buf, n, gpu);
    end_with_newline(buf);
}
