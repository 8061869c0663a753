/* plot.c: the machinery every sweep's report shares: tables, series,
 * speedups, crossovers, gnuplot scripts; and the driver that writes
 * summary.md from the registered sweeps' reports. Nothing here knows a
 * sweep: what is drawn and summarised lives next to each sweep. */
#include "charts/plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "charts/gnuplot.h"
#include "runner/sweep.h"

#define BENCH_MAX_SWEEPS_IN_DIR 16

bench_table bench_table_load(const char *dir, const char *sweep) {
    char path[1024];
    bench_table t = {NULL, 0, false};
    snprintf(path, sizeof path, "%s/%s.csv.partial", dir, sweep);
    if (access(path, F_OK) == 0)
        fprintf(stderr, "bench plot: %s: the rows of a run that did not finish (not drawn; rename it to %s.csv to "
                        "draw them)\n", path, sweep);
    snprintf(path, sizeof path, "%s/%s.csv", dir, sweep);
    if (access(path, F_OK) != 0) return t; /* that sweep was not run */
    t.r = bench_csv_read(path, &t.n);
    if (!t.r) {
        fprintf(stderr, "bench plot: %s\n", dg_last_error());
        t.unreadable = true;
    }
    return t;
}

const csv_rec *bench_table_row_prec(const bench_table *t, const char *name, const char *impl, long long m,
                                    dg_precision prec) {
    const csv_rec *r = NULL;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->r[i].name, name) && !strcmp(t->r[i].impl, impl) && t->r[i].m == m &&
            t->r[i].precision == prec)
            r = &t->r[i];
    return r;
}

const csv_rec *bench_table_row(const bench_table *t, const char *name, const char *impl, long long m) {
    return bench_table_row_prec(t, name, impl, m, DG_PREC_FP32);
}

int bench_table_ms(const bench_table *t, const char *name, long long *out, int n, int max) {
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->r[i].name, name)) continue;
        long long x = t->r[i].m;
        int at = 0;
        while (at < n && out[at] < x) at++;
        if ((at < n && out[at] == x) || n == max) continue;
        memmove(out + at + 1, out + at, (size_t)(n - at) * sizeof *out);
        out[at] = x;
        n++;
    }
    return n;
}

bool bench_row_measured(const csv_rec *r) {
    return (!strcmp(r->status, "ok") || !strcmp(r->status, "noisy")) && isfinite(r->median_ms);
}

bench_series bench_pick(const bench_table *t, const char *name, const char *impl, const char *backend,
                        bool transfer, bench_col col, const char *title) {
    return bench_pick_prec(t, name, impl, backend, DG_PREC_FP32, transfer, col, title);
}

bench_series bench_pick_prec(const bench_table *t, const char *name, const char *impl, const char *backend,
                             dg_precision prec, bool transfer, bench_col col, const char *title) {
    bench_series s = {.n = 0};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < t->n && s.n < BENCH_MAX_PTS; i++) {
        const csv_rec *r = &t->r[i];
        if ((name && strcmp(r->name, name)) || strcmp(r->impl, impl) || (backend && strcmp(r->backend, backend)) ||
            r->transfer != transfer || r->precision != prec)
            continue;
        if (!bench_row_measured(r)) continue;
        double y = col == BENCH_MS             ? r->median_ms
                 : col == BENCH_GFLOPS         ? r->gflops
                 : col == BENCH_GBPS           ? r->gbps
                 : col == BENCH_JOULES         ? r->energy_j
                 : !(r->energy_j > 0)          ? NAN
                 : col == BENCH_GFLOP_PER_J    ? r->gflops * r->median_ms / 1e3 / r->energy_j
                 : r->batch > 0                ? (double)r->batch / r->energy_j
                                               : NAN;
        if (!isfinite(y)) continue;
        /* a rate is work / time: the slowest run gives its low end; an
         * energy is one window's figure, without a spread */
        bool energy = col >= BENCH_JOULES;
        bool ms = col == BENCH_MS, bars = !energy && isfinite(r->min_ms) && isfinite(r->max_ms) && r->min_ms > 0;
        s.x[s.n] = (double)r->m;
        s.y[s.n] = y;
        s.lo[s.n] = !bars ? y : ms ? r->min_ms : y * r->median_ms / r->max_ms;
        s.hi[s.n] = !bars ? y : ms ? r->max_ms : y * r->median_ms / r->min_ms;
        s.noisy[s.n++] = !strcmp(r->status, "noisy");
    }
    return s;
}

