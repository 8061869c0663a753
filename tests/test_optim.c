/* test_optim.c: SGD, momentum and Adam (bias correction included), step by
 * step against the float64 reference (core/check/ref.c, which writes the
 * parameter and state in place as the backends do), on the CPU and, where
 * a device answers, the GPU (which replays its captured CUDA graph from
 * the second step on, so Adam's device-side step counter is exercised).
 *
 * The graph, as training builds it (dg_grad, then dg_optim_apply on two
 * parameters at once):
 *   loss = 0.5 sum((W - X)^2) + sum(b * Y),  W [3,5], b [7]
 *   dW = W - X (depends on the parameter), db = Y (exact in float32)
 * X is drawn in [2, 4] each step, so dW lies in about [-5, -1] and never
 * cancels to near 0 (where Adam's m / sqrt(v) would amplify a rounding);
 * Y is drawn with |Y| in [0.2, 2] and a random sign each step, so db
 * changes sign and m, v and the velocity see changing gradients.
 *
 * The scaled cases multiply the loss by S [1], an input that changes every
 * step (2^10, then 3000: not a power of two), and hand S to the updates as
 * their gradient scale (dg_optim_apply_ex), as an fp16 step hands its loss
 * scale: each update must read dw / S before weight decay, from the
 * device on every replay. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "core/attrs.h"
#include "core/check/ref.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

#define U_F32 (1.0 / 16777216.0) /* float32 unit roundoff, 2^-24 */
#define STEPS 5
#define MAX_TRACKED 8

typedef struct optim_case {
    dg_optim o;
    bool     gpu;
    bool     scaled; /* the loss times S, the updates' gradient scale */
} optim_case;

typedef struct optim_graph {
    dg_graph *g;
    dg_node  *W, *b, *X, *Y, *S, *upd[2]; /* S: NULL unless scaled */
    dg_node  *tracked[MAX_TRACKED]; /* W, b, then each state leaf once */
    int       n_tracked;
} optim_graph;

static void track(optim_graph *t, dg_node *n) {
    for (int i = 0; i < t->n_tracked; i++)
        if (t->tracked[i] == n) return;
    cr_assert_lt(t->n_tracked, MAX_TRACKED);
    t->tracked[t->n_tracked++] = n;
}

static void optim_graph_new(optim_graph *t, const dg_optim *o, bool scaled, uint64_t seed) {
    *t = (optim_graph){0};
    dg_graph *g = t->g = dg_graph_new();
    t->W = dg_param(g, "W", DG_SHAPE(3, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, seed});
    t->b = dg_param(g, "b", DG_SHAPE(7), (dg_init){DG_INIT_NORMAL, 0, 0.5f, seed + 1});
    t->X = dg_input(g, "X", DG_SHAPE(3, 5));
    t->Y = dg_input(g, "Y", DG_SHAPE(7));
    dg_node *d = dg_sub(g, t->W, t->X);
    dg_node *loss = dg_add(g, dg_mul_scalar(g, dg_sum(g, dg_mul(g, d, d), DG_ALL_AXES, false), 0.5f),
                           dg_sum(g, dg_mul(g, t->b, t->Y), DG_ALL_AXES, false));
    if (scaled) {
        t->S = dg_input(g, "S", DG_SHAPE(1));
        loss = dg_mul(g, loss, t->S);
    }
    dg_node *params[2] = {t->W, t->b}, *grads[2];
    ASSERT_OK(loss ? DG_OK : dg_graph_status(g));
    ASSERT_OK(dg_grad(g, loss, params, 2, grads));
    ASSERT_OK(dg_optim_apply_ex(g, o, params, grads, 2, NULL, t->S, t->upd));
    track(t, t->W);
    track(t, t->b);
    /* velocity; m, v; the step counter behind adam_step (the row's inputs:
     * not the flag and scale after them) */
    for (int i = 0; i < 2; i++)
        for (int j = 2; j < dg_op_info_get(t->upd[i]->op)->n_in; j++) {
            dg_node *s = t->upd[i]->in[j];
            track(t, s->op == DG_OP_ADAM_STEP ? s->in[0] : s);
        }
}

/* float64 values of every leaf: persistent ones from their init spec (the
 * values the plan uploads), inputs later */
