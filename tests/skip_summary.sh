#!/bin/sh
# skip_summary.sh BUILD_DIR...: what each build's last ctest run skipped,
# one line per suite and reason, then "skipped in all: N" last.
# Every suite prints "[====] Skipped: K of M tests: reason" (skip_report.c)
# and ctest keeps every suite's output in Testing/Temporary/LastTest.log
# (scripts/test.sh keeps it whole: --test-output-size-passed). A build
# without that log is an error (exit 1): nothing can be said about it.
set -eu
logs=""
for dir in "$@"; do
    log="$dir/Testing/Temporary/LastTest.log"
    [ -f "$log" ] || { echo "skip_summary.sh: $dir has no ctest log ($log)" >&2; exit 1; }
    logs="$logs $log"
done
# shellcheck disable=SC2086 # the paths come from the arguments, one word each
awk '
    FNR == 1 { build = FILENAME; sub(/\/Testing\/Temporary\/LastTest\.log$/, "", build) }
    /^[0-9]+\/[0-9]+ Test: / { suite = $NF }   # "9/17 Test: test_gpu"
    # skip_selftest skips on purpose: its own ctest entries judge it
    /^\[====\] Skipped: [0-9]+ of / && suite !~ /^skip_selftest/ {
        line = $0
        sub(/^\[====\] Skipped: /, "", line)
        printf "  %s/%s: %s\n", build, suite, line
        total += $3
    }
    END { printf "skipped in all: %d\n", total }
' $logs
