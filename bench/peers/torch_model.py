#!/usr/bin/env python3
"""peers.torch_model: the PyTorch peer of the model sweep (`bench --model
FILE.onnx`): PyTorch's training step on the network that export_onnx.py
wrote to FILE.onnx, in every precision of --dtype, appended to DIR/model.csv
as rows of the file's case (onnx-STEM, the name bench gives it), so that
`bench plot DIR` puts both side by side. Run it right after the sweep, on
the same machine, with the same model options as the export:

    python3 bench/peers/export_onnx.py --model resnet18 --out r18.onnx
    build/bench --model r18.onnx --dtype all --sizes model=16,64 --out DIR
    python3 bench/peers/torch_model.py --model resnet18 --onnx r18.onnx --dtype all --batches 16,64 --out DIR

The step is the model sweep's (bench_model_step: softmax cross-entropy
averaged over the batch, SGD with momentum 0.9, lr 0.1, weight decay 5e-4)
on seeded uniform [0, 1) examples with uniform labels. Impls and
precisions are torch_resnet's (torch-eager, torch-eager-cudnn-bench,
-nhwc for channels-last where the model has convolutions; autocast for
bf16/fp16, GradScaler for fp16). Before timing, each impl's first step at
batch 2 is checked against the same model in float64 on the CPU (its loss
and the relative L2 error of all parameter updates), with the tolerances
of bench's step check in that precision (bench/runner/step_tol.c: the
batch-norm ones where the model has batch norm). FLOPs are counted as the
model sweep counts them: 2 per multiply-add of every convolution and
linear layer in the forward (seen by forward hooks), the step 3 times
that.

The weights are the PyTorch model's own (seeded), not read back from the
ONNX file: a step's time depends on the shapes, not on the values.
torch is imported inside the functions that need it, so the argument
handling runs (and is tested) without it.
"""
import argparse
import math
import os
import sys

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import export_onnx  # noqa: E402
from peers import torch_resnet as tr  # noqa: E402

PROG = "torch_model"
CHECK_BATCH = 2  # the model sweep's (a batch norm needs two examples)
# bench_step_tol_in (bench/runner/step_tol.c) without batch norm: fp32's
# loss and update tolerances (BENCH_STEP_*_TOL), a lower precision's
STEP_TOL_LOW = {"tf32": (2e-3, 0.15), "bf16": (2e-2, 0.15), "fp16": (2e-3, 0.15)}


def case_name(onnx_path):
    """bench's case for the file (bench_prof_onnx_model): onnx-STEM"""
    base = os.path.basename(onnx_path)
    if not base.endswith(".onnx") or len(base) <= len(".onnx"):
        raise ValueError(f"--onnx {onnx_path}: bench reads files named *.onnx")
    return "onnx-" + base[:-len(".onnx")]


def tolerances(p, has_batch_norm):
    """(loss, update) tolerances of the first step's check in precision p"""
    if has_batch_norm:
        return tr.tolerances(p)
    if p not in common.PRECISIONS:
        raise ValueError(f"'{p}' is not a precision ({', '.join(common.PRECISIONS)})")
    return (tr.LOSS_TOL, tr.UPDATE_TOL) if p == "fp32" else STEP_TOL_LOW[p]


