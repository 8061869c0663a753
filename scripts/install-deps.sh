#!/bin/sh
# Installs duograd's build and test dependencies from Debian's packages.
# Root runs apt-get directly; anyone else goes through sudo.
set -eu
pkgs="build-essential cmake pkg-config libopenblas-openmp-dev libcriterion-dev gnuplot-nox zlib1g-dev dataset-fashion-mnist"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] ||
    echo "note: no CUDA toolkit found: building the CPU backend only" >&2
