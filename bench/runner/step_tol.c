/* step_tol.c: a training step's check tolerances per precision
 * (step_tol.h). */
#include "runner/step_tol.h"

#include <math.h>

/* In bf16 and fp16 the reference rounds where the graph casts, from its
 * float64 values: an operand that float32 puts on the other side of a
 * rounding boundary moves by one unit of the dtype (2^-8 bf16, 2^-11
 * fp16) and the step's gradient with it, so near-zero gradients (Adam's
 * first update is about lr sign(g)) flip more often than in float32
 * (BENCH_STEP_UPDATE_TOL, 5e-2 relative L2). TF32's roundings (2^-11,
 * every product operand on the GPU's tensor cores) are not in the
 * reference at all. Measured relative errors of the MLP step (the largest
 * of loss and update), 784-256-100-10 and 784-1024-1024-10 at batch 256
 * and 2048: on the 2-core Xeon bf16 1.6e-6 to 4.7e-3, fp16 5.6e-3 to
 * 1.8e-2; on an H200 (its host's AMX under the CPU rows) GPU bf16 4.7e-3
 * to 2.9e-2, fp16 2.9e-3 to 2.6e-2, tf32 5.4e-2 to 7.1e-2 (the update).
 * 0.15 is about twice the largest and far under a wrong rule's 1 to 10
 * (no bias correction 3x, a flipped sign 2x). The loss: the dtype's unit
 * roundoff through a few layers, 2e-2 in bf16, 2e-3 in fp16 and tf32; the
 * running statistics (means and variances of values rounded the same way)
 * get the loss's. */
#define UPDATE_TOL_LOW 0.15

bench_step_tol bench_step_tol_in(dg_precision p, bench_step_tol fp32) {
    double loss = 0;
    switch (p) {
    case DG_PREC_BF16: loss = 2e-2; break;
    case DG_PREC_FP16: case DG_PREC_TF32: loss = 2e-3; break;
    case DG_PREC_FP32: return fp32;
    }
    return (bench_step_tol){.loss = fmax(fp32.loss, loss), .update = fmax(fp32.update, UPDATE_TOL_LOW),
                            .state = fmax(fp32.state, loss), .per_tensor = fp32.per_tensor};
}

/* ResNet-18's step in bf16 or fp16 stores every convolution's output in 16
 * bits (the policy's dg_model_conv), and the reference holds the same
 * roundings (ref_eval_stored). What it cannot hold: float32's sums put some
 * of those outputs on the other side of a rounding boundary (about one in
 * a thousand at K = 4608 terms), each moved by a unit of the dtype, and
 * batch norm over batch 2 (its statistics from two images) with the ReLU
 * masks after it turn these into changes of whole channels' gradients.
 * Measured relative errors (the largest tensor's): the test's small ResNet
 * on the 2-core Xeon in bf16, updates 0.35 (0.52 without the reference's
 * roundings), running statistics 0.020, loss 1.3e-3. 0.6 for the updates
 * leaves room for other seeds and the full model, and a wrong rule still
 * fails it: Adam without bias correction is 3x off (error 2), a flipped
 * sign 2, gradients left loss-scaled 10^3; the running statistics (means
 * and variances of the stored 16-bit outputs) get 0.05, the loss keeps
 * step_tol_in's. TF32 the same: cuDNN's TF32 convolutions round every
 * operand to 10 bits (2^-11), which the reference does not, and on an H200
 * the vendor rows at TF32 failed the 0.15 of step_tol_in (the own
 * convolutions are float32 FMAs whatever the flag). On the same H200
 * PyTorch's own bf16 autocast step of ResNet-18 differs from the float64
 * step by 0.36 to 0.38 at batch 1 and 8 (bench/peers/torch_resnet.py):
 * the amplification is the model's, not a kernel's. */
#define UPDATE_TOL_BN 0.6
#define STATE_TOL_BN  0.05

bench_step_tol bench_step_tol_bn_in(dg_precision p, bench_step_tol fp32) {
    bench_step_tol t = bench_step_tol_in(p, fp32);
    if (p != DG_PREC_FP32) {
        t.update = fmax(t.update, UPDATE_TOL_BN);
        t.state = fmax(t.state, STATE_TOL_BN);
    }
    return t;
}
