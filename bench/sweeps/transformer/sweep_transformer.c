/* sweep_transformer.c: one training step of the character-level language
 * model (core/nn/transformer.h: embedding + positions, 4 pre-norm blocks of
 * width 256 with 4 heads of 64, causal self-attention, final layer norm,
 * logits over a vocabulary of 96; softmax cross-entropy over every
 * position, the gradient, Adam lr 1e-3) as one plan (dg_train_step), over
 * the batch (8, 32) and the context T (64, 128, 256, 512; --sizes
 * transformer=LIST gives the contexts; --quick: batch 8, T 64 and 128).
 * Attention fused (dg_attention, the model's default) and composed
 * (matmul, softmax, matmul: the [B,H,T,T] scores are tensors). impl cpu,
 * gpu (node by node), gpu-graph (the step captured once as a CUDA graph and
 * replayed). Data: seeded ids uniform over the vocabulary, labels the next
 * id of each sequence, uploaded once (transfer = 0).
 *
 * Precisions (--dtype; the dtype column): the step builder's policy
 * (core/nn/train_step.h), as the mlp and resnet sweeps run it: fp32 (TF32
 * off); tf32 (the GPU's products on TF32 tensor cores; on the CPU, which
 * has no TF32, a skipped row); bf16 and fp16 mixed precision (every
 * product's operands in the dtype, the weights cast from float32 masters,
 * float32 accumulation; the linear layers' outputs, the heads' permutes
 * and GELU kept in the dtype between products (dg_model_linear); the
 * residual stream, layer norms, softmax, loss and Adam float32; fp16 with
 * dynamic loss scaling). The attention follows the policy in both forms: a
 * fused row's attention runs in the dtype on the 16-bit projections and
 * leaves its output in it (dg_model_attention), a composed row's two
 * products take operands in it and return float32.
 *
 * Row: case charlm-FORM-bBATCH, m = T, n = the width, k = the vocabulary,
 * batch; flops = step_flops (below: 2 per multiply-add of every product of
 * the step, forward and backward, the attention counted as core/ops.c
 * does, the same for both forms; a fused row whose graph's matmul and
 * attention nodes count otherwise is an error); arena_bytes, live_bytes of
 * the plan. The report's tokens/s are batch * T / median time.
 *
 * Check (check column "f64-step+grad@b2tT' tol G/U", T' = min(T, 64), G
 * and U the gradients' and the updates' tolerances): before any timing,
 * the same step at batch 2 and context T' in the same precision runs once
 * on the same backend and implementation, and its loss, every parameter's
 * gradient and every parameter's update are compared with the float64
 * evaluation of that graph (core/check/ref.c's ref_eval_stored, which
 * rounds where the graph casts): the loss and the updates through
 * bench_step_error with check.h's MLP Adam tolerances raised to the
 * precision's (bench_step_tol_in, the mlp and resnet sweeps' own; all
 * parameters as one vector), the gradients as one vector within
 * lm_grad_tol (sweep_transformer.h). The
 * gradients are what make the check sharp: Adam's first update is about
 * lr * sign(g), so a backward 0.3% off moves the updates by only 4% (a
 * layer norm backward without its mean term, measured), within the
 * update tolerance, while its gradients are 2.7e-3 off against 7e-7 for
 * correct kernels. The float64 step of the full size would take minutes.
 * A failed check makes the implementation's rows "wrong", untimed; the
 * row's max_rel_err is the largest of the three errors. The full-size plan
 * then runs its first step once and its loss must be finite.
 *
 * Memory: each step is laid out without memory first (plan_predict.h):
 * CPU rows beyond the host memory are `oom` (beyond half of it `skipped`),
 * not tried; GPU rows are tried, and an allocation that fails is an `oom`
 * row (for composed rows a finding, not a failure: the exit code stays 0);
 * DG_BENCH_MEM_LIMIT applies to both. CPU rows respect --cpu-cap, the
 * time predicted from the check step's warm run, then from the last row
 * timed, scaled by FLOPs: the sweep's own prediction, not the runner's, as
 * it comes after the memory verdict (a row skipped by it still has its
 * plan's bytes, which the report's table shows).
 *
 * The rows go through the runner (runner/runner.h): per form, the
 * contexts that share a check context together, each batch over them;
 * cpu, gpu and gpu-graph at each point. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/step_check.h"
#include "core/nn/transformer.h"
#include "core/status.h"
#include "runner/plan_predict.h"
#include "runner/runner.h"
#include "runner/step_tol.h"
#include "sweeps/attention/sweep_attention.h"
#include "sweeps/transformer/sweep_transformer.h"

static const long long default_ctx[] = {64, 128, 256, 512};

double lm_grad_tol(dg_precision p) {
    switch (p) {
    case DG_PREC_FP32: break;
    case DG_PREC_TF32: return LM_GRAD_TOL_TF32;
    case DG_PREC_BF16: return LM_GRAD_TOL_BF16;
    case DG_PREC_FP16: return LM_GRAD_TOL_FP16;
    }
    return LM_GRAD_TOL;
}

/* the step of cfg in precision p: the MLP Adam tolerances raised to p's
 * (step_tol.h: the mlp and resnet sweeps' 16-bit and TF32 rows) */
