/* mpi_train.c: the CPU ranks checked under mpirun (tests/test_mpi.sh runs
 * it with -np 2). Not a Criterion suite: its processes are MPI's ranks.
 *
 * 1. The all_reduce node against a host sum, overlapped and blocking:
 *    rank r holds x[i] = (r+1) (i+1); every rank's node gives the mean
 *    over the ranks, computed on the host from the same formula (exact in
 *    float32: small integers and their halves).
 * 2. Parameter agreement on bench train's path: an MLP trained STEPS
 *    steps by SGD, each rank on its slice of every global batch, its
 *    gradients averaged as bench train averages them (bench_mpi_join with
 *    overlap: MPI_Iallreduce per bucket of up to
 *    DG_CPU_BUCKET_BYTES_DEFAULT, overlapping the backward), has
 *    bit-identical parameters on every rank (each rank applies the same
 *    update to the same values), and equals within TOL a single process
 *    trained on the same global batches. TOL: float32 summation order
 *    alone differs (each rank sums the gradient over its slice, MPI adds
 *    the slices, then the mean scales; the single process sums all rows in
 *    one product): a few ulps a step, 1e-5 of the largest parameter after
 *    STEPS steps leaves two orders of magnitude of margin over what
 *    2 ranks give (about 1e-7), and a rank that skipped the all-reduce,
 *    read a bucket before its wait, or trained the other rank's slice, is
 *    off by 1e-2 and more.
 * 3. The same training with the blocking all-reduce (bench_mpi_join
 *    without overlap: MPI_Allreduce in each node) gives every rank the
 *    overlapped run's parameters bit for bit: on 2 ranks each element's
 *    sum has two addends, one rounding in any order, so only a bucket
 *    read before its wait, or unpacked into the wrong tensor, differs.
 * Exit 0 when all hold; 1 with the reason on stderr otherwise. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
#include "core/plan.h"
#include "cpu_backend/cpu_backend.h"
#include "train/train_mpi.h"
#include "train_util.h"

enum { D = 16, C = 4, GLOBAL = 32, STEPS = 8, SEED = 7 };
static const double TOL = 1e-5;

static int fail(const bench_mpi *m, const char *what) {
    fprintf(stderr, "mpi_train: rank %d: %s: %s\n", m->rank, what, dg_last_error());
    return 1;
}

/* check 1: all_reduce of 1000 floats */
static int check_node(const bench_mpi *m, dg_backend *be) {
    enum { N = 1000 };
    dg_graph *g = dg_graph_new();
    dg_node *x = g ? dg_input(g, "x", DG_SHAPE(1, N)) : NULL, *y = x ? dg_all_reduce(g, x) : NULL;
    dg_plan *p = NULL;
    float in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = (float)((m->rank + 1) * (i + 1));
    int bad = !y || dg_plan_new(&p, g, be, &y, 1, NULL) != DG_OK || dg_plan_set(p, x, in, sizeof in) != DG_OK ||
              dg_plan_run(p) != DG_OK || dg_plan_get(p, y, out, sizeof out) != DG_OK;
    if (bad) fail(m, "the all_reduce graph");
    /* the mean over ranks of (r+1)(i+1) is (i+1) (R+1)/2 */
    for (int i = 0; i < N && !bad; i++) {
        float want = (float)((i + 1) * (m->ranks + 1)) / 2;
        if (out[i] != want) {
            fprintf(stderr, "mpi_train: rank %d: all_reduce[%d] = %g, the host's mean over %d ranks %g\n", m->rank, i,
                    out[i], m->ranks, want);
            bad = 1;
        }
    }
    dg_plan_free(p);
    dg_graph_free(g);
    return bad;
}

/* STEPS steps of SGD on rows [s*GLOBAL + first, + batch) of b for step s;
 * the parameters, concatenated, into params (*n floats) */
static int train(const bench_mpi *m, dg_backend *be, const blobs *b, int first, int batch, bool all_reduce,
                 float **params, size_t *n) {
    static const dg_mlp_cfg cfg = {{D, 32, C}, 3};
    dg_graph *g = dg_graph_new();
    dg_model model;
    dg_train_step ts;
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    dg_plan *p = NULL;
    dg_status st = g ? dg_mlp_new(g, &cfg, SEED, &model) : DG_ERR_OOM;
    if (st == DG_OK) st = dg_train_step_build_ex(g, &model, batch, &o, all_reduce, &ts);
    if (st == DG_OK) st = dg_plan_new(&p, g, be, ts.outputs, ts.n_outputs, NULL);
    for (int s = 0; s < STEPS && st == DG_OK; s++) {
        size_t row = (size_t)s * GLOBAL + first;
        st = dg_plan_set(p, ts.x, b->x + row * D, (size_t)batch * D * sizeof(float));
        if (st == DG_OK) st = dg_plan_set(p, ts.y, b->y + row, (size_t)batch * sizeof(int32_t));
        if (st == DG_OK) st = dg_plan_run(p);
    }
    *n = 0;
    for (int i = 0; i < model.n_params && st == DG_OK; i++) *n += (size_t)dg_shape_numel(model.params[i]->shape);
    *params = st == DG_OK ? malloc(*n * sizeof **params) : NULL;
    if (st == DG_OK && !*params) st = DG_ERR_OOM;
    for (size_t i = 0, at = 0; i < (size_t)model.n_params && st == DG_OK; i++) {
        size_t k = (size_t)dg_shape_numel(model.params[i]->shape);
        st = dg_plan_get(p, model.params[i], *params + at, k * sizeof(float));
        at += k;
    }
    dg_plan_free(p);
    dg_graph_free(g);
    return st != DG_OK ? fail(m, "training") : 0;
}