double bench_series_max(const bench_series *s, double *at) {
    double best = NAN, x = NAN;
    for (int i = 0; i < s->n; i++)
        if (isnan(best) || s->y[i] > best) { best = s->y[i]; x = s->x[i]; }
    if (at) *at = x;
    return best;
}

bench_series bench_speedup(const bench_series *cpu, const bench_series *gpu, const char *title) {
    bench_series s = {.n = 0};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < gpu->n; i++)
        for (int j = 0; j < cpu->n; j++)
            if (cpu->x[j] == gpu->x[i] && s.n < BENCH_MAX_PTS) {
                /* the bar spans the ratios of the extremes */
                s.x[s.n] = gpu->x[i];
                s.y[s.n] = cpu->y[j] / gpu->y[i];
                s.lo[s.n] = cpu->lo[j] / gpu->hi[i];
                s.hi[s.n] = cpu->hi[j] / gpu->lo[i];
                s.noisy[s.n++] = cpu->noisy[j] || gpu->noisy[i];
            }
    return s;
}

double bench_crossover(const bench_series *sp) {
    double x = NAN;
    for (int i = sp->n - 1; i >= 0 && sp->y[i] >= 1.0; i--) x = sp->x[i];
    return x;
}

void bench_crossover_str(const bench_series *sp, char *buf, size_t n) {
    double x = bench_crossover(sp);
    if (sp->n == 0) snprintf(buf, n, "n/a (not measured on both)");
    else if (isnan(x)) snprintf(buf, n, "none: CPU faster at the largest size (%.0f)", sp->x[sp->n - 1]);
    else if (x == sp->x[0]) snprintf(buf, n, "<= %.0f (GPU faster at every size)", x);
    else snprintf(buf, n, "%.0f", x);
}

void bench_energy_crossover_str(const bench_series *sp, char *buf, size_t n) {
    double x = bench_crossover(sp);
    if (sp->n == 0) snprintf(buf, n, "n/a (no energy on both)");
    else if (isnan(x)) snprintf(buf, n, "none: CPU uses less at the largest size (%.0f)", sp->x[sp->n - 1]);
    else if (x == sp->x[0]) snprintf(buf, n, "<= %.0f (GPU uses less at every size)", x);
    else snprintf(buf, n, "%.0f", x);
}

const char *bench_fmt_num(double v, const char *fmt, char *buf, size_t n) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "-");
    return buf;
}

void bench_chart_add(bench_chart *c, bench_series s) {
    if (s.n > 0 && c->n < 12) c->s[c->n++] = s;
}

void bench_chart_hline(bench_chart *c, double y, const char *title) {
    if (isfinite(y) && c->n_hline < 4) {
        c->hline[c->n_hline] = y;
        c->hline_title[c->n_hline++] = title;
    }
}

/* the metadata keys a provenance line names, in its order */
enum { PROV_CPU, PROV_CORES, PROV_GPU, PROV_DATE, PROV_COMMIT, N_PROV };
static const char *const prov_keys[N_PROV] = {"cpu", "cores", "gpu", "date", "git commit"};

