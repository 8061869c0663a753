/* ops.c: the op table (one row per op). A node's cost is cost.c's: this
 * file knows ops, not nodes, so it needs nothing of the graph. */
#include "ops.h"

#include <assert.h>
#include <stddef.h>

#include "status_internal.h"

#define W0 1u                       /* writes input 0 (the parameter)       */
#define F  DG_ROLE_FORWARD
#define B  DG_ROLE_BACKWARD
#define U  DG_ROLE_UPDATE

static const dg_op_info op_info[] = {
    /*                     name            n_in role  attr               writes        n_side */
    [DG_OP_LEAF]        = {"leaf",          0, DG_ROLE_LEAF, DG_ATTR_NONE, 0, 0},
    [DG_OP_ADD]         = {"add",           2, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_SUB]         = {"sub",           2, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_MUL]         = {"mul",           2, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_DIV]         = {"div",           2, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_NEG]         = {"neg",           1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_ADD_SCALAR]  = {"add_scalar",    1, F, DG_ATTR_SCALAR,  0, 0},
    [DG_OP_MUL_SCALAR]  = {"mul_scalar",    1, F, DG_ATTR_SCALAR,  0, 0},
    [DG_OP_POW_SCALAR]  = {"pow_scalar",    1, F, DG_ATTR_SCALAR,  0, 0},
    [DG_OP_EXP]         = {"exp",           1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_LOG]         = {"log",           1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_SQRT]        = {"sqrt",          1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_ABS]         = {"abs",           1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_RELU]        = {"relu",          1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_LEAKY_RELU]  = {"leaky_relu",    1, F, DG_ATTR_SCALAR,  0, 0},
    [DG_OP_SIGMOID]     = {"sigmoid",       1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_TANH]        = {"tanh",          1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_GELU]        = {"gelu",          1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_ERF]         = {"erf",           1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_MATMUL]      = {"matmul",        2, F, DG_ATTR_MATMUL,  0, 0},
    [DG_OP_CAST]        = {"cast",          1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_PERMUTE]     = {"permute",       1, F, DG_ATTR_PERMUTE, 0, 0},
    [DG_OP_RESHAPE]     = {"reshape",       1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_SUM]         = {"sum",           1, F, DG_ATTR_REDUCE,  0, 0},
    [DG_OP_MEAN]        = {"mean",          1, F, DG_ATTR_REDUCE,  0, 0},
    [DG_OP_BROADCAST_TO]= {"broadcast_to",  1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_SOFTMAX]     = {"softmax",       1, F, DG_ATTR_SOFTMAX, 0, 0},
    [DG_OP_LOG_SOFTMAX] = {"log_softmax",   1, F, DG_ATTR_SOFTMAX, 0, 0},
    [DG_OP_SOFTMAX_CE]  = {"softmax_cross_entropy", 2, F, DG_ATTR_NONE, 0, 1},
    [DG_OP_SIDE_OUTPUT] = {"side_output",   1, DG_ROLE_SIDE, DG_ATTR_SIDE, 0, 0},
    [DG_OP_CONV2D]      = {"conv2d",        2, F, DG_ATTR_CONV,    0, 0},
    [DG_OP_MAX_POOL2D]  = {"max_pool2d",    1, F, DG_ATTR_CONV,    0, 1},
    [DG_OP_AVG_POOL2D]  = {"avg_pool2d",    1, F, DG_ATTR_CONV,    0, 0},
    [DG_OP_BATCH_NORM]  = {"batch_norm",    3, F, DG_ATTR_NORM,    0, 1},
    [DG_OP_LAYER_NORM]  = {"layer_norm",    3, F, DG_ATTR_NORM,    0, 1},
    [DG_OP_EMBEDDING]   = {"embedding",     2, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_ATTENTION]   = {"attention",     3, F, DG_ATTR_ATTENTION, 0, 1},
    [DG_OP_ALL_REDUCE]  = {"all_reduce",    1, F, DG_ATTR_NONE,    0, 0},
    [DG_OP_RELU_BACKWARD]        = {"relu_backward",        2, B, DG_ATTR_NONE,   0, 0},
    [DG_OP_LEAKY_RELU_BACKWARD]  = {"leaky_relu_backward",  2, B, DG_ATTR_SCALAR, 0, 0},
    [DG_OP_ABS_BACKWARD]         = {"abs_backward",         2, B, DG_ATTR_NONE,   0, 0},
    [DG_OP_SIGMOID_BACKWARD]     = {"sigmoid_backward",     2, B, DG_ATTR_NONE,   0, 0},
    [DG_OP_TANH_BACKWARD]        = {"tanh_backward",        2, B, DG_ATTR_NONE,   0, 0},
    [DG_OP_GELU_BACKWARD]        = {"gelu_backward",        2, B, DG_ATTR_NONE,   0, 0},
    [DG_OP_SOFTMAX_BACKWARD]     = {"softmax_backward",     2, B, DG_ATTR_SOFTMAX, 0, 0},
    [DG_OP_LOG_SOFTMAX_BACKWARD] = {"log_softmax_backward", 2, B, DG_ATTR_SOFTMAX, 0, 0},
    [DG_OP_SOFTMAX_CE_BACKWARD]  = {"softmax_cross_entropy_backward", 4, B, DG_ATTR_NONE, 0, 0},
    [DG_OP_CONV2D_BACKWARD_DATA]   = {"conv2d_backward_data",   2, B, DG_ATTR_CONV, 0, 0},
    [DG_OP_CONV2D_BACKWARD_WEIGHT] = {"conv2d_backward_weight", 2, B, DG_ATTR_CONV, 0, 0},
    [DG_OP_MAX_POOL2D_BACKWARD]    = {"max_pool2d_backward",    2, B, DG_ATTR_CONV, 0, 0},
    [DG_OP_AVG_POOL2D_BACKWARD]    = {"avg_pool2d_backward",    1, B, DG_ATTR_CONV, 0, 0},
    [DG_OP_BATCH_NORM_BACKWARD]    = {"batch_norm_backward",    4, B, DG_ATTR_NORM, 0, 0},
    [DG_OP_BATCH_NORM_BACKWARD_SCALE] = {"batch_norm_backward_scale", 3, B, DG_ATTR_NORM, 0, 0},
    [DG_OP_LAYER_NORM_BACKWARD]    = {"layer_norm_backward",    4, B, DG_ATTR_NORM, 0, 0},
    [DG_OP_LAYER_NORM_BACKWARD_SCALE] = {"layer_norm_backward_scale", 3, B, DG_ATTR_NORM, 0, 0},
    [DG_OP_EMBEDDING_BACKWARD]     = {"embedding_backward",     2, B, DG_ATTR_NONE, 0, 0},
    [DG_OP_ATTENTION_BACKWARD]     = {"attention_backward",     6, B, DG_ATTR_ATTENTION, 0, 2},
    /* updates write the parameter (input 0) and their state inputs */
    [DG_OP_SGD_UPDATE]      = {"sgd_update",      2, U, DG_ATTR_OPTIM, W0, 0},
    [DG_OP_MOMENTUM_UPDATE] = {"momentum_update", 3, U, DG_ATTR_OPTIM, W0 | 1u << 2, 0},
    [DG_OP_ADAM_STEP]       = {"adam_step",       1, U, DG_ATTR_OPTIM, W0, 0},
    [DG_OP_ADAM_UPDATE]     = {"adam_update",     5, U, DG_ATTR_OPTIM, W0 | 1u << 2 | 1u << 3, 0},
    /* loss scaling: the found-inf test writes nothing; the scale's update
     * writes the scale and its count of clean steps */
    [DG_OP_FOUND_INF]       = {"found_inf",       2, U, DG_ATTR_NONE,   0, 0}, /* 2 to 8: dg_found_inf_n */
    [DG_OP_LOSS_SCALE_UPDATE] = {"loss_scale_update", 3, U, DG_ATTR_SCALAR, W0 | 1u << 1, 0},
    [DG_OP_BATCH_NORM_RUNNING] = {"batch_norm_running", 3, U, DG_ATTR_NORM, W0 | 1u << 1, 0},
};
static_assert(sizeof op_info / sizeof op_info[0] == DG_OP_COUNT,
              "every dg_op needs a row in op_info");

/* Never called: the compiler's check that ops.h's families partition the
 * ops (a doubled op is a duplicate case, a missing one -Werror=switch). */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static int family_of(dg_op op) {
    switch (op) {
    case DG_OPS_UNARY:          return 0;
    case DG_OPS_BINARY:         return 1;
    case DG_OPS_UNARY_BACKWARD: return 2;
    case DG_OPS_OPTIM:          return 3;
    case DG_OPS_CONV:           return 4;
    case DG_OPS_POOL:           return 5;
    case DG_OPS_UNGROUPED:      return 6;
    case DG_OP_COUNT:           break;
    }
    return -1;
}

const dg_op_info *dg_op_info_get(dg_op op) {
    if ((unsigned)op >= DG_OP_COUNT) {
        dg__fail(DG_ERR_INVALID, "op %d is not a dg_op", (int)op);
        return NULL;
    }
    return &op_info[op];
}

const char *dg_op_name(dg_op op) {
    const dg_op_info *i = dg_op_info_get(op);
    return i && i->name ? i->name : "?";
}
