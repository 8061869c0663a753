/* profile_report.c: a profile as tables on stdout (top nodes, per op
 * type, per phase, memory, step times), and as CSV and JSON files. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "writers/csv.h"
#include "profile/profile.h"

#define MAX_GROUPS 64

static double gflops_of(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e9 : NAN; }
static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : NAN; }
static double mib(size_t b) { return (double)b / (1 << 20); }

/* "[128,784] <- [128,256];[256,784]": the output's shape, then the inputs'
 * (the nodes CSV quotes it: it has commas) */
static void shapes_of(const dg_node *n, char *buf, size_t size, bool inputs) {
    char s[96];
    size_t len = (size_t)snprintf(buf, size, "%s", dg_shape_str(n->shape, s, sizeof s));
    for (int i = 0; inputs && i < n->n_in && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ";" : " <- ", dg_shape_str(n->in[i]->shape, s, sizeof s));
}

static int by_time_desc(const void *a, const void *b) {
    double x = (*(const bench_prof_node *const *)a)->median_ms, y = (*(const bench_prof_node *const *)b)->median_ms;
    return (x < y) - (x > y);
}

static void print_groups(FILE *f, const bench_profile *p, bool by_phase) {
    bench_prof_group g[MAX_GROUPS];
    int n = bench_prof_groups(p, by_phase, g, MAX_GROUPS);
    fprintf(f, "\n%-30s %-10s %6s %10s %7s %10s %9s\n", by_phase ? "phase" : "op", "dtype", "nodes", "time ms", "share",
            "GFLOP/s", "GB/s");
    for (int i = 0; i < n; i++)
        fprintf(f, "%-30s %-10s %6d %10.4f %6.1f%% %10.1f %9.1f\n", g[i].key, g[i].dtype, g[i].nodes, g[i].ms,
                pct(g[i].ms, p->sum_ms), gflops_of(g[i].flops, g[i].ms), gflops_of(g[i].bytes, g[i].ms));
}

static void print_memory(FILE *f, const bench_profile *p) {
    fprintf(f, "\nmemory: persistent %.2f MiB (parameters and running statistics %.2f, inputs %.2f, optimizer state "
               "and constants %.2f); arena %.2f MiB for a peak of %.2f MiB alive (%.2fx); largest scratch %.2f MiB; "
               "%lld allocations during the runs\n",
            mib(p->persistent_bytes), mib(p->param_bytes), mib(p->input_bytes),
            mib(p->persistent_bytes - p->param_bytes - p->input_bytes), mib(p->arena_bytes), mib(p->live_peak_bytes),
            p->live_peak_bytes ? (double)p->arena_bytes / (double)p->live_peak_bytes : NAN, mib(p->scratch_bytes),
            p->allocs_during_runs);
}

