/* onednn_conv_timing.c: the CPU convolutions of docs/PERF.md's section on
 * oneDNN's convolutions: four ResNet-18 CIFAR layers, each direction, by
 * the own convolution (the backend's default strategy, as a plan's step)
 * and by oneDNN's primitives in float32 and bf16, each on NCHW/OIHW as they
 * are (plain) and on oneDNN's blocked formats with the reorders into and
 * out of the scratch counted (blocked). As onednn_gemm_timing.c: on a
 * shared machine each round calls the implementations in turn `reps` times
 * (after a warm-up call each), keeps each one's best, and prints its
 * GFLOP/s (2 n o oh ow c/g kh kw for every direction).
 *   onednn_conv_timing [THREADS [ROUNDS [REPS [BATCH]]]]
 * (defaults: 2 threads, 3 rounds, 3 reps, batch 32) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/dtype_convert.h"
#include "core/autodiff.h"
#include "core/layout.h"
#include "core/plan.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_onednn_conv.h"

typedef struct layer { const char *name; int c, hw, o, stride; } layer;

/* 3x3, padding 1: stage 1, stage 2, stage 3's first (stride 2), stage 4 */
static const layer layers[] = {
    {"64ch-32x32", 64, 32, 64, 1},
    {"128ch-16x16", 128, 16, 128, 1},
    {"128to256ch-16x16-s2", 128, 16, 256, 2},
    {"512ch-4x4", 512, 4, 512, 1},
};

typedef struct impl { const char *name; bool own; dg_dtype dtype; bool blocked; } impl;

static const impl impls[] = {
    {"own-f32", true, DG_F32, false},
    {"onednn-f32-plain", false, DG_F32, false},
    {"onednn-f32-blocked", false, DG_F32, true},
    {"onednn-bf16-plain", false, DG_BF16, false},
    {"onednn-bf16-blocked", false, DG_BF16, true},
};
enum { N_IMPLS = sizeof impls / sizeof impls[0], N_LAYERS = sizeof layers / sizeof layers[0] };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* what one direction needs: the own step, and oneDNN's key, scratch and
 * operands in both dtypes */
typedef struct run {
    const dg_step *step;
    dg_onednn_conv key;
    void *in[2][2], *out[2];   /* [f32, bf16] */
    void *scratch[N_IMPLS];
} run;

static double time_one(dg_backend *be, dg_onednn_convs *o, run *r, int i) {
    const impl *im = &impls[i];
    int t = im->dtype == DG_BF16;
    dg_onednn_conv k = r->key;
    k.dtype = im->dtype;
    k.blocked = im->blocked;
    double t0 = now();
    dg_status st = im->own ? dg_backend_compute(be, r->step)
                           : dg__onednn_conv_run(o, &k, r->in[t][0], r->in[t][1], r->out[t], r->scratch[i]);
    double dt = now() - t0;
    if (st == DG_OK) return dt;
    fprintf(stderr, "%s: %s\n", im->name, dg_last_error());
    return -1;
}

