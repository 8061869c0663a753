#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *dg_last_error(void) { return last_error; }

/* the one writer of the slot: the library's failures (dg__fail, its own
 * name for this function) and a program's alike */
dg_status dg_fail(dg_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *dg_status_name(dg_status s) {
    switch (s) {
    case DG_OK:              return "DG_OK";
    case DG_ERR_SHAPE:       return "DG_ERR_SHAPE";
    case DG_ERR_INVALID:     return "DG_ERR_INVALID";
    case DG_ERR_OOM:         return "DG_ERR_OOM";
    case DG_ERR_UNSUPPORTED: return "DG_ERR_UNSUPPORTED";
    case DG_ERR_BACKEND:     return "DG_ERR_BACKEND";
    case DG_ERR_IO:          return "DG_ERR_IO";
    case DG_ERR_NO_DEVICE:   return "DG_ERR_NO_DEVICE";
    }
    return "DG_ERR_?";
}
