#!/usr/bin/env python3
"""Self-test of peers.common, what every peer shares: bench's columns
against the compiled BENCH_CSV_HEADER and a file the bench wrote (the bench
binary as first argument), the one CSV reader (quoted fields, '#' lines, a
row cut short, an older file with fewer columns, refusals), the row writer
and CsvOut (column order, a foreign header, a cut row), the statistics and
the timing rules. Plain Python, no NumPy, no torch (no pytest):

    python3 bench/peers/tests/test_common.py [path/to/bench]   # exit status 1 when a check fails
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/ in place of this folder on sys.path: the package imports as `peers`, each module once
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers.tests import runner  # noqa: E402

BENCH = sys.argv[1] if len(sys.argv) > 1 else None
TMP = tempfile.mkdtemp(prefix="peercommon-")
COLS = common.bench_header()


def write(name, text):
    path = os.path.join(TMP, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(text)
    return path


def refused(path, words):
    """read_rows(path) must raise ValueError naming the file and `words`"""
    try:
        common.read_rows(path)
    except ValueError as e:
        assert path in str(e) and words in str(e), f"unclear message: {e}"
        return str(e)
    raise AssertionError(f"{path} was read: {open(path).read()!r}")


def a_row(**kw):
    r = dict(sweep="conv", case="cnn-conv2:fwd", impl="torch-cudnn", backend="gpu", dtype="fp32", m=64, n=1568,
             k=288, batch=8, threads=0, transfer=0, tf32=0, cold=0, warmup=3, reps=100, median_ms=0.0125,
             min_ms=0.012, max_ms=0.013, cv_pct=1.5, gflops=4624.1, gbps=float("nan"), scratch_bytes=4096,
             arena_bytes=0, live_bytes=0, energy_j=0.5, avg_w=float("nan"), gflop_per_j=1.5,
             samples_per_j=16, max_rel_err=3.2e-8, check="f64-sampled", status="ok", note="a, b")
    r.update(kw)
    return r


# ---- bench's columns ----

def test_columns_are_bench_header():
    """COLUMNS is BENCH_CSV_HEADER: as the C compiler makes the macro of
    bench/writers/csv.h, and as the header of a file the bench wrote"""
    checked = []
    cc = shutil.which("cc")
    if cc:
        src, exe = os.path.join(TMP, "h.c"), os.path.join(TMP, "h")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include "writers/csv.h"\nint main(void) { puts(BENCH_CSV_HEADER); }\n')
        subprocess.run([cc, "-I", os.path.join(ROOT, "bench"), "-I", ROOT, src, "-o", exe], check=True)
        c_cols = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.strip().split(",")
        assert list(common.COLUMNS) == c_cols, f"COLUMNS {common.COLUMNS}, the compiler says {c_cols}"
        checked.append("the compiled macro")
    if BENCH:
        out = os.path.join(TMP, "bench-run")
        r = subprocess.run([BENCH, "--sweep", "mlp", "--sizes", "4", "--case", "784-256-100-10", "--backends", "cpu",
                            "--warmup", "0", "--reps", "1", "--min-time", "0", "--max-cv", "0", "--out", out],
                           capture_output=True, text=True, env=dict(os.environ, PATH="/nonexistent"))
        assert r.returncode == 0, r.stdout + r.stderr
        cols, rows = common.read_rows(os.path.join(out, "mlp.csv"))
        assert cols == list(common.COLUMNS), f"COLUMNS {common.COLUMNS}, the bench wrote {cols}"
        assert rows and rows[0]["impl"] == "cpu" and rows[0]["status"] == "ok", rows
        checked.append("a file the bench wrote")
    if not checked:
        raise runner.Skip("no cc and no bench binary (first argument) to compare COLUMNS with")
    assert set(common.REQUIRED_COLUMNS) <= set(common.COLUMNS)
    print(f"  {len(common.COLUMNS)} columns, the same as " + " and ".join(checked))


# ---- the reader ----

def test_read_quoted_fields_with_commas():
    """a field in quotes keeps its commas and its doubled quotes (a file a
    spreadsheet saved); a '"' inside an unquoted field is a character"""
    path = write("quoted.csv", 'case,impl,note\n"r18c-stem:fwd","cpu","a, b, ""c"""\nx,y,say "hi"\n')
    cols, rows = common.read_rows(path)
    assert cols == ["case", "impl", "note"], cols
    assert rows == [dict(case="r18c-stem:fwd", impl="cpu", note='a, b, "c"'), dict(case="x", impl="y",
                                                                                   note='say "hi"')], rows
    # free text that starts with '"' (bench writes it as it comes, never with a
    # comma): the same fields as bench reads, without the quote marks, not a refusal
    rows = common.read_rows(write("open-quote.csv", 'case,impl,note\nx,y,"never closed\nz,w,"q" r\n'))[1]
    assert [r["note"] for r in rows] == ["never closed", "q r"], rows


