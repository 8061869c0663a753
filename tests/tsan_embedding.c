/* tsan_embedding.c: embedding_threads.h's check as a plain program, for
 * scripts/test.sh's ThreadSanitizer step (clang, LLVM's OpenMP runtime and
 * its Archer tool, which tells TSan about the runtime's barriers). Not a
 * Criterion suite: Criterion's workers start from an inheritable arena
 * that a TSan process has no room for ("Could not initialize inheritable
 * arena"). Exit 0 when every split sums right; 1 with the first that did
 * not; TSan's own exit code when it saw a race. */
#include "embedding_threads.h"

int main(void) {
    char msg[512];
    for (size_t t = 0; t < sizeof emb_threads / sizeof *emb_threads; t++)
        for (size_t k = 0; k < sizeof emb_widths / sizeof *emb_widths; k++) {
            const char *bad =
                emb_backward_check(emb_threads[t], EMB_ROWS, emb_widths[k], EMB_FILLER, 1 + t * 7 + k, msg, sizeof msg);
            if (bad) {
                fprintf(stderr, "tsan_embedding: %s\n", bad);
                return 1;
            }
        }
    puts("tsan_embedding: the embedding backward summed every split right");
    return 0;
}
