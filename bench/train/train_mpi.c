/* train_mpi.c: the bench's MPI ranks (train_mpi.h): start and end, the
 * start-up agreement, the CPU backend's sum over the ranks, the timings
 * and hosts gathered for rank 0's result file. Without DG_HAVE_MPI only
 * the launch is detected, to refuse it with the reason. */
#include "train/train_mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend/cpu_backend.h"
#include "core/status.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

#ifdef DG_HAVE_MPI
#include <limits.h>
#include <math.h>
#include <mpi.h>
#endif

#ifndef DG_BUILD_FLAGS
#define DG_BUILD_FLAGS "unknown"
#endif
extern const char *const dg_build_commit;

bool bench_mpi_launched(const char **var) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) {
            if (var) *var = vars[i];
            return true;
        }
    return false;
}

#ifndef DG_HAVE_MPI

bool bench_mpi_built(void) { return false; }

int bench_mpi_start(bench_mpi *m) {
    *m = (bench_mpi){.on = false, .rank = 0, .ranks = 1, .local_ranks = 1};
    const char *var;
    if (!bench_mpi_launched(&var)) return 0;
    fprintf(stderr, "bench: launched by MPI (%s is set), but this bench was built without MPI: "
            "install libopenmpi-dev and configure with -DDG_MPI=ON\n", var);
    return 1;
}

/* never reached: without MPI no rank is on (bench_mpi_start refuses) */
static dg_status no_mpi(const char *what) {
    return dg_fail(DG_ERR_UNSUPPORTED, "%s: built without MPI", what);
}
dg_status bench_mpi_agree(const bench_mpi *m, const char *config) {
    (void)m, (void)config;
    return no_mpi("bench_mpi_agree");
}
dg_status bench_mpi_join(const bench_mpi *m, dg_backend *be, bool overlap) {
    (void)m, (void)be, (void)overlap;
    return no_mpi("bench_mpi_join");
}
dg_status bench_mpi_spread(const bench_mpi *m, double x, double *min, double *max, int *slowest) {
    (void)m, (void)x, (void)min, (void)max, (void)slowest;
    return no_mpi("bench_mpi_spread");
}
dg_status bench_mpi_join_first(const bench_mpi *m, dg_backend *be, int n, bool overlap) {
    (void)m, (void)be, (void)n, (void)overlap;
    return no_mpi("bench_mpi_join_first");
}
dg_status bench_mpi_join_first_gpu(const bench_mpi *m, dg_backend *be, int n) {
    (void)m, (void)be, (void)n;
    return no_mpi("bench_mpi_join_first_gpu");
}
dg_status bench_mpi_slowest(const bench_mpi *m, bool active, double *v, int n_v, double *least, int *slowest) {
    (void)m, (void)active, (void)v, (void)n_v, (void)least, (void)slowest;
    return no_mpi("bench_mpi_slowest");
}
dg_status bench_mpi_same(const bench_mpi *m, bool active, uint64_t x, bool *same) {
    (void)m, (void)active, (void)x, (void)same;
    return no_mpi("bench_mpi_same");
}
dg_status bench_mpi_share(const bench_mpi *m, double *v, int n) {
    (void)m, (void)v, (void)n;
    return no_mpi("bench_mpi_share");
}
dg_status bench_mpi_hosts(const bench_mpi *m, const char *device, char *buf, size_t n) {
    (void)m, (void)device, (void)buf, (void)n;
    return no_mpi("bench_mpi_hosts");
}
int bench_mpi_end(const bench_mpi *m, int rc) {
    (void)m;
    return rc;
}

#else

bool bench_mpi_built(void) { return true; }

/* an MPI call's failure as a status, with MPI's own words */
static dg_status mpi_fail(int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", err);
    return dg_fail(DG_ERR_INVALID, "%s: %s", what, msg);
}

int bench_mpi_start(bench_mpi *m) {
    *m = (bench_mpi){.on = false, .rank = 0, .ranks = 1, .local_ranks = 1};
    if (!bench_mpi_launched(NULL)) return 0;
    int err = MPI_Init(NULL, NULL);
    if (err != MPI_SUCCESS) {
        fprintf(stderr, "bench: MPI_Init failed (error %d)\n", err);
        return 1;
    }
    /* failures come back as statuses, to be printed before the abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->ranks);
    m->on = true;
    /* the ranks that share this host's memory: this rank's place among them picks its GPU */
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &m->local_rank);
        MPI_Comm_size(local, &m->local_ranks);
        MPI_Comm_free(&local);
    }
    return 0;
}

/* FNV-1a, 64 bits: equal texts give equal hashes on every host */
static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

