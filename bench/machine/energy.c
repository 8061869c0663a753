/* energy.c: the energy meters of energy.h, RAPL's powercap files and
 * NVML's total-energy counter behind one reading. */
#include "machine/energy.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "machine/gpu_monitor.h"

#define MAX_DOMAINS 16
#define PERIOD_PROBE_S 1.0 /* how long opening waits for the counters to change */
#define PERIOD_CHANGES 4   /* changes it times, when they come sooner */

typedef struct domain {
    char               file[512];  /* RAPL: its energy_uj; "" for NVML */
    bench_gpu_monitor *mon;        /* NVML: its device                 */
    uint64_t           range;      /* wraps to 0 past this; 0: never   */
    uint64_t           last;       /* its raw reading at the last read */
} domain;

struct bench_energy_meter {
    domain   d[MAX_DOMAINS];
    int      n;
    int      packages;    /* RAPL: how many of the domains are packages */
    double   unit_j;      /* one raw count in joules */
    uint64_t total;       /* counts since open, unwrapped, over every domain */
    double   period_s;
    char     what[256];
};

uint64_t bench_energy_advance(uint64_t last, uint64_t now, uint64_t range) {
    if (now >= last) return now - last;
    return range > last ? range - last + now : now; /* a wrap; a range the reading passed: count from 0 */
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* one unsigned decimal from a sysfs file */
static bool read_u64(const char *path, uint64_t *v, char *why, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return false;
    }
    unsigned long long x = 0;
    int got = fscanf(f, "%llu", &x);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != 1) {
        snprintf(why, n, "%s: %s", path, err ? strerror(err) : "no number in it");
        return false;
    }
    *v = x;
    return true;
}

static bool read_raw(domain *d, uint64_t *v, char *why, size_t n) {
    if (d->mon) return bench_gpu_monitor_energy_mj(d->mon, v, why, n);
    return read_u64(d->file, v, why, n);
}

bool bench_energy_read(bench_energy_meter *m, double *joules, char *why, size_t n) {
    uint64_t raw[MAX_DOMAINS];
    for (int i = 0; i < m->n; i++)
        if (!read_raw(&m->d[i], &raw[i], why, n)) return false;
    for (int i = 0; i < m->n; i++) {
        m->total += bench_energy_advance(m->d[i].last, raw[i], m->d[i].range);
        m->d[i].last = raw[i];
    }
    *joules = (double)m->total * m->unit_j;
    return true;
}

/* Reads every domain once (the starting values), then times the counters'
 * changes for up to PERIOD_PROBE_S: the mean time between successive
 * changes of the sum. false with why when one cannot be read or nothing
 * changed. */
static bool start(bench_energy_meter *m, const char *prefix, char *why, size_t n) {
    char err[600];
    for (int i = 0; i < m->n; i++)
        if (!read_raw(&m->d[i], &m->d[i].last, err, sizeof err)) {
            snprintf(why, n, "%s: %s", prefix, err);
            return false;
        }
    double j = 0, last_j = 0, t0 = now_s(), first = 0, at = 0;
    int changes = 0;
    while (changes < PERIOD_CHANGES && now_s() - t0 < PERIOD_PROBE_S) {
        if (!bench_energy_read(m, &j, err, sizeof err)) {
            snprintf(why, n, "%s: %s", prefix, err);
            return false;
        }
        if (j == last_j) continue;
        at = now_s();
        if (changes++ == 0) first = at;
        last_j = j;
    }
    if (changes < 2) {
        snprintf(why, n, "%s: the counter (%s) did not advance %s within %.0f s", prefix, m->what,
                 changes ? "twice" : "at all", PERIOD_PROBE_S);
        return false;
    }
    m->period_s = (at - first) / (changes - 1);
    return true;
}

/* "ROOT/intel-rapl:N" or "ROOT/intel-rapl:N:M" into m, if it is a package
 * or a DRAM domain; false with why when its files cannot be read */