def test_read_metadata_lines_anywhere():
    """'#' lines before the header and between rows, and empty lines, are
    skipped; a '#' inside a field is a character"""
    path = write("meta.csv", "# duograd bench\n# date: 2024\n\ncase,impl\nr1,cpu\n# torch peer rows: x, y\n\n"
                             "r2,gpu#1\n")
    cols, rows = common.read_rows(path)
    assert cols == ["case", "impl"] and [(r["case"], r["impl"]) for r in rows] == [("r1", "cpu"), ("r2", "gpu#1")]
    assert common.read_rows(write("meta-only.csv", "# duograd bench\n# cores: 2\n")) == (None, [])
    assert common.read_header(write("empty.csv", "")) is None


def test_read_cut_row_is_left_out():
    """a last line without its newline is a row cut short by a killed run:
    left out, as bench_csv_read skips it, even where it has every field;
    a cut header leaves no header"""
    path = write("cut.csv", "# meta\ncase,impl,median_ms\nr1,cpu,1.5\nr2,gpu,2.5\nr3,cpu,3.5")
    cols, rows, cut = common.read_csv(path)
    assert [r["case"] for r in rows] == ["r1", "r2"] and cut == "r3,cpu,3.5", (rows, cut)
    assert common.read_rows(path) == (cols, rows)
    cols, rows, cut = common.read_csv(write("cut-short.csv", "case,impl,median_ms\nr1,cpu,1.5\nr2,g"))
    assert [r["case"] for r in rows] == ["r1"] and cut == "r2,g", (rows, cut)
    cols, rows, cut = common.read_csv(write("cut-header.csv", "# meta\ncase,impl,med"))
    assert (cols, rows, cut) == (None, [], "case,impl,med")
    cols, rows, cut = common.read_csv(write("whole.csv", "case,impl\nr1,cpu\n"))
    assert len(rows) == 1 and cut is None
    cols, rows, cut = common.read_csv(write("crlf.csv", "case,impl\r\nr1,cpu\r\n"))
    assert cols == ["case", "impl"] and rows == [dict(case="r1", impl="cpu")] and cut is None, (cols, rows)


def test_read_an_older_file_with_fewer_columns():
    """a folder written before columns were added (no cold, scratch, arena,
    live, check, note): read by header name, its rows without those keys;
    CsvOut appends rows of its width, in its order"""
    old = [c for c in COLS if c not in ("cold", "scratch_bytes", "arena_bytes", "live_bytes", "check", "note")]
    random.Random(11).shuffle(old)
    earlier = ",".join({"sweep": "conv", "impl": "cpu-im2col", "status": "ok"}.get(c, "1") for c in old) + "\n"
    path = write("old/conv.csv", "# duograd bench 0.0.9\n" + ",".join(old) + "\n" + earlier)
    cols, rows = common.read_rows(path)
    assert cols == old and len(rows) == 1 and rows[0]["impl"] == "cpu-im2col" and "note" not in rows[0], rows
    out = common.CsvOut(path, ["old"], "test_common")
    out.write(a_row())
    out.close()
    cols, rows = common.read_rows(path)
    assert cols == old and [r["impl"] for r in rows] == ["cpu-im2col", "torch-cudnn"], rows
    assert len(rows[1]) == len(old) and rows[1]["reps"] == "100" and rows[1]["gbps"] == "NaN", rows[1]


