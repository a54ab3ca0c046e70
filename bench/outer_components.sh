#!/bin/sh
# The outer predictor and the schedules, component by component, on three
# workloads: nanoGPT's CPU config (txt-*: L4 H4
# C128, block 64, batch 12, 2000 steps, tinyshakespeare), the Fashion-MNIST
# CNN (cnn-*: 2 epochs, 938 steps; mlp-*: the MLP's 10 epochs, schedules only) and the 6x384 GPT reduced to 400 steps
# (x6-*). Plain training under each schedule, and the hybrid's outer
# predictor with one change at a time against its defaults (eta 1, mu 0.5,
# H 50, moments kept, no per-tensor gate, no dynamics gate), at D2Z (linear
# to 0), a few seeds and budgets (--max-iters at 0.8 and 0.65 of the steps).
#
# A quality probe, not a timing: every run uses 1 thread and --jobs run at a
# time, so the figures are final val losses, update counts and the
# controller's own share of the clock; speed comes from `hpt compare`
# (bench/compare.sh tuned-*). Rows are single runs: seed-to-seed spread of
# the final val is ~1% (txt) to ~2% (cnn), so a row against one other row
# resolves little; the seeded rows are what to compare.
#
#   sh bench/outer_components.sh [--jobs N]      (~80 min with 2 jobs)
# Writes runs/outer-components/<row>/ (a finished row is reused) and
# bench/results/outer_components.json.
set -eu
cd "$(dirname "$0")/.."
jobs=2
[ "${1:-}" = "--jobs" ] && jobs=$2
make -j2 hpt >/dev/null
data=${DATA:-bench/data/tinyshakespeare.txt}
dir=runs/outer-components
mkdir -p "$dir"
txt="--data $data --eval-iters 20 --eval-interval 100 --threads 1"
cnn="--task fashion-mnist --model cnn --epochs 2 --eval-interval 94 --threads 1"
cnnb="--task fashion-mnist --model cnn --eval-interval 94 --threads 1"   # budgets: --max-iters instead of --epochs
mlp="--task fashion-mnist --model mlp --threads 1"
x6="--data $data --n-layer 6 --n-head 6 --n-embd 384 --block-size 64 --batch-size 12 --max-iters 400 --warmup-iters 40 --eval-iters 20 --eval-interval 20 --threads 1"
d2z="--schedule linear --min-lr 0"
outer="--mode hybrid --predictor outer"
# row name | every flag of its run
rows="
txt-d2z-4e-3|$txt $d2z --lr 4e-3
txt-d2z-6e-3|$txt $d2z --lr 6e-3
txt-d2z-8e-3|$txt $d2z --lr 8e-3
txt-cosine-4e-3|$txt --schedule cosine --min-lr 4e-4 --lr 4e-3
txt-wsd-4e-3|$txt --schedule wsd --cooldown sqrt --min-lr 0 --lr 4e-3
txt-wsd-6e-3|$txt --schedule wsd --cooldown sqrt --min-lr 0 --lr 6e-3
txt-d2z-6e-3-budget0.8|$txt $d2z --lr 6e-3 --max-iters 1600
txt-d2z-4e-3-s1338|$txt $d2z --lr 4e-3 --seed 1338
txt-d2z-4e-3-s1339|$txt $d2z --lr 4e-3 --seed 1339
txt-cosine-4e-3-s1338|$txt --schedule cosine --min-lr 4e-4 --lr 4e-3 --seed 1338
txt-cosine-4e-3-s1339|$txt --schedule cosine --min-lr 4e-4 --lr 4e-3 --seed 1339
txt-outer|$txt $d2z --lr 4e-3 $outer
txt-outer-6e-3|$txt $d2z --lr 6e-3 $outer
txt-outer-follow-lr|$txt $d2z --lr 4e-3 $outer --outer-follow-lr
txt-outer-moments-reset|$txt $d2z --lr 4e-3 $outer --outer-moments reset
txt-outer-agree|$txt $d2z --lr 4e-3 $outer --outer-adapt agree
txt-outer-agree-eta2|$txt $d2z --lr 4e-3 $outer --outer-adapt agree --outer-lr 2
txt-outer-eta1.5|$txt $d2z --lr 4e-3 $outer --outer-lr 1.5
txt-outer-mu0.3|$txt $d2z --lr 4e-3 $outer --outer-momentum 0.3
txt-outer-H25|$txt $d2z --lr 4e-3 $outer --outer-interval 25
txt-outer-H100|$txt $d2z --lr 4e-3 $outer --outer-interval 100
txt-outer-gate-dynamics|$txt $d2z --lr 4e-3 $outer --outer-gate dynamics
txt-outer-K1|$txt $d2z --lr 4e-3 $outer --outer-check 1
cnn-cosine-s1337|$cnn --lr 4e-3 --schedule cosine --min-lr 4e-5 --seed 1337
cnn-cosine-s1338|$cnn --lr 4e-3 --schedule cosine --min-lr 4e-5 --seed 1338
cnn-cosine-s1339|$cnn --lr 4e-3 --schedule cosine --min-lr 4e-5 --seed 1339
cnn-d2z-s1337|$cnn --lr 4e-3 $d2z --seed 1337
cnn-d2z-s1338|$cnn --lr 4e-3 $d2z --seed 1338
cnn-d2z-s1339|$cnn --lr 4e-3 $d2z --seed 1339
cnn-d2z-s1340|$cnn --lr 4e-3 $d2z --seed 1340
cnn-d2z-8e-3-s1337|$cnn --lr 8e-3 $d2z --seed 1337
cnn-outer-s1337|$cnn --lr 4e-3 $d2z $outer --seed 1337
cnn-outer-s1338|$cnn --lr 4e-3 $d2z $outer --seed 1338
cnn-outer-s1339|$cnn --lr 4e-3 $d2z $outer --seed 1339
cnn-outer-s1340|$cnn --lr 4e-3 $d2z $outer --seed 1340
cnn-outer-agree-s1337|$cnn --lr 4e-3 $d2z $outer --outer-adapt agree --seed 1337
cnn-outer-K1-s1337|$cnn --lr 4e-3 $d2z $outer --outer-check 1 --seed 1337
cnn-outer-K1-s1338|$cnn --lr 4e-3 $d2z $outer --outer-check 1 --seed 1338
cnn-outer-H100-s1337|$cnn --lr 4e-3 $d2z $outer --outer-interval 100 --seed 1337
cnn-outer-mu0.7-s1337|$cnn --lr 4e-3 $d2z $outer --outer-momentum 0.7 --seed 1337
cnn-outer-eta1.5-s1337|$cnn --lr 4e-3 $d2z $outer --outer-lr 1.5 --seed 1337
cnn-d2z-budget0.8-s1337|$cnnb --max-iters 750 --lr 4e-3 $d2z --seed 1337
cnn-outer-budget0.8-s1337|$cnnb --max-iters 750 --lr 4e-3 $d2z $outer --seed 1337
cnn-outer-budget0.8-s1338|$cnnb --max-iters 750 --lr 4e-3 $d2z $outer --seed 1338
cnn-outer-budget0.65-s1337|$cnnb --max-iters 610 --lr 4e-3 $d2z $outer --seed 1337
cnn-outer-budget0.65-s1338|$cnnb --max-iters 610 --lr 4e-3 $d2z $outer --seed 1338
cnn-outer-budget0.8-s1339|$cnnb --max-iters 750 --lr 4e-3 $d2z $outer --seed 1339
cnn-outer-budget0.8-s1340|$cnnb --max-iters 750 --lr 4e-3 $d2z $outer --seed 1340
cnn-outer-budget0.9-s1337|$cnnb --max-iters 844 --lr 4e-3 $d2z $outer --seed 1337
cnn-outer-budget0.9-s1338|$cnnb --max-iters 844 --lr 4e-3 $d2z $outer --seed 1338
cnn-outer-budget0.9-s1339|$cnnb --max-iters 844 --lr 4e-3 $d2z $outer --seed 1339
cnn-outer-budget0.9-s1340|$cnnb --max-iters 844 --lr 4e-3 $d2z $outer --seed 1340
mlp-cosine-s1337|$mlp --schedule cosine --min-lr 1e-5 --seed 1337
mlp-cosine-s1338|$mlp --schedule cosine --min-lr 1e-5 --seed 1338
mlp-d2z-s1337|$mlp $d2z --seed 1337
mlp-d2z-s1338|$mlp $d2z --seed 1338
x6-d2z-s1337|$x6 --lr 1e-3 $d2z --seed 1337
x6-d2z-s1338|$x6 --lr 1e-3 $d2z --seed 1338
x6-d2z-2e-3-s1337|$x6 --lr 2e-3 $d2z --seed 1337
x6-cosine-s1337|$x6 --lr 1e-3 --schedule cosine --min-lr 1e-4 --seed 1337
x6-outer-s1337|$x6 --lr 1e-3 $d2z $outer --seed 1337
x6-outer-s1338|$x6 --lr 1e-3 $d2z $outer --seed 1338
"
one() {
    name=$1; shift
    ./hpt train "$@" --overwrite --out "$dir/$name" >"$dir/$name.log" 2>&1 ||
        echo "outer_components: $name failed, see $dir/$name.log" >&2
}
n=0
names=""
for row in $(echo "$rows" | grep '|' | tr ' ' '~'); do
    name=${row%%|*}; flags=$(echo "${row#*|}" | tr '~' ' ')
    names="$names $name"
    [ -f "$dir/$name/summary.json" ] && continue
    one "$name" $flags &
    n=$((n + 1))
    [ $n -ge "$jobs" ] && { wait; n=0; }
