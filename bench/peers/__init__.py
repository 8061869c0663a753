"""peers: the Python peers of bench's sweeps, one module each, and what
they share.

Each peer runs the work of one sweep in PyTorch or NumPy on the same
machine, right after the sweep, and appends its rows to the sweep's CSV
(or to a CSV of its own) in bench's long format, so `bench plot` and
`bench compare` set them beside duograd's:

    torch_resnet     bench --sweep resnet      resnet.csv
    torch_conv       bench --sweep conv        conv.csv
    torch_attention  bench --sweep attention   torch_attention.csv
    torch_ddp        bench --sweep scaling     scaling.csv
    torch_ops        bench --sweep gemm,ops    torch_ops.csv (and --transfers: ceiling rows)
    numpy_mlp        bench --sweep mlp         mlp.csv
    torch_mlp        bench --sweep mlp         torch_mlp.csv (the GPU step, eager and CUDA graph)
    export_onnx      bench profile|train --model FILE.onnx: the file, from
                     PyTorch (torchvision's resnet18, an MLP), and
                     PyTorch's step time on it

    common           bench's CSV columns, the one CSV reader (the standard
                     library's csv), the row writer in bench's format,
                     metadata lines, bench/runner/timing.c's timing rules,
                     the options every peer takes, the precision axis
                     (--dtype, the dtype/tf32 columns, the check
                     tolerances per precision)
    results          a result folder as one pandas DataFrame, its
                     metadata in df.attrs (for people, not for the bench)

Each peer runs by its path from anywhere, nothing installed:

    python3 bench/peers/torch_conv.py --out DIR

The folder is a package named `peers`, not `duograd_peers`: it is imported
only with bench/ put first on sys.path (by the peer run by its path, or by
its tests), so the short name cannot meet an installed package of the same
name, and the path people type stays short. A peer run by its path puts
bench/ in place of its own folder on sys.path before importing, so each
module is loaded once, as peers.NAME, never a second time under its bare
name (two CsvOut classes, two sets of constants).

torch is imported only inside the functions that need it: every module
imports, and its tests (bench/peers/tests/) run, without PyTorch.
"""
