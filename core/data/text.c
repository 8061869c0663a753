/* text.c: a text file as character ids (text.h). */
#include "text.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../status_internal.h"

static bool is_control(uint8_t c) { return (c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c == 127; }

/* the whole file, at most DG_TEXT_MAX_BYTES */
static dg_status slurp(const char *path, uint8_t **buf, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return dg__fail(DG_ERR_IO, "text '%s': cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    dg_status st = b ? DG_OK : dg__fail(DG_ERR_OOM, "text '%s': out of memory", path);
    while (st == DG_OK) {
        if (len == cap) {
            uint8_t *nb = cap < (size_t)DG_TEXT_MAX_BYTES + 1 ? realloc(b, 2 * cap) : NULL;
            if (!nb) { st = dg__fail(DG_ERR_OOM, "text '%s': out of memory", path); break; }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if ((int64_t)len > DG_TEXT_MAX_BYTES)
            st = dg__fail(DG_ERR_IO, "text '%s': larger than %lld bytes", path, (long long)DG_TEXT_MAX_BYTES);
        else if (got == 0 && ferror(f))
            st = dg__fail(DG_ERR_IO, "text '%s': read error: %s", path, strerror(errno));
        else if (got == 0)
            break;
    }
    fclose(f);
    if (st != DG_OK) { free(b); return st; }
    *buf = b;
    *n = (int64_t)len;
    return DG_OK;
}

dg_status dg_text_load(const char *path, dg_text *out) {
    if (!out) return dg__fail(DG_ERR_INVALID, "dg_text_load: NULL output");
    memset(out, 0, sizeof *out);
    if (!path) return dg__fail(DG_ERR_INVALID, "dg_text_load: NULL path");
    uint8_t *b = NULL;
    int64_t n = 0, count[256] = {0}, control = 0;
    dg_status st = slurp(path, &b, &n);
    if (st != DG_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        count[b[i]]++;
        control += is_control(b[i]);
    }
    if (n == 0) st = dg__fail(DG_ERR_IO, "text '%s': the file is empty", path);
    else if (count[0]) st = dg__fail(DG_ERR_IO, "text '%s': not text (it holds NUL bytes)", path);
    else if (control * 100 > n)
        st = dg__fail(DG_ERR_IO, "text '%s': not text (%lld of its %lld bytes are control characters)", path,
                      (long long)control, (long long)n);
    int id[256];
    for (int c = 0; c < 256 && st == DG_OK; c++) {
        id[c] = count[c] ? out->vocab : -1;
        if (count[c]) {
            out->chars[out->vocab++] = (uint8_t)c;
            double p = (double)count[c] / (double)n;
            out->unigram_nats -= p * log(p);
        }
    }
    if (st == DG_OK && out->vocab < 2)
        st = dg__fail(DG_ERR_IO, "text '%s': one distinct character, nothing to learn", path);
    if (st == DG_OK && !(out->ids = malloc((size_t)n * sizeof *out->ids)))
        st = dg__fail(DG_ERR_OOM, "text '%s': out of memory for %lld ids", path, (long long)n);
    if (st == DG_OK) {
        for (int64_t i = 0; i < n; i++) out->ids[i] = id[b[i]];
        out->n = n;
    }
    free(b);
    if (st != DG_OK) memset(out, 0, sizeof *out);
    return st;
}

void dg_text_free(dg_text *t) {
    if (!t) return;
    free(t->ids);
    memset(t, 0, sizeof *t);
}
