/* test_cpu_math.c: the CPU backend's vector math (cpu_backend/cpu_vmath.h:
 * SLEEF's exp and tanh and the kernels built on them) against double-
 * precision libm, on every instruction-set tier this CPU runs, and its
 * tiled permute against a plain index walk.
 *
 * The bounds checked are the ones cpu_vmath.h states:
 *   exp              <= 1 ulp
 *   tanh             <= 1.0001 ulp
 *   sigmoid          <= 3 ulp
 *   gelu             |y - g| <= 2^-24 |g| (6 + 14 |u| sigmoid(-2u)) + (1 + |x|) 2^-149
 *   gelu'            |d - g'| <= 2^-24 (16 + 14 |u|) (|s| + |t|) + (1 + |x|) 2^-149,
 *                    s, t the two terms of g' = s + t (see gelu_grad_ref)
 *   exp_sum          relative 16 2^-24 (1 ulp per term, 7 pairwise roundings)
 * ulp: the spacing of floats at the exact value (2^-149 below FLT_MIN). The
 * inputs: every 1021st float bit pattern (4.2 million, both signs, every
 * binade, the subnormals, inf and NaN), every float in a window around each
 * edge (the overflow and underflow thresholds, 0, +-1, where gelu's u and
 * its tail change regime), and the special values one by one. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/plan.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_vmath.h"
#include "test_util.h"

#define U24 0x1p-24 /* the unit roundoff of float */

/* ---- the inputs --------------------------------------------------------- */

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* n consecutive floats from lo away from zero (lo = -0: the negative
 * subnormals) */
static size_t add_window(float *xs, size_t k, float lo, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) xs[k++] = from_bits(bits_of(lo) + i);
    return k;
}

#define SWEEP_STRIDE 1021u
#define WINDOW       4096u

static const float edges[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
    0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, -0x1.fffffcp-127f, 1.0f, -1.0f, 0.5f, -0.5f,
    88.72283935546875f, 88.7228469848632812f, -87.33654785156250f, -103.972084045410156f, -104.0f,
    9.0f, -9.0f, 10.0f, -10.0f, 20.0f, -20.0f, 1e10f, -1e10f, 2e13f, -2e13f, 1.9e19f, -1.9e19f,
};

/* every test input, in one malloc'd array (n of them) */
static float *test_inputs(size_t *n) {
    static const float windows[] = {88.0f, 88.72f, -87.3f, -88.0f, -103.9f, -0.0f, 0.0f, 1.0f, -1.0f,
                                    0.5f, -0.5f, 5.0f, -5.0f, 9.0f, -9.5f, 30.0f, -30.0f, 1e-30f, -1e-30f};
    size_t cap = (size_t)(UINT32_MAX / SWEEP_STRIDE) + 2 + sizeof windows / sizeof *windows * WINDOW +
                 sizeof edges / sizeof *edges;
    float *xs = malloc(cap * sizeof *xs);
    cr_assert_not_null(xs);
    size_t k = 0;
    for (uint64_t b = 0; b <= UINT32_MAX; b += SWEEP_STRIDE) xs[k++] = from_bits((uint32_t)b);
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) k = add_window(xs, k, windows[w], WINDOW);
    memcpy(xs + k, edges, sizeof edges);
    k += sizeof edges / sizeof *edges;
    cr_assert_leq(k, cap);
    *n = k;
    return xs;
}

/* ---- measuring error ---------------------------------------------------- */

