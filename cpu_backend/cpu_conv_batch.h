/* cpu_conv_batch.h: how the convolutions that run OpenMP over the batch
 * (cpu_conv.c's DG_CPU_CONV_BATCH, cpu_conv_shift.c) give each thread of
 * a parallel region its units of work and its slot of the scratch. */
#ifndef DG_CPU_CONV_BATCH_H
#define DG_CPU_CONV_BATCH_H

#include <omp.h>
#include <stdint.h>

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A batch region takes the whole team even when fewer slots work: libgomp
 * ends the pool threads that a smaller team leaves out and creates them
 * again for the next full one, 0.8 ms each time on a 16-core host
 * (docs/PERF.md). The working threads are the first min(slots, team): a
 * caller's region or OMP_THREAD_LIMIT may give a smaller team. */
static inline int dg__conv_batch_workers(int slots) {
    int team = omp_get_num_threads();
    return slots < team ? slots : team;
}

/* Inside a batch region: the calling thread's units [lo, hi) of the n,
 * contiguous, split between the `workers` (sizes differ by 1 at most), and
 * its slot of `per` floats from `slots` (NULL when per is 0); a thread
 * past the workers gets no units and no slot */
static inline float *dg__conv_my_units(float *slots, int64_t n, int64_t per, int workers, int64_t *lo,
                                       int64_t *hi) {
    int t = omp_get_thread_num();
    if (t >= workers) {
        *lo = *hi = 0;
        return NULL;
    }
    *lo = n * t / workers;
    *hi = n * (t + 1) / workers;
    return per ? slots + t * per : NULL;
}

#endif
