#!/usr/bin/env bash
# bench_vs_torch.sh — hpt against the PyTorch peer (bench/torch_gpt.py) at
# nanoGPT's CPU shakespeare_char config: char-level tinyshakespeare, L4 H4
# C128, block 64, batch 12, lr 1e-3 -> 1e-4, warmup 100. Runs alternate
# hpt, torch, hpt, torch, ... for R repeats, both on the same thread count;
# torch at its best setting (the OpenMP build of OpenBLAS through
# LD_LIBRARY_PATH, torch.set_num_threads). Steal time from /proc/stat is
# recorded around every run.
#
# Usage: bench/bench_vs_torch.sh [--iters N] [--repeats R] [--threads N]
#                                [--data PATH] [--out FILE] [--coretype NAME] [--build]
#                                [--arch ARCH]
# Environment: ITERS, REPEATS, THREADS, DATA, OUT, OPENBLAS_CORETYPE, ARCH (flags win).
# --arch times hpt built for another target than this CPU (make ARCH=...,
# build-ARCH/hpt), e.g. x86-64-v3: the AVX2 build on an AVX-512 machine. The
# JSON records the ISA hpt's kernels were built for (hpt_isa).
# Defaults: 150 iterations, 3 repeats, 2 threads, bench/data/tinyshakespeare.txt,
# bench/results/vs_torch.json. ./hpt is rebuilt when older than its sources
# (make -q); --build runs `make -j2 hpt` regardless.
# --coretype sets OPENBLAS_CORETYPE for both programs (both load the same
# OpenBLAS). OpenBLAS 0.3.21 does not know every new CPU and then falls back to
# its slow Prescott kernels (hpt then picks Haswell for itself, torch does not);
# when no core type is given and autodetection says Prescott, the script sets
# SkylakeX (AVX-512 CPUs) or Haswell (AVX2+FMA) for both. The JSON records the
# core each program actually ran.
#
# ms/step: hpt's is the median of every step (summary.json median_step_ms);
# torch's is the median without the first 5 iterations. The JSON also holds
# hpt's median without its first 5 steps (from metrics.jsonl) for reference.
# ratio = torch / hpt: above 1 means hpt is faster.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

ITERS=${ITERS:-150}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
DATA=${DATA:-bench/data/tinyshakespeare.txt}
OUT=${OUT:-bench/results/vs_torch.json}
ARCH=${ARCH:-native}
BUILD=0
while [ $# -gt 0 ]; do
    case "$1" in
        --iters) ITERS=$2; shift 2 ;;
        --repeats) REPEATS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --data) DATA=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --coretype) export OPENBLAS_CORETYPE=$2; shift 2 ;;
        --build) BUILD=1; shift ;;
        --arch) ARCH=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "bench_vs_torch.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
for v in ITERS REPEATS THREADS; do
    case "${!v}" in ''|*[!0-9]*) echo "bench_vs_torch.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2 ;; esac
    [ "${!v}" -gt 0 ] || { echo "bench_vs_torch.sh: $v must be > 0" >&2; exit 2; }
done

PY=/usr/bin/python3
OPENBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp

# ---- preconditions, each with a message that says what to do
[ -f "$DATA" ] || { echo "bench_vs_torch.sh: data file '$DATA' not found (--data PATH)" >&2; exit 1; }
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench_vs_torch.sh: $PY cannot import torch; install Debian's: apt-get install -y python3-torch python3-numpy" >&2
    exit 1
fi
if ! [ -e "$OPENBLAS_OMP/libblas.so.3" ]; then
    echo "bench_vs_torch.sh: the OpenMP build of OpenBLAS is missing ($OPENBLAS_OMP/libblas.so.3)." >&2
    echo "  torch's best setting needs it: apt-get install -y libopenblas0-openmp" >&2
    exit 1
