#!/bin/sh
# cli_schedule.sh — `hpt train --schedule` (src/train/schedule.c). Run by
# tests/run.sh from the repository root after `make`.
#
#   (a) --schedule wsd --decay-frac 0.3 --cooldown sqrt is accepted, printed
#       in the resolved-config line, recorded in summary.json, and the lr of
#       metrics.jsonl follows it (stable, then 1 - sqrt over the last 30%)
#   (b) that run killed with SIGKILL after a checkpoint and resumed: the
#       uninterrupted run's param_crc32 and metrics (bit-exact), the
#       schedule restored from the checkpoint; the same in hybrid mode
#   (c) linear and constant runs record their schedule (no wsd fields), and
#       a default run says linear to 0 (D2Z, the default schedule)
#   (d) bad values exit 2 naming the flag; --schedule with --resume too
#   (e) a TCFG version-2 checkpoint (before --schedule; committed fixture,
#       written by the previous binary) resumes as cosine, to that binary's
#       param_crc32 where this build reproduces its numerics
test_name=cli_schedule; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 \
     --max-iters 200 --warmup-iters 20 --eval-interval 50 --eval-iters 2 --save-interval 20 --threads 1"
WSD="--schedule wsd --decay-frac 0.3 --cooldown sqrt --min-lr 1e-4"

# field DIR KEY: a member of DIR/summary.json ("absent" if missing)
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "absent"))' "$1/summary.json" "$2" 2>/dev/null; }

# ---------------------------------------------------------------- (a)

run "$HPT" train $CFG $WSD --out "$tmp/a"
X=$(crc_of "$tmp/a")
if [ $rc -eq 0 ] && [ -n "$X" ]; then pass "(a) $WSD accepted: param_crc32 $X"
else fail "(a) $WSD: status $rc"; fi
if grep -q "lr 0.001 -> 0.0001 (warmup 20, wsd, sqrt cooldown over the last 0.3 of the steps)" "$tmp/err"; then
    pass "(a) the resolved-config line names the schedule"
else fail "(a) resolved-config line: $(grep training "$tmp/err")"; fi
if [ "$(field "$tmp/a" schedule) $(field "$tmp/a" decay_frac) $(field "$tmp/a" cooldown)" = "wsd 0.3 sqrt" ]; then
    pass "(a) summary.json: schedule wsd, decay_frac 0.3, cooldown sqrt"
else fail "(a) summary.json: $(field "$tmp/a" schedule) $(field "$tmp/a" decay_frac) $(field "$tmp/a" cooldown)"; fi
# steps are 1-based in metrics.jsonl: step s ran at it = s - 1; the cooldown
# is the last 60 of 200 steps, from it 140
if python3 - "$tmp/a/metrics.jsonl" <<'EOF'
import json, math, sys
lr = {d["step"]: d["lr"] for d in map(json.loads, open(sys.argv[1])) if "lr" in d}
want = {1: 1e-3 / 20, 20: 1e-3, 21: 1e-3, 140: 1e-3, 141: 1e-3,
        170: 1e-4 + (1 - math.sqrt(29 / 60)) * 9e-4, 200: 1e-4 + (1 - math.sqrt(59 / 60)) * 9e-4}
bad = [(s, lr.get(s), w) for s, w in want.items() if not (s in lr and abs(lr[s] - w) <= 1e-6 * w)]
print("     lr off:", bad) if bad else None
sys.exit(1 if bad else 0)
EOF
then pass "(a) metrics.jsonl's lr: warmup, stable to step 140, 1 - sqrt cooldown to the last step"
else fail "(a) metrics.jsonl's lr does not follow wsd"; fi

# ---------------------------------------------------------------- (b)

# kill9_after NAME K ARGS...: start a run in $tmp/NAME, SIGKILL it once ckpt K exists
kill9_after() {
    d="$tmp/$1"; f=$(printf '%s/checkpoints/ckpt-%08d.bin' "$d" "$2"); shift 2
    "$HPT" train "$@" --out "$d" >/dev/null 2>&1 &
    pid=$!; pids="$pids $pid"
    while [ ! -e "$f" ] && kill -0 $pid 2>/dev/null; do :; done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    how=killed
    if [ -e "$d/summary.json" ]; then  # finished first: leave what a kill at K leaves
        how=replayed
        for c in "$d"/checkpoints/ckpt-*.bin; do [ "$c" = "$f" ] || rm -f "$c"; done
        rm -f "$d/summary.json" "$d/model.bin"
    fi
}

kill9_after b 100 $CFG $WSD --keep-last 10
run "$HPT" train --resume "$tmp/b"
c=$(crc_of "$tmp/b")
if [ $rc -eq 0 ] && [ "$c" = "$X" ] && same_metrics "$tmp/a" "$tmp/b" && grep -q "wsd, sqrt cooldown" "$tmp/err"; then
    pass "(b) SIGKILL after ckpt 100 ($how), resume: param_crc32 $c and metrics as uninterrupted, schedule restored"
