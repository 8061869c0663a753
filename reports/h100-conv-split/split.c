/* split.c: the batch strategy's GEMMs alone, without the unfolding.
 *
 * Every thread of the OpenMP team runs `blocks` single-threaded sgemms of
 * one block's shape on buffers of its own (OpenBLAS's OpenMP build runs
 * serially inside a parallel region), the way cpu_conv.c's batch strategy
 * does after unfolding a block; the operands stay in the core's cache as a
 * freshly unfolded block would. Set beside the conv sweep's rows of the
 * same layer, the difference is what the unfolding and the rest cost.
 *   split fwd M K BC BLOCKS   C [M, BC]  = W [M, K] col [K, BC]
 *   split dx  M K BC BLOCKS   col [K, BC] = W [M, K]^T dy [M, BC]
 *   split dw  M K BC BLOCKS   dw [M, K] += dy [M, BC] col [K, BC]^T
 *   split percore N           each thread its own serial N^3 sgemm
 *   split ceiling N           one multithreaded N^3 sgemm
 * Prints the median of 15 timed runs (after 3 warm-up runs) and GFLOP/s
 * over the whole team. A measurement aid kept with its results, not part
 * of duograd. */
#include <cblas.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WARMUP = 3, REPS = 15 };

static float *filled(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof(float));
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* one thread's blocks of mode's shape; a, b, c its buffers */
static void blocks_of(const char *mode, int m, int k, int bc, int blocks, const float *a, const float *b, float *c) {
    for (int j = 0; j < blocks; j++) {
        if (!strcmp(mode, "fwd"))
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, bc, k, 1.0f, a, k, b, bc, 0.0f, c, bc);
        else if (!strcmp(mode, "dx"))
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, bc, m, 1.0f, a, k, b, bc, 0.0f, c, bc);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, bc, 1.0f, b, bc, a, bc, j ? 1.0f : 0.0f, c, k);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: split fwd|dx|dw M K BC BLOCKS | percore N | ceiling N\n");
        return 2;
    }
    const char *mode = argv[1];
    int threads = omp_get_max_threads();
    bool block_mode = strcmp(mode, "percore") && strcmp(mode, "ceiling");
    if (block_mode && argc < 6) {
        fprintf(stderr, "split %s: needs M K BC BLOCKS\n", mode);
        return 2;
    }
    int m = atoi(argv[2]), k = block_mode ? atoi(argv[3]) : m, bc = block_mode ? atoi(argv[4]) : m;
    int blocks = block_mode ? atoi(argv[5]) : 1;
    if (m <= 0 || k <= 0 || bc <= 0 || blocks <= 0) {
        fprintf(stderr, "split: sizes must be positive\n");
        return 2;
    }
    int copies = strcmp(mode, "ceiling") ? threads : 1;
    /* per copy: a [M, K] (dw: [K, BC], the columns), b [K or M, BC], c [M, K] or [K, BC] */
    size_t na = (size_t)m * k + (size_t)k * bc, nb = (size_t)(m > k ? m : k) * bc, nc = (size_t)m * k + (size_t)k * bc;
    float **a = calloc(copies, sizeof *a), **b = calloc(copies, sizeof *b), **c = calloc(copies, sizeof *c);
    for (int t = 0; t < copies; t++) {
        a[t] = filled(na, 1u + t);
        b[t] = filled(nb, 100u + t);
        c[t] = filled(nc, 200u + t);
        if (!a[t] || !b[t] || !c[t]) {
            fprintf(stderr, "split: out of memory\n");
            return 1;
        }
    }
    double times[WARMUP + REPS];
    for (int r = 0; r < WARMUP + REPS; r++) {
        double t0 = omp_get_wtime();
        if (!strcmp(mode, "ceiling")) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a[0], m, b[0], m, 0.0f, c[0], m);
        } else {
#pragma omp parallel
            {
                int t = omp_get_thread_num();
                if (!strcmp(mode, "percore"))
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a[t], m, b[t], m, 0.0f, c[t],
                                m);
                else
                    blocks_of(mode, m, k, bc, blocks, a[t], b[t], c[t]);
            }
        }
        times[r] = omp_get_wtime() - t0;
    }
    qsort(times + WARMUP, REPS, sizeof(double), cmp);
    double med = times[WARMUP + REPS / 2];
    double flops = 2.0 * m * k * bc * blocks * copies;
    printf("%s M=%d K=%d BC=%d blocks=%d threads=%d: %.4f ms, %.1f GFLOP/s (min %.4f max %.4f)\n", mode, m, k, bc,
           blocks, threads, med * 1e3, flops / med * 1e-9, times[WARMUP] * 1e3, times[WARMUP + REPS - 1] * 1e3);
    for (int t = 0; t < copies; t++) free(a[t]), free(b[t]), free(c[t]);
    free(a), free(b), free(c);
    return 0;
}