static bench_step_spec lm_spec(const dg_charlm_cfg *cfg, dg_precision p) {
    bench_step_spec spec = bench_charlm_step(cfg);
    spec.precision = p;
    spec.tol = bench_step_tol_in(p, spec.tol);
    return spec;
}
static const long long quick_ctx[] = {64, 128};
#define N_BATCHES(ctx) ((ctx)->quick ? 1 : LM_N_BATCHES)

const int lm_batches[LM_N_BATCHES] = {8, 32};
const char *const lm_forms[2] = {"fused", "composed"};
const lm_impl lm_impls[LM_N_IMPLS] = {{"cpu", false, true}, {"gpu", true, false}, {"gpu-graph", true, true}};

static dg_charlm_cfg lm_cfg(int context, bool composed) {
    return (dg_charlm_cfg){.vocab = LM_VOCAB, .context = context, .width = LM_WIDTH, .heads = LM_HEADS,
                           .layers = LM_LAYERS, .composed = composed};
}

/* The step's products: per token 12 C^2 multiply-adds in each block (q, k,
 * v, o: C x C; the MLP: C x 4C twice) and C V in the head, each done three
 * times (forward, input gradient, weight gradient) at 2 FLOPs; attention
 * fwd + bwd as att_flops counts it, causal. */
static double step_flops(int batch, int t) {
    const double c = LM_WIDTH, tokens = (double)batch * t;
    return 6.0 * tokens * (12.0 * LM_LAYERS * c * c + c * LM_VOCAB) +
           LM_LAYERS * att_flops(batch, LM_HEADS, t, LM_WIDTH / LM_HEADS, true, true);
}

/* the same from the graph: every matmul, attention and attention_backward node */
static double graph_flops(const dg_graph *g) {
    double f = 0;
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *n = dg_graph_node(g, id);
        if (n->op == DG_OP_MATMUL || n->op == DG_OP_ATTENTION || n->op == DG_OP_ATTENTION_BACKWARD)
            f += dg_node_cost(n).flops;
    }
    return f;
}

/* graph, model and step of spec (in its precision's policy) for a batch,
 * laid out without memory (*ps) */
static dg_status step_graph(bench_step *s, const bench_step_spec *spec, int batch, dg_plan_stats *ps) {
    *s = (bench_step){0};
    s->g = dg_graph_new();
    dg_status st = s->g ? spec->model(s->g, spec->cfg, 1, &s->model) : dg_fail(DG_ERR_OOM, "transformer: out of memory");
    if (st == DG_OK)
        st = dg_train_step_build_opts(s->g, &s->model, batch, &spec->optim,
                                      &(dg_train_step_opts){.precision = spec->precision}, &s->ts);
    if (st == DG_OK) st = bench_plan_predict(s->g, s->ts.outputs, s->ts.n_outputs, ps);
    return st;
}

/* the step's plan in precision p (TF32 on for tf32), inputs set; grads:
 * the gradients are outputs too (kept to be read back: the check's plan) */
