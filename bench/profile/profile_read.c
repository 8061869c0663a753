/* profile_read.c: the phases' names, and a profile JSON (what
 * bench_profile_write writes) read back for `bench plot DIR`. The file may
 * come from anywhere: every name in it that becomes part of a file name is
 * checked (bench_file_name_ok), every number is checked for its range
 * before it is converted, and a failure names the file and what it holds. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charts/gnuplot.h"
#include "core/status.h"
#include "profile/profile.h"
#include "writers/json.h"

const char *bench_phase_name(bench_phase p) {
    static const char *names[BENCH_N_PHASES] = {"forward", "backward", "optimizer"};
    return (unsigned)p < BENCH_N_PHASES ? names[p] : "?";
}

/* here, not in profile_run.c: the reader names the files of a profile it
 * reads as the run named them, without the run's code */
void bench_prof_stem(const char *model, dg_precision p, char stem[80]) {
    if (p == DG_PREC_FP32) snprintf(stem, 80, "%s", model);
    else snprintf(stem, 80, "%s-%s", model, dg_precision_name(p));
}

static double num_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* a count or a byte size: finite and in [0, 2^53] (exact in a double),
 * else -1 */
static double count_of(const cJSON *o, const char *key) {
    double v = num_of(o, key);
    return v >= 0 && v <= 9007199254740992.0 ? floor(v) : -1;
}

static void str_of(const cJSON *o, const char *key, char *buf, size_t n) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    snprintf(buf, n, "%s", v ? v : "?");
}

/* one entry of "profiles", as the charts need it (no graph: nodes by name
 * and op); NULL, or what is missing or out of range */
static const char *profile_from_json(const cJSON *j, const char *model, dg_precision prec, bench_profile *p) {
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(j, "nodes");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step_ms");
    const cJSON *ceil = cJSON_GetObjectItemCaseSensitive(j, "ceilings");
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "memory_bytes");
    if (!cJSON_IsArray(nodes) || !cJSON_IsObject(step) || !cJSON_IsObject(ceil) || !cJSON_IsObject(mem))
        return "no \"nodes\", \"step_ms\", \"ceilings\" or \"memory_bytes\"";
    double batch = count_of(j, "batch"), arena = count_of(mem, "arena");
    *p = (bench_profile){.model = model, .precision = prec, .batch = batch <= 1 << 30 ? (int)batch : -1,
                         .sum_ms = num_of(step, "sum_of_nodes"), .peak_gflops = num_of(ceil, "gflops"),
                         .peak_gbps = num_of(ceil, "gbps"), .arena_bytes = arena >= 0 ? (size_t)arena : 0};
    bench_prof_stem(model, prec, p->stem);
    if (p->batch < 1) return "\"batch\" is not a count from 1 to 2^30";
    if (!(p->sum_ms > 0) || !isfinite(p->sum_ms)) return "\"step_ms\".\"sum_of_nodes\" is not a positive time";
    if (arena < 0) return "\"memory_bytes\".\"arena\" is not a byte count";
    str_of(j, "backend", p->backend, sizeof p->backend);
    p->n_nodes = cJSON_GetArraySize(nodes);
    p->nodes = calloc((size_t)p->n_nodes + 1, sizeof *p->nodes);
    if (!p->nodes) return "out of memory";
    int i = 0;
    for (const cJSON *n = nodes->child; n; n = n->next, i++) {
        bench_prof_node *x = &p->nodes[i];
        str_of(n, "name", x->name, sizeof x->name);
        str_of(n, "op", x->op, sizeof x->op);
        /* absent in profiles made before it, all of them float32 */
        const char *dt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, "dtype"));
        snprintf(x->dtype, sizeof x->dtype, "%s", dt ? dt : "f32");
        str_of(n, "impl", x->impl, sizeof x->impl); /* absent in profiles made before it: "?" */
        char phase[16];
        str_of(n, "phase", phase, sizeof phase);
        while ((int)x->phase < BENCH_N_PHASES - 1 && strcmp(bench_phase_name(x->phase), phase)) x->phase++;
        x->flops = num_of(n, "flops");
        x->bytes = num_of(n, "bytes");
        x->median_ms = num_of(n, "median_ms");
        double live = count_of(n, "live_bytes");
        x->live_bytes = live >= 0 ? (size_t)live : 0;
    }
    return NULL;
}

void bench_profile_read_free(bench_profile *p, int n) {
    for (int i = 0; i < n; i++) {
        free(p[i].nodes);
        p[i].nodes = NULL;
    }
}

dg_status bench_profile_read(const char *path, char model[64], char *context, size_t n_context, bench_profile p[2],
                             int *n) {
    *n = 0;
    *model = '\0';
    if (context && n_context) *context = '\0';
    memset(p, 0, 2 * sizeof *p);
    size_t len = 0;
    char *text = bench_json_slurp(path, &len);
    if (!text) return DG_ERR_IO;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *profiles = cJSON_GetObjectItemCaseSensitive(root, "profiles");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model"));
    /* the precision names the files too (bench_prof_stem); absent in
     * profiles made before it, all of them fp32 */
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(root, "precision");
    const char *prec_name = cJSON_GetStringValue(pj);
    dg_precision prec = DG_PREC_FP32;
    char stem[80] = "";
    dg_status st = DG_OK;
    int n_profiles = cJSON_GetArraySize(profiles);
    if (!root || !cJSON_IsArray(profiles) || n_profiles < 1 || n_profiles > 2 || !name)
        st = dg_fail(DG_ERR_IO, "%s: not a profile written by bench profile (no \"model\", or not 1 or 2 \"profiles\")",
                     path);
    else if (!bench_file_name_ok(name))
        st = dg_fail(DG_ERR_IO, "%s: \"model\" is '%.80s%s', not a name for files (1 to 63 of A-Z a-z 0-9 . _ -, "
                     "not starting with '.'): nothing drawn", path, name, strlen(name) > 80 ? "..." : "");
    else if (pj && (!prec_name || dg_precision_parse(prec_name, &prec) != DG_OK))
        st = dg_fail(DG_ERR_IO, "%s: \"precision\" is not one of fp32, tf32, bf16, fp16: nothing drawn", path);
    else if (bench_prof_stem(name, prec, stem), !bench_file_name_ok(stem))
        st = dg_fail(DG_ERR_IO, "%s: \"model\" '%s' in %s is too long a name for files: nothing drawn", path, name,
                     dg_precision_name(prec));
    else
        snprintf(model, 64, "%s", name);
    const char *ctx = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "context"));
    if (st == DG_OK && ctx && context && n_context) snprintf(context, n_context, "%s", ctx);
    for (const cJSON *e = st == DG_OK ? profiles->child : NULL; e && st == DG_OK; e = e->next) {
        const char *why = profile_from_json(e, model, prec, &p[*n]);
        (*n)++;
        if (why) st = dg_fail(DG_ERR_IO, "%s: profile %d: %s", path, *n, why);
    }
    cJSON_Delete(root);
    if (st != DG_OK) {
        bench_profile_read_free(p, *n);
        *n = 0;
    }
    return st;
}
