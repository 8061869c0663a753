#!/usr/bin/env python3
"""peers.torch_resnet: the PyTorch peer of `bench --sweep resnet`.

Times the same ResNet-18 training step as duograd (core/nn/resnet.c: forward
in training mode, softmax cross-entropy averaged over the batch, backward,
SGD with momentum 0.9, weight decay 5e-4, lr 0.1) with PyTorch eager, in
each precision of --dtype (bench's names; default fp32), and appends the
rows to DIR/resnet.csv in that file's own column order (or creates it with
bench's header, common.COLUMNS), the dtype column the precision. Run it
right after duograd's sweep, on the same machine:

    build/bench --sweep resnet --dtype all --out DIR
    python3 bench/peers/torch_resnet.py --dtype all --out DIR

Precisions: fp32 (TF32 off); tf32 (torch.backends.cuda.matmul.allow_tf32
and torch.backends.cudnn.allow_tf32 on); bf16 and fp16 under torch.autocast
(float32 master weights), fp16 with GradScaler. Impls (the layout in the
name): on the GPU "torch-eager" (fp32 alone: cudnn.benchmark False,
PyTorch's default, NCHW), "torch-eager-cudnn-bench" (cudnn.benchmark True:
autotuned algorithms, NCHW) and "torch-eager-cudnn-bench-nhwc" (the same
with the model and the images channels-last, which tensor cores prefer);
on the CPU (--device cpu: PyTorch's CPU step, oneDNN) "torch-eager" and
"torch-eager-nhwc" in fp32 and bf16 (the CPU has no TF32, and PyTorch's
CPU step is not trained in fp16: those are said once and skipped).
Before timing, each impl's first step at a small batch is checked against
the same model in float64 on the CPU, as duograd checks its rows, with the
tolerances of duograd's resnet sweep in that precision (bench/runner/
step_tol.c).

torch is imported inside the functions that need it, so the FLOP code
runs (and is tested by bench/peers/tests/test_torch_resnet.py) without it.
"""
import argparse
import dataclasses
import math
import os
import sys
import time

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers.common import MAX_CV_PCT  # noqa: E402

PROG = "torch_resnet"

# ---- the network's geometry (no torch): FLOP and parameter counts ----

STAGE_WIDTHS = (64, 128, 256, 512)
STEMS = {  # core/nn/resnet.h; params: duograd's counts, asserted below
    "cifar": dict(case="resnet18-cifar", size=32, classes=10, kernel=3, stride=1, pad=1, pool=False,
                  params=11_173_962, check_batch=2),
    "imagenet": dict(case="resnet18-imagenet", size=224, classes=1000, kernel=7, stride=2, pad=3, pool=True,
                     params=11_689_512, check_batch=1),
}
BN_EPS, BN_MOMENTUM = 1e-5, 0.1              # DG_BN_EPS, DG_BN_MOMENTUM (core/nn/layers.h)
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 5e-4  # the sweep's optimizer
LOSS_TOL, UPDATE_TOL = 1e-4, 5e-2            # BENCH_STEP_LOSS_TOL, BENCH_STEP_UPDATE_TOL (core/check/step_check.h)
# bench_step_tol_bn_in (bench/runner/step_tol.c): a lower precision's loss and update tolerances for
# ResNet's step (batch norm at a small batch amplifies the roundings: UPDATE_TOL_BN)
LOW_TOL = {"tf32": (2e-3, 0.6), "bf16": (2e-2, 0.6), "fp16": (2e-3, 0.6)}
SCALE_TRIES = 24  # fp16: first steps GradScaler may skip (overflow) before the check gives up (2^16 -> 2^-8)


def tolerances(p):
    """(loss, update) tolerances of the first step's check in precision p"""
    if p not in common.PRECISIONS:
        raise ValueError(f"'{p}' is not a precision ({', '.join(common.PRECISIONS)})")
    return (LOSS_TOL, UPDATE_TOL) if p == "fp32" else LOW_TOL[p]