static dg_status step_plan(bench_step *s, dg_backend *be, bool replay, dg_precision p, bool grads, const int32_t *x,
                           const int32_t *y) {
    dg_node *out[2 + 2 * DG_MODEL_MAX_PARAMS + DG_MODEL_MAX_UPDATES];
    int n = s->ts.n_outputs;
    memcpy(out, s->ts.outputs, (size_t)n * sizeof *out);
    for (int i = 0; grads && i < s->model.n_params; i++) out[n++] = s->ts.grads[i];
    dg_plan_opts po = {.no_replay = !replay};
    dg_precision_plan_opts(p, &po);
    dg_status st = dg_plan_new(&s->p, s->g, be, out, n, &po);
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.x, x, dg_node_bytes(s->ts.x));
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.y, y, dg_node_bytes(s->ts.y));
    return st;
}

/* || g - g_ref || / || g_ref || over every parameter's gradient as one
 * vector (a parameter whose true gradient is 0, such as a key bias under
 * softmax's shift invariance, has no relative error of its own) */
static dg_status grad_error(const bench_step *s, const bench_step_ref *ref, double *err) {
    double num = 0, den = 0;
    dg_status st = DG_OK;
    for (int i = 0; i < s->model.n_params && st == DG_OK; i++) {
        int64_t cnt = dg_node_numel(s->ts.grads[i]);
        float *g = malloc((size_t)cnt * sizeof *g);
        st = g ? dg_plan_get(s->p, s->ts.grads[i], g, (size_t)cnt * sizeof *g)
               : dg_fail(DG_ERR_OOM, "transformer: out of memory for the check");
        for (int64_t j = 0; j < cnt && st == DG_OK; j++) {
            double d = g[j] - ref->grad[i][j];
            num += isnan(d) ? INFINITY : d * d;
            den += ref->grad[i][j] * ref->grad[i][j];
        }
        free(g);
    }
    *err = sqrt(num / fmax(den, 1e-300));
    return st;
}

static dg_status plan_fetch(void *p, const dg_node *n, float *host, size_t bytes) { return dg_plan_get(p, n, host, bytes); }
static dg_status plan_run(void *p) { return dg_plan_run(p); }

/* one implementation's check at batch LM_CHECK_BATCH, context tc */
typedef struct lm_check {
    dg_status st;
    char      why[256];
    double    err;        /* the largest of the three errors            */
    double    step_err;   /* bench_step_error's: the loss's and the updates' */
    double    grad_err;   /* the gradients'                               */
    bool      ok;
    double    last_ms, last_flops; /* the CPU's predictor: the last run timed */
} lm_check;

static void check_impl(int form, const lm_impl *im, dg_backend *be, int tc, dg_precision p, bench_step_ref *ref,
                       lm_check *out) {
    dg_charlm_cfg cfg = lm_cfg(tc, form == 1);
    bench_step_spec spec = lm_spec(&cfg, p);
    int32_t *x = NULL, *y = NULL;
    bench_step s = {0};
    dg_plan_stats ps;
    float loss = NAN;
    *out = (lm_check){.err = NAN, .step_err = NAN, .grad_err = NAN};
    dg_status st = bench_charlm_batch(LM_CHECK_BATCH, tc, LM_VOCAB, 500u + (uint64_t)tc, &x, &y);
    if (st == DG_OK) st = step_graph(&s, &spec, LM_CHECK_BATCH, &ps);
    if (st == DG_OK) st = step_plan(&s, be, im->replay, p, true, x, y);
    if (st == DG_OK) st = dg_plan_run(s.p);
    if (st == DG_OK) st = dg_plan_get(s.p, s.ts.loss, &loss, sizeof loss);
    double t0 = bench_now_s();
    bool fresh = !ref->done;
    if (st == DG_OK && fresh) st = bench_step_ref_run(&s, x, y, ref);
    if (st == DG_OK && fresh)
        fprintf(stderr, "bench: transformer %s %s: float64 reference of the batch-%d, context-%d step: %.1f s\n",
                lm_forms[form], dg_precision_name(p), LM_CHECK_BATCH, tc, bench_now_s() - t0);
    if (st == DG_OK) st = bench_step_error(&s.model, plan_fetch, s.p, loss, ref, spec.tol, &out->step_err, &out->ok);
    if (st == DG_OK) st = grad_error(&s, ref, &out->grad_err);
    if (st == DG_OK) {
        out->ok = out->ok && out->grad_err <= lm_grad_tol(p);
        out->err = fmax(out->step_err, isnan(out->grad_err) ? INFINITY : out->grad_err);
    }
    if (st == DG_OK && out->ok && !im->gpu) { /* the CPU's first prediction: one more run, warm */
        t0 = bench_now_s();
        st = dg_plan_run(s.p);
        out->last_ms = 1e3 * (bench_now_s() - t0);
        out->last_flops = step_flops(LM_CHECK_BATCH, tc);
    }
    out->st = st;
    if (st != DG_OK) snprintf(out->why, sizeof out->why, "check at batch %d, context %d: %s", LM_CHECK_BATCH, tc,
                              dg_last_error());
    bench_step_free(&s);
    free(x);
    free(y);
}

