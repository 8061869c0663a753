#!/usr/bin/env python3
"""Self-test of peers.torch_resnet's parts that need no torch (the FLOP
and parameter counts, what runs per device and precision, --dtype, the
check's tolerances against the resnet sweep's), of the rows it and the other torch peers write
through peers.common (column order, refusal of a foreign header, a cut
row), and of torch_ops' and torch_ddp's rows. Plain Python (no pytest):

    python3 bench/peers/tests/test_torch_resnet.py      # exit status 1 when a check fails
"""
import contextlib
import io
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/ in place of this folder on sys.path: the package imports as `peers`, each module once
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import torch_resnet as tp  # noqa: E402
from peers.tests import runner  # noqa: E402

EXPECTED = common.bench_header()
TMP = tempfile.mkdtemp(prefix="torchpeer-")


def test_flops_and_params():
    published = {"cifar": 0.556e9, "imagenet": 1.82e9}  # forward GMACs usually quoted
    for stem, pub in published.items():
        macs = tp.forward_macs(stem)
        print(f"  {tp.STEMS[stem]['case']}: forward {macs / 1e9:.4f} GMACs = {2 * macs / 1e9:.4f} GFLOPs at batch 1 "
              f"(published {pub / 1e9:.3g} GMACs, {100 * (macs / pub - 1):+.2f}%); step at batch 1: "
              f"{tp.step_flops(stem, 1) / 1e9:.3f} GFLOPs; {tp.param_count(stem):,} parameters")
        assert abs(macs / pub - 1) < 0.01, f"{stem}: {macs} MACs, more than 1% from {pub:g}"
        assert tp.step_flops(stem, 8) == 6 * 8 * macs
        assert tp.param_count(stem) == tp.STEMS[stem]["params"]


def test_resnet_rows_read_back():
    """a row of torch_resnet's, written through common.CsvOut to a new
    resnet.csv and read back: every column as csv_field wrote it, no number
    left empty (bench's reader refuses one), the note's comma a ';'"""
    r = tp.base_row("cifar", "torch-eager", type("dev", (), {"type": "cuda"})(), 32, 0)
    r.update(warmup=7, reps=123, median_ms=12.5, min_ms=12.25, max_ms=13.0, cv_pct=1.5, gflops=8529.1,
             arena_bytes=123456789, max_rel_err=3.2e-7, status="ok", note="a, b")
    path = os.path.join(TMP, "resnet.csv")
    out = common.CsvOut(path, ["torch: test"], tp.PROG)
    out.write(r)
    out.close()
    cols, rows = common.read_rows(path)
    assert cols == EXPECTED and len(rows) == 1, (cols, rows)
    got = rows[0]
    assert all(got[c] == common.csv_field(r[c]) for c in cols), got
    assert got["case"] == "resnet18-cifar" and got["note"] == "a; b" and got["check"] == "f64-step@b2", got
    assert got["gbps"] == "NaN" and got["batch"] == got["m"] == "32", got
    empty = [c for c in cols if got[c] == "" and c != "note"]
    assert not empty, f"columns left empty: {empty}"
    # a row in each other precision names it in dtype, tf32 1 in tf32 alone
    for p in ("tf32", "bf16", "fp16"):
        row = tp.base_row("imagenet", "torch-eager-cudnn-bench-nhwc", type("dev", (), {"type": "cuda"})(), 64, 0, p)
        fields = dict(zip(EXPECTED, common.format_row(row, EXPECTED).rstrip("\n").split(",")))
        assert (fields["dtype"], fields["tf32"], fields["impl"], fields["case"]) == \
            (p, "1" if p == "tf32" else "0", "torch-eager-cudnn-bench-nhwc", "resnet18-imagenet"), fields


def test_runs_per_device_and_dtype():
    """on the GPU every precision with cudnn.benchmark in both layouts (the
    layout named in the impl), PyTorch's default (no benchmark) in fp32
    alone; on the CPU fp32 and bf16 in both layouts, tf32 and fp16 skipped
    with the reason"""
    gpu, skipped = tp.runs("cuda", list(common.PRECISIONS))
    assert not skipped, skipped
    assert ("torch-eager", "fp32", False, False) in gpu and not any(i == "torch-eager" and p != "fp32"
                                                                    for i, p, *_ in gpu), gpu
    for p in common.PRECISIONS:
        assert ("torch-eager-cudnn-bench", p, True, False) in gpu, (p, gpu)
        assert ("torch-eager-cudnn-bench-nhwc", p, True, True) in gpu, (p, gpu)
    assert all(nhwc == impl.endswith("-nhwc") for impl, _, _, nhwc in gpu), gpu
    cpu, skipped = tp.runs("cpu", list(common.PRECISIONS))
    assert sorted(cpu) == sorted([("torch-eager", "fp32", False, False), ("torch-eager-nhwc", "fp32", False, True),
                                  ("torch-eager", "bf16", False, False), ("torch-eager-nhwc", "bf16", False, True)]), cpu
    assert set(skipped) == {"tf32", "fp16"} and "TF32" in skipped["tf32"], skipped
    assert tp.runs("cpu", ["fp16"]) == ([], {"fp16": skipped["fp16"]})


