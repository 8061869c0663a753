#!/bin/sh
# Line coverage that a corpus reaches in the sources under test: builds the
# harnesses with clang's source-based coverage (no sanitizers) in
# fuzz/build/cov, replays each corpus once without fuzzing (-runs=0) and
# prints llvm-cov's report over all harnesses together. Needs llvm-profdata
# and llvm-cov of the clang's version (Debian: the llvm package).
#   fuzz/coverage.sh [ROOT]   corpora ROOT/<harness>/corpus; default
#                             fuzz/build/run (scripts/fuzz.sh's), else the seeds
set -eu
cd "$(dirname "$0")"
root=${1:-build/run}
cmake -S . -B build/cov -DFUZZ_COVERAGE=ON -DCMAKE_C_COMPILER="${FUZZ_CC:-clang}" >/dev/null
cmake --build build/cov -j"$(nproc)" >/dev/null
scratch=$(mktemp -d /dev/shm/dg-cov.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
rm -f build/cov/*.profraw
objects=""
for src in fuzz_*.c; do
    h=${src#fuzz_}
    h=${h%.c}
    corpus=$root/$h/corpus
    [ -d "$corpus" ] || corpus=corpus/$h
    echo "$h: $(ls "$corpus" | wc -l) inputs from $corpus" >&2
    LLVM_PROFILE_FILE="build/cov/$h.profraw" TMPDIR="$scratch" "build/cov/fuzz_$h" -runs=0 "$corpus" \
        >"build/cov/$h.log" 2>&1
    objects="${objects:+$objects -object }build/cov/fuzz_$h"
done
llvm-profdata merge -sparse build/cov/*.profraw -o build/cov/all.profdata
# shellcheck disable=SC2086 # one word per flag
llvm-cov report $objects -instr-profile=build/cov/all.profdata \
    ../core/data/idx.c ../core/data/stream.c ../bench/writers/csv.c
