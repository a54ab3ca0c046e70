#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_compare.sh — `hpt compare` end to end on a tiny model: every arm, an
# LR sweep of two values, two seeds. Checks what can fail:
#   - exit 0; results.json parses, has the headline fields as
#     {median, min, max, per_seed}; results.md has a row per arm; both plots
#     exist as SVG (parses as XML) and PNG (signature)
#   - the tuned LR is the sweep's lowest final val (--extend-sweep 0: the
#     two rates as given; cli_compare_extend.sh tests the extension); the baseline's own
#     speedup is exactly 1 on every seed (it defines the target)
#   - the ema arm's final val is the averaged weights' (summary
#     final_ema_val_loss), the baseline's is final_val_loss
#   - hybrid-only flags go to the hybrid arms only (a baseline given
#     --warmup-steps would exit 2)
#   - the same command again reuses every run and writes the same results,
#     replacing results.json and results.md atomically (a new file renamed
#     over the old, never rewritten in place)
#   - hpt compare --report DIR prints the tables of results.md again
#   - a path holding '"' (in --data and --out) still gives valid results.json
#   - a finished run is redone, not reused, when its data file's content
#     changed, even at the same size and mtime
#   - usage errors exit 2: a flag compare owns, an unknown arm, no baseline,
#     a bad --lrs; a failing run exits 1 naming its log
test_name=cli_compare; . tests/lib.sh

words_text 777 >"$tmp/data.txt"

CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 60 --warmup-iters 5 --eval-iters 2 --threads 1 --warmup-steps 10 --full-steps 5"
OUT="$tmp/cmp"
run "$HPT" compare $CFG --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 2 --out "$OUT"
if [ $rc -eq 0 ]; then pass "compare: exit 0 (every arm, 2 LRs, 2 seeds)"
else fail "compare: status $rc"; fi

python3 - "$OUT" >"$tmp/check" 2>&1 <<'EOF'
import json, sys, xml.dom.minidom
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
errs = []
for k in ("speedup_time_to_target", "final_val_ratio"):
    v = r.get(k, {})
    if not all(x in v for x in ("median", "min", "max", "per_seed")) or len(v["per_seed"]) != 2:
        errs.append("headline %s malformed: %r" % (k, v))
arms = r["arms"]
if sorted(arms) != sorted(["baseline", "hybrid", "stale-adam", "linear", "ema"]):
    errs.append("arms: %r" % sorted(arms))
for a in ("baseline", "hybrid"):
    sweep = [s for s in r["sweep"] if s["arm"] == a]
    best = min(sweep, key=lambda s: s["final_val_loss"])
    if len(sweep) != 2 or r["tuned_lr"][a] != best["lr"]:
        errs.append("%s: tuned lr %r, sweep %r" % (a, r["tuned_lr"][a], sweep))
# updates to the target: every arm, the baseline's own exactly 1
for a in arms:
    if len(arms[a].get("speedup_steps_to_target", {}).get("per_seed", [])) != 2:
        errs.append("%s: no speedup_steps_to_target per seed" % a)
if arms["baseline"]["speedup_steps_to_target"]["per_seed"] != [1, 1] or "speedup_steps_to_target" not in r:
    errs.append("baseline speedup_steps_to_target %r, want [1, 1], and a headline one" %
                arms["baseline"]["speedup_steps_to_target"]["per_seed"])
if arms["baseline"]["speedup_time_to_target"]["per_seed"] != [1, 1]:
    errs.append("baseline speedup per seed %r, want [1, 1]" % arms["baseline"]["speedup_time_to_target"]["per_seed"])
for a, key in (("baseline", "final_val_loss"), ("ema", "final_ema_val_loss")):
    lr, got = arms[a]["lr"], arms[a]["final_val_loss"]["per_seed"]
    want = [json.load(open("%s/runs/%s-lr%g-s%d/summary.json" % (d, a, lr, s)))[key] for s in r["seeds"]]
    if any(abs(x - y) > 1e-5 * abs(y) for x, y in zip(got, want)):
        errs.append("%s final val %r, summaries say %r" % (a, got, want))
# the hybrid's costs come through from its summaries; the baseline has none
hs = json.load(open("%s/runs/hybrid-lr%g-s%d/summary.json" % (d, arms["hybrid"]["lr"], r["seeds"][0])))
if abs(arms["hybrid"]["controller_overhead_s"]["per_seed"][0] - hs["controller_overhead_s"]) > 1e-5 or \
        hs["controller_overhead_s"] <= 0 or arms["baseline"]["controller_overhead_s"]["per_seed"] != [0, 0]:
    errs.append("controller_overhead_s: hybrid %r (summary %r), baseline %r" % (
        arms["hybrid"]["controller_overhead_s"], hs["controller_overhead_s"], arms["baseline"]["controller_overhead_s"]))
if not r.get("cpu"): errs.append("results.json names no cpu")
# with Predict never reached here, every hybrid-family run measures the noise
tn = r.get("timing_noise_pct", {})
if tn.get("runs") != 6 or not 0 <= tn["median"] <= tn["max"]:
    errs.append("timing_noise_pct %r, want 6 runs" % tn)
md = open(d + "/results.md").read()
for a in arms:
    if "| %s " % a not in md: errs.append("results.md has no row for " + a)
