/* compare.c: see compare.h. Per sweep: read both folders, pair the rows,
 * judge each pair, write its table, then the sweep's and the overall
 * geometric mean of the ratios. */
#include "cli/compare.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/compare_machine.h"
#include "cli/compare_side.h"
#include "cli/options.h"
#include "core/status.h"
#include "writers/json.h"
#include "runner/stats.h"
#include "runner/sweep.h"

/* The result files compared: each registered sweep's NAME.json / NAME.csv,
 * then the files the peers write of their own (bench/peers/__init__.py's
 * table; their rows are in bench's CSV format, medians only). */
static const char *const peer_files[] = {"torch_ops", "torch_attention", "torch_mlp"};
#define N_PEER_FILES (int)(sizeof peer_files / sizeof *peer_files)

static const char *file_name(int i) {
    return i < bench_n_sweeps ? bench_sweeps[i].name : peer_files[i - bench_n_sweeps];
}
#define N_FILES (bench_n_sweeps + N_PEER_FILES)

/* a row with a time to compare: measured and checked (noisy is flagged, not wrong) */
static bool comparable(const bench_json_rec *r) {
    return (!strcmp(r->rec.status, "ok") || !strcmp(r->rec.status, "noisy")) && isfinite(r->rec.median_ms) &&
           r->rec.median_ms > 0;
}

typedef enum verdict { V_SAME, V_FASTER, V_SLOWER, V_NOT_SIGNIFICANT, N_VERDICTS } verdict;
static const char *const verdict_names[N_VERDICTS] = {"same", "faster", "slower", "not significant"};

/* what a sweep (or the whole comparison) counts */
typedef struct tally {
    int     matched, only_a, only_b, not_compared, verdicts[N_VERDICTS];
    int     medians_only; /* rows beyond the threshold judged without a U test */
    double *ratios; /* of the compared rows: their geometric mean */
    int     n_ratios, cap;
} tally;

static dg_status add_ratio(tally *t, double ratio) {
    if (t->n_ratios == t->cap) {
        double *more = realloc(t->ratios, (size_t)(t->cap = t->cap ? 2 * t->cap : 256) * sizeof *more);
        if (!more) return dg_fail(DG_ERR_OOM, "out of memory comparing");
        t->ratios = more;
    }
    t->ratios[t->n_ratios++] = ratio;
    return DG_OK;
}

/* Beyond the threshold and p < alpha: slower or faster; beyond it with p
 * >= alpha: not significant; within it: same. Where a side has no
 * repetitions to test (NAME.csv's medians, a row of one run), the medians
 * alone decide beyond the threshold: a gross regression fails the
 * comparison even against a baseline without samples. *p: NaN when
 * untested; *why: the reason, or "". */
static dg_status judge(const bench_json_rec *a, const bench_json_rec *b, const bench_compare_opts *o, double *p,
                       const char **why, verdict *v) {
    double change = b->rec.median_ms / a->rec.median_ms - 1;
    bool beyond = fabs(change) > o->threshold_pct / 100;
    *p = NAN;
    *why = "";
    if (!a->samples || !b->samples) *why = "no U test: CSV medians only";
    else if (a->n_samples < BENCH_UTEST_MIN_REPS || b->n_samples < BENCH_UTEST_MIN_REPS)
        *why = "no U test: under 2 repetitions";
    else {
        bench_utest u;
        dg_status st = bench_mann_whitney(a->samples, a->n_samples, b->samples, b->n_samples, &u);
        if (st != DG_OK) return st;
        *p = u.p;
        if (a->n_samples < BENCH_UTEST_GOOD_REPS || b->n_samples < BENCH_UTEST_GOOD_REPS)
            *why = "under 9 repetitions: weak";
    }
    if (!beyond) *v = V_SAME;
    else if (isnan(*p)) *v = change > 0 ? V_SLOWER : V_FASTER;
    else if (*p >= o->alpha) *v = V_NOT_SIGNIFICANT;
    else *v = change > 0 ? V_SLOWER : V_FASTER;
    return DG_OK;
}

/* "A: gemm.json" / "A: gemm.csv (medians only, no U test)" / "A: mlp.json
 * and 4 rows of mlp.csv alone (medians only, no U test)" */
static void describe_side(FILE *out, const char *which, const char *name, const bench_side *s) {
    if (!s->json) fprintf(out, "%s: %s.csv (medians only, no U test)", which, name);
    else if (!s->csv_only) fprintf(out, "%s: %s.json", which, name);
    else fprintf(out, "%s: %s.json and %d rows of %s.csv alone (medians only, no U test)", which, name, s->csv_only, name);
}