else fail "(b) resume of the wsd run: status $rc, param_crc32 $c, want $X"; fi
if [ "$(field "$tmp/b" schedule) $(field "$tmp/b" decay_frac)" = "wsd 0.3" ]; then pass "(b) the resumed run's summary.json says wsd 0.3"
else fail "(b) resumed summary.json: $(field "$tmp/b" schedule) $(field "$tmp/b" decay_frac)"; fi

HYB="--mode hybrid --warmup-steps 20 --full-steps 5 --min-predict-steps 10 --max-predict-steps 30 --correct-steps 2 \
     --confidence-threshold 0 --predict-waste-budget 1 --backoff-after 1000 --predictor shrink"
run "$HPT" train $CFG $WSD $HYB --out "$tmp/ha"
HX=$(crc_of "$tmp/ha")
kill9_after hb 120 $CFG $WSD $HYB --keep-last 10
run "$HPT" train --resume "$tmp/hb"
c=$(crc_of "$tmp/hb")
if [ -n "$HX" ] && [ $rc -eq 0 ] && [ "$c" = "$HX" ] && same_metrics "$tmp/ha" "$tmp/hb"; then
    pass "(b) hybrid mode with wsd: SIGKILL after ckpt 120 ($how), resume: param_crc32 $c, same metrics"
else fail "(b) hybrid wsd resume: status $rc, param_crc32 $c, want $HX"; fi

# ---------------------------------------------------------------- (c)

for s in linear constant; do
    run "$HPT" train $CFG --max-iters 40 --schedule $s --min-lr 0 --out "$tmp/c-$s"
    if [ $rc -eq 0 ] && [ "$(field "$tmp/c-$s" schedule) $(field "$tmp/c-$s" decay_frac)" = "$s absent" ]; then
        pass "(c) --schedule $s: summary.json says $s (no wsd fields)"
    else fail "(c) --schedule $s: status $rc, schedule $(field "$tmp/c-$s" schedule)"; fi
done
run "$HPT" train $CFG --max-iters 40 --out "$tmp/c-default"
if [ $rc -eq 0 ] && [ "$(field "$tmp/c-default" schedule)" = linear ] && grep -q "lr 0.001 -> 0 (warmup 20, linear)" "$tmp/err"; then
    pass "(c) the default is linear to 0 (D2Z)"
else fail "(c) default schedule: $(field "$tmp/c-default" schedule)"; fi

# ---------------------------------------------------------------- (d)

bad() {  # bad FLAG ARGS...: exit 2 and a message naming FLAG
    flag=$1; shift
    run "$HPT" train --data "$tmp/data.txt" "$@" --out "$tmp/d"
    if [ $rc -eq 2 ] && grep -q -- "$flag" "$tmp/err" && [ ! -e "$tmp/d" ]; then pass "(d) $* -> exit 2 naming $flag"
    else fail "(d) $*: status $rc (want 2 naming $flag)"; fi
}
bad --schedule --schedule stair
bad --schedule --schedule d2z
bad --schedule --schedule
bad --decay-frac --decay-frac 1.5
bad --decay-frac --decay-frac -0.1
bad --decay-frac --decay-frac abc
bad --cooldown --cooldown cube
run "$HPT" train --resume "$tmp/b" --schedule linear
if [ $rc -eq 2 ] && grep -q -- "--schedule" "$tmp/err"; then pass "(d) --schedule with --resume: exit 2 naming it"
else fail "(d) --schedule with --resume: status $rc"; fi

# ---------------------------------------------------------------- (e)

# written by the binary before --schedule (TCFG version 2, --ema 0.9, the
# config below), its data path made relative to the repository root (CRC
# repaired); that binary's uninterrupted run ended at fd51287f
cp -r tests/fixtures/ckpt_v2 "$tmp/e"
V2="--data tests/fixtures/v1_data.txt --n-layer 1 --n-head 2 --n-embd 8 --block-size 8 --batch-size 4 \
    --max-iters 40 --eval-interval 10 --eval-iters 2 --threads 1 --ema 0.9"
run "$HPT" train $V2 --out "$tmp/e_ref"
same_build=$([ "$(crc_of "$tmp/e_ref")" = fd51287f ] && echo 1 || echo 0)
run "$HPT" train --resume "$tmp/e"
ec=$(crc_of "$tmp/e")
if [ $rc -eq 0 ] && grep -q "step 20 of 40" "$tmp/err" && [ "$(field "$tmp/e" schedule)" = cosine ] &&
   { [ $same_build = 0 ] || [ "$ec" = fd51287f ]; }; then
    pass "(e) a TCFG version-2 checkpoint resumes from step 20 as cosine (param_crc32 $ec; bit-exact checked: $same_build)"
else fail "(e) version-2 checkpoint: status $rc, crc $ec, schedule $(field "$tmp/e" schedule)"; fi

finish
