/* json.c: see json.h. The document is built with cJSON as rows come and
 * written whole when the sweep ends; reading it back is for bench compare. */
#include "writers/json.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"

struct bench_json {
    cJSON *root, *benchmarks;
    int    family;    /* the next row's family_index               */
    bool   oom;       /* an entry could not be added: finish fails */
};

/* cJSON's adders return NULL when out of memory: remembered, reported once */
static void put_num(bench_json *j, cJSON *o, const char *k, double v) {
    if (!(isfinite(v) ? cJSON_AddNumberToObject(o, k, v) : cJSON_AddNullToObject(o, k))) j->oom = true;
}
static void put_str(bench_json *j, cJSON *o, const char *k, const char *v) {
    if (!cJSON_AddStringToObject(o, k, v)) j->oom = true;
}
static void put_bool(bench_json *j, cJSON *o, const char *k, bool v) {
    if (!cJSON_AddBoolToObject(o, k, v)) j->oom = true;
}

/* ---- context: the machine, then the CSV's metadata ---- */

/* the first line of a small text file, without its newline; false when unreadable */
static bool read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* CPUs in a sysfs list such as "0-3,8" */
static int count_cpu_list(const char *s) {
    int count = 0;
    for (const char *p = s; *p;) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p) break;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        count += (int)(hi - lo + 1);
        if (*end != ',') break;
        p = end + 1;
    }
    return count;
}

/* CPU 0's caches as Google Benchmark lists them: type, level, size in
 * bytes, CPUs sharing it; [] where sysfs does not say */
static void add_caches(bench_json *j, cJSON *ctx) {
    cJSON *caches = cJSON_AddArrayToObject(ctx, "caches");
    if (!caches) { j->oom = true; return; }
    for (int i = 0;; i++) {
        char path[128], type[32], level[16], size[32], shared[256];
        const char *base = "/sys/devices/system/cpu/cpu0/cache/index";
        snprintf(path, sizeof path, "%s%d/type", base, i);
        if (!read_line(path, type, sizeof type)) break;
        snprintf(path, sizeof path, "%s%d/level", base, i);
        if (!read_line(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "%s%d/size", base, i);
        if (!read_line(path, size, sizeof size)) break;
        snprintf(path, sizeof path, "%s%d/shared_cpu_list", base, i);
        if (!read_line(path, shared, sizeof shared)) snprintf(shared, sizeof shared, "0");
        char *unit;
        double bytes = strtod(size, &unit);
        bytes *= *unit == 'K' ? 1024 : *unit == 'M' ? 1024 * 1024 : 1;
        cJSON *c = cJSON_CreateObject();
        if (!c || !cJSON_AddItemToArray(caches, c)) { cJSON_Delete(c); j->oom = true; return; }
        put_str(j, c, "type", type);
        put_num(j, c, "level", atoi(level));
        put_num(j, c, "size", bytes);
        put_num(j, c, "num_sharing", count_cpu_list(shared));
    }
}

/* "cpu MHz" of the first CPU in /proc/cpuinfo, rounded; 0 when absent */
static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1) break;
    fclose(f);
    return round(mhz);
}

/* the value of metadata key in meta ("# key: value" lines) into buf; false when absent */
static bool meta_value(const char *meta, const char *key, char *buf, size_t n) {
    size_t klen = strlen(key);
    for (const char *line = meta; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (line[0] != '#') continue;
        const char *k = line + 1 + (line[1] == ' ');
        if (!strncmp(k, key, klen) && k[klen] == ':') {
            const char *v = k + klen + 1 + (k[klen + 1] == ' ');
            snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
            return true;
        }
    }
    return false;
}

