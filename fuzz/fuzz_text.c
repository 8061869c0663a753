/* fuzz_text.c: dg_text_load (bench train --model charlm's corpus) on any
 * bytes. A success must map every byte to an id below vocab (2 to 256
 * distinct bytes, in increasing order) with a finite, non-negative unigram
 * entropy; a failure nothing allocated and a message naming the file. */
#include <math.h>

#include "core/data/text.h"
#include "fuzz_util.h"

static char path[600];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*path) snprintf(path, sizeof path, "%s/corpus.txt", fuzz_tmp_dir());
    fuzz_write(path, data, size);
    dg_text t;
    dg_status st = dg_text_load(path, &t);
    if (st != DG_OK) {
        if (t.ids || t.n || t.vocab) abort();
        fuzz_check_message(dg_last_error(), path);
        return 0;
    }
    if (t.n != (int64_t)size || t.vocab < 2 || t.vocab > 256 || !t.ids) abort();
    if (!isfinite(t.unigram_nats) || t.unigram_nats < 0 || t.unigram_nats > log(256.0) + 1e-9) abort();
    for (int v = 1; v < t.vocab; v++)
        if (t.chars[v] <= t.chars[v - 1]) abort();
    for (int64_t i = 0; i < t.n; i++)
        if (t.ids[i] < 0 || t.ids[i] >= t.vocab || t.chars[t.ids[i]] != data[i]) abort();
    dg_text_free(&t);
    return 0;
}
