#!/usr/bin/env python3
"""peers.torch_attention: PyTorch's figures for duograd's fused attention
(DG_OP_ATTENTION and its backward): torch.nn.functional.
scaled_dot_product_attention, forward alone and forward + backward, at
batch 16, 8 heads, head size 64 and T = 512, 2048 (--seqs), causal and not,
on the same GPU, in the same run, in each precision of --dtype (bench's
names; default fp32):

  fp32  TF32 off, SDPA's fp32 backends (math: explicit matmuls and softmax;
        efficient: the memory-efficient CUTLASS kernel, which does its fp32
        products as 3xTF32 on the tensor cores);
  tf32  the same with allow_tf32 = True (the math backend's matmuls on
        TF32 tensor cores);
  bf16, fp16  q, k, v (and the output's gradient) made in float32 and
        rounded to the dtype, SDPA on the low-precision tensors (float32
        accumulation inside, the outputs in the dtype), with the flash
        backend (FlashAttention-2, bf16/fp16 only) beside math and
        efficient.

    python3 bench/peers/torch_attention.py --out DIR [--dtype fp32,bf16,fp16] [--seqs 512,2048]

Rows go to DIR/torch_attention.csv in bench's column order (common.COLUMNS): sweep
"attention", case "full" or "causal", impl "torch-math-fwd",
"torch-math-fwdbwd", "torch-efficient-fwd", "torch-efficient-fwdbwd";
m = n = T, k = the head size, batch = B*H (B*H products of T x T x Dh).
The softmax scale is SDPA's default, 1/sqrt(Dh); causal is SDPA's
is_causal (key j masked for query i when j > i, as duograd's).

FLOPs, duograd's convention (core/ops.c, dg_attention_flops): two per
multiply-add of the products with the score matrix, forward QK^T and PV
(4 B H T^2 Dh), backward QK^T again, dV, dP, dQ, dK (10 B H T^2 Dh), so
forward + backward counts 14 B H T^2 Dh, 3.5 times the forward; causal keeps
(T+1)/(2T) of it (the unmasked scores); softmax's exponentials are not
counted. A "fwdbwd" row times the forward and torch.autograd.grad for q, k, v
(PyTorch's own backward, whatever it recomputes).

Each result is checked against float64 (the same formula on the GPU, from
the same rounded q, k, v) before it is timed; T > --full-check-max checks a
subset of the batch and heads (--check-bh, default 2 x 2). A mismatch (max
|x - ref| / max |ref| above the tolerance, any of o, dq, dk, dv) is a row
with status "wrong" and no time. The tolerance is --tol in fp32 and tf32
(default 1e-4 and 5e-3) and attention_tol's count of roundings for bf16 and
fp16.
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
from peers.torch_ops import base_row, emit, precision_mode, rel_err  # noqa: E402

PROG = "torch_attention"

BACKENDS = {"math": "MATH", "efficient": "EFFICIENT_ATTENTION", "flash": "FLASH_ATTENTION"}
FP32_BACKENDS = ("math", "efficient")  # flash has bf16 and fp16 alone
# the math backend's products on TF32: operands rounded to 10 bits (2 x
# 2^-10 a product), and the softmax's exponentials carry a score's error;
# measured on an H200 at most 1.1e-3
TF32_TOL = 5e-3
# bf16/fp16: the roundings counted along the path of each output: the
# probabilities P stored in the dtype for P v and the output o (2), and
# backward dS for dS k / dS^T q and the gradient itself (2): 4, each u
# relative to its entry, so at most u relative to max |ref| (o averages v,
# and its rounding errors, of random sign, average likewise). Measured on
# an H200 (PyTorch 2.11, B 16, H 8, Dh 64, T 512 and 2048, causal and not,
# math, efficient and flash): at most 1.4 u in bf16 (5.4e-3) and 1.5 u in
# fp16 (7.2e-4), against bounds of 1.6e-2 and 2.0e-3; a wrong kernel (a
# missed scale, mask, or row) is off by O(1).
LOW_ROUNDINGS = 4


def attention_tol(p, tol):
    """the check's tolerance in precision p: `tol` (--tol) in fp32, TF32_TOL
    in tf32 unless --tol is looser, tol and LOW_ROUNDINGS roundings in bf16 / fp16"""
    if p == "tf32":
        return max(tol, TF32_TOL)
    return common.rounded_tol(p, tol, LOW_ROUNDINGS)


def backends_for(p, asked):
    """the asked SDPA backends that take precision p's dtype"""
    return [b for b in asked if p in common.LOW_PRECISION or b in FP32_BACKENDS]


def attention_flops(b, h, t, dh, causal, backward):
    """duograd's FLOP count (core/ops.c): forward 4 B H T^2 Dh, + 10 for the backward"""
    kept = (t + 1) / (2 * t) if causal else 1.0
    return (14.0 if backward else 4.0) * b * h * t * t * dh * kept


