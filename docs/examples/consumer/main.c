/* A program using duograd through its public API alone: the training step
 * of a small MLP (forward, loss, gradients and Adam updates in one graph,
 * planned once) run on the CPU backend over one synthetic batch. It prints
 * the loss of each step and exits 0 only when the library it runs with is
 * the one its headers describe and the loss has fallen below half its first
 * value. Built against an installed duograd by CMake (CMakeLists.txt here)
 * and by pkg-config (scripts/consumer-test.sh does both). */
#include <duograd/duograd.h>

#include <stdint.h>
#include <stdio.h>

enum { BATCH = 64, FEATURES = 16, CLASSES = 4, STEPS = 30 };

#define CHECK(call)                                                                       \
    do {                                                                                  \
        dg_status s_ = (call);                                                            \
        if (s_ != DG_OK) {                                                                \
            fprintf(stderr, "%s: %s: %s\n", #call, dg_status_name(s_), dg_last_error()); \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

/* x [BATCH, FEATURES] in [-1, 1); y [BATCH]: the largest of the first
 * CLASSES features, a rule the MLP can learn */
static void make_batch(float *x, int32_t *y) {
    uint32_t state = 12345;
    for (int i = 0; i < BATCH; i++) {
        y[i] = 0;
        for (int j = 0; j < FEATURES; j++) {
            state = state * 1664525u + 1013904223u;
            x[i * FEATURES + j] = (float)(state >> 8) / (float)(1u << 23) - 1.0f;
            if (j < CLASSES && x[i * FEATURES + j] > x[i * FEATURES + y[i]]) y[i] = j;
        }
    }
}

static int train(dg_graph *g, dg_backend *be) {
    static float x[BATCH * FEATURES];
    static int32_t y[BATCH];
    make_batch(x, y);

    dg_model mlp;
    CHECK(dg_mlp_new(g, &(dg_mlp_cfg){{FEATURES, 32, CLASSES}, 3}, /*seed*/ 1, &mlp));
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-2f);
    dg_train_step ts; /* forward, loss, gradients and updates: one graph */
    CHECK(dg_train_step_build(g, &mlp, BATCH, &o, &ts));
    dg_plan *step; /* memory planned once */
    CHECK(dg_plan_new(&step, g, be, ts.outputs, ts.n_outputs, &(dg_plan_opts){.tf32 = false}));
    int rc = 1;
    float first = 0, loss = 0;
    for (int i = 0; i < STEPS; i++) {
        if (dg_plan_set(step, ts.x, x, sizeof x) || dg_plan_set(step, ts.y, y, sizeof y) || dg_plan_run(step) ||
            dg_plan_get(step, ts.loss, &loss, sizeof loss)) {
            fprintf(stderr, "step %d: %s\n", i, dg_last_error());
            goto done;
        }
        if (i == 0) first = loss;
        printf("step %2d loss %.4f\n", i, loss);
    }
    rc = loss < 0.5f * first ? 0 : 1;
    printf("loss %.4f -> %.4f: %s\n", first, loss, rc == 0 ? "falling" : "NOT falling");
done:
    dg_plan_free(step);
    return rc;
}

int main(void) {
    printf("duograd %s (headers %s), CUDA backend %s\n", dg_version_string(), DG_VERSION_STRING,
#ifdef DG_HAVE_CUDA
           "built"
#else
           "not built"
#endif
    );
    if (dg_version() != DG_VERSION_NUMBER) {
        fprintf(stderr, "library %u, headers %u: not the same duograd\n", dg_version(), (unsigned)DG_VERSION_NUMBER);
        return 1;
    }
    dg_backend *be;
    CHECK(dg_cpu_backend_new(&be, /*threads: OpenMP's default*/ 0));
    dg_graph *g = dg_graph_new();
    int rc = g ? train(g, be) : 1;
    dg_graph_free(g);
    dg_backend_free(be);
    return rc;
}