/* ---- the runner's view (runner/runner.h): a point is a form and a batch
 * at one context T; the points whose contexts share a check context
 * min(T, LM_CHECK_CONTEXT) are consecutive, so that the group checks each
 * implementation once against one float64 reference ---- */

static bench_impl impls[LM_N_IMPLS]; /* data: the lm_impl */
static char case_names[2][LM_N_BATCHES][32];

static void list_impls(void) {
    for (int i = 0; i < LM_N_IMPLS; i++)
        impls[i] = (bench_impl){.name = lm_impls[i].name, .gpu = lm_impls[i].gpu, .data = &lm_impls[i]};
    for (int form = 0; form < 2; form++)
        for (int b = 0; b < LM_N_BATCHES; b++)
            snprintf(case_names[form][b], sizeof case_names[form][b], "charlm-%s-b%d", lm_forms[form], lm_batches[b]);
}

static int impl_index(const bench_impl *im) { return (int)((const lm_impl *)im->data - lm_impls); }

static int check_context(long long t) { return t < LM_CHECK_CONTEXT ? (int)t : LM_CHECK_CONTEXT; }

typedef struct lm_sweep lm_sweep;

/* the runner's state of one point: its model, its check word, and the
 * step of the row under way (prepare makes it, release frees it) */
typedef struct lm_point {
    lm_sweep     *sw;
    int           form, batch, t;
    dg_precision  prec;
    dg_charlm_cfg cfg;
    char          check[64];
    bench_step    s;
    int32_t      *x, *y;        /* the step's ids and labels */
    dg_plan_stats ps;
    char          why[512];     /* the row's note            */
} lm_point;

/* what outlives a point: the group under way (form and check context), its
 * float64 reference per precision (the runner goes through the precisions
 * at each point: each keeps its own) and each implementation's check in
 * each precision (with the CPU's rate) */
struct lm_sweep {
    int            form, tc;    /* tc 0: no group yet */
    bench_step_ref ref[DG_PREC_COUNT];
    lm_check       chk[LM_N_IMPLS][DG_PREC_COUNT];
    bool           checked[LM_N_IMPLS][DG_PREC_COUNT];
    lm_point       point;       /* the point under way */
};

/* per form, the contexts that share a check together (in the order of
 * their first context), each at every batch (--quick: the first);
 * data: arg, the address of the sweep's lm_sweep * */
static void lm_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    const long long *ts;
    int nt = bench_sizes(ctx, ctx->quick ? quick_ctx : default_ctx,
                         ctx->quick ? (int)(sizeof quick_ctx / sizeof *quick_ctx)
                                    : (int)(sizeof default_ctx / sizeof *default_ctx), &ts);
    for (int form = 0; form < 2; form++)
        for (int g = 0; g < nt; g++) {
            int tc = check_context(ts[g]);
            bool first = true;
            for (int j = 0; j < g; j++) first &= check_context(ts[j]) != tc;
            for (int b = 0; first && b < N_BATCHES(ctx); b++)
                for (int k = g; k < nt; k++)
                    if (check_context(ts[k]) == tc)
                        bench_points_add(out, (bench_point){.name = case_names[form][b], .m = ts[k], .n = LM_WIDTH,
                                                            .k = LM_VOCAB, .batch = lm_batches[b], .data = arg,
                                                            .index = form});
        }
}

