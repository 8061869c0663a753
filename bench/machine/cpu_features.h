/* cpu_features.h: the instruction sets this machine runs, by CPUID, as the
 * OpenBLAS core choice (blas_core.h) ranks them. */
#ifndef DG_BENCH_CPU_FEATURES_H
#define DG_BENCH_CPU_FEATURES_H

#include <stdbool.h>

/* What the CPU and the OS let a program run (AVX, AVX-512 and AMX also
 * need the kernel to save their registers, by XCR0: __builtin_cpu_supports
 * checks it for AVX and AVX-512, cpu_features.c reads it for AMX). */
typedef struct bench_cpu_features {
    bool sse3, ssse3, sse4_2, avx, avx2, fma;
    bool avx512f, avx512dq, avx512cd, avx512bw, avx512vl; /* SkylakeX's set */
    bool avx512_bf16;                                     /* Cooperlake */
    bool amx_tile, amx_bf16;                              /* SapphireRapids */
} bench_cpu_features;

/* This machine's features (all false off x86). */
bench_cpu_features bench_cpu_features_read(void);
/* The highest level the features reach, as a name: "AMX", "AVX512-BF16",
 * "AVX-512", "AVX2", "AVX", "SSE4.2", "SSSE3", "SSE3" or "baseline". */
const char *bench_cpu_features_level(const bench_cpu_features *f);

#endif