static void *filled(int64_t n, bool bf16, uint64_t seed) {
    void *p = aligned_alloc(64, ((size_t)n * (bf16 ? 2 : 4) + 63) & ~(size_t)63);
    if (!p) return NULL;
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        float v = (float)((s >> 40) * 0x1p-24 * 2 - 1);
        if (bf16) ((uint16_t *)p)[i] = dg__f32_to_bf16(v);
        else ((float *)p)[i] = v;
    }
    return p;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 3,
        reps = argc > 3 ? atoi(argv[3]) : 3, batch = argc > 4 ? atoi(argv[4]) : 32;
    if (threads < 1 || rounds < 1 || reps < 1 || batch < 1) {
        fprintf(stderr, "usage: onednn_conv_timing [THREADS [ROUNDS [REPS [BATCH]]]]: positive numbers\n");
        return 2;
    }
    dg_backend *be;
    dg_onednn_convs *o;
    if (dg_cpu_backend_new(&be, threads) != DG_OK || dg__onednn_convs_new(&o) != DG_OK) {
        fprintf(stderr, "%s\n", dg_last_error());
        return 1;
    }
    char info[160];
    printf("# %s; OpenBLAS core %s; %d threads, batch %d; GFLOP/s, best of %d calls a round\n",
           dg_cpu_onednn_info(info, sizeof info), dg_cpu_blas_core(), threads, batch, reps);
    printf("layer direction round");
    for (int i = 0; i < N_IMPLS; i++) printf(" %s", impls[i].name);
    printf("\n");
    int rc = 0;
    for (int l = 0; l < N_LAYERS && rc == 0; l++) {
        const layer *ly = &layers[l];
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_param(g, "x", DG_SHAPE(batch, ly->c, ly->hw, ly->hw), (dg_init){DG_INIT_UNIFORM, -1, 1, 1});
        dg_node *w = dg_param(g, "w", DG_SHAPE(ly->o, ly->c, 3, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 2});
        dg_node *y = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.stride = {ly->stride, ly->stride}, .pad = {1, 1}});
        dg_node *dy = dg_input(g, "dy", y->shape), *wrt[2] = {x, w}, *grads[2];
        dg_plan *p = NULL;
        dg_node *outs[3] = {y, NULL, NULL};
        if (dg_grad(g, dg_sum(g, dg_mul(g, y, dy), DG_ALL_AXES, false), wrt, 2, grads) != DG_OK ||
            (outs[1] = grads[0], outs[2] = grads[1], dg_plan_new(&p, g, be, outs, 3, NULL)) != DG_OK) {
            fprintf(stderr, "%s: %s\n", ly->name, dg_last_error());
            return 1;
        }
        float *dyv = filled(dg_node_numel(dy), false, 6);
        if (!dyv || dg_plan_set(p, dy, dyv, (size_t)dg_node_numel(dy) * 4) != DG_OK || dg_plan_run(p) != DG_OK) {
            fprintf(stderr, "%s: %s\n", ly->name, dyv ? dg_last_error() : "out of memory");
            return 1;
        }
        free(dyv);
        int n_steps;
        const dg_step *steps = dg_plan_steps(p, &n_steps);
        for (int d = 0; d < 3 && rc == 0; d++) {
            const dg_node *nd = outs[d];
            run r = {0};
            for (int i = 0; i < n_steps; i++)
                if (steps[i].node == nd) r.step = &steps[i];
            dg_conv_dims cd = dg_conv_dims_of(nd);
            r.key = (dg_onednn_conv){nd->op, DG_F32, false, threads, cd.n, cd.c, cd.h, cd.w, cd.o, cd.oh, cd.ow,
                                     cd.kh, cd.kw, cd.sh, cd.sw, cd.ph, cd.pw, cd.dh, cd.dw, cd.groups};
            for (int t = 0; t < 2; t++) {
                r.in[t][0] = filled(dg_node_numel(nd->in[0]), t, 3);
                r.in[t][1] = filled(dg_node_numel(nd->in[1]), t, 4);
                r.out[t] = filled(dg_node_numel(nd), t, 5);
            }
            omp_set_num_threads(threads);
            for (int i = 1; i < N_IMPLS && rc == 0; i++) {
                dg_onednn_conv k = r.key;
                k.dtype = impls[i].dtype;
                k.blocked = impls[i].blocked;
                dg_onednn_conv_info ci;
                if (dg__onednn_conv_prepare(o, &k, &ci) != DG_OK) {
                    fprintf(stderr, "%s: %s\n", impls[i].name, dg_last_error());
                    rc = 1;
                    break;
                }
                r.scratch[i] = ci.scratch ? aligned_alloc(64, (ci.scratch + 63) & ~(size_t)63) : NULL;
                if (d == 0 && l == 0) printf("# %s: %s\n", impls[i].name, ci.impl);
            }
            double flop = 2.0 * cd.n * cd.o * cd.oh * cd.ow * cd.cg * cd.kh * cd.kw;
            for (int round = 0; round < rounds && rc == 0; round++) {
                double t[N_IMPLS];
                for (int rep = 0; rep <= reps && rc == 0; rep++) /* rep 0: the warm-up calls */
                    for (int i = 0; i < N_IMPLS && rc == 0; i++) {
                        double ti = time_one(be, o, &r, i);
                        if (ti < 0) rc = 1;
                        if (rep == 1 || (rep > 1 && ti < t[i])) t[i] = ti;
                    }
                if (rc) break;
                printf("%s %s %d", ly->name, dg_op_name(nd->op), round);
                for (int i = 0; i < N_IMPLS; i++) printf(" %.1f", flop / t[i] * 1e-9);
                printf("\n");
                fflush(stdout);
            }
            for (int t = 0; t < 2; t++) {
                free(r.in[t][0]); free(r.in[t][1]); free(r.out[t]);
            }
            for (int i = 0; i < N_IMPLS; i++) free(r.scratch[i]);
        }
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg__onednn_convs_free(o);
    dg_backend_free(be);
    return rc;
}
