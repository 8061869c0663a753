/* convert_timing.c: the timings of docs/PERF.md's conversion section:
 * float32 <-> bf16 / f16 over one array, on one thread, by each path of
 * cpu_convert.h the CPU runs, as nanoseconds per value (the best of REPS
 * calls: load only slows a call). Random finite values of mixed exponents.
 *   convert_timing [N [REPS]]   (defaults: 4096 values, 2000 calls) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_convert.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    int reps = argc > 2 ? atoi(argv[2]) : 2000;
    if (n < 1 || reps < 1) {
        fprintf(stderr, "usage: convert_timing [N [REPS]] (N, REPS positive)\n");
        return 2;
    }
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!x || !y || !h) {
        fprintf(stderr, "convert_timing: out of memory for %lld values\n", (long long)n);
        return 1;
    }
    dg_rng r = dg_rng_new(1);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(dg_rng_u64(&r) % 2000001) * 1e-3f - 1000.0f; /* -1000..1000 */
    printf("path,dtype,direction,n,ns_per_value\n");
    for (int p = DG_CVT_SCALAR; p <= DG_CVT_AVX512; p++) {
        if (!dg__cvt_runs((dg_cvt_path)p)) continue;
        for (int d = 0; d < 2; d++) {
            dg_dtype t = d ? DG_F16 : DG_BF16;
            dg__cvt_narrow_on(DG_CVT_SCALAR, t, x, h, n);
            for (int dir = 0; dir < 2; dir++) {
                double best = 1e30;
                for (int k = 0; k < reps; k++) {
                    double t0 = now();
                    if (dir) dg__cvt_widen_on((dg_cvt_path)p, t, h, y, n);
                    else dg__cvt_narrow_on((dg_cvt_path)p, t, x, h, n);
                    double dt = now() - t0;
                    if (dt < best) best = dt;
                }
                printf("%s,%s,%s,%lld,%.3f\n", dg__cvt_path_name((dg_cvt_path)p), d ? "f16" : "bf16",
                       dir ? "widen" : "narrow", (long long)n, best * 1e9 / (double)n);
            }
        }
    }
    free(x);
    free(y);
    free(h);
    return 0;
}
