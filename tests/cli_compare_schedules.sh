#!/bin/sh
# cli_compare_schedules.sh — `hpt compare --schedules` on a tiny
# model, mechanism only (no timing is judged):
#   - the baseline and the hybrid sweep schedules x --lrs on the first seed,
#     one run directory per arm, schedule, LR; each run got the schedule's
#     flags (summary.json: cosine to lr x --min-lr-ratio, d2z = linear to 0,
#     wsd = 1 - sqrt over the last 0.2 to 0)
#   - the tuned (schedule, LR) is the sweep's lowest final val, per arm;
#     results.json has schedules, baseline_schedule, tuned_schedule, each
#     arm's schedule, and the other seeds ran at the tuned pair (the controls
#     at their lender's)
#   - results.md's sweep has a row per arm and schedule; --report renders it
#   - the same command again reuses every run
#   - usage errors exit 2: an unknown or repeated schedule, --schedules with
#     --schedule (or --decay-frac, --cooldown)
test_name=cli_compare_schedules; . tests/lib.sh

words_text 99 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 40 --warmup-iters 5 --eval-iters 2 --threads 1 --warmup-steps 10 --full-steps 5"
OUT="$tmp/cmp"
run "$HPT" compare $CFG --schedules cosine,d2z,wsd --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 2 --arms baseline,hybrid,ema \
    --min-lr-ratio 0.1 --out "$OUT"
if [ $rc -eq 0 ]; then pass "compare --schedules cosine,d2z,wsd: exit 0"
else fail "compare --schedules: status $rc"; fi
cp "$tmp/out" "$tmp/md1"

python3 - "$OUT" >"$tmp/check" 2>&1 <<'EOF'
import json, os, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
errs = []
def summary(arm, sched, lr, seed):
    return json.load(open("%s/runs/%s-%s-lr%g-s%d/summary.json" % (d, arm, sched, lr, seed)))
if r.get("schedules") != ["cosine", "d2z", "wsd"]:
    errs.append("schedules %r" % r.get("schedules"))
want = {"cosine": ("cosine", None), "d2z": ("linear", None), "wsd": ("wsd", ("0.2", "sqrt"))}
for a in ("baseline", "hybrid"):
    sweep = [s for s in r["sweep"] if s["arm"] == a]
    if sorted((s["schedule"], s["lr"]) for s in sweep) != sorted((k, lr) for k in want for lr in (3e-3, 1e-2)):
        errs.append("%s sweep: %r" % (a, [(s["schedule"], s["lr"]) for s in sweep]))
        continue
    best = min(sweep, key=lambda s: s["final_val_loss"])
    if r["tuned_lr"][a] != best["lr"] or r["tuned_schedule"][a] != best["schedule"] or \
            r["arms"][a]["schedule"] != best["schedule"]:
        errs.append("%s tuned %r %r, sweep best %r" % (a, r["tuned_lr"][a], r["tuned_schedule"][a], best))
    for s in sweep:
        sm = summary(a, s["schedule"], s["lr"], r["seeds"][0])
        name, wsd = want[s["schedule"]]
        if sm.get("schedule") != name or abs(sm["final_val_loss"] - s["final_val_loss"]) > 1e-5 * abs(s["final_val_loss"]):
            errs.append("%s %s: summary schedule %r" % (a, s["schedule"], sm.get("schedule")))
        if wsd and (str(sm.get("decay_frac")), sm.get("cooldown")) != wsd:
            errs.append("%s wsd: decay_frac %r cooldown %r" % (a, sm.get("decay_frac"), sm.get("cooldown")))
    # the decay's end: cosine to lr x 0.1, d2z and wsd to 0 (train.log's resolved-config line)
    for sched, end in (("cosine", 0.1), ("d2z", 0), ("wsd", 0)):
        log = open("%s/runs/%s-%s-lr%g-s%d/train.log" % (d, a, sched, 1e-2, r["seeds"][0])).read()
        if "lr 0.01 -> %g (" % (0.01 * end) not in log:
            errs.append("%s %s: decays to? %s" % (a, sched, [l for l in log.splitlines() if "lr 0.01" in l]))
if r.get("baseline_schedule") != r["tuned_schedule"]["baseline"]:
    errs.append("baseline_schedule %r" % r.get("baseline_schedule"))
if r["tuned_schedule"]["ema"] != r["tuned_schedule"]["baseline"] or r["arms"]["ema"]["lr"] != r["tuned_lr"]["baseline"]:
    errs.append("ema does not borrow the baseline's schedule and LR")
# the second seed ran each arm at its tuned pair
for a in ("baseline", "hybrid", "ema"):
    p = "%s/runs/%s-%s-lr%g-s%d/summary.json" % (d, a, r["tuned_schedule"][a], r["tuned_lr"][a], r["seeds"][1])
    if not os.path.exists(p):
        errs.append("%s: no run at its tuned pair on seed %d" % (a, r["seeds"][1]))
for a in ("baseline",):
    if r["arms"][a]["speedup_time_to_target"]["per_seed"] != [1, 1]:
        errs.append("baseline speedup %r" % r["arms"][a]["speedup_time_to_target"]["per_seed"])
print("\n".join(errs))
sys.exit(1 if errs else 0)
EOF
if [ $? -eq 0 ]; then pass "results.json: sweep over 3 schedules x 2 LRs per arm, tuned pair = lowest final val, runs' schedules as named"
else fail "results.json: $(cat "$tmp/check")"; fi

if grep -q "^| baseline wsd |" "$tmp/md1" && grep -q "^| hybrid d2z |" "$tmp/md1" && grep -q "baseline tuned to" "$tmp/md1"; then
    pass "results.md: a sweep row per arm and schedule, the baseline's schedule named"
else fail "results.md: $(grep '^| baseline' "$tmp/md1")"; fi
run "$HPT" compare --report "$OUT"
if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$OUT/results.md"; then pass "--report renders the same tables"
else fail "--report: status $rc"; fi

run "$HPT" compare $CFG --schedules cosine,d2z,wsd --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 2 --arms baseline,hybrid,ema \
    --min-lr-ratio 0.1 --out "$OUT"
n=$(grep -c "reused" "$tmp/err")
if [ $rc -eq 0 ] && [ "$n" -eq 16 ]; then pass "the same command again reuses all 16 runs"
else fail "rerun: status $rc, $n runs reused (want 16)"; fi

for args in "--schedules cosine,step" "--schedules wsd,wsd" "--schedules cosine --schedule wsd" \
            "--schedules d2z --decay-frac 0.3"; do
    run "$HPT" compare $CFG $args --out "$tmp/bad"
    if [ $rc -eq 2 ] && grep -q -- "--schedule" "$tmp/err"; then pass "$args: exit 2"
    else fail "$args: status $rc"; fi
done

finish
