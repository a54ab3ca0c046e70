#!/bin/sh
# Runs every test binary given as arguments, then the CLI tests and the
# build checks (tests/check_*.sh; HPT_TEST_SCRIPTS= other globs, as
# make test-cuda gives tests/cuda/'s), and prints
# one closing line "N passed, N failed". Exits non-zero if anything failed.
# Tests run from the repository root (fixtures are read from tests/fixtures).
pass=0; fail=0
for t in "$@"; do
    echo "== $t"
    if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
for s in ${HPT_TEST_SCRIPTS:-tests/cli_*.sh tests/check_*.sh}; do
    [ -f "$s" ] || continue
    echo "== $s"
    if sh "$s"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $s"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
