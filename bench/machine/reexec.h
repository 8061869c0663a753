/* reexec.h: what must be in the environment before the libraries load,
 * decided and applied by executing the bench once more.
 *
 * libgomp reads OMP_WAIT_POLICY (wait_policy.h) and OpenBLAS reads
 * OPENBLAS_CORETYPE (blas_core.h) when they load, before main. The bench
 * decides both, sets what changes, and executes /proc/self/exe once with
 * the same arguments; the new image finds both choices in force (their
 * markers), verifies the OpenBLAS core, and runs. */
#ifndef DG_BENCH_REEXEC_H
#define DG_BENCH_REEXEC_H

#include <stddef.h>

/* wait_choice: --wait-policy's word ("auto", "active", "passive"); argv:
 * main's (argv[argc] NULL). On success with something to change, the call
 * does not return. Returns 0 when the process runs as decided (the
 * OpenBLAS core verified: one line on stderr says a core that is not
 * OpenBLAS's own choice); 1 when the new image could not be executed, or
 * the bench's core failed its check and the fall-back could not be
 * executed (warn: what runs instead, and why); -1 for an unknown wait
 * choice (warn says so). */
int bench_reexec_apply(const char *wait_choice, char **argv, char *warn, size_t n);
/* the same, executing `exe` instead of /proc/self/exe (tests run a small
 * program that prints what it was given) */
int bench_reexec_apply_exe(const char *wait_choice, const char *exe, char **argv, char *warn, size_t n);

#endif
