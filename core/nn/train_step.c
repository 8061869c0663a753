/* train_step.c: forward, loss, gradients and updates of one step, under a
 * precision policy (train_step.h). */
#include "train_step.h"

#include <math.h>

#include "../graph_internal.h"

static dg_node *all_reduce_ready(dg_graph *g, int i, dg_node *grad, void *arg) {
    (void)i;
    (void)arg;
    return dg_all_reduce(g, grad);
}

dg_status dg_train_step_build(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, dg_train_step *out) {
    return dg_train_step_build_opts(g, m, batch, o, NULL, out);
}

dg_status dg_train_step_build_ex(dg_graph *g, const dg_model *m, int batch, const dg_optim *o, bool all_reduce,
                                 dg_train_step *out) {
    return dg_train_step_build_opts(g, m, batch, o, &(dg_train_step_opts){.all_reduce = all_reduce}, out);
}

void dg_precision_plan_opts(dg_precision p, dg_plan_opts *opts) {
    if (opts) opts->tf32 = p == DG_PREC_TF32;
}

static dg_status check_opts(const dg_train_step_opts *o) {
    if ((unsigned)o->loss >= DG_LOSS_COUNT)
        return dg__fail(DG_ERR_INVALID, "train step: loss %d (cross-entropy or mse)", (int)o->loss);
    if ((unsigned)o->precision >= DG_PREC_COUNT)
        return dg__fail(DG_ERR_INVALID, "train step: precision %d (fp32, tf32, bf16 or fp16)", (int)o->precision);
    if (!(o->loss_scale == 0 || (o->loss_scale >= DG_LOSS_SCALE_MIN && isfinite(o->loss_scale))))
        return dg__fail(DG_ERR_INVALID, "train step: loss scale %g, needs a finite value >= 2^-24 (0: %g)",
                        (double)o->loss_scale, (double)DG_LOSS_SCALE_INIT);
    /* the clean-step count is a float32 tensor: exact up to 2^24 */
    if (o->scale_interval < 0 || o->scale_interval > (1 << 24))
        return dg__fail(DG_ERR_INVALID, "train step: loss-scale interval %d, outside 0..2^24 (0: %d)",
                        o->scale_interval, DG_LOSS_SCALE_INTERVAL);
    return DG_OK;
}

/* fp16: the count of the groups of up to DG_FOUND_INF_MAX gradients (of
 * loss * scale) that hold an inf or NaN (out->found_inf, the updates' skip
 * flag). The test reads the scaled gradients, which the updates divide by
 * the scale themselves: the scale never falls below DG_LOSS_SCALE_MIN
 * (2^-24, dg_loss_scale_update), so that division makes no finite
 * gradient infinite (it would take |dw| > 2^104), nor an infinite one
 * finite. */
static void test_overflow(dg_graph *g, int n, dg_train_step *out) {
    dg_node *found = dg_const(g, "found_inf.zero", DG_SHAPE(1), 0.0f);
    for (int i = 0; i < n; i += DG_FOUND_INF_MAX)
        found = dg_found_inf_n(g, found, n - i < DG_FOUND_INF_MAX ? n - i : DG_FOUND_INF_MAX, out->grads + i);
    out->found_inf = found;
}

dg_status dg_train_step_build_opts(dg_graph *g, const dg_model *m, int batch, const dg_optim *o,
                                   const dg_train_step_opts *opts, dg_train_step *out) {
    if (!g || !m || !o || !out)
        return dg__fail(DG_ERR_INVALID, "train step: NULL %s", !g ? "graph" : !m ? "model" : !o ? "optimizer" : "out");
    *out = (dg_train_step){0};
    const dg_train_step_opts so = opts ? *opts : (dg_train_step_opts){0};
    dg_status st = check_opts(&so);
    if (st != DG_OK) return st;
    if (batch < 1) return dg__fail(DG_ERR_INVALID, "train step: batch %d, < 1", batch);
    /* grads[] and outputs[] hold DG_MODEL_MAX_PARAMS */
    if (m->n_params < 0 || m->n_params > DG_MODEL_MAX_PARAMS)
        return dg__fail(DG_ERR_INVALID, "train step: model '%s' has %d parameters (0 to %d)", m->name ? m->name : "?",
                        m->n_params, DG_MODEL_MAX_PARAMS);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "train step");
    dg_shape xs;
    if (!dg_model_input_shape(m, batch, &xs))
        return dg__fail(DG_ERR_SHAPE, "train step: examples of %d dims do not fit", m->in_shape.ndim);
    out->precision = so.precision;
    const bool scaled = so.precision == DG_PREC_FP16;
    out->x = m->in_dtype == DG_I32 ? dg_input_i32(g, "x", xs) : dg_input(g, "x", xs);
    const bool mse = so.loss == DG_LOSS_MSE;
    if (!mse) out->y = dg_input_i32(g, "y", m->targets > 1 ? DG_SHAPE(batch, m->targets) : DG_SHAPE(batch));
    dg_forward_mode mode = {.training = true, .compute = dg_precision_dtype(so.precision)};
    out->logits = out->x ? dg_model_forward(g, m, out->x, &mode) : NULL;
    if (mse) {
        /* mean over every element of (output - target)^2: [1] */
        out->y = out->logits ? dg_input(g, "y", out->logits->shape) : NULL;
        dg_node *d = dg_sub(g, out->logits, out->y);
        out->loss = dg_mean(g, dg_mul(g, d, d), DG_ALL_AXES, false);
    } else {
        out->loss = dg_softmax_cross_entropy(g, out->logits, out->y);
    }
    dg_node *target = out->loss; /* what the backward differentiates */
    if (scaled) {
        float init = so.loss_scale > 0 ? so.loss_scale : DG_LOSS_SCALE_INIT;
        out->loss_scale = dg_state(g, "loss_scale", DG_SHAPE(1), (dg_init){DG_INIT_FILL, init, 0, 0});
        out->scale_clean = dg_state(g, "loss_scale.clean", DG_SHAPE(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
        target = dg_mul(g, out->loss, out->loss_scale);
    }
    if (!target) return dg_graph_status(g);
    out->first_backward_id = dg_graph_size(g);
    st = dg_grad_ex(g, target, m->params, m->n_params, out->grads, so.all_reduce ? all_reduce_ready : NULL, NULL);
    if (st != DG_OK) return st;
    out->outputs[0] = out->loss;
    out->first_optimizer_id = dg_graph_size(g);
    if (scaled) test_overflow(g, m->n_params, out);
    if (dg_graph_status(g) != DG_OK) return dg_graph_status(g);
    if ((st = dg_optim_apply_ex(g, o, m->params, out->grads, m->n_params, out->found_inf, out->loss_scale,
                                out->outputs + 1)) != DG_OK)
        return st;
    out->n_outputs = 1 + m->n_params;
    for (int i = 0; i < mode.n_updates; i++) out->outputs[out->n_outputs++] = mode.updates[i];
    if (scaled) {
        int interval = so.scale_interval > 0 ? so.scale_interval : DG_LOSS_SCALE_INTERVAL;
        out->outputs[out->n_outputs++] =
            dg_loss_scale_update(g, out->loss_scale, out->scale_clean, out->found_inf, interval);
    }
    return dg_graph_status(g);
}