def runs(device_type, dtypes):
    """What runs on device_type ("cuda" or "cpu") for the precisions
    dtypes: ([(impl, p, cudnn_benchmark, channels_last)], {p: why skipped})"""
    out, skipped = [], {}
    for p in dtypes:
        if device_type == "cuda":
            if p == "fp32":
                out.append(("torch-eager", p, False, False))
            out += [("torch-eager-cudnn-bench", p, True, False), ("torch-eager-cudnn-bench-nhwc", p, True, True)]
        elif p in ("fp32", "bf16"):
            out += [("torch-eager", p, False, False), ("torch-eager-nhwc", p, False, True)]
        else:
            skipped[p] = ("no TF32 on the CPU" if p == "tf32" else
                          "PyTorch's CPU step is timed in fp32 and bf16 autocast only")
    return out, skipped


def conv_out(n, k, stride, pad):
    return (n + 2 * pad - k) // stride + 1


def resnet18_layers(stem):
    """Every conv and the linear layer, in forward order, as
    (kind, cin, cout, kernel, out_h, out_w); out_h/out_w are 1 for the linear."""
    s = STEMS[stem]
    h = conv_out(s["size"], s["kernel"], s["stride"], s["pad"])
    layers = [("conv", 3, 64, s["kernel"], h, h)]
    if s["pool"]:
        h = conv_out(h, 3, 2, 1)
    cin = 64
    for i, cout in enumerate(STAGE_WIDTHS):
        for b in range(2):
            stride = 2 if i > 0 and b == 0 else 1  # resnet.c: block_downsamples
            hin, h = h, conv_out(h, 3, stride, 1)
            layers.append(("conv", cin, cout, 3, h, h))       # conv1
            layers.append(("conv", cout, cout, 3, h, h))      # conv2
            if stride != 1:
                assert conv_out(hin, 1, stride, 0) == h
                layers.append(("conv", cin, cout, 1, h, h))   # shortcut
            cin = cout
    layers.append(("linear", 512, s["classes"], 1, 1, 1))
    return layers


def forward_macs(stem):
    """Multiply-adds of one image's forward: convs and the linear layer only
    (batch norm, relu, pooling and the loss are not counted), as duograd counts."""
    return sum(cin * cout * k * k * h * w for _, cin, cout, k, h, w in resnet18_layers(stem))


def step_flops(stem, batch):
    """A training step's FLOPs as duograd counts them (bench/sweeps/mlp/sweep_mlp.c: 6 per
    weight and row): forward 2 x MACs, backward twice the forward."""
    return 3 * 2 * forward_macs(stem) * batch


def param_count(stem):
    """conv weights (no bias) + 2 per batch-norm channel + the linear layer's weight and bias"""
    n = 0
    for kind, cin, cout, k, _, _ in resnet18_layers(stem):
        n += cin * cout * k * k + (2 * cout if kind == "conv" else cout)
    return n


# ---- the model in torch ----

def make_resnet18(stem, seed=1):
    """ResNet-18 as core/nn/resnet.c builds it, initialised as duograd does:
    conv and linear weights N(0, 2 / fan_in), linear bias 0, batch norm scale 1, shift 0."""
    import torch
    import torch.nn as nn

    def conv_bn(cin, cout, k, stride, pad):
        return [nn.Conv2d(cin, cout, k, stride, pad, bias=False),
                nn.BatchNorm2d(cout, eps=BN_EPS, momentum=BN_MOMENTUM)]

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride, 1), nn.ReLU(),
                                      *conv_bn(cout, cout, 3, 1, 1))
            self.shortcut = nn.Sequential(*conv_bn(cin, cout, 1, stride, 0)) if stride != 1 else nn.Identity()

        def forward(self, x):
            return torch.relu(self.body(x) + self.shortcut(x))

    s = STEMS[stem]
    layers = [*conv_bn(3, 64, s["kernel"], s["stride"], s["pad"]), nn.ReLU()]
    if s["pool"]:
        layers.append(nn.MaxPool2d(3, 2, 1))
    cin = 64
    for i, cout in enumerate(STAGE_WIDTHS):
        for b in range(2):
            layers.append(BasicBlock(cin, cout, 2 if i > 0 and b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, s["classes"])]
    model = nn.Sequential(*layers)

    torch.manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.Conv2d, nn.Linear)):
                fan_in = mod.weight[0].numel()
                mod.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
                if mod.bias is not None:
                    mod.bias.zero_()
            elif isinstance(mod, nn.BatchNorm2d):
                mod.weight.fill_(1.0)
                mod.bias.zero_()
    n = sum(p.numel() for p in model.parameters())
    assert n == s["params"] == param_count(stem), f"{s['case']}: {n} parameters, duograd has {s['params']}"
    return model


