#!/bin/sh
# cli_compare_muon.sh — `hpt compare --arms baseline,muon` on a tiny model
# (no timing is judged):
#   - the muon arm sweeps --lrs on the first seed like the baseline (under
#     each --schedules schedule) and is tuned to its sweep's lowest final
#     val; its runs train with --optimizer muon --muon-scale rms and
#     --adam-lr at the same rate (summary.json: optimizer muon);
#     results.json gives it its own tuned lr and schedule, results.md its
#     rows in the sweep table
#   - hybrid-muon trains --mode hybrid --predictor outer on Muon (RMS
#     matching) at the muon arm's tuned LR and schedule, every seed;
#     muon-ns3 trains Muon with --muon-ns-steps 3 there too
#   - muon-spectral sweeps --lrs x 4 under each schedule with --muon-scale
#     spectral and --adam-lr the tuned baseline's rate; its sweep starts
#     once the baseline's has finished (one run at a time: its runs are
#     the 5th to 8th, ahead of muon's sweep); results.json records its
#     adam_lr and lrs_scale, results.md says so; every arm's tuned rate is
#     its sweep's lowest final val
#   - --arms muon with --device guard, hybrid-muon or muon-ns3 without
#     muon: exit 2
#     before anything is written
test_name=cli_compare_muon; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 40 --warmup-iters 5 --eval-iters 2 --threads 1"
OUT="$tmp/cmp"
run "$HPT" compare $CFG --arms baseline,muon,hybrid-muon,muon-ns3,muon-spectral --extend-sweep 0 --lrs 3e-3,1e-2 \
    --schedules d2z,wsd --seeds 1 --outer-interval 10 --warmup-steps 10 --out "$OUT"
if [ $rc -eq 0 ] && grep -q "compare: 14 runs" "$tmp/err"; then
    pass "compare: exit 0 (baseline, muon, muon-spectral: 2 LRs x 2 schedules; hybrid-muon, muon-ns3: 14 runs)"
else fail "compare: status $rc: $(grep -m1 'compare: .* runs' "$tmp/err"; tail -n 3 "$tmp/err")"; fi
if python3 - "$OUT" <<'EOF'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
errs = []
sweep = [s for s in r["sweep"] if s["arm"] == "muon"]
if len(sweep) != 4 or sorted(set(s["schedule"] for s in sweep)) != ["d2z", "wsd"]:
    errs.append("muon's sweep: %r" % sweep)
best = min(sweep, key=lambda s: s["final_val_loss"]) if sweep else {}
if r["tuned_lr"].get("muon") != best.get("lr") or r["tuned_schedule"].get("muon") != best.get("schedule"):
    errs.append("muon tuned %r %r, best %r" % (r["tuned_lr"].get("muon"), r["tuned_schedule"].get("muon"), best))
def sweep_runs(arm, runs, want):
    """each sweep run of arm trained Muon at its rate with the flags want(run) gives"""
    for s in runs:
        rd = "%s/runs/%s-%s-lr%g-s%d" % (d, arm, s["schedule"], s["lr"], r["seeds"][0])
        try:
            args = open(rd + "/compare-args.txt").read()
            sm = json.load(open(rd + "/summary.json"))
        except OSError as e:
            errs.append("%s: %s" % (rd, e)); continue
        if want(s) not in args or "--lr %g" % s["lr"] not in args or sm.get("optimizer") != "muon":
            errs.append("%s: args %r, want %r, optimizer %r" % (rd, args, want(s), sm.get("optimizer")))
sweep_runs("muon", sweep, lambda s: "--optimizer muon --muon-scale rms --adam-lr %g" % s["lr"])
base = [s for s in r["sweep"] if s["arm"] == "baseline"]
if len(base) != 4: errs.append("baseline's sweep: %d runs" % len(base))
hm = "%s/runs/hybrid-muon-%s-lr%g-s%d" % (d, r["tuned_schedule"].get("muon"), r["tuned_lr"].get("muon"), r["seeds"][0])
try:
    args = open(hm + "/compare-args.txt").read()
    sm = json.load(open(hm + "/summary.json"))
    if ("--mode hybrid" not in args or "--predictor outer" not in args or "--outer-interval 10" not in args
            or "--optimizer muon --muon-scale rms" not in args or sm.get("optimizer") != "muon"
            or sm.get("outer_jumps", {}).get("applied", 0) < 1):
        errs.append("%s: args %r, optimizer %r, jumps %r" % (hm, args, sm.get("optimizer"), sm.get("outer_jumps")))
except OSError as e:
    errs.append("hybrid-muon's run at muon's tuned LR and schedule: %s" % e)
