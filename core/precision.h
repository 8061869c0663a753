/* precision.h: how a step computes, the axis every sweep and the training
 * step share. A precision names the storage of the matrix path's operands
 * and the tensor-core mode of its products; accumulation, softmax,
 * normalisation statistics, the loss and the optimizer state stay float32
 * in every one:
 *
 *   fp32  float32 storage, float32 products (no tensor cores)
 *   tf32  float32 storage, products on TF32 tensor cores where the backend
 *         has them (10-bit significand inputs, float32 accumulation)
 *   bf16  bfloat16 operands (dg_cast of the float32 values), float32
 *         accumulation: "bf16-mixed" as a training policy
 *   fp16  IEEE binary16 operands, float32 accumulation; a training step in
 *         it scales its loss ("fp16-mixed")
 */
#ifndef DG_PRECISION_H
#define DG_PRECISION_H

#include "graph.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_precision { DG_PREC_FP32, DG_PREC_TF32, DG_PREC_BF16, DG_PREC_FP16 } dg_precision;
#define DG_PREC_COUNT 4

/* "fp32", "tf32", "bf16", "fp16"; "?" for a value out of range */
const char *dg_precision_name(dg_precision p);
/* the precision named s (the names above); DG_ERR_INVALID, naming s and
 * the accepted names, for anything else */
dg_status   dg_precision_parse(const char *s, dg_precision *out);
/* the dtype of the matrix path's operands: DG_F32 for fp32 and tf32,
 * DG_BF16, DG_F16 */
dg_dtype    dg_precision_dtype(dg_precision p);

#ifdef __cplusplus
}
#endif
#endif