dg_status bench_mpi_agree(const bench_mpi *m, const char *config) {
    uint64_t mine = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, config), dg_build_commit), DG_BUILD_FLAGS);
    uint64_t *all = malloc((size_t)m->ranks * sizeof *all);
    if (!all) return dg_fail(DG_ERR_OOM, "bench train: out of memory for %d ranks", m->ranks);
    int err = MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    dg_status st = err != MPI_SUCCESS ? mpi_fail(err, "bench train: comparing the ranks' builds") : DG_OK;
    for (int r = 1; r < m->ranks && st == DG_OK; r++)
        if (all[r] != all[0])
            st = dg_fail(DG_ERR_INVALID, "rank %d runs another build or configuration than rank 0 (hash %016llx, "
                         "rank 0 %016llx; this rank's: %s, commit %s): every rank needs the same bench build and "
                         "the same options", r, (unsigned long long)all[r], (unsigned long long)all[0], config,
                         dg_build_commit);
    free(all);
    return st;
}

/* dg_cpu_sum_fn over the communicator *arg (NULL: MPI_COMM_WORLD), in
 * pieces of at most INT_MAX floats (MPI's counts are ints) */
static dg_status mpi_sum(float *buf, size_t count, void *arg) {
    MPI_Comm comm = arg ? *(MPI_Comm *)arg : MPI_COMM_WORLD;
    for (size_t at = 0; at < count;) {
        int piece = count - at > INT_MAX ? INT_MAX : (int)(count - at);
        int err = MPI_Allreduce(MPI_IN_PLACE, buf + at, piece, MPI_FLOAT, MPI_SUM, comm);
        if (err != MPI_SUCCESS) return mpi_fail(err, "cpu all_reduce over MPI");
        at += (size_t)piece;
    }
    return DG_OK;
}

/* the first n ranks' NCCL communicator: rank 0 draws the id, MPI carries
 * it to every rank, those with a backend (be) join */
static dg_status join_gpu(const bench_mpi *m, dg_backend *be, int n) {
#ifdef DG_HAVE_CUDA
    unsigned char id[DG_GPU_RANKS_ID_BYTES];
    if (m->rank == 0) {
        dg_status st = dg_gpu_ranks_id(id);
        if (st != DG_OK) return st; /* its abort ends the others, waiting in the broadcast */
    }
    int err = MPI_Bcast(id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS) return mpi_fail(err, "bench: broadcasting NCCL's id");
    return be ? dg_gpu_join_ranks(be, id, m->rank, n) : DG_OK;
#else
    (void)m, (void)be, (void)n;
    return dg_fail(DG_ERR_UNSUPPORTED, "bench: GPU ranks: built without CUDA");
#endif
}


/* the communicators of bench_mpi_join_first, one per rank count (made at
 * its first join, MPI_COMM_NULL on the ranks outside it), freed by
 * bench_mpi_end */
enum { MAX_GROUPS = 64 };
typedef struct group { int n; MPI_Comm comm; } group;
static group groups[MAX_GROUPS];
static int n_groups;

/* the first n ranks' communicator: found, or split off (a collective) */
static dg_status group_of(const bench_mpi *m, int n, MPI_Comm **comm) {
    for (int i = 0; i < n_groups; i++)
        if (groups[i].n == n) {
            *comm = &groups[i].comm;
            return DG_OK;
        }
    if (n_groups == MAX_GROUPS) return dg_fail(DG_ERR_INVALID, "bench_mpi_join_first: more than %d groups", MAX_GROUPS);
    MPI_Comm c;
    int err = MPI_Comm_split(MPI_COMM_WORLD, m->rank < n ? 0 : MPI_UNDEFINED, m->rank, &c);
    if (err != MPI_SUCCESS) return mpi_fail(err, "bench: a communicator of the first ranks");
    if (c != MPI_COMM_NULL) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    groups[n_groups] = (group){n, c};
    *comm = &groups[n_groups++].comm;
    return DG_OK;
}

/* dg_cpu_async_sum over the communicator *arg: MPI_Iallreduce, each
 * request its own MPI_Request until the test that finds it done or its wait */
static dg_status isum_start(float *buf, size_t count, void *arg, void **req) {
    if (count > INT_MAX)
        return dg_fail(DG_ERR_INVALID, "cpu all_reduce over MPI: a bucket of %zu floats (MPI's counts: at most %d)",
                       count, INT_MAX);
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return dg_fail(DG_ERR_OOM, "cpu all_reduce over MPI: out of memory");
    int err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, *(MPI_Comm *)arg, r);
    if (err != MPI_SUCCESS) {
        free(r);
        return mpi_fail(err, "cpu all_reduce over MPI (MPI_Iallreduce)");
    }
    *req = r;
    return DG_OK;
}

static dg_status isum_test(void *req, void *arg, bool *done) {
    (void)arg;
    int flag = 0, err = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return mpi_fail(err, "cpu all_reduce over MPI (MPI_Test)");
    if (flag) free(req);
    *done = flag != 0;
    return DG_OK;
}

static dg_status isum_wait(void *req, void *arg) {
    (void)arg;
    int err = MPI_Wait(req, MPI_STATUS_IGNORE);
    free(req);
    return err == MPI_SUCCESS ? DG_OK : mpi_fail(err, "cpu all_reduce over MPI (MPI_Wait)");
}

