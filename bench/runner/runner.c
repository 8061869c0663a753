/* runner.c: the one loop over a sweep's points and implementations
 * (runner.h): filters, progress, predictions, timing, status words and the
 * one site where rows are emitted. */
#include "runner/runner.h"
#include "runner/energy_window.h"

#include "runner/eta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_points_add(bench_points *list, bench_point pt) {
    if (list->n == list->cap) {
        int cap = list->cap ? 2 * list->cap : 64;
        bench_point *p = realloc(list->p, (size_t)cap * sizeof *p);
        if (!p) {
            list->oom = true;
            return;
        }
        list->p = p;
        list->cap = cap;
    }
    list->p[list->n++] = pt;
}

double bench_predict_s(const bench_point *pt, double last_ms, double last_work) {
    double work = pt->flops > 0 ? pt->flops : pt->bytes;
    if (!(last_ms > 0) || !(last_work > 0) || !(work > 0)) return 0;
    return last_ms * work / last_work / 1e3;
}

/* whether the row of im at pt is written at all: its backend is open, the
 * sweep says it applies, --case and --impl let it through */
static bool row_applies(const bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                        const bench_impl *im) {
    if (im->gpu ? !ctx->gpu : !ctx->cpu) return false;
    if (!bench_wanted(ctx, pt->name, im->name)) return false;
    return !spec->applies || spec->applies(ctx, pt, im);
}

/* the rate of a CPU implementation's last row (or probe), per implementation */
typedef struct rate { double ms, work; } rate;

/* A rate measured on work this many times smaller predicts a point poorly
 * (a 64^3 GEMM's rate says little of an 8192^3 one's): the sweep's probe is
 * asked again, and may measure something closer. */
#define RATE_REACH 64.0

/* why im does not run at pt, or NULL: the sweep's reason, else the time
 * predicted for a CPU row against --cpu-cap (*predicted_s: that time, 0
 * where none could be made) */
static const char *skip_reason(bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                               const bench_impl *im, rate *r, double *predicted_s, char *why, size_t n) {
    *predicted_s = 0;
    if (ctx->deadline_s > 0 && bench_now_s() > ctx->deadline_s) {
        snprintf(why, n, "the sweep's share of the run's time is spent (--budget %.0f s)", ctx->budget_s);
        return why;
    }
    const char *sweep_why = spec->skip ? spec->skip(ctx, pt, im, why, n) : NULL;
    if (sweep_why || im->gpu) return sweep_why;
    double work = pt->flops > 0 ? pt->flops : pt->bytes;
    if (spec->probe && (!(r->ms > 0) || work > RATE_REACH * r->work)) {
        double ms = 0, probe_work = 0; /* a probe that declines leaves the rate as it was */
        spec->probe(ctx, im, pt, &ms, &probe_work);
        if (ms > 0 && probe_work > 0) *r = (rate){ms, probe_work};
    }
    *predicted_s = bench_predict_s(pt, r->ms, r->work);
    if (*predicted_s > ctx->cpu_cap_s) {
        snprintf(why, n, "predicted %.1f s per run > cap %.1f s (--cpu-cap)", *predicted_s, ctx->cpu_cap_s);
        return why;
    }
    return NULL;
}

/* the columns every row of pt and im has, before anything is measured */
static bench_row row_of(const bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                        const bench_impl *im) {
    return (bench_row){.sweep = spec->name, .name = pt->name, .impl = im->name, .backend = im->gpu ? "gpu" : "cpu",
                       .m = pt->m, .n = pt->n, .k = pt->k, .batch = pt->batch, .threads = ctx->threads,
                       .precision = pt->precision, .transfer = im->transfer, .warmup = ctx->timing.warmup,
                       .st = BENCH_NO_STATS, .flops = pt->flops, .bytes = pt->bytes, .max_rel_err = NAN,
                       .check = spec->check_word};
}

/* status word of a setup that failed */
static const char *failed_word(dg_status st) { return st == DG_ERR_OOM ? "oom" : "failed"; }

/* prepares, times and checks one row; the row's status and columns set */
static void measure(bench_ctx *ctx, const bench_sweep_spec *spec, const bench_timing *timing, void *state,
                    const bench_impl *im, bench_row *row, bench_work *work) {
    dg_status st = spec->prepare(ctx, state, im, row, work);
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return;
    }
    if (row->status || work->no_row) return; /* prepare said what the row is */
    st = bench_time(work->be, work->events, work->fn, work->arg, timing, &row->st);
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return;
    }
    bool passed = !spec->check || spec->check(state, im, row);
    if (!row->status) row->status = passed ? "ok" : "wrong"; /* else the check's own failure word */
}

