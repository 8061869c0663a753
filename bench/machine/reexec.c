#include "machine/reexec.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "machine/blas_core.h"
#include "machine/wait_policy.h"

/* executes exe with argv; returns only on failure, with errno's text */
static const char *exec_again(const char *exe, char **argv) {
    fflush(NULL);
    execv(exe, argv);
    return strerror(errno);
}

int bench_reexec_apply_exe(const char *wait_choice, const char *exe, char **argv, char *warn, size_t n) {
    warn[0] = '\0';
    int wait = bench_wait_policy_decide(wait_choice, warn, n);
    if (wait < 0) return -1;
    int core = bench_blas_core_decide(), rc = 0;
    if (wait || core) {
        char failure[300];
        snprintf(failure, sizeof failure, "could not execute %s again: %s", exe, exec_again(exe, argv));
        if (wait) bench_wait_policy_undo(failure);
        if (core) bench_blas_core_undo(failure);
        rc = 1;
    } else if (bench_blas_core_verify()) {
        /* this image runs a core the bench chose, and it failed its check */
        const char *err = exec_again(exe, argv);
        snprintf(warn, n, "the OpenBLAS core the bench chose failed its check and the bench could not execute "
                 "itself again without it: %s", err);
        return 1;
    }
    /* the core in force, on stderr where it is not OpenBLAS's own choice
     * (or in warn, where applying the bench's failed) */
    char line[512];
    bool tell = bench_blas_core_describe(line, sizeof line);
    if (core && !wait) {
        snprintf(warn, n, "openblas core: %s", line);
        return rc;
    }
    if (wait) bench_wait_policy_describe(warn, n);
    if (tell) fprintf(stderr, "bench: openblas core: %s\n", line);
    return rc;
}

int bench_reexec_apply(const char *wait_choice, char **argv, char *warn, size_t n) {
    return bench_reexec_apply_exe(wait_choice, "/proc/self/exe", argv, warn, n);
}