void bench_profile_print(FILE *f, const bench_profile *p, int top_n) {
    /* fp32's and tf32's words as before the precision axis: scripts read them */
    static const char *const policy[DG_PREC_COUNT] = {"TF32 off", "TF32 on", "bf16 mixed precision",
                                                      "fp16 mixed precision, loss scaled"};
    fprintf(f, "\n== %s on %s, batch %d, %d profiled step%s, %s; check %s: %s (max rel err %.2g)\n", p->model,
            p->backend, p->batch, p->steps, p->steps == 1 ? "" : "s", policy[p->precision], p->check,
            p->check_ok ? "ok" : "not run", p->rel_err);
    fprintf(f, "step: %.4f ms un-profiled (dg_plan_run%s)", p->plan_ms,
            isnan(p->plan_nodes_ms) ? "" : ", a replayed CUDA graph");
    if (!isnan(p->plan_nodes_ms)) fprintf(f, ", %.4f ms node by node", p->plan_nodes_ms);
    fprintf(f, "; %.4f ms profiled; the nodes' medians sum to %.4f ms (%.1f%% of the un-profiled step)\n",
            p->profiled_ms, p->sum_ms, pct(p->sum_ms, p->plan_ms));
    if (isfinite(p->step_j))
        fprintf(f, "energy: %.4g J a step, %.1f W, %.1f samples/J (%s)\n", p->step_j, p->step_w, p->batch / p->step_j,
                p->energy_note);
    else if (p->energy_note[0])
        fprintf(f, "energy: - (%s)\n", p->energy_note);
    if (p->peak_gflops > 0 && p->peak_gbps > 0)
        fprintf(f, "ceilings: %.1f GFLOP/s, %.1f GB/s (ridge %.1f FLOP/byte)\n", p->peak_gflops, p->peak_gbps,
                p->peak_gflops / p->peak_gbps);
    else
        fprintf(f, "ceilings: not measured (bound and %%ceil: -)\n");
    const bench_prof_node **order = malloc((size_t)p->n_nodes * sizeof *order);
    if (!order) return;
    for (int i = 0; i < p->n_nodes; i++) order[i] = &p->nodes[i];
    qsort(order, (size_t)p->n_nodes, sizeof *order, by_time_desc);
    int top = top_n < p->n_nodes ? top_n : p->n_nodes;
    fprintf(f, "\ntop %d of %d nodes by time:\n%-24s %-22s %-10s %-9s %-20s %9s %7s %9s %8s %-7s %6s  %s\n", top,
            p->n_nodes, "node", "op", "dtype", "phase", "shape", "time ms", "share", "GFLOP/s", "GB/s", "bound", "%ceil",
            "impl");
    for (int i = 0; i < top; i++) {
        const bench_prof_node *x = order[i];
        char shape[64], ceil[16] = "-";
        shapes_of(x->node, shape, sizeof shape, false);
        /* no ceilings (none measured, none in --ceilings DIR) or no time: no fraction */
        double frac = bench_prof_ceiling_frac(p, x);
        if (!isnan(frac)) snprintf(ceil, sizeof ceil, "%.1f%%", 100 * frac);
        fprintf(f, "%-24.24s %-22.22s %-10s %-9s %-20.20s %9.4f %6.1f%% %9.1f %8.1f %-7s %6s  %s\n", x->name,
                x->op, x->dtype, bench_phase_name(x->phase), shape, x->median_ms, pct(x->median_ms, p->sum_ms),
                gflops_of(x->flops, x->median_ms), gflops_of(x->bytes, x->median_ms), bench_prof_bound(p, x), ceil,
                x->impl);
    }
    free(order);
    print_groups(f, p, false);
    print_groups(f, p, true);
    print_memory(f, p);
}

/* the time of op type `op` in dtype `dtype` in a profile, 0 when it has none */
static double op_ms(const bench_profile *p, const char *op, const char *dtype) {
    bench_prof_group g[MAX_GROUPS];
    int n = bench_prof_groups(p, false, g, MAX_GROUPS);
    for (int i = 0; i < n; i++)
        if (!strcmp(g[i].key, op) && !strcmp(g[i].dtype, dtype)) return g[i].ms;
    return 0;
}

void bench_profile_print_compare(FILE *f, const bench_profile *cpu, const bench_profile *gpu) {
    bench_prof_group g[MAX_GROUPS];
    int n = bench_prof_groups(cpu, false, g, MAX_GROUPS);
    fprintf(f, "\n== %s in %s, batch %d: CPU against GPU per op type (sums of node medians)\n%-22s %-10s %11s %11s %9s\n",
            cpu->model, dg_precision_name(cpu->precision), cpu->batch, "op", "dtype", "cpu ms", "gpu ms", "speedup");
    for (int i = 0; i < n; i++) {
        double gm = op_ms(gpu, g[i].key, g[i].dtype);
        fprintf(f, "%-22s %-10s %11.4f %11.4f %8.1fx\n", g[i].key, g[i].dtype, g[i].ms, gm, gm > 0 ? g[i].ms / gm : NAN);
    }
    fprintf(f, "%-22s %-10s %11.4f %11.4f %8.1fx   (un-profiled steps: %.4f and %.4f ms, %.1fx)\n", "step", "", cpu->sum_ms,
            gpu->sum_ms, cpu->sum_ms / gpu->sum_ms, cpu->plan_ms, gpu->plan_ms, cpu->plan_ms / gpu->plan_ms);
}

/* ---- files ---- */

