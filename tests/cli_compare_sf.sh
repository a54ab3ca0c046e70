#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_compare_sf.sh — `hpt compare --arms baseline,schedule-free` on a tiny
# model (6 runs of 60 steps; no timing is judged):
#   - the schedule-free arm sweeps --lrs on the first seed like the
#     baseline and is tuned to its sweep's lowest final val; its runs train
#     with --optimizer schedule-free and no --min-lr; results.json gives it
#     schedule "constant", results.md a row in the sweep, arms and budget tables
#   - speedup_steps_to_target for every arm: the baseline's updates to its
#     own final val over the arm's, interpolated between evaluations as the
#     time version, recomputed here from the runs' metrics.jsonl; the
#     baseline's is exactly 1
#   - --arms schedule-free with a passed-through --schedule: exit 2
#   - --arms baseline,schedule-free,hybrid-sf (one seed): the hybrid-sf run
#     trains --mode hybrid --optimizer schedule-free at schedule-free's tuned
#     LR and takes outer jumps; hybrid-sf without schedule-free: exit 2
test_name=cli_compare_sf; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 60 --warmup-iters 5 --eval-iters 2 --threads 1"
OUT="$tmp/cmp"
run "$HPT" compare $CFG --arms baseline,schedule-free --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 2 --out "$OUT"
if [ $rc -eq 0 ] && grep -q "compare: 6 runs" "$tmp/err"; then pass "compare: exit 0 (baseline, schedule-free; 2 LRs, 2 seeds: 6 runs)"
else fail "compare: status $rc, $(grep -o 'compare: [0-9]* runs' "$tmp/err")"; fi

python3 - "$OUT" >"$tmp/check" 2>&1 <<'EOF'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
errs = []
arms = r["arms"]
if sorted(arms) != ["baseline", "schedule-free"]: errs.append("arms: %r" % sorted(arms))
sweep = [s for s in r["sweep"] if s["arm"] == "schedule-free"]
best = min(sweep, key=lambda s: s["final_val_loss"]) if sweep else None
if len(sweep) != 2 or r["tuned_lr"]["schedule-free"] != best["lr"] or arms["schedule-free"]["lr"] != best["lr"]:
    errs.append("schedule-free: tuned lr %r, sweep %r" % (r["tuned_lr"].get("schedule-free"), sweep))
if arms["schedule-free"]["schedule"] != "constant" or r["tuned_schedule"]["schedule-free"] != "constant":
    errs.append("schedule-free's schedule: %r" % arms["schedule-free"]["schedule"])
lr = arms["schedule-free"]["lr"]
for s in r["seeds"]:
    rd = "%s/runs/schedule-free-lr%g-s%d" % (d, lr, s)
    args = open(rd + "/compare-args.txt").read()
    sm = json.load(open(rd + "/summary.json"))
    if "--optimizer schedule-free" not in args or "--min-lr" in args or sm.get("optimizer") != "schedule-free":
        errs.append("seed %d: args %r, summary optimizer %r" % (s, args[:200], sm.get("optimizer")))

def curve(run):
    xs, vs = [], []
    for l in open(run + "/metrics.jsonl"):
        o = json.loads(l)
        if o.get("val_loss") is not None: xs.append(o["step"]); vs.append(o["val_loss"])
    return xs, vs

def updates_to(run, target):
    xs, vs = curve(run)
    for i, v in enumerate(vs):
        if v <= target:
            if i == 0: return xs[0]
            f = (vs[i - 1] - target) / (vs[i - 1] - v) if vs[i - 1] > v else 1.0
            return xs[i - 1] + f * (xs[i] - xs[i - 1])
    return None

for i, s in enumerate(r["seeds"]):
    base = "%s/runs/baseline-lr%g-s%d" % (d, arms["baseline"]["lr"], s)
    target = json.load(open(base + "/summary.json"))["final_val_loss"]
    for a in arms:
        got = arms[a]["speedup_steps_to_target"]["per_seed"][i]
        u = updates_to("%s/runs/%s-lr%g-s%d" % (d, a, arms[a]["lr"], s), target)
        want = updates_to(base, target) / u if u else None
        if (want is None) != (got is None) or (want is not None and abs(got - want) > 1e-5 * want):
            errs.append("%s seed %d: speedup_steps_to_target %r, recomputed %r" % (a, s, got, want))
if arms["baseline"]["speedup_steps_to_target"]["per_seed"] != [1, 1]:
    errs.append("baseline speedup_steps_to_target %r" % arms["baseline"]["speedup_steps_to_target"]["per_seed"])
md = open(d + "/results.md").read()
if md.count("| schedule-free ") != 3: errs.append("results.md: %d schedule-free rows, want 3 (sweep, arms, budgets)" % md.count("| schedule-free "))
if "speedup in updates" not in md: errs.append("results.md has no 'speedup in updates' column")
print("\n".join(errs) if errs else "fine")
EOF
if [ "$(cat "$tmp/check")" = fine ]; then
    pass "schedule-free tuned on its own sweep, trained schedule-free; speedup_steps_to_target recomputed; results.md rows"
else fail "results: $(cat "$tmp/check")"; fi

run "$HPT" compare $CFG --arms baseline,schedule-free,hybrid-sf --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 1 \
    --warmup-steps 10 --outer-interval 10 --outer-check 4 --out "$tmp/hsf"
if [ $rc -eq 0 ] && python3 - "$tmp/hsf" <<'EOF'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
a = r["arms"]["hybrid-sf"]
assert a["lr"] == r["tuned_lr"]["schedule-free"] and a["schedule"] == "constant", a
rd = "%s/runs/hybrid-sf-lr%g-s%d" % (d, a["lr"], r["seeds"][0])
args = open(rd + "/compare-args.txt").read()
s = json.load(open(rd + "/summary.json"))
assert "--mode hybrid" in args and "--optimizer schedule-free" in args and "--min-lr" not in args, args
assert s["optimizer"] == "schedule-free" and s["outer_jumps"]["applied"] >= 1, s.get("outer_jumps")
EOF
then pass "--arms ...,hybrid-sf: the hybrid on schedule-free at its tuned LR, outer jumps applied"
else fail "--arms ...,hybrid-sf: status $rc"; fi
run "$HPT" compare $CFG --arms baseline,hybrid-sf --out "$tmp/y"
if [ $rc -eq 2 ] && grep -q "hybrid-sf needs schedule-free" "$tmp/err"; then pass "--arms hybrid-sf alone: exit 2"
else fail "--arms hybrid-sf without schedule-free: status $rc (want 2)"; fi

run "$HPT" compare $CFG --arms baseline,schedule-free --schedule linear --out "$tmp/x"
if [ $rc -eq 2 ] && grep -q "schedule-free" "$tmp/err"; then pass "--arms schedule-free with --schedule: exit 2, '$(head -c 100 "$tmp/err")'"
else fail "--arms schedule-free with --schedule: status $rc (want 2)"; fi

finish
