#!/bin/sh
# The main job (README's first set-up command): bench's default sweeps
# (ceiling,gemm,ops,mlp) into reports/latest, then the mlp sweep's CPU peers
# (bench/peers/numpy_mlp.py: the same step in NumPy, and in PyTorch where it
# is installed) appended to that run's mlp.csv, then the charts and
# summary.md redrawn so they show duograd beside its peers.
#
#   scripts/main-job.sh [BUILD_DIR] [--quick] [--out DIR] [--budget S]
#
# BUILD_DIR: where the bench was built (default build). --quick and --out
# go to both the bench and the peer. --budget: the job's wall seconds for
# the bench and the peer (default 165, so that the whole job ends within 3
# minutes on a 2-core machine, loaded or not): the bench gets all but 15 s
# of it, the peer what the bench left; rows that do not fit are timed
# leaner or skipped, each saying so in its note. PYTHON names the interpreter; by default the
# first of python3 and /usr/bin/python3 that imports numpy.
# Exit status: the bench's, or 1 where the peer failed or could not run.
set -u
usage() { echo "usage: scripts/main-job.sh [BUILD_DIR] [--quick] [--out DIR] [--budget S]" >&2; exit 2; }
build=build
out=reports/latest
quick=""
budget=165
start=$(date +%s)
case "${1:-}" in -*|"") ;; *) build=$1; shift ;; esac
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=--quick ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
    --budget) [ $# -ge 2 ] || usage; budget=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) usage ;;
    esac
    shift
done
here=$(dirname "$0")
bench="$build/bench"
[ -x "$bench" ] || { echo "main-job: no bench at $bench: build first (cmake --build $build)" >&2; exit 2; }

# shellcheck disable=SC2086 # $quick is a word or nothing
case "$budget" in ''|*[!0-9]*) echo "main-job: --budget takes whole seconds, at least 30" >&2; exit 2 ;; esac
[ "$budget" -ge 30 ] || { echo "main-job: --budget takes whole seconds, at least 30" >&2; exit 2; }
"$bench" --out "$out" --budget "$(( budget - 15 ))" $quick
rc=$?
[ "$rc" -le 1 ] || exit "$rc" # bad options or a crash: nothing for the peer to stand beside
[ -f "$out/mlp.csv" ] || { echo "main-job: no $out/mlp.csv: the NumPy peer did not run" >&2; exit 1; }

# a machine may put a python3 without numpy first on PATH (pyenv, a venv)
py=""
for p in ${PYTHON:-python3 /usr/bin/python3}; do
    if "$p" -c "import numpy" >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "main-job: no python3 with numpy (scripts/install-deps.sh installs python3-numpy):" \
        "the NumPy peer did not run" >&2
    exit 1
fi
# OpenBLAS's threads under NumPy wait as duograd's did in this run (bench
# picks OpenMP's wait policy by what runs beside it unless OMP_WAIT_POLICY
# is set)
policy=$(sed -n 's/^# openmp wait policy: \([a-z]*\).*/\1/p' "$out/mlp.csv" | head -n 1)
[ -n "${OMP_WAIT_POLICY:-}" ] || [ -z "$policy" ] || export OMP_WAIT_POLICY="$policy"
# shellcheck disable=SC2086
peer_budget=$(( budget - ($(date +%s) - start) ))
[ "$peer_budget" -ge 1 ] || peer_budget=1
"$py" "$here/../bench/peers/numpy_mlp.py" --out "$out" --budget "$peer_budget" $quick || rc=1
# redraw with the peer's rows (the summary went to stdout once already)
"$bench" plot "$out" >/dev/null || rc=1
echo "main-job: $out/summary.md and charts now show duograd's CPU step beside NumPy's" >&2
echo "main-job: done in $(( $(date +%s) - start )) s (the budget of the bench and its peer: $budget s)" >&2
exit "$rc"
