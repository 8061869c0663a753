#!/bin/sh
# test_ab.sh AB_SH BENCH: scripts/ab.sh with one bench as both builds on a
# tiny CPU sweep (every folder and comparison it promises is there, in the
# alternating order), and its refusals: a missing argument, a missing '--',
# a bench that is not executable, a folder that already holds results, and a
# run that fails. Each refusal must exit non-zero with a message.
set -u
ab=$1 bench=$2
tmp=$(mktemp -d /tmp/dg-ab-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

sweep="--sweep gemm --sizes 32,64 --backends cpu --reps 3 --min-time 0"
# shellcheck disable=SC2086 # the sweep's words are separate arguments
sh "$ab" --threshold 1000 "$bench" "$bench" "$tmp/ab" 2 -- $sweep 2>"$tmp/ab.err"
rc=$?
[ $rc -eq 0 ] || fail "ab.sh on a tiny sweep: exit $rc: $(cat "$tmp/ab.err")"
for r in 1 2; do
    for side in old new; do
        [ -s "$tmp/ab/$side-$r/gemm.csv" ] || fail "no $side-$r/gemm.csv"
        grep -q '^gemm,square,cpu-openblas,cpu,fp32,64,' "$tmp/ab/$side-$r/gemm.csv" ||
            fail "$side-$r/gemm.csv has no 64 row of the sweep asked for"
    done
    [ -s "$tmp/ab/compare-$r.md" ] || fail "no compare-$r.md"
    grep -q "A: $tmp/ab/old-$r" "$tmp/ab/compare-$r.md" || fail "compare-$r.md: A is not old-$r"
    grep -q "B: $tmp/ab/new-$r" "$tmp/ab/compare-$r.md" || fail "compare-$r.md: B is not new-$r"
    grep -q '| gemm | ' "$tmp/ab/compare-$r.md" || fail "compare-$r.md pairs no gemm row"
done
# old new, then new old
order=$(grep -o 'round [12]: [a-z]* (' "$tmp/ab.err" | cut -d' ' -f3 | tr '\n' ' ')
[ "$order" = "old new new old " ] || fail "run order '$order', not 'old new new old '"

# refusals: command, expected exit, a word of the message
refuse() {
    want=$1 word=$2
    shift 2
    sh "$ab" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ $got -ne "$want" ]; then
        fail "ab.sh $*: exit $got, expected $want ($(cat "$tmp/err"))"
    elif ! grep -q "$word" "$tmp/err"; then
        fail "ab.sh $*: no '$word' in: $(cat "$tmp/err")"
    fi
}
printf '#!/bin/sh\nexit 0\n' >"$tmp/not-exec"
printf '#!/bin/sh\necho broken >&2\nexit 1\n' >"$tmp/broken"
chmod +x "$tmp/broken"
refuse 2 "got 3 argument" "$bench" "$bench" "$tmp/x"
refuse 2 "expected '--'" "$bench" "$bench" "$tmp/x" 1 --sweep gemm
refuse 2 "no bench arguments" "$bench" "$bench" "$tmp/x" 1 --
refuse 2 "positive integer" "$bench" "$bench" "$tmp/x" two -- --sweep gemm
refuse 2 "must not give --out" "$bench" "$bench" "$tmp/x" 1 -- --sweep gemm --out "$tmp/y"
# shellcheck disable=SC2086
refuse 1 "not an executable file" "$tmp/not-exec" "$bench" "$tmp/x" 1 -- $sweep
# shellcheck disable=SC2086
refuse 1 "not an executable file" "$bench" "$tmp/missing" "$tmp/x" 1 -- $sweep
# shellcheck disable=SC2086
refuse 1 "not empty" "$bench" "$bench" "$tmp/ab" 1 -- $sweep
# shellcheck disable=SC2086
refuse 1 "old failed" "$tmp/broken" "$bench" "$tmp/z" 1 -- $sweep
# a failed run ends the A/B before any comparison: half a pair is no A/B
[ ! -e "$tmp/z/compare-1.log" ] || fail "bench compare ran after a failed run"
if ! sh "$ab" --help >"$tmp/out" 2>&1 || ! grep -q '^usage: scripts/ab.sh' "$tmp/out"; then fail "--help"; fi

if [ $fails -ne 0 ]; then
    echo "test_ab: $fails failure(s)"
    exit 1
fi
echo "test_ab: ok"
