#!/usr/bin/env python3
"""peers.torch_ddp: the PyTorch DistributedDataParallel peer of `bench --sweep scaling`.

Times the sweep's weak and strong training steps of the MLP and of
ResNet-18 (CIFAR stem) on 1, 2, 4 and 8 GPUs (as many as answer, or
--gpus) with PyTorch eager fp32, TF32 off: one process per GPU, NCCL
underneath, DistributedDataParallel with its default gradient buckets
(25 MB) overlapping the all-reduce with the backward. One GPU runs the
plain model (no DDP wrapper, no all-reduce), as duograd's one-GPU rows do.
The rows go to DIR/scaling.csv with impl "torch-ddp", in that file's own
column order; `bench plot DIR` then sets their efficiency beside duograd's.
Run it right after duograd's sweep, on the same machine:

    build/bench --sweep scaling --out DIR
    python3 bench/peers/torch_ddp.py --out DIR

The models are the sweep's (bench/sweeps/scaling/sweep_scaling.c): the MLP 784-2048-2048-10
(ReLU, softmax cross-entropy, SGD with momentum 0.9, lr 0.01), 1024 examples
per GPU; ResNet-18 CIFAR (peers.torch_resnet's model: momentum 0.9, lr
0.1, weight decay 5e-4), 64 per GPU. Weak rows keep the batch per GPU;
strong rows split the largest GPU count's weak batch.

Check before timing, as the sweep checks its rows. One GPU ("f64-step@b2"):
the first step at batch 2 against the same step in float64 on the CPU.
n GPUs ("dp=mean-of-slices"): every process also runs its slice alone,
a plain step from the same weights; after one DDP step the replicas'
parameters must be identical to the bit and equal the mean of the
slices' updated parameters (relative L2 1e-4: the first momentum step is
linear in the gradient). Batch norm's statistics are each replica's own.

Timing: process 0's CUDA events around each whole step (it waits for the
all-reduce, so the slowest replica's exchange is inside), after warm-up;
every process runs the same number of steps (process 0 decides it and
broadcasts it). NCCL_NVLS_ENABLE is set to 0 where it is unset: NVLink
multicast stays off.
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import time

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import torch_resnet as tp  # noqa: E402

PROG = "torch_ddp"

COUNTS = (1, 2, 4, 8)  # bench/sweeps/scaling/sweep_scaling.c: scaling_counts
MLP_WIDTHS = (784, 2048, 2048, 10)
MODELS = {  # name: examples per GPU of the weak rows, optimizer
    "mlp": dict(per_gpu=1024, lr=0.01, momentum=0.9, weight_decay=0.0),
    "resnet18-cifar": dict(per_gpu=64, lr=tp.LR, momentum=tp.MOMENTUM, weight_decay=tp.WEIGHT_DECAY),
}
DP_TOL = 1e-4            # the sweep's tolerance of the mean of the slices' updates
MIN_STEPS, MIN_SECONDS = 20, 2.0
HANG_SECONDS = 120       # a process still inside its rows after this long prints its stack and exits


# ---- the rows' geometry (no torch) ----

def gpu_counts(available, wanted=None):
    """the sweep's counts up to the GPUs available (or the --gpus list, each
    of which must be available)"""
    if wanted:
        too_many = [n for n in wanted if n > available]
        if too_many:
            raise ValueError(f"--gpus {','.join(map(str, too_many))}: only {available} GPU(s) answer")
        return sorted(set(wanted))
    return [n for n in COUNTS if n <= available]


def batches(model, kind, n, counts):
    """(batch per GPU, global batch) of a row: weak keeps MODELS' batch per
    GPU; strong splits the largest count's weak global batch"""
    per = MODELS[model]["per_gpu"]
    if kind == "weak":
        return per, per * n
    total = per * max(counts)
    if total % n:
        raise ValueError(f"{model}: a global batch of {total} does not split over {n} GPUs")
    return total // n, total


def mlp_param_count(widths=MLP_WIDTHS):
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def step_flops(model, batch):
    """FLOPs of one step's GEMMs and convolutions: MLP 6 per weight and
    example, less the first layer's input gradient, which nobody needs;
    ResNet-18 three forwards. The sweep also counts its elementwise nodes
    (0.14% more for the MLP)."""
    if model == "mlp":
        w = sum(a * b for a, b in zip(MLP_WIDTHS, MLP_WIDTHS[1:]))
        return 6 * w * batch - 2 * MLP_WIDTHS[0] * MLP_WIDTHS[1] * batch
    return tp.step_flops("cifar", batch)


def param_count(model):
    return mlp_param_count() if model == "mlp" else tp.param_count("cifar")