def hooked_forward_macs(model, stem):
    """The MACs of the torch model's convs and linear layer at batch 1, seen by
    forward hooks: proves the geometry behind the FLOP count is the model timed."""
    import torch
    import torch.nn as nn
    macs = 0

    def hook(mod, inputs, out):
        nonlocal macs
        per_output = mod.weight[0].numel()  # cin * kh * kw, or in_features
        macs += out.numel() * per_output

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    size = STEMS[stem]["size"]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    model.train()
    for h in handles:
        h.remove()
    return macs


def train_step(model, opt, x, y):
    import torch.nn.functional as F
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def make_scaler(torch, device_type):
    """GradScaler: torch.amp's (PyTorch 2.3+), else torch.cuda.amp's"""
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler(device_type)
    return torch.cuda.amp.GradScaler()


class Step:
    """One training step of model in precision p: bf16 and fp16 under
    torch.autocast (float32 master weights), fp16 with a GradScaler (a
    step whose gradients overflow is skipped, as GradScaler does);
    fp32 and tf32 as train_step (TF32 is precision_mode's)."""

    def __init__(self, model, p, device_type, scaler=None):
        import torch
        from peers.torch_ops import torch_dtype
        self.torch, self.model, self.device_type = torch, model, device_type
        self.opt = sgd(model)
        self.amp = torch_dtype(torch, p) if p in common.LOW_PRECISION else None
        self.scaler = scaler if scaler is not None or p != "fp16" else make_scaler(torch, device_type)

    def __call__(self, x, y):
        import torch.nn.functional as F
        if self.amp is None:
            return train_step(self.model, self.opt, x, y)
        self.opt.zero_grad(set_to_none=True)
        with self.torch.autocast(self.device_type, dtype=self.amp):
            loss = F.cross_entropy(self.model(x), y)  # autocast runs it in float32
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        return loss


def sgd(model):
    import torch
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)


def synthetic_batch(stem, batch, seed):
    """uniform [0, 1) images and random labels of the real shape, on the CPU"""
    import torch
    g = torch.Generator().manual_seed(seed)
    s = STEMS[stem]
    x = torch.rand(batch, 3, s["size"], s["size"], generator=g)
    y = torch.randint(0, s["classes"], (batch,), generator=g)
    return x, y


def one_step_delta(model, step, x, y):
    """the loss of one step (step(x, y)) and every parameter's change
    (updated - initial), concatenated, in float64 on the CPU"""
    import torch
    before = [p.detach().double().cpu().clone() for p in model.parameters()]
    loss = step(x, y).item()
    delta = torch.cat([(p.detach().double().cpu() - b).flatten() for p, b in zip(model.parameters(), before)])
    return loss, delta


