#include "ops.h"

#include <assert.h>
#include <stddef.h>

static const dg_op_info op_info[] = {
    [DG_OP_LEAF]        = {"leaf",        0, DG_ROLE_LEAF},
    [DG_OP_ADD]         = {"add",         2, DG_ROLE_FORWARD},
    [DG_OP_SUB]         = {"sub",         2, DG_ROLE_FORWARD},
    [DG_OP_MUL]         = {"mul",         2, DG_ROLE_FORWARD},
    [DG_OP_DIV]         = {"div",         2, DG_ROLE_FORWARD},
    [DG_OP_NEG]         = {"neg",         1, DG_ROLE_FORWARD},
    [DG_OP_ADD_SCALAR]  = {"add_scalar",  1, DG_ROLE_FORWARD},
    [DG_OP_MUL_SCALAR]  = {"mul_scalar",  1, DG_ROLE_FORWARD},
    [DG_OP_POW_SCALAR]  = {"pow_scalar",  1, DG_ROLE_FORWARD},
    [DG_OP_EXP]         = {"exp",         1, DG_ROLE_FORWARD},
    [DG_OP_LOG]         = {"log",         1, DG_ROLE_FORWARD},
    [DG_OP_SQRT]        = {"sqrt",        1, DG_ROLE_FORWARD},
    [DG_OP_ABS]         = {"abs",         1, DG_ROLE_FORWARD},
    [DG_OP_RELU]        = {"relu",        1, DG_ROLE_FORWARD},
    [DG_OP_LEAKY_RELU]  = {"leaky_relu",  1, DG_ROLE_FORWARD},
    [DG_OP_SIGMOID]     = {"sigmoid",     1, DG_ROLE_FORWARD},
    [DG_OP_TANH]        = {"tanh",        1, DG_ROLE_FORWARD},
    [DG_OP_GELU]        = {"gelu",        1, DG_ROLE_FORWARD},
    [DG_OP_MATMUL]      = {"matmul",      2, DG_ROLE_FORWARD},
    [DG_OP_PERMUTE]     = {"permute",     1, DG_ROLE_FORWARD},
    [DG_OP_RESHAPE]     = {"reshape",     1, DG_ROLE_FORWARD},
    [DG_OP_SUM]         = {"sum",         1, DG_ROLE_FORWARD},
    [DG_OP_MEAN]        = {"mean",        1, DG_ROLE_FORWARD},
    [DG_OP_BROADCAST_TO]= {"broadcast_to",1, DG_ROLE_FORWARD},
    [DG_OP_SOFTMAX]     = {"softmax",     1, DG_ROLE_FORWARD},
    [DG_OP_LOG_SOFTMAX] = {"log_softmax", 1, DG_ROLE_FORWARD},
    [DG_OP_SOFTMAX_CE]  = {"softmax_cross_entropy", 2, DG_ROLE_FORWARD},
    [DG_OP_RELU_BACKWARD]        = {"relu_backward",        2, DG_ROLE_BACKWARD},
    [DG_OP_LEAKY_RELU_BACKWARD]  = {"leaky_relu_backward",  2, DG_ROLE_BACKWARD},
    [DG_OP_ABS_BACKWARD]         = {"abs_backward",         2, DG_ROLE_BACKWARD},
    [DG_OP_SIGMOID_BACKWARD]     = {"sigmoid_backward",     2, DG_ROLE_BACKWARD},
    [DG_OP_TANH_BACKWARD]        = {"tanh_backward",        2, DG_ROLE_BACKWARD},
    [DG_OP_GELU_BACKWARD]        = {"gelu_backward",        2, DG_ROLE_BACKWARD},
    [DG_OP_SOFTMAX_BACKWARD]     = {"softmax_backward",     2, DG_ROLE_BACKWARD},
    [DG_OP_LOG_SOFTMAX_BACKWARD] = {"log_softmax_backward", 2, DG_ROLE_BACKWARD},
    [DG_OP_SOFTMAX_CE_BACKWARD]  = {"softmax_cross_entropy_backward", 3, DG_ROLE_BACKWARD},
    [DG_OP_SGD_UPDATE]      = {"sgd_update",      2, DG_ROLE_UPDATE},
    [DG_OP_MOMENTUM_UPDATE] = {"momentum_update", 3, DG_ROLE_UPDATE},
    [DG_OP_ADAM_STEP]       = {"adam_step",       1, DG_ROLE_UPDATE},
    [DG_OP_ADAM_UPDATE]     = {"adam_update",     5, DG_ROLE_UPDATE},
};
static_assert(sizeof op_info / sizeof op_info[0] == DG_OP_COUNT,
              "every dg_op needs a row in op_info");

const dg_op_info *dg_op_info_get(dg_op op) {
    return (unsigned)op < DG_OP_COUNT ? &op_info[op] : NULL;
}

const char *dg_op_name(dg_op op) {
    const dg_op_info *i = dg_op_info_get(op);
    return i && i->name ? i->name : "?";
}
