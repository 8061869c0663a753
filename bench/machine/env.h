/* env.h: what a result was measured on, as '#' metadata lines. */
#ifndef DG_BENCH_ENV_H
#define DG_BENCH_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"

/* Writes "# key: value\n" lines into buf: version, git commit, date, CPU
 * model, cores, threads, OpenBLAS config, GPU (gpu may be NULL), TF32, build. */
void bench_env_meta(char *buf, size_t n, int threads, dg_backend *gpu);
/* Appends to the text in buf (NUL-terminated, n bytes in all) the lines
 * about what else changes the numbers: the load average at start, the CPU
 * frequency governors, every OMP_*, GOMP_*, OPENBLAS_*, CUDA_* and DG_GPU_*
 * environment variable, the command line (argv[0..argc-1], shell-quoted),
 * the OpenMP wait policy in force and why (bench_wait_policy_describe), and
 * for a GPU backend (gpu may be NULL) its L2 size and PCI bus id. The text
 * always ends with a newline, cut short if n is too small. */
void bench_env_meta_more(char *buf, size_t n, int argc, char *const *argv, dg_backend *gpu);
/* Appends "# load at WHEN: 1.93 1.20 0.80 (1, 5, 15 min; 2 online cores)\n". */
void bench_env_snapshot(char *buf, size_t n, const char *when);
/* How long bench_env_loaded watches the CPUs. */
#define BENCH_BUSY_SAMPLE_MS 200
/* Whether half a core or more was busy (by /proc/stat) over the last
 * BENCH_BUSY_SAMPLE_MS, while this process slept: another runnable process
 * would take a core from the bench's threads. why gets the numbers: "0.93
 * of 2 cores busy over 200 ms >= 0.5". Where /proc/stat cannot be read,
 * the 1-minute load average against half the online cores decides, and why
 * says so. */
bool bench_env_loaded(char *why, size_t n);
/* The busy and idle USER_HZ ticks of all CPUs together from the first
 * line of stat_path (/proc/stat on a real machine); false when it cannot
 * be read or parsed. */
bool bench_cpu_ticks(const char *stat_path, unsigned long long *busy, unsigned long long *idle);
/* Cores busy on average between two bench_cpu_ticks samples of a machine of
 * `cores` CPUs (0.5: half a core); -1 when no tick passed or a counter went
 * back. */
double bench_busy_cores(unsigned long long busy0, unsigned long long idle0, unsigned long long busy1,
                        unsigned long long idle1, long cores);
/* The scaling governors of cpu_dir/cpu<N>/cpufreq (cpu_dir is
 * /sys/devices/system/cpu on a real machine), each with its CPU count:
 * "performance (2 cpus)", or "unknown (no cpufreq)". */
void bench_cpu_governors(const char *cpu_dir, char *buf, size_t n);
/* "AMD EPYC ..." from /proc/cpuinfo, or "unknown" */
const char *bench_cpu_model(char *buf, size_t n);
/* bytes of host memory available to a new allocation (MemAvailable of
 * /proc/meminfo); 0 when unknown */
double bench_mem_available(void);
/* s with every control character (a newline would end the '#' line and
 * start a row) replaced by '?' */
char *bench_one_line(char *s);

#endif