def base_row(model, kind, n, per, total):
    return dict(sweep="scaling", case=f"{model}-{kind}", impl="torch-ddp", backend="gpu", m=n, n=per,
                k=4 * param_count(model), batch=total, threads=0, transfer=0, **common.precision_fields("fp32"), cold=0,
                warmup=0, reps=0,
                median_ms=math.nan, min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan, gflops=math.nan,
                gbps=math.nan, scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY, max_rel_err=math.nan,
                check="f64-step@b2" if n == 1 else "dp=mean-of-slices", status="", note="")


# ---- the models in torch ----

def make_model(model, seed=1):
    """the same weights in every process: seeded N(0, 2 / fan_in), biases 0"""
    import torch
    import torch.nn as nn
    if model == "resnet18-cifar":
        return tp.make_resnet18("cifar", seed)
    layers = []
    for i, (a, b) in enumerate(zip(MLP_WIDTHS, MLP_WIDTHS[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(MLP_WIDTHS) - 2 else [])
    net = nn.Sequential(*layers)
    torch.manual_seed(seed)
    with torch.no_grad():
        for mod in net:
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, math.sqrt(2.0 / mod.in_features))
                mod.bias.zero_()
    return net


def optimizer(model, net):
    import torch
    o = MODELS[model]
    return torch.optim.SGD(net.parameters(), lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])


def synthetic(model, batch, seed):
    """the global batch, the same in every process (seeded, on the CPU)"""
    import torch
    if model == "resnet18-cifar":
        return tp.synthetic_batch("cifar", batch, seed)
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, MLP_WIDTHS[0], generator=g), torch.randint(0, MLP_WIDTHS[-1], (batch,), generator=g)


def flat_params(net):
    import torch
    return torch.cat([p.detach().flatten() for p in net.parameters()])


# ---- one process per GPU ----

def check_one_gpu(model, dev):
    """the first step at batch 2 against float64 on the CPU: max of the
    loss's and the update's relative errors"""
    ref_net = make_model(model).double()
    x, y = synthetic(model, 2, seed=5)
    ref = tp.one_step_delta(ref_net, optimizer(model, ref_net), x.double(), y)
    probe = make_model(model).to(dev)
    loss_err, upd_err = tp.check_first_step(probe, optimizer(model, probe), ref, x, y, dev)
    ok = loss_err <= tp.LOSS_TOL and upd_err <= tp.UPDATE_TOL
    return ok, max(loss_err, upd_err), (f"loss rel err {loss_err:.3g} (tol {tp.LOSS_TOL:g}); update rel err "
                                        f"{upd_err:.3g} (tol {tp.UPDATE_TOL:g})")


def check_ddp(model, ddp, plain, xs, ys, world):
    """one DDP step on the global batch's slice against the mean of the
    slices' plain steps; replicas identical to the bit"""
    import torch
    import torch.distributed as dist
    tp.train_step(plain, optimizer(model, plain), xs, ys)
    mean = flat_params(plain).double()
    dist.all_reduce(mean)
    mean /= world
    tp.train_step(ddp, optimizer(model, ddp), xs, ys)
    mine = flat_params(ddp.module)
    hi, lo = mine.clone(), mine.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    identical = torch.equal(hi, lo)
    err = (torch.linalg.vector_norm(mine.double() - mean) / torch.linalg.vector_norm(mean)).item()
    err = math.inf if math.isnan(err) else err
    ok = identical and err <= DP_TOL
    why = f"replicas {'identical' if identical else 'DIFFER'}; against the mean of the slices' steps rel L2 {err:.3g}"
    return ok, err, why


def time_steps(step, dev, world):
    """warm-up (>= 5 steps, >= 1 s), then >= MIN_STEPS timed steps and >=
    MIN_SECONDS, CUDA events around each step. Every process must run as
    many steps (each joins the all-reduces): process 0 times 5 steps and
    broadcasts the counts of the rest."""
    import torch
    import torch.distributed as dist
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / 5
    counts = torch.tensor([max(0, math.ceil((1.0 - 5 * per_step) / per_step)),
                           max(MIN_STEPS, math.ceil(MIN_SECONDS / per_step))], device=dev)
    if world > 1:
        dist.broadcast(counts, 0)
    more_warm, timed = (int(v) for v in counts.tolist())
    for _ in range(more_warm):
        step()
    events = []
    for _ in range(timed):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        events.append((a, b))
    torch.cuda.synchronize()
    return 5 + more_warm, [a.elapsed_time(b) for a, b in events]


