/* test_util.h: seeds and assertion helpers shared by the suites. */
#ifndef DG_TEST_UTIL_H
#define DG_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/check/harness.h"
#include "core/graph_internal.h" /* the suites make backward-op nodes directly */

/* DG_TEST_SEED overrides the default seed; every failure message prints it. */
static inline uint64_t test_seed(void) {
    const char *s = getenv("DG_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : 20261121u;
}

#define ASSERT_OK(expr)                                                                        \
    do {                                                                                       \
        dg_status st_ = (expr);                                                                \
        cr_assert_eq(st_, DG_OK, "%s -> %s: %s", #expr, dg_status_name(st_), dg_last_error()); \
    } while (0)

/* fails with the worst element when a comparison exceeds tol */
#define ASSERT_CLOSE(stats, tol, what, name, seed)                                                     \
    cr_assert((stats).max_rel <= (tol),                                                                \
              "%s [%s, seed %llu]: max rel err %.3g > %.3g (nmse %.3g); worst element %lld: got %.9g, " \
              "want %.9g", what, name, (unsigned long long)(seed), (stats).max_rel, (double)(tol),     \
              (stats).nmse, (long long)(stats).worst, (stats).got, (stats).want)

#endif
