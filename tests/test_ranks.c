/* test_ranks.c: the rule bench/cli/ranks.c applies to GPU ranks under MPI
 * before any row (tests/test_mpi.sh runs it under mpirun where a GPU
 * answers): a host takes at most as many ranks as it has CUDA devices, one
 * GPU each, and a refusal names both counts and the host. Catches a rule
 * off by one (a rank sharing a GPU, or a host of N GPUs refused N ranks)
 * and a message without the counts. */
#include <string.h>

#include "cli/ranks.h"
#include "test_util.h"

TestSuite(ranks);

Test(ranks, a_host_takes_one_rank_per_gpu) {
    char why[256] = "";
    cr_assert(bench_ranks_fit(1, 1, "h", why, sizeof why));
    cr_assert(bench_ranks_fit(4, 4, "h", why, sizeof why));
    cr_assert(bench_ranks_fit(2, 8, "h", why, sizeof why));
    cr_assert_str_empty(why);
}

Test(ranks, more_ranks_than_gpus_are_refused_naming_both_counts) {
    char why[256];
    cr_assert_not(bench_ranks_fit(2, 1, "node7", why, sizeof why));
    cr_assert_str_eq(why, "2 ranks on host node7, which has 1 CUDA device: the GPU rows take one GPU per rank (at "
                          "most 1 per host)");
    cr_assert_not(bench_ranks_fit(5, 4, "node7", why, sizeof why));
    cr_assert(strstr(why, "5 ranks on host node7, which has 4 CUDA devices"), "%s", why);
    cr_assert_not(bench_ranks_fit(1, 0, "node7", why, sizeof why));
    cr_assert(strstr(why, "1 rank on host node7, which has 0 CUDA devices"), "%s", why);
}
