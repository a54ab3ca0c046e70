#!/bin/sh
# mutate.sh [FILE [LINE...]] — does the emulator catch a missing barrier?
# For each LINE of FILE (src/cuda/kernels_cuda.cu or attention_cuda.cu, the
# default the first; default lines: every __syncthreads in it) the file is
# built with that line's
# __syncthreads() deleted, and test_cuda_kernels runs on the emulator with
# it: each such mutant should fail. Prints one line per mutant, "caught" or
# "MISSED", and exits 1 if any was missed. About 2 minutes a mutant on 2
# cores: a tool to run by hand, not part of make test-cuda.
# Needs `make CUDA=emu test-cuda` (or its objects) built first.
set -u
src=${1:-src/cuda/kernels_cuda.cu}
[ $# -gt 0 ] && shift
lines=${*:-$(grep -n '__syncthreads();' "$src" | cut -d: -f1)}
b=build-cudaemu
for o in $b/tests/cuda/test_cuda_kernels.o $b/tests/cudaemu/emu.o $b/libhpt.a; do
    [ -f "$o" ] || { echo "mutate.sh: $o missing: run make CUDA=emu test-cuda first" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/hpt_mutate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
missed=0
# the other kernel file's object, as built (the mutant replaces FILE's)
others=
for o in $b/src/cuda/kernels_cuda.o $b/src/cuda/attention_cuda.o; do
    [ "$o" = "$b/${src%.cu}.o" ] || others="$others $o"
done
# the Makefile's own flags for the emulator's objects and programs
mk() { make -s CUDA=emu -f Makefile -f - print <<MK
print: ; @echo \$($1)
MK
}
cxxflags=$(mk EMU_CXXFLAGS)
ldlibs="$(mk LDLIBS) $(mk CUDA_LDLIBS)"
for line in $lines; do
    sed "${line}s/__syncthreads();//" "$src" > "$tmp/m.cu"
    { echo "#line 1 \"$src\""; sed -f tests/cudaemu/translate.sed "$tmp/m.cu"; } > "$tmp/m.cc"
    if ! g++ $cxxflags -I"$(dirname "$src")" -include tests/cudaemu/cuda_runtime.h -c "$tmp/m.cc" -o "$tmp/m.o" ||
       ! cc -fopenmp -o "$tmp/t" $b/tests/cuda/test_cuda_kernels.o $b/libhpt.a "$tmp/m.o" $others $b/tests/cudaemu/emu.o $ldlibs; then
        echo "line $line: does not build"; missed=1; continue
    fi
    if "$tmp/t" > "$tmp/log" 2>&1; then   # HPT_CUDA_TEST_ONLY=flash in the environment: the flash tests alone
        echo "line $line: MISSED ($(tail -n 1 "$tmp/log"))"; missed=1
    else
        echo "line $line: caught ($(tail -n 1 "$tmp/log"))"
    fi
done
exit $missed
