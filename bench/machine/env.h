/* env.h: what a result was measured on, as '#' metadata lines. */
#ifndef DG_BENCH_ENV_H
#define DG_BENCH_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"
#include "machine/host_load.h"

/* Writes "# key: value\n" lines into buf: version, git commit, date, CPU
 * model, cores, threads, OpenBLAS config, GPU (gpu may be NULL), TF32, build. */
void bench_env_meta(char *buf, size_t n, int threads, dg_backend *gpu);
/* Appends to the text in buf (NUL-terminated, n bytes in all) the lines
 * about what else changes the numbers: the load average at start, the CPU
 * frequency governors, every OMP_*, GOMP_*, OPENBLAS_*, CUDA_* and DG_GPU_*
 * environment variable, the command line (argv[0..argc-1], shell-quoted),
 * the OpenMP wait policy in force and why (bench_wait_policy_describe), the
 * OpenBLAS core in force and why (bench_blas_core_describe), and
 * for a GPU backend (gpu may be NULL) its L2 size and PCI bus id. The text
 * always ends with a newline, cut short if n is too small. */
void bench_env_meta_more(char *buf, size_t n, int argc, char *const *argv, dg_backend *gpu);
/* Appends "# load at WHEN: 1.93 1.20 0.80 (1, 5, 15 min; 2 online cores)\n". */
void bench_env_snapshot(char *buf, size_t n, const char *when);
/* The scaling governors of cpu_dir/cpu<N>/cpufreq (cpu_dir is
 * /sys/devices/system/cpu on a real machine), each with its CPU count:
 * "performance (2 cpus)", or "unknown (no cpufreq)". */
void bench_cpu_governors(const char *cpu_dir, char *buf, size_t n);
/* "AMD EPYC ..." from /proc/cpuinfo, or "unknown" */
const char *bench_cpu_model(char *buf, size_t n);
/* bytes of host memory available to a new allocation (MemAvailable of
 * /proc/meminfo); 0 when unknown */
double bench_mem_available(void);

#endif
