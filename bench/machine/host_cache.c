#include "machine/host_cache.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

#define LINE 64 /* bytes a write brings into cache */

int64_t bench_cache_size_of(const char *text) {
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || v < 0) return -1;
    int64_t unit = *end == 'K' ? 1 << 10 : *end == 'M' ? 1 << 20 : *end == 'G' ? 1 << 30 : 1;
    if (unit > 1) end++;
    while (*end == '\n' || *end == ' ') end++;
    return *end ? -1 : (int64_t)v * unit;
}

/* the first line of /sys/devices/system/cpu/cpu0/cache/index<i>/<file>,
 * or "" */
static void cache_field(int i, const char *file, char *out, size_t n) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, file);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(out, (int)n, f)) out[0] = '\0';
    fclose(f);
}

/* CPUs in a sysfs list such as "0-15,32-47" */
static int cpus_in_list(const char *list) {
    int n = 0;
    for (const char *p = list; *p && *p != '\n';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p) return 0;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        n += (int)(hi - lo + 1);
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

bench_host_caches bench_host_caches_of(void) {
    bench_host_caches c = {0, 0, 1, 0};
    int top = 0;
    for (int i = 0; i < 8; i++) {
        char level[16], type[32], size[32], shared[4096];
        cache_field(i, "level", level, sizeof level);
        if (!level[0]) break;
        cache_field(i, "type", type, sizeof type);
        if (!strncmp(type, "Instruction", 11)) continue;
        cache_field(i, "size", size, sizeof size);
        int lv = atoi(level);
        int64_t bytes = bench_cache_size_of(size);
        if (bytes <= 0) continue;
        if (lv == 2) c.l2_bytes = bytes;
        if (lv < top) continue;
        top = c.llc_level = lv;
        c.llc_bytes = bytes;
        cache_field(i, "shared_cpu_list", shared, sizeof shared);
        /* the list names online CPUs, whichever this process may use */
        int sharing = cpus_in_list(shared), online = (int)sysconf(_SC_NPROCESSORS_ONLN);
        c.llcs = sharing > 0 && online > sharing ? (online + sharing - 1) / sharing : 1;
    }
    return c;
}

int64_t bench_host_flush_bytes(bench_host_caches c, int threads) {
    int64_t llcs = 2 * c.llc_bytes * (c.llcs > 0 ? c.llcs : 1), l2s = 2 * c.l2_bytes * (threads > 0 ? threads : 1);
    int64_t bytes = llcs + l2s;
    if (c.llc_level < 3 && bytes < BENCH_FLUSH_MIN_BYTES) bytes = BENCH_FLUSH_MIN_BYTES;
    return (bytes + LINE - 1) / LINE * LINE;
}

static struct {
    unsigned char *buf;
    int64_t        bytes;
    long           count;
} flush;

dg_status bench_host_flush(void) {
    if (!flush.buf) {
        int64_t bytes = bench_host_flush_bytes(bench_host_caches_of(), omp_get_num_procs());
        flush.buf = calloc((size_t)bytes, 1);
        if (!flush.buf)
            return dg_fail(DG_ERR_OOM, "bench --cold: out of host memory for the %.0f MB that empty the caches",
                            (double)bytes / 1e6);
        flush.bytes = bytes;
    }
    int64_t lines = flush.bytes / LINE;
    unsigned char *buf = flush.buf;
    /* a write a line: the line is fetched and held dirty, evicting another */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < lines; i++) buf[i * LINE]++;
    flush.count++;
    return DG_OK;
}

long bench_host_flushes(void) { return flush.count; }

int64_t bench_host_flush_view(const unsigned char **buf) {
    *buf = flush.buf;
    return flush.bytes;
}

void bench_host_flush_free(void) {
    free(flush.buf);
    flush.buf = NULL;
    flush.bytes = 0;
}
