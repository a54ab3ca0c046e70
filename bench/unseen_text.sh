#!/bin/sh
# unseen_text.sh — a check on text the hybrid was not tuned on: the
# outer-momentum hybrid (its defaults, chosen on tinyshakespeare) against the
# tuned baseline on the fortunes corpus (data/fortunes.txt, `make` builds it
# from Debian's fortunes packages), nanoGPT's CPU config (L4 H4 C128, block
# 64, batch 12, 2000 steps).
#
#   sh bench/unseen_text.sh          (~40 min: 2 runs side by side, 1 thread each)
#
# A quality probe, not a timing: the runs use 1 thread, two at a time
# (JOBS, default 2), and may share the machine, so only the figures counted in optimizer updates are kept
# (final val, steps to the target, the budget-to-target speedup in updates);
# the training-clock figures of the comparison are dropped. Protocol, reduced
# from bench/compare.sh's tuned-* workloads: schedules cosine (to 10%), d2z,
# wsd x lrs 1.5e-3, 3e-3, 6e-3 tuned on the first seed (3e-3 was the
# best of 3e-3 and 6e-3 for both arms in a first run: 1.5e-3 brackets it) for each arm; arms baseline
# and hybrid; 3 seeds; budgets 0.9, 0.8 and 1 of the steps. Finished runs in
# runs/unseen-fortunes/ are reused when the script runs again.
# Writes bench/results/unseen_text.json.
set -eu
cd "$(dirname "$0")/.."
make -j2 hpt data/fortunes.txt >/dev/null
out=runs/unseen-fortunes
cmd="./hpt compare --data data/fortunes.txt --eval-iters 20 --lrs 1.5e-3,3e-3,6e-3 --seeds 3 --schedules cosine,d2z,wsd
     --arms baseline,hybrid --budgets 0.9,0.8 --threads 1 --jobs ${JOBS:-2} --out $out"
echo "== $cmd" >&2
$cmd >&2
python3 - "$out/results.json" "$cmd" >bench/results/unseen_text.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
keep = ("final_val_loss", "final_val_ratio", "speedup_steps_to_target", "updates_to_target",
        "speedup_budget_steps_to_target", "budget_final_val", "budget_updates", "outer_jumps_kept")
arms = {}
for name, a in r["arms"].items():
    arms[name] = {"lr": a.get("lr"), "schedule": a.get("schedule")}
    arms[name].update({k: a[k] for k in keep if k in a})
json.dump({"command": " ".join(sys.argv[2].split()), "corpus": "data/fortunes.txt (scripts/fortunes-corpus.sh)",
           "note": "quality probe at 1 thread on a possibly shared machine: step-based figures only",
           "baseline_schedule": r.get("baseline_schedule"), "seeds": r.get("seeds"),
           "budgets": r.get("budgets"), "arms": arms}, sys.stdout, indent=1)
print()
EOF
python3 - bench/results/unseen_text.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for name, a in r["arms"].items():
    f = lambda k: a.get(k, {}).get("median") if isinstance(a.get(k), dict) else None
    print(f"{name:10s} {a['schedule']} lr {a['lr']}: final val {f('final_val_loss')}, ratio {f('final_val_ratio')}, "
          f"steps-to-target {f('speedup_steps_to_target')}, budget steps-to-target {f('speedup_budget_steps_to_target')}")
EOF
