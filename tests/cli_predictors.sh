#!/bin/sh
# Every predictor over short warmups and phases: a Predict phase
# must never begin before the predictor holds the history it reads (shrink
# with --confidence-threshold 0 and --warmup-steps 5 --full-steps 5 began
# one with an empty ring and died of SIGSEGV). Each predictor named by
# `hpt train --help` runs a tiny model over --warmup-steps 1..5 x
# --full-steps 1..5 at threshold 0 (Predict as soon as the controller lets
# it), with --whole-phase, and at threshold 1; every run must exit 0 with no
# NaN loss. Longer runs check where the ring predictors' first Predict phase
# falls: not before their ring is full.
test_name=cli_predictors; . tests/lib.sh

words_text 27 > "$tmp/text.txt"
tiny="--data $tmp/text.txt --tokenizer char --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 2
      --eval-iters 1 --threads 1 --mode hybrid --min-predict-steps 1 --max-predict-steps 4 --correct-steps 1"

# the predictors, from the --predictor line of the help (the table's names)
preds=$($HPT train --help 2>&1 | sed -n 's/^ *--predictor \([a-z|-]*\) .*/\1/p' | tr '|' ' ')
[ "$(echo $preds | wc -w)" -ge 5 ] || fail "the predictors from --help: '$preds'"

# one_run NAME ARGS...: a 30-step run into $tmp/NAME; exit 0, no NaN loss
bad=0
one_run() {
    _n=$1; shift
    $HPT train $tiny --max-iters 30 --eval-interval 15 "$@" --out "$tmp/$_n" >"$tmp/$_n.log" 2>&1
    _rc=$?
    if [ $_rc -ne 0 ]; then
        fail "$_n: exit $_rc ($*): $(tail -n 1 "$tmp/$_n.log")"; bad=$((bad + 1))
    elif grep -Eq '"(train_loss|val_loss)":(null|-?nan|-?inf)' "$tmp/$_n/metrics.jsonl" ||
         ! grep -Eq '"final_val_loss":[[:space:]]*[0-9]' "$tmp/$_n/summary.json"; then
        fail "$_n: a NaN loss ($*)"; bad=$((bad + 1))
    fi
    rm -rf "$tmp/$_n" "$tmp/$_n.log"
}

runs=0
for p in $preds; do
    for w in 1 2 3 4 5; do
        for f in 1 2 3 4 5; do
            one_run "$p-w$w-f$f" --predictor $p --warmup-steps $w --full-steps $f --confidence-threshold 0
            runs=$((runs + 1))
        done
        one_run "$p-w$w-whole" --predictor $p --warmup-steps $w --full-steps 1 --whole-phase --confidence-threshold 0
        one_run "$p-w$w-t1" --predictor $p --warmup-steps $w --full-steps $((6 - w)) --confidence-threshold 1 \
            $([ $((w % 2)) -eq 0 ] && echo --whole-phase)
        runs=$((runs + 2))
    done
done
[ $bad -eq 0 ] && pass "$runs short runs over $(echo $preds | wc -w) predictors ($preds): exit 0, no NaN loss"

# the ring predictors wait in Full for a full ring: linear's 4 snapshots 5
# steps apart, shrink's 6 snapshots 20 apart (the snapshot at update k*s)
for pr in "linear 20" "shrink 120"; do
    set -- $pr
    $HPT train $tiny --max-iters 130 --eval-interval 65 --predictor $1 --warmup-steps 1 --full-steps 1 \
        --confidence-threshold 0 --out "$tmp/ring-$1" >"$tmp/ring.log" 2>&1 || fail "$1 130 steps: $(tail -n 1 "$tmp/ring.log")"
    first=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    t = json.loads(l)
    if t["phase"] == "predict": print(t["step"]); break
else: print("none")' "$tmp/ring-$1/phases.jsonl")
    if [ "$first" != none ] && [ "$first" -ge $2 ]; then pass "$1: first Predict phase at step $first, after its ring filled ($2)"
    else fail "$1: first Predict phase at step $first, its ring fills at $2"; fi
    grep -q "predict waits: the $1 predictor holds 0 of the" "$tmp/ring-$1/phases.jsonl" && pass "$1: phases.jsonl says why it waited" ||
        fail "$1: phases.jsonl does not say the predictor waited for its history"
done

finish