static double **ref_leaves(const optim_graph *t) {
    int n = dg_graph_size(t->g);
    double **v = calloc((size_t)n, sizeof *v);
    for (int id = 0; id < n; id++) {
        const dg_node *nd = dg_graph_node(t->g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(nd);
        float *f = malloc((size_t)cnt * sizeof *f);
        v[id] = malloc((size_t)cnt * sizeof(double));
        if (nd->leaf != DG_LEAF_INPUT) ASSERT_OK(dg_init_fill(nd->init, f, cnt));
        else for (int64_t j = 0; j < cnt; j++) f[j] = 0;
        for (int64_t j = 0; j < cnt; j++) v[id][j] = f[j];
        free(f);
    }
    return v;
}

static void set_input(dg_plan *p, double **v, const dg_node *n, const float *x) {
    ASSERT_OK(dg_plan_set(p, n, x, dg_node_bytes(n)));
    for (int64_t j = 0; j < dg_node_numel(n); j++) v[n->id][j] = x[j];
}

/* Each step, every parameter element may drift from float64 by
 *   4 u |w|      the float32 rounding of w -= step (and of the gradient
 *                W - X, which moves the step by u |g| times lr);
 *   1e-3 |step|  the step's own relative error: a few roundings (u each)
 *                for SGD and momentum; Adam's bias corrections 1 - beta^t
 *                lose powf's error (at most 4 ulp, CUDA's bound; 1 in
 *                glibc) over 1 - beta2^t >= 1e-3 (beta2 = 0.999, t >= 2):
 *                at most 2.4e-4 relative;
 *   1e-6 lr      m near 0 after a sign change of db: its absolute rounding.
 * The errors add up over the steps. A wrong rule moves a step by 10% or
 * more (a dropped bias correction 3.2x at t = 1, a moving-average momentum
 * 0.1 g instead of g, a flipped sign, lr squared, a counter stuck at 0 or
 * 1), far above this. States (velocity, m, v) are held to 1e-5 of their
 * largest element (a few roundings per step, and the gradient's error,
 * under 1e-6 of |g| >= 1 here); the step counter is exact. */
static void check_steps(const optim_case *oc) {
    enum { MAX_NUMEL = 15 }; /* W's 3 x 5; b and the states are no larger */
    uint64_t seed = test_seed();
    dg_backend *be = test_backend_open(oc->gpu);
    optim_graph t;
    optim_graph_new(&t, &oc->o, oc->scaled, seed);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.upd, 2, NULL));
    double **v = ref_leaves(&t);
    int n_nodes = dg_graph_size(t.g);
    double budget[2][MAX_NUMEL] = {{0}}, before[2][MAX_NUMEL];
    float X[MAX_NUMEL], Y[7], got[MAX_NUMEL];
    const double lr = oc->o.lr;
    dg_rng rng = dg_rng_new(seed + 2);
    const char *name = dg_optim_name(oc->o.kind), *dev = oc->gpu ? "gpu" : "cpu";
    double worst = 0; /* the largest error / tolerance */
    for (int step = 1; step <= STEPS; step++) {
        for (int j = 0; j < 15; j++) X[j] = (float)(2 + 2 * dg_rng_uniform(&rng));
        for (int j = 0; j < 7; j++)
            Y[j] = (float)((0.2 + 1.8 * dg_rng_uniform(&rng)) * (dg_rng_u64(&rng) & 1 ? 1 : -1));
        set_input(p, v, t.X, X);
        set_input(p, v, t.Y, Y);
        if (t.S) set_input(p, v, t.S, &(float){step % 2 ? 1024.0f : 3000.0f});
        for (int k = 0; k < 2; k++)
            for (int64_t j = 0; j < dg_node_numel(t.tracked[k]); j++) before[k][j] = v[t.tracked[k]->id][j];
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(ref_eval(t.g, n_nodes, v)); /* writes W, b and the states in place */
        for (int k = 0; k < t.n_tracked; k++) {
            const dg_node *nd = t.tracked[k];
            int64_t cnt = dg_node_numel(nd);
            const double *want = v[nd->id];
            ASSERT_OK(dg_plan_get(p, nd, got, dg_node_bytes(nd)));
            double scale = 0;
            for (int64_t j = 0; j < cnt; j++) scale = fmax(scale, fabs(want[j]));
            for (int64_t j = 0; j < cnt; j++) {
                double err = fabs((double)got[j] - want[j]), tol;
                if (k < 2)
                    tol = budget[k][j] += 4 * U_F32 * fabs(want[j]) + 1e-3 * fabs(want[j] - before[k][j]) + 1e-6 * lr;
                else if (strcmp(nd->name, "adam_t") == 0) tol = 0;
                else tol = 1e-5 * scale;
                if (tol > 0) worst = fmax(worst, err / tol);
                if (!(err <= tol))
                    cr_assert_fail("%s on the %s, step %d [seed %llu]: %s[%lld] = %.9g, float64 %.9g (error %.3g > "
                                   "%.3g)", name, dev, step, (unsigned long long)seed, nd->name, (long long)j,
                                   (double)got[j], want[j], err, tol);
            }
        }
    }
    cr_log_info("%s (lr %g%s) on the %s: worst error %.3g of its tolerance", name, (double)oc->o.lr,
                oc->scaled ? ", scaled" : "", dev, worst);
    ref_free(v, n_nodes);
    free(v);
    dg_plan_free(p);
    dg_graph_free(t.g);
    dg_backend_free(be);
}