/* a point of a new group drops the last group's reference and checks */
static dg_status lm_setup(bench_ctx *ctx, const bench_point *pt, void **state) {
    (void)ctx;
    lm_sweep *sw = *(lm_sweep *const *)pt->data;
    int form = (int)pt->index, t = (int)pt->m, tc = check_context(t);
    if (form != sw->form || tc != sw->tc) {
        for (int p = 0; p < DG_PREC_COUNT; p++) {
            bench_step_ref_free(&sw->ref[p]);
            /* one graph and data for every implementation: one reference */
            sw->ref[p] = (bench_step_ref){.keep_grads = true};
        }
        memset(sw->checked, 0, sizeof sw->checked);
        sw->form = form;
        sw->tc = tc;
    }
    lm_point *pp = &sw->point;
    *pp = (lm_point){.sw = sw, .form = form, .batch = (int)pt->batch, .t = t, .prec = pt->precision,
                     .cfg = lm_cfg(t, form == 1)};
    snprintf(pp->check, sizeof pp->check, "f64-step+grad@b%dt%d tol %.2g/%.2g", LM_CHECK_BATCH, tc,
             lm_grad_tol(pp->prec), lm_spec(&pp->cfg, pp->prec).tol.update);
    *state = pp;
    return DG_OK;
}

/* Everything of a row but its timing, in this order: the implementation's
 * check (once a group), the step laid out without memory (the row's arena
 * and live bytes, tried or not), the FLOP count against the graph's, the
 * memory verdict, the --cpu-cap prediction, then the full-size step's
 * first run, whose loss must be finite. The first of these that fails is
 * the row's status; a composed row's oom is a finding. Nothing of a row
 * can run out of memory once timed: its plan holds all of it and has run
 * once (a replayed one captured). */
