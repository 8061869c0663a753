#!/bin/sh
# Builds the libFuzzer harnesses in fuzz/ (clang, ASan + UBSan) and runs each
# for SECONDS (default 20) over a copy of its committed seeds in
# fuzz/build/run/<harness>/corpus, so the committed corpus only grows by
# hand. Fails on any crash, leak, sanitizer report, timeout or out-of-memory;
# the reproducer and the log stay in fuzz/build/run/<harness>/.
#   scripts/fuzz.sh [SECONDS] [harness...]      harnesses: fuzz/fuzz_<name>.c
# FUZZ_FLAGS adds libFuzzer flags (e.g. FUZZ_FLAGS=-runs=1000000 with SECONDS 0).
set -eu
cd "$(dirname "$0")/.."
secs=20
case "${1:-}" in
'' | *[!0-9]*) ;;
*) secs=$1; shift ;;
esac
harnesses="$*"
[ -n "$harnesses" ] || harnesses=$(cd fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 ||
    { echo "fuzz: no clang: scripts/install-deps.sh installs clang and libclang-rt-14-dev" >&2; exit 1; }
targets=""
for h in $harnesses; do
    [ -f "fuzz/fuzz_$h.c" ] || { echo "fuzz: no harness fuzz/fuzz_$h.c" >&2; exit 1; }
    targets="$targets fuzz_$h"
done
cmake -S fuzz -B fuzz/build/asan -DCMAKE_C_COMPILER="${FUZZ_CC:-clang}" >/dev/null
# shellcheck disable=SC2086 # one word per target
cmake --build fuzz/build/asan -j"$(nproc)" --target $targets
# the harnesses write every input to a file: in memory (/dev/shm) that is
# ten times faster than on disk
scratch=$(mktemp -d /dev/shm/dg-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=""
for h in $harnesses; do
    run=fuzz/build/run/$h
    rm -rf "$run"
    mkdir -p "$run/corpus"
    cp fuzz/corpus/"$h"/* "$run/corpus/"
    # -timeout: an input that takes 10 s is a hang. -close_fd_mask=2: the
    # code under test's own stderr (the CSV reader warns on every cut last
    # line) would flood the log; libFuzzer's and the sanitizers' reports
    # still come through
    # shellcheck disable=SC2086 # FUZZ_FLAGS: one flag per word
    if TMPDIR="$scratch" "fuzz/build/asan/fuzz_$h" -max_total_time="$secs" -timeout=10 -close_fd_mask=2 \
        -dict="fuzz/$h.dict" -artifact_prefix="$run/" -print_final_stats=1 ${FUZZ_FLAGS:-} \
        "$run/corpus" >"$run/log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log")
        cov=$(grep -E '^#[0-9]+' "$run/log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [^ ]+')
        echo "fuzz $h: ok, $execs runs in ${secs} s, $cov"
    else
        echo "fuzz $h: FAILED (log and reproducer in $run/):" >&2
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$run/log" | head -20 >&2
        failed="$failed $h"
    fi
done
[ -z "$failed" ] || { echo "fuzz: failures in:$failed" >&2; exit 1; }
