#!/usr/bin/env python3
"""peers.torch_ops: PyTorch's figures for the kernels of `bench --sweep
gemm` and `bench --sweep ops` that duograd compares itself with: GEMM,
softmax, softmax cross-entropy and the row/column sums with their backward,
at the same shapes, on the same GPU, in the same run, in each precision of
--dtype (bench's names: fp32, tf32, bf16, fp16; default fp32):

  fp32  float32 tensors, TF32 off (torch.backends.cuda.matmul.allow_tf32
        = False): sgemm;
  tf32  the same float32 tensors with allow_tf32 = True: the products on
        TF32 tensor cores (the ops rows are fp32's again: TF32 changes
        matmuls only, so tf32 has gemm rows alone);
  bf16, fp16  A and B made in float32 and rounded to the dtype (.to), the
        product by torch.mm of the low-precision tensors, float32
        accumulation (the reduced-precision reductions PyTorch allows by
        default are turned off: allow_bf16/fp16_reduced_precision_reduction
        = False), the output in the dtype, as PyTorch returns it.
        duograd's bf16/fp16 GEMM writes a float32 C: the same FLOPs, but
        PyTorch's C has half the bytes. The ops rows take their input
        rounded to the dtype and return the dtype (PyTorch computes in
        float32 inside and stores bf16/fp16), GB/s counting 2-byte elements.

Rows go to DIR/torch_ops.csv in bench's column order (common.COLUMNS) (impl
"torch-fwd" / "torch-bwd" in the ops rows, "torch" in the gemm rows; the
dtype column the precision, tf32 1 exactly in tf32 rows), kept apart from
duograd's own CSV files so `bench plot` and `bench compare` see only
duograd's rows; GB/s counts the bytes as duograd's ops sweep does (each
input and output once), GFLOP/s 2 m n k.

    build/bench --sweep gemm,ops --out DIR
    python3 bench/peers/torch_ops.py --out DIR [--dtype fp32,tf32,bf16,fp16] [--ops-sizes 16777216,67108864]

Each result is checked against float64 on the GPU, computed from the
operands the kernel was given (for bf16/fp16 the rounded ones), before it
is timed, at the precision's tolerance (common.gemm_tol for the products,
common.rounded_tol for the ops: derived from the unit roundoffs, see
common.py); a wrong result is a row with status "wrong" and no time.

Host-device transfers (the ceiling sweep's h2d and d2h rows, --transfers):
a tensor copied between the GPU and a pinned or a pageable host tensor
(impl "torch-pinned", "torch-pageable"), at the sizes duograd's ceiling
sweep uses, timed like duograd's transfer rows: the host clock around the
copy and a synchronize; GB/s counts the bytes moved once. Checked: the bytes
that arrive equal the bytes sent.
"""
import argparse
import math
import os
import sys
import time

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers.common import MAX_CV_PCT, summarize  # noqa: E402

PROG = "torch_ops"

ROW = 1024  # OP_SWEEP_ROW: the ops sweep's rows are 1024 floats wide
GEMM_SQUARE = (1000, 1024, 2047, 2048, 3000, 4096, 4097, 8192)
GEMM_SHAPES = ((128, 4096, 4096, "mlp_layer"), (4096, 4096, 128, "low_k"), (8192, 1024, 1024, "tall"))


def time_gpu(fn, min_reps=20, min_s=0.3):
    """Median, min, max, CV (ms) of fn by CUDA events, after warm-up; the
    queue not drained between runs."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    events = []

    def timed():
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        events.append((a, b))
    common.repeat(timed, min_reps, min_s, max_count=10000)
    torch.cuda.synchronize()
    return len(events), summarize([a.elapsed_time(b) for a, b in events])


def base_row(sweep, case, impl, m, n, k, precision="fp32"):
    """a GPU row of precision's dtype and tf32 columns, before its check and times"""
    return dict(sweep=sweep, case=case, impl=impl, backend="gpu", m=m, n=n, k=k, batch=1,
                threads=1, transfer=0, **common.precision_fields(precision), cold=0, warmup=3, reps=0,
                median_ms=math.nan, min_ms=math.nan,
                max_ms=math.nan, cv_pct=math.nan, gflops=math.nan, gbps=math.nan, scratch_bytes=0, arena_bytes=0,
                live_bytes=0, **common.NO_ENERGY, max_rel_err=math.nan, check="f64", status="ok", note="")