/* the float spacing at r (exact, in double) */
static double ulp_at(double r) {
    double a = fabs(r);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

/* |y - r| in ulps of r; an infinite y counts as +-2^128 (the power of two
 * past FLT_MAX), and an r beyond that range wants y = inf of its sign */
static double ulp_err(float y, double r) {
    if (isnan(r) || isnan(y)) return isnan(r) && isnan(y) ? 0.0 : INFINITY;
    if (fabs(r) >= 0x1p128) return isinf(y) && signbit(y) == signbit(r) ? 0.0 : INFINITY;
    double yd = isinf(y) ? copysign(0x1p128, y) : y;
    return fabs(yd - r) / ulp_at(r);
}

/* ---- float64 references --------------------------------------------------- */

static double sigmoid_ref(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
static double gelu_u(double x) { return GELU_C * (x + 0.044715 * x * x * x); }
/* x sigmoid(2u) = 0.5 x (1 + tanh u), without the cancellation */
static double gelu_ref(double x) { return x * sigmoid_ref(2.0 * gelu_u(x)); }
/* gelu'(x) = s + t: s = sigmoid(2u), t = 2 x u' sigmoid(2u) sigmoid(-2u) */
static void gelu_grad_ref(double x, double *s, double *t) {
    double u = gelu_u(x), du = GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
    double sp = sigmoid_ref(2.0 * u), sm = sigmoid_ref(-2.0 * u);
    *s = sp;
    *t = sp * sm == 0.0 ? 0.0 : 2.0 * x * du * sp * sm; /* 0, not 0 * inf, in the tails */
}

/* ---- the tiers ------------------------------------------------------------ */

static const dg_vmath *const tiers[] = {&dg__vmath_avx512, &dg__vmath_avx2, &dg__vmath_sse2};
#define N_TIERS ((int)(sizeof tiers / sizeof *tiers))

static struct criterion_test_params tier_params(void) {
    static int idx[N_TIERS];
    for (int i = 0; i < N_TIERS; i++) idx[i] = i;
    return cr_make_param_array(int, idx, N_TIERS);
}

static const dg_vmath *tier_or_skip(int i) {
    const dg_vmath *m = tiers[i];
    if (!dg__vmath_runs(m)) cr_skip_test("this CPU does not run the %s tier", m->name);
    return m;
}

Test(cpu_math, the_chosen_tier_runs_here_and_sse2_always_does) {
    cr_assert(dg__vmath_runs(dg__vmath()));
    cr_assert(dg__vmath_runs(&dg__vmath_sse2));
}

/* the worst error seen, and where */
typedef struct worst {
    double err;
    float  x, y;
    double ref;
} worst;

static void note(worst *w, double err, float x, float y, double ref) {
    if (!(err <= w->err)) *w = (worst){err, x, y, ref};
}

#define REPORT(w, bound, what, m) \
    cr_assert((w).err <= (bound), "%s [%s]: error %.3g > %.3g at x = %a (%.9g): got %.9g, want %.17g", what, \
              (m)->name, (w).err, (double)(bound), (double)(w).x, (double)(w).x, (double)(w).y, (w).ref)

/* f over every test input against ref, in ulps: fails past bound */
static void check_ulp(const dg_vmath *m, void (*f)(float *, const float *, int64_t), double (*ref)(double),
                      double bound, const char *what) {
    size_t n;
    float *xs = test_inputs(&n), *ys = malloc(n * sizeof *ys);
    cr_assert_not_null(ys);
    f(ys, xs, (int64_t)n);
    worst w = {0};
    for (size_t i = 0; i < n; i++) note(&w, ulp_err(ys[i], ref(xs[i])), xs[i], ys[i], ref(xs[i]));
    cr_log_info("%s [%s]: worst %.3f ulp over %zu inputs", what, m->name, w.err, n);
    REPORT(w, bound, what, m);
    free(xs);
    free(ys);
}

ParameterizedTestParameters(cpu_math, exp_within_1_ulp) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, exp_within_1_ulp) {
    const dg_vmath *m = tier_or_skip(*t);
    check_ulp(m, m->exp, exp, 1.0, "exp");
}

/* SLEEF states 1.0001 ulp: tanh of a tiny x comes out as the float after x */
ParameterizedTestParameters(cpu_math, tanh_within_1_ulp) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, tanh_within_1_ulp) {
    const dg_vmath *m = tier_or_skip(*t);
    check_ulp(m, m->tanh, tanh, 1.0001, "tanh");
}

ParameterizedTestParameters(cpu_math, sigmoid_within_3_ulp) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, sigmoid_within_3_ulp) {
    const dg_vmath *m = tier_or_skip(*t);
    check_ulp(m, m->sigmoid, sigmoid_ref, 3.0, "sigmoid");
}

