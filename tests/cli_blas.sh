#!/bin/sh
# cli_blas.sh — one choice of OpenBLAS kernels per machine, in every process
# that loads hpt: the CLI, the Python binding (numpy imported first, so
# OpenBLAS is loaded before libhpt is), and a C program linking libhpt
# (test_blas) run the same kernels and train to the same bits.
#
# Debian 12's OpenBLAS 0.3.21 falls back to its generic "Prescott" kernels on
# a CPU it does not know (an Intel Xeon family 6 model 207, for one). On any
# machine the test also simulates that CPU: OPENBLAS_CORETYPE=Prescott puts
# OpenBLAS, as it loads, in the state its autodetection leaves on an unknown
# CPU, and HPT_BLAS_UNKNOWN_CPU=1 tells hpt that this Prescott is that
# fallback, not the user's choice (src/base/base.c, blas_select). A user's
# OPENBLAS_CORETYPE is kept.
# tier: fast
test_name=cli_blas; . tests/lib.sh
BUILD=${BUILD:-build}
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "FAIL no python3 with numpy (scripts/install-deps.sh)"; exit 1; }
words_text 7 > "$tmp/c.txt"
OPTS="--n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --max-iters 12 --eval-interval 6 --eval-iters 2 --threads 1 --seed 3"

# field NAME FILE: a value of test_blas's "blas core=... origin=... crc=..."
field() { sed -n "s/^blas .*$1=\([^ ]*\).*/\1/p" "$2" | head -n 1; }
summary() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]])' "$1/summary.json" "$2" 2>/dev/null; }

# train_all TAG [ENV...]: the CLI, Python after numpy, and test_blas under ENV
train_all() {
    tag=$1; shift
    run env "$@" $HPT train --data "$tmp/c.txt" $OPTS --out "$tmp/$tag-cli"
    [ "$rc" -eq 0 ] || fail "$tag: hpt train exited $rc"
    if [ -n "${SANITIZED:-}${VARIANT_BUILD:-}" ]; then
        # python/hpt loads the native build's library, not this build's
        echo "skip $tag: Python (python/hpt loads the native build's library, not build-$VARIANT_BUILD's)"
        cli_core=$(summary "$tmp/$tag-cli" blas_core); cli_crc=$(crc_of "$tmp/$tag-cli")
        run env "$@" "$BUILD/test_blas"
        cp "$tmp/out" "$tmp/$tag-c.out"
        c_core=$(field core "$tmp/out")
        if [ "$rc" -eq 0 ] && [ -n "$cli_core" ] && [ "$cli_core" = "$c_core" ]; then
            pass "$tag: the CLI and a C program run $cli_core kernels"
        else fail "$tag: kernels differ: CLI '$cli_core', C '$c_core' (test_blas exit $rc)"; fi
        return
    fi
    run env "$@" PYTHONPATH=python "$py" -c '
import sys, numpy          # numpy first: OpenBLAS loads before libhpt does
import hpt
o = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, max_iters=12, eval_interval=6,
         eval_iters=2, threads=1, seed=3)
r = hpt.train(data=sys.argv[1], out=sys.argv[2], **o)
print("py core=%s origin=%s crc=%s" % (hpt.blas_core(), hpt.blas_origin(), r["param_crc32"]))' "$tmp/c.txt" "$tmp/$tag-py"
    [ "$rc" -eq 0 ] || fail "$tag: hpt.train exited $rc"
    cp "$tmp/out" "$tmp/$tag-py.out"
    run env "$@" "$BUILD/test_blas"
    [ "$rc" -eq 0 ] || fail "$tag: test_blas exited $rc"
    cp "$tmp/out" "$tmp/$tag-c.out"
    cli_core=$(summary "$tmp/$tag-cli" blas_core); cli_crc=$(crc_of "$tmp/$tag-cli")
    py_core=$(sed -n 's/^py core=\([^ ]*\) .*/\1/p' "$tmp/$tag-py.out"); py_crc=$(sed -n 's/.* crc=//p' "$tmp/$tag-py.out")
    c_core=$(field core "$tmp/$tag-c.out")
    if [ -n "$cli_core" ] && [ "$cli_core" = "$py_core" ] && [ "$cli_core" = "$c_core" ]; then
        pass "$tag: the CLI, Python after numpy and a C program run $cli_core kernels ($(summary "$tmp/$tag-cli" blas_core_origin))"
    else fail "$tag: kernels differ: CLI '$cli_core', Python '$py_core', C '$c_core'"; fi
    if [ -n "$cli_crc" ] && [ "$cli_crc" = "$py_crc" ]; then pass "$tag: hpt.train equals hpt train bit for bit ($cli_crc)"
    else fail "$tag: params crc: CLI '$cli_crc', Python '$py_crc'"; fi
}

avx2=$(grep -m1 '^flags' /proc/cpuinfo | grep -w avx2 | grep -cw fma)

train_all native
native_core=$cli_core

train_all unknown OPENBLAS_CORETYPE=Prescott HPT_BLAS_UNKNOWN_CPU=1
sim_core=$cli_core; sim_crc=$cli_crc; sim_gemm=$(field crc "$tmp/unknown-c.out")
if [ "$avx2" = 1 ]; then
    case "$sim_core" in Prescott|"") fail "unknown CPU: still on '$sim_core' kernels";;
        *) pass "unknown CPU: hpt moved OpenBLAS from Prescott to $sim_core";; esac
fi
# the switch in place gives what OpenBLAS gives when it loads with those kernels
if [ -n "$sim_core" ] && [ "$sim_core" != Prescott ]; then
    run env OPENBLAS_CORETYPE="$sim_core" $HPT train --data "$tmp/c.txt" $OPTS --out "$tmp/loaded-cli"
    run env OPENBLAS_CORETYPE="$sim_core" "$BUILD/test_blas"
    if [ "$(crc_of "$tmp/loaded-cli")" = "$sim_crc" ] && [ "$(field crc "$tmp/out")" = "$sim_gemm" ]; then
        pass "switched to $sim_core in place = loaded with $sim_core (train $sim_crc, gemm $sim_gemm)"
    else fail "switched in place: train $sim_crc gemm $sim_gemm; loaded with $sim_core: train $(crc_of "$tmp/loaded-cli") gemm $(field crc "$tmp/out")"; fi
fi

# a user's choice is kept, even Prescott
run env OPENBLAS_CORETYPE=Prescott $HPT train --data "$tmp/c.txt" $OPTS --out "$tmp/user-cli"
case "$(summary "$tmp/user-cli" blas_core)/$(summary "$tmp/user-cli" blas_core_origin)" in
    Prescott/OPENBLAS_CORETYPE) pass "a user's OPENBLAS_CORETYPE=Prescott is kept";;
    *) fail "a user's OPENBLAS_CORETYPE=Prescott gave $(summary "$tmp/user-cli" blas_core) ($(summary "$tmp/user-cli" blas_core_origin))";;
esac
echo "native kernels: $native_core"
finish