static void row_cells(FILE *out, const bench_json_rec *r) {
    const csv_rec *c = &r->rec;
    fprintf(out, "| %s | %s | %s | %s | %s | %lld | %lld | %lld | %lld | %d | %d |", c->sweep, c->name, c->impl,
            c->backend, dg_precision_name(c->precision), c->m, c->n, c->k, c->batch, c->transfer, r->cold);
}

#define ROW_HEADER "| sweep | case | impl | backend | dtype | m | n | k | batch | transfer | cold |"
#define ROW_RULE   "|---|---|---|---|---|---|---|---|---|---|---|"

/* why a row is not compared: its status and, from a NAME.json, its message */
static const char *not_ok_reason(const bench_json_rec *r) {
    if (r->message[0]) return r->message;
    return comparable(r) ? "ok" : r->rec.status[0] ? r->rec.status : "no time";
}

static void summary_line(FILE *out, const char *what, const tally *t) {
    double g = bench_geomean(t->ratios, t->n_ratios);
    fprintf(out, "%s: %d rows matched, %d compared", what, t->matched, t->n_ratios);
    if (t->n_ratios) fprintf(out, ", geometric mean of the ratios B/A %.4f", g);
    for (int v = 0; v < N_VERDICTS; v++) fprintf(out, "; %s %d", verdict_names[v], t->verdicts[v]);
    fprintf(out, "; judged by the medians alone (no U test) %d", t->medians_only);
    fprintf(out, "; not compared %d; only in A %d; only in B %d\n", t->not_compared, t->only_a, t->only_b);
}

/* one sweep's section: the compared rows, then those not compared and why; counts into t */
static dg_status compare_sweep(const char *sweep, const bench_side *a, const bench_side *b, const bench_compare_opts *o,
                               FILE *out, tally *t) {
    int *match = malloc((b->n ? (size_t)b->n : 1) * sizeof *match); /* B row i pairs with A row match[i], -1: none */
    bool *used = calloc(a->n ? (size_t)a->n : 1, sizeof *used);
    if (!match || !used) {
        free(match);
        free(used);
        return dg_fail(DG_ERR_OOM, "out of memory comparing %s", sweep);
    }
    for (int i = 0; i < b->n; i++) {
        match[i] = -1;
        for (int k = 0; k < a->n; k++) {
            int j = (i + k) % a->n; /* the folders usually hold the rows in one order: look there first */
            if (!used[j] && bench_same_case(&b->recs[i], &a->recs[j])) {
                match[i] = j;
                used[j] = true;
                break;
            }
        }
    }
    fprintf(out, "## %s\n\n", sweep);
    describe_side(out, "A", sweep, a);
    fputs("  \n", out);
    describe_side(out, "B", sweep, b);
    fputs("\n\n", out);
    fprintf(out, ROW_HEADER " A ms | B ms | ratio | p | verdict |\n" ROW_RULE "---|---|---|---|---|\n");
    dg_status st = DG_OK;
    for (int i = 0; i < b->n && st == DG_OK; i++) {
        if (match[i] < 0) continue;
        t->matched++;
        const bench_json_rec *ra = &a->recs[match[i]], *rb = &b->recs[i];
        if (!comparable(ra) || !comparable(rb)) continue;
        double p;
        const char *why;
        verdict v;
        if ((st = judge(ra, rb, o, &p, &why, &v)) != DG_OK || (st = add_ratio(t, rb->rec.median_ms / ra->rec.median_ms)))
            break;
        t->verdicts[v]++;
        t->medians_only += v != V_SAME && isnan(p);
        row_cells(out, rb);
        fprintf(out, " %.4g | %.4g | %.3f |", ra->rec.median_ms, rb->rec.median_ms, rb->rec.median_ms / ra->rec.median_ms);
        if (isnan(p)) fprintf(out, " - |");
        else fprintf(out, " %.3g |", p);
        fprintf(out, " %s%s%s%s |\n", verdict_names[v], *why ? " (" : "", why, *why ? ")" : "");
    }
    if (st == DG_OK) {
        bool header = false;
        for (int i = 0; i < b->n; i++) {
            if (match[i] < 0 || (comparable(&a->recs[match[i]]) && comparable(&b->recs[i]))) continue;
            if (!header) fprintf(out, "\nnot compared:\n\n" ROW_HEADER " why |\n" ROW_RULE "---|\n");
            header = true;
            t->not_compared++;
            row_cells(out, &b->recs[i]);
            fprintf(out, " A: %s; B: %s |\n", not_ok_reason(&a->recs[match[i]]), not_ok_reason(&b->recs[i]));
        }
        for (int i = 0; i < b->n; i++) t->only_b += match[i] < 0;
        for (int j = 0; j < a->n; j++) t->only_a += !used[j];
        fputc('\n', out);
        summary_line(out, sweep, t);
        fputc('\n', out);
    }
    free(match);
    free(used);
    return st;
}