def check_first_step(model, step, ref, x, y, device):
    """the loss's relative error and the parameter updates' relative L2 error
    of the first step on device, against ref = (loss, delta) in float64"""
    import torch
    loss, delta = one_step_delta(model, step, x, y)
    ref_loss, ref_delta = ref
    loss_err = abs(loss - ref_loss) / max(abs(ref_loss), 1e-30)
    upd_err = (torch.linalg.vector_norm(delta - ref_delta) / max(torch.linalg.vector_norm(ref_delta).item(),
                                                                  1e-300)).item()
    loss_err = math.inf if math.isnan(loss_err) else loss_err
    upd_err = math.inf if math.isnan(upd_err) else upd_err
    return loss_err, upd_err


# ---- timing ----

def time_steps(step, device):
    """Warm-up (>= 5 steps and >= 1 s), then timed steps (>= 20 and >= 2 s).
    GPU: CUDA events around each step (device time of the whole step), the
    queue not drained between steps; CPU: perf_counter around each step.
    Returns (warm-up steps, step times in ms, peak bytes)."""
    import torch
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else torch.cpu.synchronize
    warm = common.repeat(lambda: (step(), sync()), 5, 1.0)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ms, events = [], []

    def timed():
        if cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            stop.record()
            events.append((start, stop))
        else:
            t = time.perf_counter()
            step()
            ms.append(1e3 * (time.perf_counter() - t))
    common.repeat(timed, 20, 2.0)
    sync()
    ms += [a.elapsed_time(b) for a, b in events]
    # PyTorch's caching allocator's peak (parameters, gradients, momentum,
    # inputs and activations together), not an arena as duograd's plan has
    peak = torch.cuda.max_memory_allocated(device) if cuda else 0
    return warm, ms, peak


# ---- the sweep: the checked, timed step of a network (this peer's and torch_model's) ----

def base_row(stem, impl, device, batch, threads, p="fp32"):
    return dict(sweep="resnet", case=STEMS[stem]["case"], impl=impl, backend="gpu" if device.type == "cuda" else "cpu",
                m=batch, n=0, k=0, batch=batch, threads=threads, transfer=0, **common.precision_fields(p), cold=0,
                warmup=0, reps=0, median_ms=math.nan, min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan,
                gflops=math.nan, gbps=math.nan, scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY,
                max_rel_err=math.nan, check=f"f64-step@b{STEMS[stem]['check_batch']}", status="", note="")


@dataclasses.dataclass
class Network:
    """What run_network needs of the network a peer times: the rows' case
    and the peer (prog) for the messages; build() a new model (float32,
    on the CPU) that init_state's weights are loaded into; batch(n, seed)
    seeded examples (x, y) on the CPU; check_batch the first step's
    batch; tolerances(p) its (loss, update) tolerances in precision p;
    flops(batch) a step's FLOPs; row(impl, device, batch, threads, p) the
    row before timing (the peer's CSV columns)."""
    prog: str
    case: str
    build: object
    init_state: dict
    batch: object
    check_batch: int
    tolerances: object
    flops: object
    row: object


def fresh_model(net, device, channels_last):
    """net's model with its initial weights on device, channels-last where asked"""
    import torch
    model = net.build()
    model.load_state_dict(net.init_state)
    model.to(device)
    return model.to(memory_format=torch.channels_last) if channels_last else model


def reference(net):
    """net's first step in float64 on the CPU from the initial weights, at
    the check batch: (loss, every parameter's change), what each impl's
    first step is checked against"""
    model = net.build()
    model.load_state_dict(net.init_state)
    model.double().train()
    x, y = net.batch(net.check_batch, seed=1)
    opt = sgd(model)
    return one_step_delta(model, lambda xs, ys: train_step(model, opt, xs, ys), x.double(), y)


def checked_step(net, p, channels_last, device, ref):
    """The impl's model and step after its checked first step (fp16: the
    first step GradScaler did not skip, from the initial weights again,
    the scale it settled on kept): (model, step, loss error, update error,
    the scaler's note or "")."""
    import torch
    x, y = net.batch(net.check_batch, seed=1)
    x, y = x.to(device), y.to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    scaler, note = None, ""
    for tries in range(SCALE_TRIES):
        model = fresh_model(net, device, channels_last)
        step = Step(model, p, device.type, scaler)
        scale = step.scaler.get_scale() if step.scaler is not None else None
        loss_err, upd_err = check_first_step(model, step, ref, x, y, device)
        scaler = step.scaler
        if scaler is None or scaler.get_scale() >= scale:
            break
        note = f"GradScaler skipped {tries + 1} first steps (overflow; scale down to {scaler.get_scale():g})"
    return model, step, loss_err, upd_err, note


