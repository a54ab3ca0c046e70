#!/usr/bin/env bash
# bench_124m.sh — hpt against PyTorch at GPT-2 124M shapes (L12 H12 C768,
# vocab 50257 -> 50304, block 1024, batch 4 x seq 64), same thread count,
# one run:
#   1. the sgemm probe (build/bench_step --sgemm-probe): every GEMM shape of
#      the step timed alone, through hpt's kernels and as one plain
#      cblas_sgemm; the best rate per shape, and the rate of the step's GEMM
#      mix at those rates (the "machine's sgemm rate at these shapes");
#   2. R interleaved repeats of hpt (build/bench_step --profile: the
#      per-kernel table) and PyTorch (bench/torch_step.py, Debian's
#      python3-torch with the OpenMP OpenBLAS through LD_LIBRARY_PATH), each
#      STEPS timed steps after WARMUP; medians over the repeats;
#   3. nanoGPT's CPU config through bench/bench_vs_torch.sh (its own
#      interleaved repeats), unless --no-nanogpt.
# Writes bench/results/gpt2_124m.json: hpt's run (the repeat with the median
# step) with "profile" (per-kernel median ms/step over all repeats, % of the
# step, GFLOP/s, % of the probe's rate at that shape), "sgemm_probe", "torch",
# "ratio_torch_over_hpt" (> 1: hpt faster), "pct_of_sgemm_rate" (the step's
# model GFLOP/s over the probe's mix rate), "nanogpt" (ratio at nanoGPT's
# config), and peak RSS against the memory ledger. bench/RESULTS.md says how
# to read it. Takes about 3-5 minutes on 2 idle cores.
#
# Usage: bench/bench_124m.sh [--out FILE] [--repeats R] [--steps N] [--warmup N]
#                            [--threads N] [--no-nanogpt] [--build]
# Environment: THREADS (2), REPEATS (3), STEPS (5), WARMUP (1), OUT,
# NANOGPT_ITERS (150), NANOGPT_REPEATS (3), OPENBLAS_CORETYPE (passed
# through to both; when unset and OpenBLAS autodetects Prescott, the script
# sets SkylakeX on AVX-512 CPUs, else Haswell, for both, as bench_vs_torch.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-1}
OUT=${OUT:-bench/results/gpt2_124m.json}
NANOGPT=1
NANOGPT_ITERS=${NANOGPT_ITERS:-150}
NANOGPT_REPEATS=${NANOGPT_REPEATS:-3}
BUILD=0
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --repeats) REPEATS=$2; shift 2 ;;
        --steps) STEPS=$2; shift 2 ;;
        --warmup) WARMUP=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --no-nanogpt) NANOGPT=0; shift ;;
        --build) BUILD=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "bench_124m.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
for v in THREADS REPEATS STEPS NANOGPT_ITERS NANOGPT_REPEATS; do
    case "${!v}" in ''|*[!0-9]*|0) echo "bench_124m.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2 ;; esac
done
case "$WARMUP" in ''|*[!0-9]*) echo "bench_124m.sh: WARMUP must be an integer >= 0" >&2; exit 2 ;; esac

PY=/usr/bin/python3
OPENBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench_124m.sh: $PY cannot import torch; install Debian's: apt-get install -y python3-torch python3-numpy" >&2
    exit 1
fi
[ -e "$OPENBLAS_OMP/libblas.so.3" ] || {
    echo "bench_124m.sh: the OpenMP OpenBLAS is missing ($OPENBLAS_OMP); apt-get install -y libopenblas0-openmp" >&2
    exit 1; }

BIN=build/bench_step
# make, not a timestamp test of bench_step.c: the binary links libhpt.a, and
# a kernel changed since the last build must not be timed as the old one
if [ "$BUILD" = 1 ] || ! make -q "$BIN" 2>/dev/null; then
    echo "building $BIN (make -j2 $BIN)" >&2
    make -j2 "$BIN" >&2
fi
make -q hpt 2>/dev/null || make -j2 hpt >&2  # asked which OpenBLAS kernels it runs, below
if ! ldd "$BIN" | grep -q 'openblas-openmp/libopenblas'; then
    echo "WARNING: $BIN does not resolve libopenblas from the OpenMP build:" >&2
    ldd "$BIN" | grep -i blas >&2 || echo "  (no BLAS linked: built with BLAS=0?)" >&2
fi

# Same OpenBLAS kernels for both programs (bench_vs_torch.sh's rule): where
# hpt chose them itself (OpenBLAS fell back to Prescott), torch is given that
# choice through OPENBLAS_CORETYPE.
HPT_BLAS=$(./hpt --version | sed -n 's/^blas //p')
case "$HPT_BLAS" in *"(chosen by hpt)") export OPENBLAS_CORETYPE=${HPT_BLAS%% *} ;; esac
echo "OpenBLAS core: $HPT_BLAS (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset})" >&2

mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench124m.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
HAVE_TIMEV=0
if [ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1; then HAVE_TIMEV=1; fi

echo "== sgemm probe" >&2
"$BIN" --threads "$THREADS" --sgemm-probe --json "$WORK/probe.json"

SHAPE="--steps $STEPS --warmup $WARMUP --threads $THREADS"
for r in $(seq 1 "$REPEATS"); do
    echo "== repeat $r/$REPEATS: hpt" >&2
    cmd=("$BIN" $SHAPE --profile --json "$WORK/hpt_$r.json")
    if [ "$HAVE_TIMEV" = 1 ]; then
        /usr/bin/time -v -o "$WORK/timev_$r" "${cmd[@]}" > "$WORK/hpt_$r.txt"
        awk -F': *' '/Maximum resident set size/ {print $2}' "$WORK/timev_$r" > "$WORK/rss_$r"
    else
        "${cmd[@]}" > "$WORK/hpt_$r.txt"
    fi
    [ "$r" = 1 ] && cat "$WORK/hpt_$r.txt"
    echo "== repeat $r/$REPEATS: torch" >&2
    LD_LIBRARY_PATH=$OPENBLAS_OMP "$PY" bench/torch_step.py $SHAPE --json "$WORK/torch_$r.json"
done
HPT_CMD="${cmd[*]}"
TORCH_CMD="LD_LIBRARY_PATH=$OPENBLAS_OMP $PY bench/torch_step.py $SHAPE"

if [ "$NANOGPT" = 1 ]; then
    echo "== nanoGPT CPU config (bench/bench_vs_torch.sh)" >&2
    bash bench/bench_vs_torch.sh --iters "$NANOGPT_ITERS" --repeats "$NANOGPT_REPEATS" --threads "$THREADS" \
        --out "$WORK/vs_torch.json" >&2
fi

"$PY" - "$WORK" "$REPEATS" "$OUT" "$HPT_CMD" "$TORCH_CMD" "${OPENBLAS_CORETYPE-}" \
    "$(git rev-parse HEAD 2>/dev/null || echo unknown)" <<'PYEOF'
import json, os, statistics, sys
work, R, out, hpt_cmd, torch_cmd, coretype, rev = sys.argv[1:8]
R = int(R)
med = statistics.median
hpt = [json.load(open(f"{work}/hpt_{r}.json")) for r in range(1, R + 1)]
tor = [json.load(open(f"{work}/torch_{r}.json")) for r in range(1, R + 1)]
probe = json.load(open(f"{work}/probe.json"))
rss = []
for r in range(1, R + 1):
    p = f"{work}/rss_{r}"
    rss.append(int(open(p).read().strip()) * 1024 if os.path.exists(p) and open(p).read().strip()
               else hpt[r - 1]["peak_rss_bytes_getrusage"])

h_ms = med([h["median_step_ms"] for h in hpt])
t_ms = med([t["median_step_ms"] for t in tor])
# hpt's record: the repeat whose median step is the median one
d = dict(sorted(hpt, key=lambda h: h["median_step_ms"])[(R - 1) // 2])
best = {s["kernel"]: s["best_gflops_per_s"] for s in probe["shapes"]}
rows = []
for i, k in enumerate(d["profile"]):
    ms = med([h["profile"][i]["ms"] for h in hpt])
    row = {"kernel": k["kernel"], "gemm": k["gemm"], "calls": k["calls"], "ms": ms,
           "pct_of_step": 100.0 * ms / h_ms, "gflop": k["gflop"],
           "gflops_per_s": k["gflop"] / (ms * 1e-3) if ms > 0 else 0.0}
    if k["kernel"] in best:
        row["probe_gflops_per_s"] = best[k["kernel"]]
        row["pct_of_probe"] = 100.0 * row["gflops_per_s"] / best[k["kernel"]]
    rows.append(row)
d["profile"] = rows
d["profile_unattributed_ms"] = h_ms - sum(r["ms"] for r in rows)
d["profile_note"] = ("per kernel: median over the repeats of each repeat's median ms/step; "
                     "pct_of_probe = in-step GFLOP/s over the sgemm probe's best rate at that shape")
gemm_ms = sum(r["ms"] for r in rows if r["gemm"])
gemm_gflop = sum(r["gflop"] for r in rows if r["gemm"])
d["sgemm_probe"] = probe
d["median_step_ms"] = h_ms
d["gflops_per_s"] = d["flops_per_step"] / (h_ms * 1e-3) * 1e-9
d["hpt_repeats_median_step_ms"] = [h["median_step_ms"] for h in hpt]
d["gemm"] = {"ms": gemm_ms, "pct_of_step": 100.0 * gemm_ms / h_ms, "gflop": gemm_gflop,
             "gflops_per_s": gemm_gflop / (gemm_ms * 1e-3), "probe_mix_gflops_per_s":
             probe["rate_at_step_mix_gflops_per_s"],
             "pct_of_probe": 100.0 * gemm_gflop / (gemm_ms * 1e-3) / probe["rate_at_step_mix_gflops_per_s"]}
d["pct_of_sgemm_rate"] = 100.0 * d["gflops_per_s"] / probe["rate_at_step_mix_gflops_per_s"]
tr = dict(tor[0]); tr["median_step_ms"] = t_ms
tr["repeats_median_step_ms"] = [t["median_step_ms"] for t in tor]
tr["median_phase_ms"] = {k: med([t["median_phase_ms"][k] for t in tor]) for k in tor[0]["median_phase_ms"]}
tr["command"] = torch_cmd
d["torch"] = tr
d["ratio_torch_over_hpt"] = t_ms / h_ms
d["repeats"] = R
d["peak_rss_bytes"] = max(rss)
d["peak_rss_source"] = "/usr/bin/time -v" if os.path.exists(f"{work}/rss_1") else "getrusage (in bench_step)"
d["peak_rss_over_ledger_bytes"] = d["peak_rss_bytes"] - d["memory_ledger_bytes"]
if os.path.exists(f"{work}/vs_torch.json"):
    v = json.load(open(f"{work}/vs_torch.json"))
    d["nanogpt"] = {k: v.get(k) for k in ("median_ms_per_step", "ratio_torch_over_hpt", "ratio_torch_over_hpt_skip5",
                                          "repeats", "iters", "config", "openblas") if k in v}
d["command"] = hpt_cmd
d["env"] = {"OPENBLAS_CORETYPE": coretype or None}
d["hpt_git_commit"] = rev
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(d, f, indent=1)
    f.write("\n")
os.replace(tmp, out)

print(f"\n{'kernel':24s} {'ms/step':>9s} {'% step':>7s} {'GFLOP/s':>8s} {'% probe':>8s}")
for r in sorted(rows, key=lambda r: -r["ms"]):
    pp = f"{r['pct_of_probe']:8.1f}" if "pct_of_probe" in r else f"{'':8s}"
    gf = f"{r['gflops_per_s']:8.1f}" if r["gflop"] > 0 else f"{'':8s}"
    print(f"{r['kernel']:24s} {r['ms']:9.2f} {r['pct_of_step']:7.1f} {gf} {pp}")
print(f"{'unattributed':24s} {d['profile_unattributed_ms']:9.2f} {100 * d['profile_unattributed_ms'] / h_ms:7.1f}")
g = d["gemm"]
print(f"\nGEMMs: {g['ms']:.1f} ms/step ({g['pct_of_step']:.1f} %), {g['gflops_per_s']:.1f} GFLOP/s = "
      f"{g['pct_of_probe']:.1f} % of the probe's {g['probe_mix_gflops_per_s']:.1f} GFLOP/s at these shapes")
print(f"hpt   {h_ms:9.1f} ms/step  {d['gflops_per_s']:.1f} GFLOP/s = {d['pct_of_sgemm_rate']:.1f} % of the sgemm rate "
      f"(repeats {', '.join(f'{x:.1f}' for x in d['hpt_repeats_median_step_ms'])})")
print(f"torch {t_ms:9.1f} ms/step  (repeats {', '.join(f'{x:.1f}' for x in tr['repeats_median_step_ms'])}; "
      f"torch {tr['torch']}, {' '.join(tr['torch_build_blas'])}, OpenBLAS core {tr['openblas'].get('core')}, "
      f"{', '.join(l for l in tr['blas_libraries'] if 'blas' in l)})")
print(f"ratio torch / hpt at 124M: {d['ratio_torch_over_hpt']:.2f}x")
if "nanogpt" in d:
    print(f"ratio torch / hpt at nanoGPT's CPU config: {d['nanogpt'].get('ratio_torch_over_hpt', float('nan')):.2f}x")
led = d["memory_ledger_bytes"]
print(f"memory: ledger (params + grads + moments + activations) {led / 1048576:.1f} MiB, peak RSS "
      f"{d['peak_rss_bytes'] / 1048576:.1f} MiB ({d['peak_rss_source']}), +{d['peak_rss_over_ledger_bytes'] / 1048576:.1f} MiB")
print(f"wrote {out}")
PYEOF
