#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_compare_snoo.sh — hpt compare's arms at the outer step's published
# settings: outer-snoo (SNOO's outer lr 0.68, momentum 0.37,
# every 28 steps) and outer-124m (0.7, 0.5, every 30) train as the hybrid
# with --predictor outer and those flags after the passed-through hybrid
# flags, at the tuned baseline's LR and schedule, take outer jumps, and get
# their rows in results.json and results.md.
test_name=cli_compare_snoo; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 70 --warmup-iters 5 --eval-iters 2 --threads 1"
run "$HPT" compare $CFG --arms baseline,outer-snoo,outer-124m --extend-sweep 0 --lrs 3e-3,1e-2 --seeds 1 \
    --warmup-steps 10 --outer-lr 3 --out "$tmp/c"
if [ $rc -eq 0 ] && python3 - "$tmp/c" > "$tmp/check" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
for arm, flags in (("outer-snoo", "--outer-lr 0.68 --outer-momentum 0.37 --outer-interval 28"),
                   ("outer-124m", "--outer-lr 0.7 --outer-momentum 0.5 --outer-interval 30")):
    a = r["arms"][arm]
    assert a["lr"] == r["tuned_lr"]["baseline"], (arm, a["lr"])
    rd = "%s/runs/%s-lr%g-s%d" % (d, arm, a["lr"], r["seeds"][0])
    args = open(rd + "/compare-args.txt").read()
    s = json.load(open(rd + "/summary.json"))
    # the arm's settings come after the passed-through --outer-lr 3: they win
    assert "--mode hybrid" in args and "--predictor outer" in args and args.index("--outer-lr 3") < args.index(flags), args
    assert s["outer_jumps"]["applied"] >= 1, s.get("outer_jumps")
md = open(d + "/results.md").read()
assert "| outer-snoo" in md and "| outer-124m" in md, md
PY
then pass "--arms baseline,outer-snoo,outer-124m: the published settings at the baseline's tuned LR, jumps applied, rows in results"
else fail "outer-snoo/outer-124m arms: status $rc, $(cat "$tmp/check")"; fi
run "$HPT" compare $CFG --arms baseline,outer-snow --out "$tmp/y"
if [ $rc -eq 2 ] && grep -q "unknown arm 'outer-snow'.*outer-snoo, outer-124m" "$tmp/err"; then pass "an unknown arm names the table"
else fail "unknown arm: status $rc"; fi
finish
