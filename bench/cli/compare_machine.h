/* compare_machine.h: the machine a result file was measured on, as its
 * metadata records it, for `bench compare`'s refusal to set runs of two
 * machines side by side unless asked to. */
#ifndef DG_BENCH_COMPARE_MACHINE_H
#define DG_BENCH_COMPARE_MACHINE_H

#include <stdbool.h>
#include <stddef.h>

/* What makes two runs' times incomparable. A field is "" where the file
 * does not record it (an older file, a peer's own CSV), and then never
 * differs: only what both files say is compared. */
typedef struct bench_machine {
    char cpu[128];       /* "# cpu: " (the model name)                          */
    char cores[16];      /* "# cores: " (online cores)                          */
    char gpu[96];        /* "# gpu: " up to its first comma; "" for "none (...)"  */
    char blas_core[48];  /* the core OpenBLAS chose: the word of "# openblas: "
                          * before MAX_THREADS= or SINGLE_THREADED             */
} bench_machine;

/* the machine of path: a NAME.csv's '#' lines, or a NAME.json's context */
void bench_machine_of(const char *path, bench_machine *m);

/* the name of the first field both record and differently ("cpu", "cores",
 * "gpu", "BLAS core"), NULL when none */
const char *bench_machine_differs(const bench_machine *a, const bench_machine *b);

/* Whether the files path_a and path_b (of one name, from the two folders)
 * were measured on different machines; if so, msg says which field differs
 * and both machines: "gemm.csv: cpu differs; A: cpu X, 16 cores, gpu G,
 * BLAS core C; B: cpu Y, 2 cores, gpu none, BLAS core D". */
bool bench_machine_mismatch(const char *path_a, const char *path_b, char *msg, size_t n);

#endif
