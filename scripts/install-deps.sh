#!/bin/sh
# Installs duograd's build and test dependencies from Debian's packages.
# Root runs apt-get directly; anyone else goes through sudo.
set -eu
pkgs="build-essential cmake pkg-config libopenblas-openmp-dev libcriterion-dev gnuplot-nox zlib1g-dev dataset-fashion-mnist"
pkgs="$pkgs libsleef-dev" # the CPU backend's vectorised exp and tanh (cpu_backend/cpu_vmath.h)
pkgs="$pkgs libdnnl-dev" # oneDNN: the CPU backend's vendor GEMM, bf16 matmuls (cpu_backend/cpu_onednn.c; -DDG_ONEDNN=OFF builds without)
pkgs="$pkgs clang" # scripts/fuzz.sh
pkgs="$pkgs libcjson-dev" # bench: NAME.json results (Google Benchmark's layout), bench compare
pkgs="$pkgs libbenchmark-tools python3-scipy" # tests: Google Benchmark's compare.py on duograd's JSON
pkgs="$pkgs python3-numpy" # bench/peers/numpy_mlp.py: the mlp sweep's NumPy peer (scripts/main-job.sh, tests)
pkgs="$pkgs python3-pandas" # bench/peers/results.py: a result folder as a DataFrame (its test skips without)
pkgs="$pkgs libonnx-dev protobuf-c-compiler libprotobuf-c-dev" # the ONNX importer (core/onnx/): onnx.proto, protoc-c and its runtime
pkgs="$pkgs python3-onnx" # tests/data/onnx/make_models.py: the importer's test models
pkgs="$pkgs python3-venv python3-pip" # onnxruntime's venv (below)
pkgs="$pkgs libonnx-testdata" # tests/test_onnx_nodes.c and test_onnx_pytorch.c: the ONNX project's node tests and PyTorch-converted models
pkgs="$pkgs help2man lintian" # the installed duograd-bench's man page; the Debian package's check (scripts/consumer-test.sh)
pkgs="$pkgs libopenmpi-dev openmpi-bin" # bench train under mpirun: CPU ranks (bench/train/train_mpi.c; tests/test_mpi.sh)
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
updated=""
install_missing() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    echo "installing:$missing" >&2
    [ -n "$updated" ] || $sudo apt-get update -qq
    updated=1
    # shellcheck disable=SC2086 # one package per word
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}
# shellcheck disable=SC2086 # one package per word
install_missing $pkgs
# libFuzzer's runtime (libclang_rt.fuzzer-x86_64.a) is in libclang-rt-N-dev
# for the default clang N (14 on Debian 12), which clang only recommends
clang_major=$(clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -1)
install_missing "libclang-rt-$clang_major-dev"
# LLVM's OpenMP runtime and its Archer tool: the ThreadSanitizer step of
# scripts/test.sh (GCC's libgomp is not instrumented)
install_missing "libomp-$clang_major-dev"
# onnxruntime, the reference runtime of tests/test_onnxruntime.py, is on PyPI
# alone: pip installs it into a venv that also sees Debian's python3-onnx
# and python3-numpy (--system-site-packages), so that Debian's Python stays
# as apt left it; tests/CMakeLists.txt looks for this venv's python3 first.
# DG_VENV: another folder (the same variable at cmake time).
venv="${DG_VENV:-$HOME/.local/share/duograd/venv}"
if ! "$venv/bin/python3" -c "import onnxruntime" >/dev/null 2>&1; then
    echo "installing: onnxruntime (PyPI) into $venv" >&2
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/python3" -m pip install -q onnxruntime
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] ||
    echo "note: no CUDA toolkit found: building the CPU backend only" >&2
