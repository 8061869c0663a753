/* skip_report.c: makes skipped tests visible in every suite's summary.
 *
 * Criterion's synthesis counts a skipped test nowhere: 62 GPU tests skipped
 * and one passing read "Tested: 1 | Passing: 1". These report hooks, run in
 * the runner process, count the skips by reason and print before the
 * synthesis, without --verbose:
 *
 *   [====] Skipped: 62 of 63 tests: no CUDA device: the NVIDIA driver is ...
 *
 * A skip for want of a GPU (its reason starts as gpu_util.h and the
 * backend word it) is a device skip:
 * - with DG_REQUIRE_GPU=1 (the GPU machine) each one counts as a failure,
 *   so the suite fails, whatever helper the test used to skip;
 * - otherwise, when some were skipped and nothing failed, a last line
 *   "GPU tests not run: ..." lets ctest show a GPU-only suite as skipped
 *   (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt).
 *
 * Linked into every suite as an OBJECT library: the hooks live in a linker
 * section that no code references, so a static library would drop them. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REASONS 8
#define REASON_CHARS 240

typedef struct skip_reason {
    char   text[REASON_CHARS];
    size_t count;
} skip_reason;
static skip_reason reasons[MAX_REASONS];
static int    n_reasons;
static size_t n_run;         /* tests that ended, skipped or not (a filter leaves the rest out) */
static size_t other_reasons; /* skips past MAX_REASONS distinct reasons */
static size_t device_skips;
static char   device_reason[REASON_CHARS];

static bool is_device_reason(const char *why) {
    static const char *const heads[] = {"no CUDA device", "CUDA device broken", "built without CUDA"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        if (strncmp(why, heads[i], strlen(heads[i])) == 0) return true;
    return false;
}

static bool gpu_required(void) {
    const char *s = getenv("DG_REQUIRE_GPU");
    return s && strcmp(s, "1") == 0;
}

ReportHook(POST_TEST)(struct criterion_test_stats *st) {
    n_run++;
    if (st->test_status != CR_STATUS_SKIPPED) return;
    const char *why = st->message && st->message[0] ? st->message : "(no reason given)";
    if (is_device_reason(why) && device_skips++ == 0) snprintf(device_reason, sizeof device_reason, "%s", why);
    for (int i = 0; i < n_reasons; i++)
        if (strncmp(reasons[i].text, why, REASON_CHARS - 1) == 0) {
            reasons[i].count++;
            return;
        }
    if (n_reasons == MAX_REASONS) {
        other_reasons++;
        return;
    }
    snprintf(reasons[n_reasons].text, REASON_CHARS, "%s", why);
    reasons[n_reasons++].count = 1;
}

/* most skips first, then by reason: the same lines whatever order the
 * parallel workers ended in */
static int by_count_then_text(const void *a, const void *b) {
    const skip_reason *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}

ReportHook(POST_ALL)(struct criterion_global_stats *g) {
    qsort(reasons, (size_t)n_reasons, sizeof reasons[0], by_count_then_text);
    for (int i = 0; i < n_reasons; i++)
        fprintf(stderr, "[====] Skipped: %zu of %zu tests: %s\n", reasons[i].count, n_run, reasons[i].text);
    if (other_reasons) fprintf(stderr, "[====] Skipped: %zu of %zu tests: other reasons\n", other_reasons, n_run);
    if (!device_skips) return;
    if (gpu_required()) {
        /* the synthesis then counts them as tested and failing; the exit code is 1 */
        fprintf(stderr, "[FAIL] DG_REQUIRE_GPU=1, yet %zu of %zu tests skipped for want of a usable GPU: %s\n",
                device_skips, n_run, device_reason);
        g->tests_skipped -= device_skips;
        g->tests_failed += device_skips;
    } else if (g->tests_failed == 0 && g->tests_crashed == 0) {
        fprintf(stderr, "[====] GPU tests not run: %zu skipped, none failed (%s)\n", device_skips, device_reason);
    }
}