dg_status bench_mpi_join_first(const bench_mpi *m, dg_backend *be, int n, bool overlap) {
    if (n < 2 || n > m->ranks || (m->rank < n) != (be != NULL))
        return dg_fail(DG_ERR_INVALID, "bench_mpi_join_first: %d ranks of %d, rank %d %s a backend", n, m->ranks,
                       m->rank, be ? "with" : "without");
    MPI_Comm *comm = NULL;
    dg_status st = group_of(m, n, &comm);
    if (st != DG_OK || !be) return st;
    if (!overlap) return dg_cpu_set_all_reduce(be, mpi_sum, comm, n);
    const dg_cpu_async_sum isum = {isum_start, isum_test, isum_wait, comm};
    return dg_cpu_set_all_reduce_overlap(be, &isum, n, 0);
}

dg_status bench_mpi_join_first_gpu(const bench_mpi *m, dg_backend *be, int n) {
    if (n < 2 || n > m->ranks || (m->rank < n) != (be != NULL))
        return dg_fail(DG_ERR_INVALID, "bench_mpi_join_first_gpu: %d ranks of %d, rank %d %s a backend", n, m->ranks,
                       m->rank, be ? "with" : "without");
    return join_gpu(m, be, n);
}

dg_status bench_mpi_join(const bench_mpi *m, dg_backend *be, bool overlap) {
    if (!strcmp(dg_backend_name(be), "gpu")) return m->ranks > 1 ? join_gpu(m, be, m->ranks) : DG_OK;
    /* overlapped on a communicator of its own (every rank is among the
     * first m->ranks): its requests never interleave with the bench's
     * collectives on MPI_COMM_WORLD */
    if (overlap && m->ranks > 1) return bench_mpi_join_first(m, be, m->ranks, true);
    return dg_cpu_set_all_reduce(be, mpi_sum, NULL, m->ranks);
}

dg_status bench_mpi_slowest(const bench_mpi *m, bool active, double *v, int n_v, double *least, int *slowest) {
    struct { double v; int rank; } in = {active ? v[0] : -INFINITY, m->rank}, out;
    double mine = active ? v[0] : INFINITY;
    int err = MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&mine, least, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    if (err == MPI_SUCCESS) err = MPI_Bcast(v, n_v, MPI_DOUBLE, out.rank, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS) return mpi_fail(err, "bench: gathering the ranks' times");
    *slowest = out.rank;
    return DG_OK;
}

dg_status bench_mpi_same(const bench_mpi *m, bool active, uint64_t x, bool *same) {
    (void)m;
    uint64_t lo = active ? x : UINT64_MAX, hi = active ? x : 0, least, most;
    int err = MPI_Allreduce(&lo, &least, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&hi, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS) return mpi_fail(err, "bench: comparing the ranks' parameters");
    *same = least == most;
    return DG_OK;
}

dg_status bench_mpi_share(const bench_mpi *m, double *v, int n) {
    (void)m;
    int err = MPI_Bcast(v, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return err == MPI_SUCCESS ? DG_OK : mpi_fail(err, "bench: rank 0's result to the others");
}

dg_status bench_mpi_spread(const bench_mpi *m, double x, double *min, double *max, int *slowest) {
    struct { double v; int rank; } in = {x, m->rank}, out;
    int err = MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&x, min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS) return mpi_fail(err, "bench train: gathering the ranks' times");
    *max = out.v;
    *slowest = out.rank;
    return DG_OK;
}

dg_status bench_mpi_hosts(const bench_mpi *m, const char *device, char *buf, size_t n) {
    char mine[MPI_MAX_PROCESSOR_NAME + 32] = {0}, host[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    snprintf(mine, sizeof mine, "%s %s", host, device);
    char *all = malloc((size_t)m->ranks * sizeof mine);
    if (!all) return dg_fail(DG_ERR_OOM, "bench train: out of memory for %d ranks", m->ranks);
    int err = MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS) {
        free(all);
        return mpi_fail(err, "bench train: gathering the ranks' hosts");
    }
    size_t at = 0;
    buf[0] = '\0';
    for (int r = 0; r < m->ranks && at < n; r++) {
        int w = snprintf(buf + at, n - at, "%srank %d %s", r ? ", " : "", r, all + (size_t)r * sizeof mine);
        at += w > 0 ? (size_t)w : 0;
    }
    free(all);
    return DG_OK;
}

int bench_mpi_end(const bench_mpi *m, int rc) {
    if (!m->on) return rc;
    if (rc == 0) {
        for (int i = 0; i < n_groups; i++)
            if (groups[i].comm != MPI_COMM_NULL) MPI_Comm_free(&groups[i].comm);
        n_groups = 0;
        MPI_Finalize();
        return 0;
    }
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, rc);
    return rc; /* MPI_Abort does not return */
}

#endif