def emit(out, row, fn, err, tol, flops=0.0, nbytes=0.0):
    row["max_rel_err"] = err
    if not err <= tol:
        row.update(status="wrong", note=f"max_rel_err {err:.3g} > {tol:g} against float64")
    else:
        reps, (med, lo, hi, cv) = time_gpu(fn)
        row.update(reps=reps, median_ms=med, min_ms=lo, max_ms=hi, cv_pct=cv,
                   status="noisy" if cv > MAX_CV_PCT else "ok")
        if flops:
            row["gflops"] = flops / med / 1e6
        if nbytes:
            row["gbps"] = nbytes / med / 1e6
    out.write(row)
    print(f"{row['sweep']} {row['case']} {row['impl']} {row['m']}x{row['n']}x{row['k']}: "
          f"{row['median_ms']:.4g} ms {row['gflops']:.4g} GFLOP/s {row['gbps']:.4g} GB/s {row['status']}", flush=True)


def time_host(fn, min_reps=20, min_s=0.3):
    """Median, min, max, CV (ms) of fn() + synchronize by the host clock,
    after warm-up: the copies include waiting for them, as duograd's
    transfer rows (CLOCK_MONOTONIC around a synchronised region)."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []

    def timed():
        a = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append(1e3 * (time.perf_counter() - a))
    common.repeat(timed, min_reps, min_s, max_count=10000)
    return len(ms), summarize(ms)


TRANSFER_BYTES = (1 << 20, 16 << 20, 256 << 20)  # bench/sweeps/ceiling/ceiling_transfer.c's full sizes


def transfer_rows(out, dev):
    import torch
    for nbytes in TRANSFER_BYTES:
        n = nbytes // 4
        sent = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32)  # any bit pattern
        gpu = torch.empty(n, dtype=torch.int32, device=dev)
        for pinned in (True, False):
            host = torch.empty(n, dtype=torch.int32, pin_memory=pinned)
            impl = "torch-pinned" if pinned else "torch-pageable"
            for case, fn in (("h2d", lambda: gpu.copy_(host)), ("d2h", lambda: host.copy_(gpu))):
                row = base_row("ceiling", case, impl, n, 1, 1)
                row.update(transfer=1, check="bitwise")
                if case == "h2d":
                    host.copy_(sent)
                    gpu.zero_()
                else:
                    gpu.copy_(sent.to(dev))
                    host.zero_()
                fn()
                torch.cuda.synchronize()
                same = torch.equal(gpu.cpu() if case == "h2d" else host, sent)
                row["max_rel_err"] = 0.0 if same else 1.0
                if not same:
                    row.update(status="wrong", note="the bytes that arrived differ from those sent")
                else:
                    reps, (med, lo, hi, cv) = time_host(fn)
                    row.update(reps=reps, median_ms=med, min_ms=lo, max_ms=hi, cv_pct=cv, gbps=nbytes / med / 1e6,
                               status="noisy" if cv > MAX_CV_PCT else "ok")
                out.write(row)
                print(f"ceiling {case} {impl} {nbytes} B: {row['median_ms']:.4g} ms {row['gbps']:.4g} GB/s "
                      f"{row['status']}", flush=True)
            del host


def rel_err(x, ref):
    """max |x - ref| / max |ref|, in float64 (x any dtype, ref float64)"""
    return float((x.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


TORCH_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(torch, p):
    """the torch dtype tensors of precision p are stored in"""
    return getattr(torch, TORCH_DTYPE[p])


class precision_mode:
    """`with precision_mode(torch, p):` PyTorch's matmul settings for
    precision p, restored after: TF32 on for tf32 alone (matmuls and
    cuDNN), and float32 accumulation for bf16/fp16 products (no reduced-
    precision reductions, which PyTorch allows by default)"""

    FLAGS = (("cuda.matmul", "allow_tf32"), ("cudnn", "allow_tf32"),
             ("cuda.matmul", "allow_bf16_reduced_precision_reduction"),
             ("cuda.matmul", "allow_fp16_reduced_precision_reduction"))

    def __init__(self, torch, p):
        self.torch, self.p, self.saved = torch, p, []

    def _where(self, path):
        obj = self.torch.backends
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    def __enter__(self):
        want = {"allow_tf32": self.p == "tf32"}
        for path, name in self.FLAGS:
            obj = self._where(path)
            if hasattr(obj, name):  # an older PyTorch lacks the bf16 flag
                self.saved.append((obj, name, getattr(obj, name)))
                setattr(obj, name, want.get(name, False))
        return self

    def __exit__(self, *exc):
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)
        self.saved = []
        return False


def gemm_check(err, p, k):
    """(ok, tolerance) of a gemm row of precision p with k terms a row, its
    output in the dtype PyTorch returns (bf16/fp16 for those, float32 else)"""
    tol = common.gemm_tol(p, k)
    return err <= tol, tol


def gemm_shapes():
    """(m, n, k, case) of the gemm sweep's rows that PyTorch's are set beside"""
    shapes = [(s, s, s, "square") for s in GEMM_SQUARE] + list(GEMM_SHAPES)
    return shapes + [(2047, 2047, 2047, "square:" + op) for op in ("NT", "TN", "TT")]


def gemm_rows(out, dev, p):
    """the gemm rows of precision p; A, B >= 0 (torch.rand), made in
    float32 and rounded to p's dtype, as the bound of common.gemm_tol needs"""
    import torch
    dt = torch_dtype(torch, p)
    with precision_mode(torch, p):
        for m, n, k, case in gemm_shapes():
            op = case.split(":")[1] if ":" in case else "NN"
            a = (torch.rand(k, m, device=dev) if op[0] == "T" else torch.rand(m, k, device=dev)).to(dt)
            b = (torch.rand(n, k, device=dev) if op[1] == "T" else torch.rand(k, n, device=dev)).to(dt)
            opa = a.t() if op[0] == "T" else a
            opb = b.t() if op[1] == "T" else b
            c = torch.empty(m, n, device=dev, dtype=dt)
            ref = opa.double() @ opb.double()
            torch.mm(opa, opb, out=c)
            err = rel_err(c, ref)
            del ref
            emit(out, base_row("gemm", case, "torch", m, n, k, p), lambda: torch.mm(opa, opb, out=c), err,
                 gemm_check(err, p, k)[1], flops=2.0 * m * n * k)
            del a, b, c


