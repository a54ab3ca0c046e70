#!/usr/bin/env bash
# muon_step.sh — what a Muon step costs against an AdamW step, and where that
# cost goes, at the GPT sizes of the Muon comparison (bench/compare.sh muon-*):
# nanoGPT's CPU config (L4 C128) at batch 12, and the 6x384 GPT at batch 12,
# 48 and 192 (T64, vocab 65). Newton-Schulz's GEMMs cost the same per step at
# any batch, the model's GEMMs grow with it: the ratio says how many times
# fewer updates Muon needs before it pays in time at that size.
#
# Usage: bench/muon_step.sh  (REPEATS [3] interleaved adamw/muon pairs,
# STEPS [10] timed steps each, THREADS [1], the compare runs' per-run
# threads; OUT [bench/results/muon_step.json]). Needs an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-10}
THREADS=${THREADS:-1}
OUT=${OUT:-bench/results/muon_step.json}
make -s -j2 build/bench_step >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
configs="4:4:128:12 6:6:384:12 6:6:384:48 6:6:384:192"
for c in $configs; do
    IFS=: read -r L H C B <<<"$c"
    for r in $(seq 1 "$REPEATS"); do
        for opt in adamw muon; do
            echo "== L$L C$C B$B $opt repeat $r" >&2
            build/bench_step --n-layer "$L" --n-head "$H" --n-embd "$C" --vocab 65 --block-size 64 \
                --batch "$B" --seq 64 --steps "$STEPS" --warmup 2 --threads "$THREADS" \
                --optimizer "$opt" --profile --json "$work/L${L}_C${C}_B${B}_${opt}_$r.json" >/dev/null
        done
    done
done
python3 - "$work" "$OUT" "$configs" "$THREADS" "$STEPS" <<'EOF'
import glob, json, statistics, sys
work, out, configs, threads, steps = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4]), int(sys.argv[5])
rows, meta = [], None
for c in configs:
    L, H, C, B = map(int, c.split(":"))
    med = {}
    for opt in ("adamw", "muon"):
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{work}/L{L}_C{C}_B{B}_{opt}_*.json"))]
        meta = meta or runs[0]
        med[opt] = statistics.median(r["median_step_ms"] for r in runs)
        if opt == "muon":
            def share(r, key):
                return sum(p["ms"] for p in r["profile"] if p["kernel"].startswith(key))
            ns = statistics.median(share(r, "muon newton-schulz") for r in runs)
            upd = statistics.median(share(r, "muon momentum") for r in runs)
            ns_gflop = statistics.median(sum(p.get("gflop", 0) for p in r["profile"]
                                             if p["kernel"].startswith("muon newton-schulz")) for r in runs)
    rows.append({"n_layer": L, "n_head": H, "n_embd": C, "batch": B, "seq": 64, "tokens_per_step": B * 64,
                 "adamw_step_ms": round(med["adamw"], 2), "muon_step_ms": round(med["muon"], 2),
                 "muon_over_adamw": round(med["muon"] / med["adamw"], 3),
                 "newton_schulz_ms": round(ns, 2), "newton_schulz_share": round(ns / med["muon"], 3),
                 "newton_schulz_gflop": round(ns_gflop, 3), "muon_update_ms": round(upd, 2)})
res = {"benchmark": "muon_step", "date": meta["date"], "cpu": meta["cpu"], "openblas_core": meta["openblas_core"],
       "threads": threads, "timed_steps": steps, "repeats": len(glob.glob(f"{work}/L4_C128_B12_muon_*.json")),
       "command": "bash bench/muon_step.sh",
       "note": "median step of bench_step --profile (zero_grad + forward + backward + optimizer), median over "
               "interleaved repeats; muon_over_adamw is the number of times fewer updates Muon needs to break "
               "even in time at that size",
       "rows": rows}
with open(out + ".tmp", "w") as f:
    json.dump(res, f, indent=1)
import os; os.replace(out + ".tmp", out)
print(f"{'model':<10} {'B':>4} {'adamw ms':>9} {'muon ms':>9} {'ratio':>6} {'NS ms':>8} {'NS share':>8}")
for r in rows:
    print(f"L{r['n_layer']} C{r['n_embd']:<5} {r['batch']:>4} {r['adamw_step_ms']:>9.1f} {r['muon_step_ms']:>9.1f} "
          f"{r['muon_over_adamw']:>6.2f} {r['newton_schulz_ms']:>8.1f} {r['newton_schulz_share']:>8.1%}")
EOF
