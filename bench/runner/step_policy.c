/* step_policy.c: a training step's precision policy, read off its graph
 * (step_policy.h). */
#include "runner/step_policy.h"

#include <stdio.h>
#include <string.h>

#include "core/ops.h"

dg_precision bench_step_precision(dg_precision p, bool gpu) {
    return !gpu && p == DG_PREC_TF32 ? DG_PREC_FP32 : p;
}

bool bench_step_policy(const dg_graph *g, const dg_train_step *ts, dg_precision p, char *why, size_t n) {
    dg_dtype want = dg_precision_dtype(p);
    int products = 0, in_dtype = 0, low = 0;
    for (int i = 0; i < dg_graph_size(g); i++) {
        const dg_node *nd = dg_graph_node(g, i);
        low += nd->dtype == DG_BF16 || nd->dtype == DG_F16;
        if (nd->id >= ts->first_backward_id || (nd->op != DG_OP_MATMUL && nd->op != DG_OP_CONV2D)) continue;
        products++;
        in_dtype += nd->in[0]->dtype == want && nd->in[1]->dtype == want;
    }
    /* fp16: the loss scaled, its overflow tested, and every parameter's
     * update dividing by the scale (its input after the skip flag) */
    int updates = 0, unscaled = 0;
    for (int i = 0; i < dg_graph_size(g); i++) {
        const dg_node *nd = dg_graph_node(g, i);
        if (nd->op != DG_OP_SGD_UPDATE && nd->op != DG_OP_MOMENTUM_UPDATE && nd->op != DG_OP_ADAM_UPDATE) continue;
        int n_row = dg_op_info_get(nd->op)->n_in;
        updates++;
        unscaled += ts->loss_scale && nd->n_in == n_row + 2 && nd->in[n_row + 1] == ts->loss_scale;
    }
    bool scaled = ts->loss_scale && ts->found_inf && updates > 0 && unscaled == updates,
         want_scaled = p == DG_PREC_FP16;
    bool ok = products > 0 && in_dtype == products && scaled == want_scaled && (want != DG_F32 || low == 0);
    size_t len = (size_t)snprintf(why, n, "%d of %d forward products %s", in_dtype, products, dg_dtype_name(want));
    if (len < n && want == DG_F32 && low)
        len += (size_t)snprintf(why + len, n - len, ", %d 16-bit nodes", low);
    if (len < n && scaled != want_scaled)
        snprintf(why + len, n - len, ", loss %s (%d of %d updates unscale)", scaled ? "scaled" : "not scaled",
                 unscaled, updates);
    return ok;
}

void bench_step_check_word(char *buf, size_t n, const char *base, dg_precision p, const char *tol_text) {
    if (p == DG_PREC_FP32) snprintf(buf, n, "%s", base);
    else snprintf(buf, n, "%s+%s-policy tol %s", base, dg_precision_name(p), tol_text);
}
