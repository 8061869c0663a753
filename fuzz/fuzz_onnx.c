/* fuzz_onnx.c: dg_onnx_load_buffer (bench --model FILE.onnx) on any
 * bytes. A failure must leave *out NULL and a message naming the model
 * ("onnx 'fuzz'..."); a success a file whose forward builds at batch 1
 * from its inputs (the load already built it once), whose model builds
 * or is refused with a message, and which frees without a leak. */
#include <stdlib.h>
#include <string.h>

#include "core/onnx/onnx.h"
#include "core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dg_onnx *o = (dg_onnx *)&o;
    dg_status st = dg_onnx_load_buffer(data, size, "fuzz", NULL, &o);
    if (st != DG_OK) {
        if (o || !strstr(dg_last_error(), "onnx 'fuzz'")) abort();
        return 0;
    }
    /* every file's forward from one input node each (dg_onnx_forward) */
    int n = dg_onnx_n_inputs(o);
    dg_graph *g = dg_graph_new();
    dg_node *xs[16];
    if (!g || n < 1 || n > 16) abort();
    for (int i = 0; i < n; i++) {
        dg_shape s;
        if (!dg_onnx_input_shape(o, i, 1, &s)) abort();
        const char *name = dg_onnx_input_name_at(o, i);
        xs[i] = dg_onnx_input_dtype(o, i) == DG_I32 ? dg_input_i32(g, name, s) : dg_input(g, name, s);
    }
    /* the load's scratch build ran at the file's batch: batch 1 may still
     * be refused (a Reshape target that names another), never crash */
    if (!dg_onnx_forward(g, o, xs, NULL) && dg_graph_status(g) == DG_OK) abort();
    dg_graph_free(g);
    /* the model: one input and output [batch, ...], or refused saying so */
    g = dg_graph_new();
    dg_model m;
    dg_shape xs0;
    if (!g) abort();
    if (dg_onnx_model_new(g, o, 0, &m) != DG_OK) {
        if (!strstr(dg_last_error(), "onnx 'fuzz'")) abort();
    } else {
        if (!dg_model_input_shape(&m, 1, &xs0)) abort();
        dg_node *x = m.in_dtype == DG_I32 ? dg_input_i32(g, "x", xs0) : dg_input(g, "x", xs0);
        if (!dg_model_forward(g, &m, x, NULL) && dg_graph_status(g) == DG_OK) abort();
    }
    dg_graph_free(g);
    dg_onnx_free(o);
    return 0;
}
