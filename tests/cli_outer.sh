#!/bin/sh
# cli_outer.sh — the hybrid's outer-momentum predictor (`--predictor outer`,
# src/train/outer.c's step and the outer path of hybrid.c). No timing judged.
# Run by tests/run.sh from the repository root after `make`.
#
#   (a) --outer-lr 1 --outer-momentum 0 ("no change"): param_crc32 equal to
#       --mode baseline's (the outer path draws no batch and no probe, and the
#       jump leaves every parameter bit for bit), with jumps applied and kept
#   (b) the defaults train: jumps applied and counted, a finite val loss;
#       (b2) the outer path holds no line-search direction or probe batches
#   (c) --outer-lr 100: the jumps fail their check and roll back; the
#       parameters' crc32 logged after each rollback equals the one logged
#       just before its jump (byte-exact restore), and the scale halves
#   (d) SIGKILL after a checkpoint, resumed: crc, metrics and phases.jsonl
#       equal to the uninterrupted run's; resumed from a checkpoint every
#       step at the jump steps, the step after and in the middle of a check
#   (e) bad values exit 2 naming the flag
#   (f) a checkpoint of HYBR version 4 (before the outer rows): exit 1, "older hpt"
#   (g) the variants: --outer-gate dynamics with the gate shut
#       (--confidence-threshold 2) trains the baseline's bits with no jump;
#       --outer-adapt agree logs its gates; agree with --outer-moments reset
#       and with --outer-gate dynamics resumed after SIGKILL: crc, metrics
#       and phases equal to the uninterrupted run's
test_name=cli_outer; . tests/lib.sh

words_text 7 >"$tmp/text.txt"
BASE="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
      --threads 1 --max-iters 160 --eval-interval 40 --keep-last 1000"
OUT="--mode hybrid --warmup-steps 20 --predictor outer --outer-interval 10 --outer-check 4"
summ() { outer_summ "$1"; }

# ---------------------------------------------------------------- (a)

run "$HPT" train $BASE --out "$tmp/base"; B=$(crc_of "$tmp/base")
run "$HPT" train $BASE $OUT --outer-lr 1 --outer-momentum 0 --out "$tmp/id"
set -- $(summ "$tmp/id")
if [ $rc -eq 0 ] && [ -n "$B" ] && [ "$(crc_of "$tmp/id")" = "$B" ] && [ "${1:-0}" -ge 10 ] && [ "$2" = "$1" ] &&
   [ "$5" = 160 ]; then
    pass "(a) eta 1, mu 0: crc $B equal to the baseline's, $1 jumps applied and kept, 160 steps"
else fail "(a) eta 1, mu 0: status $rc, crc '$(crc_of "$tmp/id")' (baseline '$B'), summary '$*'"; fi

# ---------------------------------------------------------------- (b)

run "$HPT" train $BASE $OUT --out "$tmp/def"
set -- $(summ "$tmp/def")
if [ $rc -eq 0 ] && [ "${1:-0}" -ge 10 ] && [ $(($2 + $3)) -ge $(($1 - 1)) ] && [ "$(crc_of "$tmp/def")" != "$B" ] &&
   python3 -c "import math,sys; sys.exit(not math.isfinite(float(sys.argv[1])))" "$6" &&
   grep -q '"phase":"jump"' "$tmp/def/metrics.jsonl"; then
    pass "(b) defaults (eta 1, mu 0.5): $1 jumps, $2 kept, $3 rolled back, final val $6"
else fail "(b) defaults: status $rc, summary '$*'"; fi

# (b2) the outer path allocates neither the line search's direction nor
# the probe batches: its hybrid memory is at least a model's worth below
# the phase controller's (same dynamics model, same snapshot)
run "$HPT" train $BASE --mode hybrid --warmup-steps 20 --predictor shrink --max-iters 30 --out "$tmp/shr"
if [ $rc -eq 0 ] && python3 - "$tmp/def/summary.json" "$tmp/shr/summary.json" <<'EOF'
import json, sys
o, p = (json.load(open(f)) for f in sys.argv[1:3])
assert o["params"] == p["params"] > 0
assert p["memory_bytes_hybrid"]["buffers"] - o["memory_bytes_hybrid"]["buffers"] >= 4 * o["params"], \
    (o["memory_bytes_hybrid"], p["memory_bytes_hybrid"])
