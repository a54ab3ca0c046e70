#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_schedule_free.sh — `hpt train --optimizer schedule-free`. Run by
# tests/run.sh from the repository root after `make`.
#   (a) a tiny model learns: val loss at the end well below the first
#       evaluation's and below the uniform guess; summary.json says
#       optimizer schedule-free, schedule constant; the learning rate is the
#       warmup, then constant --lr
#   (b) SIGKILL after a checkpoint, then --resume: the uninterrupted run's
#       param_crc32 and val losses, bit for bit (z, x and the rate sums are in
#       the checkpoint's SFRE section)
#   (c) evaluation and model.bin use the average x: `hpt sample` of model.bin
#       differs from the last checkpoint's (which holds the gradient point y)
#   (d) flags: an unknown --optimizer, a decay flag (--schedule, --min-lr,
#       --decay-frac, --cooldown), --ema and --mode hybrid with a phased
#       predictor (--predictor shrink) with schedule-free:
#       exit 2 naming the flag
test_name=cli_schedule_free; . tests/lib.sh

words_text 777 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 \
     --max-iters 200 --warmup-iters 20 --lr 3e-3 --eval-interval 50 --eval-iters 2 --save-interval 20 --threads 1 \
     --optimizer schedule-free"

# ---------------------------------------------------------------- (a)
run "$HPT" train $CFG --out "$tmp/a"
X=$(crc_of "$tmp/a")
if [ $rc -eq 0 ] && [ -n "$X" ]; then pass "(a) schedule-free run: param_crc32 $X"
else fail "(a) schedule-free run: status $rc"; fi
if curve_ok "$tmp/a" 'len(vals) == 4 and vals[-1] < vals[0] - 0.2 and vals[-1] < math.log(30) and s["optimizer"] == "schedule-free" and s["schedule"] == "constant" and abs(lrs[0] - 3e-3 / 20) < 1e-9 and all(abs(x - 3e-3) < 1e-9 for x in lrs[19:])'
then pass "(a) it learns; summary: optimizer schedule-free, schedule constant; lr warmup then constant"
else fail "(a) learning, summary or lr"; fi
if grep -q 'schedule-free' "$tmp/err"; then pass "(a) the config line names schedule-free"
else fail "(a) no 'schedule-free' in the config line"; fi

# ---------------------------------------------------------------- (b)
d="$tmp/b"; f="$d/checkpoints/ckpt-00000100.bin"
"$HPT" train $CFG --out "$d" >/dev/null 2>&1 &
pid=$!; pids="$pids $pid"
while [ ! -e "$f" ] && kill -0 $pid 2>/dev/null; do :; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
how=killed
if [ -e "$d/summary.json" ]; then
    how=replayed  # finished first: leave what a kill at ckpt 100 leaves
    for c in "$d"/checkpoints/ckpt-*.bin; do
        s=$(basename "$c" .bin); s=${s#ckpt-}; s=$(expr "$s" + 0)
        [ "$s" -gt 100 ] && rm -f "$c"
    done
    rm -f "$d/summary.json" "$d/model.bin"
fi
run "$HPT" train --resume "$d"
c=$(crc_of "$d")
if [ $rc -eq 0 ] && [ "$c" = "$X" ] && [ "$(val_losses "$d")" = "$(val_losses "$tmp/a")" ]; then
    pass "(b) SIGKILL after ckpt 100 ($how), resume: param_crc32 $c and the same val losses"
else fail "(b) resume ($how): status $rc, param_crc32 $c, want $X; vals $(val_losses "$d") vs $(val_losses "$tmp/a")"; fi

# ---------------------------------------------------------------- (c)
run "$HPT" sample --model "$tmp/a/model.bin" --tokens 40 --seed 1 --threads 1
cp "$tmp/out" "$tmp/sx"; rx=$rc
run "$HPT" sample --model "$tmp/a/checkpoints/ckpt-00000200.bin" --tokens 40 --seed 1 --threads 1
if [ $rx -eq 0 ] && [ $rc -eq 0 ] && ! cmp -s "$tmp/out" "$tmp/sx"; then
    pass "(c) model.bin holds the average x, the checkpoint the gradient point y"
else fail "(c) sampling: status $rx/$rc, or model.bin equal to the checkpoint's weights"; fi

# ---------------------------------------------------------------- (d)
B="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --max-iters 2 --out $tmp/d"
for args in "--optimizer sgd|--optimizer" "--optimizer schedule-free --schedule linear|--schedule" \
            "--optimizer schedule-free --min-lr 0|--min-lr" "--optimizer schedule-free --decay-frac 0.3|--decay-frac" \
            "--optimizer schedule-free --cooldown linear|--cooldown" "--optimizer schedule-free --ema 0.99|--ema" \
            "--optimizer schedule-free --mode hybrid --predictor shrink|--predictor"; do
    a=${args%|*}; want=${args#*|}
    run "$HPT" train $B $a
    if [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/d/summary.json" ]; then
        pass "(d) $a: exit 2, '$(head -c 110 "$tmp/err" | tr '\n' ' ')'"
    else fail "(d) $a: status $rc (want 2 naming $want)"; fi
done

finish