static void provenance_format(char v[N_PROV][160], char *buf, size_t n) {
    *buf = '\0';
    if (!*v[PROV_CPU] && !*v[PROV_GPU] && !*v[PROV_DATE] && !*v[PROV_COMMIT]) return;
    snprintf(buf, n, "cpu %.70s (%.8s cores), gpu %.50s, %.40s, commit %.40s", *v[PROV_CPU] ? v[PROV_CPU] : "?",
             *v[PROV_CORES] ? v[PROV_CORES] : "?", *v[PROV_GPU] ? v[PROV_GPU] : "?",
             *v[PROV_DATE] ? v[PROV_DATE] : "date ?", *v[PROV_COMMIT] ? v[PROV_COMMIT] : "?");
}

void bench_csv_provenance(const char *dir, const char *sweep, char *buf, size_t n) {
    char path[1200], v[N_PROV][160];
    snprintf(path, sizeof path, "%s/%s.csv", dir, sweep);
    *buf = '\0';
    if (access(path, F_OK) != 0) return;
    for (int k = 0; k < N_PROV; k++) bench_csv_meta(path, prov_keys[k], v[k], sizeof v[k]);
    provenance_format(v, buf, n);
}

void bench_meta_provenance(const char *meta, char *buf, size_t n) {
    char v[N_PROV][160] = {{0}};
    /* lines "# KEY: VALUE" */
    for (const char *l = meta; l && *l;) {
        size_t len = strcspn(l, "\n");
        for (int k = 0; k < N_PROV; k++) {
            size_t kl = strlen(prov_keys[k]);
            if (len > kl + 4 && !strncmp(l, "# ", 2) && !strncmp(l + 2, prov_keys[k], kl) &&
                !strncmp(l + 2 + kl, ": ", 2))
                snprintf(v[k], sizeof v[k], "%.*s", (int)(len - kl - 4), l + kl + 4);
        }
        l += len + (l[len] == '\n');
    }
    provenance_format(v, buf, n);
}

void bench_pow2_label(double v, char *buf, size_t n) {
    static const char unit[] = " KMGT";
    int e = 0;
    double m = frexp(v, &e); /* v = m 2^e, m in [0.5, 1): a power of two has m = 0.5 */
    if (v >= 1024 && m == 0.5 && (e - 1) / 10 < (int)sizeof unit - 1)
        snprintf(buf, n, "%.0f%c", ldexp(1, (e - 1) % 10), unit[(e - 1) / 10]);
    else
        snprintf(buf, n, "%g", v);
}

/* `set xtics (...)` at the powers of two around the x values of c's series,
 * labelled 4K, 64K, 1M (gnuplot's own %c reads 65536 as 66k); every second
 * or fourth power where there would be more than 12 */
static void pow2_tics(FILE *g, const bench_chart *c) {
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->s[i].n; j++)
            if (c->s[i].x[j] > 0 && isfinite(c->s[i].x[j])) {
                lo = fmin(lo, c->s[i].x[j]);
                hi = fmax(hi, c->s[i].x[j]);
            }
    if (!(hi > 0)) return;
    int e0 = (int)floor(log2(lo)), e1 = (int)ceil(log2(hi)), step = 1;
    while ((e1 - e0) / step > 12) step *= 2;
    fprintf(g, "set xtics (");
    for (int e = e0; e <= e1; e += step) {
        char label[32];
        bench_pow2_label(ldexp(1, e), label, sizeof label);
        fprintf(g, "%s'%s' %.17g", e > e0 ? ", " : "", label, ldexp(1, e));
    }
    fprintf(g, ")\n");
}

/* The script names its data files relative to the result folder and gnuplot
 * runs inside it, so the folder's name is in neither; every title is quoted
 * (bench_gnuplot_quote: case names come from CSV files). `cd DIR && gnuplot
 * plot-data/FILE.gp` redraws a chart by hand. 0, or 1 when a file cannot be
 * written or gnuplot fails. */
