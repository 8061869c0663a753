/* status_internal.h: how duograd's own code records a failure. Not
 * installed: the library, its bench and its tests use it; a program using
 * duograd reads statuses and dg_last_error() (status.h) only. */
#ifndef DG_STATUS_INTERNAL_H
#define DG_STATUS_INTERNAL_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record a formatted message and return `s`, so a failing path can be
 * written `return dg__fail(DG_ERR_SHAPE, "add: %s vs %s", ...);`. */
dg_status dg__fail(dg_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
