/* cpu_elementwise.c: unary ops, broadcasting binary ops, their backward
 * ops. One OpenMP loop per op; the op switch sits outside
 * the loop so each loop body is simple enough to vectorise. The ops built
 * on exp and tanh run SLEEF's vector functions (cpu_vmath.h) instead of a
 * libm call per element. */
#include <math.h>
#include <stdint.h>

#include "../core/attrs.h"
#include "../core/layout.h"
#include "cpu_kernels.h"
#include "cpu_vmath.h"

#define PAR_FOR _Pragma("omp parallel for simd schedule(static)")
#define MAP(expr)                                       \
    do {                                                \
        PAR_FOR for (int64_t i = 0; i < n; i++) { float v = x[i]; y[i] = (expr); } \
    } while (0)

/* cpu_vmath.h's kernels take blocks of VM_BLOCK floats, shared out
 * statically: each thread walks one contiguous range */
#define VM_BLOCK ((int64_t)16384)
static inline int64_t block_len(int64_t n, int64_t i) { return n - i < VM_BLOCK ? n - i : VM_BLOCK; }

static void vm_map(void (*f)(float *, const float *, int64_t), float *y, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += VM_BLOCK) f(y + i, x + i, block_len(n, i));
}

void dg__cpu_unary(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *x = s->in[0];
    float *y = s->out, c = dg_attr_scalar_or0(nd);
    int64_t n = dg_node_numel(nd);
    const dg_vmath *vm = dg__vmath();
    switch (nd->op) {
    case DG_OP_NEG:        MAP(-v); break;
    case DG_OP_ADD_SCALAR: MAP(v + c); break;
    case DG_OP_MUL_SCALAR: MAP(v * c); break;
    case DG_OP_POW_SCALAR: MAP(powf(v, c)); break;
    case DG_OP_EXP:        vm_map(vm->exp, y, x, n); break;
    case DG_OP_LOG:        MAP(logf(v)); break;
    case DG_OP_SQRT:       MAP(sqrtf(v)); break;
    case DG_OP_ABS:        MAP(fabsf(v)); break;
    case DG_OP_RELU:       MAP(v > 0.0f ? v : 0.0f); break;
    case DG_OP_LEAKY_RELU: MAP(v > 0.0f ? v : c * v); break;
    case DG_OP_SIGMOID:    vm_map(vm->sigmoid, y, x, n); break;
    case DG_OP_TANH:       vm_map(vm->tanh, y, x, n); break;
    case DG_OP_GELU:       vm_map(vm->gelu, y, x, n); break;
    /* not unary: cpu_compute sends only DG_OPS_UNARY here */
    case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}

/* dx from (dy, x) or (dy, y), all of one shape */
#define MAP2(expr)                                                                   \
    do {                                                                             \
        PAR_FOR for (int64_t i = 0; i < n; i++) { float g = dy[i], v = x[i]; dx[i] = (expr); } \
    } while (0)

void dg__cpu_unary_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *dy = s->in[0], *x = s->in[1];
    float *dx = s->out, c = dg_attr_scalar_or0(nd);
    int64_t n = dg_node_numel(nd);
    switch (nd->op) {
    case DG_OP_RELU_BACKWARD:       MAP2(v > 0.0f ? g : 0.0f); break;
    case DG_OP_LEAKY_RELU_BACKWARD: MAP2(v > 0.0f ? g : c * g); break;
    case DG_OP_ABS_BACKWARD:        MAP2(v > 0.0f ? g : (v < 0.0f ? -g : 0.0f)); break;
    case DG_OP_SIGMOID_BACKWARD:    MAP2(g * v * (1.0f - v)); break;
    case DG_OP_TANH_BACKWARD:       MAP2(g * (1.0f - v * v)); break;
    case DG_OP_GELU_BACKWARD: {
        void (*f)(float *, const float *, const float *, int64_t) = dg__vmath()->gelu_backward;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += VM_BLOCK) f(dx + i, dy + i, x + i, block_len(n, i));
        break;
    }
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}

static inline float apply_binary(dg_op op, float a, float b) {
    switch (op) {
    case DG_OP_ADD: return a + b;
    case DG_OP_SUB: return a - b;
    case DG_OP_MUL: return a * b;
    case DG_OP_DIV: return a / b;
    case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return 0.0f; /* not binary: cpu_compute sends only DG_OPS_BINARY here */
}

#define BIN_SAME(OPER)                                                           \
    PAR_FOR for (int64_t i = 0; i < n; i++) y[i] = a[i] OPER b[i]

void dg__cpu_binary(const dg_step *s) {
    const dg_node *nd = s->node;
    const float *a = s->in[0], *b = s->in[1];
    float *y = s->out;
    int64_t n = dg_node_numel(nd);
    dg_op op = nd->op;
    if (dg_shape_eq(nd->in[0]->shape, nd->shape) && dg_shape_eq(nd->in[1]->shape, nd->shape)) {
        switch (op) { /* the common case: no broadcasting, a flat loop */
        case DG_OP_ADD: BIN_SAME(+); break;
        case DG_OP_SUB: BIN_SAME(-); break;
        case DG_OP_MUL: BIN_SAME(*); break;
        case DG_OP_DIV: BIN_SAME(/); break;
        case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
        case DG_OPS_UNGROUPED: case DG_OP_COUNT:
            break;
        }
        return;
    }
    dg_dims4 o = dg_dims4_of(nd->shape);
    dg_dims4 sa = dg_bcast_strides(nd->in[0]->shape, nd->shape);
    dg_dims4 sb = dg_bcast_strides(nd->in[1]->shape, nd->shape);
    int64_t rows = o.d[0] * o.d[1] * o.d[2], w = o.d[3];
    /* one output row (last axis) at a time; the row's operand offsets come
     * from the outer indices, the inner stride is 0 or 1 */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);
        const float *pa = a + i0 * sa.d[0] + i1 * sa.d[1] + i2 * sa.d[2];
        const float *pb = b + i0 * sb.d[0] + i1 * sb.d[1] + i2 * sb.d[2];
        float *py = y + r * w;
        for (int64_t j = 0; j < w; j++) py[j] = apply_binary(op, pa[j * sa.d[3]], pb[j * sb.d[3]]);
    }
}