OPS_TOL = 1e-4  # the ops rows' float32 tolerance (measured: they agree to about 1e-6)
# softmax's backward, dx = y dy - y (sum dy y), in bf16/fp16: PyTorch's
# kernel rounds the two products to the dtype before their difference, each
# u of its own size, which is up to twice the result's where they cancel,
# then the output: counted as 4 roundings. Measured on an H200: 2.6 u in
# bf16 and fp16 (1.0e-2, 1.3e-3), against bounds of 1.6e-2 and 2.0e-3.
SOFTMAX_BWD_ROUNDINGS = 4


def ops_rows(out, dev, sizes, p):
    """the ops rows of precision p (fp32, bf16 or fp16): the input made in
    float32 and rounded to the dtype, the float64 references from the
    rounded values; each tolerance OPS_TOL and one rounding of the output
    (the loss two: its log-probabilities are stored in the dtype first;
    softmax's backward SOFTMAX_BWD_ROUNDINGS)"""
    import torch
    import torch.nn.functional as F
    dt = torch_dtype(torch, p)
    es = 2.0 if p in common.LOW_PRECISION else 4.0  # bytes an element
    tol, tol2 = common.rounded_tol(p, OPS_TOL), common.rounded_tol(p, OPS_TOL, roundings=2)
    tol_sbwd = common.rounded_tol(p, OPS_TOL, roundings=SOFTMAX_BWD_ROUNDINGS)
    for N in sizes:
        rows = N // ROW
        x = (torch.rand(rows, ROW, device=dev) * 4 - 2).to(dt)
        xd = x.double()
        nb = es * N
        # softmax: fwd reads x, writes y; bwd reads dy, y, writes dx
        y = torch.softmax(x, -1)
        ref = torch.softmax(xd, -1)
        emit(out, base_row("ops", "softmax", "torch-fwd", N, 1, 1, p), lambda: torch.softmax(x, -1),
             rel_err(y, ref), tol, nbytes=2 * nb)
        dy = torch.rand_like(x)
        dx = torch._softmax_backward_data(dy, y, -1, dt)
        yd = y.double()
        refd = yd * (dy.double() - (dy.double() * yd).sum(-1, keepdim=True))
        emit(out, base_row("ops", "softmax", "torch-bwd", N, 1, 1, p),
             lambda: torch._softmax_backward_data(dy, y, -1, dt), rel_err(dx, refd), tol_sbwd, nbytes=3 * nb)
        # softmax cross-entropy (mean over rows): fwd reads x and the labels
        lab = torch.randint(0, ROW, (rows,), device=dev)
        loss = F.cross_entropy(x, lab)
        refl = F.cross_entropy(xd, lab)
        emit(out, base_row("ops", "softmax_ce", "torch-fwd", N, 1, 1, p), lambda: F.cross_entropy(x, lab),
             rel_err(loss.reshape(1), refl.reshape(1)), tol2, nbytes=nb + 8.0 * rows + es)
        xg = x.clone().requires_grad_(True)
        lossg = F.cross_entropy(xg, lab)
        one = torch.ones((), device=dev, dtype=dt)
        (g,) = torch.autograd.grad(lossg, xg, one, retain_graph=True)
        refg = (torch.softmax(xd, -1) - F.one_hot(lab, ROW).double()) / rows
        emit(out, base_row("ops", "softmax_ce", "torch-bwd", N, 1, 1, p),
             lambda: torch.autograd.grad(lossg, xg, one, retain_graph=True), rel_err(g, refg), tol2,
             nbytes=2 * nb + 8.0 * rows + es)
        # sums: row sums and column sums; their backward materialises the
        # broadcast (PyTorch's own backward is a stride-0 view: expand + copy)
        for case, dim, outn in (("sum_rows", 1, rows), ("sum_cols", 0, ROW)):
            s = x.sum(dim)
            emit(out, base_row("ops", case, "torch-fwd", N, 1, 1, p), lambda: x.sum(dim),
                 rel_err(s, xd.sum(dim)), tol, nbytes=nb + es * outn)
            gs = torch.rand(outn, device=dev).to(dt)
            shape = (rows, 1) if dim == 1 else (1, ROW)
            b = gs.reshape(shape).expand(rows, ROW).contiguous()
            emit(out, base_row("ops", case, "torch-bwd", N, 1, 1, p),
                 lambda: gs.reshape(shape).expand(rows, ROW).contiguous(),
                 rel_err(b, gs.double().reshape(shape).expand(rows, ROW)), 1e-6, nbytes=nb + es * outn)
        del x, xd, y, ref, dy, dx, yd, refd, xg, g, refg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.out_arg(ap, "result folder (torch_ops.csv is written or appended to)")
    ap.add_argument("--ops-sizes", default="16777216,67108864", help="ops sizes in elements, multiples of 1024")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--no-ops", action="store_true")
    ap.add_argument("--transfers", action="store_true", help="also the host-device transfer rows (ceiling sweep)")
    common.dtype_args(ap)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    os.makedirs(args.out, exist_ok=True)
    meta = [f"torch_ops peer (bench/peers/torch_ops.py): PyTorch {torch.__version__}, CUDA {torch.version.cuda}",
            f"gpu: {torch.cuda.get_device_name(dev)}", f"dtypes: {','.join(args.dtype)}",
            "tf32: on in the tf32 rows alone; bf16/fp16 products accumulate in float32 (reduced-precision "
            "reductions off), their output in the dtype", common.date_line()]
    out = common.CsvOut(os.path.join(args.out, "torch_ops.csv"), meta, PROG)
    try:
        if not args.no_ops:
            sizes = [int(s) for s in args.ops_sizes.split(",") if s]
            if any(s <= 0 or s % ROW for s in sizes):
                ap.error(f"--ops-sizes: each a positive multiple of {ROW}")
            for p in args.dtype:
                if p != "tf32":  # TF32 changes matmuls only: its ops rows would be fp32's
                    ops_rows(out, dev, sizes, p)
        if not args.no_gemm:
            for p in args.dtype:
                gemm_rows(out, dev, p)
        if args.transfers:
            transfer_rows(out, dev)
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