/* row->note, then what, into buf (row->note may already be buf); a note
 * longer than buf is cut */
static void append_note(bench_row *row, const char *what, char *buf, size_t n) {
    if (row->note != buf) snprintf(buf, n, "%s", row->note ? row->note : "");
    size_t len = strlen(buf);
    if (len && len + 2 < n) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    snprintf(buf + len, n - len, "%s", what);
    row->note = buf;
}

/* A CPU row against its prediction: a run that passed --cpu-cap (timed
 * once) is said in the row's note (appended to the sweep's, in buf); a
 * prediction missed by more than MISS_NOTED times is counted in the
 * sweep's worst miss, which the sweep's last line reports. */
#define MISS_NOTED 2.0
static void note_prediction(bench_ctx *ctx, bench_row *row, double predicted_s, char *buf, size_t n) {
    if (row->st.reps < 1 || !(predicted_s > 0)) return;
    double ran_s = row->st.median_ms / 1e3, miss = ran_s / predicted_s;
    if (miss > MISS_NOTED && miss > ctx->worst_miss) {
        ctx->worst_miss = miss;
        snprintf(ctx->worst_miss_row, sizeof ctx->worst_miss_row, "%s %s %lldx%lldx%lld", row->name, row->impl,
                 (long long)row->m, (long long)row->n, (long long)row->k);
    }
    if (!row->st.over_cap) return;
    char what[160];
    snprintf(what, sizeof what, "a run took %.1f s > cap %.1f s (--cpu-cap; predicted %.2g s): timed once", ran_s,
             ctx->cpu_cap_s, predicted_s);
    append_note(row, what, buf, n);
}

/* A timed row's energy (runner/energy_window.h) from the meter of its
 * backend; where there is none, or the window fails the rule, the note
 * says why and the energy columns stay empty. A failure of the work itself
 * in the window makes the row failed. */
static void measure_energy(bench_ctx *ctx, const bench_impl *im, const bench_work *work, bench_row *row, char *buf,
                           size_t n) {
    if (work->no_row || !row->status || !bench_row_timed(row) || ctx->no_energy) return; /* no row, or no times */
    /* a row that brought its own samples (no work to run again: the train
     * sweep's epoch) has no window to measure */
    const char *none = work->energy_none ? work->energy_none
                     : !work->fn         ? "the row timed its own runs: there is nothing to repeat in a window"
                                         : NULL;
    bench_energy_meter *m = work->energy ? work->energy
                          : none         ? NULL
                          : im->gpu      ? ctx->energy_gpu
                                         : ctx->energy_cpu;
    char what[300];
    if (!m) {
        snprintf(what, sizeof what, "no energy: %s",
                 none ? none : im->gpu ? ctx->energy_gpu_short : ctx->energy_cpu_short);
        append_note(row, what, buf, n);
        return;
    }
    bench_energy e;
    char why[256];
    dg_status st = bench_energy_measure(m, work->be, work->fn, work->arg, row->st.median_ms / 1e3,
                                        BENCH_ENERGY_MAX_S, &e, why, sizeof why);
    if (st == DG_OK) {
        row->energy_j = e.joules;
        row->energy_w = e.watts;
        return;
    }
    if (st == DG_ERR_UNSUPPORTED) {
        snprintf(what, sizeof what, "no energy: %s", why);
    } else {
        row->status = bench_status_word(st);
        snprintf(what, sizeof what, "failed in the energy window: %s", dg_last_error());
    }
    append_note(row, what, buf, n);
}

/* One sweep's run: its points, each implementation's last rate, and what
 * the rows so far say of the time the rest will take. */
typedef struct run_state {
    bench_ctx              *ctx;
    const bench_sweep_spec *spec;
    bench_points            pts;
    rate                   *rates; /* [spec->n_impls][DG_PREC_COUNT]: a precision has its own rate */
    bench_eta               eta;
} run_state;

/* the timing a row of im runs under */
static bench_timing timing_of(const bench_ctx *ctx, const bench_sweep_spec *spec, const bench_impl *im) {
    bench_timing timing = ctx->timing;
    timing.cold = timing.cold && !spec->hot;
    timing.run_cap_s = im->gpu ? 0 : ctx->cpu_cap_s; /* a CPU row whose prediction missed ends early */
    return timing;
}

/* Whether the rows left are estimated past the sweep's share of --budget:
 * then they run lean (lean_timing), so that more of them fit. */
static bool behind_budget(const bench_ctx *ctx) {
    return ctx->deadline_s > 0 && ctx->left_s > ctx->deadline_s - bench_now_s();
}

