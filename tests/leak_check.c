/* leak_check.c: a LeakSanitizer check at the end of every test, linked into
 * each suite of a sanitizer build (DG_SANITIZE, see tests/CMakeLists.txt).
 *
 * Why a check of its own: Criterion runs each test in a worker process and
 * decides the test's status when the worker reports the end of the body
 * (the TEARDOWN phase). LeakSanitizer's check at exit runs later, when the
 * worker leaves main; its non-zero exit code reaches the runner after the
 * status is settled, where Criterion 2.4 records it without judging it
 * (handle_death in src/core/client.c only looks at the exit code of a worker
 * that dies during the body). So a leak printed a report and the test passed.
 *
 * How it hooks in: every Test() body is started by a call from the suite's
 * own code to criterion_internal_test_main(body) in libcriterion. The suites
 * link with -Wl,--wrap=criterion_internal_test_main, so that call lands here;
 * the body is handed on wrapped in a function that runs it and then asks
 * LeakSanitizer for a check while an assertion still fails the test. No
 * suite or test needs to know. A test that fails an assertion leaves by a
 * longjmp and skips the check: it has failed already, and the leaks of an
 * abandoned body are expected. Leaks made later (test or suite .fini, exit
 * handlers) are still reported by the check at exit, which ctest watches
 * for (FAIL_REGULAR_EXPRESSION in tests/CMakeLists.txt). */
#include <criterion/criterion.h>
#include <sanitizer/lsan_interface.h>
#include <stddef.h>
#include <string.h>

void __real_criterion_internal_test_main(void (*fn)(void));
void __wrap_criterion_internal_test_main(void (*fn)(void));

/* a worker runs one test, on its main thread: one slot is enough */
static void (*leak_body)(void);

static void leak_check_now(void) {
    /* prints LeakSanitizer's usual report to stderr; returns 0 when nothing
     * leaked or when leak detection is off (ASAN_OPTIONS=detect_leaks=0).
     * Memory that libraries still point to (OpenBLAS buffers, the OpenMP
     * pool, the CUDA runtime) is reachable, hence not a leak. */
    int leaked = __lsan_do_recoverable_leak_check();
    cr_assert(leaked == 0, "LeakSanitizer: this test leaked memory; its report is above, on stderr");
}

static void leak_run(void) {
    leak_body();
    leak_check_now();
}

static void leak_run_param(void *param) {
    ((void (*)(void *))leak_body)(param);
    leak_check_now();
}

void __wrap_criterion_internal_test_main(void (*fn)(void)) {
    leak_body = fn;
    /* the worker's copy of the test's data lies unaligned in the arena the
     * runner passed it through: read it bytewise, never through a member */
    struct criterion_test_extra_data data;
    memcpy(&data, criterion_current_test->data, sizeof data);
    /* the body of a ParameterizedTest takes its parameter: Criterion casts the
     * pointer back to void (*)(void *) when the test has a param_ generator */
    if (data.param_)
        __real_criterion_internal_test_main((void (*)(void))leak_run_param);
    else
        __real_criterion_internal_test_main(leak_run);
}
