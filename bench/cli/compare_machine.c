/* compare_machine.c: see compare_machine.h. */
#include "cli/compare_machine.h"

#include <stdio.h>
#include <string.h>

#include "writers/csv.h"
#include "writers/json.h"

/* the metadata value of key in path, "" when absent */
static void meta(const char *path, bool json, const char *key, char *buf, size_t n) {
    if (json) bench_json_meta(path, key, buf, n);
    else bench_csv_meta(path, key, buf, n);
}

/* OpenBLAS's configuration string (openblas_get_config) names its core
 * last, before "MAX_THREADS=N" or "SINGLE_THREADED":
 * "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP SkylakeX MAX_THREADS=64 (...)" */
static void blas_core(const char *config, char *buf, size_t n) {
    const char *end = strstr(config, " MAX_THREADS=");
    if (!end) end = strstr(config, " SINGLE_THREADED");
    buf[0] = '\0';
    if (!end) return;
    const char *start = end;
    while (start > config && start[-1] != ' ') start--;
    snprintf(buf, n, "%.*s", (int)(end - start), start);
}

void bench_machine_of(const char *path, bench_machine *m) {
    size_t len = strlen(path);
    bool json = len > 5 && !strcmp(path + len - 5, ".json");
    char blas[512], gpu[256];
    *m = (bench_machine){0};
    meta(path, json, "cpu", m->cpu, sizeof m->cpu);
    meta(path, json, "cores", m->cores, sizeof m->cores);
    meta(path, json, "openblas", blas, sizeof blas);
    blas_core(blas, m->blas_core, sizeof m->blas_core);
    meta(path, json, "gpu", gpu, sizeof gpu);
    /* "none (built without CUDA)", "none (no CUDA device answered)": a run
     * that measured no GPU says nothing about the machine's */
    if (strncmp(gpu, "none", 4)) snprintf(m->gpu, sizeof m->gpu, "%.*s", (int)strcspn(gpu, ","), gpu);
}

const char *bench_machine_differs(const bench_machine *a, const bench_machine *b) {
    const char *const names[] = {"cpu", "cores", "gpu", "BLAS core"};
    const char *x[] = {a->cpu, a->cores, a->gpu, a->blas_core}, *y[] = {b->cpu, b->cores, b->gpu, b->blas_core};
    for (int i = 0; i < 4; i++)
        if (*x[i] && *y[i] && strcmp(x[i], y[i])) return names[i];
    return NULL;
}

/* "cpu X, N cores, gpu G, BLAS core C" ("?" for what is not recorded) */
static void describe(const bench_machine *m, char *buf, size_t n) {
    snprintf(buf, n, "cpu %s, %s cores, gpu %s, BLAS core %s", *m->cpu ? m->cpu : "?", *m->cores ? m->cores : "?",
             *m->gpu ? m->gpu : "none", *m->blas_core ? m->blas_core : "?");
}

bool bench_machine_mismatch(const char *path_a, const char *path_b, char *msg, size_t n) {
    bench_machine a, b;
    bench_machine_of(path_a, &a);
    bench_machine_of(path_b, &b);
    const char *field = bench_machine_differs(&a, &b);
    if (!field) return false;
    char da[400], db[400];
    const char *name = strrchr(path_a, '/');
    describe(&a, da, sizeof da);
    describe(&b, db, sizeof db);
    snprintf(msg, n, "%s: %s differs; A: %s; B: %s", name ? name + 1 : path_a, field, da, db);
    return true;
}
