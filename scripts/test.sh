#!/bin/sh
# Builds duograd twice, warnings as errors (Release, then Debug with ASan +
# UBSan), and runs every Criterion suite in both builds; the Release build
# is also installed and used by the example consumer
# (scripts/consumer-test.sh). CUDA code is compiled whenever nvcc is
# found; GPU tests skip where no device answers.
# Then the threaded embedding backward's check under ThreadSanitizer, each
# libFuzzer harness for a bounded time (scripts/fuzz.sh), and the main job as
# README.md gives it, its time checked against README's.
# Last, what was skipped (and so proved nothing here), by suite and reason.
# Build folders: $DG_BUILD_DIR (default build), $DG_ASAN_BUILD_DIR
# (default build-asan), $DG_TSAN_BUILD_DIR (default build-tsan).
set -eu
cd "$(dirname "$0")/.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
jobs=$(nproc)
start=$(date +%s)
build=${DG_BUILD_DIR:-build}
asan=${DG_ASAN_BUILD_DIR:-build-asan}
# ctest keeps every suite's whole output in Testing/Temporary/LastTest.log,
# where tests/skip_summary.sh reads the skip counts (by default it cuts a
# passing suite's output after 1 KiB)
keep="--test-output-size-passed 1048576 --test-output-size-failed 1048576"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDG_WERROR=ON
cmake --build "$build" -j"$jobs"
# shellcheck disable=SC2086 # $keep is four words
(cd "$build" && ctest --output-on-failure $keep)
# duograd as an installed library: install into a temporary prefix, build
# the example consumer by CMake and by pkg-config and run it, and check
# that libduograd.so exports the public API alone
scripts/consumer-test.sh "$build"
# DG_INSTALL=OFF: the installable libraries' second compilation proves
# nothing more under the sanitizers
cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DDG_WERROR=ON -DDG_SANITIZE=ON -DDG_INSTALL=OFF
cmake --build "$asan" -j"$jobs"
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap is;
# detect_leaks=1: a test that leaks fails (docs/TESTING.md)
# shellcheck disable=SC2086
(cd "$asan" && ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure $keep)
# ThreadSanitizer on the CPU backend's OpenMP kernels, through
# tests/tsan_embedding.c (test_embedding_threads' check: the embedding
# backward's tasks on every boundary, and the kernels of its graph), about
# a minute on 2 cores. libgomp is not TSan-instrumented (its barriers look
# like races), so clang with LLVM's OpenMP runtime and its Archer tool
# (libomp-N-dev), which reports the runtime's synchronisation to TSan.
# -tsan-instrument-func-entry-exit=0: the own sgemm's target_clones
# resolver runs before TSan is initialised and would crash in the
# instrumentation (reports still name file and line). -w: clang's warnings
# are not this step's business (the gcc builds treat warnings as errors).
# Only that target is built; any report fails the step (exit code 66).
tsan=${DG_TSAN_BUILD_DIR:-build-tsan}
llvm_lib="$(dirname "$(readlink -f "$(command -v clang)")")/../lib"
[ -f "$llvm_lib/libarcher.so" ] ||
    { echo "tsan: no $llvm_lib/libarcher.so: apt-get install libomp-dev" >&2; exit 1; }
cmake -S . -B "$tsan" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDG_CUDA=OFF -DDG_INSTALL=OFF \
    -DCMAKE_C_FLAGS="-fsanitize=thread -mllvm -tsan-instrument-func-entry-exit=0 -w -Qunused-arguments" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$tsan" -j"$jobs" --target tsan_embedding >/dev/null
OMP_TOOL_LIBRARIES="$llvm_lib/libarcher.so" TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" \
    "$tsan/tests/tsan_embedding"
# the readers of untrusted files (IDX, data-set folder, bench CSV) under
# libFuzzer: about 20 s per harness, any crash or sanitizer report fails
scripts/fuzz.sh 20
# the main job as README.md gives it, timed: it must end within README's
# "at most 3 minutes on 2 cores"
main_start=$(date +%s)
scripts/main-job.sh "$build" --out "$build/main-job"
main_took=$(( $(date +%s) - main_start ))
echo "main job: $main_took s (README.md: at most 180 s on 2 cores)"
[ "$main_took" -le 180 ] || { echo "the main job took $main_took s, over README.md's 180 s" >&2; exit 1; }
skips=$(sh tests/skip_summary.sh "$build" "$asan")
skipped=$(printf '%s\n' "$skips" | sed -n 's/^skipped in all: //p')
took="$(( $(date +%s) - start )) s"
if [ "$skipped" -eq 0 ]; then
    echo "all suites passed in both builds, no test was skipped, ThreadSanitizer and the fuzzers found nothing ($took)"
else
    echo "skipped tests (they did not run, so they prove nothing here):"
    printf '%s\n' "$skips" | sed '$d'
    echo "every test that ran passed in both builds, $skipped were skipped (above), ThreadSanitizer and the fuzzers found nothing ($took)"
fi
