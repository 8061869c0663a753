/* host_cache.h: the host's caches emptied before a cold CPU run (--cold).
 *
 * A buffer larger than every cache of the host together is written, a
 * line at a time, by the OpenMP team the timed work runs with (--threads),
 * each thread its own contiguous share: the L1 and L2 of the cores those
 * threads run on, and the shared last-level caches, then hold the buffer's
 * lines, not the timed work's. The run that follows reads its inputs,
 * weights and scratch from memory, as an op of a training step does whose
 * data the layers between displaced; a hot run reuses what its previous
 * repetition left in cache. The buffer's lines are left dirty, so a cold
 * run also pays for writing some of them back: a cold figure errs slow. */
#ifndef DG_BENCH_HOST_CACHE_H
#define DG_BENCH_HOST_CACHE_H

#include <stdint.h>

#include "core/status.h"

/* One core's L2 and one last-level cache, in bytes (0: unknown), how
 * many last-level caches the online CPUs share out (sockets, or the
 * complexes of a chiplet CPU), and the last level's number (0: none read;
 * a VM may show no L3). */
typedef struct bench_host_caches {
    int64_t l2_bytes, llc_bytes;
    int     llcs, llc_level;
} bench_host_caches;

/* read from /sys/devices/system/cpu/cpu0/cache (zeros where absent) */
bench_host_caches bench_host_caches_of(void);

/* "2048K", "32M", "1024" (bytes) as sysfs writes a cache's size; -1 if
 * it is none of those */
int64_t bench_cache_size_of(const char *text);

/* bytes the flush writes: twice the last-level caches together and twice
 * every thread's L2 (non-inclusive L3s keep what L2s evict, so both count),
 * and at least BENCH_FLUSH_MIN_BYTES where no L3 was read (unknown sizes,
 * or a VM that shows L2 as the last level) */
#define BENCH_FLUSH_MIN_BYTES ((int64_t)256 << 20)
int64_t bench_host_flush_bytes(bench_host_caches c, int threads);

/* Writes the buffer once by omp_get_max_threads() threads (allocated at
 * the first call, sized for omp_get_num_procs() threads' L2s, at least as
 * many); DG_ERR_OOM if it cannot be had. */
dg_status bench_host_flush(void);

/* flushes done since the start, and the buffer (NULL before the first)
 * with its size: the tests count them and see that every line was written */
long    bench_host_flushes(void);
int64_t bench_host_flush_view(const unsigned char **buf);

/* frees the buffer (bench's exit) */
void bench_host_flush_free(void);

#endif
