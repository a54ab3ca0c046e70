#!/bin/sh
# cli_compare_budgets.sh — `hpt compare --budgets`, the
# hybrid-ema arm and --predictor outer's pass-through, on a tiny model
# (no timing is judged):
#   - --budgets 1,0.5 --arms baseline,hybrid,hybrid-ema, 2 seeds: 12 runs
#     planned and run; each budget run lives in <arm>-lr<lr>-s<seed>-b0.5
#     and trained round(0.5 x 60) = 30 steps (--max-iters 30 in its
#     arguments, steps 30 in its summary)
#   - results.json: budgets [0.5, 1]; per arm budget_final_val per fraction
#     (the runs' summaries: the averaged weights' for hybrid-ema);
#     speedup_budget_to_target, speedup_budget_steps_to_target and
#     budget_f_star recomputed here from the summaries (final val, train_s
#     and updates linear in log f between the budgets around the crossing);
#     the baseline's own: f* 1, speedup 1, not a lower bound, 2 of 2 reached
#   - hybrid-ema: the hybrid's run (--mode hybrid, its predictor, its tuned
#     LR) with --ema, measured at the average (final_ema_val_loss)
#   - results.md has the budget table with its definition; a seed flagged
#     as a lower bound renders as ">=" (a hand-edited results.json through
#     --report); the same command again reuses all 12 runs; without
#     --budgets, or with --budgets 1 alone, the 6 full runs are reused and
#     no budget field is written
#   - a task trained by --epochs (fashion-mnist MLP, when installed): the
#     budget run gets --max-iters from the full run's steps instead of
#     --epochs, and --eval-interval one epoch
#   - --predictor outer --outer-momentum 0.5: both reach the hybrid run,
#     not the baseline; the hybrid's summary has outer_jumps
#   - bad --budgets (0, 1.5, a duplicate, not a number, empty): exit 2
test_name=cli_compare_budgets; . tests/lib.sh

words_text 4343 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 60 --warmup-iters 5 --eval-iters 2 --threads 1 --warmup-steps 10 --full-steps 5"
OUT="$tmp/cmp"
ARGS="--lrs 1e-2 --seeds 2 --arms baseline,hybrid,hybrid-ema --out $OUT"
run "$HPT" compare $CFG $ARGS --budgets 1,0.5
if [ $rc -eq 0 ] && grep -q "compare: 12 runs" "$tmp/err" && grep -q "^\[12/12\] hybrid-ema@0.5 " "$tmp/err"; then
    pass "compare --budgets 1,0.5: exit 0, 12 runs planned and run (3 arms x 2 seeds x 2 budgets)"
else fail "compare --budgets: status $rc, $(grep -o 'compare: [0-9]* runs' "$tmp/err"), last $(grep '^\[' "$tmp/err" | tail -1)"; fi
cp "$tmp/out" "$tmp/stdout1"

python3 - "$OUT" >"$tmp/check" 2>&1 <<'EOF'
import json, math, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
errs = []
arms = r["arms"]
if r.get("budgets") != [0.5, 1]: errs.append("budgets %r, want [0.5, 1]" % r.get("budgets"))
if sorted(arms) != ["baseline", "hybrid", "hybrid-ema"]: errs.append("arms %r" % sorted(arms))

def summary(a, s, b=""):
    rd = "%s/runs/%s-lr%g-s%d%s" % (d, a, arms[a]["lr"], s, b)
    return rd, json.load(open(rd + "/summary.json")), open(rd + "/compare-args.txt").read()

def final(a, sm):
    return sm["final_ema_val_loss" if a == "hybrid-ema" else "final_val_loss"]

def near(x, y, rel=2e-5):
    return (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= rel * abs(y))

# the definition, independently: smallest f whose final val reaches the
# baseline's full final val, linear in log f between the budgets around it
def cross(fs, vs, ys, target):
    for i, v in enumerate(vs):
        if v <= target:
            if i == 0: return fs[0], ys[0], True
            w = (vs[i - 1] - target) / (vs[i - 1] - v)
            f = math.exp((1 - w) * math.log(fs[i - 1]) + w * math.log(fs[i]))
            return f, (1 - w) * ys[i - 1] + w * ys[i], False
    return None, None, None

