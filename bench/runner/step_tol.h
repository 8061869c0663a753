/* step_tol.h: the tolerances of a training step's float64 check in each
 * precision, shared by the sweeps that time steps (mlp, resnet). */
#ifndef DG_BENCH_STEP_TOL_H
#define DG_BENCH_STEP_TOL_H

#include "core/check/step_check.h"
#include "core/precision.h"

/* fp32's tolerances (the step's own: bench_mlp_step's, bench_resnet_step's)
 * in fp32; in tf32, bf16 and fp16 each raised to the precision's where
 * that is larger (step_tol.c says why), per_tensor kept */
bench_step_tol bench_step_tol_in(dg_precision p, bench_step_tol fp32);
/* The same for a step whose convolutions store 16-bit outputs between
 * batch norms, checked at batch 2 (ResNet-18's): tf32, bf16 and fp16
 * updates to 0.6, running statistics to 0.05 (step_tol.c says why) */
bench_step_tol bench_step_tol_bn_in(dg_precision p, bench_step_tol fp32);

#endif