static void add_machine(bench_json *j, cJSON *ctx, const char *meta) {
    char buf[1024];
    if (!meta_value(meta, "date", buf, sizeof buf)) {
        time_t now = time(NULL);
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    }
    put_str(j, ctx, "date", buf);
    if (gethostname(buf, sizeof buf)) snprintf(buf, sizeof buf, "unknown");
    buf[sizeof buf - 1] = '\0';
    put_str(j, ctx, "host_name", buf);
    ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[len > 0 ? len : 0] = '\0';
    put_str(j, ctx, "executable", len > 0 ? buf : "bench");
    long cores = meta_value(meta, "cores", buf, sizeof buf) ? atol(buf) : 0;
    put_num(j, ctx, "num_cpus", cores > 0 ? cores : sysconf(_SC_NPROCESSORS_ONLN));
    put_num(j, ctx, "mhz_per_cpu", cpu_mhz());
    /* any governor but "performance" scales the clock; no cpufreq: unknown, left out */
    if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", buf, sizeof buf))
        put_bool(j, ctx, "cpu_scaling_enabled", strcmp(buf, "performance") != 0);
    add_caches(j, ctx);
    double load[3] = {0, 0, 0};
    int n_load = getloadavg(load, 3);
    cJSON *avg = cJSON_CreateDoubleArray(load, n_load > 0 ? n_load : 0);
    if (!avg || !cJSON_AddItemToObject(ctx, "load_avg", avg)) { cJSON_Delete(avg); j->oom = true; }
    /* the bench's build ("# build: Release GNU ..."), in Google Benchmark's words */
    bool debug = meta_value(meta, "build", buf, sizeof buf) ? !strncmp(buf, "Debug", 5) :
#ifdef NDEBUG
                                                             false;
#else
                                                             true;
#endif
    put_str(j, ctx, "library_build_type", debug ? "debug" : "release");
}

/* every "# key: value" line as a string entry, unless the key is taken
 * (date); a line without a key is the "title" */
static void add_meta(bench_json *j, cJSON *ctx, const char *meta) {
    for (const char *line = meta; *line;) {
        size_t len = strcspn(line, "\n");
        if (line[0] == '#') {
            char text[1024], *value;
            const char *start = line + 1 + (line[1] == ' ');
            snprintf(text, sizeof text, "%.*s", (int)(len - (size_t)(start - line)), start);
            char *colon = strstr(text, ": ");
            const char *key = "title";
            if (colon && colon > text) {
                *colon = '\0';
                key = text;
                value = colon + 2;
            } else {
                value = text;
            }
            if (!cJSON_GetObjectItemCaseSensitive(ctx, key)) put_str(j, ctx, key, value);
        }
        line += len + (line[len] == '\n');
    }
}

bench_json *bench_json_open(const char *meta) {
    bench_json *j = calloc(1, sizeof *j);
    cJSON *root = j ? cJSON_CreateObject() : NULL;
    cJSON *ctx = root ? cJSON_AddObjectToObject(root, "context") : NULL;
    cJSON *benchmarks = ctx ? cJSON_AddArrayToObject(root, "benchmarks") : NULL;
    if (!benchmarks) {
        cJSON_Delete(root);
        free(j);
        dg_fail(DG_ERR_OOM, "out of memory starting a JSON result file");
        return NULL;
    }
    *j = (bench_json){.root = root, .benchmarks = benchmarks};
    add_machine(j, ctx, meta);
    add_meta(j, ctx, meta);
    return j;
}

/* ---- benchmarks ---- */

/* the entry's fields up to its times, in Google Benchmark's order; NULL when out of memory */
static cJSON *new_entry(bench_json *j, const char *run_name, const char *suffix, bool aggregate, int reps) {
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddItemToArray(j->benchmarks, e)) {
        cJSON_Delete(e);
        j->oom = true;
        return NULL;
    }
    char name[512];
    snprintf(name, sizeof name, "%s%s", run_name, suffix);
    put_str(j, e, "name", name);
    put_num(j, e, "family_index", j->family);
    put_num(j, e, "per_family_instance_index", 0);
    put_str(j, e, "run_name", run_name);
    put_str(j, e, "run_type", aggregate ? "aggregate" : "iteration");
    put_num(j, e, "repetitions", reps);
    return e;
}

