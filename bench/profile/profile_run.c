/* profile_run.c: one model's step planned, checked, then run node by node
 * with a backend event between every two nodes (profile.h). The data are
 * seeded synthetic examples of the model's input shape (uniform in [0, 1),
 * labels uniform over the classes; for the char-LM, ids uniform over the
 * vocabulary, labels the next id): a step's time depends on the shapes,
 * not on the values. The step is built under the profile's precision
 * policy, and its check uses that precision's tolerances. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/cnn.h"
#include "charts/gnuplot.h"
#include "core/onnx/onnx.h"
#include "core/status.h"
#include <duograd/testing.h>
#include "profile/profile.h"
#include "runner/energy_window.h"
#include "runner/step_tol.h"
#include "runner/sweep.h"
#include "sweeps/transformer/sweep_transformer.h"

const bench_prof_model bench_prof_models[] = {
    {"mlp", "784-256-100-10 MLP, Adam (the mlp sweep's step)", 128, 0},
    {"logreg", "784-10 logistic regression, Adam", 128, 0},
    {"cnn", "two conv-BN-ReLU-maxpool blocks + 2 linear, 28x28, SGD momentum", 128, 2},
    {"resnet18-cifar", "ResNet-18, 3x3 stem, 3x32x32, 10 classes, SGD momentum + weight decay", 32, 2},
    {"resnet18", "ResNet-18, ImageNet stem, 3x224x224, 1000 classes, SGD momentum + weight decay", 16, 2},
    {"charlm", "char-LM (the transformer sweep's: 4 blocks, width 256, 4 heads), context 256, fused attention, Adam",
     16, 2},
    {"charlm-composed", "the same char-LM with composed attention (matmul, masked softmax, matmul)", 16, 2},
};
const int bench_n_prof_models = (int)(sizeof bench_prof_models / sizeof *bench_prof_models);

const bench_prof_model *bench_prof_model_find(const char *name) {
    for (int i = 0; name && i < bench_n_prof_models; i++)
        if (!strcmp(bench_prof_models[i].name, name)) return &bench_prof_models[i];
    return NULL;
}

const bench_prof_model *bench_prof_onnx_model(const char *path) {
    static char name[80];
    static bench_prof_model m;
    size_t n = path ? strlen(path) : 0;
    if (n < 6 || strcmp(path + n - 5, ".onnx")) return NULL;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(name, sizeof name, "onnx-%.*s", (int)(path + n - 5 - base), base);
    if (!bench_file_name_ok(name)) return NULL;
    /* batch norm makes the loss depend on the whole batch: the float64
     * check runs at batch 2, the profiled step must stay finite (as the
     * CNN's) */
    m = (bench_prof_model){name, "an ONNX file's model (SGD momentum, as the CNN's step)", 32, 2};
    return &m;
}

bench_phase bench_phase_of(const dg_train_step *ts, const dg_node *n) {
    if (n->id >= ts->first_optimizer_id) return BENCH_PHASE_OPTIMIZER;
    return n->id >= ts->first_backward_id ? BENCH_PHASE_BACKWARD : BENCH_PHASE_FORWARD;
}

/* a model's configuration, the step spec pointing into it, and the size
 * of one example */
typedef struct model_setup {
    dg_mlp_cfg      mlp;
    dg_cnn_cfg      cnn;
    dg_resnet_cfg   resnet;
    dg_charlm_cfg   lm, check_lm;  /* check_lm: the check's shorter context   */
    bench_step_spec spec, check;   /* check: the float64 check's step         */
    size_t          example_floats;
    int             classes;
} model_setup;

