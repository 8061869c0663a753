#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_backend/cpu_backend.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif
/* written at build time by scripts/build_info.cmake */
extern const char *const dg_build_commit;
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

/* s with every control character (a newline would end the '#' line and
 * start a row) replaced by '?' */
static char *one_line(char *s) {
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return s;
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
    snprintf(buf, n,
             "# duograd bench %s\n# git commit: %s\n# date: %s\n# cpu: %s\n# cores: %ld\n# threads: %d\n"
             "# openblas: %s (OPENBLAS_CORETYPE=%s)\n# gpu: %s\n# tf32: per row (column tf32)\n# build: %s\n"
             "# timing: median of repeated runs after warm-up; GPU rows without transfers use CUDA events, "
             "rows with transfer=1 and CPU rows use CLOCK_MONOTONIC around a synchronised region\n",
             DG_VERSION, dg_build_commit, date, one_line(cpu), sysconf(_SC_NPROCESSORS_ONLN),
             threads, one_line(blas), one_line(coretype), one_line(gpuinfo),
             DG_BUILD_FLAGS);
    /* a cut last line would swallow the header written after it */
    size_t len = strlen(buf);
    if (len > 0 && buf[len - 1] != '\n') buf[len - 1] = '\n';
}
