/* skip_selftest.c: skip_report.c's own check. One passing test, two skipped
 * for want of a GPU, one skipped for another reason; tests/CMakeLists.txt
 * runs it twice and matches the summary lines: counted by reason without
 * DG_REQUIRE_GPU, and the GPU skips turned into failures with it. */
#include <criterion/criterion.h>

Test(skip_selftest, passes) { cr_assert(1); }
Test(skip_selftest, skips_for_want_of_a_gpu) { cr_skip_test("no CUDA device: on purpose"); }
Test(skip_selftest, skips_for_want_of_a_gpu_again) { cr_skip_test("no CUDA device: on purpose"); }
Test(skip_selftest, skips_for_another_reason) { cr_skip_test("on purpose, for no GPU reason"); }