fi
# make -q, not a test for ./hpt: a binary older than the sources must not be timed
HPT_BIN=./hpt
[ "$ARCH" = native ] || HPT_BIN=./build-$ARCH/hpt
if [ "$BUILD" = 1 ] || ! make -q ARCH="$ARCH" hpt 2>/dev/null; then
    echo "building $HPT_BIN (make -j2 ARCH=$ARCH hpt)" >&2
    make -j2 ARCH="$ARCH" hpt >&2
fi
# the vector ISA the kernels were compiled for: the target's own macros
HPT_ISA=$(cc -march="$ARCH" -dM -E - </dev/null 2>/dev/null | awk '
    /__AVX512F__/ { a512 = 1 } /__AVX2__/ { a2 = 1 } /__FMA__/ { fma = 1 }
    END { print a512 ? "AVX-512" : a2 ? (fma ? "AVX2+FMA" : "AVX2") : "SSE" }')
echo "hpt: $HPT_BIN, built for -march=$ARCH ($HPT_ISA)" >&2

# The OpenBLAS kernels both programs get (same library, same environment).
# OpenBLAS 0.3.21 falls back to its SSE3 "Prescott" kernels on CPUs newer than
# it; hpt then switches to the kernels the CPU runs as libhpt loads
# (src/base/base.c, blas_select), and `hpt --version` says which. torch does
# not load hpt: unless the user set a core type, it is given hpt's choice
# through OPENBLAS_CORETYPE, so both run the same kernels, chosen once.
HPT_BLAS=$("$HPT_BIN" --version | sed -n 's/^blas //p')
CORE=${HPT_BLAS%% *}
CORE_NOTE="autodetected"
[ -n "${OPENBLAS_CORETYPE+x}" ] && CORE_NOTE="OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE from the user"
case "$HPT_BLAS" in
    *"(chosen by hpt)")
        export OPENBLAS_CORETYPE=$CORE
        CORE_NOTE="autodetect gave Prescott; hpt chose $CORE, given to torch as OPENBLAS_CORETYPE" ;;
esac
echo "OpenBLAS core: $CORE ($CORE_NOTE)" >&2
if [ "$CORE" = Prescott ] && grep -qw avx2 /proc/cpuinfo; then
    echo "WARNING: both programs run OpenBLAS's SSE3 (Prescott) kernels on an AVX2 CPU; GEMMs run" >&2
    echo "  several times below the machine's speed. Try --coretype SkylakeX (AVX-512) or Haswell." >&2
fi

mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpt-vs-torch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# /proc/stat aggregate cpu line: total jiffies and steal jiffies. Steal only
# sees the host taking the vCPUs; other processes in this machine competing for
# the 2 cores show in the load average instead (recorded too).
stat_snapshot() { awk '/^cpu /{t=0; for (i=2;i<=NF;i++) t+=$i; print t, $9; exit}' /proc/stat; }
load1() { cut -d' ' -f1 /proc/loadavg; }

COMMON="--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --max-iters $ITERS \
--lr 1e-3 --min-lr 1e-4 --warmup-iters 100 --eval-interval 0 --eval-iters 1 --threads $THREADS --seed 1337"
HPT_CMD="$HPT_BIN train --data $DATA --tokenizer char $COMMON --out"
TORCH_CMD="env LD_LIBRARY_PATH=$OPENBLAS_OMP $PY bench/torch_gpt.py --data $DATA $COMMON --json"

: > "$WORK/runs.tsv"
S0=$(stat_snapshot)
for r in $(seq 1 "$REPEATS"); do
    for who in hpt torch; do
        a=$(stat_snapshot)
        la=$(load1)
        if [ "$who" = hpt ]; then
            cmd="$HPT_CMD $WORK/hpt_$r"
            res="$WORK/hpt_$r/summary.json"
        else
            cmd="$TORCH_CMD $WORK/torch_$r.json"
            res="$WORK/torch_$r.json"
        fi
        echo "run $r/$REPEATS $who: $cmd" >&2
        if ! $cmd > "$WORK/${who}_$r.log" 2>&1; then
            echo "bench_vs_torch.sh: $who run $r failed; its output:" >&2
            tail -n 20 "$WORK/${who}_$r.log" >&2
            exit 1
        fi
        b=$(stat_snapshot)
        lb=$(load1)
        printf '%s\t%s\t%s\t%s %s\t%s %s\t%s\n' "$r" "$who" "$res" "$a" "$b" "$la" "$lb" "$cmd" >> "$WORK/runs.tsv"
    done