static void lean_timing(bench_timing *t) {
    if (t->warmup > 1) t->warmup = 1;
    t->warmup_s = 0;
    t->max_retries = 0;
}

/* ctx->left_s: the rows after point p's implementation i, each at its
 * prediction from the rates so far (a CPU row predicted past --cpu-cap is
 * skipped: no time), the others at the mean of such rows so far */
static void estimate_left(run_state *rs, int p, int i) {
    bench_ctx *ctx = rs->ctx;
    const bench_sweep_spec *spec = rs->spec;
    double predicted = 0;
    int unpredicted = 0;
    for (; p < rs->pts.n; p++, i = -1)
        for (int j = i + 1; j < spec->n_impls; j++) {
            const bench_point *pt = &rs->pts.p[p];
            const bench_impl *im = &spec->impls[j];
            if (!row_applies(ctx, spec, pt, im)) continue;
            const rate *r = &rs->rates[j * DG_PREC_COUNT + pt->precision];
            double run_s = im->gpu ? 0 : bench_predict_s(pt, r->ms, r->work);
            bench_timing t = timing_of(ctx, spec, im);
            if (run_s > ctx->cpu_cap_s) continue;
            if (run_s > 0) predicted += bench_eta_row_s(&t, run_s);
            else unpredicted++;
        }
    ctx->left_s = bench_eta_left(&rs->eta, predicted, unpredicted);
}

/* every row of point p; rs->rates updated from the rows that ran */
static void run_point(run_state *rs, int p) {
    bench_ctx *ctx = rs->ctx;
    const bench_sweep_spec *spec = rs->spec;
    const bench_point *pt = &rs->pts.p[p];
    void *state = NULL;
    bool set_up = false;
    dg_status setup_st = DG_OK;
    char setup_why[512] = "";
    for (int i = 0; i < spec->n_impls && !bench_interrupted; i++) {
        const bench_impl *im = &spec->impls[i];
        if (!row_applies(ctx, spec, pt, im)) continue;
        double t0 = bench_now_s();
        bench_row row = row_of(ctx, spec, pt, im);
        if (spec->columns) spec->columns(ctx, pt, im, &row);
        char why[256];
        double predicted_s;
        rate *r = &rs->rates[i * DG_PREC_COUNT + pt->precision];
        const char *skip = skip_reason(ctx, spec, pt, im, r, &predicted_s, why, sizeof why);
        bench_timing timing = timing_of(ctx, spec, im);
        double estimated_s = skip ? 0 : bench_eta_row_s(&timing, predicted_s);
        estimate_left(rs, p, i);
        if (skip) {
            row.status = "skipped";
            row.note = skip;
            bench_emit(ctx, &row);
            continue;
        }
        if (!set_up) {
            set_up = true;
            setup_st = spec->setup ? spec->setup(ctx, pt, &state) : DG_OK;
            if (setup_st != DG_OK) snprintf(setup_why, sizeof setup_why, "%s", dg_last_error());
        }
        if (setup_st != DG_OK) {
            row.status = failed_word(setup_st);
            row.note = setup_why;
            bench_emit(ctx, &row);
            continue;
        }
        bench_work work = {0};
        bool lean = behind_budget(ctx);
        if (lean) lean_timing(&timing);
        row.warmup = timing.warmup;
        measure(ctx, spec, &timing, state, im, &row, &work);
        char note[512];
        note_prediction(ctx, &row, predicted_s, note, sizeof note);
        measure_energy(ctx, im, &work, &row, note, sizeof note);
        if (lean) append_note(&row, "lean timing: the rows left are estimated past the sweep's share of --budget",
                              note, sizeof note);
        if (row.st.reps > 0 && !im->gpu) {
            r->ms = row.st.median_ms;
            r->work = pt->flops > 0 ? pt->flops : pt->bytes;
        }
        bench_eta_record(&rs->eta, estimated_s, bench_now_s() - t0);
        estimate_left(rs, p, i);
        if (work.no_row) ctx->planned--;
        else if (work.finding) bench_emit_finding(ctx, &row);
        else bench_emit(ctx, &row);
        if (spec->release) spec->release(state, im, &work);
    }
    if (set_up && setup_st == DG_OK && spec->teardown) spec->teardown(state);
}

/* the one row of a sweep that cannot run here */
static void unavailable_row(bench_ctx *ctx, const bench_sweep_spec *spec, const char *why) {
    fprintf(stderr, "bench: %s: %s\n", spec->name, why);
    bench_point pt = {.name = spec->name};
    bench_row row = row_of(ctx, spec, &pt, &spec->impls[0]);
    row.status = "skipped";
    row.note = why;
    bench_emit(ctx, &row);
}