def parse(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    export_onnx.model_args(ap)
    ap.add_argument("--onnx", required=True, help="the file export_onnx.py wrote: its name is the rows' case")
    ap.add_argument("--batches", type=common.int_list(), default=[16, 64], help="batch sizes (default 16,64)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    common.out_arg(ap, "result folder: rows go to DIR/model.csv")
    common.dtype_args(ap)
    a = ap.parse_args(argv)
    export_onnx.check_model_args(ap, a)
    try:
        a.case = case_name(a.onnx)
    except ValueError as e:
        ap.error(str(e))
    return a


def forward_macs(model, shape):
    """multiply-adds of one example's forward in the model's convolutions
    and linear layers, seen by forward hooks"""
    import torch
    macs = 0

    def hook(mod, inputs, out):
        nonlocal macs
        macs += out.numel() * mod.weight[0].numel()  # per output: cin/groups * kh * kw, or in_features

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    model.train()
    for h in handles:
        h.remove()
    return macs


def examples(a, batch, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(batch, *export_onnx.input_shape(a), generator=g)
    y = torch.randint(0, export_onnx.classes(a), (batch,), generator=g)
    return x, y


def base_row(a, impl, device, batch, threads, p):
    return dict(sweep="model", case=a.case, impl=impl, backend="gpu" if device.type == "cuda" else "cpu",
                m=batch, n=math.prod(export_onnx.input_shape(a)), k=export_onnx.classes(a), batch=batch,
                threads=threads, transfer=0, **common.precision_fields(p), cold=0, warmup=0, reps=0,
                median_ms=math.nan, min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan, gflops=math.nan,
                gbps=math.nan, scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY,
                max_rel_err=math.nan, check=f"f64-step@b{CHECK_BATCH}", status="", note="")


def checked_step(a, p, channels_last, device, init_state, ref):
    """torch_resnet.checked_step for the exported model: the impl's model
    and step after its checked first step (fp16: the first step GradScaler
    did not skip)"""
    import torch
    x, y = examples(a, CHECK_BATCH, seed=1)
    x, y = x.to(device), y.to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    scaler, note = None, ""
    for tries in range(tr.SCALE_TRIES):
        model = export_onnx.build(a)
        model.load_state_dict(init_state)
        model.to(device)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        step = tr.Step(model, p, device.type, scaler)
        scale = step.scaler.get_scale() if step.scaler is not None else None
        loss_err, upd_err = tr.check_first_step(model, step, ref, x, y, device)
        scaler = step.scaler
        if scaler is None or scaler.get_scale() >= scale:
            break
        note = f"GradScaler skipped {tries + 1} first steps (overflow; scale down to {scaler.get_scale():g})"
    return model, step, loss_err, upd_err, note


def run_impl(out, a, impl, p, cudnn_benchmark, channels_last, device, init_state, ref, flops_per_example,
             has_bn, threads, summary):
    import torch
    torch.backends.cudnn.benchmark = cudnn_benchmark
    model, step, loss_err, upd_err, note = checked_step(a, p, channels_last, device, init_state, ref)
    loss_tol, update_tol = tolerances(p, has_bn)
    ok = loss_err <= loss_tol and upd_err <= update_tol
    errs = f"loss rel err {loss_err:.3g} (tol {loss_tol:g}); update rel err {upd_err:.3g} (tol {update_tol:g})"
    print(f"{PROG}: {a.case} {impl} {p}: first step {'ok' if ok else 'WRONG'}: {errs}", file=sys.stderr)
    for batch in a.batches:
        row = base_row(a, impl, device, batch, threads, p)
        row.update(max_rel_err=max(loss_err, upd_err), note=note)
        if not ok:
            row.update(status="wrong", note=errs)
        else:
            x, y = examples(a, batch, seed=batch)
            try:
                x, y = x.to(device), y.to(device)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                warm, ms, peak = tr.time_steps(lambda: step(x, y), device)
                median, lo, hi, cv = common.summarize(ms)
                row.update(warmup=warm, reps=len(ms), median_ms=median, min_ms=lo, max_ms=hi, cv_pct=cv,
                           gflops=flops_per_example * batch / (median * 1e6), arena_bytes=peak, status="ok")
                if cv > common.MAX_CV_PCT:
                    row.update(status="noisy", note=f"cv_pct above {common.MAX_CV_PCT:g} (not measured again)")
            except torch.cuda.OutOfMemoryError as e:
                row.update(status="oom", note=str(e).splitlines()[0][:150])
            x = y = None
            step.opt.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        out.write(row)
        summary.append(row)
        print(f"{PROG}: {a.case} {impl} {p} batch {batch}: {row['status']} median {row['median_ms']:.4g} ms",
              file=sys.stderr)


def main(argv=None):
    a = parse(argv)
    try:
        import torch
    except ImportError:
        print(f"{PROG}: PyTorch is not installed (pip install torch torchvision)", file=sys.stderr)
        return 1
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device answers (torch.cuda.is_available() is False); use --device cpu",
              file=sys.stderr)
        return 1
    from peers.torch_ops import precision_mode
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    threads = 0 if cuda else torch.get_num_threads()
    torch.manual_seed(1)
    init = export_onnx.build(a)
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in init.modules())
    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in init.modules())
    impls, skipped = tr.runs(device.type, a.dtype)
    if not has_conv:  # channels-last means nothing to a network without images
        impls = [i for i in impls if not i[3]]
    for p, why in skipped.items():
        print(f"{PROG}: no {p} rows: {why}", file=sys.stderr)
    flops_per_example = 3 * 2 * forward_macs(init, export_onnx.input_shape(a))
    init_state = {k: v.clone() for k, v in init.state_dict().items()}
    # the float64 reference: the same initial weights, one step on the CPU
    ref_model = export_onnx.build(a)
    ref_model.load_state_dict(init_state)
    ref_model.double().train()
    x, y = examples(a, CHECK_BATCH, seed=1)
    ref_opt = tr.sgd(ref_model)
    ref = tr.one_step_delta(ref_model, lambda xs, ys: tr.train_step(ref_model, ref_opt, xs, ys), x.double(), y)
    del ref_model

    where = f"gpu: {torch.cuda.get_device_name(device)}" if cuda else f"cpu: {threads} torch threads"
    meta = [f"duograd torch peer (bench/peers/torch_model.py): PyTorch eager on {a.onnx}'s network "
            f"({a.model}), {','.join(a.dtype)}",
            common.date_line(),
            f"torch: {torch.__version__} (CUDA {torch.version.cuda})",
            where,
            "tf32: on in tf32 rows alone; bf16/fp16: torch.autocast, fp16 with GradScaler",
            "timing: GPU: CUDA events around each whole step; CPU: perf_counter; "
            "arena_bytes: torch.cuda.max_memory_allocated()"]
    os.makedirs(a.out, exist_ok=True)
    try:
        out = common.CsvOut(os.path.join(a.out, "model.csv"), meta, PROG)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    summary = []
    for impl, p, bench, nhwc in impls:
        with precision_mode(torch, p):
            run_impl(out, a, impl, p, bench, nhwc, device, init_state, ref, flops_per_example, has_bn, threads,
                     summary)
    out.close()
    for r in summary:
        print(f"{r['case']:<20} {r['impl']:<28} {r['dtype']:<5} {r['batch']:>5} {r['median_ms']:>10.4g} ms "
              f"{r['gflops']:>9.1f} GFLOP/s {r['max_rel_err']:>9.2e}  {r['status']}"
              f"{' (' + r['note'] + ')' if r['note'] else ''}")
    print(f"rows appended to {out.path}")
    return 1 if any(r["status"] == "wrong" for r in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