def run_impl(out, net, impl, p, cudnn_benchmark, channels_last, batches, device, ref, threads, summary):
    """one impl's rows, one per batch, written to out and appended to
    summary: "wrong" (not timed) when its first step fails the check,
    else timed: "ok", "noisy" or "oom" """
    import torch
    torch.backends.cudnn.benchmark = cudnn_benchmark
    model, step, loss_err, upd_err, note = checked_step(net, p, channels_last, device, ref)
    loss_tol, update_tol = net.tolerances(p)
    ok = loss_err <= loss_tol and upd_err <= update_tol
    errs = f"loss rel err {loss_err:.3g} (tol {loss_tol:g}); update rel err {upd_err:.3g} (tol {update_tol:g})"
    print(f"{net.prog}: {net.case} {impl} {p}: first step {'ok' if ok else 'WRONG'}: {errs}", file=sys.stderr)
    for batch in batches:
        row = net.row(impl, device, batch, threads, p)
        row.update(max_rel_err=max(loss_err, upd_err), note=note)
        if not ok:
            row.update(status="wrong", note=errs)
        else:
            x, y = net.batch(batch, seed=batch)
            try:
                x, y = x.to(device), y.to(device)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                warm, ms, peak = time_steps(lambda: step(x, y), device)
                median, lo, hi, cv = common.summarize(ms)
                row.update(warmup=warm, reps=len(ms), median_ms=median, min_ms=lo, max_ms=hi, cv_pct=cv,
                           gflops=net.flops(batch) / (median * 1e6), arena_bytes=peak, status="ok")
                if cv > MAX_CV_PCT:
                    row.update(status="noisy", note=f"cv_pct above {MAX_CV_PCT:g} (not measured again)")
            except torch.cuda.OutOfMemoryError as e:
                row.update(status="oom", note=str(e).splitlines()[0][:150])  # "CUDA out of memory. Tried to ..."
            x = y = None  # free the batch before the next (or after an out-of-memory)
            step.opt.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        out.write(row)
        summary.append(row)
        print(f"{net.prog}: {row['case']} {impl} {p} batch {batch}: {row['status']} median {row['median_ms']:.4g} ms",
              file=sys.stderr)


def run_network(out, net, impls, batches, device, threads, summary):
    """every impl of impls (runs()'s (impl, p, cudnn_benchmark,
    channels_last)) on net at batches, each under its precision's
    precision_mode, checked against net's float64 step"""
    import torch
    from peers.torch_ops import precision_mode
    ref = reference(net)
    for impl, p, bench, nhwc in impls:
        with precision_mode(torch, p):
            run_impl(out, net, impl, p, bench, nhwc, batches, device, ref, threads, summary)


