#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_python.sh — the Python binding's tests (python/tests, pytest): zero-copy
# views, gradients against finite differences through them, hpt.train equal to
# `hpt train` bit for bit, errors, close(), and docs/python.md's examples.
# Needs python/hpt/libhpt.so (make) and Debian's python3-numpy and
# python3-pytest (scripts/install-deps.sh). Under a sanitizer build the
# library cannot be loaded into python3: skipped with the reason.
test_name=cli_python; . tests/lib.sh
if [ -n "${SANITIZED:-}" ]; then
    echo "skip python/tests: a sanitizer build's libhpt.so needs its runtime preloaded into python3"
    exit 0
fi
if [ -n "${VARIANT_BUILD:-}" ]; then
    echo "skip python/tests: the package loads the native build's library (make), not build-$VARIANT_BUILD's"
    exit 0
fi
# The first python3 with numpy and pytest: PYTHON, python3 on PATH, Debian's.
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy, pytest' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "FAIL no python3 with numpy and pytest (apt-get install python3-numpy python3-pytest, or scripts/install-deps.sh)"
    exit 1
fi
[ -f python/hpt/libhpt.so ] || { echo "FAIL python/hpt/libhpt.so is not built: run make"; exit 1; }
HPT=$HPT "$py" -m pytest -q -p no:cacheprovider --basetemp "$tmp/pytest" python/tests