static void setup_model(const bench_prof_opts *o, model_setup *s) {
    const bench_prof_model *m = o->model;
    *s = (model_setup){0};
    if (o->onnx) {
        /* the CNN's optimizer and per-tensor tolerances (below), the
         * file's model; synthetic examples of its input shape */
        s->resnet = dg_resnet18_default(DG_RESNET_CIFAR);
        s->spec = bench_resnet_step(&s->resnet);
        s->spec.model = dg_onnx_model_new;
        s->spec.cfg = o->onnx;
        s->example_floats = (size_t)dg_shape_numel(dg_onnx_example_shape(o->onnx));
        s->classes = dg_onnx_classes(o->onnx);
    } else if (!strcmp(m->name, "mlp") || !strcmp(m->name, "logreg")) {
        s->mlp = !strcmp(m->name, "mlp") ? (dg_mlp_cfg){{784, 256, 100, 10}, 4} : (dg_mlp_cfg){{784, 10}, 2};
        s->spec = bench_mlp_step(&s->mlp);
        s->example_floats = 784;
        s->classes = 10;
    } else if (!strcmp(m->name, "cnn")) {
        /* the ResNet step's optimizer and per-tensor tolerances: batch norm
         * and ReLU masks round alike (check.h); Adam's first step, lr *
         * g / |g|, would flip the sign of near-zero gradients */
        s->resnet = dg_resnet18_default(DG_RESNET_CIFAR);
        s->spec = bench_resnet_step(&s->resnet);
        s->cnn = dg_cnn_default();
        s->spec.model = dg_cnn_new;
        s->spec.cfg = &s->cnn;
        s->example_floats = (size_t)s->cnn.height * s->cnn.width;
        s->classes = s->cnn.classes;
    } else if (!strncmp(m->name, "charlm", 6)) {
        s->lm = (dg_charlm_cfg){.vocab = LM_VOCAB, .context = 256, .width = LM_WIDTH, .heads = LM_HEADS,
                                .layers = LM_LAYERS, .composed = strstr(m->name, "composed") != NULL};
        s->spec = bench_charlm_step(&s->lm);
        /* the float64 step of 256 positions takes seconds: the check runs
         * the same model at 64 (as the transformer sweep's does) */
        s->check_lm = s->lm;
        s->check_lm.context = 64;
        s->check = bench_charlm_step(&s->check_lm);
    } else {
        s->resnet = dg_resnet18_default(!strcmp(m->name, "resnet18") ? DG_RESNET_IMAGENET : DG_RESNET_CIFAR);
        s->spec = bench_resnet_step(&s->resnet);
        s->example_floats = (size_t)s->resnet.channels * s->resnet.height * s->resnet.width;
        s->classes = s->resnet.classes;
    }
    if (!s->check.model) s->check = s->spec;
    s->spec.precision = s->check.precision = o->precision;
}

/* The precision's tolerances for both steps once the profiled step is
 * built: a model with running statistics (batch norm: the CNN, ResNet-18,
 * an ONNX file's with BatchNormalization) gets the batch-norm ones, as the
 * resnet and model sweeps give it, the others the mlp and transformer
 * sweeps' (step_tol.h) */
static void set_tolerances(model_setup *s, const dg_model *m) {
    bench_step_tol (*in)(dg_precision, bench_step_tol) = m->n_state > 0 ? bench_step_tol_bn_in : bench_step_tol_in;
    s->spec.tol = in(s->spec.precision, s->spec.tol);
    s->check.tol = in(s->check.precision, s->check.tol);
}

/* the profiled batch's inputs, or (check) the check's: the char-LM's
 * check runs at its shorter context */
static dg_status synth_batch(const model_setup *s, bool check, int batch, uint64_t seed, void **x, int32_t **y) {
    bench_batch_shape shape = {s->example_floats, s->classes, s->lm.vocab,
                               check ? s->check_lm.context : s->lm.context};
    return bench_synth_batch(shape, batch, seed, x, y);
}

/* The check before anything is timed. At the profiled batch when the
 * model's float64 step is cheap; otherwise (batch norm: the loss depends
 * on the whole batch; the char-LM: its float64 attention) at the model's
 * reduced batch (and the char-LM's context 64), and the profiled plan's
 * first step must give a finite loss. */
