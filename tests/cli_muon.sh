#!/bin/sh
# cli_muon.sh — `hpt train --optimizer muon` (Muon on the hidden matrices,
# AdamW on the rest). Run by tests/run.sh from the repository root after
# `make`.
#   (a) a tiny GPT-2 learns: the last val loss well below the first and
#       below the uniform guess; summary.json says optimizer muon; the
#       config line names muon; the logged lr is --lr's schedule (Muon's)
#   (b) SIGKILL after a checkpoint, then --resume: the uninterrupted run's
#       param_crc32 and val losses, bit for bit (Muon's momentum is in the
#       checkpoint's ADAM section, its settings in TCFG)
#   (c) --muon-scale rms and --muon-ns-steps 3 give another run than (a)
#   (d) the MLP and the CNN on Fashion-MNIST (when installed) train with muon
#   (e) flags: --adam-lr / --muon-* without --optimizer muon, --muon-ns-steps
#       0, --muon-scale other, --muon-momentum 1, --mode hybrid with a phased
#       predictor or --outer-gate dynamics, --device
#       guard and cuda with muon: exit 2 naming the flag, nothing written;
#       --resume of a muon run with --device guard or --mode hybrid: refused,
#       the run as it was
#   (f) --mode hybrid on Muon (the outer step; the guard's snapshot holds
#       Muon's momentum where it holds AdamW's m): jumps applied, its own run,
#       and SIGKILL + --resume gives the uninterrupted run's bits
test_name=cli_muon; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 \
     --max-iters 120 --warmup-iters 10 --lr 0.02 --adam-lr 3e-3 --eval-interval 40 --eval-iters 2 --save-interval 20 \
     --threads 1 --optimizer muon"

# ---------------------------------------------------------------- (a)
run "$HPT" train $CFG --out "$tmp/a"
X=$(crc_of "$tmp/a")
if [ $rc -eq 0 ] && [ -n "$X" ]; then pass "(a) muon run: param_crc32 $X"
else fail "(a) muon run: status $rc: $(tail -n 3 "$tmp/err")"; fi
if curve_ok "$tmp/a" 'len(vals) == 3 and vals[-1] < vals[0] - 0.2 and vals[-1] < math.log(30) and s["optimizer"] == "muon" and abs(max(lrs) - 0.02) < 1e-7'
then pass "(a) it learns; summary: optimizer muon; lr is Muon's --lr schedule"
else fail "(a) learning, summary or lr"; fi
if grep -q 'muon' "$tmp/err"; then pass "(a) the config line names muon"
else fail "(a) no 'muon' in the config line"; fi

# ---------------------------------------------------------------- (b)
d="$tmp/b"
kill_after "$d" 2 40 $CFG
run "$HPT" train --resume "$d"
c=$(crc_of "$d")
if [ $rc -eq 0 ] && [ "$c" = "$X" ] && [ "$(val_losses "$d")" = "$(val_losses "$tmp/a")" ]; then
    pass "(b) SIGKILL ($how), resume: param_crc32 $c and the same val losses"
else fail "(b) resume ($how): status $rc, param_crc32 $c, want $X; vals $(val_losses "$d") vs $(val_losses "$tmp/a")"; fi

# ---------------------------------------------------------------- (c)
run "$HPT" train $CFG --muon-scale rms --muon-ns-steps 3 --lr 3e-3 --out "$tmp/c"
c=$(crc_of "$tmp/c")
if [ $rc -eq 0 ] && [ -n "$c" ] && [ "$c" != "$X" ]; then pass "(c) --muon-scale rms --muon-ns-steps 3: its own run ($c)"
else fail "(c) rms: status $rc, crc $c (vs $X)"; fi

# ---------------------------------------------------------------- (d)
FM=/usr/share/datasets/fashion-mnist
if [ -f "$FM/train-images-idx3-ubyte.gz" ]; then
    for model in mlp cnn; do
        run "$HPT" train --task fashion-mnist --model $model --data "$FM" --optimizer muon --lr 0.02 --max-iters 30 \
            --warmup-iters 5 --eval-interval 0 --eval-iters 4 --batch-size 64 --threads 1 --out "$tmp/f$model"
        v=$(val_losses "$tmp/f$model")
        if [ $rc -eq 0 ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.5 else 1)" "$v"; then
            pass "(d) fashion-mnist $model with muon: 30 steps, val loss $v"
        else fail "(d) fashion-mnist $model with muon: status $rc, val $v: $(tail -n 2 "$tmp/err")"; fi
    done
