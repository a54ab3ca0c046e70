#!/bin/sh
# How good is each predictor's direction, with the confidence gate and the
# backoff out of the way? Every predictor runs the hybrid on nanoGPT's CPU
# config with Predict forced whenever the controller allows it
# (--confidence-threshold 0, no backoff, a 50% waste budget), and each jump's
# line search is read back from phases.jsonl: the probe loss at alpha 0
# (where the real steps had left it) and at alpha 0.5 and 1 along the
# predicted displacement. A predictor whose displacement goes downhill more
# often, and by more, than the controls' is the better one; a jump is kept
# only when its gain is worth more real steps than it cost (docs/hybrid.md).
#
#   sh bench/predictor_probe.sh [STEPS] [SEED]    (default 1000, 1337; ~4 min)
# Writes runs/probe-<predictor>/ and bench/results/predictor_probe.json.
set -eu
cd "$(dirname "$0")/.."
steps=${1:-1000}
seed=${2:-1337}
make -j2 hpt >/dev/null
data=${DATA:-../shared/data/tinyshakespeare.txt}
common="--data $data --max-iters $steps --eval-interval 0 --eval-iters 20 --threads 2 --seed $seed"
forced="--mode hybrid --confidence-threshold 0 --backoff-after 100000 --predict-waste-budget 0.5 --warmup-steps 150"
preds="coast shrink stale-adam linear"
for p in $preds; do
    ./hpt train $common $forced --predictor $p --out runs/probe-$p >runs/probe-$p.log 2>&1 ||
        { echo "predictor_probe: $p failed, see runs/probe-$p.log" >&2; exit 1; }
done
python3 - "$steps" "$seed" "$common $forced" $preds <<'PY'
import json, re, statistics, sys, datetime
steps, seed, cmd, preds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
pat = re.compile(r"probe loss ([\d.]+) at alpha 0, ([\d.]+) at 0\.5, ([\d.]+) at 1")
kept = re.compile(r"kept at alpha ([\d.]+): probe loss ([\d.]+) -> ([\d.]+), worth ([\d.]+)")
out = {"bench": "predictor_probe", "date": datetime.datetime.utcnow().isoformat() + "Z", "steps": steps,
       "seed": seed, "command": f"./hpt train {cmd} --predictor P", "predictors": {}}
print(f"{'predictor':10s} {'jumps':>5s} {'kept':>4s} {'downhill@0.5':>12s} {'downhill@1':>10s} "
      f"{'median dL@0.5':>13s} {'median dL@1':>11s} {'steps kept':>10s} {'final train loss':>16s}")
for p in preds:
    d = f"runs/probe-{p}"
    tr = [json.loads(l) for l in open(f"{d}/phases.jsonl")]
    s = json.load(open(f"{d}/summary.json"))
    rolled = [pat.search(t["reason"]) for t in tr if t["phase"] == "predict" and "rolled back" in t["reason"]]
    rolled = [m for m in rolled if m]
    kp = [kept.search(t["reason"]) for t in tr if t["phase"] == "predict" and "kept" in t["reason"]]
    kp = [m for m in kp if m]
    # per jump: loss change at alpha 0.5 and 1 relative to alpha 0 (negative = downhill)
    d05 = [float(m.group(2)) - float(m.group(1)) for m in rolled]
    d1 = [float(m.group(3)) - float(m.group(1)) for m in rolled]
    gains = [float(m.group(3)) - float(m.group(2)) for m in kp]  # kept: best minus alpha-0 loss
    n = len(rolled) + len(kp)
    down05 = sum(x < 0 for x in d05) + len(kp)
    down1 = sum(x < 0 for x in d1)
    row = {"jumps": n, "kept": len(kp), "downhill_at_0.5": down05, "downhill_at_1": down1,
           "median_dloss_at_0.5": statistics.median(d05) if d05 else None,
           "median_dloss_at_1": statistics.median(d1) if d1 else None,
           "kept_gains": gains, "steps_kept": s["predict_phases"]["steps_kept"],
           "backward_passes": s["backward_passes"], "probe_passes": s["probe_passes"],
           "final_val_loss": s["final_val_loss"], "train_s": s["train_s"]}
    out["predictors"][p] = row
    fmt = lambda v: "n/a" if v is None else f"{v:+.4f}"
    print(f"{p:10s} {n:5d} {len(kp):4d} {down05:12d} {down1:10d} {fmt(row['median_dloss_at_0.5']):>13s} "
          f"{fmt(row['median_dloss_at_1']):>11s} {row['steps_kept']:10d} {s["final_val_loss"]:10.4f}")
json.dump(out, open("bench/results/predictor_probe.json", "w"), indent=1)
PY