def test_read_refusals():
    """a row whose field count is not the header's, a NUL byte: refused,
    naming the file and line"""
    refused(write("short.csv", "case,impl,median_ms\nr1,cpu\n"), "short.csv:2: 2 fields, the header has 3")
    refused(write("long.csv", "# m\ncase,impl\nr1,cpu,x\n"), "long.csv:3: 3 fields, the header has 2")
    refused(write("nul.csv", "case,impl\nr1,c\0pu\n"), "nul.csv:2: a NUL byte")
    # a quoted comma is one field, so the count is right; split(',') would count 4
    assert len(common.read_rows(write("ok.csv", 'case,impl,note\nr1,cpu,"a,b"\n'))[1]) == 1


# ---- the writer ----

def test_fields_as_bench_writes_them():
    assert common.csv_field(float("nan")) == "NaN" and common.csv_field(float("inf")) == "NaN"
    assert common.csv_field(1234567.0) == "1.23457e+06" and common.csv_field(0.0125) == "0.0125"
    assert common.csv_field(True) == "1" and common.csv_field(7) == "7" and common.csv_field(None) == ""
    assert common.csv_field("a, b\tc\x7f") == "a; b c " and common.csv_field('say "x"') == 'say "x"'
    line = common.format_row(dict(case="c", note="x,y", extra="dropped"), ["case", "impl", "note"])
    assert line == "c,,x;y\n", line
    # what the writer writes, the reader reads back: one field each
    row = a_row(note='a, "b",\tc')
    path = write("roundtrip.csv", ",".join(COLS) + "\n" + common.format_row(row, COLS))
    got = common.read_rows(path)[1][0]
    assert all(got[c] == common.csv_field(row[c]) for c in COLS), got


def test_append_in_the_files_column_order():
    """rows appended in the existing header's order, after a '# LABEL:' line;
    the earlier lines unchanged"""
    cols = COLS[:]
    random.Random(7).shuffle(cols)
    earlier = ",".join({"sweep": "conv", "impl": "gpu-implicit", "status": "ok"}.get(c, "1") for c in cols) + "\n"
    before = "# duograd bench\n# gpu: test\n" + ",".join(cols) + "\n" + earlier
    path = write("shuffled/conv.csv", before)
    out = common.CsvOut(path, ["torch: test", "gpu: test"], "test_common")
    out.write(a_row())
    out.close()
    text = open(path).read()
    assert text.startswith(before) and "\n# torch peer rows: torch: test; gpu: test\n" in text, text
    got_cols, rows = common.read_rows(path)
    assert got_cols == cols and len(rows) == 2, (got_cols, rows)
    assert all(rows[1][c] == common.csv_field(a_row()[c]) for c in cols), rows[1]
    assert rows[1]["note"] == "a; b" and rows[1]["scratch_bytes"] == "4096", rows[1]


def test_refuse_a_foreign_header():
    for missing in common.REQUIRED_COLUMNS:
        before = "# meta\n" + ",".join(c for c in COLS if c != missing) + "\n"
        path = write(f"missing-{missing}.csv", before)
        try:
            common.CsvOut(path, ["m"], "test_common")
        except ValueError as e:
            assert missing in str(e) and path in str(e), f"unclear message: {e}"
            message = str(e)
        else:
            raise AssertionError(f"a header without '{missing}' was accepted")
        assert open(path).read() == before, "a refused file was changed"
    print(f"  e.g. {message}")


def test_new_file_and_a_cut_row_dropped():
    """a new file: metadata lines, then COLUMNS; a row cut short is dropped
    before appending (else it would join the next row into a malformed
    line); metadata only: the header is written first"""
    path = os.path.join(TMP, "new", "resnet.csv")
    os.makedirs(os.path.dirname(path))
    out = common.CsvOut(path, ["torch: 2.x", "tf32: off"], "test_common")
    out.write(a_row(batch=32))
    out.close()
    lines = open(path).read().splitlines()
    assert lines[:2] == ["# torch: 2.x", "# tf32: off"] and lines[2].split(",") == COLS and len(lines) == 4
    with open(path, "a") as f:
        f.write("conv,cnn-conv2:fw")
    out = common.CsvOut(path, ["again"], "test_common")
    out.write(a_row(batch=64))
    out.close()
    assert [r["batch"] for r in common.read_rows(path)[1]] == ["32", "64"]
    meta_only = write("meta-only/conv.csv", "# duograd bench\n")
    out = common.CsvOut(meta_only, ["late"], "test_common")
    out.write(a_row())
    out.close()
    cols, rows = common.read_rows(meta_only)
    assert cols == COLS and len(rows) == 1, (cols, rows)


