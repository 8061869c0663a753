"""peers.results: a result folder of bench's as one pandas DataFrame.

    import sys; sys.path.insert(0, "bench")  # from the repository's root
    from peers.results import load
    df = load("reports/cpu-2core"); print(df.attrs["files"]["gemm"]["cpu"], df.groupby(["sweep", "impl"]).gflops.max())

load(DIR) reads every result CSV of DIR in bench's long format (each
sweep's NAME.csv with the rows the peers appended to it, and the peers' own
files such as torch_ops.csv), row for row with peers.common's reader, so
the rows are the ones `bench plot` and `bench compare` read (a row cut
short by a killed run left out). One DataFrame: the bench's columns, typed
(counts as integers, times and rates as floats with NaN where a row has
none), and a column `file`, the file's name without .csv.

The metadata ('# key: value' lines) goes to df.attrs:
  - attrs["files"][NAME]: every key of NAME.csv ("cpu", "cores", "gpu",
    "openblas", "git commit", "date", "command line" ...; the first line,
    "duograd bench VERSION", under "title");
  - attrs[KEY]: a key with one value in every file that holds it (the
    machine's "cpu", "cores", "gpu" for a folder of one machine; a peer's
    own file, which records none of them, does not hide them);
  - attrs["other_files"]: the folder's other CSV files (bench train's
    curves, the profiler's tables), which are not in bench's row format.

pandas is imported here, not by the peers: a machine without it runs them.
"""
import csv
import math
import os

from peers import common

# the bench's columns that hold whole numbers (csv_rec's integers); the
# other numeric ones are floats
INT_COLUMNS = ("m", "n", "k", "batch", "threads", "transfer", "tf32", "cold", "warmup", "reps", "scratch_bytes",
               "arena_bytes", "live_bytes")
FLOAT_COLUMNS = ("median_ms", "min_ms", "max_ms", "cv_pct", "gflops", "gbps", "max_rel_err")


def read_meta(path):
    """the '# key: value' lines of a bench CSV as a dict (the first value of
    a key; a line without ': ' is the "title")"""
    meta = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            if not line.startswith("#"):
                continue
            text = line[1:].strip()
            key, sep, value = text.partition(": ")
            if not sep:
                key, value = "title", text
            meta.setdefault(key, value)
    return meta


def header_of(path):
    """the first line of path that is neither metadata nor empty, split into
    columns; None when there is none. Read alone, so that a CSV of another
    format (the profiler's node tables, whose names hold commas) is told
    apart before its rows are parsed."""
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line and not line.startswith("#"):
                return next(csv.reader([line]))
    return None


def typed(frame, path):
    """frame's number columns as numbers, as bench_csv_read parses them
    (an empty field or NaN: NaN); ValueError naming the file and column"""
    for cols, parse in ((INT_COLUMNS, int), (FLOAT_COLUMNS, lambda v: float(v) if v else math.nan)):
        for c in cols:
            if c in frame:
                try:
                    frame[c] = [parse(v) for v in frame[c]]
                except ValueError as e:
                    raise ValueError(f"{path}: column '{c}': {e}") from None


def load(folder):
    """DIR's result rows as one DataFrame, the metadata in df.attrs (see
    the module's text). FileNotFoundError when DIR is not a folder,
    ValueError when it holds no result CSV or a damaged one (named by
    file and line)."""
    import pandas as pd

    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder")
    frames, metas, others = [], {}, []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not name.endswith(".csv") or not os.path.isfile(path):
            continue
        header = header_of(path)
        if header is None or any(c not in header for c in common.REQUIRED_COLUMNS):
            others.append(name)
            continue
        columns, rows = common.read_rows(path)
        stem = name[:-len(".csv")]
        metas[stem] = read_meta(path)
        frame = pd.DataFrame(rows, columns=columns)
        typed(frame, path)
        frame.insert(0, "file", stem)
        frames.append(frame)
    if not frames:
        raise ValueError(f"{folder}: no result CSV of bench's (NAME.csv with the columns "
                         f"{', '.join(common.REQUIRED_COLUMNS)})")
    # a column an older file lacks is NaN in its rows (an integer column
    # becomes a float one then)
    df = pd.concat(frames, ignore_index=True)
    values = {}  # key: its values over the files that hold it
    for m in metas.values():
        for k, v in m.items():
            values.setdefault(k, set()).add(v)
    df.attrs.update({k: v.pop() for k, v in values.items() if len(v) == 1})
    df.attrs["files"] = metas
    df.attrs["other_files"] = others
    return df
