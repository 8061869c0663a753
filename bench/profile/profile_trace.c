/* profile_trace.c: the profiled steps in Chrome's trace event format
 * (JSON object form: {"traceEvents": [...]}), which Perfetto and
 * chrome://tracing load. One process per backend (pid 1, 2, ... in the
 * order given), two tracks in each: tid 1 the steps, tid 2 the nodes as
 * complete ("X") slices in microseconds from that backend's first event.
 * The backends ran one after the other, so each has its own time origin. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"
#include "profile/profile.h"

static void add_meta(cJSON *events, const char *what, int pid, int tid, const char *name) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", what);
    cJSON_AddStringToObject(e, "ph", "M");
    cJSON_AddNumberToObject(e, "pid", pid);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "args"), "name", name);
    cJSON_AddItemToArray(events, e);
}

static cJSON *add_slice(cJSON *events, const char *name, const char *cat, int pid, int tid, double start_ms,
                        double dur_ms) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "cat", cat);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", start_ms * 1e3);
    cJSON_AddNumberToObject(e, "dur", dur_ms * 1e3);
    cJSON_AddNumberToObject(e, "pid", pid);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON_AddItemToArray(events, e);
    return cJSON_AddObjectToObject(e, "args");
}

static void add_profile(cJSON *events, const bench_profile *p, int pid) {
    char name[128];
    snprintf(name, sizeof name, "%s (%s in %s, batch %d)", p->backend, p->model, dg_precision_name(p->precision),
             p->batch);
    add_meta(events, "process_name", pid, 0, name);
    add_meta(events, "thread_name", pid, 1, "steps");
    add_meta(events, "thread_name", pid, 2, "nodes (the backend's stream)");
    for (int s = 0; s < p->steps; s++) {
        const bench_prof_node *last = &p->nodes[p->n_nodes - 1];
        double end = last->start_ms[s] + last->dur_ms[s];
        snprintf(name, sizeof name, "step %d", s);
        add_slice(events, name, "step", pid, 1, p->step_start_ms[s], end - p->step_start_ms[s]);
        for (int i = 0; i < p->n_nodes; i++) {
            const bench_prof_node *x = &p->nodes[i];
            char shape[96];
            cJSON *args = add_slice(events, x->name, bench_phase_name(x->phase), pid, 2, x->start_ms[s],
                                    x->dur_ms[s]);
            cJSON_AddStringToObject(args, "op", x->op);
            cJSON_AddStringToObject(args, "dtype", x->dtype);
            cJSON_AddStringToObject(args, "phase", bench_phase_name(x->phase));
            cJSON_AddStringToObject(args, "shape", dg_shape_str(x->node->shape, shape, sizeof shape));
            cJSON_AddNumberToObject(args, "flops", x->flops);
            cJSON_AddNumberToObject(args, "bytes", x->bytes);
            cJSON_AddNumberToObject(args, "step", s);
        }
    }
}

dg_status bench_profile_trace(const char *dir, bench_profile *const *p, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *events = cJSON_AddArrayToObject(root, "traceEvents");
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    for (int i = 0; i < n; i++)
        if (p[i]->n_nodes > 0) add_profile(events, p[i], i + 1);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char file[128];
    snprintf(file, sizeof file, "profile-%s-trace.json", p[0]->stem);
    dg_status st = bench_prof_save(dir, file, text);
    free(text);
    return st;
}
