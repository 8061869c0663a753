/* stream.h: the bytes of a file, inflated when it is gzip, with every way
 * the file can be damaged told apart. zlib's gzread cannot be used for
 * this: it drops data after the last gzip member without a word and turns a
 * failed CRC or a read error into a short read, which a reader then reports
 * as truncated data. Internal to core/data. */
#ifndef DG_DATA_STREAM_H
#define DG_DATA_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "../status.h"

typedef struct dg_stream {
    const char *path;       /* named in every message                      */
    FILE       *file;
    bool        gz;         /* the file starts with the gzip magic 1f 8b   */
    bool        member_end; /* a gzip member ended; what follows is unread */
    bool        end;        /* every byte delivered, every check passed    */
    z_stream    z;          /* next_in/avail_in: the unread part of in[]   */
    uint8_t     in[1 << 15];
} dg_stream;

/* Opens path; DG_ERR_IO naming it when it cannot be opened. A file that
 * starts with 1f 8b is gzip: one member or several back to back (RFC 1952;
 * gzip -d reads them as one file). Any other file is read as it is. */
dg_status dg_stream_open(dg_stream *s, const char *path);

/* Up to n bytes into buf; *got < n only at the end of the data, after the
 * last member's CRC and length checks passed and nothing follows it.
 * DG_ERR_IO naming the file for a read error, a corrupt or cut gzip stream,
 * a failed CRC or length check, or data after the end of the gzip stream. */
dg_status dg_stream_read(dg_stream *s, void *buf, size_t n, size_t *got);

void dg_stream_close(dg_stream *s);

#endif
