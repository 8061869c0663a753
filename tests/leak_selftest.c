/* leak_selftest.c: proves that a leak fails a test in a sanitizer build.
 * Registered with ctest only when DG_SANITIZE is on, and expected to report
 * exactly the two leaking tests as failed and the clean one as passed, with
 * LeakSanitizer's report visible (PASS_REGULAR_EXPRESSION in
 * tests/CMakeLists.txt). If the per-test check of leak_check.c ever stops
 * working, the leaking tests pass again and this entry fails. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

/* volatile: the allocation must not be optimized away; noinline: the last
 * copy of the pointer dies with this frame, not in a register or stack slot
 * of the test body that LeakSanitizer would still scan */
static void *volatile sink;

__attribute__((noinline)) static void leak_bytes(size_t n) {
    sink = malloc(n);
    memset(sink, 0x5a, n);
    sink = NULL;
}

Test(leak_selftest, clean_test_passes) {
    void *p = malloc(64);
    cr_assert_not_null(p);
    free(p);
}

Test(leak_selftest, leaking_test_fails) { leak_bytes(4096); }

ParameterizedTestParameters(leak_selftest, leaking_parameterized_test_fails) {
    static int sizes[] = {1000};
    return cr_make_param_array(int, sizes, sizeof sizes / sizeof sizes[0]);
}

ParameterizedTest(int *size, leak_selftest, leaking_parameterized_test_fails) {
    leak_bytes((size_t)*size);
}
