/* onednn_gemm_timing.c: the CPU GEMMs of docs/PERF.md's oneDNN section,
 * square products side by side on the backend's threads: OpenBLAS's and
 * oneDNN's sgemm, bf16 widened for OpenBLAS's sgemm (the path before
 * oneDNN), oneDNN's bf16 kernel and its f16 product (widened for its
 * float32 kernel: 2.6 has no f16 one). On a machine shared with other
 * work, speeds move from one second to the next: each round calls the
 * implementations in turn, `reps` times over (after one warm-up call each,
 * which also makes oneDNN's primitive), so that all of them see the same
 * spells of load, keeps each one's best call (load only slows a call), and
 * prints each one's best as a ratio to OpenBLAS's sgemm's of the round.
 *   onednn_gemm_timing [THREADS [ROUNDS [REPS [SIZE...]]]]
 * (defaults: 2 threads, 5 rounds, 3 reps, sizes 512 1024 2048) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"

typedef struct impl { const char *name; dg_cpu_gemm gemm; dg_dtype dtype; } impl;

static const impl impls[] = {
    {"openblas-f32", DG_CPU_GEMM_OPENBLAS, DG_F32},
    {"onednn-f32", DG_CPU_GEMM_ONEDNN, DG_F32},
    {"openblas-bf16-widened", DG_CPU_GEMM_OPENBLAS, DG_BF16},
    {"onednn-bf16", DG_CPU_GEMM_ONEDNN, DG_BF16},
    {"onednn-f16-widened", DG_CPU_GEMM_ONEDNN, DG_F16},
};
enum { N_IMPLS = sizeof impls / sizeof impls[0] };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* one call's seconds; < 0 on failure */
static double time_gemm(dg_backend *be, const impl *im, int s, const void *A, const void *B, float *C) {
    double t0 = now();
    dg_status st = dg_cpu_gemm_ex(be, im->gemm, im->dtype, false, false, s, s, s, A, B, C);
    double t = now() - t0;
    if (st == DG_OK) return t;
    fprintf(stderr, "%s at %d: %s\n", im->name, s, dg_last_error());
    return -1;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5,
        reps = argc > 3 ? atoi(argv[3]) : 3;
    int sizes[16] = {512, 1024, 2048}, n_sizes = 3;
    if (argc > 4) {
        n_sizes = 0;
        for (int i = 4; i < argc && n_sizes < 16; i++) sizes[n_sizes++] = atoi(argv[i]);
    }
    if (threads < 1 || rounds < 1 || reps < 1) {
        fprintf(stderr, "usage: onednn_gemm_timing [THREADS [ROUNDS [REPS [SIZE...]]]]: positive numbers\n");
        return 2;
    }
    if (!dg_cpu_has_onednn()) {
        fprintf(stderr, "onednn_gemm_timing: built with DG_ONEDNN=OFF\n");
        return 1;
    }
    dg_backend *be;
    if (dg_cpu_backend_new(&be, threads) != DG_OK) {
        fprintf(stderr, "%s\n", dg_last_error());
        return 1;
    }
    char info[160];
    printf("# %s; %s; %d threads\n", dg_cpu_onednn_info(info, sizeof info), dg_cpu_blas_core(), threads);
    printf("size round");
    for (int i = 0; i < N_IMPLS; i++) printf(" %s", impls[i].name);
    printf("   (GFLOP/s of openblas-f32, then each one's time / openblas-f32's)\n");
    int rc = 0;
    for (int z = 0; z < n_sizes && rc == 0; z++) {
        int s = sizes[z];
        size_t n = (size_t)s * s;
        float *A = malloc(n * 4), *B = malloc(n * 4), *C = malloc(n * 4);
        uint16_t *Ab = malloc(n * 2), *Bb = malloc(n * 2), *Ah = malloc(n * 2), *Bh = malloc(n * 2);
        if (!A || !B || !C || !Ab || !Bb || !Ah || !Bh) {
            fprintf(stderr, "out of memory at %d\n", s);
            return 1;
        }
        dg_rng r = dg_rng_new(1);
        for (size_t i = 0; i < n; i++) {
            A[i] = (float)(dg_rng_uniform(&r) * 2 - 1);
            B[i] = (float)(dg_rng_uniform(&r) * 2 - 1);
            Ab[i] = dg__f32_to_bf16(A[i]);
            Bb[i] = dg__f32_to_bf16(B[i]);
            Ah[i] = dg__f32_to_f16(A[i]);
            Bh[i] = dg__f32_to_f16(B[i]);
        }
        for (int round = 0; round < rounds && rc == 0; round++) {
            double t[N_IMPLS];
            for (int r = 0; r <= reps && rc == 0; r++) /* r 0: the warm-up calls */
                for (int i = 0; i < N_IMPLS && rc == 0; i++) {
                    const void *a = impls[i].dtype == DG_F32 ? (void *)A : impls[i].dtype == DG_BF16 ? (void *)Ab : Ah;
                    const void *b = impls[i].dtype == DG_F32 ? (void *)B : impls[i].dtype == DG_BF16 ? (void *)Bb : Bh;
                    double ti = time_gemm(be, &impls[i], s, a, b, C);
                    if (ti < 0) rc = 1;
                    if (r == 1 || (r > 1 && ti < t[i])) t[i] = ti;
                }
            if (rc) break;
            printf("%d %d %.1f", s, round, 2.0 * s * s * s / t[0] * 1e-9);
            for (int i = 1; i < N_IMPLS; i++) printf(" %.3f", t[i] / t[0]);
            printf("\n");
            fflush(stdout);
        }
        free(A); free(B); free(C); free(Ab); free(Bb); free(Ah); free(Bh);
    }
    dg_backend_free(be);
    return rc;
}
