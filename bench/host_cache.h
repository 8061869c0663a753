/* host_cache.h: the host's caches emptied before a cold CPU run (--cold).
 *
 * A buffer larger than every cache of the host together is written, a
 * line at a time, by all OpenMP threads, each its own contiguous share:
 * every core's L1 and L2 and the shared last-level caches then hold the
 * buffer's lines, not the timed work's. The run that follows reads its
 * inputs, weights and scratch from memory, as an op of a training step
 * does whose data the layers between displaced; a hot run reuses what its
 * previous repetition left in cache. */
#ifndef DG_BENCH_HOST_CACHE_H
#define DG_BENCH_HOST_CACHE_H

#include <stdint.h>

#include "core/status.h"

/* One core's L2 and one last-level cache, in bytes (0: unknown), and how
 * many last-level caches the online CPUs share out (sockets, or the
 * complexes of a chiplet CPU). */
typedef struct bench_host_caches {
    int64_t l2_bytes, llc_bytes;
    int     llcs;
} bench_host_caches;

/* read from /sys/devices/system/cpu/cpu0/cache (zeros where absent) */
bench_host_caches bench_host_caches_of(void);

/* "2048K", "32M", "1024" (bytes) as sysfs writes a cache's size; -1 if
 * it is none of those */
int64_t bench_cache_size_of(const char *text);

/* bytes the flush writes: twice the last-level caches together and twice
 * every thread's L2 (non-inclusive L3s keep what L2s evict, so both count),
 * and at least BENCH_FLUSH_MIN_BYTES when the sizes are unknown */
#define BENCH_FLUSH_MIN_BYTES ((int64_t)256 << 20)
int64_t bench_host_flush_bytes(bench_host_caches c, int threads);

/* Writes the buffer once (allocated at the first call, for
 * omp_get_num_procs() threads); DG_ERR_OOM if it cannot be had. */
dg_status bench_host_flush(void);

/* flushes done since the start, and the buffer (NULL before the first)
 * with its size: the tests count them and see that every line was written */
long    bench_host_flushes(void);
int64_t bench_host_flush_view(const unsigned char **buf);

/* frees the buffer (bench's exit) */
void bench_host_flush_free(void);

#endif
