#!/bin/sh
# tier: fast (make test; tests/run.sh)
# hpt train --init: fine-tuning from an imported GPT-2
# (tests/fixtures/hf, vocab 256, 48 positions, L2 H2 C32). The run starts
# from the model's weights (one step at lr 1e-8 evaluates as torch's loss),
# takes its tokenizer and architecture (mismatched flags refused with the
# reason), trains its loss down, survives SIGKILL + resume bit for bit, and
# exports back to safetensors; a char model's vocabulary is kept and a text
# with a character outside it refused.
test_name=cli_finetune; . tests/lib.sh
fx=tests/fixtures/hf
words_text 7 > $tmp/words.txt
run "$HPT" import --from $fx/model.safetensors --out $tmp/m.bin
[ $rc -eq 0 ] || fail "import: rc $rc"
val() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/summary.json" "$2"; }
small="--data $tmp/words.txt --batch-size 4 --eval-iters 4 --threads 1"

# (a) the weights are the model's: one step at lr 1e-8, then eval = torch
run "$HPT" train --init $tmp/m.bin $small --block-size 48 --max-iters 1 --lr 1e-8 --min-lr 0 --warmup-iters 0 --out $tmp/a
run "$HPT" eval --model $tmp/a/model.bin --data $fx/text.txt --threads 1
got=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["loss"])' $tmp/out 2>/dev/null)
want=$(python3 -c 'import json; print(json.load(open("tests/fixtures/hf/expected.json"))["f32"])')
python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * b)' "$got" "$want" \
    && pass "(a) --init starts from the model's weights: after one step at lr 1e-8 eval $got = torch $want" \
    || fail "(a) eval after --init: $got vs torch $want"

# (b) the architecture and tokenizer come from the model; the loss goes down
run "$HPT" train --init $tmp/m.bin $small --block-size 32 --max-iters 60 --eval-interval 20 --lr 3e-3 --warmup-iters 5 --out $tmp/b
grep -q "L2 H2 C32 V256 (Vp 256) block 32" $tmp/err && grep -q "init       the weights and tokenizer of" $tmp/err \
    && pass "(b) L2 H2 C32, byte tokenizer, block 32 of 48 positions, from the model (no architecture flags)" \
    || fail "(b) architecture from the model: $(grep model $tmp/err)"
first=$(python3 -c 'import json,sys
print([json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l][0])' $tmp/b/metrics.jsonl)
run "$HPT" eval --model $tmp/m.bin --data $tmp/words.txt --threads 1
before=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["loss"])' $tmp/out)
final=$(val $tmp/b final_val_loss)
python3 -c 'import sys; b, f, l = map(float, sys.argv[1:]); sys.exit(not (l < f < b))' "$before" "$first" "$final" \
    && pass "(b) the loss goes down: imported model $before on the text, val $first at step 20, $final at 60" \
    || fail "(b) loss: imported $before, first val $first, final $final"

# (c) SIGKILL + resume: bit for bit the uninterrupted run
ft="--init $tmp/m.bin $small --block-size 32 --max-iters 40 --eval-interval 10 --save-interval 10 --lr 3e-3 --warmup-iters 5"
run "$HPT" train $ft --out $tmp/full
kill_after $tmp/k 2 20 $ft
run "$HPT" train --resume $tmp/k
if [ $rc -eq 0 ] && [ -n "$(crc_of $tmp/full)" ] && [ "$(crc_of $tmp/k)" = "$(crc_of $tmp/full)" ]; then
    pass "(c) SIGKILL ($how) + resume: param_crc32 $(crc_of $tmp/k) = the uninterrupted run's"
else fail "(c) resume: rc $rc, crc $(crc_of $tmp/k) vs $(crc_of $tmp/full)"; fi

# (d) mismatches refused with the reason
for bad in "--n-layer 3:--n-layer 3, but the --init model" "--n-head 4:--n-head 4, but the --init model" \
           "--n-embd 64:--n-embd 64, but" "--block-size 64:longer than the --init model's 48 positions" \
           "--tokenizer char:--tokenizer differs from the --init model's"; do
    flags=${bad%%:*}; why=${bad#*:}
    run "$HPT" train --init $tmp/m.bin $small $flags --max-iters 2 --out $tmp/d
    [ $rc -eq 2 ] && grep -qF -- "$why" $tmp/err && [ ! -e $tmp/d/metrics.jsonl ] && pass "(d) --init with $flags: exit 2, '$why'" \
        || fail "(d) $flags: rc $rc"
done
run "$HPT" train --init $tmp/missing.bin $small --max-iters 2 --out $tmp/d
[ $rc -eq 1 ] && pass "(d) --init of a missing file: exit 1" || fail "(d) missing init: rc $rc"
run "$HPT" train --init $tmp/m.bin --task fashion-mnist --model mlp --max-iters 2 --out $tmp/d
[ $rc -eq 2 ] && grep -q "applies to --task text" $tmp/err && pass "(d) --init with fashion-mnist: exit 2" || fail "(d) fashion: rc $rc"

# (e) export of the fine-tuned model: 32 positions, and back to the same file
run "$HPT" export --model $tmp/b/model.bin --out $tmp/b.safetensors
cp $fx/config.json $tmp/config.json
run "$HPT" import --from $tmp/b.safetensors --out $tmp/b2.bin --n-head 2
cmp -s $tmp/b2.bin $tmp/b/model.bin && pass "(e) the fine-tuned model exports and re-imports byte for byte" || fail "(e) export/import: rc $rc"

# (f) a char model: its vocabulary is kept; a character outside it is refused
printf 'abcd abcd dcba\n' > $tmp/abc.txt; i=0; while [ $i -lt 9 ]; do cat $tmp/abc.txt $tmp/abc.txt > $tmp/abc2.txt; mv $tmp/abc2.txt $tmp/abc.txt; i=$((i + 1)); done
run "$HPT" train --data $tmp/abc.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 --max-iters 3 --eval-iters 1 --threads 1 --out $tmp/c0
tr -d 'd' < $tmp/abc.txt > $tmp/abc_sub.txt
run "$HPT" train --init $tmp/c0/model.bin --data $tmp/abc_sub.txt --batch-size 2 --max-iters 3 --eval-iters 1 --threads 1 --out $tmp/c1
[ $rc -eq 0 ] && grep -q "vocab 6" $tmp/err && pass "(f) a char model's vocabulary (6) kept on a text using 5 of them" || fail "(f) char init: rc $rc"
printf 'abcz abcz\n' > $tmp/z.txt; cat $tmp/abc.txt >> $tmp/z.txt
run "$HPT" train --init $tmp/c0/model.bin --data $tmp/z.txt --batch-size 2 --max-iters 3 --eval-iters 1 --threads 1 --out $tmp/c2
[ $rc -eq 1 ] && grep -q "U+007A at byte 3 is not in the model's vocabulary" $tmp/err && pass "(f) a character outside the vocabulary: refused naming it" \
    || fail "(f) outside char: rc $rc"
finish