# ---- statistics, timing, options ----

def test_stats():
    med, lo, hi, cv = common.summarize([4.0, 1.0, 3.0, 2.0])
    assert (med, lo, hi) == (2.5, 1.0, 4.0) and abs(cv - 51.639778) < 1e-5, (med, lo, hi, cv)
    assert common.summarize([2.0]) == (2.0, 2.0, 2.0, 0.0)


def test_timing_rules():
    """bench/runner/timing.c's: warm-up runs then --reps; a warm-up run
    longer than --min-time makes 3 runs enough; --max-reps caps; the
    peers' --row-time cuts; the garbage collector is off while timing"""
    calls = []
    st = common.measure(lambda: calls.append(1) or 1.0, common.Timing(warmup=2, reps=4, min_time=0, max_cv=0))
    assert (st["warmup"], st["reps"], len(calls), st["capped"], st["cut"]) == (2, 4, 6, False, False), st
    st = common.measure(lambda: 50.0, common.Timing(warmup=1, reps=10, min_time=0.01, max_cv=0))
    assert st["reps"] == 3, st  # the warm-up run (50 ms) is longer than --min-time 10 ms
    st = common.measure(lambda: 0.001, common.Timing(warmup=0, reps=2, min_time=1, max_reps=7, max_cv=0))
    assert st["reps"] == 7 and st["capped"], st
    t = common.Timing(warmup=0, reps=1, min_time=1e6, max_reps=10**6, max_cv=0, row_time=0.05)
    t0 = time.perf_counter()
    st = common.measure(lambda: common.host_ms(lambda: time.sleep(0.01)), t)
    assert st["cut"] and not st["capped"] and time.perf_counter() - t0 < 1.0, st
    import gc
    seen = []
    common.measure(lambda: seen.append(gc.isenabled()) or 1.0, common.Timing(warmup=1, reps=2, min_time=0))
    assert seen == [False] * 3 and gc.isenabled(), seen
    assert common.repeat(lambda: None, 5, 0.0) == 5 and common.repeat(lambda: None, 1, 10.0, max_count=9) == 9


def test_options():
    ap = argparse.ArgumentParser()
    common.out_arg(ap, "where")
    ap.add_argument("--sizes", type=common.int_list(1, 100))
    common.timing_args(ap, max_reps=1000, warmup_time=True, retries=True)
    a = ap.parse_args(["--out", "D", "--sizes", "3, 9,"])
    assert (a.out, a.sizes, a.warmup, a.warmup_time, a.reps, a.min_time, a.max_reps, a.max_cv, a.retries) == \
        ("D", [3, 9], 2, 0.0, 5, 0.1, 1000, 5.0, 2), a
    t = common.timing_of(a, row_time=1.0)
    assert (t.warmup, t.reps, t.max_reps, t.retries, t.row_time) == (2, 5, 1000, 2, 1.0)
    ap.exit = ap.error = lambda *args, **kw: (_ for _ in ()).throw(ValueError(args))  # no exit: a ValueError
    for bad in (["--sizes", "0"], ["--sizes", "101"], ["--sizes", "x"], ["--max-cv", "nan"], ["--reps", "0"]):
        try:
            with open(os.devnull, "w") as null:
                saved, sys.stderr = sys.stderr, null
                try:
                    ap.parse_args(["--out", "D"] + bad)
                finally:
                    sys.stderr = saved
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")
    a = ap.parse_args(["--out", "D", "--reps", "9", "--max-reps", "3"])
    try:
        common.check_timing_args(ap, a)
        raise AssertionError("--max-reps below --reps accepted")
    except ValueError as e:
        assert "--max-reps 3 is below --reps 9" in str(e), e
    assert common.date_line().startswith("date: 20") and common.date_line().endswith("Z")


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