for i, s in enumerate(r["seeds"]):
    _, bs, _ = summary("baseline", s)
    for a in arms:
        _, full, fargs = summary(a, s)
        rd, half, hargs = summary(a, s, "-b0.5")
        if "--max-iters 30 " not in hargs or "--max-iters 60" in hargs or half["steps"] != 30 or full["steps"] != 60:
            errs.append("%s seed %d: budget run args %r, steps %r (full %r)" % (a, s, hargs[:160], half["steps"], full["steps"]))
        bfv = arms[a]["budget_final_val"]
        if not near(bfv["0.5"]["per_seed"][i], final(a, half)) or not near(bfv["1"]["per_seed"][i], final(a, full)):
            errs.append("%s seed %d: budget_final_val %r / %r, summaries %r / %r" % (
                a, s, bfv["0.5"]["per_seed"][i], bfv["1"]["per_seed"][i], final(a, half), final(a, full)))
        vs = [final(a, half), final(a, full)]
        f, t, lb = cross([0.5, 1.0], vs, [half["train_s"], full["train_s"]], bs["final_val_loss"])
        _, u, _ = cross([0.5, 1.0], vs, [half["optimizer_updates"], full["optimizer_updates"]], bs["final_val_loss"])
        want = (f, bs["train_s"] / t if t else None, bs["optimizer_updates"] / u if u else None)
        got = (arms[a]["budget_f_star"]["per_seed"][i], arms[a]["speedup_budget_to_target"]["per_seed"][i],
               arms[a]["speedup_budget_steps_to_target"]["per_seed"][i])
        if not all(near(x, y) for x, y in zip(got, want)) or arms[a]["budget_lower_bound"][i] != lb:
            errs.append("%s seed %d: f*, speedup, in updates %r, lower bound %r; recomputed %r, %r" % (
                a, s, got, arms[a]["budget_lower_bound"][i], want, lb))
b = arms["baseline"]
if (b["budget_f_star"]["per_seed"], b["speedup_budget_to_target"]["per_seed"], b["speedup_budget_steps_to_target"]["per_seed"],
        b["budget_lower_bound"], b["budget_reached"]) != ([1, 1], [1, 1], [1, 1], [False, False], 2):
    errs.append("baseline: f* %r, speedup %r, in updates %r, lower bound %r, reached %r (want 1, 1, 1, false, 2)" % (
        b["budget_f_star"]["per_seed"], b["speedup_budget_to_target"]["per_seed"],
        b["speedup_budget_steps_to_target"]["per_seed"], b["budget_lower_bound"], b["budget_reached"]))
# hybrid-ema: the hybrid's run with --ema, at the hybrid's LR, measured at the average
he = arms["hybrid-ema"]
for i, s in enumerate(r["seeds"]):
    _, sm, args = summary("hybrid-ema", s)
    if not all(w in args for w in ("--mode hybrid", "--predictor outer", "--ema 0.99", "--warmup-steps 10")) or \
            not near(he["final_val_loss"]["per_seed"][i], sm["final_ema_val_loss"]):
        errs.append("hybrid-ema seed %d: args %r, final val %r, summary ema %r" % (
            s, args[:200], he["final_val_loss"]["per_seed"][i], sm.get("final_ema_val_loss")))
if he["lr"] != arms["hybrid"]["lr"] or r["tuned_lr"]["hybrid-ema"] != r["tuned_lr"]["hybrid"]:
    errs.append("hybrid-ema lr %r, hybrid's %r" % (he["lr"], arms["hybrid"]["lr"]))
if any(s.get("budget", 1) != 1 or s["arm"] == "hybrid-ema" for s in r["sweep"]) or len(r["sweep"]) != 2:
    errs.append("sweep %r: the two sweeping arms' full runs only" % r["sweep"])
