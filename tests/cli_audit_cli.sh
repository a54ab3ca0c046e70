#!/bin/sh
# tier: fast
# cli_audit_cli.sh — the audit's defects on import/export, sample, compare and
# train's flags, each as the audit reproduced it (../shared/reference/
# audit-2026-11-27.md): (4) --out a device node or FIFO, or under /dev,
# refused and left as it was; (11) NaN weights refused by import (the tensor
# named), and by sample, eval and export of a model file; (12) a message
# wrapping the previous one reads whole; (14) export records n_head, so
# import needs no --n-head; trivial: a NUL in the header, a signed or 0x
# char table. The rest of this file: compare and train (7, 9, 15, 16).
test_name=cli_audit_cli; . tests/lib.sh
S="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --eval-interval 10 --threads 1"
words_text 3 > $tmp/c.txt

# stedit IN OUT OPS...: a safetensors file rewritten: nometa (no
# __metadata__), nan=NAME (every value NaN), meta=KEY:VALUE (\0 in VALUE: a NUL)
stedit() {
    python3 - "$@" <<'PY'
import json, struct, sys
src, dst, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
b = open(src, "rb").read(); n = struct.unpack_from("<Q", b, 0)[0]
h = json.loads(b[8:8 + n]); d = bytearray(b[8 + n:])
for op in ops:
    if op == "nometa": h.pop("__metadata__", None)
    elif op.startswith("nan="):
        s, e = h[op[4:]]["data_offsets"]; d[s:e] = struct.pack("<f", float("nan")) * ((e - s) // 4)
    elif op.startswith("meta="):
        k, v = op[5:].split(":", 1); h.setdefault("__metadata__", {})[k] = v.replace("\\0", "\0")
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(d))
PY
}

run "$HPT" train --data $tmp/c.txt --tokenizer byte $S --max-iters 2 --out $tmp/m
[ $rc -eq 0 ] || fail "the byte model: rc $rc"
mkdir $tmp/x
run "$HPT" export --model $tmp/m/model.bin --out $tmp/x/m.st
[ $rc -eq 0 ] || fail "export: rc $rc"

