#!/bin/sh
# check_vec.sh — the hand-written kernels stay vectorised on every x86 target
# hpt is built for, whatever machine runs the check (on AVX2-only
# CPUs every exp/tanh loop and attention's 16-lane blocks had silently gone
# scalar, which the AVX-512 machines hid). For x86-64-v3 (AVX2+FMA) and
# x86-64-v4 (AVX-512) it compiles each kernel file, only compiling, and fails
#   - if any explicit vector code (simd.h's hpt_f16) would be lowered
#     piecewise (-Werror=vector-operation-performance), or
#   - if a function below has no loop in gcc's vectorisation report.
# VEC_CC and VEC_CFLAGS come from `make test` (the build's flags less -march).
# Skipped on a non-x86 machine or a compiler other than gcc (the reports and
# the warning are gcc's).
test_name=check_vec; . tests/lib.sh
cc=${VEC_CC:-cc}
cflags=${VEC_CFLAGS:--std=c11 -D_GNU_SOURCE -O3 -fno-math-errno -fno-trapping-math -fopenmp -Iinclude}
case "$(uname -m)" in x86_64) ;; *) echo "skip: vectorisation targets are x86-64's (this is $(uname -m))"; exit 0 ;; esac
if ! $cc --version 2>/dev/null | head -n 1 | grep -qi 'gcc\|cc (Debian'; then
    echo "skip: $cc is not gcc (the check reads gcc's vectorisation report)"; exit 0
fi

# The loops that must be vectorised carry a `vec-check` comment on the line
# gcc's report names for them (the loop, its body, or its omp pragma); each
# function below must hold at least one, so the check cannot pass by losing
# its markers: the elementwise kernels (every exp/tanh), the row reductions,
# the optimizer sweeps.
functions="
src/kernels/nn.c:layernorm_forward
src/kernels/nn.c:layernorm_bwd
src/kernels/nn.c:gelu_forward
src/kernels/nn.c:gelu_bwd
src/kernels/nn.c:residual_forward
src/kernels/nn.c:residual_backward
src/kernels/nn.c:softmax_xent_forward
src/kernels/sweep.c:adamw_update
src/kernels/sweep.c:adamw_update_scaled
src/kernels/attention.c:softmax_row
"

# lines FILE FUNC: "first last" line numbers of FUNC's definition (from the
# line that opens it at column 0 to the next line that is a lone "}")
lines() {
    awk -v f="$2" '
        !start && $0 ~ "^[A-Za-z].*[ *]" f "\\(" && $0 !~ ";[ \t]*$" { start = NR }
        start && NR > start && /^}/ { print start, NR; exit }' "$1"
}

for pair in $functions; do
    src=${pair%%:*}; fn=${pair#*:}
    range=$(lines "$src" "$fn")
    if [ -z "$range" ]; then fail "$src: no definition of $fn found (update tests/check_vec.sh)"; continue; fi
    set -- $range
    n=$(awk -v lo="$1" -v hi="$2" 'NR >= lo && NR <= hi && /vec-check/' "$src" | wc -l)
    if [ "$n" -gt 0 ]; then pass "$fn: $n marked loop(s)"; else fail "$fn ($src lines $1-$2): no vec-check marker"; fi
done

for arch in x86-64-v3 x86-64-v4; do
    for src in src/kernels/*.c; do
        rep="$tmp/$arch-$(basename "$src").txt"
        if $cc $cflags -march=$arch -Werror=vector-operation-performance -Wno-psabi \
               -fopt-info-vec-optimized="$rep" -c "$src" -o "$tmp/x.o" 2>"$tmp/err"; then
            pass "$arch $src: no vector operation lowered piecewise"
        else
            fail "$arch $src: does not compile with -Werror=vector-operation-performance"
        fi
    done
    for src in src/kernels/*.c; do
        rep="$tmp/$arch-$(basename "$src").txt"
        for line in $(grep -n 'vec-check' "$src" | cut -d: -f1); do
            if grep -q "^$src:$line:[0-9]*: optimized: loop vectorized" "$rep" 2>/dev/null; then
                pass "$arch $src:$line vectorised"
            else
                fail "$arch $src:$line not vectorised: $(sed -n "${line}p" "$src" | sed 's/^ *//' | cut -c1-70)"
            fi
        done
    done
done
finish
