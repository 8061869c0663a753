/* model_file.c: see model_file.h. */
#include "sweeps/model/model_file.h"

#include <stdio.h>
#include <string.h>

#include "core/graph.h"
#include "core/nn/train_step.h"
#include "core/status.h"
#include "profile/profile.h"

/* the batch of the scratch step that proves the output takes the loss
 * (the check's: a batch norm needs two examples per channel) */
#define PROBE_BATCH 2

bench_step_spec bench_model_step(const dg_onnx *o) {
    bench_step_spec spec = bench_resnet_step(NULL);
    spec.model = dg_onnx_model_new;
    spec.cfg = o;
    return spec;
}

/* The forward on a scratch graph (no backend, nothing runs): its output
 * must be [batch, classes >= 2], then the whole step must build (the
 * gradient of every operator, the optimizer). */
static dg_status probe_step(const dg_onnx *o, const char *path, bool *has_batch_norm) {
    *has_batch_norm = false;
    dg_graph *g = dg_graph_new();
    if (!g) return dg_fail(DG_ERR_OOM, "--model %s: out of memory", path);
    bench_step_spec spec = bench_model_step(o);
    dg_model m;
    dg_shape in;
    dg_status st = spec.model(g, spec.cfg, 1, &m);
    if (st == DG_OK && !dg_model_input_shape(&m, PROBE_BATCH, &in))
        st = dg_fail(DG_ERR_INVALID, "--model %s: its input has too many axes", path);
    dg_node *y = st == DG_OK ? dg_model_forward(g, &m, dg_input(g, "x", in), NULL) : NULL;
    char why[512]; /* dg_fail writes the message dg_last_error reads: a copy first */
    if (st == DG_OK && !y) {
        snprintf(why, sizeof why, "%s", dg_last_error());
        st = dg_fail(dg_graph_status(g), "--model %s: %s", path, why);
    }
    if (st == DG_OK && (y->shape.ndim != 2 || y->shape.d[1] < 2)) {
        char s[96];
        st = dg_fail(DG_ERR_INVALID,
                     "--model %s: output '%s' is %s at batch %d; the training step's softmax cross-entropy "
                     "takes [batch, classes] with 2 classes or more (export the logits, or name another "
                     "output)", path, dg_onnx_output_name(o), dg_shape_str(y->shape, s, sizeof s), PROBE_BATCH);
    }
    dg_train_step ts;
    if (st == DG_OK && dg_train_step_build(g, &m, PROBE_BATCH, &spec.optim, &ts) != DG_OK) {
        snprintf(why, sizeof why, "%s", dg_last_error());
        st = dg_fail(DG_ERR_INVALID, "--model %s: no training step: %s", path, why);
    }
    /* running statistics, or a batch norm without them (an inference-form
     * BatchNormalization trained on the batch's statistics): either way the
     * loss depends on the whole batch, and the check needs the batch-norm
     * tolerances (an exported ResNet-18's bf16 step, 0.28 from float64 on an
     * H200, failed the plain 0.15) */
    for (int i = 0; st == DG_OK && i < dg_graph_size(g); i++)
        *has_batch_norm |= dg_graph_node(g, i)->op == DG_OP_BATCH_NORM;
    if (st == DG_OK) *has_batch_norm |= m.n_state > 0;
    dg_graph_free(g);
    return st;
}

dg_status bench_model_load(const char *path, dg_onnx **out, bool *has_batch_norm) {
    *out = NULL;
    dg_onnx *o;
    dg_status st = dg_onnx_load(path, NULL, &o); /* its message names the file */
    if (st != DG_OK) return st;
    if ((st = probe_step(o, path, has_batch_norm)) != DG_OK) {
        dg_onnx_free(o);
        return st;
    }
    *out = o;
    return DG_OK;
}

void bench_model_meta(const dg_onnx *o, const char *path, char *meta, size_t n) {
    char s[96];
    size_t len = strlen(meta);
    if (len >= n) return;
    snprintf(meta + len, n - len, "# model: %s (%s, %s, input '%s' of examples %s, output '%s')\n", path,
             bench_prof_onnx_model(path) ? bench_prof_onnx_model(path)->name : "?", dg_onnx_digest(o),
             dg_onnx_input_name(o), dg_shape_str(dg_onnx_example_shape(o), s, sizeof s), dg_onnx_output_name(o));
}
