/* status_internal.h: how duograd's own code records a failure. Not
 * installed: the library, its bench and its tests use it; a program using
 * duograd reads statuses and dg_last_error() (status.h) only. */
#ifndef DG_STATUS_INTERNAL_H
#define DG_STATUS_INTERNAL_H

#include "status.h"

/* Record a formatted message and return `s`, so a failing path can be
 * written `return dg__fail(DG_ERR_SHAPE, "add: %s vs %s", ...);`. The
 * library's own name for the public dg_fail (status.h): one writer of the
 * message slot, whoever records the failure. */
#define dg__fail dg_fail

#endif