static int draw(const bench_report *rep, const bench_chart *c) {
    const char *dir = rep->dir;
    char path[1200], script[256];
    snprintf(path, sizeof path, "%s/plot-data", dir);
    if (mkdir(path, 0755) && errno != EEXIST) {
        fprintf(stderr, "bench plot: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    snprintf(script, sizeof script, "plot-data/%s.gp", c->file);
    snprintf(path, sizeof path, "%s/%s", dir, script);
    FILE *g = fopen(path, "w");
    if (!g) { fprintf(stderr, "bench plot: cannot write %s: %s\n", path, strerror(errno)); return 1; }
    /* a title that promises ceilings, drawn without any: it says so */
    char title[512];
    snprintf(title, sizeof title, "%s%s", c->title,
             strstr(c->title, "ceiling") && c->n_hline == 0 ? " (no ceiling measured: bench --sweep ceiling)" : "");
    fprintf(g, "set datafile missing NaN\nset title ");
    bench_gnuplot_quote(g, title);
    fprintf(g, "\nset xlabel ");
    bench_gnuplot_quote(g, c->xlabel);
    fprintf(g, "\nset ylabel ");
    bench_gnuplot_quote(g, c->ylabel);
    fprintf(g, "\nset grid\nset key outside right\n");
    if (!c->linx) {
        fprintf(g, "set logscale x 2\n");
        pow2_tics(g, c);
    }
    if (*rep->provenance) { /* where the figures come from, on the image itself */
        fprintf(g, "set bmargin 5\nset label ");
        bench_gnuplot_quote(g, rep->provenance);
        fprintf(g, " at screen 0.01, screen 0.02 left font ',8' tc rgb 'grey40'\n");
    }
    if (c->logy) fprintf(g, "set logscale y 10\n");
    if (isfinite(c->vline))
        fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'red'\n"
                   "set label 'crossover %g' at %g, graph 0.95 tc rgb 'red' offset 0.5,0\n",
                c->vline, c->vline, c->vline, c->vline);
    for (int i = 0; i < c->n; i++) {
        snprintf(path, sizeof path, "%s/plot-data/%s-%d.dat", dir, c->file, i);
        FILE *d = fopen(path, "w");
        if (!d) {
            fprintf(stderr, "bench plot: cannot write %s: %s\n", path, strerror(errno));
            fclose(g);
            return 1;
        }
        /* x y lo hi noisy: lo and hi are the error bar (min and max runs) */
        for (int j = 0; j < c->s[i].n; j++)
            fprintf(d, "%.9g %.9g %.9g %.9g %d\n", c->s[i].x[j], c->s[i].y[j], c->s[i].lo[j], c->s[i].hi[j],
                    c->s[i].noisy[j]);
        fclose(d);
    }
    bool any_noisy = false;
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->s[i].n; j++) any_noisy |= c->s[i].noisy[j];
    fprintf(g, "plot ");
    for (int i = 0; i < c->n; i++) {
        fprintf(g, "%s'plot-data/%s-%d.dat' using 1:2:3:4 with yerrorlines lw 2 title ", i ? ", \\\n     " : "",
                c->file, i);
        bench_gnuplot_quote(g, c->s[i].title);
    }
    /* noisy rows (cv above --max-cv): a large ring around the point */
    for (int i = 0; any_noisy && i < c->n; i++)
        fprintf(g, ", \\\n     'plot-data/%s-%d.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb "
                   "'red' %s",
                c->file, i, i ? "notitle" : "title 'noisy (cv above --max-cv)'");
    for (int i = 0; i < c->n_hline; i++) {
        fprintf(g, ", \\\n     %g with lines dt 3 lw 2 title ", c->hline[i]);
        bench_gnuplot_quote(g, c->hline_title[i]);
    }
    fprintf(g, "\n");
    if (fclose(g)) { fprintf(stderr, "bench plot: cannot write %s/%s\n", dir, script); return 1; }
    return bench_gnuplot_run(dir, script, c->file);
}

void bench_chart_draw(bench_report *rep, const bench_chart *c) {
    if (rep->gnuplot && c->n > 0 && draw(rep, c)) rep->failed = true;
}