/* the row's columns and duograd's verdict, after Google Benchmark's fields */
static void put_row(bench_json *j, cJSON *e, const bench_row *r) {
    put_str(j, e, "sweep", r->sweep);
    put_str(j, e, "case", r->name);
    put_str(j, e, "impl", r->impl);
    put_str(j, e, "backend", r->backend);
    put_str(j, e, "dtype", dg_precision_name(r->precision));
    put_num(j, e, "m", (double)r->m);
    put_num(j, e, "n", (double)r->n);
    put_num(j, e, "k", (double)r->k);
    put_num(j, e, "batch", (double)r->batch);
    put_num(j, e, "transfer", r->transfer);
    put_num(j, e, "tf32", r->precision == DG_PREC_TF32);
    put_num(j, e, "cold", r->cold);
    put_str(j, e, "status", r->status);
    put_str(j, e, "check", r->check ? r->check : "none");
    put_num(j, e, "max_rel_err", r->max_rel_err);
    if (r->scratch_bytes) put_num(j, e, "scratch_bytes", (double)r->scratch_bytes);
    if (r->arena_bytes) put_num(j, e, "arena_bytes", (double)r->arena_bytes);
    if (r->live_bytes) put_num(j, e, "live_bytes", (double)r->live_bytes);
    if (bench_row_timed(r) && r->energy_j > 0) {
        put_num(j, e, "energy_j", r->energy_j);
        put_num(j, e, "avg_w", r->energy_w);
    }
    if (r->note) put_str(j, e, "note", r->note);
}

static void put_times(bench_json *j, cJSON *e, int iterations, double real, double cpu, const char *unit) {
    put_num(j, e, "iterations", iterations);
    put_num(j, e, "real_time", real);
    put_num(j, e, "cpu_time", cpu);
    put_str(j, e, "time_unit", unit);
}

/* NAME_mean, NAME_stddev, NAME_cv of the repetitions v[0..n), n >= 2, as
 * Google Benchmark's statistics.cc computes them; NAME_median is the row's
 * median of all its runs, NAME.csv's median_ms (a row of more runs than
 * repetitions has block means as repetitions, whose median is another
 * number: one row, one median, in every file) */
static void add_aggregates(bench_json *j, const bench_row *r, const char *name, const double *v, int n) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += v[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
    double stddev = sqrt(var / (n - 1));
    static const char *const names[] = {"mean", "median", "stddev", "cv"};
    double values[] = {mean, r->st.median_ms, stddev, mean > 0 ? stddev / mean : 0};
    for (int a = 0; a < 4; a++) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, "_%s", names[a]);
        cJSON *e = new_entry(j, name, suffix, true, n);
        if (!e) return;
        put_num(j, e, "threads", r->threads);
        put_str(j, e, "aggregate_name", names[a]);
        put_str(j, e, "aggregate_unit", a == 3 ? "percentage" : "time");
        put_times(j, e, 1, values[a], values[a], "ms");
        put_row(j, e, r);
    }
}