if "Timing noise: 6 hybrid-arm runs" not in md: errs.append("results.md has no timing-noise line")
for p in ("val_vs_time", "val_vs_step"):
    xml.dom.minidom.parse("%s/%s.svg" % (d, p))
    if open("%s/%s.png" % (d, p), "rb").read(8) != b"\x89PNG\r\n\x1a\n": errs.append(p + ".png is not a PNG")
print("\n".join(errs) if errs else "fine")
EOF
if [ "$(cat "$tmp/check")" = fine ]; then
    pass "results.json (headline, tuned LR = sweep minimum, baseline speedup 1), results.md, SVG and PNG plots"
else fail "results: $(cat "$tmp/check")"; fi
if grep -q "| hybrid (outer) |" "$tmp/out"; then pass "the table is printed"; else fail "no table on stdout"; fi

cp "$OUT/results.json" "$tmp/r1.json"
inodes() { ls -i "$OUT/results.json" "$OUT/results.md" | awk '{print $1}' | tr '\n' ' '; }
before=$(inodes)
run "$HPT" compare $CFG --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 2 --out "$OUT"
n=$(grep -c "reused" "$tmp/err")
if [ $rc -eq 0 ] && [ "$n" -eq 12 ] && cmp -s "$OUT/results.json" "$tmp/r1.json"; then
    pass "the same command again: all 12 runs reused, identical results.json"
else fail "rerun: status $rc, $n runs reused (want 12), results.json $(cmp -s "$OUT/results.json" "$tmp/r1.json" && echo same || echo differs)"; fi
after=$(inodes)
set -- $before; b1=$1 b2=$2; set -- $after
if [ "$1" != "$b1" ] && [ "$2" != "$b2" ]; then pass "results.json and results.md replaced atomically (new inodes)"
else fail "results.json/results.md rewritten in place (inodes $before -> $after)"; fi

run "$HPT" compare --report "$OUT"
if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$OUT/results.md"; then pass "compare --report DIR prints results.md from results.json"
else fail "--report: status $rc, $(cmp "$tmp/out" "$OUT/results.md" 2>&1)"; fi

# one small run for the atomic outputs and the data check above
SMALL="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 20 --warmup-iters 2 \
       --eval-iters 1 --threads 1 --arms baseline --seeds 1"
q="$tmp/da\"ta"
mkdir -p "$q"
words_text 778 >"$q/data.txt"
run "$HPT" compare $SMALL --data "$q/data.txt" --out "$tmp/out\"q"
if [ $rc -eq 0 ] && python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert sys.argv[2] in r["train_flags"]' \
        "$tmp/out\"q/results.json" "$q/data.txt" 2>"$tmp/err"; then
    pass "a '\"' in --data and --out: results.json is valid JSON holding the path"
else fail "quote in path: status $rc, results.json: $(cat "$tmp/err" | tail -1)"; fi

# the same size and mtime, other content: only the CRC tells
D="$tmp/d.txt"
words_text 779 >"$D"
run "$HPT" compare $SMALL --data "$D" --out "$tmp/dc"
cp -p "$D" "$tmp/d.orig"
tr 'a-y' 'b-z' <"$tmp/d.orig" >"$D"
touch -r "$tmp/d.orig" "$D"
run "$HPT" compare $SMALL --data "$D" --out "$tmp/dc"
if [ $rc -eq 0 ] && ! grep -q reused "$tmp/err" && [ "$(wc -c <"$D")" = "$(wc -c <"$tmp/d.orig")" ]; then
    pass "data content changed (same size and mtime): the run is redone, not reused"
else fail "changed data: status $rc, $(grep -c reused "$tmp/err") runs reused (want 0)"; fi
run "$HPT" compare $SMALL --data "$D" --out "$tmp/dc"
if [ $rc -eq 0 ] && grep -q reused "$tmp/err"; then pass "unchanged data: the run is reused"
else fail "unchanged data: status $rc, not reused"; fi

run "$HPT" compare $CFG --lr 1e-3 --out "$tmp/x"
if [ $rc -eq 2 ] && grep -q -- "--lr is set by hpt compare" "$tmp/err"; then pass "--lr refused (compare owns it): exit 2"
else fail "--lr: status $rc (want 2)"; fi
run "$HPT" compare $CFG --arms baseline,magic --out "$tmp/x"
if [ $rc -eq 2 ] && grep -q "magic" "$tmp/err"; then pass "unknown arm: exit 2 naming it"; else fail "unknown arm: status $rc"; fi
run "$HPT" compare $CFG --arms hybrid --out "$tmp/x"
if [ $rc -eq 2 ] && grep -q "baseline" "$tmp/err"; then pass "arms without baseline: exit 2"; else fail "no baseline: status $rc"; fi
run "$HPT" compare $CFG --lrs 1e-3,abc --out "$tmp/x"
if [ $rc -eq 2 ]; then pass "--lrs 1e-3,abc: exit 2"; else fail "--lrs abc: status $rc"; fi
run "$HPT" compare --data "$tmp/missing.txt" --max-iters 5 --arms baseline --seeds 1 --out "$tmp/y"
if [ $rc -eq 1 ] && grep -q "train.log" "$tmp/err" && grep -q "missing.txt" "$tmp/err"; then
    pass "a failing run: exit 1, names its log and shows the error"
else fail "failing run: status $rc"; fi

finish
