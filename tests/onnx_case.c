/* onnx_case.c: a libonnx-testdata case through the importer (onnx_case.h
 * says what each part does). */
#include "onnx_case.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu_util.h"

void onnx_case_need(const char *folder) {
    struct stat st;
    if (stat(folder, &st) != 0) cr_skip_test("no %s: apt-get install libonnx-testdata", folder);
}

static void tensor_path(char *path, size_t size, const char *dir, const char *kind, int k) {
    snprintf(path, size, "%s/test_data_set_0/%s_%d.pb", dir, kind, k);
}

bool onnx_case_has(const char *dir, const char *kind, int k) {
    char path[600];
    struct stat st;
    tensor_path(path, sizeof path, dir, kind, k);
    return stat(path, &st) == 0;
}

const char *onnx_case_tensor(const char *dir, const char *kind, int k, dg_onnx_tensor *t) {
    static char why[1024];
    char path[600];
    tensor_path(path, sizeof path, dir, kind, k);
    if (dg_onnx_tensor_load(path, t) == DG_OK) return NULL;
    snprintf(why, sizeof why, "%s %d: %s", kind, k, dg_last_error());
    return why;
}

const char *onnx_case_inputs(const char *dir, dg_onnx_tensor *in, int max, int *n) {
    for (*n = 0; *n < max && onnx_case_has(dir, "input", *n); ++*n) {
        const char *why = onnx_case_tensor(dir, "input", *n, &in[*n]);
        if (why) return why;
    }
    return NULL;
}

const char *onnx_case_input(dg_graph *g, const dg_onnx *o, int i, dg_node **x) {
    static char why[256];
    dg_shape s;
    if (!dg_onnx_input_shape(o, i, 0, &s)) {
        snprintf(why, sizeof why, "input %d has no fixed shape", i);
        return why;
    }
    const char *name = dg_onnx_input_name_at(o, i);
    *x = dg_onnx_input_dtype(o, i) == DG_I32 ? dg_input_i32(g, name, s) : dg_input(g, name, s);
    return NULL;
}

/* x's values from the file t: its floats, or its int64 ids as int32 */
static dg_status set_input(dg_plan *p, dg_node *x, const dg_onnx_tensor *t) {
    if (t->f) return dg_plan_set(p, x, t->f, (size_t)t->numel * sizeof(float));
    int32_t *ids = malloc((size_t)t->numel * sizeof *ids);
    for (int64_t j = 0; j < t->numel; j++) ids[j] = (int32_t)t->i[j];
    dg_status st = dg_plan_set(p, x, ids, (size_t)t->numel * sizeof *ids);
    free(ids);
    return st;
}

const char *onnx_case_run(dg_graph *g, dg_backend *be, dg_node *y, dg_node *const *xs,
                          const dg_onnx_tensor *const *vals, int n, const dg_onnx_tensor *want) {
    static char why[1024];
    char shape[128];
    dg_plan *p = NULL;
    float *got = NULL;
    *why = 0;
    if (!want->f || want->numel != dg_node_numel(y))
        snprintf(why, sizeof why, "output of shape %s, the reference %lld %s",
                 dg_shape_str(y->shape, shape, sizeof shape), (long long)want->numel,
                 want->f ? "floats" : "int64 values");
    if (!*why && dg_plan_new(&p, g, be, &y, 1, NULL) != DG_OK) snprintf(why, sizeof why, "plan: %s", dg_last_error());
    for (int i = 0; i < n && !*why; i++)
        if (vals[i] && set_input(p, xs[i], vals[i]) != DG_OK)
            snprintf(why, sizeof why, "input %d: %s", i, dg_last_error());
    if (!*why && dg_plan_run(p) != DG_OK) snprintf(why, sizeof why, "run: %s", dg_last_error());
    if (!*why) {
        got = malloc((size_t)want->numel * sizeof *got);
        if (dg_plan_get(p, y, got, (size_t)want->numel * sizeof *got) != DG_OK)
            snprintf(why, sizeof why, "get: %s", dg_last_error());
    }
    for (int64_t j = 0; !*why && j < want->numel; j++) {
        double w = want->f[j], d = fabs((double)got[j] - w);
        if (!(d <= ONNX_CASE_ATOL + ONNX_CASE_RTOL * fabs(w)))
            snprintf(why, sizeof why, "element %lld: %.9g, the reference %.9g", (long long)j, (double)got[j], w);
    }
    free(got);
    dg_plan_free(p);
    return *why ? why : NULL;
}

void onnx_case_check_all(const char *const *names, int n, bool gpu, const char *what,
                         const char *(*run)(const char *test, dg_backend *be)) {
    dg_backend *be = test_backend_open(gpu);
    int failed = 0;
    char test[128];
    for (int i = 0; i < n; i++) {
        snprintf(test, sizeof test, "test_%s", names[i]);
        const char *why = run(test, be);
        if (why) {
            cr_log_error("%s: %s", test, why);
            failed++;
        }
    }
    cr_log_info("%s: %d of %d %s match the reference", gpu ? "gpu" : "cpu", n - failed, n, what);
    dg_backend_free(be);
    cr_assert_eq(failed, 0, "%d of %d %s do not match (above)", failed, n, what);
}

void onnx_case_check_refused(const char *folder, const onnx_refusal *refused, int n) {
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%stest_%s/model.onnx", folder, refused[i].test);
        dg_onnx *o = NULL;
        if (dg_onnx_load(path, NULL, &o) == DG_OK) {
            cr_log_error("test_%s: loaded (refused[] expects '%s')", refused[i].test, refused[i].names);
            dg_onnx_free(o);
            failed++;
        } else if (o) {
            cr_log_error("test_%s: refused, yet a model returned", refused[i].test);
            dg_onnx_free(o);
            failed++;
        } else if (!strstr(dg_last_error(), refused[i].names)) {
            cr_log_error("test_%s: '%s' lacks '%s'", refused[i].test, dg_last_error(), refused[i].names);
            failed++;
        }
    }
    cr_assert_eq(failed, 0, "%d of %d refusals not as listed (above)", failed, n);
}
