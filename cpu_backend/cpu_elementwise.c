/* cpu_elementwise.c: unary ops, broadcasting binary ops, their backward
 * ops. One OpenMP loop over blocks per op; the op switch sits outside
 * each block's loop so its body is simple enough to vectorise. bf16 and
 * f16 storage is widened to float32 per block, computed on as float32, and
 * rounded to nearest even on store (cpu_lowp.h). The ops built
 * on exp and tanh run SLEEF's vector functions (cpu_vmath.h) instead of a
 * libm call per element. */
#include <math.h>
#include <stdint.h>

#include "../core/attrs.h"
#include "../core/layout.h"
#include "cpu_kernels.h"
#include "cpu_lowp.h"
#include "cpu_vmath.h"

#define MAP(expr)                                                           \
    do {                                                                    \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { float v = x[i]; y[i] = (expr); } \
    } while (0)

/* cpu_vmath.h's kernels take blocks of VM_BLOCK floats, shared out
 * statically: each thread walks one contiguous range. bf16 and f16 tensors
 * go by LP_BLOCK floats, widened into (and rounded out of) buffers on the
 * thread's stack. */
#define VM_BLOCK ((int64_t)16384)
#define LP_BLOCK ((int64_t)1024)
static inline int64_t block_len(int64_t n, int64_t i, int64_t block) { return n - i < block ? n - i : block; }

/* y = f(x) for n floats, on the calling thread */
static void unary_block(const dg_node *nd, const dg_vmath *vm, float c, float *y, const float *x, int64_t n) {
    switch (nd->op) {
    case DG_OP_NEG:        MAP(-v); break;
    case DG_OP_ADD_SCALAR: MAP(v + c); break;
    case DG_OP_MUL_SCALAR: MAP(v * c); break;
    case DG_OP_POW_SCALAR: MAP(powf(v, c)); break;
    case DG_OP_EXP:        vm->exp(y, x, n); break;
    case DG_OP_LOG:        MAP(logf(v)); break;
    case DG_OP_SQRT:       MAP(sqrtf(v)); break;
    case DG_OP_ABS:        MAP(fabsf(v)); break;
    case DG_OP_RELU:       MAP(v > 0.0f ? v : 0.0f); break;
    case DG_OP_LEAKY_RELU: MAP(v > 0.0f ? v : c * v); break;
    case DG_OP_SIGMOID:    vm->sigmoid(y, x, n); break;
    case DG_OP_TANH:       vm->tanh(y, x, n); break;
    case DG_OP_GELU:       vm->gelu(y, x, n); break;
    case DG_OP_ERF:        MAP(erff(v)); break;
    /* not unary: cpu_compute sends only DG_OPS_UNARY here */
    case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}

/* x and y of one dtype (graph.c's rule) */
void dg__cpu_unary(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype t = nd->dtype;
    float c = dg_attr_scalar_or0(nd);
    int64_t n = dg_node_numel(nd), block = t == DG_F32 ? VM_BLOCK : LP_BLOCK;
    const dg_vmath *vm = dg__vmath();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += block) {
        float xb[LP_BLOCK], yb[LP_BLOCK];
        int64_t len = block_len(n, i, block);
        unary_block(nd, vm, c, dg__lp_dst(t, s->out, i, yb), dg__lp_load(t, s->in[0], i, len, xb), len);
        dg__lp_store(t, s->out, i, len, yb);
    }
}

/* dx from (dy, x) or (dy, y) of n floats, on the calling thread */
#define MAP2(expr)                                                                   \
    do {                                                                             \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { float g = dy[i], v = x[i]; dx[i] = (expr); } \
    } while (0)