static dg_status lm_prepare(bench_ctx *ctx, void *state, const bench_impl *im, bench_row *row, bench_work *work) {
    lm_point *pp = state;
    lm_sweep *sw = pp->sw;
    const int i = impl_index(im), form = pp->form, batch = pp->batch, t = pp->t;
    const lm_impl *li = &lm_impls[i];
    dg_backend *be = li->gpu ? ctx->gpu : ctx->cpu;
    const dg_precision p = pp->prec;
    lm_check *chk = &sw->chk[i][p];
    if (!sw->checked[i][p]) {
        check_impl(form, li, be, sw->tc, p, &sw->ref[p], chk);
        sw->checked[i][p] = true;
    }
    char *why = pp->why;
    const size_t wn = sizeof pp->why;
    why[0] = '\0';
    pp->ps = (dg_plan_stats){0};
    row->check = pp->check;
    row->flops = step_flops(batch, t);
    row->max_rel_err = chk->err;
    bench_step_spec spec = lm_spec(&pp->cfg, p);
    const char *status = NULL;
    dg_status st = chk->st;
    if (st != DG_OK) {
        status = bench_status_word(st);
        snprintf(why, wn, "%s", chk->why);
        st = DG_OK;
    } else if (!chk->ok) {
        status = "wrong";
        snprintf(why, wn, "the batch-%d %s step differs from its float64 reference: gradients %.3g (tolerance %g), "
                 "loss and updates %.3g (tolerances %g, %g)", LM_CHECK_BATCH, dg_precision_name(p), chk->grad_err,
                 lm_grad_tol(p), chk->step_err, spec.tol.loss, spec.tol.update);
    }
    if (!status) st = step_graph(&pp->s, &spec, batch, &pp->ps);
    if (!status && st == DG_OK) {
        row->arena_bytes = (int64_t)pp->ps.arena_bytes;
        row->live_bytes = (int64_t)pp->ps.live_bytes;
        double counted = graph_flops(pp->s.g);
        if (form == 0 && !(fabs(counted - row->flops) <= 1e-9 * row->flops)) {
            status = "error";
            snprintf(why, wn, "step_flops %.6g differs from the graph's matmul and attention nodes' %.6g", row->flops,
                     counted);
        }
    }
    if (!status && st == DG_OK)
        status = bench_memory_verdict(&pp->ps, 2.0 * batch * t * sizeof(int32_t), li->gpu, why, wn);
    if (!status && st == DG_OK && !li->gpu) {
        double s_pred = chk->last_ms > 0 ? chk->last_ms * row->flops / chk->last_flops / 1e3 : 0;
        if (s_pred > ctx->cpu_cap_s) {
            status = "skipped";
            snprintf(why, wn, "predicted %.3g s per run > cap %.3g s (--cpu-cap)", s_pred, ctx->cpu_cap_s);
        }
    }
    if (!status && st == DG_OK)
        st = bench_charlm_batch(batch, t, LM_VOCAB, (uint64_t)batch << 20 ^ (uint64_t)t, &pp->x, &pp->y);
    if (!status && st == DG_OK) st = step_plan(&pp->s, be, li->replay, p, false, pp->x, pp->y);
    float loss = NAN;
    if (!status && st == DG_OK) st = dg_plan_run(pp->s.p);
    if (!status && st == DG_OK) st = dg_plan_get(pp->s.p, pp->s.ts.loss, &loss, sizeof loss);
    if (!status && st == DG_OK && !isfinite(loss)) {
        status = "wrong";
        snprintf(why, wn, "first full-size loss %g, not finite", (double)loss);
    }
    if (st != DG_OK) {
        status = bench_status_word(st);
        bench_plan_failure(&pp->ps, why, wn);
    }
    if (!status && st == DG_OK && p != DG_PREC_FP32) /* how close the rounded step came */
        snprintf(why, wn, "gradients %.2g, loss and updates %.2g off float64", chk->grad_err, chk->step_err);
    row->note = why[0] ? why : NULL;
    row->status = status;
    if (status) work->finding = form == 1 && !strcmp(status, "oom"); /* composed: "where memory allows" */
    else *work = (bench_work){.fn = plan_run, .arg = pp->s.p, .be = be, .events = li->gpu};
    return DG_OK;
}

/* checked before timing (prepare); after it, the row's rate is the next
 * prediction of its implementation in the group */
static bool lm_timed(void *state, const bench_impl *im, bench_row *row) {
    lm_point *pp = state;
    lm_check *chk = &pp->sw->chk[impl_index(im)][pp->prec];
    if (row->st.reps > 0) {
        chk->last_ms = row->st.median_ms;
        chk->last_flops = row->flops;
    }
    return true;
}

static void lm_release(void *state, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    lm_point *pp = state;
    bench_step_free(&pp->s);
    free(pp->x);
    free(pp->y);
    pp->x = pp->y = NULL;
}

/* the CPU has no TF32: its tf32 rows are skipped, not run as fp32 */
static const char *lm_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why, size_t n) {
    (void)ctx;
    if (im->gpu || pt->precision != DG_PREC_TF32) return NULL;
    snprintf(why, n, "no TF32 on the CPU: its fp32 row is this one");
    return why;
}

dg_status sweep_transformer(bench_ctx *ctx) {
    lm_sweep *sw = calloc(1, sizeof *sw);
    if (!sw) return dg_fail(DG_ERR_OOM, "transformer: out of memory");
    list_impls();
    /* no check_word: prepare writes each point's; no flops on the points:
     * the runner predicts nothing, the cap is prepare's (from the check
     * step's warm run, per group, and after the plan's memory, so a
     * skipped row keeps its arena bytes) */
    const bench_sweep_spec spec = {
        .name = "transformer", .impls = impls, .n_impls = LM_N_IMPLS, .points = lm_points, .arg = &sw,
        .precisions = BENCH_PREC_ALL, .skip = lm_skip, .setup = lm_setup, .prepare = lm_prepare, .check = lm_timed,
        .release = lm_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    for (int p = 0; p < DG_PREC_COUNT; p++) bench_step_ref_free(&sw->ref[p]);
    free(sw);
    return st;
}
