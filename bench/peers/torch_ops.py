#!/usr/bin/env python3
"""peers.torch_ops: PyTorch's figures for the kernels of `bench --sweep
gemm` and `bench --sweep ops` that duograd compares itself with: sgemm
(fp32, TF32 off), softmax, softmax cross-entropy and the row/column sums
with their backward, at the same shapes, on the same GPU, in the same run.

Rows go to DIR/torch_ops.csv in bench's column order (common.COLUMNS) (impl
"torch-fwd" / "torch-bwd" in the ops rows, "torch" in the gemm rows), kept
apart from duograd's own CSV files so `bench plot` and `bench compare` see
only duograd's rows; GB/s counts the bytes as duograd's ops sweep does (each
input and output once), GFLOP/s 2 m n k.

    build/bench --sweep gemm,ops --out DIR
    python3 bench/peers/torch_ops.py --out DIR [--ops-sizes 16777216,67108864]

Each result is checked against float64 on the GPU before it is timed
(a wrong result is a row with status "wrong" and no time).

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


def base_row(sweep, case, impl, m, n, k):
    return dict(sweep=sweep, case=case, impl=impl, backend="gpu", dtype="f32", m=m, n=n, k=k, batch=1,
                threads=1, transfer=0, tf32=0, cold=0, warmup=3, reps=0, median_ms=math.nan, min_ms=math.nan,
                max_ms=math.nan, cv_pct=math.nan, gflops=math.nan, gbps=math.nan, scratch_bytes=0, arena_bytes=0,
                live_bytes=0, max_rel_err=math.nan, check="f64", status="ok", note="")


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
    return float((x.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


def gemm_rows(out, dev):
    import torch
    shapes = [(s, s, s, "square") for s in GEMM_SQUARE] + list(GEMM_SHAPES)
    shapes += [(2047, 2047, 2047, "square:" + op) for op in ("NT", "TN", "TT")]
    for m, n, k, case in shapes:
        op = case.split(":")[1] if ":" in case else "NN"
        a = torch.rand(k, m, device=dev) if op[0] == "T" else torch.rand(m, k, device=dev)
        b = torch.rand(n, k, device=dev) if op[1] == "T" else torch.rand(k, n, device=dev)
        opa = a.t() if op[0] == "T" else a
        opb = b.t() if op[1] == "T" else b
        c = torch.empty(m, n, device=dev)
        ref = opa.double() @ opb.double()
        torch.mm(opa, opb, out=c)
        emit(out, base_row("gemm", case, "torch", m, n, k), lambda: torch.mm(opa, opb, out=c), rel_err(c, ref),
             1e-4, flops=2.0 * m * n * k)
        del a, b, c, ref


def ops_rows(out, dev, sizes):
    import torch
    import torch.nn.functional as F
    for N in sizes:
        rows = N // ROW
        x = torch.rand(rows, ROW, device=dev) * 4 - 2
        xd = x.double()
        f32 = 4.0 * N
        # softmax: fwd reads x, writes y; bwd reads dy, y, writes dx
        y = torch.softmax(x, -1)
        ref = torch.softmax(xd, -1)
        emit(out, base_row("ops", "softmax", "torch-fwd", N, 1, 1), lambda: torch.softmax(x, -1), rel_err(y, ref),
             1e-4, nbytes=2 * f32)
        dy = torch.rand_like(x)
        dx = torch._softmax_backward_data(dy, y, -1, torch.float32)
        refd = ref * (dy.double() - (dy.double() * ref).sum(-1, keepdim=True))
        emit(out, base_row("ops", "softmax", "torch-bwd", N, 1, 1),
             lambda: torch._softmax_backward_data(dy, y, -1, torch.float32), rel_err(dx, refd), 1e-4,
             nbytes=3 * f32)
        # softmax cross-entropy (mean over rows): fwd reads x and the labels
        lab = torch.randint(0, ROW, (rows,), device=dev)
        loss = F.cross_entropy(x, lab)
        refl = F.cross_entropy(xd, lab)
        emit(out, base_row("ops", "softmax_ce", "torch-fwd", N, 1, 1), lambda: F.cross_entropy(x, lab),
             rel_err(loss.reshape(1), refl.reshape(1)), 1e-4, nbytes=f32 + 8.0 * rows + 4)
        xg = x.clone().requires_grad_(True)
        lossg = F.cross_entropy(xg, lab)
        one = torch.ones((), device=dev)
        (g,) = torch.autograd.grad(lossg, xg, one, retain_graph=True)
        refg = (torch.softmax(xd, -1) - F.one_hot(lab, ROW).double()) / rows
        emit(out, base_row("ops", "softmax_ce", "torch-bwd", N, 1, 1),
             lambda: torch.autograd.grad(lossg, xg, one, retain_graph=True), rel_err(g, refg), 1e-4,
             nbytes=2 * f32 + 8.0 * rows + 4)
        # sums: row sums and column sums; their backward materialises the
        # broadcast (PyTorch's own backward is a stride-0 view: expand + copy)
        for case, dim, outn in (("sum_rows", 1, rows), ("sum_cols", 0, ROW)):
            s = x.sum(dim)
            emit(out, base_row("ops", case, "torch-fwd", N, 1, 1), lambda: x.sum(dim),
                 rel_err(s, xd.sum(dim)), 1e-4, nbytes=f32 + 4.0 * outn)
            gs = torch.rand(outn, device=dev)
            shape = (rows, 1) if dim == 1 else (1, ROW)
            b = gs.reshape(shape).expand(rows, ROW).contiguous()
            emit(out, base_row("ops", case, "torch-bwd", N, 1, 1),
                 lambda: gs.reshape(shape).expand(rows, ROW).contiguous(),
                 rel_err(b, gs.double().reshape(shape).expand(rows, ROW)), 1e-6, nbytes=f32 + 4.0 * outn)
        del x, xd, y, ref, dy, dx, refd, xg, g, refg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.out_arg(ap, "result folder (torch_ops.csv is written or appended to)")
    ap.add_argument("--ops-sizes", default="16777216,67108864", help="ops sizes in elements, multiples of 1024")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--no-ops", action="store_true")
    ap.add_argument("--transfers", action="store_true", help="also the host-device transfer rows (ceiling sweep)")
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
            f"gpu: {torch.cuda.get_device_name(dev)}", "tf32: off", common.date_line()]
    out = common.CsvOut(os.path.join(args.out, "torch_ops.csv"), meta, PROG)
    try:
        if not args.no_ops:
            sizes = [int(s) for s in args.ops_sizes.split(",") if s]
            if any(s <= 0 or s % ROW for s in sizes):
                ap.error(f"--ops-sizes: each a positive multiple of {ROW}")
            ops_rows(out, dev, sizes)
        if not args.no_gemm:
            gemm_rows(out, dev)
        if args.transfers:
            transfer_rows(out, dev)
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
