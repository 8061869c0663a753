/* step_rows.c: an implementation's check and a row's preparation for the
 * step sweeps (step_rows.h). */
#include "runner/step_rows.h"

#include <math.h>
#include <stdio.h>

#include "core/status.h"
#include "runner/timing.h"

void bench_step_rows_check_run(bench_step_rows_check *out, dg_backend *be, bool gpu, const bench_step_spec *spec,
                               int batch, const float *x, const int32_t *y, const dg_plan_opts *opts,
                               bench_step_ref *ref) {
    *out = (bench_step_rows_check){.done = true, .err = NAN};
    bench_step s = {0};
    dg_status st = bench_step_build(&s, be, spec, batch, x, y, opts);
    if (st == DG_OK) st = bench_step_check(&s, spec, x, y, ref, &out->err, &out->ok);
    if (st == DG_OK && out->ok && !gpu) {
        double t0 = bench_now_s();
        st = dg_plan_run(s.p);
        out->warm_ms = 1e3 * (bench_now_s() - t0);
    }
    out->st = st;
    if (st != DG_OK || !out->ok) snprintf(out->why, sizeof out->why, "%s", dg_last_error()); /* the failure, or the errors */
    bench_step_free(&s);
}

static dg_status run_plan(void *arg) { return dg_plan_run(arg); }

dg_status bench_step_rows_prepare(const bench_step_rows_check *chk, const char *wrong_note, bench_step *s,
                                  dg_backend *be, bool gpu, const bench_step_spec *spec, const float *x,
                                  const int32_t *y, const dg_plan_opts *opts, bench_row *row, char *why, size_t why_n,
                                  bench_work *work) {
    row->max_rel_err = chk->err;
    if (chk->st != DG_OK) return dg_fail(chk->st, "%s", chk->why);
    if (!chk->ok) {
        row->status = "wrong";
        snprintf(why, why_n, "%s: %s", wrong_note, chk->why);
        row->note = why;
        return DG_OK;
    }
    float loss = NAN;
    dg_status st = bench_step_build(s, be, spec, (int)row->batch, x, y, opts);
    if (st == DG_OK) st = dg_plan_run(s->p);
    if (st == DG_OK) st = dg_plan_get(s->p, s->ts.loss, &loss, sizeof loss);
    if (st != DG_OK) return st;
    if (!isfinite(loss)) {
        row->status = "wrong";
        snprintf(why, why_n, "first full-batch loss %g, not finite", (double)loss);
        row->note = why;
        return DG_OK;
    }
    dg_plan_stats ps = dg_plan_stats_get(s->p);
    row->arena_bytes = (int64_t)ps.arena_bytes;
    row->live_bytes = (int64_t)ps.live_bytes;
    *work = (bench_work){.fn = run_plan, .arg = s->p, .be = be, .events = gpu};
    return DG_OK;
}