static dg_status check_step(dg_backend *be, const bench_prof_opts *o, const model_setup *ms, const void *x,
                            const int32_t *y, const dg_plan_opts *popts, bench_profile *p) {
    bench_step_ref ref = {0};
    dg_status st;
    if (!o->model->check_batch) {
        p->check = "f64-step";
        st = bench_step_check(&p->step, &ms->spec, x, y, &ref, &p->rel_err, &p->check_ok);
        bench_step_ref_free(&ref);
        return st;
    }
    p->check = ms->lm.vocab ? "f64-step@b2t64+finite" : "f64-step@b2+finite";
    void *cx = NULL;
    float loss = NAN;
    int32_t *cy = NULL;
    bench_step c = {0};
    st = synth_batch(ms, true, o->model->check_batch, 1000, &cx, &cy);
    if (st == DG_OK)
        st = bench_step_new(&c, be, &ms->check, o->model->check_batch, cx, cy, popts, &ref, &p->rel_err, &p->check_ok);
    bench_step_free(&c);
    bench_step_ref_free(&ref);
    free(cx);
    free(cy);
    if (st == DG_OK) st = dg_plan_run(p->step.p);
    if (st == DG_OK) st = dg_plan_get(p->step.p, p->step.ts.loss, &loss, sizeof loss);
    if (st == DG_OK && !isfinite(loss)) {
        p->check_ok = false;
        p->rel_err = INFINITY;
    }
    return st;
}

/* the plan's memory, and the arena bytes alive at each node's step */
static void account_memory(bench_profile *p) {
    dg_plan_stats ps = dg_plan_stats_get(p->step.p);
    p->persistent_bytes = ps.persistent_bytes;
    p->arena_bytes = ps.arena_bytes;
    p->live_peak_bytes = ps.live_bytes;
    const dg_model *m = &p->step.model;
    for (int i = 0; i < m->n_params; i++) p->param_bytes += dg_node_bytes(m->params[i]);
    for (int i = 0; i < m->n_state; i++) p->param_bytes += dg_node_bytes(m->state[i]);
    p->input_bytes = dg_node_bytes(p->step.ts.x) + dg_node_bytes(p->step.ts.y);
    int nb = 0;
    const dg_plan_buffer *b = dg_plan_buffers(p->step.p, &nb);
    for (int j = 0; j < nb; j++)
        if (b[j].scratch && b[j].bytes > p->scratch_bytes) p->scratch_bytes = b[j].bytes;
    for (int i = 0; i < p->n_nodes; i++) {
        int id = p->nodes[i].node->id;
        for (int j = 0; j < nb; j++)
            if (b[j].first <= id && id <= b[j].last) p->nodes[i].live_bytes += b[j].bytes;
    }
}

/* the plan's steps queued one by one with nothing between them: what a
 * replayed CUDA graph saves over node-by-node launches */
static dg_status run_nodes(dg_backend *be, const dg_step *steps, int n) {
    dg_status st = DG_OK;
    for (int i = 0; st == DG_OK && i < n; i++) st = dg_backend_compute(be, &steps[i]);
    return st;
}

/* the statistics of v[0..n) (timing.c's), sorted in a copy: v keeps the
 * rounds' order for the trace */
static bench_stats stats_of(const double *v, int n, double *scratch) {
    memcpy(scratch, v, (size_t)n * sizeof *v);
    return bench_stats_of(scratch, n);
}

/* ms between two events around one un-profiled step: the plan run
 * (plan non-NULL), or its steps one by one */
static dg_status time_plain(dg_backend *be, dg_event **pair, dg_plan *plan, const dg_step *steps, int n,
                            double *ms) {
    dg_status st = dg_event_record(pair[0]);
    if (st == DG_OK) st = plan ? dg_plan_run(plan) : run_nodes(be, steps, n);
    if (st == DG_OK) st = dg_event_record(pair[1]);
    return st == DG_OK ? dg_event_elapsed(pair[0], pair[1], ms) : st;
}

/* Profiled step s: an event before every node and after the last, all
 * queued before any is read. ev[0]: the base of the trace's times,
 * ev[1 + i] before node i, ev[1 + n] after the last. */
