/* profile_plot.c: a profile's charts, drawn by gnuplot from data files
 * and scripts under DIR/plot-data/ (so a chart can be redrawn by hand):
 *   profile-MODEL-ops        each backend's step as one bar, stacked by op
 *                            type in % of its time (the bar's label gives
 *                            the step's ms): the 8 largest ops overall,
 *                            the rest as "other"
 *   profile-MODEL-roofline-B one point per node with FLOPs (x: FLOPs per
 *                            byte, y: achieved GFLOP/s, by phase) under the
 *                            backend's measured ceilings min(peak, bw * x)
 *   profile-MODEL-live       arena MiB alive at each node of the step, per
 *                            backend, and the arena's size */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "charts/gnuplot.h"
#include "charts/plot.h"
#include "core/status.h"
#include "profile/profile.h"

#define TOP_OPS 8

/* opens DIR/plot-data/NAME.EXT for writing; NULL with a message when NAME
 * (made from the model's name) is not a plain file name */
static FILE *open_data(const char *dir, const char *name, const char *ext) {
    char path[1200];
    if (!bench_file_name_ok(name)) {
        fprintf(stderr, "bench profile: refusing chart name '%s': not a plain file name\n", name);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/plot-data", dir);
    if (mkdir(path, 0755) && errno != EEXIST) return NULL;
    snprintf(path, sizeof path, "%s/plot-data/%s.%s", dir, name, ext);
    return fopen(path, "w");
}

/* writes the script (its text in `script`, the provenance label first)
 * and runs gnuplot on it */
static int draw(const char *dir, const char *prov, const char *name, const char *script) {
    FILE *f = open_data(dir, name, "gp");
    if (f && *prov) { /* where the figures come from, on the image itself */
        fprintf(f, "set bmargin 5\nset label ");
        bench_gnuplot_quote(f, prov);
        fprintf(f, " at screen 0.01, screen 0.02 left font ',8' tc rgb 'grey40'\n");
    }
    if (!f || fputs(script, f) == EOF || fclose(f)) {
        fprintf(stderr, "bench profile: cannot write %s/plot-data/%s.gp\n", dir, name);
        return 1;
    }
    char rel[256];
    snprintf(rel, sizeof rel, "plot-data/%s.gp", name);
    return bench_gnuplot_run(dir, rel, name);
}

static int plot_ops(const char *dir, const char *prov, bench_profile *const *p, int n) {
    /* the op types by their largest share on any backend */
    bench_prof_group all[64];
    int n_all = 0;
    for (int b = 0; b < n; b++) {
        bench_prof_group g[64];
        int ng = bench_prof_groups(p[b], false, g, 64);
        for (int i = 0; i < ng; i++) {
            double share = g[i].ms / p[b]->sum_ms;
            int j = 0;
            while (j < n_all && (strcmp(all[j].key, g[i].key) || strcmp(all[j].dtype, g[i].dtype))) j++;
            if (j == n_all) {
                if (n_all == 64) continue;
                all[n_all++] = g[i];
                all[j].ms = 0;
            }
            if (share > all[j].ms) all[j].ms = share; /* ms holds the largest share here */
        }
    }
    for (int i = 1; i < n_all; i++)
        for (int j = i; j > 0 && all[j].ms > all[j - 1].ms; j--) {
            bench_prof_group t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    int shown = n_all < TOP_OPS ? n_all : TOP_OPS;
    char name[128];
    snprintf(name, sizeof name, "profile-%s-ops", p[0]->stem);
    FILE *f = open_data(dir, name, "dat");
    if (!f) return 1;
    fprintf(f, "backend");
    for (int i = 0; i < shown; i++) {
        /* "matmul", or "matmul:bf16->f32" for a node dtype other than float32 */
        char label[64];
        snprintf(label, sizeof label, "%s%s%s", all[i].key, strcmp(all[i].dtype, "f32") ? ":" : "",
                 strcmp(all[i].dtype, "f32") ? all[i].dtype : "");
        fputc(' ', f);
        bench_gnuplot_word(f, label); /* op names from a JSON file when replotting */
    }
    fprintf(f, " other\n");
    for (int b = 0; b < n; b++) {
        bench_prof_group g[64];
        int ng = bench_prof_groups(p[b], false, g, 64);
        fprintf(f, "%s:%.3gms", bench_prof_device(p[b]), p[b]->sum_ms);
        double other = 100;
        for (int i = 0; i < shown; i++) {
            double share = 0;
            for (int j = 0; j < ng; j++)
                if (!strcmp(g[j].key, all[i].key) && !strcmp(g[j].dtype, all[i].dtype)) share = 100 * g[j].ms / p[b]->sum_ms;
            other -= share;
            fprintf(f, " %.4f", share);
        }
        fprintf(f, " %.4f\n", other > 0 ? other : 0);
    }
    fclose(f);
    char script[2048];
    snprintf(script, sizeof script,
             "set title 'profile-%s: step time by op type (sum of node medians, batch %d)'\n"
             "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\n"
             "set boxwidth 0.5\nset key outside right\nset yrange [0:100]\nset ylabel 'share of the step (%%)'\n"
             "set grid ytics\nplot for [i=2:%d] 'plot-data/%s.dat' using i:xtic(1) title columnheader(i), "
             "'' using %d title columnheader(%d) lc rgb 'grey70'\n",
             p[0]->stem, p[0]->batch, shown + 1, name, shown + 2, shown + 2);
    return draw(dir, prov, name, script);
}

static int plot_roofline(const char *dir, const char *prov, const bench_profile *p) {
    if (!(p->peak_gflops > 0) || !(p->peak_gbps > 0)) return 0;
    char name[128];
    snprintf(name, sizeof name, "profile-%s-roofline-%s", p->stem, bench_prof_device(p));
    FILE *f = open_data(dir, name, "dat");
    if (!f) return 1;
    int left_out = 0;
    double lo = INFINITY, hi = 0;
    /* one block per phase (gnuplot's index), blank-line separated */
    for (int ph = 0; ph < BENCH_N_PHASES; ph++) {
        fprintf(f, "# %s\n", bench_phase_name((bench_phase)ph));
        int in_block = 0;
        for (int i = 0; i < p->n_nodes; i++) {
            const bench_prof_node *x = &p->nodes[i];
            if ((int)x->phase != ph) continue;
            double ai = bench_prof_intensity(x);
            if (!(x->flops > 0) || !(ai > 0) || !(x->median_ms > 0)) {
                left_out++;
                continue;
            }
            fprintf(f, "%g %g ", ai, x->flops / (x->median_ms * 1e-3) / 1e9);
            bench_gnuplot_word(f, x->name);
            fputc('\n', f);
            lo = fmin(lo, ai);
            hi = fmax(hi, ai);
            in_block++;
        }
        if (!in_block) fprintf(f, "nan nan none\n"); /* keeps the block numbering */
        fprintf(f, "\n\n");
    }
    fclose(f);
    double ridge = p->peak_gflops / p->peak_gbps;
    lo = fmin(isfinite(lo) ? lo : ridge, ridge) / 4;
    hi = fmax(hi, ridge) * 4;
    char script[2048];
    snprintf(script, sizeof script,
             "set title 'profile-%s on %s: roofline, one point per node (%d nodes without FLOPs not shown)'\n"
             "set logscale xy\nset xlabel 'arithmetic intensity (FLOP per byte moved)'\nset ylabel 'GFLOP/s'\n"
             "set xrange [%g:%g]\nset key bottom right\nset grid\nset samples 400\n"
             "roof(x) = x * %g < %g ? x * %g : %g\n"
             "plot roof(x) with lines lw 2 lc 'black' title 'ceiling (%.0f GB/s, %.0f GFLOP/s)', "
             "'plot-data/%s.dat' index 0 using 1:2 with points pt 7 ps 0.8 title 'forward', "
             "'' index 1 using 1:2 with points pt 5 ps 0.8 title 'backward', "
             "'' index 2 using 1:2 with points pt 9 ps 0.9 title 'optimizer'\n",
             p->stem, bench_prof_device(p), left_out, lo, hi, p->peak_gbps, p->peak_gflops, p->peak_gbps, p->peak_gflops,
             p->peak_gbps, p->peak_gflops, name);
    return draw(dir, prov, name, script);
}

static int plot_live(const char *dir, const char *prov, bench_profile *const *p, int n) {
    char name[128];
    snprintf(name, sizeof name, "profile-%s-live", p[0]->stem);
    FILE *f = open_data(dir, name, "dat");
    if (!f) return 1;
    for (int b = 0; b < n; b++) {
        fprintf(f, "# %s: step index, MiB alive\n", bench_prof_device(p[b]));
        for (int i = 0; i < p[b]->n_nodes; i++)
            fprintf(f, "%d %.4f\n", i, (double)p[b]->nodes[i].live_bytes / (1 << 20));
        fprintf(f, "\n\n");
    }
    fclose(f);
    char script[2048];
    int len = snprintf(script, sizeof script,
                       "set title 'profile-%s: arena memory alive over the step (batch %d)'\n"
                       "set xlabel 'node, in the order the step runs them'\nset ylabel 'MiB'\nset grid\n"
                       "set key top right\nplot ",
                       p[0]->stem, p[0]->batch);
    for (int b = 0; b < n && len < (int)sizeof script; b++)
        len += snprintf(script + len, sizeof script - (size_t)len,
                        "'plot-data/%s.dat' index %d using 1:2 with steps lw 2 title '%s alive', %g with lines dt 2 "
                        "title '%s arena (%.1f MiB)'%s",
                        name, b, bench_prof_device(p[b]), (double)p[b]->arena_bytes / (1 << 20), bench_prof_device(p[b]),
                        (double)p[b]->arena_bytes / (1 << 20), b + 1 < n ? ", " : "\n");
    return draw(dir, prov, name, script);
}

int bench_profile_plot(const char *dir, const char *meta, bench_profile *const *p, int n) {
    if (!bench_gnuplot_found()) {
        fprintf(stderr, "bench profile: gnuplot not found: no charts (the CSV and JSON files are written)\n");
        return 0;
    }
    char prov[256];
    bench_meta_provenance(meta, prov, sizeof prov);
    int rc = plot_ops(dir, prov, p, n) | plot_live(dir, prov, p, n);
    for (int b = 0; b < n; b++) rc |= plot_roofline(dir, prov, p[b]);
    return rc;
}

/* ---- charts again from DIR/profile-MODEL.json ---- */

static int replot_file(const char *dir, const char *file) {
    char path[1200], model[64], context[8192];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    bench_profile p[2];
    int n;
    if (bench_profile_read(path, model, context, sizeof context, p, &n) != DG_OK) {
        fprintf(stderr, "bench plot: %s\n", dg_last_error());
        return 1;
    }
    bench_profile *all[2] = {&p[0], &p[1]};
    int rc = bench_profile_plot(dir, context, all, n);
    bench_profile_read_free(p, n);
    return rc;
}

int bench_profile_replot(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0; /* bench_plot reports a missing folder */
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "profile-", 8) || len < 13 || strcmp(e->d_name + len - 5, ".json") ||
            (len > 11 && !strcmp(e->d_name + len - 11, "-trace.json")))
            continue;
        rc |= replot_file(dir, e->d_name);
    }
    closedir(d);
    return rc;
}
