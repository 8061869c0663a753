/* model.c: the model calls that report errors, out of line so that model.h
 * (installed) needs none of the core's internals. */
#include "model.h"

#include "../graph_internal.h"

dg_node *dg_model_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    if (!m || !m->forward) return dg__graph_fail(g, DG_ERR_INVALID, "model: NULL model or forward");
    return m->forward(g, m, x, mode);
}
