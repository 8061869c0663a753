/* fuzz_onnx.c: dg_onnx_load_buffer (bench --model FILE.onnx) on any
 * bytes. A failure must leave *out NULL and a message naming the model
 * ("onnx 'fuzz'..."); a success a model whose forward builds at batch 1
 * (the load already built it once) and frees without a leak. */
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
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_shape xs;
    if (!g || dg_onnx_model_new(g, o, 0, &m) != DG_OK || !dg_model_input_shape(&m, 1, &xs)) abort();
    dg_node *y = dg_model_forward(g, &m, dg_input(g, "x", xs), NULL);
    /* the load's scratch build ran at the file's batch: batch 1 may still
     * be refused (a Reshape target that names another), never crash */
    if (!y && dg_graph_status(g) == DG_OK) abort();
    dg_graph_free(g);
    dg_onnx_free(o);
    return 0;
}
