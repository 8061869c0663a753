/* test_embedding_threads.c: the CPU embedding backward over several
 * threads with ids on every boundary of its tasks (embedding_threads.h
 * says how). scripts/test.sh also runs the same check built with
 * ThreadSanitizer (tsan_embedding.c), where the race is reported whatever
 * the timing. */
#include <criterion/criterion.h>

#include "embedding_threads.h"
#include "test_util.h"

Test(embedding_threads, backward_with_ids_on_every_task_boundary) {
    char msg[512];
    for (size_t t = 0; t < sizeof emb_threads / sizeof *emb_threads; t++)
        for (size_t k = 0; k < sizeof emb_widths / sizeof *emb_widths; k++) {
            const char *bad = emb_backward_check(emb_threads[t], EMB_ROWS, emb_widths[k], EMB_FILLER,
                                                 test_seed() + t * 7 + k, msg, sizeof msg);
            cr_assert_null(bad, "%s [seed %llu]", bad, (unsigned long long)test_seed());
        }
}