static dg_status profiled_step(dg_backend *be, const dg_step *steps, dg_event **ev, bench_profile *p, int s,
                               double *ms) {
    int n = p->n_nodes;
    dg_status st = DG_OK;
    for (int i = 0; st == DG_OK && i < n; i++) {
        st = dg_event_record(ev[1 + i]);
        if (st == DG_OK) st = dg_backend_compute(be, &steps[i]);
    }
    if (st == DG_OK) st = dg_event_record(ev[1 + n]);
    if (st == DG_OK) st = dg_event_elapsed(ev[0], ev[1], &p->step_start_ms[s]);
    if (st == DG_OK) st = dg_event_elapsed(ev[1], ev[1 + n], ms);
    for (int i = 0; st == DG_OK && i < n; i++) {
        st = dg_event_elapsed(ev[0], ev[1 + i], &p->nodes[i].start_ms[s]);
        if (st == DG_OK) st = dg_event_elapsed(ev[1 + i], ev[2 + i], &p->nodes[i].dur_ms[s]);
    }
    return st;
}

/* Each round runs the un-profiled step (dg_plan_run; on the GPU also the
 * steps queued one by one without events) and the profiled one, in turns
 * first: interleaved, the profiler's on and off times see the same machine
 * (a loaded host, a changing clock), and alternated, neither always pays
 * for waking the threads after the events were read. ev: [n + 4] events,
 * profiled_step's, then a pair for the un-profiled runs. */
static dg_status profile_rounds(dg_backend *be, bool gpu, bool plain_too, bench_profile *p, dg_event **ev,
                                double *plain, double *nodes, double *profiled) {
    int n = p->n_nodes, n_steps = 0;
    const dg_step *steps = dg_plan_steps(p->step.p, &n_steps);
    dg_event **pair = ev + n + 2;
    dg_status st = dg_backend_sync(be);
    if (st == DG_OK) st = dg_event_record(ev[0]);
    for (int s = 0; st == DG_OK && s < p->steps; s++) {
        if (s % 2) st = profiled_step(be, steps, ev, p, s, &profiled[s]);
        if (plain_too && st == DG_OK) st = time_plain(be, pair, p->step.p, NULL, 0, &plain[s]);
        if (plain_too && gpu && st == DG_OK) st = time_plain(be, pair, NULL, steps, n, &nodes[s]);
        if (s % 2 == 0 && st == DG_OK) st = profiled_step(be, steps, ev, p, s, &profiled[s]);
    }
    return st;
}

/* warm-up, the rounds, then the medians */
static dg_status profile_steps(dg_backend *be, bool gpu, bool run_once, int warmup, bench_profile *p) {
    int n = p->n_nodes, k = p->steps;
    dg_event **ev = calloc((size_t)n + 4, sizeof *ev);
    double *times = malloc(3 * (size_t)k * sizeof *times);
    double *scratch = malloc((size_t)(k > n ? k : n) * sizeof *scratch);
    dg_status st = ev && times && scratch ? DG_OK : dg_fail(DG_ERR_OOM, "profile: out of host memory");
    for (int i = 0; st == DG_OK && i < n + 4; i++) st = dg_event_new(be, &ev[i]);
    for (int i = 0; st == DG_OK && i < warmup; i++) st = dg_plan_run(p->step.p);
    if (st == DG_OK) st = profile_rounds(be, gpu, !run_once, p, ev, times, times + k, times + 2 * k);
    if (st == DG_OK) {
        if (!run_once) p->plan_ms = stats_of(times, k, scratch).median_ms;
        if (!run_once && gpu) p->plan_nodes_ms = stats_of(times + k, k, scratch).median_ms;
        p->profiled_ms = stats_of(times + 2 * k, k, scratch).median_ms;
        p->sum_ms = 0;
        for (int i = 0; i < n; i++) {
            bench_prof_node *x = &p->nodes[i];
            bench_stats st = stats_of(x->dur_ms, k, scratch);
            x->median_ms = st.median_ms;
            x->min_ms = st.min_ms;
            p->sum_ms += x->median_ms;
        }
    }
    for (int i = 0; ev && i < n + 4; i++) dg_event_free(ev[i]);
    free(ev);
    free(times);
    free(scratch);
    return st;
}

