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
# Each predictor runs twice: at the controller's horizon (a probe every 4
# predicted steps ends the phase as soon as it falls behind the forecast) and
# as a whole-phase jump of 40 steps, verified once at its end.
#
#   sh bench/predictor_probe.sh [STEPS] [SEED]    (default 1000, 1337; ~6 min)
# Writes runs/probe-<predictor>[-whole40]/ and bench/results/predictor_probe.json.
set -eu
cd "$(dirname "$0")/.."
steps=${1:-1000}
seed=${2:-1337}
make -j2 hpt >/dev/null
data=${DATA:-bench/data/tinyshakespeare.txt}
common="--data $data --max-iters $steps --eval-interval 0 --eval-iters 20 --threads 2 --seed $seed"
forced="--mode hybrid --confidence-threshold 0 --backoff-after 100000 --predict-waste-budget 0.5 --warmup-steps 150"
preds="coast shrink stale-adam linear"
whole="--whole-phase --min-predict-steps 40 --max-predict-steps 40"
runs=""
for p in $preds; do
    for v in "" -whole40; do
        extra=""; [ -n "$v" ] && extra=$whole
        ./hpt train $common $forced $extra --predictor $p --overwrite --out runs/probe-$p$v >runs/probe-$p$v.log 2>&1 ||
            { echo "predictor_probe: $p$v failed, see runs/probe-$p$v.log" >&2; exit 1; }
        runs="$runs $p$v"
    done
done
python3 - "$steps" "$seed" "$common $forced" "$whole" $runs <<'PY'
import json, re, statistics, sys, datetime
steps, seed, cmd, whole, preds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
# rolled back: "probe loss L0 at alpha 0, Lh at 0.5, L1 at 1, best Lb: worth W real steps, cost the time of C"
rb = re.compile(r"probe loss ([\d.]+) at alpha 0, ([\d.]+) at 0\.5, ([\d.]+) at 1, best ([\d.]+): "
                r"worth ([\d.]+) real steps, cost the time of ([\d.]+)")
# kept: "kept at alpha A: probe loss L0 -> Lb, worth W real steps for the time of C"
kp = re.compile(r"kept at alpha ([\d.]+): probe loss ([\d.]+) -> ([\d.]+), worth ([\d.]+) real steps for the time of ([\d.]+)")
out = {"bench": "predictor_probe", "date": datetime.datetime.utcnow().isoformat() + "Z", "steps": steps,
       "seed": seed, "command": f"./hpt train {cmd} --predictor P [whole40: {whole}]", "predictors": {}}
med = lambda v: statistics.median(v) if v else None
print(f"{'predictor':18s} {'jumps':>5s} {'kept':>4s} {'downhill':>8s} {'uphill@1':>8s} {'median dL@1':>11s} "
      f"{'median worth':>12s} {'median cost':>11s} {'steps kept':>10s} {'final val':>9s}")
for p in preds:
    d = f"runs/probe-{p}"
    tr = [t for t in map(json.loads, open(f"{d}/phases.jsonl")) if t["phase"] == "predict"]
    s = json.load(open(f"{d}/summary.json"))
    j = []  # per jump: L0, best, L1 (None when kept: not logged), worth, cost, kept
    for t in tr:
        m = rb.search(t["reason"])
        if m:
            L0, Lh, L1, Lb, w, c = map(float, m.groups())
            j.append((L0, Lb, L1, w, c, 0))
        m = kp.search(t["reason"])
        if m:
            a, L0, Lb, w, c = map(float, m.groups())
            j.append((L0, Lb, None, w, c, 1))
    dl1 = [x[2] - x[0] for x in j if x[2] is not None]
    row = {"jumps": len(j), "kept": sum(x[5] for x in j),
           "downhill": sum(x[1] < x[0] for x in j),           # some alpha in the search lowered the probe loss
           "uphill_at_1": sum(d > 0 for d in dl1),           # the full displacement raised it (rolled-back jumps)
           "median_dloss_at_1": med(dl1), "median_worth_steps": med([x[3] for x in j]),
           "median_cost_steps": med([x[4] for x in j]), "worth_steps": [x[3] for x in j],
           "steps_kept": s["predict_phases"]["steps_kept"], "backward_passes": s["backward_passes"],
           "probe_passes": s["probe_passes"], "final_val_loss": s["final_val_loss"], "train_s": s["train_s"]}
    out["predictors"][p] = row
    f4 = lambda v: "n/a" if v is None else f"{v:+.4f}"
    f1 = lambda v: "n/a" if v is None else f"{v:.1f}"
    print(f"{p:18s} {row['jumps']:5d} {row['kept']:4d} {row['downhill']:8d} {row['uphill_at_1']:8d} "
          f"{f4(row['median_dloss_at_1']):>11s} {f1(row['median_worth_steps']):>12s} "
          f"{f1(row['median_cost_steps']):>11s} {row['steps_kept']:10d} {s['final_val_loss']:9.4f}")
json.dump(out, open("bench/results/predictor_probe.json", "w"), indent=1)
PY
