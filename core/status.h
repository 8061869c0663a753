/* status.h: the error convention of every fallible duograd call.
 *
 * A function that can fail returns dg_status (DG_OK or a negative code) and
 * leaves a human-readable message for dg_last_error(). Library code never
 * prints and never exits; the CLI turns a status into a message and an exit
 * code. The message buffer is thread-local so OpenMP workers cannot clobber
 * the caller's message. */
#ifndef DG_STATUS_H
#define DG_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_status {
    DG_OK              =  0,
    DG_ERR_SHAPE       = -1, /* incompatible shapes given to a builder      */
    DG_ERR_INVALID     = -2, /* bad argument: NULL, out-of-range value, ... */
    DG_ERR_OOM         = -3, /* an allocation failed (host or device)       */
    DG_ERR_UNSUPPORTED = -4, /* the backend has no kernel for this op       */
    DG_ERR_BACKEND     = -5, /* a backend library call failed               */
    DG_ERR_IO          = -6, /* a file could not be read or is malformed    */
    DG_ERR_NO_DEVICE   = -7, /* the backend is built but no device answers  */
} dg_status;

/* Message of the most recent failure on this thread ("" if none). */
const char *dg_last_error(void);

/* Short name of a status: "DG_ERR_SHAPE" ... */
const char *dg_status_name(dg_status s);

/* Records a failure of the calling program's own (a harness built on
 * duograd, the bench) in the same slot dg_last_error() reads, formatted as
 * printf does, and returns s: one message slot serves the library's
 * failures and the program's, whichever came last, so a caller that
 * reports dg_last_error() after either reports the right one. */
dg_status dg_fail(dg_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
