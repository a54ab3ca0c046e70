#!/bin/sh
# cli_outer_sf.sh — `--mode hybrid --optimizer schedule-free`: the outer step
# on schedule-free AdamW (docs/hybrid.md, "The outer step under
# schedule-free"). No timing judged. Run by tests/run.sh from the repository
# root after `make`. The text: the first 40 KB of data/fortunes.txt where it
# has been made (`make data/fortunes.txt`), else words_text.
#
#   (a) --outer-lr 1 --outer-momentum 0 ("no change"): param_crc32 equal to
#       plain schedule-free training's, with jumps applied and kept
#   (b) the defaults train: jumps applied, a finite val loss, a crc of its own
#   (c) --outer-lr 100: jumps fail their check and roll back; the crc32 of
#       the params (y) logged after each rollback equals the one logged just
#       before its jump, and the scale falls
#   (d) SIGKILL after a checkpoint, resumed; and resumed from the checkpoint
#       of the steps around the first jumps and the first failed check: crc,
#       metrics and phases.jsonl equal to the uninterrupted run's (z, x, v,
#       the rate sums, the anchor, u and the snapshot all in the checkpoint)
#   (e) --outer-adapt agree: its gates logged; SIGKILL and resume: the same
#   (f) refused, exit 2 naming the flag: the phased predictors (coast,
#       stale-adam, linear, shrink read AdamW's moments) and --outer-moments
#       reset with schedule-free
test_name=cli_outer_sf; . tests/lib.sh

if [ -f data/fortunes.txt ]; then head -c 40000 data/fortunes.txt >"$tmp/text.txt"; else words_text 11 >"$tmp/text.txt"; fi
BASE="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
      --threads 1 --max-iters 160 --eval-interval 40 --keep-last 1000 --optimizer schedule-free --lr 3e-3 \
      --warmup-iters 10"
OUT="--mode hybrid --warmup-steps 20 --outer-interval 10 --outer-check 4"
summ() { outer_summ "$1"; }

# ---------------------------------------------------------------- (a)

run "$HPT" train $BASE --out "$tmp/base"; B=$(crc_of "$tmp/base")
run "$HPT" train $BASE $OUT --outer-lr 1 --outer-momentum 0 --out "$tmp/id"
set -- $(summ "$tmp/id")
if [ $rc -eq 0 ] && [ -n "$B" ] && [ "$(crc_of "$tmp/id")" = "$B" ] && [ "${1:-0}" -ge 10 ] && [ "$2" = "$1" ]; then
    pass "(a) eta 1, mu 0: crc $B equal to plain schedule-free's, $1 jumps applied and kept"
else fail "(a) eta 1, mu 0: status $rc, crc '$(crc_of "$tmp/id")' (schedule-free '$B'), summary '$*'"; fi

# ---------------------------------------------------------------- (b)

run "$HPT" train $BASE $OUT --out "$tmp/def"
set -- $(summ "$tmp/def")
if [ $rc -eq 0 ] && [ "${1:-0}" -ge 10 ] && [ "$(crc_of "$tmp/def")" != "$B" ] &&
   python3 -c "import math,sys; sys.exit(not math.isfinite(float(sys.argv[1])))" "$6" &&
   grep -q '"phase":"jump"' "$tmp/def/metrics.jsonl" &&
   python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["optimizer"] != "schedule-free")' "$tmp/def/summary.json"
then pass "(b) defaults (eta 1, mu 0.5): $1 jumps, $2 kept, $3 rolled back, final val $6"
else fail "(b) defaults: status $rc, summary '$*'"; fi

# ---------------------------------------------------------------- (c)

outer_rollbacks $BASE $OUT

# ---------------------------------------------------------------- (d)

# jumps kept and rolled back (eta 12: some fail their check)
CFG="$BASE $OUT --outer-lr 12 --outer-momentum 0.5"
outer_resume_suite $CFG

# ---------------------------------------------------------------- (e)

V="--outer-adapt agree --outer-lr 3"
run "$HPT" train $BASE $OUT $V --out "$tmp/v"
rc1=$rc; Y=$(crc_of "$tmp/v")
set -- $(summ "$tmp/v")
kill_after "$tmp/vk" 6 60 $BASE $OUT $V --save-interval 10
run "$HPT" train --resume "$tmp/vk"
if [ $rc1 -eq 0 ] && [ $rc -eq 0 ] && [ "${1:-0}" -ge 5 ] && grep -q 'per-tensor agreement gates mean' "$tmp/v/phases.jsonl" &&
   [ -n "$Y" ] && [ "$Y" != "$B" ] && [ "$(crc_of "$tmp/vk")" = "$Y" ] && same_run "$tmp/v" "$tmp/vk"; then
    pass "(e) $V: $1 jumps, gates logged; SIGKILL after checkpoint 6, resumed: crc $Y, same metrics and phases"
else fail "(e) $V: status $rc1/$rc, summary '$*', crc '$(crc_of "$tmp/vk")' (want '$Y')"; fi

# ---------------------------------------------------------------- (f)

for bad in "--predictor coast" "--predictor stale-adam" "--predictor linear" "--predictor shrink" \
           "--outer-moments reset"; do
    flag=${bad%% *}
    run "$HPT" train $BASE $OUT $bad --out "$tmp/bad"
    if [ $rc -eq 2 ] && grep -q -- "$flag" "$tmp/err" && grep -q -- "schedule-free" "$tmp/err" &&
       [ ! -e "$tmp/bad/summary.json" ]; then pass "(f) $bad with schedule-free: exit 2, '$(head -c 100 "$tmp/err")'"
    else fail "(f) $bad with schedule-free: status $rc (want 2 naming $flag)"; fi
done

finish