static dg_status alloc_nodes(bench_profile *p) {
    int n = 0;
    const dg_step *steps = dg_plan_steps(p->step.p, &n);
    p->n_nodes = n;
    p->nodes = calloc((size_t)n, sizeof *p->nodes);
    p->step_start_ms = calloc((size_t)p->steps, sizeof *p->step_start_ms);
    if (!p->nodes || !p->step_start_ms) return dg_fail(DG_ERR_OOM, "profile: out of host memory");
    for (int i = 0; i < n; i++) {
        bench_prof_node *x = &p->nodes[i];
        x->node = steps[i].node;
        snprintf(x->name, sizeof x->name, "%s", x->node->name);
        snprintf(x->op, sizeof x->op, "%s", dg_op_name(x->node->op));
        bench_prof_dtype(x->node, x->dtype, sizeof x->dtype);
        if (dg_plan_node_impl(p->step.p, x->node, x->impl, sizeof x->impl) != DG_OK)
            snprintf(x->impl, sizeof x->impl, "?");
        x->phase = bench_phase_of(&p->step.ts, x->node);
        dg_cost c = dg_node_cost(x->node);
        x->flops = c.flops;
        x->bytes = c.bytes;
        x->start_ms = calloc((size_t)p->steps, sizeof *x->start_ms);
        x->dur_ms = calloc((size_t)p->steps, sizeof *x->dur_ms);
        if (!x->start_ms || !x->dur_ms) return dg_fail(DG_ERR_OOM, "profile: out of host memory");
    }
    return DG_OK;
}

static dg_status run_plan(void *plan) { return dg_plan_run(plan); }

/* the step's joules (p->step_j, step_w), or why there are none */
static dg_status step_energy(dg_backend *be, const bench_prof_opts *o, bench_profile *p) {
    if (!o->energy) {
        snprintf(p->energy_note, sizeof p->energy_note, "no energy: %s", o->energy_none ? o->energy_none : "no meter");
        return DG_OK;
    }
    bench_energy e;
    char why[160];
    dg_status st = bench_energy_measure(o->energy, be, run_plan, p->step.p, p->plan_ms / 1e3, BENCH_ENERGY_MAX_S, &e,
                                        why, sizeof why);
    if (st == DG_ERR_UNSUPPORTED) snprintf(p->energy_note, sizeof p->energy_note, "no energy: %s", why);
    if (st != DG_OK) return st == DG_ERR_UNSUPPORTED ? DG_OK : st;
    p->step_j = e.joules;
    p->step_w = e.watts;
    snprintf(p->energy_note, sizeof p->energy_note, "%s, %d steps in %.2f s", bench_energy_what(o->energy), e.runs,
             e.seconds);
    return DG_OK;
}