def network(stem, init_state):
    """ResNet-18 with stem as run_network times it, from init_state's weights"""
    s = STEMS[stem]
    return Network(prog=PROG, case=s["case"], build=lambda: make_resnet18(stem), init_state=init_state,
                   batch=lambda n, seed: synthetic_batch(stem, n, seed), check_batch=s["check_batch"],
                   tolerances=tolerances, flops=lambda batch: step_flops(stem, batch),
                   row=lambda impl, device, batch, threads, p: base_row(stem, impl, device, batch, threads, p))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager peer of `bench --sweep resnet`, in every precision")
    common.out_arg(ap, "result folder: rows go to DIR/resnet.csv")
    ap.add_argument("--batches-cifar", type=common.int_list(), default=[8, 32, 128, 256])
    ap.add_argument("--batches-imagenet", type=common.int_list(), default=[8, 32, 64])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="one small batch per stem")
    common.dtype_args(ap)
    return ap.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)

    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device answers (torch.cuda.is_available() is False); "
              "use --device cpu for a smoke test", file=sys.stderr)
        return 1
    device = torch.device(a.device)
    torch.backends.cudnn.enabled = True
    cuda = device.type == "cuda"
    threads = 0 if cuda else torch.get_num_threads()
    impls, skipped = runs(device.type, a.dtype)
    for p, why in skipped.items():
        print(f"{PROG}: no {p} rows: {why}", file=sys.stderr)
    batches = {"cifar": a.batches_cifar, "imagenet": a.batches_imagenet}
    if a.quick:
        batches = {stem: [min(b)] for stem, b in batches.items()}

    where = f"gpu: {torch.cuda.get_device_name(device)}" if cuda else f"cpu: {threads} torch threads"
    meta = [f"duograd torch peer (bench/peers/torch_resnet.py): PyTorch eager in {','.join(a.dtype)}, "
            f"{'; '.join(sorted(set(i for i, *_ in impls)))} (-nhwc: channels-last, else NCHW)",
            common.date_line(),
            f"torch: {torch.__version__} (CUDA {torch.version.cuda})",
            where,
            f"cudnn: {torch.backends.cudnn.version()}",
            "tf32: on in tf32 rows alone (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32); "
            "bf16/fp16: torch.autocast, fp16 with GradScaler",
            "timing: GPU: CUDA events around each whole step (zero_grad; forward; loss; backward; "
            "optimizer.step); CPU: perf_counter; arena_bytes: torch.cuda.max_memory_allocated()"]
    os.makedirs(a.out, exist_ok=True)
    try:
        out = common.CsvOut(os.path.join(a.out, "resnet.csv"), meta, PROG)
    except ValueError as e:  # a header without a column bench_csv_read requires
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(f"{PROG}: torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {where}, "
          f"{','.join(a.dtype)} -> {out.path} ({len(out.columns)} columns)", file=sys.stderr)

    summary = []
    for stem in ("cifar", "imagenet"):
        init = make_resnet18(stem)
        macs = hooked_forward_macs(init, stem)
        assert macs == forward_macs(stem), f"{stem}: hooks count {macs} MACs, the geometry {forward_macs(stem)}"
        print(f"{STEMS[stem]['case']}: {param_count(stem):,} parameters; forward at batch 1: "
              f"{2 * macs / 1e9:.4f} GFLOPs ({macs / 1e9:.4f} GMACs; convs + linear, 2 per MAC); "
              f"step = 3 x forward")
        init_state = {k: v.clone() for k, v in init.state_dict().items()}
        run_network(out, network(stem, init_state), impls, batches[stem], device, threads, summary)
    out.close()

    print(f"\n{'case':<18} {'impl':<28} {'dtype':<5} {'batch':>5} {'median_ms':>10} {'img/s':>9} {'GFLOP/s':>9} "
          f"{'cv%':>6} {'peak_MiB':>9} {'err':>9}  status")
    for r in summary:
        img_s = r["batch"] / r["median_ms"] * 1e3 if math.isfinite(r["median_ms"]) else math.nan
        print(f"{r['case']:<18} {r['impl']:<28} {r['dtype']:<5} {r['batch']:>5} {r['median_ms']:>10.4g} {img_s:>9.1f} "
              f"{r['gflops']:>9.1f} {r['cv_pct']:>6.2f} {r['arena_bytes'] / 2**20:>9.1f} {r['max_rel_err']:>9.2e}  "
              f"{r['status']}{' (' + r['note'] + ')' if r['note'] else ''}")
    print(f"rows appended to {out.path}")
    return 1 if any(r["status"] == "wrong" for r in summary) else 0  # oom is a result, not a failure


if __name__ == "__main__":
    sys.exit(main())
