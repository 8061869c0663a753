/* host_load.c: how busy the host's CPUs are now, and the one-line form of
 * what is read from the host. Below both the metadata (env.c) and the wait
 * policy (wait_policy.c): the wait policy decides on the load, and the
 * metadata reports the policy. */
#include "machine/host_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

char *bench_one_line(char *s) {
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return s;
}

bool bench_cpu_ticks(const char *stat_path, unsigned long long *busy, unsigned long long *idle) {
    FILE *f = fopen(stat_path, "r");
    if (!f) return false;
    /* the first line sums every CPU, in USER_HZ ticks: "cpu  user nice
     * system idle iowait irq softirq steal ..." (proc(5)); steal is time
     * the hypervisor gave to someone else, neither ours nor idle */
    unsigned long long user, nice, sys, idl, iowait, irq, softirq;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idl, &iowait, &irq, &softirq);
    fclose(f);
    if (got != 7) return false;
    *busy = user + nice + sys + irq + softirq;
    *idle = idl + iowait;
    return true;
}

double bench_busy_cores(unsigned long long busy0, unsigned long long idle0, unsigned long long busy1,
                        unsigned long long idle1, long cores) {
    if (busy1 < busy0 || idle1 < idle0) return -1; /* counters never go back: not the same machine's */
    unsigned long long busy = busy1 - busy0, all = busy + (idle1 - idle0);
    return all ? (double)cores * (double)busy / (double)all : -1;
}

/* the 1-minute load average's verdict, where /proc/stat cannot be read */
static bool loaded_by_load_average(long cores, char *why, size_t n) {
    double l1;
    if (getloadavg(&l1, 1) != 1 || cores < 1) {
        snprintf(why, n, "load unknown (getloadavg failed)");
        return false;
    }
    bool loaded = l1 >= 0.5 * (double)cores;
    snprintf(why, n, "1-min load %.2f %s %.1f (half of %ld online cores; /proc/stat unreadable)", l1,
             loaded ? ">=" : "<", 0.5 * (double)cores, cores);
    return loaded;
}

bool bench_env_loaded(char *why, size_t n) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long long b0, i0, b1, i1;
    if (cores < 1 || !bench_cpu_ticks("/proc/stat", &b0, &i0)) return loaded_by_load_average(cores, why, n);
    /* What runs now, not the 1-minute load average: right after a build or
     * another bench that average still counts processes that have ended,
     * and picked passive waits for a quiet machine (docs/PERF.md). 200 ms
     * is 20 ticks a core at USER_HZ 100: half a core shows as 10 or more. */
    struct timespec nap = {0, BENCH_BUSY_SAMPLE_MS * 1000000L};
    while (nanosleep(&nap, &nap)) {
    }
    double busy = bench_cpu_ticks("/proc/stat", &b1, &i1) ? bench_busy_cores(b0, i0, b1, i1, cores) : -1;
    if (busy < 0) return loaded_by_load_average(cores, why, n);
    /* With as many OpenMP threads as cores (the default), a process beside
     * the bench that runs half the time already takes a core from one of
     * them: a logistic-regression epoch on 2 cores with one CPU-bound
     * process beside it took 1.1-2.1 s with spinning waits, 0.2-0.3 s with
     * sleeping ones and 0.12 s on its own (docs/PERF.md). */
    bool loaded = busy >= 0.5;
    snprintf(why, n, "%.2f of %ld cores busy over %d ms %s 0.5", busy, cores, BENCH_BUSY_SAMPLE_MS,
             loaded ? ">=" : "<");
    return loaded;
}