void bench_json_add(bench_json *j, const bench_row *r) {
    if (!j) return;
    char name[512];
    snprintf(name, sizeof name, "%s/%s/%s/%s/dtype:%s/m:%lld/n:%lld/k:%lld/batch:%lld/transfer:%d/tf32:%d/cold:%d",
             r->sweep, r->name, r->impl, r->backend, dg_precision_name(r->precision), (long long)r->m, (long long)r->n,
             (long long)r->k, (long long)r->batch, r->transfer, r->precision == DG_PREC_TF32, r->cold);
    if (!bench_row_timed(r)) {
        cJSON *e = new_entry(j, name, "", false, 1);
        if (e) {
            char message[512];
            snprintf(message, sizeof message, "%s%s%s", r->status, r->note ? ": " : "", r->note ? r->note : "");
            put_num(j, e, "repetition_index", 0);
            put_num(j, e, "threads", r->threads);
            put_bool(j, e, "error_occurred", true);
            put_str(j, e, "error_message", message);
            put_times(j, e, 0, 0, 0, "s");
            put_row(j, e, r);
        }
        j->family++;
        return;
    }
    /* a row timed without keeping its runs (a training epoch): its median is its one run */
    const double *v = r->st.samples ? r->st.samples : &r->st.median_ms;
    int runs = r->st.samples ? r->st.reps : 1;
    /* Google Benchmark's repetition is many iterations of which it keeps the
     * mean: at most BENCH_JSON_MAX_REPS repetitions, each the mean of
     * consecutive runs, so a row of 10000 runs stays a few kilobytes */
    int n = runs < BENCH_JSON_MAX_REPS ? runs : BENCH_JSON_MAX_REPS;
    double rep[BENCH_JSON_MAX_REPS];
    for (int i = 0; i < n; i++) {
        int lo = (int)((long long)runs * i / n), hi = (int)((long long)runs * (i + 1) / n);
        double sum = 0;
        for (int q = lo; q < hi; q++) sum += v[q];
        rep[i] = sum / (hi - lo);
        cJSON *e = new_entry(j, name, "", false, n);
        if (!e) return;
        put_num(j, e, "repetition_index", i);
        put_num(j, e, "threads", r->threads);
        put_times(j, e, hi - lo, rep[i], rep[i], "ms");
        if (r->flops > 0) put_num(j, e, "gflops", r->flops / (rep[i] * 1e6));
        if (r->bytes > 0) put_num(j, e, "gbps", r->bytes / (rep[i] * 1e6));
        put_row(j, e, r);
    }
    if (n >= 2) add_aggregates(j, r, name, rep, n);
    j->family++;
}

dg_status bench_json_finish(bench_json *j, const char *dir, const char *name, bool keep) {
    char partial[1024], final[1024];
    snprintf(partial, sizeof partial, "%s/%s.json.partial", dir, name);
    snprintf(final, sizeof final, "%s/%s.json", dir, name);
    bool oom = j->oom;
    char *text = keep && !oom ? cJSON_Print(j->root) : NULL;
    cJSON_Delete(j->root);
    free(j);
    if (!keep) return DG_OK;
    if (!text) return dg_fail(DG_ERR_OOM, "out of memory writing %s (%s is unchanged)", partial, final);
    FILE *f = fopen(partial, "w");
    if (!f) {
        free(text);
        return dg_fail(DG_ERR_IO, "cannot write %s: %s", partial, strerror(errno));
    }
    bool written = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    free(text);
    if (fclose(f) || !written) {
        remove(partial);
        return dg_fail(DG_ERR_IO, "cannot write %s (%s is unchanged)", partial, final);
    }
    if (rename(partial, final))
        return dg_fail(DG_ERR_IO, "cannot rename %s to %s: %s", partial, final, strerror(errno));
    return DG_OK;
}

/* ---- reading back ---- */

#define MAX_JSON_BYTES (1L << 30)

char *bench_json_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        dg_fail(DG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    char *text = size >= 0 && size <= MAX_JSON_BYTES && !fseek(f, 0, SEEK_SET) ? malloc((size_t)size + 1) : NULL;
    bool ok = text && fread(text, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        free(text);
        dg_fail(DG_ERR_IO, "cannot read %s (%s)", path, size > MAX_JSON_BYTES ? "larger than 1 GiB" : "read failed");
        return NULL;
    }
    text[size] = '\0';
    *len = (size_t)size;
    return text;
}

/* Where an entry is read: the file, the entry's index, for messages */
typedef struct entry_src {
    const cJSON *e;
    const char  *path;
    int          index;
} entry_src;

static dg_status get_str(const entry_src *s, const char *key, char *buf, size_t n) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->e, key));
    if (!v)
        return dg_fail(DG_ERR_IO, "%s: benchmark %d has no string '%s' (not written by duograd's bench?)", s->path,
                        s->index, key);
    snprintf(buf, n, "%s", v);
    return DG_OK;
}

static dg_status get_int(const entry_src *s, const char *key, long long lo, long long hi, long long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s->e, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(x >= (double)lo && x <= (double)hi) || x != floor(x))
        return dg_fail(DG_ERR_IO, "%s: benchmark %d: '%s' is not an integer in [%lld, %lld]", s->path, s->index,
                        key, lo, hi);
    *out = (long long)x;
    return DG_OK;
}