/* gelu's error in units of its bound (<= 1 passes); NaN and inf must match */
static double gelu_err(float y, float x) {
    double g = gelu_ref(x);
    if (isnan(g) || isinf(g)) return ulp_err(y, g);
    double u = gelu_u(x);
    double bound = U24 * fabs(g) * (6.0 + 14.0 * fabs(u) * sigmoid_ref(-2.0 * u)) + (1.0 + fabs(x)) * 0x1p-149;
    return fabs((double)y - g) / bound;
}

ParameterizedTestParameters(cpu_math, gelu_within_its_bound) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, gelu_within_its_bound) {
    const dg_vmath *m = tier_or_skip(*t);
    size_t n;
    float *xs = test_inputs(&n), *ys = malloc(n * sizeof *ys);
    cr_assert_not_null(ys);
    m->gelu(ys, xs, (int64_t)n);
    worst w = {0};
    for (size_t i = 0; i < n; i++) note(&w, gelu_err(ys[i], xs[i]), xs[i], ys[i], gelu_ref(xs[i]));
    cr_log_info("gelu [%s]: worst %.3f of the bound over %zu inputs", m->name, w.err, n);
    REPORT(w, 1.0, "gelu (error / bound)", m);
    free(xs);
    free(ys);
}

static double gelu_grad_err(float d, float x) {
    double s, t;
    gelu_grad_ref(x, &s, &t);
    double g = s + t;
    if (isnan(g)) return isnan(d) ? 0.0 : INFINITY;
    double bound = U24 * (16.0 + 14.0 * fabs(gelu_u(x))) * (fabs(s) + fabs(t)) + (1.0 + fabs(x)) * 0x1p-149;
    return fabs((double)d - g) / bound;
}

ParameterizedTestParameters(cpu_math, gelu_backward_within_its_bound) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, gelu_backward_within_its_bound) {
    const dg_vmath *m = tier_or_skip(*t);
    size_t n;
    float *xs = test_inputs(&n), *ones = malloc(n * sizeof *ones), *ds = malloc(n * sizeof *ds);
    cr_assert(ones && ds);
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
    m->gelu_backward(ds, ones, xs, (int64_t)n);
    worst w = {0};
    for (size_t i = 0; i < n; i++) {
        double s, tt;
        gelu_grad_ref(xs[i], &s, &tt);
        note(&w, gelu_grad_err(ds[i], xs[i]), xs[i], ds[i], s + tt);
    }
    cr_log_info("gelu' [%s]: worst %.3f of the bound over %zu inputs", m->name, w.err, n);
    REPORT(w, 1.0, "gelu' (error / bound)", m);
    free(xs);
    free(ones);
    free(ds);
}

/* the values whose result is exact, and NaN in giving NaN out everywhere */
ParameterizedTestParameters(cpu_math, special_values) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, special_values) {
    const dg_vmath *m = tier_or_skip(*t);
    const float x[] = {INFINITY, -INFINITY, 0.0f, -0.0f, NAN, -NAN, from_bits(0x7fa00000u) /* signalling */};
    enum { N = sizeof x / sizeof *x };
    float e[N], th[N], sg[N], ge[N], gd[N], dy[N];
    for (int i = 0; i < N; i++) dy[i] = 1.0f;
    m->exp(e, x, N);
    m->tanh(th, x, N);
    m->sigmoid(sg, x, N);
    m->gelu(ge, x, N);
    m->gelu_backward(gd, dy, x, N);
    cr_assert(e[0] == INFINITY && e[1] == 0.0f && e[2] == 1.0f && e[3] == 1.0f, "exp(inf, -inf, 0, -0)");
    cr_assert(th[0] == 1.0f && th[1] == -1.0f, "tanh(+-inf) = +-1");
    cr_assert(th[2] == 0.0f && !signbit(th[2]) && th[3] == 0.0f && signbit(th[3]), "tanh(+-0) = +-0");
    cr_assert(sg[0] == 1.0f && sg[1] == 0.0f && sg[2] == 0.5f && sg[3] == 0.5f, "sigmoid(inf, -inf, 0, -0)");
    cr_assert(ge[0] == INFINITY && isnan(ge[1]), "gelu(inf) = inf, gelu(-inf) NaN as the reference's formula");
    cr_assert(ge[2] == 0.0f && !signbit(ge[2]) && ge[3] == 0.0f && signbit(ge[3]), "gelu(+-0) = +-0");
    cr_assert(gd[0] == 1.0f && gd[1] == 0.0f && gd[2] == 0.5f && gd[3] == 0.5f, "gelu'(inf, -inf, 0, -0)");
    for (int i = 4; i < N; i++)
        cr_assert(isnan(e[i]) && isnan(th[i]) && isnan(sg[i]) && isnan(ge[i]) && isnan(gd[i]),
                  "NaN in (input %d) gives NaN out", i);
    /* a NaN dy makes dx NaN, even where gelu' is 0 */
    float nan_dy = NAN, big = -1e30f, d;
    m->gelu_backward(&d, &nan_dy, &big, 1);
    cr_assert(isnan(d));
}

