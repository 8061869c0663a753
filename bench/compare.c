#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "options.h"
#include "sweep.h"

/* the same measurement: every column that defines what was timed */
static bool same_case(const csv_rec *a, const csv_rec *b) {
    return !strcmp(a->sweep, b->sweep) && !strcmp(a->name, b->name) && !strcmp(a->impl, b->impl) &&
           !strcmp(a->backend, b->backend) && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->batch == b->batch && a->transfer == b->transfer && a->tf32 == b->tf32;
}

int bench_compare(const char *dir_a, const char *dir_b, FILE *out) {
    char path[1200];
    snprintf(path, sizeof path, "%s/compare.md", dir_b);
    FILE *md = fopen(path, "w");
    if (!md) { fprintf(stderr, "bench compare: cannot write %s: %s\n", path, strerror(errno)); return 1; }
    fprintf(md, "# %s (B) against %s (A)\n\nratio = median B / median A (< 1: B faster); 'noise' when the "
                "difference is within either row's own spread (max - min).\n\n"
                "| sweep | case | impl | m | n | k | transfer | A ms | B ms | ratio | |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n", dir_b, dir_a);
    int matched = 0, files = 0;
    for (int s = 0; s < bench_n_sweeps; s++) { /* the registered sweeps' NAME.csv present in both */
        int na = 0, nb = 0;
        char pa[1100], pb[1100];
        snprintf(pa, sizeof pa, "%s/%s.csv", dir_a, bench_sweeps[s].name);
        snprintf(pb, sizeof pb, "%s/%s.csv", dir_b, bench_sweeps[s].name);
        FILE *fa = fopen(pa, "r"), *fb = fopen(pb, "r");
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        if (!fa || !fb) continue;
        csv_rec *a = bench_csv_read(pa, &na), *b = bench_csv_read(pb, &nb);
        if (!a || !b) {
            fprintf(stderr, "bench compare: %s\n", dg_last_error());
            free(a); free(b); fclose(md);
            return 1;
        }
        files++;
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < na; j++) {
                if (!same_case(&b[i], &a[j]) || !isfinite(a[j].median_ms) || !isfinite(b[i].median_ms)) continue;
                double ratio = b[i].median_ms / a[j].median_ms, diff = fabs(b[i].median_ms - a[j].median_ms);
                bool noise = diff <= fmax(a[j].max_ms - a[j].min_ms, b[i].max_ms - b[i].min_ms);
                const char *line_fmt = "| %s | %s | %s | %lld | %lld | %lld | %d | %.4g | %.4g | %.3f | %s |\n";
                fprintf(md, line_fmt, b[i].sweep, b[i].name, b[i].impl, b[i].m, b[i].n, b[i].k, b[i].transfer,
                        a[j].median_ms, b[i].median_ms, ratio, noise ? "noise" : "");
                if (out)
                    fprintf(out, "%-8s %-12s %-16s %6lld %6lld %6lld t%d  %10.4g -> %10.4g ms  x%.3f %s\n",
                            b[i].sweep, b[i].name, b[i].impl, b[i].m, b[i].n, b[i].k, b[i].transfer,
                            a[j].median_ms, b[i].median_ms, ratio, noise ? "(noise)" : "");
                matched++;
                break;
            }
        free(a);
        free(b);
    }
    fclose(md);
    if (!files) {
        fprintf(stderr, "bench compare: no sweep CSV present in both %s and %s\n", dir_a, dir_b);
        return 1;
    }
    if (out) fprintf(out, "%d rows matched; written to %s\n", matched, path);
    return 0;
}

int bench_compare_main(int argc, char **argv) {
    if (argc != 3) return bench_usage_error("bench", "compare takes two folders: bench compare DIR_A DIR_B");
    return bench_compare(argv[1], argv[2], stdout);
}