static void backward_block(const dg_node *nd, const dg_vmath *vm, float c, float *dx, const float *dy,
                           const float *x, int64_t n) {
    switch (nd->op) {
    case DG_OP_RELU_BACKWARD:       MAP2(v > 0.0f ? g : 0.0f); break;
    case DG_OP_LEAKY_RELU_BACKWARD: MAP2(v > 0.0f ? g : c * g); break;
    case DG_OP_ABS_BACKWARD:        MAP2(v > 0.0f ? g : (v < 0.0f ? -g : 0.0f)); break;
    case DG_OP_SIGMOID_BACKWARD:    MAP2(g * v * (1.0f - v)); break;
    case DG_OP_TANH_BACKWARD:       MAP2(g * (1.0f - v * v)); break;
    case DG_OP_GELU_BACKWARD:       vm->gelu_backward(dx, dy, x, n); break;
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}

/* dx from dy and the forward's x or y, each read and dx written in its
 * own dtype (dg_grad makes the three one: a 16-bit node's gradient is
 * 16-bit) */
void dg__cpu_unary_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype tg = nd->in[0]->dtype, tv = nd->in[1]->dtype, to = nd->dtype;
    float c = dg_attr_scalar_or0(nd);
    bool f32 = tg == DG_F32 && tv == DG_F32 && to == DG_F32;
    int64_t n = dg_node_numel(nd), block = f32 ? VM_BLOCK : LP_BLOCK;
    const dg_vmath *vm = dg__vmath();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += block) {
        float gb[LP_BLOCK], vb[LP_BLOCK], db[LP_BLOCK];
        int64_t len = block_len(n, i, block);
        backward_block(nd, vm, c, dg__lp_dst(to, s->out, i, db), dg__lp_load(tg, s->in[0], i, len, gb),
                       dg__lp_load(tv, s->in[1], i, len, vb), len);
        dg__lp_store(to, s->out, i, len, db);
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

#define BIN_SAME(OPER) \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = a[i] OPER b[i]

/* y = a op b for n floats of one shape, on the calling thread */
static void binary_block(dg_op op, float *y, const float *a, const float *b, int64_t n) {
    switch (op) {
    case DG_OP_ADD: BIN_SAME(+); break;
    case DG_OP_SUB: BIN_SAME(-); break;
    case DG_OP_MUL: BIN_SAME(*); break;
    case DG_OP_DIV: BIN_SAME(/); break;
    case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
}

/* buf[0..n) = v: a broadcast operand's block */
static const float *repeat(float *buf, float v, int64_t n) {
    for (int64_t i = 0; i < n; i++) buf[i] = v;
    return buf;
}

/* each operand read in its own dtype (f32, bf16, f16), y stored in the
 * node's (graph.c: one dtype, or f32 for f32 with bf16 or f16) */
void dg__cpu_binary(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype ta = nd->in[0]->dtype, tb = nd->in[1]->dtype, ty = nd->dtype;
    int64_t n = dg_node_numel(nd);
    dg_op op = nd->op;
    if (dg_shape_eq(nd->in[0]->shape, nd->shape) && dg_shape_eq(nd->in[1]->shape, nd->shape)) {
        /* the common case: no broadcasting, a flat loop */
        int64_t block = ta == DG_F32 && tb == DG_F32 && ty == DG_F32 ? VM_BLOCK : LP_BLOCK;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += block) {
            float ab[LP_BLOCK], bb[LP_BLOCK], yb[LP_BLOCK];
            int64_t len = block_len(n, i, block);
            binary_block(op, dg__lp_dst(ty, s->out, i, yb), dg__lp_load(ta, s->in[0], i, len, ab),
                         dg__lp_load(tb, s->in[1], i, len, bb), len);
            dg__lp_store(ty, s->out, i, len, yb);
        }
        return;
    }
    dg_dims4 o = dg_dims4_of(nd->shape);
    dg_dims4 sa = dg_bcast_strides(nd->in[0]->shape, nd->shape);
    dg_dims4 sb = dg_bcast_strides(nd->in[1]->shape, nd->shape);
    int64_t rows = o.d[0] * o.d[1] * o.d[2], w = o.d[3];
    bool f32 = ta == DG_F32 && tb == DG_F32 && ty == DG_F32;
    /* one output row (last axis) at a time; the row's operand offsets come
     * from the outer indices, the inner stride is 0 or 1 */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);
        int64_t oa = i0 * sa.d[0] + i1 * sa.d[1] + i2 * sa.d[2], ob = i0 * sb.d[0] + i1 * sb.d[1] + i2 * sb.d[2];
        if (f32) {
            const float *pa = (const float *)s->in[0] + oa, *pb = (const float *)s->in[1] + ob;
            float *py = (float *)s->out + r * w;
            for (int64_t j = 0; j < w; j++) py[j] = apply_binary(op, pa[j * sa.d[3]], pb[j * sb.d[3]]);
        } else { /* the row in blocks: each operand widened by the vector
                  * converters (or its one broadcast value repeated), the
                  * flat loop, the block rounded out */
            for (int64_t j = 0; j < w; j += LP_BLOCK) {
                float ab[LP_BLOCK], bb[LP_BLOCK], yb[LP_BLOCK];
                int64_t len = block_len(w, j, LP_BLOCK);
                const float *pa = sa.d[3] ? dg__lp_load(ta, s->in[0], oa + j, len, ab)
                                          : repeat(ab, dg__lp_ld(ta, s->in[0], oa), len);
                const float *pb = sb.d[3] ? dg__lp_load(tb, s->in[1], ob + j, len, bb)
                                          : repeat(bb, dg__lp_ld(tb, s->in[1], ob), len);
                binary_block(op, dg__lp_dst(ty, s->out, r * w + j, yb), pa, pb, len);
                dg__lp_store(ty, s->out, r * w + j, len, yb);
            }
        }
    }
}
