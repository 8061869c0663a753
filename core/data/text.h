/* text.h: a plain-text file as a character-level data set: its bytes
 * mapped to ids 0..vocab-1 (the distinct bytes in increasing order), with
 * the unigram entropy that a language model's loss must fall below. */
#ifndef DG_DATA_TEXT_H
#define DG_DATA_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "../status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_TEXT_DEFAULT   "/usr/share/common-licenses/GPL-3"
#define DG_TEXT_MAX_BYTES ((int64_t)1 << 28)  /* 256 MiB */

typedef struct dg_text {
    int32_t *ids;          /* [n], each in [0, vocab)                       */
    int64_t  n;
    int      vocab;
    uint8_t  chars[256];   /* id -> byte                                    */
    double   unigram_nats; /* entropy of the bytes' frequencies, in nats    */
} dg_text;

/* Reads path. DG_ERR_IO naming the file for: one that cannot be opened or
 * read, an empty file, one larger than DG_TEXT_MAX_BYTES, one that is not
 * text (a NUL byte, or more than 1% of the bytes control characters other
 * than tab, newline, carriage return and form feed), or one of a single
 * distinct character (nothing to learn); *out is then zeroed. */
dg_status dg_text_load(const char *path, dg_text *out);
void      dg_text_free(dg_text *t);

#ifdef __cplusplus
}
#endif
#endif