md = open(d + "/results.md").read()
if "Budget sweep:" not in md or "smallest f whose final val reaches" not in md or "| f=0.5 | f=1 |" not in md:
    errs.append("results.md has no budget table with its definition")
if md.count("| hybrid-ema ") != 3 or "| hybrid-ema (outer) |" not in md:
    errs.append("results.md: hybrid-ema rows %d (want 3: arms, clock budgets, budget sweep)" % md.count("| hybrid-ema "))
if "| baseline | " not in md.split("Budget sweep:")[1] or "| 1.00x [1.00x, 1.00x] | 1.00x [1.00x, 1.00x] | 2/2 |" not in md:
    errs.append("results.md: the baseline's budget row is not 1.00x, 2/2")
print("\n".join(errs) if errs else "fine")
EOF
if [ "$(cat "$tmp/check")" = fine ]; then
    pass "results.json: budget_final_val per fraction, speedups and f* recomputed from the summaries, baseline's 1 at f* 1; hybrid-ema; results.md"
else fail "results: $(cat "$tmp/check")"; fi

# a lower bound renders as ">=" (the smallest budget already reached the target)
python3 - "$OUT" "$tmp/lb" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1] + "/results.json"))
a = r["arms"]["hybrid"]
a["budget_lower_bound"] = [True, False]
a["speedup_budget_to_target"].update(median=1.5, min=1.2, max=1.8, n=2, per_seed=[1.8, 1.2])
os.makedirs(sys.argv[2])
json.dump(r, open(sys.argv[2] + "/results.json", "w"))
EOF
run "$HPT" compare --report "$tmp/lb"
if [ $rc -eq 0 ] && grep -q "| >=1.50x \[1.20x, >=1.80x\] |" "$tmp/out"; then
    pass "a seed reached at the smallest budget: its bound shows as '>=' (median and max; min from the other seed)"
else fail "lower bound: status $rc, row: $(grep '^| hybrid |' "$tmp/out" | tail -1)"; fi

run "$HPT" compare $CFG $ARGS --budgets 0.5
n=$(grep -c "reused" "$tmp/err")
if [ $rc -eq 0 ] && [ "$n" -eq 12 ] && cmp -s "$tmp/out" "$tmp/stdout1"; then
    pass "the same comparison again (--budgets 0.5: 1 implied): all 12 runs reused, the same tables"
else fail "rerun: status $rc, $n reused (want 12)"; fi

# without --budgets, and with --budgets 1 alone (no budget run: no sweep)
for b in "" "--budgets 1"; do
    run "$HPT" compare $CFG $ARGS $b
    n=$(grep -c "reused" "$tmp/err")
    if [ $rc -eq 0 ] && [ "$n" -eq 6 ] && grep -q "compare: 6 runs" "$tmp/err" && ! grep -q "Budget sweep" "$tmp/out" &&
            ! grep -q '"budget' "$OUT/results.json" && ! grep -q "; budgets" "$tmp/err"; then
        pass "${b:-without --budgets}: 6 runs planned, the full runs reused, no budget field or table"
    else fail "${b:-without --budgets}: status $rc, $n reused (want 6), $(grep -c budget "$OUT/results.json") budget lines"; fi
done
# a results.json of an older --budgets 1 (budgets [1]) renders no budget table
mkdir -p "$tmp/b1"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["budgets"]=[1]; json.dump(r, open(sys.argv[2], "w"))' \
    "$OUT/results.json" "$tmp/b1/results.json"
run "$HPT" compare --report "$tmp/b1"
if [ $rc -eq 0 ] && grep -q "| baseline" "$tmp/out" && ! grep -q "Budget sweep" "$tmp/out"; then
    pass "--report of budgets [1]: no budget table"
else fail "--report of budgets [1]: status $rc, $(grep -c 'Budget sweep' "$tmp/out") budget tables"; fi

