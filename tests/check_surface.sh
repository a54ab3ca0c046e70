#!/bin/sh
# tier: fast (make test; tests/run.sh)
# check_surface.sh — libhpt's surface: what a program that links it gets.
#   (a) libhpt.so exports the hpt_ names alone (nm -D, defined symbols):
#       the kernels' plain names (matmul_forward, sumsq, ...) stay inside,
#       so llm.c-derived code can share the process; no toolchain name is
#       allowed either (this toolchain adds none: _init/_fini stay local)
#   (b) every hpt_ name the CUDA plugin leaves to the process (nm -D -u) is
#       one libhpt.so exports, so the plugin loads under Python too
#   (c) a C program linking libhpt.so alone loads (ldd) no cairo, X11,
#       MPI, hwloc or libevent library, and runs: plotting is the CLI's
#       (cli/plot.c) and MPI a plugin (libhpt_mpi.so, opened under mpirun)
#   (d) ./hpt loads no MPI library either; the MPI plugin carries libmpi
#   (e) the plugin is opened under mpirun alone: a plain run trains with
#       HPT_MPI_PLUGIN naming no file; under mpirun that run is refused
#       (exit 1) with the reason
test_name=check_surface; . tests/lib.sh
build=${BUILD:-build}
so=$build/libhpt.so
heavy='libcairo|libX|libxcb|libmpi|libopen-rte|libopen-pal|libhwloc|libevent|libpmix'

if [ ! -f "$so" ] && [ -n "${VARIANT_BUILD:-}" ]; then
    echo "skip (a)-(c): build-$VARIANT_BUILD builds no libhpt.so (the native build's make does)"
elif [ ! -f "$so" ]; then
    fail "$so is not built (make builds it)"
else
    # (a)
    nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' | sort -u >"$tmp/exports"
    n=$(wc -l <"$tmp/exports")
    grep -v '^hpt_' "$tmp/exports" >"$tmp/other"
    if [ "$n" -gt 100 ] && [ ! -s "$tmp/other" ]; then pass "libhpt.so exports $n names, every one hpt_"
    else fail "libhpt.so exports $n names, $(wc -l <"$tmp/other") not hpt_: $(head -n 12 "$tmp/other" | tr '\n' ' ')"; fi
    # (b)
    if [ -f "$build/libhpt_cuda.so" ]; then
        nm -D -u "$build/libhpt_cuda.so" | awk '{ print $2 }' | sed 's/@.*//' | grep '^hpt_' | sort -u >"$tmp/wanted"
        missing=$(comm -23 "$tmp/wanted" "$tmp/exports" | tr '\n' ' ')
        if [ -s "$tmp/wanted" ] && [ -z "$missing" ]; then
            pass "the CUDA plugin's $(wc -l <"$tmp/wanted") hpt_ names from the process are exported: $(tr '\n' ' ' <"$tmp/wanted")"
        else fail "the CUDA plugin wants hpt_ names libhpt.so does not export: '$missing'"; fi
    else echo "skip (b): no $build/libhpt_cuda.so (a build without CUDA)"; fi
    # (c)
    cat >"$tmp/prog.c" <<'C'
#include <stdio.h>
#include "hpt.h"
int main(void) {
    int major, minor, patch;
    printf("%s\n", hpt_version(&major, &minor, &patch));
    return 0;
}
C
    if ! ${VEC_CC:-cc} -Iinclude "$tmp/prog.c" -o "$tmp/prog" "$so" -Wl,-rpath,"$(cd "$build" && pwd)" 2>"$tmp/err"; then
        fail "a program linking libhpt.so alone does not link"
    else
        ldd "$tmp/prog" >"$tmp/ldd" 2>&1
        libs=$(grep -c '=>' "$tmp/ldd")
        bad=$(grep -E "$heavy" "$tmp/ldd" | awk '{ print $1 }' | tr '\n' ' ')
        if [ "$libs" -gt 0 ] && [ -z "$bad" ]; then pass "a program linking libhpt.so: $libs libraries (ldd), no cairo, X11, MPI or hwloc"
        else fail "a program linking libhpt.so loads $bad($libs libraries)"; fi
        if [ -n "${SANITIZED:-}" ]; then echo "skip running it: the sanitizers' runtime must come first"
        elif run "$tmp/prog" && [ $rc -eq 0 ] && grep -q '^[0-9]' "$tmp/out"; then pass "it runs: hpt_version $(cat "$tmp/out")"
        else fail "it does not run: status $rc"; fi
    fi
fi

# (d)
ldd "$HPT" >"$tmp/ldd" 2>&1
bad=$(grep -E 'libmpi|libopen-rte|libopen-pal|libhwloc|libevent|libpmix' "$tmp/ldd" | awk '{ print $1 }' | tr '\n' ' ')
if grep -q '=>' "$tmp/ldd" && [ -z "$bad" ]; then pass "$HPT loads no MPI library ($(grep -c '=>' "$tmp/ldd") libraries)"
else fail "$HPT loads $bad"; fi
if [ ! -f "$build/libhpt_mpi.so" ]; then fail "no $build/libhpt_mpi.so (make builds it beside $HPT)"
elif ldd "$build/libhpt_mpi.so" | grep -q 'libmpi'; then pass "libhpt_mpi.so carries libmpi"
else fail "libhpt_mpi.so does not load libmpi"; fi

# (e)
words_text 7 >"$tmp/data.txt"
tiny="train --data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 --max-iters 2 --eval-iters 1 --threads 1"
run env HPT_MPI_PLUGIN=/nonexistent/libhpt_mpi.so "$HPT" $tiny --out "$tmp/plain"
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/plain")" ]; then pass "without mpirun the plugin is not opened: a plain run trains"
else fail "a plain run with HPT_MPI_PLUGIN naming no file: status $rc"; fi
if ! command -v mpirun >/dev/null 2>&1; then echo "skip the refusal under mpirun: mpirun is not installed"
else
    [ -n "${SANITIZED:-}" ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    run timeout 60 mpirun --oversubscribe --allow-run-as-root -np 1 -x HPT_MPI_PLUGIN=/nonexistent/libhpt_mpi.so \
        "$HPT" $tiny --out "$tmp/mpi"
    if [ $rc -eq 1 ] && grep -q "started by mpirun, but MPI is not available: .*nonexistent/libhpt_mpi.so" "$tmp/err"; then
        pass "under mpirun without the plugin: refused (exit 1), naming the file"
    else fail "under mpirun without the plugin: status $rc"; fi
fi
finish