def run_row(model, kind, world, counts, rank, dev):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    per, total = batches(model, kind, world, counts)
    row = base_row(model, kind, world, per, total)
    x, y = synthetic(model, total, seed=77 + total)
    xs, ys = x[rank * per:(rank + 1) * per].to(dev), y[rank * per:(rank + 1) * per].to(dev)
    net = make_model(model).to(dev)
    if world == 1:
        ok, err, why = check_one_gpu(model, dev)
        stepped = net
    else:
        stepped = DDP(make_model(model).to(dev), device_ids=[dev.index])
        ok, err, why = check_ddp(model, stepped, net, xs, ys, world)
    row["max_rel_err"] = err
    if not ok:
        row.update(status="wrong", note=why)
        return row
    opt = optimizer(model, stepped)
    warm, ms = time_steps(lambda: tp.train_step(stepped, opt, xs, ys), dev, world)
    median, lo, hi, cv = common.summarize(ms)
    row.update(warmup=warm, reps=len(ms), median_ms=median, min_ms=lo, max_ms=hi, cv_pct=cv,
               gflops=step_flops(model, total) / (median * 1e6), arena_bytes=torch.cuda.max_memory_allocated(dev),
               status="ok", note=why if world > 1 else "one GPU: the plain model, no DDP wrapper")
    if cv > common.MAX_CV_PCT:
        row.update(status="noisy", note=row["note"] + f"; cv_pct above {common.MAX_CV_PCT:g} (not measured again)")
    return row


def worker(rank, world, counts, models, init_file, result_file):
    import faulthandler

    import torch
    import torch.distributed as dist
    # a hang (a collective one process never joins) shows where each process waits
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    if world > 1:
        dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=HANG_SECONDS))
        print(f"{PROG}: process {rank} of {world}: process group up", file=sys.stderr)
    rows = []
    try:
        for model in models:
            for kind in ("weak", "strong"):
                faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)  # each row gets the whole time
                rows.append(run_row(model, kind, world, counts, rank, dev))
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(dev)
                if rank == 0:
                    r = rows[-1]
                    print(f"{PROG}: {r['case']} on {world} GPU(s), batch {r['batch']}: {r['status']} "
                          f"median {r['median_ms']:.4g} ms ({r['check']}: {r['max_rel_err']:.3g})", file=sys.stderr)
    finally:
        faulthandler.cancel_dump_traceback_later()
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        with open(result_file, "w") as f:
            json.dump(rows, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch DDP peer of `bench --sweep scaling` (fp32, TF32 off)")
    common.out_arg(ap, "result folder: rows go to DIR/scaling.csv")
    ap.add_argument("--gpus", type=lambda s: [int(v) for v in s.split(",")], default=None,
                    help="GPU counts, comma-separated (default: 1, 2, 4, 8 up to the GPUs that answer)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    a = ap.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        ap.error(f"--models: unknown model(s) {', '.join(unknown) or '(none)'}; known: {', '.join(MODELS)}")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off

    import torch
    import torch.multiprocessing as mp
    available = torch.cuda.device_count()
    if available < 1:
        print(f"{PROG}: no CUDA device answers (torch.cuda.device_count() is 0)", file=sys.stderr)
        return 1
    try:
        counts = gpu_counts(available, a.gpus)
        for m in models:
            for n in counts:
                batches(m, "strong", n, counts)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    meta = [f"duograd DDP peer (bench/peers/torch_ddp.py): PyTorch eager fp32, DistributedDataParallel over NCCL "
            f"(default 25 MB buckets), one process per GPU; one GPU: the plain model",
            common.date_line(),
            f"torch: {torch.__version__} (CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})",
            f"gpu: {available} x {torch.cuda.get_device_name(0)}",
            "tf32: off; NCCL_NVLS_ENABLE=" + os.environ["NCCL_NVLS_ENABLE"],
            "timing: process 0's CUDA events around each whole step (zero_grad; forward; loss; backward with the "
            "all-reduce; optimizer.step); arena_bytes: process 0's torch.cuda.max_memory_allocated() over the row, "
            "its check's models included"]
    os.makedirs(a.out, exist_ok=True)
    try:
        out = common.CsvOut(os.path.join(a.out, "scaling.csv"), meta, PROG)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    summary = []
    with tempfile.TemporaryDirectory(prefix="ddp-peer-") as tmp:
        for n in counts:
            result = os.path.join(tmp, f"rows-{n}.json")
            init = os.path.join(tmp, f"init-{n}")  # the file rendezvous: one per process group
            mp.spawn(worker, args=(n, counts, models, init, result), nprocs=n, join=True)
            with open(result) as f:
                for row in json.load(f):
                    out.write(row)
                    summary.append(row)
    out.close()
    print(f"\n{'case':<22} {'GPUs':>4} {'batch':>6} {'median_ms':>10} {'samples/s':>10} {'cv%':>6}  status")
    for r in summary:
        rate = r["batch"] / r["median_ms"] * 1e3 if math.isfinite(r["median_ms"]) else math.nan
        print(f"{r['case']:<22} {r['m']:>4} {r['batch']:>6} {r['median_ms']:>10.4g} {rate:>10.0f} {r['cv_pct']:>6.2f}  "
              f"{r['status']}{' (' + r['note'] + ')' if r['note'] else ''}")
    print(f"rows appended to {out.path}")
    return 1 if any(r["status"] == "wrong" for r in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