static bool add_rapl(bench_energy_meter *m, const char *root, const char *entry, char *why, size_t n) {
    int pkg = -1, sub = -1, used = 0;
    bool is_sub = sscanf(entry, "intel-rapl:%d:%d%n", &pkg, &sub, &used) == 2 && entry[used] == '\0';
    if (!is_sub && !(sscanf(entry, "intel-rapl:%d%n", &pkg, &used) == 1 && entry[used] == '\0')) return true;
    char path[600], name[64] = "";
    snprintf(path, sizeof path, "%s/%s/name", root, entry);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(name, sizeof name, f)) {
        snprintf(why, n, "%s: %s", path, f ? "empty" : strerror(errno));
        if (f) fclose(f);
        return false;
    }
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    if (is_sub && strcmp(name, "dram") != 0) return true; /* core, uncore: inside the package's figure */
    if (m->n == MAX_DOMAINS) {
        snprintf(why, n, "more than %d RAPL domains under %s", MAX_DOMAINS, root);
        return false;
    }
    domain *d = &m->d[m->n];
    *d = (domain){0};
    snprintf(d->file, sizeof d->file, "%s/%s/energy_uj", root, entry);
    snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", root, entry);
    if (!read_u64(path, &d->range, why, n)) return false;
    m->n++;
    m->packages += !is_sub;
    size_t len = strlen(m->what);
    snprintf(m->what + len, sizeof m->what - len, "%s%s-%d", len > 6 ? ", " : "", is_sub ? "dram" : "package", pkg);
    return true;
}

bench_energy_meter *bench_energy_open_rapl(const char *root, char *why, size_t n) {
    if (!root) root = "/sys/class/powercap";
    DIR *dir = opendir(root);
    if (!dir) {
        snprintf(why, n, "RAPL not readable: %s: %s", root, strerror(errno));
        return NULL;
    }
    bench_energy_meter *m = calloc(1, sizeof *m);
    if (!m) {
        closedir(dir);
        snprintf(why, n, "RAPL: out of host memory");
        return NULL;
    }
    m->unit_j = 1e-6;
    snprintf(m->what, sizeof m->what, "RAPL: ");
    char err[700] = "";
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(dir)) != NULL;) ok = add_rapl(m, root, e->d_name, err, sizeof err);
    closedir(dir);
    if (ok && m->packages == 0) {
        snprintf(err, sizeof err, "no package domain (intel-rapl:N) under %s", root);
        ok = false;
    }
    if (!ok) {
        snprintf(why, n, "RAPL not readable: %s", err);
        free(m);
        return NULL;
    }
    if (!start(m, "RAPL not readable", why, n)) {
        free(m);
        return NULL;
    }
    return m;
}

bench_energy_meter *bench_energy_open_nvml(bench_gpu_monitor *const *mons, int n_mons, char *why, size_t n) {
    if (n_mons < 1 || n_mons > MAX_DOMAINS) {
        snprintf(why, n, "NVML energy not available: %d devices (1 to %d)", n_mons, MAX_DOMAINS);
        return NULL;
    }
    bench_energy_meter *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, n, "NVML energy: out of host memory");
        return NULL;
    }
    for (int i = 0; i < n_mons; i++) {
        if (!mons[i]) {
            snprintf(why, n, "NVML energy not available: no NVML handle for device %d", i);
            free(m);
            return NULL;
        }
        m->d[m->n++] = (domain){.mon = mons[i]};
    }
    m->unit_j = 1e-3;
    snprintf(m->what, sizeof m->what, "NVML total energy: %d GPU%s", n_mons, n_mons > 1 ? "s" : "");
    if (!start(m, "NVML energy not available", why, n)) {
        free(m);
        return NULL;
    }
    return m;
}

const char *bench_energy_what(const bench_energy_meter *m) { return m ? m->what : ""; }
double      bench_energy_period_s(const bench_energy_meter *m) { return m ? m->period_s : 0; }
double      bench_energy_least_j(const bench_energy_meter *m) { return m ? m->unit_j : 0; }
void        bench_energy_close(bench_energy_meter *m) { free(m); }
