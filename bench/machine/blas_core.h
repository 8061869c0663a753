/* blas_core.h: which OpenBLAS core (kernel set) the CPU rows run on, chosen
 * on purpose and recorded.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its core by the CPU's model number when it
 * loads; a model newer than the library (Debian 12's 0.3.21 on a current
 * Xeon) gets the generic SSE3 core "Prescott", several times slower than
 * the AVX-512 one. The core can only be chosen before the library loads,
 * through OPENBLAS_CORETYPE: so the bench decides (bench_blas_core_choose),
 * puts the choice into the environment and executes itself again
 * (reexec.h), as it does for the OpenMP wait policy; the new image checks
 * that the core took and computes right (bench_blas_core_verify). A marker
 * variable (BENCH_BLAS_CORE_MARK, "SkylakeX (auto: ...)") tells the new
 * image that the choice is the bench's and in force. OPENBLAS_CORETYPE set
 * by the user always wins. */
#ifndef DG_BENCH_BLAS_CORE_H
#define DG_BENCH_BLAS_CORE_H

#include <stdbool.h>
#include <stddef.h>

#include "machine/cpu_features.h"

#define BENCH_BLAS_CORE_MARK "DG_BLAS_CORE_WHY"

/* The cores an OPENBLAS_CORETYPE may name in the OpenBLAS whose
 * openblas_get_config() is `config` ("OpenBLAS 0.3.21 NO_LAPACKE
 * DYNAMIC_ARCH ... Prescott MAX_THREADS=64"), best first, into names (at
 * most max): none for a build without DYNAMIC_ARCH (one core compiled in),
 * and only names its version accepts (0.3.21 refuses "Cooperlake" and
 * "SapphireRapids" with "Core not found"). Returns the count. */
int bench_blas_cores_accepted(const char *config, const char **names, int max);

typedef enum bench_blas_action {
    BENCH_BLAS_KEEP,   /* run with the core OpenBLAS chose (or the user's) */
    BENCH_BLAS_SWITCH, /* run with `core` instead */
} bench_blas_action;

typedef struct bench_blas_choice {
    bench_blas_action action;
    char core[32];    /* SWITCH: the OPENBLAS_CORETYPE to set; KEEP: the core kept */
    char reason[224]; /* one line: "auto: OpenBLAS 0.3.21 chose Prescott (SSE3) on a CPU with AVX-512" */
} bench_blas_choice;

/* The decision, from its inputs alone: the CPU's features, the core
 * OpenBLAS chose (openblas_get_corename), the cores this build accepts
 * (bench_blas_cores_accepted, best first), and OPENBLAS_CORETYPE as the
 * user set it (NULL or "": unset). SWITCH when the user set nothing and
 * the best accepted core the CPU can run is above the chosen one (the
 * chosen one is generic, or older than the CPU); KEEP otherwise, also for
 * a core name this bench does not rank. */
bench_blas_choice bench_blas_core_choose(const bench_cpu_features *f, const char *corename, const char *const *cores,
                                         int n_cores, const char *user_set);

/* In the first image: decides for this process (its features, the core
 * its OpenBLAS chose, the user's OPENBLAS_CORETYPE). Returns 1 when a core
 * was put into the environment (with the marker; the caller executes the
 * bench again), 0 when nothing is to change (the user's core, OpenBLAS's
 * own choice, or the marker says this image runs the bench's choice). */
int bench_blas_core_decide(void);
/* The executed image could not start: the environment restored, and
 * `failure` said by bench_blas_core_describe beside the core kept. */
void bench_blas_core_undo(const char *failure);
/* The largest error of C = A B (63 x 97 x 131, odd sizes that no kernel
 * tile divides) computed by `sgemm` (row-major, as dg_cpu_sgemm_openblas),
 * against float64, relative to sum_k |a_ik b_kj|: about 1e-7 for a sound
 * kernel; 1 or more (or NaN) for a wrong one. */
typedef void (*bench_sgemm_fn)(bool ta, bool tb, int m, int n, int k, const float *A, int lda, const float *B,
                               int ldb, float *C, int ldc, bool accumulate);
double bench_blas_sgemm_error(bench_sgemm_fn sgemm);
/* In an image that runs a core the bench chose: whether OpenBLAS runs the
 * core asked for and a checked sgemm (bench_blas_sgemm_error) agrees with
 * float64. Returns 0 (nothing to check, or it passed) or 1 when it failed:
 * then the environment holds the fall-back (OPENBLAS_CORETYPE unset, the
 * marker "default (fallback: WHY)") for the caller to execute again. */
int bench_blas_core_verify(void);
/* the same, checking `sgemm` (tests plant a wrong one) */
int bench_blas_core_verify_with(bench_sgemm_fn sgemm);

/* The largest bench_blas_sgemm_error a sound single-precision kernel gives */
#define BENCH_BLAS_SGEMM_TOL 1e-5

/* The core in force and why, one line: "SkylakeX (auto: OpenBLAS 0.3.21
 * chose Prescott ...; checked: ...)", "Haswell (user-set:
 * OPENBLAS_CORETYPE=haswell)", "Prescott (OpenBLAS's own choice: ...)".
 * Returns true when the core is not the one OpenBLAS chose by itself (the
 * bench's choice, its fall-back, or the user's): worth a line on stderr. */
bool bench_blas_core_describe(char *why, size_t n);

#endif