/* check 2, on rank 0: every rank's parameters (all: ranks x n) against rank
 * 0's, bit for bit, then against a single process's */
static int compare(const bench_mpi *m, const float *all, size_t n, const blobs *b) {
    for (int r = 1; r < m->ranks; r++)
        if (memcmp(all, all + (size_t)r * n, n * sizeof *all)) {
            fprintf(stderr, "mpi_train: rank %d's parameters differ from rank 0's after %d steps\n", r, STEPS);
            return 1;
        }
    dg_backend *alone;
    float *ref;
    size_t k;
    if (dg_cpu_backend_new(&alone, 1) != DG_OK) return fail(m, "a lone backend");
    int bad = train(m, alone, b, 0, GLOBAL, false, &ref, &k);
    dg_backend_free(alone);
    if (bad) return 1;
    double worst = 0, largest = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)all[i] - ref[i]));
        largest = fmax(largest, fabs((double)ref[i]));
    }
    free(ref);
    printf("mpi_train: %d ranks, %d steps: parameters identical across ranks; against one process max |diff| %.3g "
           "(largest parameter %.3g, tolerance %.3g of it)\n", m->ranks, STEPS, worst, largest, TOL);
    if (worst > TOL * largest) {
        fprintf(stderr, "mpi_train: parameters differ from one process's by %.3g, beyond %.3g\n", worst,
                TOL * largest);
        return 1;
    }
    return 0;
}

/* check 3: the blocking run's parameters against the overlapped run's (params, n floats) */
static int check_blocking(const bench_mpi *m, const blobs *b, const float *params, size_t n) {
    dg_backend *be = NULL;
    float *blocking = NULL;
    size_t k = 0;
    int per = GLOBAL / m->ranks;
    if (dg_cpu_backend_new(&be, 1) != DG_OK || bench_mpi_join(m, be, false) != DG_OK)
        return fail(m, "a blocking backend");
    int bad = check_node(m, be) || train(m, be, b, m->rank * per, per, true, &blocking, &k);
    dg_backend_free(be);
    if (!bad && (k != n || memcmp(blocking, params, n * sizeof *blocking))) {
        size_t i = 0;
        while (i < n && blocking[i] == params[i]) i++;
        fprintf(stderr, "mpi_train: rank %d: the overlapped all-reduce's parameters differ from the blocking one's "
                "(first at %zu of %zu: %g, blocking %g)\n", m->rank, i, n, i < n ? params[i] : 0.0,
                i < n ? blocking[i] : 0.0);
        bad = 1;
    }
    if (!bad && m->rank == 0)
        printf("mpi_train: %d ranks, %d steps: the overlapped all-reduce's parameters equal the blocking one's\n",
               m->ranks, STEPS);
    free(blocking);
    return bad;
}

int main(void) {
    bench_mpi m;
    if (bench_mpi_start(&m)) return 1;
    if (!m.on) {
        fprintf(stderr, "mpi_train: run it under mpirun\n");
        return 1;
    }
    dg_backend *be = NULL;
    blobs b = {0};
    float *params = NULL, *all = NULL;
    size_t n = 0;
    int bad = GLOBAL % m.ranks ? fprintf(stderr, "mpi_train: %d ranks do not split %d\n", m.ranks, GLOBAL), 1 : 0;
    if (!bad && (dg_cpu_backend_new(&be, 1) != DG_OK || bench_mpi_join(&m, be, true) != DG_OK))
        bad = fail(&m, "backend");
    if (!bad && blobs_new(&b, GLOBAL * STEPS, D, C, SEED)) bad = fail(&m, "data");
    if (!bad) bad = check_node(&m, be);
    int per = GLOBAL / m.ranks;
    if (!bad) bad = train(&m, be, &b, m.rank * per, per, true, &params, &n);
    if (!bad && m.rank == 0 && !(all = malloc((size_t)m.ranks * n * sizeof *all))) bad = fail(&m, "gather");
    /* a rank that failed aborts (bench_mpi_end) before the next collective, never leaving the others waiting */
    if (!bad) MPI_Gather(params, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (!bad && m.rank == 0) bad = compare(&m, all, n, &b);
    if (!bad) bad = check_blocking(&m, &b, params, n);
    free(all);
    free(params);
    blobs_free(&b);
    dg_backend_free(be);
    return bench_mpi_end(&m, bad);
}