/* every length through the padded tail gives the bits of the vector body,
 * in place too */
ParameterizedTestParameters(cpu_math, any_length_and_in_place) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, any_length_and_in_place) {
    const dg_vmath *m = tier_or_skip(*t);
    enum { N = 1100 }; /* past two of the kernels' 512-float chunks */
    static float x[N], full[N], part[N], dy[N];
    dg_rng rng = dg_rng_new(test_seed());
    for (int i = 0; i < N; i++) {
        x[i] = (float)((dg_rng_uniform(&rng) - 0.5) * 20.0);
        dy[i] = (float)(dg_rng_uniform(&rng) - 0.5);
    }
    void (*maps[])(float *, const float *, int64_t) = {m->exp, m->tanh, m->sigmoid, m->gelu};
    for (size_t f = 0; f < sizeof maps / sizeof *maps; f++) {
        maps[f](full, x, N);
        for (int off = 0; off < 3; off++)
            for (int len = 0; len + off <= N; len += len < 70 ? 1 : 97) {
                memset(part, 0, sizeof part);
                maps[f](part + off, x + off, len);
                cr_assert(!memcmp(part + off, full + off, (size_t)len * sizeof *part), "map %zu, offset %d, length %d",
                          f, off, len);
                memcpy(part, x, sizeof x);
                maps[f](part + off, part + off, len);
                cr_assert(!memcmp(part + off, full + off, (size_t)len * sizeof *part), "map %zu in place, length %d", f,
                          len);
            }
    }
    m->gelu_backward(full, dy, x, N);
    memcpy(part, x, sizeof x);
    m->gelu_backward(part, dy, part, N); /* dx over x */
    cr_assert(!memcmp(part, full, sizeof part), "gelu_backward in place");
    m->exp_scaled(full, x, N, 0.5f, 1.0f, 3.0f);
    memcpy(part, x, sizeof x);
    m->exp_scaled(part, part, N, 0.5f, 1.0f, 3.0f);
    cr_assert(!memcmp(part, full, sizeof part), "exp_scaled in place");
}

/* max, exp_sum, exp_scaled and scale: the pieces of a softmax */
ParameterizedTestParameters(cpu_math, log_sum_exp_pieces) { return tier_params(); }
ParameterizedTest(int *t, cpu_math, log_sum_exp_pieces) {
    const dg_vmath *m = tier_or_skip(*t);
    enum { N = 3000 };
    static float x[N], y[N];
    dg_rng rng = dg_rng_new(test_seed());
    const int lens[] = {1, 2, 7, 15, 16, 17, 100, 511, 512, 513, 1024, 1500, N};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int n = lens[li];
        float a = li % 2 ? 0.125f : -1.5f, spread = li % 3 ? 10.0f : 60.0f;
        for (int i = 0; i < n; i++) x[i] = (float)(dg_rng_uniform(&rng) - 0.5) * spread;
        float mx = -INFINITY;
        for (int i = 0; i < n; i++) mx = fmaxf(mx, a * x[i]);
        cr_assert_eq(m->max(x, n, a), mx, "max of %d", n);
        double want = 0.0;
        for (int i = 0; i < n; i++) want += exp((double)(a * x[i] - mx));
        double got = m->exp_sum(y, x, n, a, mx), got_only = m->exp_sum(NULL, x, n, a, mx);
        cr_assert(fabs(got - want) <= 16.0 * U24 * want, "exp_sum of %d: %.17g, want %.17g", n, got, want);
        cr_assert_eq(got, got_only, "the sum does not depend on storing the terms");
        for (int i = 0; i < n; i++) {
            double r = exp((double)(a * x[i] - mx));
            cr_assert(ulp_err(y[i], r) <= 1.0, "exp_sum's term %d of %d: %.9g, want %.17g", i, n, y[i], r);
        }
        m->exp_scaled(y, x, n, a, mx, -0.75f);
        for (int i = 0; i < n; i++) {
            double r = -0.75 * exp((double)(a * x[i] - mx));
            cr_assert(ulp_err(y[i], r) <= 1.5, "exp_scaled %d of %d: %.9g, want %.17g", i, n, y[i], r);
        }
        memcpy(y, x, (size_t)n * sizeof *y);
        m->scale(y, n, 0.3f);
        for (int i = 0; i < n; i++) cr_assert_eq(y[i], x[i] * 0.3f, "scale %d of %d", i, n);
    }
    x[1] = NAN; /* a NaN anywhere makes the sum NaN */
    cr_assert(isnan(m->exp_sum(NULL, x, 100, 1.0f, m->max(x, 100, 1.0f))));
}