def reference(q, k, v, scale, causal):
    """softmax(scale q k^T, mask) v in the inputs' dtype (float64 here)"""
    import torch
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        t = q.shape[-2]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def rows_for(out, dev, b, h, t, dh, causal, backends, args, p="fp32"):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from peers.torch_ops import torch_dtype
    gen = torch.Generator(device=dev).manual_seed(1000 + t + int(causal))
    dt = torch_dtype(torch, p)
    q, k, v, dout = (torch.randn(b, h, t, dh, device=dev, generator=gen).to(dt) for _ in range(4))
    tol = attention_tol(p, args.tol)
    scale = 1.0 / math.sqrt(dh)
    # the float64 reference, on a subset of (batch, head) for long sequences
    nb, nh = (b, h) if t <= args.full_check_max else (min(b, args.check_bh[0]), min(h, args.check_bh[1]))
    sub = (slice(0, nb), slice(0, nh))
    q64, k64, v64 = (x[sub].double().requires_grad_(True) for x in (q, k, v))
    o64 = reference(q64, k64, v64, scale, causal)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), dout[sub].double())
    o64 = o64.detach()
    del q64, k64, v64
    case = "causal" if causal else "full"
    qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
    for name in backends:
        backend = getattr(SDPBackend, BACKENDS[name])

        def fwd():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def fwdbwd():
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
            return torch.autograd.grad(o, (qg, kg, vg), dout)

        for impl, fn, backward in ((f"torch-{name}-fwd", fwd, False), (f"torch-{name}-fwdbwd", fwdbwd, True)):
            row = base_row("attention", case, impl, t, t, dh, p)
            row["batch"] = b * h
            try:
                with torch.no_grad() if not backward else torch.enable_grad():
                    res = fn()
                if backward:
                    err = max(rel_err(x[sub], r) for x, r in zip(res, g64))
                    with sdpa_kernel(backend):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    err = max(err, rel_err(o[sub], o64))
                else:
                    err = rel_err(res[sub], o64)
                del res
            except RuntimeError as e:  # the backend refuses this shape or dtype
                row.update(status="unsupported", note=str(e).splitlines()[0][:150])
                out.write(row)
                print(f"attention {case} {impl} T={t}: unsupported ({row['note']})", flush=True)
                torch.cuda.empty_cache()
                continue
            emit(out, row, fn, err, tol, flops=attention_flops(b, h, t, dh, causal, backward))
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="FLOP convention and checks: see the module docstring (pydoc).")
    common.out_arg(ap, "result folder (torch_attention.csv is written or appended to)")
    ap.add_argument("--seqs", default="512,2048", help="sequence lengths T, comma-separated (default 512,2048)")
    ap.add_argument("--batch", type=int, default=16, help="batch B (default 16)")
    ap.add_argument("--heads", type=int, default=8, help="heads H (default 8)")
    ap.add_argument("--head-dim", type=int, default=64, help="head size Dh (default 64)")
    ap.add_argument("--backends", default="math,efficient,flash",
                    help="SDPA backends: math, efficient, flash (bf16/fp16 only) (default all)")
    ap.add_argument("--causal", default="0,1", help="0 (full), 1 (causal) or both (default 0,1)")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="max relative error against float64 in fp32 (default 1e-4; the other precisions: see "
                         "the module docstring)")
    ap.add_argument("--full-check-max", type=int, default=1024,
                    help="longest T checked on every (batch, head); longer ones check --check-bh (default 1024)")
    ap.add_argument("--check-bh", default="2,2", help="batches,heads checked above --full-check-max (default 2,2)")
    common.dtype_args(ap)
    args = ap.parse_args()
    try:
        seqs = [int(s) for s in args.seqs.split(",") if s]
        causals = [bool(int(c)) for c in args.causal.split(",") if c]
        args.check_bh = [int(x) for x in args.check_bh.split(",")]
    except ValueError:
        ap.error("--seqs, --causal and --check-bh take comma-separated integers")
    backends = [s for s in args.backends.split(",") if s]
    if any(b not in BACKENDS for b in backends):
        ap.error(f"--backends: each one of {', '.join(BACKENDS)}")
    if (not seqs or any(s < 1 for s in seqs) or args.batch < 1 or args.heads < 1 or args.head_dim < 1
            or len(args.check_bh) != 2 or min(args.check_bh) < 1):
        ap.error("sizes must be positive")
    import torch
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    os.makedirs(args.out, exist_ok=True)
    meta = [f"torch_attention peer (bench/peers/torch_attention.py): PyTorch {torch.__version__}, "
            f"CUDA {torch.version.cuda}",
            f"gpu: {torch.cuda.get_device_name(dev)}", f"dtypes: {','.join(args.dtype)}",
            "tf32: on in the tf32 rows alone",
            f"shape: B {args.batch}, H {args.heads}, Dh {args.head_dim}, scale 1/sqrt(Dh)",
            "flops: forward 4 B H T^2 Dh, forward+backward 14 B H T^2 Dh, causal x (T+1)/(2T)",
            common.date_line()]
    out = common.CsvOut(os.path.join(args.out, "torch_attention.csv"), meta, PROG)
    try:
        for p in args.dtype:
            with precision_mode(torch, p):
                for t in seqs:
                    for causal in causals:
                        rows_for(out, dev, args.batch, args.heads, t, args.head_dim, causal, backends_for(p, backends),
                                 args, p)
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