dg_status bench_profile_run(dg_backend *be, const bench_prof_opts *o, bench_profile *p) {
    *p = (bench_profile){.model = o->model->name, .precision = o->precision, .batch = o->batch,
                         .steps = o->run_once ? 1 : o->steps, .plan_ms = NAN, .plan_nodes_ms = NAN, .profiled_ms = NAN,
                         .peak_gflops = o->peak_gflops, .peak_gbps = o->peak_gbps, .check = "none",
                         .rel_err = NAN, .check_ok = o->run_once, .step_j = NAN, .step_w = NAN};
    snprintf(p->backend, sizeof p->backend, "%s", dg_backend_name(be));
    bench_prof_stem(p->model, p->precision, p->stem);
    bool gpu = !strcmp(bench_prof_device(p), "gpu");
    if (!gpu && o->precision == DG_PREC_TF32)
        return dg_fail(DG_ERR_UNSUPPORTED, "%s has no TF32 mode (its products are float32 FMAs): profile the CPU in "
                       "fp32, bf16 or fp16, and tf32 on the GPU (--backend gpu)", p->backend);
    model_setup ms;
    setup_model(o, &ms);
    void *x = NULL;
    int32_t *y = NULL;
    /* TF32 comes from the precision (bench_step_build: dg_precision_plan_opts) */
    dg_plan_opts popts = {.gemm = o->gemm, .conv = o->conv};
    dg_status st = synth_batch(&ms, false, o->batch, (uint64_t)o->batch, &x, &y);
    if (st == DG_OK) st = bench_step_build(&p->step, be, &ms.spec, o->batch, x, y, &popts);
    if (st == DG_OK) set_tolerances(&ms, &p->step.model);
    if (st == DG_OK && !o->run_once) st = check_step(be, o, &ms, x, y, &popts, p);
    free(x);
    free(y);
    if (st != DG_OK || !p->check_ok) return st;
    if ((st = alloc_nodes(p)) != DG_OK) return st;
    account_memory(p);
    size_t allocs0 = dg_backend_n_allocs(be);
    st = profile_steps(be, gpu, o->run_once, o->run_once ? 0 : o->warmup, p);
    if (st == DG_OK && !o->run_once) st = step_energy(be, o, p);
    p->allocs_during_runs = (long long)(dg_backend_n_allocs(be) - allocs0);
    return st;
}

void bench_profile_free(bench_profile *p) {
    for (int i = 0; p->nodes && i < p->n_nodes; i++) {
        free(p->nodes[i].start_ms);
        free(p->nodes[i].dur_ms);
    }
    free(p->nodes);
    free(p->step_start_ms);
    bench_step_free(&p->step);
    *p = (bench_profile){0};
}

void bench_prof_dtype(const dg_node *n, char *buf, size_t size) {
    const char *out = dg_dtype_name(n->dtype);
    for (int i = 0; i < n->n_in; i++) {
        dg_dtype t = n->in[i]->dtype;
        if (t != n->dtype && t != DG_I32) { /* ids and labels are no precision */
            snprintf(buf, size, "%s->%s", dg_dtype_name(t), out);
            return;
        }
    }
    snprintf(buf, size, "%s", out);
}

const char *bench_prof_device(const bench_profile *p) { return strncmp(p->backend, "cpu", 3) ? "gpu" : "cpu"; }

double bench_prof_intensity(const bench_prof_node *n) { return n->bytes > 0 ? n->flops / n->bytes : 0; }

const char *bench_prof_bound(const bench_profile *p, const bench_prof_node *n) {
    if (!(p->peak_gflops > 0) || !(p->peak_gbps > 0)) return "-";
    return bench_prof_intensity(n) >= p->peak_gflops / p->peak_gbps ? "compute" : "memory";
}

double bench_prof_ceiling_frac(const bench_profile *p, const bench_prof_node *n) {
    const char *b = bench_prof_bound(p, n);
    if (!(n->median_ms > 0) || *b == '-') return NAN;
    double s = n->median_ms * 1e-3;
    return *b == 'c' ? n->flops / s / 1e9 / p->peak_gflops : n->bytes / s / 1e9 / p->peak_gbps;
}

int bench_prof_groups(const bench_profile *p, bool by_phase, bench_prof_group *out, int max) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const bench_prof_node *x = &p->nodes[i];
        const char *key = by_phase ? bench_phase_name(x->phase) : x->op;
        int g = 0;
        while (g < n && (strcmp(out[g].key, key) || strcmp(out[g].dtype, x->dtype))) g++;
        if (g == n) {
            if (n == max) continue;
            out[n] = (bench_prof_group){0};
            snprintf(out[n].key, sizeof out->key, "%s", key);
            snprintf(out[n++].dtype, sizeof out->dtype, "%s", x->dtype);
        }
        out[g].nodes++;
        out[g].ms += x->median_ms;
        out[g].flops += x->flops;
        out[g].bytes += x->bytes;
    }
    for (int i = 1; i < n; i++) /* insertion sort, descending time: a few dozen groups */
        for (int j = i; j > 0 && out[j].ms > out[j - 1].ms; j--) {
            bench_prof_group t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}