/* the columns, status and (failed row) message of the entry that starts a benchmark */
static dg_status read_columns(const entry_src *s, bench_json_rec *r) {
    csv_rec *c = &r->rec;
    long long transfer = 0, tf32 = 0, cold = 0, threads = 0;
    dg_status st;
    if ((st = get_str(s, "sweep", c->sweep, sizeof c->sweep)) || (st = get_str(s, "case", c->name, sizeof c->name)) ||
        (st = get_str(s, "impl", c->impl, sizeof c->impl)) ||
        (st = get_str(s, "backend", c->backend, sizeof c->backend)) ||
        (st = get_str(s, "status", c->status, sizeof c->status)) || (st = get_int(s, "m", 0, INT64_MAX, &c->m)) ||
        (st = get_int(s, "n", 0, INT64_MAX, &c->n)) || (st = get_int(s, "k", 0, INT64_MAX, &c->k)) ||
        (st = get_int(s, "batch", 0, INT64_MAX, &c->batch)) || (st = get_int(s, "transfer", 0, 1, &transfer)) ||
        (st = get_int(s, "tf32", 0, 1, &tf32)) || (st = get_int(s, "cold", 0, 1, &cold)) ||
        (st = get_int(s, "threads", 0, INT32_MAX, &threads)))
        return st;
    c->transfer = (int)transfer;
    c->tf32 = (int)tf32;
    const char *dtype = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->e, "dtype"));
    if (!dtype) c->precision = tf32 ? DG_PREC_TF32 : DG_PREC_FP32; /* written before the precision axis */
    else if (dg_precision_parse(dtype, &c->precision) != DG_OK)
        return dg_fail(DG_ERR_IO, "%s: benchmark %d: dtype '%.32s' is not a precision (fp32, tf32, bf16, fp16)",
                       s->path, s->index, dtype);
    bench_rec_legacy_tf32(c);
    r->cold = (int)cold;
    c->threads = (int)threads;
    c->max_rel_err = NAN;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(s->e, "max_rel_err");
    if (cJSON_IsNumber(err)) c->max_rel_err = err->valuedouble;
    const char *message = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->e, "error_message"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s->e, "error_occurred")))
        snprintf(r->message, sizeof r->message, "%s", message ? message : c->status);
    return DG_OK;
}

/* appends the repetition's time (ms) of a measured entry to r */
static dg_status read_sample(const entry_src *s, bench_json_rec *r) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s->e, "real_time");
    const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->e, "time_unit"));
    if (!cJSON_IsNumber(t) || !(t->valuedouble > 0) || !isfinite(t->valuedouble) || !unit || strcmp(unit, "ms"))
        return dg_fail(DG_ERR_IO, "%s: benchmark %d: no real_time > 0 in ms", s->path, s->index);
    int n = r->n_samples;
    if ((n & (n - 1)) == 0) { /* 0, 1, 2, 4 ...: full; double the room */
        double *more = realloc(r->samples, (size_t)(n ? 2 * n : 1) * sizeof *more);
        if (!more) return dg_fail(DG_ERR_OOM, "out of memory reading %s", s->path);
        r->samples = more;
    }
    r->samples[r->n_samples++] = t->valuedouble;
    return DG_OK;
}

/* min, max, cv and reps of r from its samples, and its median unless the
 * file gave it (rec.median_ms > 0: its NAME_median); NaN and 0 without */
static dg_status summarise(bench_json_rec *r, const char *path) {
    csv_rec *c = &r->rec;
    double given = c->median_ms;
    c->median_ms = c->min_ms = c->max_ms = c->cv_pct = c->gflops = c->gbps = NAN;
    c->reps = r->n_samples;
    if (!r->n_samples) return DG_OK;
    double *v = malloc((size_t)r->n_samples * sizeof *v);
    if (!v) return dg_fail(DG_ERR_OOM, "out of memory reading %s", path);
    memcpy(v, r->samples, (size_t)r->n_samples * sizeof *v);
    bench_stats st = bench_stats_of(v, r->n_samples);
    free(v);
    c->median_ms = given > 0 ? given : st.median_ms;
    c->min_ms = st.min_ms;
    c->max_ms = st.max_ms;
    c->cv_pct = st.cv_pct;
    return DG_OK;
}

