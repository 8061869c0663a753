#include "machine/wait_policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "machine/host_load.h"

/* why the last policy decided could not be applied (the image that would
 * run it did not start; "" when nothing failed): the metadata says so
 * beside the policy */
static char exec_failure[256];

/* the marker names the policy first: "passive (auto: ...)"; it is in force
 * only when OMP_WAIT_POLICY still holds that word (a marker inherited by a
 * process whose OMP_WAIT_POLICY someone changed since is stale) */
static bool marker_in_force(void) {
    const char *mark = getenv(BENCH_WAIT_POLICY_MARK), *pol = getenv("OMP_WAIT_POLICY");
    if (!mark || !pol || !*pol) return false;
    size_t len = strlen(pol);
    return strncasecmp(mark, pol, len) == 0 && mark[len] == ' ';
}

void bench_wait_policy_describe(char *why, size_t n) {
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (marker_in_force())
        snprintf(why, n, "%s", getenv(BENCH_WAIT_POLICY_MARK));
    else if (pol && spin)
        snprintf(why, n, "%s (set by the user: OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s)", pol, pol, spin);
    else if (pol)
        snprintf(why, n, "%s (set by the user: OMP_WAIT_POLICY=%s)", pol, pol);
    else if (spin)
        snprintf(why, n, "spin %s iterations, then sleep (set by the user: GOMP_SPINCOUNT=%s)", spin, spin);
    else
        /* libgomp's env.c: 300000 spins (a few ms) unless a policy is given */
        snprintf(why, n, "libgomp default (OMP_WAIT_POLICY unset: spin about 300000 iterations, then sleep)%s%s",
                 exec_failure[0] ? "; " : "", exec_failure);
    bench_one_line(why);
}

int bench_wait_policy_decide(const char *choice, char *why, size_t n) {
    exec_failure[0] = '\0';
    if (strcmp(choice, "auto") && strcmp(choice, "active") && strcmp(choice, "passive")) {
        snprintf(why, n, "unknown wait policy '%s' (auto, active or passive)", choice);
        bench_one_line(why);
        return -1;
    }
    /* the user's word, or this is the image executed for the choice */
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
        bench_wait_policy_describe(why, n);
        return 0;
    }
    char reason[200];
    const char *policy = choice;
    if (!strcmp(choice, "auto")) {
        char load[160];
        bool loaded = bench_env_loaded(load, sizeof load);
        /* spinning threads that lose their core to another process stall
         * every parallel region until the scheduler gives it back */
        policy = loaded ? "passive" : "active";
        snprintf(reason, sizeof reason, "auto: %s", load);
    } else {
        snprintf(reason, sizeof reason, "asked for with --wait-policy %s", choice);
    }
    char mark[256];
    snprintf(mark, sizeof mark, "%s (%s)", policy, reason);
    if (setenv("OMP_WAIT_POLICY", policy, 1) || setenv(BENCH_WAIT_POLICY_MARK, mark, 1)) {
        char err[128];
        snprintf(err, sizeof err, "could not set OMP_WAIT_POLICY=%s: %s", policy, strerror(errno));
        bench_wait_policy_undo(err);
        bench_wait_policy_describe(why, n);
        return 0;
    }
    bench_wait_policy_describe(why, n);
    return 1;
}

void bench_wait_policy_undo(const char *failure) {
    snprintf(exec_failure, sizeof exec_failure, "%s", failure);
    unsetenv("OMP_WAIT_POLICY");
    unsetenv(BENCH_WAIT_POLICY_MARK);
}