static dg_status write_nodes(const char *dir, const char *meta, const bench_profile *p) {
    char name[128];
    snprintf(name, sizeof name, "profile-%s-%s-nodes", p->stem, bench_prof_device(p));
    FILE *f = bench_csv_open(dir, name, meta,
                             "model,precision,backend,batch,index,node_id,name,op,dtype,phase,shapes,flops,bytes,"
                             "median_ms,min_ms,share_pct,gflops,gbps,intensity,bound,ceiling_pct,live_bytes,impl");
    if (!f) return DG_ERR_IO;
    for (int i = 0; i < p->n_nodes; i++) {
        const bench_prof_node *x = &p->nodes[i];
        char shapes[512];
        shapes_of(x->node, shapes, sizeof shapes, true);
        fprintf(f, "%s,%s,%s,%d,%d,%d,%s,%s,%s,%s,\"%s\",%.0f,%.0f,%.6f,%.6f,%.3f,%.3f,%.3f,%.4f,%s,%.2f,%zu,%s\n",
                p->model, dg_precision_name(p->precision), bench_prof_device(p), p->batch, i, x->node->id, x->name,
                x->op, x->dtype, bench_phase_name(x->phase), shapes, x->flops, x->bytes, x->median_ms, x->min_ms,
                pct(x->median_ms, p->sum_ms), gflops_of(x->flops, x->median_ms), gflops_of(x->bytes, x->median_ms),
                bench_prof_intensity(x), bench_prof_bound(p, x), 100 * bench_prof_ceiling_frac(p, x), x->live_bytes,
                x->impl);
    }
    return bench_csv_finish(f, dir, name, true);
}

static dg_status write_groups(const char *dir, const char *meta, const bench_profile *p) {
    char name[128];
    snprintf(name, sizeof name, "profile-%s-%s-ops", p->stem, bench_prof_device(p));
    FILE *f = bench_csv_open(dir, name, meta,
                             "model,precision,backend,batch,group,key,dtype,nodes,ms,share_pct,flops,bytes,gflops,gbps");
    if (!f) return DG_ERR_IO;
    for (int by_phase = 0; by_phase < 2; by_phase++) {
        bench_prof_group g[MAX_GROUPS];
        int n = bench_prof_groups(p, by_phase, g, MAX_GROUPS);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s,%s,%s,%d,%s,%s,%s,%d,%.6f,%.3f,%.0f,%.0f,%.3f,%.3f\n", p->model,
                    dg_precision_name(p->precision), bench_prof_device(p), p->batch, by_phase ? "phase" : "op",
                    g[i].key, g[i].dtype, g[i].nodes, g[i].ms, pct(g[i].ms, p->sum_ms), g[i].flops,
                    g[i].bytes, gflops_of(g[i].flops, g[i].ms), gflops_of(g[i].bytes, g[i].ms));
    }
    return bench_csv_finish(f, dir, name, true);
}

static dg_status write_compare(const char *dir, const char *meta, const bench_profile *cpu, const bench_profile *gpu) {
    char name[128];
    snprintf(name, sizeof name, "profile-%s-compare", cpu->stem);
    FILE *f = bench_csv_open(dir, name, meta,
                             "model,precision,batch,op,dtype,cpu_ms,gpu_ms,speedup,cpu_share_pct,gpu_share_pct");
    if (!f) return DG_ERR_IO;
    bench_prof_group g[MAX_GROUPS];
    int n = bench_prof_groups(cpu, false, g, MAX_GROUPS);
    for (int i = 0; i < n; i++) {
        double gm = op_ms(gpu, g[i].key, g[i].dtype);
        fprintf(f, "%s,%s,%d,%s,%s,%.6f,%.6f,%.3f,%.3f,%.3f\n", cpu->model, dg_precision_name(cpu->precision),
                cpu->batch, g[i].key, g[i].dtype, g[i].ms, gm,
                gm > 0 ? g[i].ms / gm : NAN, pct(g[i].ms, cpu->sum_ms), pct(gm, gpu->sum_ms));
    }
    fprintf(f, "%s,%s,%d,step,,%.6f,%.6f,%.3f,100,100\n", cpu->model, dg_precision_name(cpu->precision), cpu->batch,
            cpu->plan_ms, gpu->plan_ms,
            cpu->plan_ms / gpu->plan_ms);
    return bench_csv_finish(f, dir, name, true);
}

