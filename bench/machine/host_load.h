/* host_load.h: how busy the host's CPUs are now (the wait policy's "auto"
 * decides on it), and bench_one_line, which both the metadata (env.h) and
 * the wait policy (wait_policy.h) put what they read through. Neither of
 * those is included here: env.c includes wait_policy.h, and both include
 * this. */
#ifndef DG_BENCH_HOST_LOAD_H
#define DG_BENCH_HOST_LOAD_H

#include <stdbool.h>
#include <stddef.h>

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
/* s with every control character (a newline would end the '#' line and
 * start a row) replaced by '?' */
char *bench_one_line(char *s);

#endif