/* the ceilings every chart's lines come from, from the sweep that measures them */
static bool load_ceilings(const char *dir, bench_ceilings *c, bool *failed) {
    *c = BENCH_NO_CEILINGS;
    bool found = false;
    for (int i = 0; i < bench_n_sweeps; i++) {
        if (!bench_sweeps[i].ceilings) continue;
        bench_table t = bench_table_load(dir, bench_sweeps[i].name);
        *failed |= t.unreadable;
        if (t.n) bench_sweeps[i].ceilings(&t, c);
        found |= t.n > 0;
        free(t.r);
    }
    return found;
}

/* one line per device, one GEMM column per precision ("-" where not
 * measured: the CPU has no TF32) */
static void write_ceilings(FILE *sum, const bench_ceilings *c) {
    char b[32];
    fprintf(sum, "## Ceilings (measured)\n\n| device |");
    for (int p = 0; p < DG_PREC_COUNT; p++) fprintf(sum, " GEMM %s GFLOP/s |", dg_precision_name((dg_precision)p));
    fprintf(sum, " copy GB/s |\n|---|");
    for (int p = 0; p <= DG_PREC_COUNT; p++) fprintf(sum, "---|");
    for (int d = 0; d < 2; d++) {
        const double *gemm = d ? c->gpu_gemm : c->cpu_gemm;
        fprintf(sum, "\n| %s |", d ? "GPU" : "CPU");
        for (int p = 0; p < DG_PREC_COUNT; p++) fprintf(sum, " %s |", bench_fmt_num(gemm[p], "%.1f", b, sizeof b));
        fprintf(sum, " %s |", bench_fmt_num(d ? c->gpu_gbps : c->cpu_gbps, "%.1f", b, sizeof b));
    }
    fprintf(sum, "\n\n");
}

/* the status counts of a table */
static void count_rows(const bench_table *t, int *ok, int *noisy, int *wrong, int *other) {
    *ok = *noisy = *wrong = *other = 0;
    for (int i = 0; i < t->n; i++) {
        const char *st = t->r[i].status;
        if (!strcmp(st, "ok")) (*ok)++;
        else if (!strcmp(st, "noisy")) (*noisy)++;
        else if (!strcmp(st, "wrong")) (*wrong)++;
        else (*other)++;
    }
}

/* Where each CSV comes from (machine, date, commit) and what its rows say;
 * a folder whose CSV files come from more than one run says so first. */
static void write_provenance(FILE *sum, const char *dir) {
    char runs[BENCH_MAX_SWEEPS_IN_DIR][64];
    int n_runs = 0;
    char *table = NULL;
    size_t table_len = 0;
    FILE *t = open_memstream(&table, &table_len);
    if (!t) return;
    fprintf(t, "| file | date | commit | cpu | gpu | rows | ok | noisy | wrong | other |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < bench_n_sweeps; i++) {
        char path[1200], date[64], commit[64], cpu[160], gpu[160];
        snprintf(path, sizeof path, "%s/%s.csv", dir, bench_sweeps[i].name);
        if (access(path, F_OK) != 0) continue;
        bench_csv_meta(path, "date", date, sizeof date);
        bench_csv_meta(path, "git commit", commit, sizeof commit);
        bench_csv_meta(path, "cpu", cpu, sizeof cpu);
        bench_csv_meta(path, "gpu", gpu, sizeof gpu);
        bench_table tb = bench_table_load(dir, bench_sweeps[i].name);
        int ok, noisy, wrong, other;
        count_rows(&tb, &ok, &noisy, &wrong, &other);
        free(tb.r);
        fprintf(t, "| %s.csv | %s | %s | %s | %.60s | %d | %d | %d | %d | %d |\n", bench_sweeps[i].name,
                *date ? date : "?", *commit ? commit : "?", *cpu ? cpu : "?", *gpu ? gpu : "?", tb.n, ok, noisy,
                wrong, other);
        /* one run: one start date and commit for all its files */
        char run[64];
        snprintf(run, sizeof run, "%.40s %.20s", date, commit);
        bool seen = false;
        for (int r = 0; r < n_runs; r++) seen |= !strcmp(runs[r], run);
        if (!seen && n_runs < BENCH_MAX_SWEEPS_IN_DIR) snprintf(runs[n_runs++], sizeof runs[0], "%s", run);
    }
    fclose(t);
    if (n_runs > 1) {
        fprintf(sum, "**This folder mixes %d runs** (different start dates or commits below): figures from "
                     "different files were not measured together.\n\n", n_runs);
        fprintf(stderr, "bench plot: %s mixes %d runs: the summary says so\n", dir, n_runs);
    }
    fprintf(sum, "## Provenance\n\nStatus: ok = checked and timed; noisy = checked, timed, spread above "
                 "--max-cv; wrong = failed its check (no time); other = failed, error, oom, unsupported, "
                 "skipped, interrupted (column note says why).\n\n");
    fwrite(table, 1, table_len, sum);
    fprintf(sum, "\n");
    free(table);
}