static void tally_add(tally *all, const tally *t) {
    all->matched += t->matched;
    all->only_a += t->only_a;
    all->only_b += t->only_b;
    all->not_compared += t->not_compared;
    all->medians_only += t->medians_only;
    for (int v = 0; v < N_VERDICTS; v++) all->verdicts[v] += t->verdicts[v];
}

/* 0, or 1 with a message: compare reads folders only */
static int check_dir(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb)) {
        fprintf(stderr, "bench compare: cannot read %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "bench compare: %s is not a folder\n", dir);
        return 1;
    }
    return 0;
}

/* Whether a file present in both folders was measured on another machine
 * in B than in A; msg then names the file, the field and both machines. */
static bool machines_differ(const char *dir_a, const char *dir_b, char *msg, size_t n) {
    for (int f = 0; f < N_FILES; f++) {
        char pa[1200], pb[1200];
        if (bench_result_file(dir_a, file_name(f), pa, sizeof pa) && bench_result_file(dir_b, file_name(f), pb, sizeof pb) &&
            bench_machine_mismatch(pa, pb, msg, n))
            return true;
    }
    return false;
}

int bench_compare(const char *dir_a, const char *dir_b, const bench_compare_opts *o, FILE *out) {
    if (check_dir(dir_a) || check_dir(dir_b)) return 1;
    char machines[1024];
    bool across = machines_differ(dir_a, dir_b, machines, sizeof machines);
    if (across && !o->across_machines) {
        fprintf(stderr, "bench compare: %s and %s are runs from different machines (%s); their times do not compare. "
                        "--across-machines compares them anyway\n", dir_a, dir_b, machines);
        return 2;
    }
    if (across) fprintf(out, "# bench compare: B against A, runs from different machines (--across-machines): %s\n\n", machines);
    else fprintf(out, "# bench compare: B against A\n\n");
    fprintf(out, "A: %s  \nB: %s\n\n", dir_a, dir_b);
    fprintf(out, "ratio = median B / median A (< 1: B is faster). p: two-sided Mann-Whitney U test of the two rows' "
                 "repetitions, as Google Benchmark's compare.py computes it (scipy: exact below 9 values a side "
                 "without ties, else the normal approximation with tie and continuity corrections; no test below "
                 "%d repetitions a side, weak below %d). Verdict: slower or faster when the ratio is beyond "
                 "1 +- %g%% and p < %g; not significant when beyond it with p >= %g; same within it. Where a side "
                 "has no repetitions to test (NAME.csv's medians, a peer's rows, a row of one run), the medians "
                 "alone decide beyond the threshold (marked 'no U test').\n\n",
            BENCH_UTEST_MIN_REPS, BENCH_UTEST_GOOD_REPS, o->threshold_pct, o->alpha, o->alpha);
    tally all = {0};
    int files = 0, rc = 0;
    for (int f = 0; f < N_FILES && !rc; f++) { /* the results present in both */
        const char *name = file_name(f);
        bench_side a, b;
        int la = bench_compare_load(dir_a, name, &a), lb = la == 1 ? bench_compare_load(dir_b, name, &b) : 0;
        if (la == 1 && lb == 1) {
            files++;
            tally t = {0};
            if (compare_sweep(name, &a, &b, o, out, &t) != DG_OK) {
                fprintf(stderr, "bench compare: %s\n", dg_last_error());
                rc = 1;
            }
            tally_add(&all, &t);
            for (int i = 0; !rc && i < t.n_ratios; i++)
                if (add_ratio(&all, t.ratios[i]) != DG_OK) {
                    fprintf(stderr, "bench compare: %s\n", dg_last_error());
                    rc = 1;
                }
            free(t.ratios);
        }
        if (la < 0 || lb < 0) rc = 1;
        if (la == 1) bench_json_recs_free(a.recs, a.n);
        if (lb == 1) bench_json_recs_free(b.recs, b.n);
    }
    if (!rc && !files) {
        fprintf(stderr, "bench compare: no sweep result (NAME.json or NAME.csv) present in both %s and %s\n", dir_a,
                dir_b);
        rc = 1;
    }
    if (!rc) {
        summary_line(out, "**overall**", &all);
        if (out != stdout) summary_line(stdout, "overall", &all); /* the report went to a file: its gist */
        if (all.verdicts[V_SLOWER]) {
            fprintf(stderr, "bench compare: %d rows of B slower than A by more than %g%% (p < %g, or by the medians "
                    "alone where no U test was possible): exit %d\n", all.verdicts[V_SLOWER], o->threshold_pct, o->alpha,
                    BENCH_COMPARE_REGRESSION);
            rc = BENCH_COMPARE_REGRESSION;
        }
    }
    free(all.ratios);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench compare [--threshold PCT] [--alpha A] [--across-machines] [--out FILE] DIR_A DIR_B\n"
            "\n"
            "Pairs the rows of each sweep in two result folders (B against A) and reports the ratio of\n"
            "medians B/A, a two-sided Mann-Whitney U test of the repetitions (from NAME.json; rows only in\n"
            "NAME.csv, such as the peers', and a folder with only NAME.csv give medians, no test), a verdict\n"
            "per row, and per sweep and overall the geometric mean of the ratios. Runs from different\n"
            "machines (CPU model, cores, GPU model, OpenBLAS core, from the files' metadata) are refused.\n"
            "Nothing is written into DIR_A or DIR_B.\n"
            "\n"
            "  --threshold PCT    a change within +-PCT percent is 'same' (default 5; 0 to 1000)\n"
            "  --alpha A          significance level of the U test (default 0.05; above 0, at most 1)\n"
            "  --across-machines  compare runs from different machines all the same (the report's first\n"
            "                     line says so)\n"
            "  --out FILE         the markdown report to FILE (via FILE.partial) instead of stdout\n"
            "  -h, --help         this help\n"
            "\n"
            "exit: 0 no regression; %d a row of B slower than A by more than PCT percent with p < A (or,\n"
            "      where a side has no repetitions to test, by the medians alone); 1 an error (a missing\n"
            "      folder, an unreadable file); 2 a usage error, or runs from different machines.\n",
            BENCH_COMPARE_REGRESSION);
}

