/* scaling_step.c: see scaling_step.h. */
#include "sweeps/scaling/scaling_step.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"
#include "runner/step_policy.h"
#include "runner/step_tol.h"

dp_model dp_model_in(const dp_model *m, dg_precision p, bool gpu) {
    dp_model r = *m;
    r.spec.precision = bench_step_precision(p, gpu);
    r.spec.tol = m->batch_norm ? bench_step_tol_bn_in(r.spec.precision, m->spec.tol)
                               : bench_step_tol_in(r.spec.precision, m->spec.tol);
    return r;
}

dg_plan_opts dp_plan_opts(const dp_model *m) {
    dg_plan_opts po = {0};
    dg_precision_plan_opts(m->spec.precision, &po);
    return po;
}

dg_status dp_graph_new(dp_graph *d, const dp_model *m, int batch, bool all_reduce) {
    *d = (dp_graph){.g = dg_graph_new()};
    dg_status st = d->g ? m->spec.model(d->g, m->spec.cfg, 1, &d->model)
                        : dg_fail(DG_ERR_OOM, "scaling: out of memory");
    const dg_train_step_opts so = {.precision = m->spec.precision, .all_reduce = all_reduce};
    if (st == DG_OK) st = dg_train_step_build_opts(d->g, &d->model, batch, &m->spec.optim, &so, &d->ts);
    return st;
}

void dp_graph_free(dp_graph *d) { dg_graph_free(d->g); }

/* bytes of one example's input and labels */
static size_t x_bytes(const dp_model *m) {
    return 4 * (m->in.lm_vocab ? (size_t)m->in.lm_context : m->in.example_floats);
}
static size_t y_bytes(const dp_model *m) { return m->in.lm_vocab ? 4 * (size_t)m->in.lm_context : 4; }

dg_status dp_set_slice(dg_plan *p, const dp_graph *d, const dp_model *m, const void *x, const int32_t *y, int first,
                       int count) {
    dg_status st = dg_plan_set(p, d->ts.x, (const char *)x + (size_t)first * x_bytes(m), (size_t)count * x_bytes(m));
    if (st == DG_OK)
        st = dg_plan_set(p, d->ts.y, (const char *)y + (size_t)first * y_bytes(m), (size_t)count * y_bytes(m));
    return st;
}

size_t dp_grad_bytes(const dg_model *m) {
    size_t b = 0;
    for (int i = 0; i < m->n_params; i++) b += dg_node_bytes(m->params[i]);
    return b;
}

bool dp_policy(const dp_graph *d, dg_precision p, bool gpu, char *why, size_t n) {
    return bench_step_policy(d->g, &d->ts, bench_step_precision(p, gpu), why, n);
}

enum { CHECK_CONTEXT = 64 };

dg_status dp_check_f64(dg_backend *be, const dp_model *m, double *err, bool *ok) {
    bench_step c = {0};
    bench_step_ref ref = {0};
    void *cx = NULL;
    int32_t *cy = NULL;
    bench_step_spec spec = m->spec;
    bench_batch_shape in = m->in;
    dg_charlm_cfg small;
    if (in.lm_vocab && in.lm_context > CHECK_CONTEXT) {
        small = *(const dg_charlm_cfg *)m->spec.cfg;
        in.lm_context = small.context = CHECK_CONTEXT;
        spec.cfg = &small;
    }
    dg_status st = bench_synth_batch(in, 2, 5, &cx, &cy);
    if (st == DG_OK) st = bench_step_new(&c, be, &spec, 2, cx, cy, NULL, &ref, err, ok);
    bench_step_free(&c);
    bench_step_ref_free(&ref);
    free(cx);
    free(cy);
    return st;
}

const char *dp_f64_base(const dp_model *m) {
    return m->in.lm_vocab && m->in.lm_context > CHECK_CONTEXT ? "f64-step@b2t64" : "f64-step@b2";
}

const char *dp_check_word(char *buf, size_t n, const dp_model *m, const char *base, const char *tol) {
    bench_step_check_word(buf, n, base, m->spec.precision, tol);
    return buf;
}

const char *dp_f64_tol(char *buf, size_t n, const dp_model *m) {
    snprintf(buf, n, "%.2g/%.2g", m->spec.tol.loss, m->spec.tol.update);
    return buf;
}
