#!/usr/bin/env python3
"""peers.torch_mlp: the PyTorch GPU peer of `bench --sweep mlp`.

The training step of bench/sweeps/mlp/sweep_mlp.c's gpu and gpu-graph rows
(the MLP of core/nn/mlp.c: linear layers with biases, ReLU between them,
softmax cross-entropy averaged over the batch, backward, Adam with lr 1e-3,
betas 0.9 / 0.999, eps 1e-8), on the sweep's widths and batches, from
duograd's own initial weights and data (peers.numpy_mlp replays core/rng.h),
in each precision of --dtype (bench's names; default fp32):

  fp32  float32, TF32 off;
  tf32  float32 tensors, torch.backends.cuda.matmul.allow_tf32 = True;
  bf16  the forward under torch.autocast("cuda", bfloat16): float32 master
        weights and Adam state, the products' operands cast to bf16 each
        step, their outputs bf16, the loss float32;
  fp16  the same in float16, with torch.amp.GradScaler (dynamic loss
        scaling: the loss scaled, the gradients unscaled and tested for
        inf/NaN inside the fused Adam, a step skipped and the scale halved
        on overflow).

Impls: "torch-eager" (the step as Python runs it) and "torch-graph" (the
whole step, Adam and the loss scaler included, captured once as a CUDA
graph by torch.cuda.graph and replayed: Adam(capturable=True), autocast's
weight cache off, as PyTorch's documentation asks for capture). Both use
torch.optim.Adam(fused=True), PyTorch's fastest Adam on the GPU, which
also takes GradScaler's scale and overflow flag without a host round trip.

Each row is checked before it is timed, as duograd checks its own: the
first step's loss and every parameter's update against float64 of the same
step from the same operands (peers.numpy_mlp.reference_step: for bf16/fp16
the inputs and weights rounded to the dtype), at the precision's tolerances
(common.step_tol: derived and measured there). A failed check is a row with
status "wrong" and no time. The fp16 check runs the step at the scale
GradScaler settles on: a first step that overflows is skipped by the
scaler (no update to check), so the step is taken again from the initial
weights at the halved scale, as training would go on (the note gives the
scale).

Times: CUDA events around each step or replay, the queue not drained
between them (torch_ops.time_gpu); GFLOP/s as sweep_mlp.c counts them (6
flops per weight and row). Rows go to DIR/torch_mlp.csv in bench's column
order (sweep "mlp", case the widths as duograd's mlp rows, backend gpu,
m = batch, n = widths[1], k = widths[0], check f64-loss+update, the dtype
column the precision, tf32 1 in tf32 rows alone):

    build/bench --sweep mlp --out DIR
    python3 bench/peers/torch_mlp.py --out DIR [--dtype fp32,tf32,bf16,fp16] [--quick | --all | --sizes LIST]
"""
import argparse
import os
import sys

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import numpy_mlp as nm  # noqa: E402
from peers.torch_ops import precision_mode, time_gpu  # noqa: E402
from peers.torch_step import CapturedStep  # noqa: E402

PROG = "torch_mlp"
IMPLS = ("torch-eager", "torch-graph")
SCALE_TRIES = 24          # fp16: first steps the scaler may skip before the check gives up (2^16 -> 2^-8)


class TorchGpuStep(CapturedStep):
    """One MLP training step on the GPU in precision p, eager or captured
    as a CUDA graph (peers.torch_step.CapturedStep); params() the float32
    master weights as NumPy arrays."""

    def __init__(self, torch, np, widths, params, x, y, p, graph):
        import torch.nn.functional as F
        self.np, self.F = np, F
        dev = torch.device("cuda")
        self.w = [torch.tensor(q, dtype=torch.float32, device=dev).requires_grad_(True) for q in params]
        self.x = torch.tensor(np.ascontiguousarray(x, np.float32), device=dev)
        self.y = torch.tensor(y.astype(np.int64), device=dev)
        self.layers = len(widths) - 1
        super().__init__(torch, self.w, self.w, p, graph, nm.LR, (nm.BETA1, nm.BETA2), nm.EPS)
        self.start()

    def loss_of(self):
        a = self.x
        for i in range(self.layers):
            a = self.torch.addmm(self.w[2 * i + 1], a, self.w[2 * i])
            if i + 1 < self.layers:
                a = self.torch.relu(a)
        return self.F.cross_entropy(a, self.y)

    def params(self):
        return [w.detach().float().cpu().numpy() for w in self.w]


def checked_first_step(step, np, ref):
    """(loss err, update err, note) of the step's first step from the
    initial weights; fp16: taken again at the halved scale while the scaler
    skips it for an overflow (SCALE_TRIES at most)"""
    before = [q.cpu().numpy() for q in step.init]
    note = ""
    for _ in range(SCALE_TRIES):
        scale = step.scale()
        step.run()
        if step.scale() >= scale:  # not skipped (the scale halves on a skip)
            break
        step.reset()  # the initial weights again, the scaler at its halved scale
    else:
        note = f"GradScaler skipped {SCALE_TRIES} first steps (overflow down to scale {step.scale():g})"
    if step.scaler is not None and not note:
        note = f"checked at loss scale {scale:g}"
    loss_err, upd_err = nm.check_error(np, step.loss(), before, step.params(), ref)
    return loss_err, upd_err, note