/* The sections are gathered in memory first: a folder with nothing to
 * report keeps its summary.md untouched. */
int bench_plot(const char *dir, FILE *out) {
    bench_report rep = {.dir = dir, .gnuplot = bench_gnuplot_found()};
    bool found = load_ceilings(dir, &rep.ceil, &rep.failed);
    char *body = NULL;
    size_t body_len = 0;
    rep.sum = open_memstream(&body, &body_len);
    if (!rep.sum) { fprintf(stderr, "bench plot: out of memory\n"); return 1; }
    for (int i = 0; i < bench_n_sweeps; i++) {
        if (!bench_sweeps[i].report) continue;
        bench_table t = bench_table_load(dir, bench_sweeps[i].name);
        rep.failed |= t.unreadable; /* the other files are still drawn */
        bench_csv_provenance(dir, bench_sweeps[i].name, rep.provenance, sizeof rep.provenance);
        found |= bench_sweeps[i].report(&rep, &t);
        free(t.r);
    }
    fclose(rep.sum);
    if (!found) {
        fprintf(stderr, "bench plot: no bench CSV files in %s (sweeps: ", dir);
        for (int i = 0; i < bench_n_sweeps; i++) fprintf(stderr, "%s%s", i ? ", " : "", bench_sweeps[i].name);
        fprintf(stderr, ")\n");
        free(body);
        return 1;
    }
    /* written aside and renamed: a crash leaves the earlier summary whole */
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *sum = fopen(tmp, "w");
    if (!sum) {
        fprintf(stderr, "bench plot: cannot write %s: %s\n", tmp, strerror(errno));
        free(body);
        return 1;
    }
    fprintf(sum, "# duograd bench summary\n\nFrom the CSV files in this folder (metadata in their `#` lines). "
                 "Crossover: the smallest size from which the GPU is faster at every larger measured size.\n\n");
    write_provenance(sum, dir);
    write_ceilings(sum, &rep.ceil);
    fwrite(body, 1, body_len, sum);
    free(body);
    if (!rep.gnuplot)
        fprintf(sum, "Charts were not drawn: gnuplot is not installed (`apt-get install gnuplot-nox`, then "
                     "`bench plot DIR`).\n");
    bool written = !ferror(sum);
    if (fclose(sum) || !written || rename(tmp, path)) {
        fprintf(stderr, "bench plot: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    if (!rep.gnuplot) fprintf(stderr, "bench: gnuplot not found: CSV and summary written; install gnuplot-nox and run "
                                      "'bench plot %s' for the charts\n", dir);
    if (out) {
        FILE *s = fopen(path, "r");
        char line[512];
        while (s && fgets(line, sizeof line, s)) fputs(line, out);
        if (s) fclose(s);
    }
    return rep.failed ? 1 : 0;
}