/* The row's median from its NAME_median aggregate entry e, which follows the
 * row's repetitions: NAME.csv's median of all runs in a file written since
 * the two were made one; in an older file the median of the repetitions,
 * the number summarise would compute, so old files read as before. */
static void read_median(const cJSON *e, const char *prev, bench_json_rec *r) {
    const char *what = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "aggregate_name"));
    const char *run = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "run_name"));
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "real_time");
    if (r && what && !strcmp(what, "median") && run && prev && !strcmp(run, prev) && cJSON_IsNumber(t) &&
        isfinite(t->valuedouble) && t->valuedouble > 0)
        r->rec.median_ms = t->valuedouble;
}

/* The benchmarks' entries in order: repetitions of one benchmark follow one
 * another (as written); of the aggregates, the median is read (read_median),
 * the others are recomputed from the repetitions. */
static dg_status read_benchmarks(const cJSON *list, const char *path, bench_json_rec **out, int *n) {
    int cap = 0;
    const char *prev = NULL;
    int index = 0;
    for (const cJSON *e = list->child; e; e = e->next, index++) {
        entry_src s = {e, path, index};
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        if (!cJSON_IsObject(e) || !name) return dg_fail(DG_ERR_IO, "%s: benchmark %d has no name", path, index);
        const char *run_type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "run_type"));
        if (run_type && !strcmp(run_type, "aggregate")) {
            read_median(e, prev, *n ? &(*out)[*n - 1] : NULL);
            continue;
        }
        bool failed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "error_occurred"));
        if (!prev || strcmp(prev, name)) {
            if (*n == cap) {
                bench_json_rec *more = realloc(*out, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *more);
                if (!more) return dg_fail(DG_ERR_OOM, "out of memory reading %s", path);
                *out = more;
            }
            bench_json_rec *r = &(*out)[(*n)++];
            memset(r, 0, sizeof *r);
            dg_status st = read_columns(&s, r);
            if (st != DG_OK) return st;
            prev = name;
        }
        if (!failed) {
            dg_status st = read_sample(&s, &(*out)[*n - 1]);
            if (st != DG_OK) return st;
        }
    }
    for (int i = 0; i < *n; i++) {
        dg_status st = summarise(&(*out)[i], path);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

bench_json_rec *bench_json_read(const char *path, int *n) {
    *n = 0;
    size_t len;
    char *text = bench_json_slurp(path, &len);
    if (!text) return NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const char *error_at = root ? NULL : cJSON_GetErrorPtr(); /* NULL too when out of memory */
    long at = error_at ? (long)(error_at - text) : 0;
    free(text);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "benchmarks");
    bench_json_rec *recs = NULL;
    dg_status st = !root      ? dg_fail(DG_ERR_IO, "%s: not valid JSON (byte %ld)", path, at)
                   : !cJSON_IsArray(list) ? dg_fail(DG_ERR_IO, "%s: no \"benchmarks\" list", path)
                                          : read_benchmarks(list, path, &recs, n);
    cJSON_Delete(root);
    if (st == DG_OK && !recs && !(recs = calloc(1, sizeof *recs))) /* no benchmarks: an empty list, not NULL */
        st = dg_fail(DG_ERR_OOM, "out of memory reading %s", path);
    if (st != DG_OK) {
        bench_json_recs_free(recs, *n);
        *n = 0;
        return NULL;
    }
    return recs;
}

void bench_json_recs_free(bench_json_rec *recs, int n) {
    for (int i = 0; i < n; i++) free(recs[i].samples);
    free(recs);
}

bool bench_json_meta(const char *path, const char *key, char *buf, size_t n) {
    size_t len;
    char *text = bench_json_slurp(path, &len);
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const char *v = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "context"), key));
    snprintf(buf, n, "%s", v ? v : "");
    cJSON_Delete(root);
    return v != NULL;
}