def mlp_row(spec, impl, batch, p):
    """a torch_mlp row before its check and times"""
    return nm.base_row(spec, impl, batch, 0, p, backend="gpu")


def check_row(row, loss_err, upd_err, p, layers):
    """the check's verdict in row: max_rel_err, and status "wrong" with the
    errors and tolerances in the note when either error is above p's
    tolerance; True when the row may be timed"""
    loss_tol, upd_tol = common.step_tol(p, layers)
    row["max_rel_err"] = max(loss_err, upd_err)
    if loss_err <= loss_tol and upd_err <= upd_tol:
        return True
    errs = (f"loss rel err {loss_err:.3g} (tol {loss_tol:.3g}); update rel err {upd_err:.3g} "
            f"(tol {upd_tol:.3g})")
    row.update(status="wrong", note="; ".join(v for v in (row["note"], errs) if v))
    return False


def run_row(torch, np, out, spec, impl, batch, p, params, x, y, ref):
    """one row: built, checked, timed; a failure is a row that says why"""
    widths = nm.parse_widths(spec)
    row = mlp_row(spec, impl, batch, p)
    step = None
    try:
        with precision_mode(torch, p):
            step = TorchGpuStep(torch, np, widths, params, x, y, p, graph=impl == "torch-graph")
            loss_err, upd_err, row["note"] = checked_first_step(step, np, ref)
            if check_row(row, loss_err, upd_err, p, len(widths) - 1):
                reps, (med, lo, hi, cv) = time_gpu(step.run)
                row.update(warmup=3, reps=reps, median_ms=med, min_ms=lo, max_ms=hi, cv_pct=cv,
                           gflops=nm.step_flops(widths, batch) / (med * 1e6),
                           status="noisy" if cv > common.MAX_CV_PCT else "ok")
    except torch.cuda.OutOfMemoryError as e:
        row.update(status="oom", note=str(e).splitlines()[0][:150])
    except Exception as e:  # a row that failed says why; the sweep goes on
        row.update(status="error", note=f"{type(e).__name__}: {e}".splitlines()[0][:150])
    del step
    torch.cuda.empty_cache()
    out.write(row)
    print(f"{PROG}: {spec} {impl} {p} batch {batch}: {row['status']} median {row['median_ms']:.4g} ms "
          f"err {row['max_rel_err']:.2g}{' (' + row['note'] + ')' if row['note'] else ''}", flush=True)
    return row


def make_parser():
    ap = argparse.ArgumentParser(
        prog="torch_mlp.py",
        description="The PyTorch GPU peer of `bench --sweep mlp`: the same MLP training step (forward, softmax "
                    "cross-entropy, backward, Adam), eager and as a CUDA graph, in fp32, tf32, bf16 autocast and "
                    "fp16 autocast with GradScaler, checked against float64, timed, written to DIR/torch_mlp.csv.",
        epilog="Exit status: 0, 1 when a row is wrong or failed, 2 for bad arguments or no CUDA device.")
    common.out_arg(ap, "result folder (torch_mlp.csv is written or appended to)")
    ap.add_argument("--quick", action="store_true", help="as bench --quick: the first widths, batches 32,256,2048")
    ap.add_argument("--all", action="store_true", help="as bench --sweep all: batch 8192 too")
    ap.add_argument("--sizes", type=common.int_list(1, 1 << 20), metavar="LIST",
                    help="batch sizes instead of the default ones")
    ap.add_argument("--widths", type=nm.parse_widths_list, metavar="LIST",
                    help=f"networks instead of the sweep's ({','.join(nm.WIDTHS_LIST)})")
    ap.add_argument("--impl", type=impl_list, default=list(IMPLS), metavar="LIST",
                    help=f"{','.join(IMPLS)} (default both)")
    common.dtype_args(ap)
    return ap


def impl_list(text):
    names = [v for v in text.split(",") if v]
    if not names or any(v not in IMPLS for v in names):
        raise argparse.ArgumentTypeError(f"'{text}': impls are {', '.join(IMPLS)}")
    return names


def main(argv=None):
    a = make_parser().parse_args(argv)
    import numpy as np
    import torch
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    os.makedirs(a.out, exist_ok=True)
    meta = [f"torch_mlp peer (bench/peers/torch_mlp.py): PyTorch {torch.__version__}, CUDA {torch.version.cuda}",
            f"gpu: {torch.cuda.get_device_name(dev)}", f"dtypes: {','.join(a.dtype)}",
            "Adam(fused=True); bf16/fp16: torch.autocast, fp16 with GradScaler; tf32 on in tf32 rows alone",
            common.date_line()]
    out = common.CsvOut(os.path.join(a.out, "torch_mlp.csv"), meta, PROG, label="torch_mlp peer rows")
    rows = []
    try:
        for spec in a.widths or (nm.WIDTHS_LIST[:1] if a.quick else nm.WIDTHS_LIST):
            widths = nm.parse_widths(spec)
            params = nm.init_params(np, widths)
            for batch in nm.batches_of(a):
                x, y = nm.make_batch(np, widths, batch)
                for p in a.dtype:
                    ref = nm.reference_step(np, params, x, y, p)
                    for impl in a.impl:
                        rows.append(run_row(torch, np, out, spec, impl, batch, p, params, x, y, ref))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: the rows written so far are kept", file=sys.stderr)
        return 130
    finally:
        out.close()
    return 1 if any(r["status"] not in ("ok", "noisy") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