/* the report into path.partial, renamed over path when complete */
static int compare_to_file(const char *dir_a, const char *dir_b, const bench_compare_opts *o, const char *path) {
    char partial[1100];
    snprintf(partial, sizeof partial, "%s.partial", path);
    FILE *f = fopen(partial, "w");
    if (!f) {
        fprintf(stderr, "bench compare: cannot write %s: %s\n", partial, strerror(errno));
        return 1;
    }
    int rc = bench_compare(dir_a, dir_b, o, f);
    bool written = !ferror(f);
    if (fclose(f) || !written) {
        fprintf(stderr, "bench compare: cannot write %s\n", partial);
        rc = 1;
    }
    if (rc == 1 || rc == 2) { /* no report: an error, or machines that do not compare */
        remove(partial);
        return rc;
    }
    if (rename(partial, path)) {
        fprintf(stderr, "bench compare: cannot rename %s to %s: %s\n", partial, path, strerror(errno));
        remove(partial);
        return 1;
    }
    printf("bench compare: report written to %s\n", path);
    return rc;
}

int bench_compare_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"threshold", required_argument, NULL, 't'}, {"alpha", required_argument, NULL, 'a'},
        {"out", required_argument, NULL, 'o'},       {"help", no_argument, NULL, 'h'},
        {"across-machines", no_argument, NULL, 'x'}, {NULL, 0, NULL, 0},
    };
    bench_compare_opts o = {.threshold_pct = 5, .alpha = 0.05};
    const char *out = NULL;
    int c;
    optind = 0; /* glibc: start over, the parse may run more than once in a process */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (!bench_parse_double(optarg, 0, 1000, &o.threshold_pct))
                return bench_usage_error("bench compare", "bad --threshold '%.80s' (0 to 1000 percent)", optarg);
            break;
        case 'a':
            if (!bench_parse_double(optarg, 0, 1, &o.alpha) || !(o.alpha > 0))
                return bench_usage_error("bench compare", "bad --alpha '%.80s' (above 0, at most 1)", optarg);
            break;
        case 'o':
            if (!*optarg || strlen(optarg) > BENCH_MAX_PATH)
                return bench_usage_error("bench compare", "bad --out '%.80s' (1 to %d characters)", optarg,
                                         BENCH_MAX_PATH);
            out = optarg;
            break;
        case 'x': o.across_machines = true; break;
        case 'h': usage(stdout); return 0;
        default: return bench_option_error("bench compare", opts, c, argv);
        }
    }
    if (argc - optind != 2)
        return bench_usage_error("bench compare", "compare takes two folders, DIR_A and DIR_B (got %d)",
                                 argc - optind);
    if (out) return compare_to_file(argv[optind], argv[optind + 1], &o, out);
    return bench_compare(argv[optind], argv[optind + 1], &o, stdout);
}