static unsigned declared_precisions(const bench_sweep_spec *spec) {
    return spec->precisions ? spec->precisions : BENCH_PREC(DG_PREC_FP32);
}

/* The spec's points crossed with the run's precisions that it declares, in
 * row order: point, then precision (--dtype's order). */
static void list_points(bench_ctx *ctx, const bench_sweep_spec *spec, bench_points *out) {
    bench_points base = {0};
    spec->points(ctx, spec->arg, &base);
    out->oom = base.oom;
    dg_precision asked[DG_PREC_COUNT];
    int n = bench_precisions(ctx, asked);
    unsigned declared = declared_precisions(spec);
    for (int p = 0; p < base.n; p++)
        for (int i = 0; i < n; i++) {
            if (!(declared & BENCH_PREC(asked[i]))) continue;
            bench_point pt = base.p[p];
            pt.precision = asked[i];
            bench_points_add(out, pt);
        }
    free(base.p);
}

static dg_status list_spec(bench_ctx *ctx, const bench_sweep_spec *spec);

dg_status bench_run_spec(bench_ctx *ctx, const bench_sweep_spec *spec) {
    ctx->precisions_run |= declared_precisions(spec);
    if (spec->precisions_why) ctx->precisions_why = spec->precisions_why;
    if (ctx->list) return list_spec(ctx, spec);
    char why[512];
    const char *unavailable = spec->unavailable ? spec->unavailable(ctx, why, sizeof why) : NULL;
    if (unavailable) {
        unavailable_row(ctx, spec, unavailable);
        return DG_OK;
    }
    run_state rs = {.ctx = ctx, .spec = spec};
    list_points(ctx, spec, &rs.pts);
    rs.rates = calloc((size_t)spec->n_impls * DG_PREC_COUNT, sizeof *rs.rates);
    if (rs.pts.oom || !rs.rates) {
        free(rs.pts.p);
        free(rs.rates);
        return dg_fail(DG_ERR_OOM, "%s: out of host memory listing its rows", spec->name);
    }
    int rows = 0;
    for (int p = 0; p < rs.pts.n; p++)
        for (int i = 0; i < spec->n_impls; i++) rows += row_applies(ctx, spec, &rs.pts.p[p], &spec->impls[i]);
    bench_plan_rows(ctx, rows);
    for (int p = 0; p < rs.pts.n && !bench_interrupted; p++) run_point(&rs, p);
    free(rs.pts.p);
    free(rs.rates);
    return DG_OK;
}

/* "name" into names (n bytes, ", "-separated) unless it is there already */
static void add_name(char *names, size_t n, const char *name) {
    size_t len = strlen(names), k = strlen(name);
    for (const char *p = names; (p = strstr(p, name)) != NULL; p += k)
        if ((p == names || (p - names >= 2 && p[-2] == ',')) && (p[k] == ',' || p[k] == '\0')) return;
    snprintf(names + len, n - len, "%s%s", len ? ", " : "", name);
}

/* bench --list SWEEP: the rows, then the cases and implementations */
static dg_status list_spec(bench_ctx *ctx, const bench_sweep_spec *spec) {
    char why[512], cases[4096] = "", impls[1024] = "";
    const char *unavailable = spec->unavailable ? spec->unavailable(ctx, why, sizeof why) : NULL;
    if (unavailable) {
        fprintf(ctx->list, "%s: no rows on this machine: %s\n", spec->name, unavailable);
        return DG_OK;
    }
    bench_points pts = {0};
    list_points(ctx, spec, &pts);
    if (pts.oom) {
        free(pts.p);
        return dg_fail(DG_ERR_OOM, "%s: out of host memory listing its rows", spec->name);
    }
    int rows = 0;
    for (int p = 0; p < pts.n; p++)
        for (int i = 0; i < spec->n_impls; i++) {
            const bench_point *pt = &pts.p[p];
            const bench_impl *im = &spec->impls[i];
            if (!row_applies(ctx, spec, pt, im)) continue;
            fprintf(ctx->list, "%s %s %s %s %s m=%lld n=%lld k=%lld batch=%lld%s\n", spec->name, pt->name, im->name,
                    im->gpu ? "gpu" : "cpu", dg_precision_name(pt->precision), (long long)pt->m, (long long)pt->n,
                    (long long)pt->k, (long long)pt->batch, im->transfer ? " transfer" : "");
            add_name(cases, sizeof cases, pt->name);
            add_name(impls, sizeof impls, im->name);
            rows++;
        }
    fprintf(ctx->list, "%s: %d rows; --case: %s; --impl: %s\n", spec->name, rows, rows ? cases : "-",
            rows ? impls : "-");
    free(pts.p);
    return DG_OK;
}