else
    echo "skip: (d) $FM not installed (apt-get install dataset-fashion-mnist)"
fi

# ---------------------------------------------------------------- (e)
B="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --max-iters 2 --out $tmp/e"
for args in "--adam-lr 1e-3|--adam-lr" "--optimizer schedule-free --muon-momentum 0.9|--muon-momentum" \
            "--muon-ns-steps 3|--muon-ns-steps" "--muon-scale rms|--muon-scale" \
            "--optimizer muon --muon-ns-steps 0|--muon-ns-steps" "--optimizer muon --muon-scale max|--muon-scale" \
            "--optimizer muon --muon-momentum 1|--muon-momentum" "--optimizer muon --mode hybrid --predictor shrink|--predictor shrink" \
            "--optimizer muon --mode hybrid --outer-gate dynamics|--outer-gate dynamics" \
            "--optimizer muon --device guard|--device cpu only" "--optimizer muon --device cuda|cuda"; do
    a=${args%|*}; want=${args#*|}
    run "$HPT" train $B $a
    if [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/e" ]; then
        pass "(e) $a: exit 2, '$(head -c 110 "$tmp/err" | tr '\n' ' ')'"
    else fail "(e) $a: status $rc (want 2 naming $want, nothing written): $(head -c 200 "$tmp/err")"; fi
done
before=$(ls "$tmp/a/checkpoints" | tr '\n' ' ')
run "$HPT" train --resume "$tmp/a" --device guard
if [ $rc -ne 0 ] && grep -q -- "--device cpu only" "$tmp/err" && [ "$(ls "$tmp/a/checkpoints" | tr '\n' ' ')" = "$before" ] &&
   [ "$(crc_of "$tmp/a")" = "$X" ]; then
    pass "(e) --resume of a muon run with --device guard: refused ($rc), the run as it was"
else fail "(e) --resume --device guard: status $rc: $(head -c 200 "$tmp/err")"; fi

run "$HPT" train --resume "$tmp/a" --mode hybrid
if [ $rc -ne 0 ] && grep -q -- "--mode hybrid" "$tmp/err" && [ "$(ls "$tmp/a/checkpoints" | tr '\n' ' ')" = "$before" ] &&
   [ "$(crc_of "$tmp/a")" = "$X" ]; then
    pass "(e) --resume of a muon run with --mode hybrid: refused ($rc), the run as it was"
else fail "(e) --resume --mode hybrid: status $rc: $(head -c 200 "$tmp/err")"; fi

# ---------------------------------------------------------------- (f)
H="$CFG --mode hybrid --outer-interval 15 --outer-check 4 --outer-lr 1.5 --warmup-steps 20"
run "$HPT" train $H --out "$tmp/f"
Y=$(crc_of "$tmp/f")
set -- $(outer_summ "$tmp/f")
if [ $rc -eq 0 ] && [ -n "$Y" ] && [ "$Y" != "$X" ] && [ "${1:-0}" -ge 1 ] && [ "$(summary_field "$tmp/f" optimizer)" = muon ]; then
    pass "(f) hybrid on muon: $1 jumps applied, $2 kept, $3 rolled back; its own run ($Y)"
else fail "(f) hybrid on muon: status $rc, crc $Y, jumps ${1:-none}: $(tail -n 2 "$tmp/err")"; fi
kill_after "$tmp/fk" 3 60 $H --keep-last 10
run "$HPT" train --resume "$tmp/fk"
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/fk")" = "$Y" ] && [ "$(val_losses "$tmp/fk")" = "$(val_losses "$tmp/f")" ]; then
    pass "(f) hybrid on muon, SIGKILL ($how), resume: the uninterrupted run's bits ($Y)"
else fail "(f) hybrid on muon resumed ($how): status $rc, crc $(crc_of "$tmp/fk") vs $Y"; fi

finish