done
wait
echo "$rows" | grep '|' >"$dir/rows.txt"
python3 - "$dir" $names <<'PY'
import json, sys, datetime, platform
d, names = sys.argv[1], sys.argv[2:]
flags = dict(l.rstrip("\n").split("|", 1) for l in open(d + "/rows.txt"))
out = {"bench": "outer_components", "date": datetime.datetime.utcnow().isoformat() + "Z",
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine()),
       "command": "./hpt train <row flags> --out runs/outer-components/<row>", "rows": []}
base = None
for n in names:
    try: s = json.load(open(f"{d}/{n}/summary.json"))
    except OSError: continue
    oj = s.get("outer_jumps", {})
    row = {"row": n, "flags": " ".join(flags[n].split()), "final_val_loss": s["final_val_loss"], "steps": s["steps"], "updates": s.get("optimizer_updates"),
           "outer_jumps": oj or None, "controller_overhead_s": s.get("controller_overhead_s"),
           "predictor_overhead_s": s.get("predictor_overhead_s"), "train_s": s["train_s"]}
    out["rows"].append(row)
print(f"{'row':28s} {'final val':>9s} {'jumps kept/applied':>18s} {'own time %':>10s}")
for r in out["rows"]:
    oj = r["outer_jumps"]
    j = f"{oj['kept']}/{oj['applied']}" if oj else ""
    own = ((r["controller_overhead_s"] or 0) + (r["predictor_overhead_s"] or 0)) / r["train_s"] * 100
    print(f"{r['row']:28s} {r['final_val_loss']:9.4f} {j:>18s} {own:10.2f}")
