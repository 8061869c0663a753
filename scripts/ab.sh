#!/bin/sh
# ab.sh: an A/B of two bench builds on one machine. A run on another day or
# another lease is not a before/after comparison (the host's speed moves
# between leases), so the old and the new bench run back to back, the same
# sweep arguments, alternating: round 1 old then new, round 2 new then old,
# and so on (old new new old ...), so that a drift of the machine over the
# call (a warming GPU, a load left by the previous run) does not land on
# one side only. Each run writes its own folder, OUT_DIR/old-R and
# OUT_DIR/new-R, with its stderr in OUT_DIR/old-R.log; then NEW_BENCH
# compare pairs each round (old-R as A, new-R as B) into
# OUT_DIR/compare-R.md.
set -eu

usage() {
    cat <<'EOF'
usage: scripts/ab.sh [--threshold PCT] OLD_BENCH NEW_BENCH OUT_DIR ROUNDS -- BENCH ARGS...

Runs OLD_BENCH and NEW_BENCH with the same BENCH ARGS, alternately, ROUNDS
times (round 1 old then new, round 2 new then old, ...), each into its own
folder OUT_DIR/old-R and OUT_DIR/new-R (stderr in OUT_DIR/old-R.log and
OUT_DIR/new-R.log; --out is added by this script, so BENCH ARGS must not
give one). Then `NEW_BENCH compare` of each round, old-R as A and new-R as
B, into OUT_DIR/compare-R.md.

  --threshold PCT  passed to bench compare: a change within +-PCT percent
                   is 'same' (its default: 5)
  -h, --help       this help

example:
  scripts/ab.sh .gpu/bin/bench-old .gpu/bin/bench ab 2 -- \
      --sweep conv --backends cpu --impl cpu-im2col --sizes conv=32

exit: 0 every run and comparison done, no regression; 3 a comparison found
a row of new slower than old beyond PCT (bench compare's verdict); 1 a run
or a comparison failed; 2 a usage error.
EOF
}

die_usage() {
    echo "ab.sh: $1" >&2
    echo "usage: scripts/ab.sh [--threshold PCT] OLD_BENCH NEW_BENCH OUT_DIR ROUNDS -- BENCH ARGS... (--help)" >&2
    exit 2
}

threshold=
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --threshold)
        [ $# -ge 2 ] || die_usage "--threshold needs a value"
        threshold=$2
        shift 2
        ;;
    --) break ;;
    -*) die_usage "unknown option '$1'" ;;
    *) break ;;
    esac
done

[ $# -ge 4 ] || die_usage "expected OLD_BENCH NEW_BENCH OUT_DIR ROUNDS, got $# argument(s)"
old=$1 new=$2 out=$3 rounds=$4
shift 4
if [ $# -eq 0 ] || [ "$1" != "--" ]; then die_usage "expected '--' and the bench arguments after ROUNDS"; fi
shift
[ $# -ge 1 ] || die_usage "no bench arguments after '--'"
for a in "$@"; do
    case $a in --out | --out=*) die_usage "BENCH ARGS must not give --out: ab.sh chooses each run's folder" ;; esac
done
case $rounds in
'' | *[!0-9]*) die_usage "ROUNDS must be a positive integer, not '$rounds'" ;;
esac
[ "$rounds" -ge 1 ] || die_usage "ROUNDS must be at least 1"
for b in "$old" "$new"; do
    if [ ! -f "$b" ] || [ ! -x "$b" ]; then
        echo "ab.sh: '$b' is not an executable file" >&2
        exit 1
    fi
done
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "ab.sh: '$out' exists and is not empty: an A/B never writes over an earlier one" >&2
    exit 1
fi
mkdir -p "$out"

failed=0
r=1
while [ "$r" -le "$rounds" ]; do
    if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        if [ "$side" = old ]; then bin=$old; else bin=$new; fi
        echo "ab.sh: round $r: $side ($bin)" >&2
        if ! "$bin" "$@" --out "$out/$side-$r" >"$out/$side-$r.log" 2>&1; then
            echo "ab.sh: round $r: $side failed; see $out/$side-$r.log" >&2
            failed=1
        fi
    done
    r=$((r + 1))
done
[ "$failed" -eq 0 ] || exit 1

regression=0
r=1
while [ "$r" -le "$rounds" ]; do
    set -- compare
    [ -z "$threshold" ] || set -- "$@" --threshold "$threshold"
    rc=0
    "$new" "$@" --out "$out/compare-$r.md" "$out/old-$r" "$out/new-$r" >/dev/null 2>"$out/compare-$r.log" || rc=$?
    case $rc in
    0) echo "ab.sh: round $r: no regression ($out/compare-$r.md)" >&2 ;;
    3)
        echo "ab.sh: round $r: a regression ($out/compare-$r.md)" >&2
        regression=1
        ;;
    *)
        echo "ab.sh: round $r: bench compare failed (exit $rc); see $out/compare-$r.log" >&2
        exit 1
        ;;
    esac
    r=$((r + 1))
done
[ "$regression" -eq 0 ] || exit 3
