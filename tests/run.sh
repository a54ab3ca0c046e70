#!/bin/sh
# tests/run.sh TEST... — runs the test binaries given, then the test scripts
# (HPT_TEST_SCRIPTS: globs; default tests/cli_*.sh and tests/check_*.sh),
# side by side, and prints each test's result and time as it ends, the
# failures' output, the slowest five and one closing line "N passed,
# N failed". Exits non-zero if anything failed. Tests run from the
# repository root (fixtures are read from tests/fixtures).
#
# TIER=fast keeps the tests whose source says "tier: fast" in its first 15
# lines (a binary's source is tests/NAME.c): `make test`. TIER=all (`make
# check`) runs every one.
# Jobs: TEST_JOBS, else make's -jN (MAKEFLAGS), else 1. The longest tests
# start first, by the times of the last run ($BUILD/test-times).
# Each test's whole output is kept in $BUILD/test-logs/NAME.log.
build=${BUILD:-build}
tier=${TIER:-all}
logs=$build/test-logs
times=$build/test-times
mkdir -p "$logs" || exit 1

is_fast() { head -n 15 "$1" 2>/dev/null | grep -q 'tier: fast'; }
source_of() {  # a binary's source, or the script itself
    case "$1" in *.sh) echo "$1";; *) for d in tests tests/cuda tests/cudaemu; do
        for e in c cu; do [ -f "$d/$(basename "$1").$e" ] && { echo "$d/$(basename "$1").$e"; return; }; done; done;; esac
}

list=$(mktemp) || exit 1
results=$(mktemp) || exit 1
trap 'rm -f "$list" "$results"' EXIT
for t in "$@" ${HPT_TEST_SCRIPTS:-tests/cli_*.sh tests/check_*.sh}; do
    [ -e "$t" ] || continue
    if [ "$tier" = fast ] && ! is_fast "$(source_of "$t")"; then continue; fi
    last=$(awk -v t="$t" '$1 == t { s = $2 } END { print s + 0 }' "$times" 2>/dev/null)
    [ "$last" = 0 ] && last=1000000  # never timed: may be long, start it early
    echo "$last $t"
done | sort -k1,1 -g -r | cut -d' ' -f2 > "$list"

jobs=${TEST_JOBS:-$(echo " ${MAKEFLAGS:-}" | sed -n 's/.* -j\([0-9][0-9]*\).*/\1/p')}
[ -n "$jobs" ] && [ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
n=$(wc -l < "$list")
echo "running $n tests ($tier tier), $jobs at a time; logs in $logs/"

start=$(date +%s.%N)
# one test: its output to its log, a line "STATUS SECONDS NAME" to $results
HPT_TEST_LOGS=$logs HPT_TEST_RESULTS=$results xargs -P "$jobs" -I{} sh -c '
    t=$1; log=$HPT_TEST_LOGS/$(echo "$t" | tr / _).log
    s=$(date +%s.%N)
    case "$t" in *.sh) sh "$t";; *) "$t";; esac > "$log" 2>&1; rc=$?
    e=$(date +%s.%N)
    secs=$(echo "$s $e" | awk "{ printf \"%.1f\", \$2 - \$1 }")
    if [ $rc -eq 0 ]; then st=PASS; else st=FAIL; fi
    printf "%s %6ss  %s\n" "$st" "$secs" "$t"
    if [ $rc -ne 0 ]; then echo "---- $t (exit $rc), the end of $log:"; tail -n 40 "$log"; echo "----"; fi
    echo "$st $secs $t" >> "$HPT_TEST_RESULTS"
' _ {} < "$list"
wall=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.0f", $2 - $1 }')

# the times of this run update the table the next run orders by
{ awk '{ print $3, $2 }' "$results"; [ -f "$times" ] && cat "$times"; } | awk '!seen[$1]++' > "$times.tmp" \
    && mv "$times.tmp" "$times"
echo "slowest:"
sort -k2,2 -g -r "$results" | head -n 5 | awk '{ printf "  %6ss  %s\n", $2, $3 }'
pass=$(grep -c '^PASS' "$results"); fail=$(grep -c '^FAIL' "$results")
missing=$((n - pass - fail))
[ "$missing" -gt 0 ] && { echo "$missing tests did not report"; fail=$((fail + missing)); }
grep '^FAIL' "$results" | awk '{ print "FAILED: " $3 }'
echo "$pass passed, $fail failed ($tier tier, ${wall}s wall, $jobs at a time)"
[ "$fail" -eq 0 ]
