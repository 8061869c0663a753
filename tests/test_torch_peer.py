#!/usr/bin/env python3
"""Self-test of bench/torch_peer.py's parts that need no torch: the CSV
header, column order, refusal of a foreign header, and the FLOP and
parameter counts. Plain Python (no pytest):

    python3 tests/test_torch_peer.py      # exit status 1 when a check fails
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import py_runner  # noqa: E402 (tests/py_runner.py, beside this file)
import torch_peer as tp  # noqa: E402

# today's BENCH_CSV_HEADER, to see a parse that returns something else
EXPECTED = ("sweep,case,impl,backend,dtype,m,n,k,batch,threads,transfer,tf32,cold,warmup,reps,median_ms,min_ms,"
            "max_ms,cv_pct,gflops,gbps,scratch_bytes,arena_bytes,live_bytes,max_rel_err,check,status,note").split(",")
TMP = tempfile.mkdtemp(prefix="torchpeer-")


def sample_row(batch=32):
    r = tp.base_row("cifar", "torch-eager", type("dev", (), {"type": "cuda"})(), batch, 0)
    r.update(warmup=7, reps=123, median_ms=12.5, min_ms=12.25, max_ms=13.0, cv_pct=1.5, gflops=8529.1,
             arena_bytes=123456789, max_rel_err=3.2e-7, status="ok", note="a, b")
    return r


def read_rows(path):
    """(header, rows as dicts by header name) the way bench_csv_read finds columns"""
    lines = [ln.rstrip("\n") for ln in open(path) if ln.strip() and not ln.startswith("#")]
    header = lines[0].split(",")
    rows = []
    for ln in lines[1:]:
        f = ln.split(",")
        assert len(f) == len(header), f"{len(f)} fields, the header has {len(header)}: {ln}"
        rows.append(dict(zip(header, f)))
    return header, rows


def test_header_from_csv_h():
    cols = tp.bench_header()
    assert cols == EXPECTED, f"parsed {cols}"
    cc = shutil.which("cc")
    if cc:  # what the C compiler makes of the macro
        src, exe = os.path.join(TMP, "h.c"), os.path.join(TMP, "h")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include "bench/writers/csv.h"\nint main(void) { puts(BENCH_CSV_HEADER); }\n')
        subprocess.run([cc, "-I", ROOT, "-I", os.path.join(ROOT, "bench"), src, "-o", exe], check=True)
        c_cols = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.strip().split(",")
        assert cols == c_cols, f"parsed {cols}, the compiler says {c_cols}"
        print(f"  {len(cols)} columns, the same as the compiled BENCH_CSV_HEADER")
    else:
        print(f"  {len(cols)} columns (no cc: not compared with the compiled macro)")


def test_append_shuffled_header():
    cols = EXPECTED[:]
    random.Random(7).shuffle(cols)
    path = os.path.join(TMP, "shuffled.csv")
    earlier = ",".join("x" + c for c in cols) + "\n"
    with open(path, "w") as f:
        f.write("# duograd bench\n# gpu: test\n" + ",".join(cols) + "\n" + earlier)
    out = tp.CsvOut(path, ["torch: test", "gpu: test"])
    row = sample_row()
    out.write(row)
    out.close()
    text = open(path).read()
    assert text.startswith("# duograd bench\n# gpu: test\n" + ",".join(cols) + "\n" + earlier), "earlier lines changed"
    assert "# torch peer rows: torch: test; gpu: test\n" in text
    header, rows = read_rows(path)
    assert header == cols and len(rows) == 2
    got = rows[1]
    for c in cols:
        assert got[c] == tp.csv_field(row[c]), f"column {c}: {got[c]!r}, wrote {row[c]!r}"
    assert got["median_ms"] == "12.5" and got["case"] == "resnet18-cifar" and got["note"] == "a; b"
    assert got["gbps"] == "NaN" and got["check"] == "f64-step@b2" and got["batch"] == got["m"] == "32"
    # an older file with fewer columns (reports/h100/mlp.csv's header) gets rows of its width
    old = [c for c in EXPECTED if c not in ("cold", "scratch_bytes", "arena_bytes", "live_bytes", "check", "note")]
    path2 = os.path.join(TMP, "old.csv")
    with open(path2, "w") as f:
        f.write(",".join(old) + "\n")
    out = tp.CsvOut(path2, ["old"])
    out.write(row)
    out.close()
    header, rows = read_rows(path2)
    assert header == old and rows[0]["status"] == "ok" and rows[0]["reps"] == "123"


def test_refuse_missing_column():
    for missing in tp.REQUIRED_COLUMNS:
        cols = [c for c in EXPECTED if c != missing]
        path = os.path.join(TMP, f"missing-{missing}.csv")
        before = "# meta\n" + ",".join(cols) + "\n"
        with open(path, "w") as f:
            f.write(before)
        try:
            tp.CsvOut(path, ["m"])
        except ValueError as e:
            assert missing in str(e) and path in str(e), f"unclear message: {e}"
            message = str(e)
        else:
            raise AssertionError(f"a header without '{missing}' was accepted")
        assert open(path).read() == before, "a refused file was changed"
    print(f"  e.g. {message}")


def test_new_file_and_cut_row():
    path = os.path.join(TMP, "new", "resnet.csv")
    os.makedirs(os.path.dirname(path))
    out = tp.CsvOut(path, ["torch: 2.x", "tf32: off"])
    out.write(sample_row())
    out.close()
    lines = open(path).read().splitlines()
    assert lines[:2] == ["# torch: 2.x", "# tf32: off"] and lines[2].split(",") == EXPECTED and len(lines) == 4
    with open(path, "a") as f:  # a row cut short by a killed run: no newline
        f.write("resnet,resnet18-cif")
    out = tp.CsvOut(path, ["again"])
    out.write(sample_row(64))
    out.close()
    header, rows = read_rows(path)
    assert [r["batch"] for r in rows] == ["32", "64"], rows


def test_read_rows_drops_a_cut_row_and_refuses_a_short_one():
    """tp.read_rows, which every peer reads duograd's rows with: '#' lines
    anywhere skipped, a last line without its newline left out (a row cut
    short by a killed run), a row with the wrong field count refused"""
    path = os.path.join(TMP, "read.csv")
    with open(path, "w") as f:
        f.write("# meta\ncase,impl,median_ms\nr1,cpu,1.5\n# between\nr2,gpu,2.5\nr3,cp")
    columns, rows = tp.read_rows(path)
    assert columns == ["case", "impl", "median_ms"], columns
    assert [(r["case"], r["impl"], r["median_ms"]) for r in rows] == [("r1", "cpu", "1.5"), ("r2", "gpu", "2.5")], rows
    with open(path, "w") as f:
        f.write("case,impl,median_ms\nr1,cpu\n")
    try:
        tp.read_rows(path)
    except ValueError as e:
        assert "2 fields, the header has 3" in str(e), e
    else:
        raise AssertionError("a row of 2 fields under a header of 3 was read")
    with open(path, "w") as f:
        f.write("# metadata only\n")
    assert tp.read_rows(path) == (None, [])


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


def test_stats():
    med, lo, hi, cv = tp.summarize([4.0, 1.0, 3.0, 2.0])
    assert (med, lo, hi) == (2.5, 1.0, 4.0) and abs(cv - 51.639778) < 1e-5, (med, lo, hi, cv)
    assert tp.csv_field(float("nan")) == "NaN" and tp.csv_field(1234567.0) == "1.23457e+06"


def test_ops_and_attention_rows_fill_every_numeric_column():
    """bench's CSV reader refuses an empty integer field: a peer row that
    left scratch_bytes, arena_bytes or live_bytes empty made every row of
    torch_attention.csv unreadable, so the attention report showed no
    PyTorch figures"""
    import torch_ops_peer as op
    row = op.base_row("attention", "causal", "torch-efficient-fwdbwd", 512, 512, 64)
    fields = tp.format_row(row, EXPECTED).rstrip("\n").split(",")
    empty = [c for c, v in zip(EXPECTED, fields) if v == "" and c != "note"]
    assert not empty, f"columns left empty: {empty}"


def test_ddp_peer_rows_counts_and_batches():
    """bench/torch_ddp_peer.py: rows the scaling report can match with
    duograd's (same case names, m = GPUs, n = batch per GPU), the strong
    rows' split of the largest count's weak batch, GPU counts refused
    beyond the machine's, and FLOPs counted as the sweep counts them"""
    import torch_ddp_peer as ddp
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
    fields = dict(zip(EXPECTED, tp.format_row(row, EXPECTED).rstrip("\n").split(",")))
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
    return py_runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