n3 = "%s/runs/muon-ns3-%s-lr%g-s%d" % (d, r["tuned_schedule"].get("muon"), r["tuned_lr"].get("muon"), r["seeds"][0])
try:
    args = open(n3 + "/compare-args.txt").read()
    sm = json.load(open(n3 + "/summary.json"))
    if ("--muon-ns-steps 3" not in args or "--optimizer muon --muon-scale rms" not in args or "--mode hybrid" in args
            or sm.get("optimizer") != "muon" or r["arms"].get("muon-ns3", {}).get("lr") != r["tuned_lr"].get("muon")):
        errs.append("%s: args %r, optimizer %r" % (n3, args, sm.get("optimizer")))
except OSError as e:
    errs.append("muon-ns3's run at muon's tuned LR and schedule: %s" % e)
sp = [s for s in r["sweep"] if s["arm"] == "muon-spectral"]
if sorted(set(round(s["lr"], 9) for s in sp)) != [1.2e-2, 4e-2] or len(sp) != 4:
    errs.append("muon-spectral's sweep: %r, want --lrs x 4 x 2 schedules" % sp)
for a in ("baseline", "muon", "muon-spectral"):
    sw = [s for s in r["sweep"] if s["arm"] == a]
    best = min(sw, key=lambda s: s["final_val_loss"]) if sw else {}
    if r["tuned_lr"].get(a) != best.get("lr") or r["arms"].get(a, {}).get("lr") != best.get("lr"):
        errs.append("%s: tuned %r, its sweep's best %r" % (a, r["tuned_lr"].get(a), best.get("lr")))
adam = r["tuned_lr"]["baseline"]
sweep_runs("muon-spectral", sp, lambda s: "--optimizer muon --muon-scale spectral --adam-lr %g" % adam)
if r["arms"].get("muon-spectral", {}).get("adam_lr") != adam or r["sweep_extension"]["muon-spectral"].get("lrs_scale") != 4:
    errs.append("results.json: muon-spectral %r, extension %r" % (r["arms"].get("muon-spectral"), r["sweep_extension"]["muon-spectral"]))
md = open(d + "/results.md").read()
if md.count("| muon ") < 2: errs.append("results.md: %d muon rows" % md.count("| muon "))
if "- muon-spectral: its swept rates are Muon's (--muon-scale spectral); AdamW's" not in md or md.count("| muon-spectral ") < 2:
    errs.append("results.md: no muon-spectral note or rows")
print("     muon tuned lr %s, schedule %s; baseline %s, %s" % (r["tuned_lr"].get("muon"), r["tuned_schedule"].get("muon"),
      r["tuned_lr"]["baseline"], r["tuned_schedule"]["baseline"]))
if errs: print("\n".join(errs)); sys.exit(1)
EOF
then pass "muon tuned on its own sweep (LRs x schedules), trained muon with RMS matching; muon-spectral on --lrs x 4 at the baseline's AdamW rate; results.md rows"
else fail "muon's sweep, tuning or runs"; fi
# one run at a time: the baseline's 4 sweep runs, then muon-spectral's 4
# (queued ahead once the baseline is tuned), then muon's
order=$(grep '^\[' "$tmp/err" | sed -n 1,8p | sed 's/^\[[0-9]*\/[0-9]*\] \([a-z-]*\)\/.*/\1/' | tr '\n' ' ')
if [ "$order" = "baseline baseline baseline baseline muon-spectral muon-spectral muon-spectral muon-spectral " ]; then
    pass "muon-spectral's sweep trains once the baseline is tuned, ahead of muon's"
else fail "the first 8 runs: $order"; fi

run "$HPT" compare $CFG --arms baseline,muon --device guard --out "$tmp/g"
if [ $rc -eq 2 ] && grep -q -- "--device cpu only" "$tmp/err" && [ ! -e "$tmp/g" ]; then
    pass "--arms muon --device guard: exit 2, nothing written"
else fail "--arms muon --device guard: status $rc (want 2): $(head -c 200 "$tmp/err")"; fi

run "$HPT" compare $CFG --arms baseline,hybrid-muon --out "$tmp/h"
if [ $rc -eq 2 ] && grep -q -- "hybrid-muon needs muon" "$tmp/err" && [ ! -e "$tmp/h" ]; then
    pass "--arms hybrid-muon without muon: exit 2, nothing written"
else fail "--arms hybrid-muon alone: status $rc (want 2): $(head -c 200 "$tmp/err")"; fi
run "$HPT" compare $CFG --arms baseline,muon-ns3 --out "$tmp/n"
if [ $rc -eq 2 ] && grep -q -- "muon-ns3 needs muon" "$tmp/err" && [ ! -e "$tmp/n" ]; then
    pass "--arms muon-ns3 without muon: exit 2, nothing written"
else fail "--arms muon-ns3 alone: status $rc (want 2): $(head -c 200 "$tmp/err")"; fi

finish
