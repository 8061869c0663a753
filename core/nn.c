#include "nn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

dg_status dg_mlp_new(dg_graph *g, dg_mlp *m, const int *widths, int n_widths, uint64_t seed) {
    if (!g || !m || !widths || n_widths < 2 || n_widths > DG_MLP_MAX_LAYERS + 1)
        return dg__fail(DG_ERR_INVALID, "mlp: needs 2 to %d widths", DG_MLP_MAX_LAYERS + 1);
    m->n_layers = n_widths - 1;
    for (int i = 0; i < m->n_layers; i++) {
        if (widths[i] < 1 || widths[i + 1] < 1) return dg__fail(DG_ERR_INVALID, "mlp: width %d is < 1", i);
        double gain = m->n_layers == 1 ? 1.0 : 2.0;
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        m->w[i] = dg_param(g, name, DG_SHAPE(widths[i], widths[i + 1]),
                           (dg_init){DG_INIT_NORMAL, 0.0f, (float)sqrt(gain / widths[i]), seed * 1000u + (uint64_t)i});
        snprintf(name, sizeof name, "b%d", i);
        m->b[i] = dg_param(g, name, DG_SHAPE(widths[i + 1]), (dg_init){DG_INIT_FILL, 0, 0, 0});
    }
    return dg_graph_status(g);
}

dg_node *dg_mlp_forward(dg_graph *g, const dg_mlp *m, dg_node *x) {
    for (int i = 0; i < m->n_layers; i++) {
        x = dg_add(g, dg_matmul(g, x, m->w[i], false, false), m->b[i]);
        if (i + 1 < m->n_layers) x = dg_relu(g, x);
    }
    return x;
}

int dg_mlp_params(const dg_mlp *m, dg_node **out) {
    for (int i = 0; i < m->n_layers; i++) {
        out[2 * i] = m->w[i];
        out[2 * i + 1] = m->b[i];
    }
    return 2 * m->n_layers;
}

dg_status dg_mlp_parse_widths(const char *spec, int *widths, int *n_widths) {
    int n = 0;
    const char *p = spec;
    while (p && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 1000000 || n == DG_MLP_MAX_LAYERS + 1 || (*end && *end != '-'))
            return dg__fail(DG_ERR_INVALID, "bad layer widths '%s' (expected e.g. 784-256-100-10)", spec);
        widths[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n < 2) return dg__fail(DG_ERR_INVALID, "bad layer widths '%s': need at least two", spec ? spec : "");
    *n_widths = n;
    return DG_OK;
}
