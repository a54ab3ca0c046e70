#!/bin/sh
# cli_compare_extend.sh — `hpt compare` extends an LR sweep whose best rate
# lies at an edge (cli/compare_sweep.c; its arithmetic in
# tests/test_compare_sweep.c), on a tiny model (30 steps, one seed; no
# timing is judged):
#   - --lrs 8e-2,1.6e-1: two rates, so each arm's best is at an edge (which
#     one depends on the arm and the machine's rounding); each adds
#     rates at the sweep's ratio (x2, /2) beyond its edge until its best is
#     inside (within 3); every
#     arm's sweep in results.json holds --lrs and its added rates, its tuned
#     LR is its sweep's lowest final val and lies strictly inside;
#     results.json's sweep_extension and results.md say what was added
#   - an arm's extension trains as soon as its own sweep has finished, ahead
#     of the other arms' sweeps (one run at a time: the baseline's third)
#   - --lrs 1e-4,2e-4 --extend-sweep 2: far below the best, the cap stops
#     it: 2 rates added, status capped, results.md and stderr say "not
#     bracketed"; the same with --extend-sweep 0 reuses the runs and adds none
#   - --extend-sweep 9 (over the cap of 8): exit 2
test_name=cli_compare_extend; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 30 --warmup-iters 5 --eval-iters 2 --threads 1 --arms baseline,schedule-free --seeds 1"

# check DIR GIVEN CAP: the sweep's records against the rules above; prints
# "fine" or the errors, then one line per arm: status and added rates
check() {
    python3 - "$@" <<'EOF'
import json, math, sys
d, given, cap = sys.argv[1], [float(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
r = json.load(open(d + "/results.json"))
md = open(d + "/results.md").read()
errs, lines = [], []
if r.get("extend_sweep") != cap: errs.append("extend_sweep %r, want %d" % (r.get("extend_sweep"), cap))
ratio = given[1] / given[0]
for a in ("baseline", "schedule-free"):
    e = r["sweep_extension"][a]
    sw = [s for s in r["sweep"] if s["arm"] == a]
    lrs = sorted(s["lr"] for s in sw)
    added = e["added_lrs"]
    want = sorted(given + added)
    if [round(x, 12) for x in lrs] != [round(x, 12) for x in want]:
        errs.append("%s: sweep rates %r, want --lrs + added %r" % (a, lrs, want))
    if len(added) > cap: errs.append("%s: %d added over the cap %d" % (a, len(added), cap))
    # each added rate one step of the sweep's ratio beyond the last edge
    edge = max(given) if e.get("direction") == "up" else min(given)
    for x in added:
        edge = edge * ratio if e["direction"] == "up" else edge / ratio
        if abs(x - edge) > 1e-6 * edge: errs.append("%s: added %r, want %r" % (a, x, edge))
    best = min(sw, key=lambda s: s["final_val_loss"])
    if r["tuned_lr"][a] != best["lr"] or r["arms"][a]["lr"] != best["lr"]:
        errs.append("%s: tuned %r, the sweep's best %r" % (a, r["tuned_lr"][a], best["lr"]))
    inside = lrs[0] < best["lr"] < lrs[-1]
    if e["status"] == "inside" and not inside: errs.append("%s: inside, but best %r of %r" % (a, best["lr"], lrs))
    if e["status"] == "capped":
        if inside or len(added) != cap: errs.append("%s: capped with best %r of %r, %d added" % (a, best["lr"], lrs, len(added)))
        if "lr %g, is %sat the %s edge" % (best["lr"], "still " if added else "", e["edge"]) not in md or "not bracketed" not in md:
            errs.append("%s: results.md does not say it is capped" % a)
    if added and ("- %s: its best rate lay at the %s edge of --lrs, so the sweep added lr %s" %
                  (a, "upper" if e["direction"] == "up" else "lower", ", ".join("%g" % x for x in added))) not in md:
        errs.append("%s: results.md does not list the added rates" % a)
    lines.append("%s %s %s %s" % (a, e["status"], e.get("direction"), ",".join("%g" % x for x in added)))
print("\n".join(errs) if errs else "fine")
print("\n".join(lines))
EOF
}

OUT="$tmp/both"
run "$HPT" compare $CFG --lrs 8e-2,1.6e-1 --out "$OUT"
if [ $rc -eq 0 ]; then pass "compare --lrs 8e-2,1.6e-1: exit 0"; else fail "compare: status $rc"; fi
check "$OUT" 8e-2,1.6e-1 3 >"$tmp/check" 2>&1
if [ "$(head -n 1 "$tmp/check")" = fine ] && grep -q "^baseline inside [updown]* [0-9]" "$tmp/check" &&
   grep -q "^schedule-free inside [updown]* [0-9]" "$tmp/check"; then
    pass "extended to a bracket: $(tail -n 2 "$tmp/check" | tr '\n' ';')"
else fail "extension up and down: $(cat "$tmp/check")"; fi
grep -q "edge of its sweep: trying lr [0-9.e-]* (extension 1 of at most 3)" "$tmp/err" &&
    pass "stderr names each extension" || fail "stderr: no extension line"
# the baseline's extension is decided once its own 2 runs have finished and
# trains ahead of schedule-free's sweep (queued first), not after it
if grep '^\[' "$tmp/err" | sed -n 3p | grep -q '^\[3/[0-9]*\] baseline '; then
    pass "the baseline's extension trained third, ahead of schedule-free's sweep"
else fail "the third run finished: $(grep '^\[' "$tmp/err" | sed -n 3p)"; fi

OUT="$tmp/cap"
run "$HPT" compare $CFG --lrs 1e-4,2e-4 --extend-sweep 2 --out "$OUT"
check "$OUT" 1e-4,2e-4 2 >"$tmp/check" 2>&1
if [ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/check")" = fine ] && grep -q "^baseline capped up 0.0004,0.0008" "$tmp/check" &&
   grep -q "^schedule-free capped up 0.0004,0.0008" "$tmp/check"; then
    pass "the cap: 2 rates added, still at the upper edge, said so"
else fail "cap: status $rc, $(cat "$tmp/check")"; fi
grep -q "warning: baseline's tuned lr 0.0008 is still at the upper edge" "$tmp/err" &&
    pass "stderr warns that the cap left it unbracketed" || fail "stderr: no cap warning"

run "$HPT" compare $CFG --lrs 1e-4,2e-4 --extend-sweep 0 --out "$OUT"
check "$OUT" 1e-4,2e-4 0 >"$tmp/check" 2>&1
if [ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/check")" = fine ] && grep -q "^baseline capped None $" "$tmp/check" &&
   grep -q "(--extend-sweep 0): not bracketed" "$OUT/results.md" && ! grep -q "trying lr" "$tmp/err"; then
    pass "--extend-sweep 0: nothing added, the edge said"
else fail "--extend-sweep 0: status $rc, $(cat "$tmp/check")"; fi

run "$HPT" compare $CFG --lrs 1e-4,2e-4 --extend-sweep 9 --out "$tmp/x"
if [ $rc -eq 2 ]; then pass "--extend-sweep 9: exit 2"; else fail "--extend-sweep 9: status $rc (want 2)"; fi

finish