# the CNN's budget sweep: per seed, the smallest budget f at which the outer
# predictor's final val reaches D2Z's full-budget final val, linear in log f
# between the budgets around the crossing (hpt compare's rule); its steps
# speedup is 1/f* (the outer path's own time is ~0.03% of the clock)
import math
fv = {r["row"]: r["final_val_loss"] for r in out["rows"]}
out["cnn_budget"] = []
for seed in (1337, 1338, 1339, 1340):
    target = fv.get(f"cnn-d2z-s{seed}")
    pts = sorted((f, fv[n]) for f, n in ((1.0, f"cnn-outer-s{seed}"), (0.9, f"cnn-outer-budget0.9-s{seed}"),
                 (0.8, f"cnn-outer-budget0.8-s{seed}"), (0.65, f"cnn-outer-budget0.65-s{seed}")) if n in fv)
    if target is None or not pts: continue
    fstar = None
    if pts[0][1] <= target: fstar = pts[0][0]  # a lower bound on the speedup
    for (f0, v0), (f1, v1) in zip(pts, pts[1:]):
        if fstar is None and v1 <= target <= v0:
            fstar = math.exp(math.log(f0) + (v0 - target) / (v0 - v1) * (math.log(f1) - math.log(f0)))
    out["cnn_budget"].append({"seed": seed, "target": target, "budgets": pts, "f_star": fstar,
                              "speedup_steps": 1 / fstar if fstar else None})
    print(f"cnn seed {seed}: target {target:.4f}, f* {fstar if fstar else float('nan'):.3f}, "
          f"speedup in steps {1 / fstar if fstar else float('nan'):.3f}")
tmp = "bench/results/outer_components.json.tmp"
json.dump(out, open(tmp, "w"), indent=1)
import os; os.replace(tmp, "bench/results/outer_components.json")
PY