done
S1=$(stat_snapshot)

GIT_REV=$(git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_DIRTY=$(git status --porcelain --untracked-files=no -- src cli include Makefile 2>/dev/null | wc -l)

"$PY" - "$WORK/runs.tsv" "$OUT" "$S0" "$S1" "$ITERS" "$REPEATS" "$THREADS" "$DATA" "$GIT_REV" "$GIT_DIRTY" \
    "$HPT_CMD DIR" "$TORCH_CMD OUT.json" "$CORE" "${OPENBLAS_CORETYPE-}" "$CORE_NOTE" "$ARCH" "$HPT_ISA" <<'EOF'
import json, os, statistics, subprocess, sys, datetime
(tsv, out, s0, s1, iters, repeats, threads, data, rev, dirty, hpt_cmd, torch_cmd, core, coretype,
 core_note, arch, hpt_isa) = sys.argv[1:18]

def steal(a, b):
    ta, sa = map(int, a.split()); tb, sb = map(int, b.split())
    dt = tb - ta
    return {"steal_jiffies": sb - sa, "total_jiffies": dt, "steal_pct": round(100.0 * (sb - sa) / dt, 3) if dt else 0.0}

def lscpu():
    info = {}
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    return info

runs = {"hpt": [], "torch": []}
for line in open(tsv):
    r, who, res, snaps, loads, cmd = line.rstrip("\n").split("\t")
    a, b = snaps.split(" ")[:2], snaps.split(" ")[2:]
    d = json.load(open(res))
    rec = {"repeat": int(r), "command": cmd, **steal(" ".join(a), " ".join(b)),
           "loadavg1_before_after": [float(x) for x in loads.split()]}
    if who == "hpt":
        rec["ms_per_step"] = d["median_step_ms"]
        rec["tokens_per_s"] = d["tokens_per_s"]
        rec["final_val_loss"] = d["final_val_loss"]
        rec["peak_rss_bytes"] = d["peak_rss_bytes"]
        rec["model"] = d["model"]
        rec["openblas_core"] = d.get("blas_core")
        # per-step times from the cumulative train clock in metrics.jsonl
        mpath = os.path.join(os.path.dirname(res), "metrics.jsonl")
        ts = [json.loads(l)["time_s"] for l in open(mpath) if l.strip()]
        steps = [1e3 * (t1 - t0) for t0, t1 in zip([0.0] + ts[:-1], ts)]
        rest = steps[5:] if len(steps) > 5 else steps
        rec["ms_per_step_skip5"] = statistics.median(rest)
        rec["min_ms"], rec["max_ms"] = min(steps), max(steps)
    else:
        rec["ms_per_step"] = d["median_ms"]
        rec["ms_per_step_skip5"] = d["median_ms"]
        rec["tokens_per_s"] = d["tokens_per_s"]
        rec["final_val_loss"] = d["final_val_loss"]
        rec["peak_rss_bytes"] = d["peak_rss_bytes"]
        rec["min_ms"], rec["max_ms"] = d["min_ms"], d["max_ms"]
        rec["blas_libraries"] = d["blas_libraries"]
        rec["openblas_core"] = d.get("openblas", {}).get("core")
        rec["torch_version"] = d["torch_version"]
        rec["threads"] = d["threads"]
    runs[who].append(rec)

med = {w: statistics.median(r["ms_per_step"] for r in runs[w]) for w in runs}
med5 = {w: statistics.median(r["ms_per_step_skip5"] for r in runs[w]) for w in runs}
cpu = lscpu()
omp_ok = all(any("openblas-openmp" in p for p in r["blas_libraries"]) for r in runs["torch"])
result = {
    "benchmark": "hpt vs PyTorch, nanoGPT CPU shakespeare_char config",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {"model_name": cpu.get("Model name", "?"), "nproc": os.cpu_count(),
                "cpu_family": cpu.get("CPU family"), "model": cpu.get("Model"),
                "hypervisor": cpu.get("Hypervisor vendor"),
                "avx512": "avx512f" in cpu.get("Flags", "")},
    "hpt_git": {"commit": rev, "dirty_files_in_src_cli_include_makefile": int(dirty)},
    "hpt_march": arch, "hpt_isa": hpt_isa,
    "config": {"data": os.path.abspath(data), "n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64,
               "batch_size": 12, "max_iters": int(iters), "lr": 1e-3, "min_lr": 1e-4, "warmup_iters": 100,
               "threads": int(threads), "repeats": int(repeats), "order": "alternating hpt, torch"},
    "commands": {"hpt": hpt_cmd, "torch": torch_cmd},
    "timing_note": "hpt: summary.json median_step_ms over all steps; torch: median without the first 5 "
                   "iterations; *_skip5 is both without the first 5",
    "torch_uses_openmp_openblas": omp_ok,
    "openblas_core": core,
    "openblas_core_note": core_note,
    "openblas_core_per_program": {w: sorted({str(r["openblas_core"]) for r in runs[w]}) for w in runs},
    "env": {"OPENBLAS_CORETYPE": coretype or None},
    "runs": runs,
    "median_ms_per_step": med,
    "median_ms_per_step_skip5": med5,
    "ratio_torch_over_hpt": med["torch"] / med["hpt"],
    "ratio_torch_over_hpt_skip5": med5["torch"] / med5["hpt"],
    "steal_overall": steal(s0, s1),
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
os.replace(tmp, out)

print(f"hpt vs torch — L4 H4 C128 B12 T64, {iters} iters, {threads} threads, {result['machine']['model_name']}, "
      f"OpenBLAS core {core}, hpt built for -march={arch} ({hpt_isa})")
print(f"{'run':>4} {'hpt ms':>9} {'torch ms':>9} {'ratio':>6} {'steal% h/t':>11}   val loss h/t")
for h, t in zip(runs["hpt"], runs["torch"]):
    print(f"{h['repeat']:>4} {h['ms_per_step']:9.2f} {t['ms_per_step']:9.2f} {t['ms_per_step'] / h['ms_per_step']:6.2f} "
          f"{h['steal_pct']:5.1f}/{t['steal_pct']:<5.1f}   {h['final_val_loss']:.3f}/{t['final_val_loss']:.3f}")
print(f"{'med':>4} {med['hpt']:9.2f} {med['torch']:9.2f} {result['ratio_torch_over_hpt']:6.2f}"
      f"   (skip-5 medians {med5['hpt']:.2f} / {med5['torch']:.2f}, ratio {result['ratio_torch_over_hpt_skip5']:.2f})")
st = result["steal_overall"]
print(f"steal {st['steal_jiffies']} of {st['total_jiffies']} jiffies ({st['steal_pct']:.2f} %); ratio > 1: hpt faster")
loads = [r["loadavg1_before_after"][0] for w in runs for r in runs[w]]
print(f"1-min load average before the runs: {min(loads):.2f} to {max(loads):.2f} (it includes this script's "
      f"own previous runs; well above {int(threads)} means other processes competed for the CPUs, which steal "
      f"time does not show)")
cores = result["openblas_core_per_program"]
if cores["hpt"] != cores["torch"] and cores["hpt"] != ["None"]:
    print(f"WARNING: hpt and torch ran different OpenBLAS kernels: {cores}", file=sys.stderr)
if not omp_ok:
    print("WARNING: torch did not load the OpenMP OpenBLAS; its numbers are not its best setting", file=sys.stderr)
print(f"wrote {out}")
EOF
