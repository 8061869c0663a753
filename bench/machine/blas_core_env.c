/* blas_core_env.c: the OpenBLAS core decision applied to this process:
 * its inputs read (CPUID, the library's core and config, the user's
 * OPENBLAS_CORETYPE), the choice put into the environment for the image
 * executed next (reexec.c), verified there, and described for the
 * metadata. The decision itself is blas_core.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu_backend/cpu_backend.h"
#include "machine/blas_core.h"
#include "machine/host_load.h"

/* why the choice could not be applied, or why it fell back ("" when
 * neither): bench_blas_core_describe says so beside the core */
static char failure[256];
/* what the verification saw ("" before it ran) */
static char verified[128];

/* The marker names the core set first ("SkylakeX (auto: ...)"), or
 * "default (fallback: ...)" with OPENBLAS_CORETYPE unset; it is in force
 * only while the environment still says so (a marker inherited by a
 * process whose OPENBLAS_CORETYPE someone changed since is stale). */
static bool marker_in_force(void) {
    const char *mark = getenv(BENCH_BLAS_CORE_MARK), *core = getenv("OPENBLAS_CORETYPE");
    if (!mark) return false;
    if (!core || !*core) return !strncmp(mark, "default (", 9);
    size_t len = strlen(core);
    return !strncasecmp(mark, core, len) && mark[len] == ' ' && mark[len + 1] == '(';
}

static bench_blas_choice choose_here(void) {
    char config[256];
    const char *cores[16];
    dg_cpu_blas_info(config, sizeof config);
    int n = bench_blas_cores_accepted(config, cores, 16);
    bench_cpu_features f = bench_cpu_features_read();
    return bench_blas_core_choose(&f, dg_cpu_blas_core(), cores, n, getenv("OPENBLAS_CORETYPE"));
}

int bench_blas_core_decide(void) {
    if (marker_in_force()) return 0;
    bench_blas_choice c = choose_here();
    if (c.action != BENCH_BLAS_SWITCH) return 0;
    char mark[300];
    snprintf(mark, sizeof mark, "%s (%s)", c.core, c.reason);
    if (setenv("OPENBLAS_CORETYPE", c.core, 1) || setenv(BENCH_BLAS_CORE_MARK, mark, 1)) {
        bench_blas_core_undo(strerror(errno));
        return 0;
    }
    return 1;
}

void bench_blas_core_undo(const char *why) {
    const char *core = getenv("OPENBLAS_CORETYPE");
    snprintf(failure, sizeof failure, "not applied: OPENBLAS_CORETYPE=%s: %s", core ? core : "", why);
    bench_one_line(failure);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(BENCH_BLAS_CORE_MARK);
}

int bench_blas_core_verify_with(bench_sgemm_fn sgemm) {
    const char *asked = getenv("OPENBLAS_CORETYPE"), *got = dg_cpu_blas_core();
    if (!marker_in_force() || !asked || !*asked) return 0; /* the user's core, or OpenBLAS's own */
    char why[200];
    double err = 0;
    /* OpenBLAS answers a name it does not accept with its own choice, a
     * warning on stderr and no error */
    if (strcasecmp(got, asked))
        snprintf(why, sizeof why, "OPENBLAS_CORETYPE=%s did not take: OpenBLAS runs %s", asked, got);
    else if (!((err = bench_blas_sgemm_error(sgemm)) <= BENCH_BLAS_SGEMM_TOL))
        snprintf(why, sizeof why, "%s failed the checked sgemm (max rel err %.2g > %.0e)", asked, err,
                 BENCH_BLAS_SGEMM_TOL);
    else {
        snprintf(verified, sizeof verified, "checked: OpenBLAS runs %s, sgemm max rel err %.1e", got, err);
        return 0;
    }
    char mark[300];
    snprintf(mark, sizeof mark, "default (fallback: %s)", why);
    bench_one_line(mark);
    unsetenv("OPENBLAS_CORETYPE");
    setenv(BENCH_BLAS_CORE_MARK, mark, 1);
    return 1;
}

int bench_blas_core_verify(void) { return bench_blas_core_verify_with(dg_cpu_sgemm_openblas); }

bool bench_blas_core_describe(char *why, size_t n) {
    const char *got = dg_cpu_blas_core(), *user = getenv("OPENBLAS_CORETYPE");
    bool told = true;
    if (marker_in_force()) {
        /* "SkylakeX (auto: ...)": the reason is what the parentheses hold */
        const char *mark = getenv(BENCH_BLAS_CORE_MARK), *open = strchr(mark, '(');
        size_t len = strlen(open + 1);
        snprintf(why, n, "%s (%.*s%s%s)", got, (int)(len && open[len] == ')' ? len - 1 : len), open + 1,
                 verified[0] ? "; " : "", verified);
    } else if (user && *user) {
        snprintf(why, n, "%s (user-set: OPENBLAS_CORETYPE=%s)", got, user);
    } else {
        bench_blas_choice c = choose_here();
        told = c.action == BENCH_BLAS_SWITCH || failure[0];
        if (c.action == BENCH_BLAS_SWITCH)
            snprintf(why, n, "%s (%s; %s would serve it better; %s)", got, c.reason, c.core,
                     failure[0] ? failure : "not applied: the bench did not execute itself again");
        else
            snprintf(why, n, "%s (%s%s%s)", got, c.reason, failure[0] ? "; " : "", failure);
    }
    bench_one_line(why);
    return told;
}
