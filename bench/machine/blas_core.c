/* blas_core.c: the OpenBLAS core decision from its inputs alone (the CPU's
 * features, the core OpenBLAS chose, the cores its build accepts, the
 * user's OPENBLAS_CORETYPE), and the checked sgemm that verifies a core.
 * What reads this process's inputs and executes it again is in
 * blas_core_env.c. */
#include "machine/blas_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Instruction-set levels, each with its name as the CPU side says it:
 * a core's level is the set its kernels use, a CPU's the set it runs. */
static const char *const level_names[] = {
    "none", "SSE2", "SSE3", "SSSE3", "SSE4.2", "AVX", "AVX2", "AVX-512", "AVX512-BF16", "AMX",
};

/* OpenBLAS's x86 core names (driver/others/dynamic.c) by level; a name
 * not here (another architecture's) is not ranked */
static const struct { const char *name; int level; } core_levels[] = {
    {"Katmai", 1},     {"Coppermine", 1},  {"Northwood", 1},   {"Banias", 1},      {"Athlon", 1},
    {"Opteron", 1},    {"Prescott", 2},    {"Opteron_SSE3", 2}, {"Core2", 3},      {"Penryn", 3},
    {"Dunnington", 3}, {"Atom", 3},        {"Nano", 3},        {"Bobcat", 3},      {"Barcelona", 3},
    {"Nehalem", 4},    {"Sandybridge", 5}, {"Bulldozer", 5},   {"Piledriver", 5},  {"Steamroller", 5},
    {"Excavator", 5},  {"Haswell", 6},     {"Zen", 6},         {"SkylakeX", 7},    {"Cooperlake", 8},
    {"SapphireRapids", 9},
};

/* The cores the bench may choose, best first, with the OpenBLAS version
 * (major * 10000 + minor * 100 + patch) from which OPENBLAS_CORETYPE
 * accepts the name in a DYNAMIC_ARCH build: 0.3.21 answers "Cooperlake"
 * and "SapphireRapids" with "Core not found" (the loop over the names
 * stopped short of them until 0.3.22). bench_blas_core_verify catches a
 * build that does not take a name this table promises. */
static const struct { const char *name; int since; } ladder[] = {
    {"SapphireRapids", 322}, {"Cooperlake", 322}, {"SkylakeX", 300}, {"Haswell", 0},
    {"Sandybridge", 0},      {"Nehalem", 0},      {"Core2", 0},      {"Prescott", 0},
};

static int core_level(const char *name) {
    for (size_t i = 0; name && i < sizeof core_levels / sizeof core_levels[0]; i++)
        if (!strcasecmp(name, core_levels[i].name)) return core_levels[i].level;
    return 0;
}

static int cpu_level(const bench_cpu_features *f) {
    const char *name = bench_cpu_features_level(f);
    for (int i = 1; i < (int)(sizeof level_names / sizeof level_names[0]); i++)
        if (!strcmp(name, level_names[i])) return i;
    return 1; /* "baseline": x86-64's SSE2, or no x86 at all */
}

int bench_blas_cores_accepted(const char *config, const char **names, int max) {
    if (!config || !strstr(config, "DYNAMIC_ARCH")) return 0;
    int major = 0, minor = 0, patch = 0;
    const char *v = strstr(config, "OpenBLAS ");
    if (v) sscanf(v, "OpenBLAS %d.%d.%d", &major, &minor, &patch);
    int version = major * 10000 + minor * 100 + patch, n = 0;
    for (size_t i = 0; i < sizeof ladder / sizeof ladder[0] && n < max; i++)
        if (version >= ladder[i].since) names[n++] = ladder[i].name;
    return n;
}

static bench_blas_choice keep(const char *core, const char *fmt, const char *arg) {
    bench_blas_choice c = {.action = BENCH_BLAS_KEEP};
    snprintf(c.core, sizeof c.core, "%s", core ? core : "unknown");
    snprintf(c.reason, sizeof c.reason, fmt, arg);
    return c;
}

bench_blas_choice bench_blas_core_choose(const bench_cpu_features *f, const char *corename, const char *const *cores,
                                         int n_cores, const char *user_set) {
    if (user_set && *user_set) return keep(corename, "user-set: OPENBLAS_CORETYPE=%s", user_set);
    int have = core_level(corename), can = cpu_level(f);
    if (!have) return keep(corename, "OpenBLAS's own choice; %s", "not a core this bench ranks");
    if (!n_cores) return keep(corename, "OpenBLAS's own choice; %s", "its build has no other (no DYNAMIC_ARCH)");
    const char *best = NULL;
    for (int i = 0; i < n_cores && !best; i++)
        if (core_level(cores[i]) && core_level(cores[i]) <= can) best = cores[i];
    if (!best || core_level(best) <= have)
        return keep(corename, "OpenBLAS's own choice, the best this build has for a CPU with %s", level_names[can]);
    bench_blas_choice c = {.action = BENCH_BLAS_SWITCH};
    snprintf(c.core, sizeof c.core, "%s", best);
    snprintf(c.reason, sizeof c.reason, "auto: OpenBLAS chose %s (%s kernels) on a CPU with %s", corename,
             level_names[have], level_names[can]);
    return c;
}

/* a fixed, sign-mixed fill: seeded so every run checks the same product */
static void fill(float *x, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

double bench_blas_sgemm_error(bench_sgemm_fn sgemm) {
    enum { M = 63, N = 97, K = 131 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
    double worst = INFINITY;
    if (A && B && C) {
        fill(A, M * K, 1);
        fill(B, K * N, 2);
        sgemm(false, false, M, N, K, A, K, B, N, C, N, false);
        worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    ref += (double)A[i * K + k] * B[k * N + j];
                    mag += fabs((double)A[i * K + k] * B[k * N + j]);
                }
                double err = fabs(C[i * N + j] - ref) / (mag > 0 ? mag : 1);
                if (!isnan(worst) && !(err <= worst)) worst = err; /* a NaN stays */
            }
    }
    free(A); free(B); free(C);
    return worst;
}
