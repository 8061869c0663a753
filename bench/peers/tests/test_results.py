#!/usr/bin/env python3
"""Self-test of peers.results, a result folder as one pandas DataFrame: the
committed folder tests/data/cpu-2core-run1 (every row of its sweep CSVs, the
peers' rows included, typed; its metadata in df.attrs; its other CSVs
named), the example of the module's text run as written, an older file
with fewer columns and a row cut short, and the refusals. Skipped, with the
reason, where pandas is not installed (Debian: python3-pandas). Plain
Python (no pytest):

    python3 bench/peers/tests/test_results.py   # exit status 1 when a check fails
"""
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/ in place of this folder on sys.path: the package imports as `peers`, each module once
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common, results  # noqa: E402
from peers.tests import runner  # noqa: E402

try:
    import pandas  # noqa: F401
except ImportError:
    pandas = None

TMP = tempfile.mkdtemp(prefix="peerresults-")
COMMITTED = os.path.join(ROOT, "tests", "data", "cpu-2core-run1")  # a 2-core run kept as test input
SWEEP_FILES = ("autodiff", "ceiling", "gemm", "mlp", "ops", "train")  # its files in bench's row format


def need_pandas():
    if pandas is None:
        raise runner.Skip("pandas is not installed (Debian: python3-pandas)")


def data_lines(path):
    """the rows of a bench CSV counted by hand: lines that are neither
    metadata nor empty, less the header (every line of a committed file ends
    with its newline)"""
    with open(path) as f:
        return sum(1 for line in f if line.strip() and not line.startswith("#")) - 1


def write(name, text):
    path = os.path.join(TMP, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_committed_folder_every_row_typed():
    need_pandas()
    df = results.load(COMMITTED)
    want = sum(data_lines(os.path.join(COMMITTED, f + ".csv")) for f in SWEEP_FILES)
    assert len(df) == want, f"{len(df)} rows, the files hold {want}"
    assert sorted(df.file.unique()) == list(SWEEP_FILES), sorted(df.file.unique())
    assert df.attrs["other_files"] == ["train-logreg-cpu.csv", "train-mlp-cpu.csv"], df.attrs["other_files"]
    for c in results.INT_COLUMNS:
        assert str(df[c].dtype) == "int64", f"{c}: {df[c].dtype}"
    for c in results.FLOAT_COLUMNS:
        assert str(df[c].dtype) == "float64", f"{c}: {df[c].dtype}"
    # gemm.csv: "gemm,square,cpu-openblas,cpu,f32,256,256,256,1,2,0,0,0,2,503,0.197932,..."
    row = df[(df.file == "gemm") & (df.impl == "cpu-openblas") & (df.m == 256) & (df.case == "square")]
    assert len(row) == 1 and row.median_ms.iloc[0] == 0.197932 and row.reps.iloc[0] == 503, row
    # a skipped or failed row has no time: NaN, not an empty string
    assert df[df.status == "skipped"].median_ms.isna().all()
    # the NumPy peer's rows, appended to mlp.csv after the sweep
    assert len(df[(df.file == "mlp") & (df.impl == "numpy")]) > 0, "no peer rows"


def test_committed_folder_metadata_in_attrs():
    need_pandas()
    df = results.load(COMMITTED)
    assert df.attrs["cpu"] == "Intel(R) Xeon(R) Processor @ 2.80GHz", df.attrs.get("cpu")
    assert df.attrs["cores"] == "2" and df.attrs["gpu"] == "none (built without CUDA)", df.attrs
    assert df.attrs["title"].startswith("duograd bench "), df.attrs.get("title")
    files = df.attrs["files"]
    assert sorted(files) == list(SWEEP_FILES), sorted(files)
    assert files["gemm"]["command line"].endswith("--sweep gemm --sizes gemm=32:8192 --out /tmp/ab3/new"), files["gemm"]
    assert files["gemm"]["date"] == "2026-11-23T06:40:24Z", files["gemm"]["date"]
    # each sweep ran at its own time: no one date for the folder
    assert "date" not in df.attrs, df.attrs.get("date")


def test_the_documented_example_runs():
    """the three lines of the module's text (and of README.md), as written,
    from the repository's root"""
    need_pandas()
    lines = [ln.strip() for ln in results.__doc__.splitlines()[2:5]]
    assert lines[0].startswith("import sys") and lines[1].startswith("from peers.results import load"), lines
    cwd, path = os.getcwd(), list(sys.path)
    try:
        os.chdir(ROOT)
        space = {}
        exec("\n".join(lines).replace("print(", "shown = ("), space)
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    cpu, best = space["shown"]
    assert cpu.startswith("Intel") and best["gemm"]["cpu-openblas"] > 100, best


def test_an_older_file_and_a_cut_row():
    """a file written before columns were added reads (NaN in them), its
    last line cut short by a killed run is left out, as bench's reader
    does; a peer's own file beside it is one more `file`"""
    need_pandas()
    d = os.path.join(TMP, "old")
    write("old/gemm.csv", "# cpu: Old CPU\n# cores: 4\nsweep,case,impl,backend,m,n,k,batch,transfer,median_ms,"
          "min_ms,max_ms,status\ngemm,square,cpu-omp,cpu,64,64,64,1,0,0.5,0.4,0.6,ok\n"
          "gemm,square,cpu-omp,cpu,128,128,128,1,0,NaN,NaN,NaN,skipped\ngemm,square,cpu-o")
    peer = {c: "" for c in common.COLUMNS}
    peer.update(sweep="gemm", case="square", impl="torch-cpu", backend="cpu", dtype="fp32", m=64, n=64, k=64,
                batch=1, threads=4, transfer=0, tf32=0, cold=0, warmup=2, reps=9, median_ms=0.25, min_ms=0.2,
                max_ms=0.3, cv_pct=1, gflops=2.1, gbps="NaN", scratch_bytes=0, arena_bytes=0, live_bytes=0,
                max_rel_err=1e-7, check="f64", status="ok")
    write("old/torch_ops.csv", "# torch peer rows: date: 2030-01-01T00:00:00Z\n" + ",".join(common.COLUMNS) + "\n" +
          common.format_row(peer, common.COLUMNS))
    df = results.load(d)
    assert len(df) == 3, df
    old = df[df.file == "gemm"]
    assert list(old.m) == [64, 128] and old.median_ms.iloc[0] == 0.5 and math.isnan(old.median_ms.iloc[1]), old
    assert old.gflops.isna().all() and old.reps.isna().all(), old  # columns the older file lacks
    assert df[df.file == "torch_ops"].median_ms.iloc[0] == 0.25, df
    assert df.attrs["cpu"] == "Old CPU" and df.attrs["files"]["torch_ops"]["torch peer rows"].startswith("date: ")


def test_refusals_name_the_problem():
    need_pandas()
    for folder, kind, words in ((os.path.join(TMP, "none"), FileNotFoundError, "not a folder"),
                                (os.path.dirname(write("empty/notes.txt", "x")), ValueError, "no result CSV")):
        try:
            results.load(folder)
            raise AssertionError(f"{folder} was loaded")
        except kind as e:
            assert folder in str(e) and words in str(e), e
    path = write("bad/gemm.csv", "sweep,case,impl,backend,m,n,k,batch,transfer,median_ms,min_ms,max_ms,status\n"
                 "gemm,square,cpu-omp,cpu,6x4,64,64,1,0,0.5,0.4,0.6,ok\n")
    try:
        results.load(os.path.dirname(path))
        raise AssertionError("a damaged number was loaded")
    except ValueError as e:
        assert path in str(e) and "column 'm'" in str(e), e


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