/* a number, or JSON null for NaN and infinities (JSON has neither) */
static void add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static cJSON *profile_json(const bench_profile *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "backend", p->backend);
    cJSON_AddNumberToObject(o, "batch", p->batch);
    cJSON_AddNumberToObject(o, "profiled_steps", p->steps);
    cJSON_AddStringToObject(o, "precision", dg_precision_name(p->precision));
    cJSON_AddStringToObject(o, "check", p->check);
    cJSON_AddBoolToObject(o, "check_ok", p->check_ok);
    add_num(o, "max_rel_err", p->rel_err);
    cJSON *t = cJSON_AddObjectToObject(o, "step_ms");
    add_num(t, "plan_run", p->plan_ms);
    add_num(t, "node_by_node", p->plan_nodes_ms);
    add_num(t, "profiled", p->profiled_ms);
    add_num(t, "sum_of_nodes", p->sum_ms);
    cJSON *en = cJSON_AddObjectToObject(o, "energy");
    add_num(en, "step_j", p->step_j);
    add_num(en, "avg_w", p->step_w);
    cJSON_AddStringToObject(en, "note", p->energy_note);
    cJSON *c = cJSON_AddObjectToObject(o, "ceilings");
    add_num(c, "gflops", p->peak_gflops);
    add_num(c, "gbps", p->peak_gbps);
    cJSON *m = cJSON_AddObjectToObject(o, "memory_bytes");
    cJSON_AddNumberToObject(m, "persistent", (double)p->persistent_bytes);
    cJSON_AddNumberToObject(m, "parameters_and_state", (double)p->param_bytes);
    cJSON_AddNumberToObject(m, "inputs", (double)p->input_bytes);
    cJSON_AddNumberToObject(m, "arena", (double)p->arena_bytes);
    cJSON_AddNumberToObject(m, "live_peak", (double)p->live_peak_bytes);
    cJSON_AddNumberToObject(m, "largest_scratch", (double)p->scratch_bytes);
    cJSON_AddNumberToObject(o, "allocations_during_runs", (double)p->allocs_during_runs);
    cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
    for (int i = 0; i < p->n_nodes; i++) {
        const bench_prof_node *x = &p->nodes[i];
        cJSON *n = cJSON_CreateObject();
        char shapes[512];
        shapes_of(x->node, shapes, sizeof shapes, true);
        cJSON_AddNumberToObject(n, "id", x->node->id);
        cJSON_AddStringToObject(n, "name", x->name);
        cJSON_AddStringToObject(n, "op", x->op);
        cJSON_AddStringToObject(n, "dtype", x->dtype);
        cJSON_AddStringToObject(n, "impl", x->impl);
        cJSON_AddStringToObject(n, "phase", bench_phase_name(x->phase));
        cJSON_AddStringToObject(n, "shapes", shapes);
        add_num(n, "flops", x->flops);
        add_num(n, "bytes", x->bytes);
        add_num(n, "median_ms", x->median_ms);
        add_num(n, "min_ms", x->min_ms);
        cJSON_AddStringToObject(n, "bound", bench_prof_bound(p, x));
        add_num(n, "ceiling_frac", bench_prof_ceiling_frac(p, x));
        cJSON_AddNumberToObject(n, "live_bytes", (double)x->live_bytes);
        cJSON_AddItemToArray(nodes, n);
    }
    return o;
}

dg_status bench_profile_write(const char *dir, const char *meta, bench_profile *const *p, int n) {
    dg_status st = DG_OK;
    for (int i = 0; st == DG_OK && i < n; i++) {
        st = write_nodes(dir, meta, p[i]);
        if (st == DG_OK) st = write_groups(dir, meta, p[i]);
    }
    if (st == DG_OK && n == 2) st = write_compare(dir, meta, p[0], p[1]);
    if (st != DG_OK) return st;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", p[0]->model);
    cJSON_AddStringToObject(root, "precision", dg_precision_name(p[0]->precision));
    cJSON_AddStringToObject(root, "context", meta);
    cJSON *arr = cJSON_AddArrayToObject(root, "profiles");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, profile_json(p[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char file[128];
    snprintf(file, sizeof file, "profile-%s.json", p[0]->stem);
    st = bench_prof_save(dir, file, text);
    free(text);
    return st;
}

dg_status bench_prof_save(const char *dir, const char *file, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!text) return dg_fail(DG_ERR_OOM, "profile: out of memory for %s", path);
    FILE *f = fopen(path, "w");
    if (!f) return dg_fail(DG_ERR_IO, "profile: cannot write %s: %s", path, strerror(errno));
    dg_status st = DG_OK;
    if (fputs(text, f) == EOF || fputc('\n', f) == EOF) st = dg_fail(DG_ERR_IO, "profile: writing %s failed", path);
    if (fclose(f) && st == DG_OK) st = dg_fail(DG_ERR_IO, "profile: closing %s failed", path);
    return st;
}
