#include "stream.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "../status_internal.h"

/* the next chunk of the file into s->in; none at the end of the file */
static dg_status refill(dg_stream *s) {
    size_t r = fread(s->in, 1, sizeof s->in, s->file);
    if (r == 0 && ferror(s->file)) return dg__fail(DG_ERR_IO, "%s: read error: %s", s->path, strerror(errno));
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)r;
    return DG_OK;
}

dg_status dg_stream_open(dg_stream *s, const char *path) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->file = fopen(path, "rb");
    if (!s->file) return dg__fail(DG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    dg_status st = refill(s);
    s->gz = s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (st == DG_OK && s->gz && inflateInit2(&s->z, 15 + 16) != Z_OK) { /* 15 + 16: gzip, no zlib or raw */
        s->gz = false; /* nothing for dg_stream_close to end */
        st = dg__fail(DG_ERR_OOM, "%s: out of memory for the gzip decoder", path);
    }
    if (st != DG_OK) dg_stream_close(s);
    return st;
}

/* the file offset of the next byte not yet given to inflate */
static long long offset(const dg_stream *s) { return (long long)ftello(s->file) - s->z.avail_in; }

/* After a member's end (its CRC and length checked): the end of the file,
 * another member, or data that is not gzip, which an error names rather
 * than drop. The next member's magic may straddle two reads. */
static dg_status after_member(dg_stream *s) {
    if (s->z.avail_in == 0) {
        s->end = true;
        return DG_OK;
    }
    if (s->z.avail_in == 1) {
        s->in[0] = *s->z.next_in;
        size_t r = fread(s->in + 1, 1, sizeof s->in - 1, s->file);
        if (r == 0 && ferror(s->file)) return dg__fail(DG_ERR_IO, "%s: read error: %s", s->path, strerror(errno));
        s->z.next_in = s->in;
        s->z.avail_in = 1 + (uInt)r;
    }
    if (s->z.avail_in < 2 || s->z.next_in[0] != 0x1f || s->z.next_in[1] != 0x8b)
        return dg__fail(DG_ERR_IO, "%s: data after the end of the gzip stream, at byte %lld", s->path, offset(s));
    inflateReset(&s->z);
    s->member_end = false;
    return DG_OK;
}

/* an inflate failure in words: a failed check means the bytes arrived but
 * are not the ones compressed; anything else is a malformed stream */
static dg_status inflate_fail(const dg_stream *s, int r) {
    const char *msg = s->z.msg ? s->z.msg : "";
    if (r == Z_MEM_ERROR) return dg__fail(DG_ERR_OOM, "%s: out of memory in the gzip decoder", s->path);
    if (!strcmp(msg, "incorrect data check"))
        return dg__fail(DG_ERR_IO, "%s: gzip CRC check failed: the file is corrupt", s->path);
    if (!strcmp(msg, "incorrect length check"))
        return dg__fail(DG_ERR_IO, "%s: gzip length check failed: the file is corrupt", s->path);
    return dg__fail(DG_ERR_IO, "%s: corrupt gzip stream at byte %lld: %s", s->path, offset(s), *msg ? msg : "?");
}

static dg_status read_gz(dg_stream *s, uint8_t *buf, size_t n, size_t *got) {
    while (*got < n && !s->end) {
        dg_status st = s->z.avail_in == 0 ? refill(s) : DG_OK;
        if (st == DG_OK && s->member_end) st = after_member(s);
        if (st != DG_OK) return st;
        if (s->end) break;
        if (s->z.avail_in == 0)
            return dg__fail(DG_ERR_IO, "%s: gzip stream ends early: the file stops inside compressed data",
                            s->path);
        uInt want = n - *got > UINT_MAX ? UINT_MAX : (uInt)(n - *got);
        s->z.next_out = buf + *got;
        s->z.avail_out = want;
        int r = inflate(&s->z, Z_NO_FLUSH);
        *got += want - s->z.avail_out;
        if (r == Z_STREAM_END) s->member_end = true;
        else if (r != Z_OK && r != Z_BUF_ERROR) return inflate_fail(s, r); /* BUF_ERROR: input ran out */
    }
    return DG_OK;
}

dg_status dg_stream_read(dg_stream *s, void *buf, size_t n, size_t *got) {
    *got = 0;
    if (s->gz) return read_gz(s, buf, n, got);
    while (*got < n && !s->end) {
        dg_status st = s->z.avail_in == 0 ? refill(s) : DG_OK;
        if (st != DG_OK) return st;
        if (s->z.avail_in == 0) {
            s->end = true;
            break;
        }
        size_t k = n - *got < s->z.avail_in ? n - *got : s->z.avail_in;
        memcpy((uint8_t *)buf + *got, s->z.next_in, k);
        s->z.next_in += k;
        s->z.avail_in -= (uInt)k;
        *got += k;
    }
    return DG_OK;
}

void dg_stream_close(dg_stream *s) {
    if (s->gz) inflateEnd(&s->z);
    if (s->file) fclose(s->file);
    s->file = NULL;
    s->gz = false;
}