# (4) only a regular file is replaced; a device node (as root: /dev/null's
# numbers, a private node) or a FIFO stays what it was
mkfifo $tmp/ff
kinds="ff:FIFO"
if mknod $tmp/node c 1 3 2>/dev/null; then kinds="$kinds node:device"; else echo "skip the device node: mknod needs root"; fi
for k in $kinds; do
    f=${k%%:*}; what=${k#*:}
    for cmd in "export --model $tmp/m/model.bin" "import --from $tmp/x/m.st"; do
        run "$HPT" $cmd --out $tmp/$f --overwrite
        if [ $rc -eq 2 ] && grep -q "is a $what, not a regular file" $tmp/err && [ ! -f $tmp/$f ] && [ -e $tmp/$f ]; then
            pass "(4) ${cmd%% *} --out a $what --overwrite: refused (exit 2), the $what left as it was"
        else fail "(4) ${cmd%% *} --out a $what --overwrite: rc $rc, $(ls -l $tmp/$f)"; fi
    done
done
ln -s /dev/null $tmp/ln
run "$HPT" export --model $tmp/m/model.bin --out $tmp/ln --overwrite
[ $rc -eq 2 ] && grep -q "is a device" $tmp/err && [ -L $tmp/ln ] && pass "(4) --out a symlink to /dev/null: refused" ||
    fail "(4) --out a symlink to /dev/null: rc $rc"
run "$HPT" export --model $tmp/m/model.bin --out /dev/hpt_audit_$$.st
[ $rc -eq 2 ] && grep -q "under /dev" $tmp/err && [ ! -e /dev/hpt_audit_$$.st ] && pass "(4) --out under /dev: refused" ||
    { fail "(4) --out under /dev: rc $rc"; rm -f /dev/hpt_audit_$$.st; }
run "$HPT" export --model $tmp/m/model.bin --out $tmp/x/again.st && run "$HPT" export --model $tmp/m/model.bin --out $tmp/x/again.st --overwrite
[ $rc -eq 0 ] && cmp -s $tmp/x/again.st $tmp/x/m.st && pass "(4) a regular file is still replaced with --overwrite" ||
    fail "(4) --overwrite of a regular file: rc $rc"

# (14) export records n_head: import in a directory without config.json,
# no --n-head, and the round trip is byte for byte
run "$HPT" import --from $tmp/x/m.st --out $tmp/x/m.bin
if [ $rc -eq 0 ] && cmp -s $tmp/x/m.bin $tmp/m/model.bin; then
    pass "(14) export then import without --n-head or config.json: the same model.bin"
else fail "(14) import of an export without --n-head: rc $rc"; fi
stedit $tmp/x/m.st $tmp/x/h.st meta=hpt_n_head:+2
run "$HPT" import --from $tmp/x/h.st --out $tmp/x/h.bin
[ $rc -eq 1 ] && grep -q "hpt_n_head '+2' is not a head count" $tmp/err && pass "(14) hpt_n_head '+2' refused" ||
    fail "(14) hpt_n_head '+2': rc $rc"

# (12) a message wrapping the one before it: whole, not formatted into itself
stedit $tmp/x/m.st $tmp/x/bare.st nometa
run "$HPT" import --from $tmp/x/bare.st --out $tmp/x/bare.bin
want="no --n-head given and no readable config.json beside '$tmp/x/bare.st' (cannot open '$tmp/x/config.json': No such file or directory) (invalid argument)"
[ $rc -eq 2 ] && [ "$(cat $tmp/err)" = "hpt: error: $want" ] && pass "(12) the wrapped message reads whole" ||
    fail "(12) wrapped message: rc $rc, '$(cat $tmp/err)'"
mkfifo $tmp/x/config.json
run "$HPT" import --from $tmp/x/bare.st --out $tmp/x/bare.bin
[ $rc -eq 2 ] && grep -q "beside '$tmp/x/bare.st' ('$tmp/x/config.json' is not a regular file (it is a FIFO)" $tmp/err &&
    pass "(12) a FIFO config.json: the inner reason whole" || fail "(12) FIFO config.json: '$(cat $tmp/err)'"
rm -f $tmp/x/config.json

# (11) non-finite weights: import refuses, naming the tensor; sample, eval
# and export refuse a model file holding one (sample printed one constant
# byte with exit 0)
stedit $tmp/x/m.st $tmp/x/nan.st nan=h.0.mlp.c_fc.weight
run "$HPT" import --from $tmp/x/nan.st --out $tmp/x/nan.bin --n-head 2
[ $rc -eq 1 ] && grep -q "tensor 'h.0.mlp.c_fc.weight' holds a non-finite value (NaN at element 0)" $tmp/err &&
    [ ! -e $tmp/x/nan.bin ] && pass "(11) import of a NaN tensor: refused naming it, nothing written" ||
    fail "(11) import NaN: rc $rc"
python3 - $tmp/m/model.bin $tmp/nan.bin <<'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"PARM") + 16 + 8 + 4 * 300   # wte's element 300
b[i:i + 4] = struct.pack("<f", float("inf"))
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
PY
for cmd in "sample --model $tmp/nan.bin --tokens 8" "eval --model $tmp/nan.bin --data $tmp/c.txt" \
           "export --model $tmp/nan.bin --out $tmp/nan.st"; do
    run "$HPT" $cmd
    if [ $rc -eq 1 ] && grep -q "weights are not finite: inf at parameter 300 (tensor 'wte', element 300)" $tmp/err &&
       [ ! -s $tmp/out ] && [ ! -e $tmp/nan.st ]; then
        pass "(11) ${cmd%% *} of a model holding an inf: refused naming the tensor, nothing printed or written"
    else fail "(11) ${cmd%% *} of an inf model: rc $rc, out '$(head -c 40 $tmp/out)'"; fi
done

# trivial: a NUL inside a header string ("byte\u0000x" read as byte), a
# char table with signs or 0x (strtoul's extras)
stedit $tmp/x/m.st $tmp/x/nul.st 'meta=hpt_tokenizer:byte\0x'
run "$HPT" import --from $tmp/x/nul.st --out $tmp/x/nul.bin
[ $rc -eq 1 ] && grep -q "holds a NUL character" $tmp/err && pass "(trivial) a NUL in the header refused" ||
    fail "(trivial) NUL in the header: rc $rc"
run "$HPT" train --data $tmp/c.txt --tokenizer char $S --max-iters 2 --out $tmp/ch
run "$HPT" export --model $tmp/ch/model.bin --out $tmp/x/ch.st
chars=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack_from("<Q",b)[0]
print(json.loads(b[8:8+n])["__metadata__"]["hpt_chars"])' $tmp/x/ch.st)
for bad in "+$chars" "0x$chars"; do
    stedit $tmp/x/ch.st $tmp/x/chb.st "meta=hpt_chars:$bad"
    run "$HPT" import --from $tmp/x/chb.st --out $tmp/x/chb.bin
    [ $rc -eq 1 ] && grep -q "hpt_chars is not" $tmp/err && pass "(trivial) hpt_chars '$(echo "$bad" | cut -c1-6)...' refused" ||
        fail "(trivial) hpt_chars '$(echo "$bad" | cut -c1-6)...': rc $rc"
done
run "$HPT" import --from $tmp/x/ch.st --out $tmp/x/ch.bin
[ $rc -eq 0 ] && cmp -s $tmp/x/ch.bin $tmp/ch/model.bin && pass "(trivial) the char table as export writes it: imported" ||
    fail "(trivial) char model round trip: rc $rc"

# (16) a warmup at or past the run's length: --warmup-iters given is
# refused naming both flags, before anything is written (train and compare,
# whose budget runs keep the warmup); the default 100 on a shorter run is a
# warning line
run "$HPT" train --data $tmp/c.txt $S --max-iters 10 --warmup-iters 50 --out $tmp/wu
[ $rc -eq 2 ] && grep -q -- "--warmup-iters 50 is not below --max-iters 10" $tmp/err && [ ! -e $tmp/wu ] &&
    pass "(16) train --max-iters 10 --warmup-iters 50: refused naming both, nothing written" || fail "(16) train warmup 50 of 10: rc $rc"
run "$HPT" train --data $tmp/c.txt $S --max-iters 10 --warmup-iters 9 --out $tmp/wu9
[ $rc -eq 0 ] && pass "(16) --warmup-iters 9 of 10: trains" || fail "(16) warmup 9 of 10: rc $rc"
run "$HPT" train --data $tmp/c.txt $S --max-iters 10 --out $tmp/wud
[ $rc -eq 0 ] && grep -q "warning    warmup 100 is not below the run's 10 iters" $tmp/err &&
    pass "(16) the default warmup 100 on a 10-step run: trains, with a warning line" || fail "(16) default warmup: rc $rc"
C="--data $tmp/c.txt $S --lrs 1e-3 --seeds 1 --arms baseline"
run "$HPT" compare $C --max-iters 10 --warmup-iters 10 --out $tmp/cw
[ $rc -eq 2 ] && grep -q -- "--warmup-iters 10 is not below --max-iters 10" $tmp/err && [ ! -e $tmp/cw ] &&
    pass "(16) compare --warmup-iters 10 of 10: refused before any directory" || fail "(16) compare warmup: rc $rc"
run "$HPT" compare $C --max-iters 10 --warmup-iters 2 --budgets 0.1 --out $tmp/cw
[ $rc -eq 2 ] && grep -q -- "--budgets 0.1 gives runs of 1 steps, not past --warmup-iters 2" $tmp/err && [ ! -e $tmp/cw ] &&
    pass "(16) compare --budgets 0.1 of 10 steps past --warmup-iters 2: refused before any directory" ||
    fail "(16) compare budget under the warmup: rc $rc"

# (7) compare's rates stay in train's [1e-9, 10]: --lrs outside it is a
# usage error before anything is written, and the extension at the lower
# edge stops at 1e-9 (status limit) instead of running a rate train refuses
C="--data $tmp/c.txt $S --max-iters 10 --warmup-iters 2 --seeds 1 --arms baseline"
run "$HPT" compare $C --lrs 1e-30 --out $tmp/c7
[ $rc -eq 2 ] && grep -q "must be in \[1e-9, 10\]" $tmp/err && [ ! -e $tmp/c7 ] &&
    pass "(7) --lrs 1e-30: exit 2, nothing written" || fail "(7) --lrs 1e-30: rc $rc"
run "$HPT" compare $C --lrs 2e-9,10 --out $tmp/c7
lim=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["sweep_extension"]["baseline"]; print(e["status"], e["edge"])' $tmp/c7/results.json 2>/dev/null)
[ $rc -eq 0 ] && [ "$lim" = "limit lower" ] && ! ls $tmp/c7/runs | grep -q e-1[0-9] &&
    pass "(7) --lrs 2e-9,10, best at the lower edge: exit 0, extension status 'limit', no rate below 1e-9 run" ||
    fail "(7) --lrs 2e-9,10: rc $rc, extension '$lim', runs $(ls $tmp/c7/runs 2>/dev/null | tr '\n' ' ')"

# (9) without the arm hybrid there is no headline: null in results.json, said
# so in results.md; and a single rate is said to be untuned
run "$HPT" compare $C --lrs 1e-3 --out $tmp/c9
hl=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print([r[k] for k in ("speedup_time_to_target","speedup_steps_to_target","final_val_ratio")])' $tmp/c9/results.json 2>/dev/null)
[ $rc -eq 0 ] && [ "$hl" = "[None, None, None]" ] && ! grep -q "Headline (hybrid" $tmp/c9/results.md &&
    grep -q "No headline: it is the hybrid arm's" $tmp/c9/results.md && grep -q "baseline's lr 0.001 was not swept" $tmp/err &&
    pass "(9) --arms baseline: no hybrid headline (null, and said so); one rate warned as not tuned" ||
    fail "(9) baseline only: rc $rc, headline '$hl', $(tail -1 $tmp/c9/results.md)"

# (15) what every run would refuse is refused before anything is written:
# a device this machine cannot use, an --out that is an hpt train run
run "$HPT" compare $C --lrs 1e-3 --device nosuch --out $tmp/c15
[ $rc -eq 2 ] && [ ! -e $tmp/c15 ] && pass "(15) compare --device nosuch: exit 2, no directory" ||
    fail "(15) --device nosuch: rc $rc, $(ls $tmp/c15 2>&1)"
if ! "$HPT" eval --model $tmp/m/model.bin --data $tmp/c.txt --device cuda >/dev/null 2>&1; then
    run "$HPT" compare $C --lrs 1e-3 --device cuda --out $tmp/c15
    [ $rc -eq 2 ] && [ ! -e $tmp/c15 ] && pass "(15) compare --device cuda without a usable GPU: exit 2, no directory" ||
        fail "(15) --device cuda: rc $rc"
fi
run "$HPT" compare $C --lrs 1e-3 --out $tmp/m
[ $rc -eq 2 ] && grep -q "is an hpt train run directory" $tmp/err && [ ! -e $tmp/m/runs ] && [ ! -e $tmp/m/results.json ] &&
    pass "(15) compare --out an hpt train run: refused, nothing written into it" || fail "(15) --out a run: rc $rc"

# trivial: an empty list item, a repeated arm
for bad in "--lrs 1e-3,,2e-3:--lrs has an empty item" "--lrs 1e-3,:--lrs has an empty item" \
           "--budgets 0.5,,1:--budgets has an empty item" "--arms baseline,baseline:--arms lists 'baseline' twice"; do
    run "$HPT" compare --data $tmp/c.txt $S --max-iters 10 --seeds 1 ${bad%%:*} --out $tmp/ct
    [ $rc -eq 2 ] && grep -q -- "${bad#*:}" $tmp/err && [ ! -e $tmp/ct ] && pass "(trivial) compare ${bad%%:*}: exit 2" ||
        fail "(trivial) compare ${bad%%:*}: rc $rc"
done

# trivial: a resume of a finished run times no step: no "nan ms/step"
run "$HPT" train --data $tmp/c.txt $S --max-iters 4 --warmup-iters 1 --save-interval 2 --out $tmp/fin
run "$HPT" train --resume $tmp/fin
[ $rc -eq 0 ] && grep -q "^done .*no step run here" $tmp/err $tmp/out && ! grep -qi "nan" $tmp/err $tmp/out &&
    pass "(trivial) --resume of a finished run: 'no step run here', no nan" || fail "(trivial) resume finished: rc $rc, $(grep -h '^done' $tmp/err $tmp/out)"

# trivial: a given --tokenizer that differs from the shard manifest's is
# refused (the manifest's was used without a word); the same one, or none, trains
run "$HPT" tokenize --out $tmp/shc --tokenizer char --threads 1 --shard-tokens 5000 $tmp/c.txt
run "$HPT" train --data $tmp/shc --tokenizer gpt2 $S --max-iters 2 --warmup-iters 1 --out $tmp/tk1
[ $rc -eq 2 ] && grep -q -- "--tokenizer gpt2 differs from the tokenizer of the shards' manifest" $tmp/err && [ ! -e $tmp/tk1 ] &&
    pass "(trivial) --tokenizer gpt2 on char shards: refused naming the manifest" || fail "(trivial) tokenizer vs manifest: rc $rc"
run "$HPT" train --data $tmp/shc --tokenizer char $S --max-iters 2 --warmup-iters 1 --out $tmp/tk2
[ $rc -eq 0 ] && pass "(trivial) --tokenizer char on char shards: trains" || fail "(trivial) --tokenizer char on char shards: rc $rc"
# trivial: a manifest that lists a shard twice is refused (the repeat had
# been skipped and its counts written over the last shard's); the repeat
# check is one sort, not the quadratic scan (40,000 entries: 5.5 s -> 0.2 s)
cp -r $tmp/shc $tmp/shd
python3 - $tmp/shd/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["shards"].append(m["shards"][1]); json.dump(m, open(sys.argv[1], "w"))
PY
run "$HPT" train --data $tmp/shd $S --max-iters 2 --warmup-iters 1 --out $tmp/tk3
[ $rc -eq 1 ] && grep -q "manifest.json' lists 'shard_train_000000.bin' twice" $tmp/err && [ ! -e $tmp/tk3/metrics.jsonl ] &&
    pass "(trivial) a manifest listing a shard twice: refused naming it" || fail "(trivial) repeated manifest entry: rc $rc"
# (15, beyond) compare --out into the shard directory itself
run "$HPT" compare --data $tmp/shc $S --max-iters 10 --warmup-iters 2 --lrs 1e-3 --seeds 1 --arms baseline --out $tmp/shc
[ $rc -eq 2 ] && grep -q "is a token shard directory" $tmp/err && [ ! -e $tmp/shc/runs ] &&
    pass "(15) compare --out a token shard directory: refused, nothing written" || fail "(15) --out shards: rc $rc"

finish