def test_dtype_argument():
    """--dtype as bench's: a list in PRECISIONS' order, all, fp32 by default;
    an unknown name refused with usage status 2, naming it"""
    assert tp.parse_args(["--out", TMP]).dtype == ["fp32"]
    assert tp.parse_args(["--out", TMP, "--dtype", "bf16,fp32"]).dtype == ["fp32", "bf16"]
    assert tp.parse_args(["--out", TMP, "--dtype", "all"]).dtype == list(common.PRECISIONS)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            tp.parse_args(["--out", TMP, "--dtype", "fp32,fp64"])
        raise AssertionError("--dtype fp64 accepted")
    except SystemExit as e:
        assert e.code == 2 and "'fp64' is not a precision" in err.getvalue(), (e.code, err.getvalue())


def test_tolerances_are_the_resnet_sweeps():
    """the first step's tolerances per precision: fp32's those of
    core/check/step_check.h, the others bench_step_tol_bn_in's (read from
    bench/runner/step_tol.c, so that the two cannot drift apart)"""
    src = open(os.path.join(ROOT, "bench", "runner", "step_tol.c")).read()
    update = float(re.search(r"#define UPDATE_TOL_BN ([0-9.e-]+)", src).group(1))
    loss = {"bf16": float(re.search(r"case DG_PREC_BF16: loss = ([0-9.e-]+)", src).group(1)),
            "fp16": float(re.search(r"case DG_PREC_FP16: case DG_PREC_TF32: loss = ([0-9.e-]+)", src).group(1))}
    loss["tf32"] = loss["fp16"]
    assert tp.tolerances("fp32") == (tp.LOSS_TOL, tp.UPDATE_TOL)
    for p in ("tf32", "bf16", "fp16"):
        assert tp.tolerances(p) == (max(tp.LOSS_TOL, loss[p]), max(tp.UPDATE_TOL, update)), (p, tp.tolerances(p))
    try:
        tp.tolerances("fp64")
        raise AssertionError("fp64 has tolerances")
    except ValueError as e:
        assert "not a precision" in str(e), e


def test_ops_and_attention_rows_fill_every_numeric_column():
    """bench's CSV reader refuses an empty integer field: a peer row that
    left scratch_bytes, arena_bytes or live_bytes empty made every row of
    torch_attention.csv unreadable, so the attention report showed no
    PyTorch figures"""
    from peers import torch_ops as op
    row = op.base_row("attention", "causal", "torch-efficient-fwdbwd", 512, 512, 64)
    fields = common.format_row(row, EXPECTED).rstrip("\n").split(",")
    empty = [c for c, v in zip(EXPECTED, fields) if v == "" and c != "note"]
    assert not empty, f"columns left empty: {empty}"


def test_ddp_peer_rows_counts_and_batches():
    """peers.torch_ddp: rows the scaling report can match with
    duograd's (same case names, m = GPUs, n = batch per GPU), the strong
    rows' split of the largest count's weak batch, GPU counts refused
    beyond the machine's, and FLOPs counted as the sweep counts them"""
    from peers import torch_ddp as ddp
    assert ddp.gpu_counts(2) == [1, 2] and ddp.gpu_counts(5) == [1, 2, 4] and ddp.gpu_counts(8) == [1, 2, 4, 8]
    assert ddp.gpu_counts(4, [2, 1, 2]) == [1, 2]
    try:
        ddp.gpu_counts(2, [1, 4])
        raise AssertionError("--gpus 4 on a 2-GPU machine accepted")
    except ValueError as e:
        assert "only 2 GPU(s)" in str(e), e
    assert ddp.batches("mlp", "weak", 2, [1, 2]) == (1024, 2048)
    assert ddp.batches("mlp", "strong", 1, [1, 2]) == (2048, 2048)
    assert ddp.batches("resnet18-cifar", "strong", 4, [1, 2, 4]) == (64, 256)
    try:  # --gpus 1,3,4: the strong global batch 4 x 64 = 256 over 3 GPUs
        ddp.batches("resnet18-cifar", "strong", 3, [1, 3, 4])
        raise AssertionError("256 split over 3 GPUs accepted")
    except ValueError as e:
        assert "256 does not split over 3 GPUs" in str(e), e
    row = ddp.base_row("mlp", "weak", 2, 1024, 2048)
    fields = dict(zip(EXPECTED, common.format_row(row, EXPECTED).rstrip("\n").split(",")))
    assert (fields["case"], fields["impl"], fields["m"], fields["n"], fields["batch"]) == \
        ("mlp-weak", "torch-ddp", "2", "1024", "2048"), fields
    assert fields["check"] == "dp=mean-of-slices" and ddp.base_row("mlp", "weak", 1, 1024, 1024)["check"] == "f64-step@b2"
    assert int(fields["k"]) == 4 * (784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10), fields["k"]
    empty = [c for c in EXPECTED if fields[c] == "" and c not in ("note", "status")]
    assert not empty, f"columns left empty: {empty}"
    # the sweep's mlp-weak row on one GPU: 3.2517e10 FLOPs at batch 1024
    # (reports/h200x2/buckets: 38893 GFLOP/s x 0.836054 ms), of which the
    # GEMMs are all but 0.14% (bias, ReLU and loss nodes)
    sweep = 38893e9 * 0.836054e-3
    assert 0.998 * sweep < ddp.step_flops("mlp", 1024) < sweep, (ddp.step_flops("mlp", 1024), sweep)
    assert ddp.step_flops("resnet18-cifar", 64) == tp.step_flops("cifar", 64)


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
