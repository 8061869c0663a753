// A C++ program using duograd's C headers (C++11, built -pedantic -Werror
// by scripts/consumer-test.sh): DG_SHAPE in its C++ form, a model's input
// shape, the seeded generator, and a ReLU with its hand-built backward
// (dg_relu_backward) run on the CPU backend. Exits 0 only when every result
// is the expected value.
#include <duograd/duograd.h>

#include <cstdio>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        dg_status s_ = (call);                                                            \
        if (s_ != DG_OK) {                                                                \
            std::fprintf(stderr, "%s: %s: %s\n", #call, dg_status_name(s_), dg_last_error()); \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

int main() {
    dg_model m = dg_model();
    m.in_shape = DG_SHAPE(3, 8, 8);
    dg_shape in;
    if (!dg_model_input_shape(&m, 16, &in) || in.ndim != 4 || in.d[0] != 16 || in.d[3] != 8) {
        std::fprintf(stderr, "dg_model_input_shape: not [16,3,8,8]\n");
        return 1;
    }
    dg_rng r = dg_rng_new(7); /* rng.h's inline and exported functions */
    double z = dg_rng_normal(&r), u = dg_rng_uniform(&r);
    if (!(z == z) || !(u >= 0 && u < 1)) {
        std::fprintf(stderr, "dg_rng: normal %g, uniform %g\n", z, u);
        return 1;
    }
    dg_backend *be;
    CHECK(dg_cpu_backend_new(&be, 1));
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 2)), *dy = dg_input(g, "dy", DG_SHAPE(2, 2));
    dg_node *outs[2] = {dg_relu(g, x), dg_relu_backward(g, dy, x)};
    dg_plan *p;
    CHECK(dg_plan_new(&p, g, be, outs, 2, nullptr));
    const float xv[4] = {-1, 2, -3, 4}, dyv[4] = {10, 20, 30, 40};
    float y[4], dx[4];
    CHECK(dg_plan_set(p, x, xv, sizeof xv));
    CHECK(dg_plan_set(p, dy, dyv, sizeof dyv));
    CHECK(dg_plan_run(p));
    CHECK(dg_plan_get(p, outs[0], y, sizeof y));
    CHECK(dg_plan_get(p, outs[1], dx, sizeof dx));
    int rc = y[0] == 0 && y[1] == 2 && y[2] == 0 && y[3] == 4 && dx[0] == 0 && dx[1] == 20 && dx[2] == 0 &&
                     dx[3] == 40 ? 0 : 1;
    std::printf("C++: relu [%g %g %g %g], relu_backward [%g %g %g %g]: %s\n", y[0], y[1], y[2], y[3], dx[0], dx[1],
                dx[2], dx[3], rc == 0 ? "as expected" : "WRONG");
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
    return rc;
}
