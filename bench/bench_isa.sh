#!/usr/bin/env bash
# bench_isa.sh — the speed figures for each vector ISA this CPU can run:
# hpt vs PyTorch at nanoGPT's CPU config (bench_vs_torch.sh) and the
# per-kernel profile of a training step (bench_step --profile: ms/step and
# GFLOP/s of every GEMM, attention, GELU, layernorm, softmax), for hpt built
# with -march=native and with -march=x86-64-v3 (AVX2+FMA), and x86-64-v4
# (AVX-512) where the CPU has it. On an AVX-512 machine the v3 build is the
# AVX2 build timed there, which is not an AVX2 machine: say so with a figure.
#
# Usage: bench/bench_isa.sh  (REPEATS, ITERS, THREADS as bench_vs_torch.sh;
# OUTDIR, default bench/results). Writes OUTDIR/isa_<arch>.json (the vs-torch
# run) and OUTDIR/isa_<arch>_profile.json (bench_step's JSON) per target.
# Needs an idle machine: nothing else may run while it times.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUTDIR:-bench/results}
THREADS=${THREADS:-2}
archs="native x86-64-v3"
grep -m1 '^flags' /proc/cpuinfo | grep -qw avx512f && archs="$archs x86-64-v4"
for a in $archs; do
    build=build; [ "$a" = native ] || build=build-$a
    make -s -j2 ARCH="$a" hpt "$build/bench_step" >/dev/null
    echo "== -march=$a: profile ($build/bench_step, L4 H4 C128 V65 B12 T64, $THREADS threads)" >&2
    "$build/bench_step" --n-layer 4 --n-head 4 --n-embd 128 --vocab 65 --batch 12 --seq 64 \
        --threads "$THREADS" --steps 20 --warmup 3 --profile --json "$OUTDIR/isa_${a}_profile.json"
    echo "== -march=$a: hpt vs PyTorch" >&2
    bash bench/bench_vs_torch.sh --arch "$a" --threads "$THREADS" --out "$OUTDIR/isa_$a.json"
done