/* ---- permute -------------------------------------------------------------- */

/* y = permute(x) on the CPU backend, against the index walk: every element
 * moved bit for bit. The shapes straddle the kernel's 32 x 32 tiles (1,
 * 31-33, 65, 1000 and 3) and put x's contiguous axis at every output axis. */
static void check_permute(dg_shape s, const int *perm) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", s), *y = dg_permute(g, x, perm);
    ASSERT_OK(dg_graph_status(g));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    int64_t n = dg_node_numel(x);
    float *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    cr_assert(in && out);
    for (int64_t i = 0; i < n; i++) in[i] = (float)i;
    ASSERT_OK(dg_plan_set(p, x, in, (size_t)n * sizeof *in));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_plan_get(p, y, out, (size_t)n * sizeof *out));
    int64_t stride[DG_MAX_DIMS], idx[DG_MAX_DIMS] = {0};
    for (int a = s.ndim - 1, acc = 1; a >= 0; a--) { stride[a] = acc; acc *= (int)s.d[a]; }
    for (int64_t k = 0; k < n; k++) { /* idx: y's index of element k, row-major */
        int64_t src = 0;
        for (int a = 0; a < s.ndim; a++) src += idx[a] * stride[perm[a]];
        cr_assert_eq(out[k], in[src], "permute of [%lld %lld %lld %lld]/%d: element %lld", (long long)s.d[0],
                     (long long)(s.ndim > 1 ? s.d[1] : 0), (long long)(s.ndim > 2 ? s.d[2] : 0),
                     (long long)(s.ndim > 3 ? s.d[3] : 0), s.ndim, (long long)k);
        for (int a = s.ndim - 1; a >= 0 && ++idx[a] == y->shape.d[a]; a--) idx[a] = 0;
    }
    free(in);
    free(out);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

Test(cpu_math, permute_by_tiles_at_any_shape) {
    check_permute(DG_SHAPE(1, 1), (int[]){1, 0});
    check_permute(DG_SHAPE(33, 65), (int[]){1, 0});
    check_permute(DG_SHAPE(65, 33), (int[]){1, 0});
    check_permute(DG_SHAPE(1000, 3), (int[]){1, 0});
    check_permute(DG_SHAPE(3, 1000), (int[]){1, 0});
    check_permute(DG_SHAPE(32, 64), (int[]){1, 0});
    check_permute(DG_SHAPE(4, 31, 97), (int[]){0, 2, 1});
    check_permute(DG_SHAPE(5, 70, 33), (int[]){2, 0, 1});
    check_permute(DG_SHAPE(33, 2, 40), (int[]){2, 1, 0});
    check_permute(DG_SHAPE(2, 37, 5, 66), (int[]){0, 3, 1, 2});
    check_permute(DG_SHAPE(3, 34, 35, 36), (int[]){3, 2, 1, 0});
    check_permute(DG_SHAPE(6, 7, 8, 40), (int[]){3, 0, 1, 2});
    check_permute(DG_SHAPE(2, 3, 45, 1), (int[]){0, 3, 2, 1});
    check_permute(DG_SHAPE(2, 33, 3, 50), (int[]){0, 2, 1, 3}); /* the last axis stays: rows */
}