EOF
then pass "(b2) outer path: hybrid buffers at least 4 x params bytes below --predictor shrink's (no direction, no probes)"
else fail "(b2) outer vs shrink hybrid memory: status $rc"; fi

# ---------------------------------------------------------------- (c)

outer_rollbacks $BASE $OUT

# ---------------------------------------------------------------- (d)

# jumps kept and rolled back (eta 12: some fail their check)
CFG="$BASE $OUT --outer-lr 12 --outer-momentum 0.5"
outer_resume_suite $CFG

# ---------------------------------------------------------------- (e)

for bad in "--outer-lr 0" "--outer-lr -1" "--outer-lr 101" "--outer-lr nan" "--outer-momentum 1" \
           "--outer-momentum -0.1" "--outer-interval 0" "--outer-check 0" "--outer-check 1001" "--outer-lr x"; do
    flag=${bad%% *}
    run "$HPT" train $BASE $OUT $bad --out "$tmp/bad"
    if [ $rc -eq 2 ] && grep -q -- "$flag" "$tmp/err"; then pass "(e) $bad: exit 2 naming $flag"
    else fail "(e) $bad: status $rc (want 2 naming $flag)"; fi
done

# ---------------------------------------------------------------- (f)

rm -rf "$tmp/f"; cp -r "$tmp/a" "$tmp/f"; cut_after "$tmp/f" 100
set_hybr_version "$tmp/f/checkpoints/ckpt-00000100.bin" 4
run "$HPT" train --resume "$tmp/f"
if [ $rc -eq 1 ] && grep -q 'HYBR version 4 was written by an older hpt' "$tmp/err" && grep -q 'outer' "$tmp/err"; then
    pass "(f) HYBR version 4: exit 1, '$(grep -o 'HYBR version 4.*' "$tmp/err" | cut -c1-110)...'"
else fail "(f) HYBR version 4: status $rc (want 1, 'older hpt')"; fi

# ---------------------------------------------------------------- (g)

run "$HPT" train $BASE $OUT --outer-gate dynamics --confidence-threshold 2 --out "$tmp/gshut"
set -- $(summ "$tmp/gshut")
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/gshut")" = "$B" ] && [ "${1:--1}" = 0 ]; then
    pass "(g) --outer-gate dynamics, gate shut: no jump, crc $B equal to the baseline's"
else fail "(g) --outer-gate dynamics, gate shut: status $rc, crc '$(crc_of "$tmp/gshut")' (want $B), summary '$*'"; fi
i=0
for v in "--outer-adapt agree --outer-moments reset --outer-lr 3" "--outer-gate dynamics --confidence-threshold 0"; do
    i=$((i + 1))
    run "$HPT" train $BASE $OUT $v --out "$tmp/v$i"
    rc1=$rc
    X=$(crc_of "$tmp/v$i")
    set -- $(summ "$tmp/v$i")
    nj=$1
    case $v in *agree*) grep -q 'per-tensor agreement gates mean' "$tmp/v$i/phases.jsonl" || nj=0 ;; esac
    kill_after "$tmp/vk$i" 6 60 $BASE $OUT $v --save-interval 10
    run "$HPT" train --resume "$tmp/vk$i"
    if [ $rc1 -eq 0 ] && [ $rc -eq 0 ] && [ "${nj:-0}" -ge 5 ] && [ -n "$X" ] && [ "$X" != "$B" ] &&
       [ "$X" != "${X1:-}" ] && [ "$(crc_of "$tmp/vk$i")" = "$X" ] && same_run "$tmp/v$i" "$tmp/vk$i"; then
        pass "(g) $v: $nj jumps; SIGKILL after checkpoint 6, resumed: crc $X, same metrics and phases"
    else fail "(g) $v: status $rc1/$rc, jumps '$nj', crc '$(crc_of "$tmp/vk$i")' (want '$X', baseline $B, other '${X1:-}')"; fi
    X1=$X
done

finish
