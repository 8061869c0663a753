/* clock_internal.h: the monotonic clock the core's timings read (the host
 * events of a synchronous backend, the trainers' step times). */
#ifndef DG_CLOCK_INTERNAL_H
#define DG_CLOCK_INTERNAL_H

#include <time.h>

static inline double dg__monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
