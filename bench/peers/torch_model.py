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


def network(a, init_state, has_batch_norm, flops_per_example):
    """the exported network as torch_resnet.run_network times it, from
    init_state's weights"""
    return tr.Network(prog=PROG, case=a.case, build=lambda: export_onnx.build(a), init_state=init_state,
                      batch=lambda n, seed: examples(a, n, seed), check_batch=CHECK_BATCH,
                      tolerances=lambda p: tolerances(p, has_batch_norm), flops=lambda batch: flops_per_example * batch,
                      row=lambda impl, device, batch, threads, p: base_row(a, impl, device, batch, threads, p))


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
    tr.run_network(out, network(a, init_state, has_bn, flops_per_example), impls, a.batches, device, threads, summary)
    out.close()
    for r in summary:
        print(f"{r['case']:<20} {r['impl']:<28} {r['dtype']:<5} {r['batch']:>5} {r['median_ms']:>10.4g} ms "
              f"{r['gflops']:>9.1f} GFLOP/s {r['max_rel_err']:>9.2e}  {r['status']}"
              f"{' (' + r['note'] + ')' if r['note'] else ''}")
    print(f"rows appended to {out.path}")
    return 1 if any(r["status"] == "wrong" for r in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
