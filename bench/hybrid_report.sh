#!/bin/sh
# Hybrid mode against baseline on nanoGPT's CPU shakespeare_char config for
# 2000 steps, one run per predictor (the single-seed report the hybrid issue
# asks for; the multi-seed protocol is bench/'s compare work). For each arm:
# phase distribution, backward passes skipped, final val loss, training
# clock, and the training clock at which validation first reached the
# baseline's final val loss (evaluations every 250 steps, fixed windows).
#
#   sh bench/hybrid_report.sh [SEED]     -> runs/hybrid-*/, bench/results/hybrid_report.json
set -eu
cd "$(dirname "$0")/.."
[ -x ./hpt ] || make -j2 hpt >&2
seed=${1:-1337}
data=${DATA:-bench/data/tinyshakespeare.txt}
common="--data $data --tokenizer char --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --max-iters 2000 --lr 1e-3 --min-lr 1e-4 --warmup-iters 100 --eval-interval 250 --eval-iters 200 --threads 2 --seed $seed"
./hpt train $common --overwrite --out runs/hybrid-baseline >&2
for p in coast shrink stale-adam linear; do
    ./hpt train $common --mode hybrid --predictor $p --overwrite --out runs/hybrid-$p >&2
done
python3 - "$seed" "$common" <<'PY'
import json, sys, datetime
seed, common = sys.argv[1], sys.argv[2]
def load(d):
    s = json.load(open(f"{d}/summary.json"))
    ev = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"val_loss"' in l]
    return s, ev
base, bev = load("runs/hybrid-baseline")
target = base["final_val_loss"]
rows = {"baseline": {"final_val_loss": target, "train_s": base["train_s"], "backward_passes": base["model_backward_calls"],
                     "time_to_target_s": next(e["time_s"] for e in bev if e["val_loss"] <= target)}}
for p in ("coast", "shrink", "stale-adam", "linear"):
    s, ev = load(f"runs/hybrid-{p}")
    hit = next((e["time_s"] for e in ev if e["val_loss"] <= target), None)
    rows[p] = {"final_val_loss": s["final_val_loss"], "train_s": s["train_s"],
               "backward_passes": s["backward_passes"], "backward_skipped": 2000 - s["backward_passes"],
               "phase_steps": s["phase_steps"], "predict_phases": s["predict_phases"],
               "probe_passes": s["probe_passes"], "predictor_overhead_s": s["predictor_overhead_s"],
               "time_to_target_s": hit}
res = {"bench": "hybrid_report", "date": datetime.datetime.utcnow().isoformat() + "Z", "seed": int(seed),
       "command": f"./hpt train {common} [--mode hybrid --predictor P]", "target_val_loss": target, "arms": rows}
json.dump(res, open("bench/results/hybrid_report.json", "w"), indent=1)
print(f"target = baseline final val {target:.4f}")
for k, r in rows.items():
    tt = r["time_to_target_s"]
    print(f"{k:10s} final val {r['final_val_loss']:.4f}  train {r['train_s']:6.1f} s  backward {r['backward_passes']:5d}  "
          f"time to target {'not reached' if tt is None else f'{tt:.1f} s'}  {r.get('phase_steps', '')}  {r.get('predict_phases', '')}")
PY