/* the attribute the kernels and the reference read comes from dg_optim */
Test(optim, weight_decay_reaches_every_update_and_a_bad_one_is_refused) {
    for (int kind = DG_OPTIM_SGD; kind <= DG_OPTIM_ADAM; kind++) {
        dg_optim o = dg_optim_default((dg_optim_kind)kind, 0.1f);
        o.weight_decay = 0.25f;
        optim_graph t;
        optim_graph_new(&t, &o, false, 1);
        for (int i = 0; i < 2; i++)
            cr_assert_eq(dg_attr_optim_of(t.upd[i]).weight_decay, 0.25f, "%s", dg_optim_name(o.kind));
        dg_graph_free(t.g);
    }
    dg_graph *g = dg_graph_new();
    dg_node *w = dg_param(g, "w", DG_SHAPE(2), (dg_init){DG_INIT_FILL, 1, 0, 0}), *upd;
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    o.weight_decay = -1e-4f;
    cr_assert_eq(dg_optim_apply(g, &o, &w, &w, 1, &upd), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "weight decay"), "%s", dg_last_error());
    dg_graph_free(g);
}

static struct criterion_test_params optim_cases(bool gpu) {
    static optim_case cases[2][11];
    optim_case *c = cases[gpu];
    c[0] = (optim_case){dg_optim_default(DG_OPTIM_SGD, 0.1f), gpu, false};
    c[1] = (optim_case){dg_optim_default(DG_OPTIM_MOMENTUM, 0.05f), gpu, false};
    c[2] = (optim_case){dg_optim_default(DG_OPTIM_ADAM, 0.01f), gpu, false};
    /* eps large enough to matter (|g| ~ 1): where the kernels fold it,
     * eps sqrt(1 - beta2^t), must equal eps beside sqrt(v_hat) */
    c[3] = (optim_case){{.kind = DG_OPTIM_ADAM, .lr = 0.02f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 0.1f}, gpu, false};
    /* weight decay large enough to move each step by ~10% (|w| ~ 1, |g| ~ 1..5) */
    for (int i = 0; i < 3; i++) {
        c[4 + i] = c[i];
        c[4 + i].o.weight_decay = 0.3f;
    }
    /* each rule with its gradient scaled: with weight decay (a scale that
     * also divided w's term would shrink that term 1000-fold, moving the
     * step by 6-30%), and Adam with the large eps (which, unlike
     * m / sqrt(v), is not scale-free) */
    for (int i = 0; i < 3; i++) {
        c[7 + i] = c[4 + i];
        c[7 + i].scaled = true;
    }
    c[10] = c[3];
    c[10].scaled = true;
    return cr_make_param_array(optim_case, c, 11);
}

ParameterizedTestParameters(optim, cpu_steps_match_float64) { return optim_cases(false); }
ParameterizedTest(optim_case *oc, optim, cpu_steps_match_float64) { check_steps(oc); }

ParameterizedTestParameters(optim, gpu_steps_match_float64) { return optim_cases(true); }
ParameterizedTest(optim_case *oc, optim, gpu_steps_match_float64) { check_steps(oc); }