# a task trained by --epochs: the budget run's --max-iters from the full run's steps
FM=/usr/share/datasets/fashion-mnist
if [ -f "$FM/train-images-idx3-ubyte.gz" ]; then
    run "$HPT" compare --task fashion-mnist --model mlp --epochs 1 --batch-size 1024 --threads 1 --arms baseline \
        --seeds 1 --budgets 0.5 --out "$tmp/fm"
    args=$(cat "$tmp/fm/runs/baseline-lr0.001-s1337-b0.5/compare-args.txt" 2>/dev/null)
    steps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' \
            "$tmp/fm/runs/baseline-lr0.001-s1337-b0.5/summary.json" 2>/dev/null)
    case "$args" in
    *--epochs*) ok=0 ;;
    *"--max-iters 30 --eval-interval 59 "*) ok=1 ;;
    *) ok=0 ;;
    esac
    if [ $rc -eq 0 ] && [ $ok -eq 1 ] && [ "$steps" = 30 ]; then
        pass "--epochs 1 (59 steps): the 0.5 budget run trains --max-iters 30 (no --epochs), evaluating every 59"
    else fail "epochs: status $rc, steps $steps, args $(echo "$args" | head -c 200)"; fi
else echo "skip --epochs budget (no $FM)"; fi

# --predictor outer and its settings reach the hybrid run only
SMALL="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 30 \
       --warmup-iters 2 --eval-iters 1 --threads 1 --warmup-steps 5 --seeds 1"
run "$HPT" compare $SMALL --arms baseline,hybrid --predictor outer --outer-momentum 0.5 --outer-interval 5 --out "$tmp/o"
h="$tmp/o/runs/hybrid-lr0.001-s1337"
if [ $rc -eq 0 ] && grep -q -- "--outer-momentum 0.5 --outer-interval 5 --predictor outer " "$h/compare-args.txt" &&
        ! grep -q -- "outer" "$tmp/o/runs/baseline-lr0.001-s1337/compare-args.txt" &&
        python3 -c 'import json,sys; assert "outer_jumps" in json.load(open(sys.argv[1]))' "$h/summary.json" 2>/dev/null &&
        grep -q "hybrid (outer)" "$tmp/o/results.md"; then
    pass "--predictor outer --outer-momentum 0.5: passed to the hybrid run (its summary has outer_jumps), not the baseline"
else fail "--predictor outer: status $rc, hybrid args: $(head -c 300 "$h/compare-args.txt" 2>/dev/null)"; fi
# the jumps the outer arm kept reach results.json and results.md (its
# "predict steps" are 0: a jump moves no step)
if python3 - "$tmp/o" "$h" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1] + "/results.json"))
kept = json.load(open(sys.argv[2] + "/summary.json"))["outer_jumps"]["kept"]
a = r["arms"]
assert kept > 0, kept
assert a["hybrid"]["outer_jumps_kept"]["median"] == kept, (a["hybrid"]["outer_jumps_kept"], kept)
assert a["baseline"]["outer_jumps_kept"]["median"] == 0, a["baseline"]["outer_jumps_kept"]
md = open(sys.argv[1] + "/results.md").read()
assert "| outer jumps kept |" in md
EOF
then pass "outer jumps kept: results.json per arm (hybrid = its summary's, baseline 0) and a results.md column"
else fail "outer jumps kept missing or wrong in results.json/results.md"; fi
run "$HPT" compare $SMALL --predictor stale-adam --out "$tmp/x"
if [ $rc -eq 2 ] && grep -q "coast, shrink or outer" "$tmp/err"; then pass "--predictor stale-adam: exit 2 naming coast, shrink or outer"
else fail "--predictor stale-adam: status $rc"; fi

for bad in 0 1.5 -0.5 0.5,0.5 1,1 abc ""; do
    run "$HPT" compare $SMALL --arms baseline --budgets "$bad" --out "$tmp/x"
    if [ $rc -eq 2 ] && grep -q -- "--budgets" "$tmp/err" && [ ! -d "$tmp/x/runs" ]; then :
    else fail "--budgets '$bad': status $rc (want 2 naming --budgets, before any run)"; bad_fail=1; fi
done
[ -z "${bad_fail:-}" ] && pass "bad --budgets (0, 1.5, -0.5, 0.5,0.5, 1,1, abc, empty): exit 2 naming --budgets, no run"

finish
