#!/bin/sh
# The outer predictor, component by component (issue 12 items 3 and 4): on
# nanoGPT's CPU config (L4 H4 C128, block 64, batch 12, 2000 steps,
# tinyshakespeare), the final val loss of plain training under each schedule
# and of the hybrid's outer predictor with one change at a time against its
# defaults (eta 1, mu 0.5, H 50, moments kept, no per-tensor gate, no
# dynamics gate), all at D2Z (linear to 0) and the LR the D2Z sweep tunes.
#
# A quality probe, not a timing: every run uses 1 thread and two run at a
# time (--jobs), so the figures are final val losses and update counts, which
# no clock changes; speed comes from `hpt compare` (bench/compare.sh).
# One seed per row unless the row says otherwise: differences under the seed
# spread (~0.01-0.02 at this config) are not resolved by one seed.
#
#   sh bench/outer_components.sh [--jobs N]      (~30 min with 2 jobs)
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
common="--data $data --eval-iters 20 --eval-interval 100 --threads 1"
d2z="--schedule linear --min-lr 0"
outer="--mode hybrid --predictor outer"
# row name | flags (after $common)
rows="
d2z-2e-3|$d2z --lr 2e-3
d2z-4e-3|$d2z --lr 4e-3
d2z-6e-3|$d2z --lr 6e-3
d2z-8e-3|$d2z --lr 8e-3
cosine-4e-3|--schedule cosine --min-lr 4e-4 --lr 4e-3
wsd-4e-3|--schedule wsd --cooldown sqrt --min-lr 0 --lr 4e-3
wsd-6e-3|--schedule wsd --cooldown sqrt --min-lr 0 --lr 6e-3
d2z-4e-3-budget0.8|$d2z --lr 4e-3 --max-iters 1600
d2z-4e-3-s1338|$d2z --lr 4e-3 --seed 1338
d2z-4e-3-s1339|$d2z --lr 4e-3 --seed 1339
cosine-4e-3-s1338|--schedule cosine --min-lr 4e-4 --lr 4e-3 --seed 1338
cosine-4e-3-s1339|--schedule cosine --min-lr 4e-4 --lr 4e-3 --seed 1339
outer|$d2z --lr 4e-3 $outer
outer-6e-3|$d2z --lr 6e-3 $outer
outer-follow-lr|$d2z --lr 4e-3 $outer --outer-follow-lr
outer-moments-reset|$d2z --lr 4e-3 $outer --outer-moments reset
outer-agree|$d2z --lr 4e-3 $outer --outer-adapt agree
outer-agree-eta2|$d2z --lr 4e-3 $outer --outer-adapt agree --outer-lr 2
outer-eta1.5|$d2z --lr 4e-3 $outer --outer-lr 1.5
outer-mu0.3|$d2z --lr 4e-3 $outer --outer-momentum 0.3
outer-H25|$d2z --lr 4e-3 $outer --outer-interval 25
outer-H100|$d2z --lr 4e-3 $outer --outer-interval 100
outer-gate-dynamics|$d2z --lr 4e-3 $outer --outer-gate dynamics
"
one() {
    name=$1; shift
    ./hpt train $common "$@" --overwrite --out "$dir/$name" >"$dir/$name.log" 2>&1 ||
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
python3 - "$dir" "$common" $names <<'PY'
import json, sys, datetime, platform
d, common, names = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {"bench": "outer_components", "date": datetime.datetime.utcnow().isoformat() + "Z",
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine()),
       "command": f"./hpt train {common} <row flags>", "rows": []}
base = None
for n in names:
    try: s = json.load(open(f"{d}/{n}/summary.json"))
    except OSError: continue
    oj = s.get("outer_jumps", {})
    row = {"row": n, "final_val_loss": s["final_val_loss"], "steps": s["steps"], "updates": s.get("optimizer_updates"),
           "outer_jumps": oj or None, "controller_overhead_s": s.get("controller_overhead_s"),
           "predictor_overhead_s": s.get("predictor_overhead_s"), "train_s": s["train_s"]}
    out["rows"].append(row)
    if n == "d2z-4e-3": base = s["final_val_loss"]
print(f"{'row':24s} {'final val':>9s} {'vs d2z 4e-3':>11s} {'jumps kept/applied':>18s}")
for r in out["rows"]:
    r["vs_d2z_4e-3"] = r["final_val_loss"] / base if base else None
    oj = r["outer_jumps"]
    j = f"{oj['kept']}/{oj['applied']}" if oj else ""
    print(f"{r['row']:24s} {r['final_val_loss']:9.4f} {r['vs_d2z_4e-3'] or 0:11.4f} {j:>18s}")
tmp = "bench/results/outer_components.json.tmp"
json.dump(out, open(tmp, "w"), indent=1)
import os; os.replace(tmp, "bench/results/outer_components.json")
PY
