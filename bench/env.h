/* env.h: what a result was measured on, as '#' metadata lines. */
#ifndef DG_BENCH_ENV_H
#define DG_BENCH_ENV_H

#include <stddef.h>

#include "core/backend.h"

/* Writes "# key: value\n" lines into buf: version, git commit, date, CPU
 * model, cores, threads, OpenBLAS config, GPU (gpu may be NULL), TF32, build. */
void bench_env_meta(char *buf, size_t n, int threads, dg_backend *gpu);
/* "AMD EPYC ..." from /proc/cpuinfo, or "unknown" */
const char *bench_cpu_model(char *buf, size_t n);
/* bytes of host memory available to a new allocation (MemAvailable of
 * /proc/meminfo); 0 when unknown */
double bench_mem_available(void);

#endif
