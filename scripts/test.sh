#!/bin/sh
# Builds duograd twice, warnings as errors (Release, then Debug with ASan +
# UBSan), and runs every Criterion suite in both builds. CUDA code is
# compiled whenever nvcc is found; GPU tests skip where no device answers.
# Then each libFuzzer harness runs for a bounded time (scripts/fuzz.sh).
set -eu
cd "$(dirname "$0")/.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
jobs=$(nproc)
start=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDG_WERROR=ON
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDG_WERROR=ON -DDG_SANITIZE=ON
cmake --build build-asan -j"$jobs"
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap is;
# detect_leaks=1: a test that leaks fails (docs/TESTING.md)
(cd build-asan && ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure)
# the readers of untrusted files (IDX, data-set folder, bench CSV) under
# libFuzzer: about 20 s per harness, any crash or sanitizer report fails
scripts/fuzz.sh 20
echo "all suites passed in both builds, and the fuzzers found nothing ($(( $(date +%s) - start )) s)"
