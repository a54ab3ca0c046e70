#!/bin/sh
# tier: fast
# cli_audit_data.sh — the audit's defects on token shards, tokenize and
# compare's data identity, each as the audit reproduced it (../shared/
# reference/audit-2026-11-27.md), on a few KB of shards:
#   (1) a resume notices that shards changed (same sizes, same max id,
#       other ids), as it does a text file; nanoGPT's val.bin alone too
#   (2) a directory an interrupted tokenize left (part files, shards, no
#       manifest) is refused, by directory and by glob; running the same
#       tokenize again finishes it (byte-identical shards); a finished one
#       and a directory with other files are refused, nothing touched
#   (3) a shard truncated under a running train, and a tokenize input
#       truncated while mapped: exit 1 naming the file (not SIGBUS), the
#       last checkpoint kept, no part files left
#   (5) compare reruns after the data changed when --data is a glob of
#       shards, or nanoGPT's val.bin changed
#   (6) mapped pages no longer count: a 300 MB sparse train.bin trains
#       under --rss-limit 200; eval reads the validation files only
#   (8) an id past the manifest's max_id (or the vocabulary) is refused
#       before the first step, naming the shard and position
#   (10) a --data directory named d[1] reads its own shards, not d1's
#   trivial: a FIFO named *_train_*.bin is refused by name
test_name=cli_audit_data; . tests/lib.sh
S="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --eval-interval 10 --threads 1"
for seed in 1 2 3; do words_text $seed; done >"$tmp/c.txt"
"$HPT" tokenize --out "$tmp/sh" --tokenizer byte --threads 1 --shard-tokens 10000 "$tmp/c.txt" 2>/dev/null ||
    { echo "FAIL tokenize"; exit 1; }

# ids DIR GLOB OP: every matching shard's ids rewritten in place (llm.c
# header kept): rev (reversed: same size, same max id), inc (+1, capped at
# 255), set0=V (the first id set to V)
ids() {
    python3 - "$@" <<'EOF'
import glob, struct, sys
d, pat, op = sys.argv[1:4]
for p in sorted(glob.glob(d + "/" + pat)):
    b = bytearray(open(p, "rb").read()); off = 0 if p.endswith("/train.bin") or p.endswith("/val.bin") else 1024
    n = (len(b) - off) // 2; v = list(struct.unpack_from("<%dH" % n, b, off))
    if op == "rev": v.reverse()
    elif op == "inc": v = [min(i + 1, 255) for i in v]
    elif op.startswith("set0="): v[0] = int(op[5:])
    struct.pack_into("<%dH" % n, b, off, *v); open(p, "wb").write(b)
EOF
}

# ---------------------------------------------------------------- (1)
cp -r "$tmp/sh" "$tmp/sh1"
run "$HPT" train --data "$tmp/sh1" $S --max-iters 20 --save-interval 10 --out "$tmp/r1"
ids "$tmp/sh1" "shard_train_*.bin" rev
run "$HPT" train --resume "$tmp/r1"
if [ $rc -eq 1 ] && grep -q "changed since" "$tmp/err"; then pass "(1) resume on rewritten shards: refused ($(head -c 120 "$tmp/err"))"
else fail "(1) resume on rewritten shards: exit $rc, not refused"; fi
run "$HPT" train --resume "$tmp/r1" --allow-data-change
[ $rc -eq 0 ] && pass "(1) --allow-data-change goes on with the rewritten shards" || fail "(1) --allow-data-change: exit $rc"

# a checkpoint of an hpt before this fix recorded shards as 0 bytes / CRC 0:
# resumed with a note (it cannot be checked), not refused as changed
cp -r "$tmp/sh" "$tmp/sh0"
run "$HPT" train --data "$tmp/sh0" $S --max-iters 20 --save-interval 10 --out "$tmp/r0"
cut_after "$tmp/r0" 10; rm -f "$tmp/r0/summary.json"
python3 - "$tmp/r0/checkpoints/ckpt-00000010.bin" <<'EOF'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read()); o = struct.unpack_from("<I", b, 12)[0]
while o < len(b) - 4:
    tag, n = bytes(b[o:o + 4]), struct.unpack_from("<Q", b, o + 8)[0]
    if tag == b"DSRC": b[o + 16:o + 28] = bytes(12)
    o += 16 + n
struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
open(sys.argv[1], "wb").write(b)
EOF
run "$HPT" train --resume "$tmp/r0"
[ $rc -eq 0 ] && grep -q "holds no identity of its data" "$tmp/out" "$tmp/err" &&
    pass "(1) an older hpt's shard checkpoint (DSRC 0 bytes, CRC 0): resumed with a note" ||
    fail "(1) older shard checkpoint: exit $rc"

# a char manifest's vocabulary is part of the identity: one codepoint moved
# (the ids unchanged) is other data
"$HPT" tokenize --out "$tmp/chs" --tokenizer char --threads 1 "$tmp/c.txt" 2>/dev/null
run "$HPT" train --data "$tmp/chs" $S --max-iters 20 --save-interval 10 --out "$tmp/rch"
cut_after "$tmp/rch" 10; rm -f "$tmp/rch/summary.json"
python3 - "$tmp/chs/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); m["codepoints"][-1] += 1
json.dump(m, open(sys.argv[1], "w"), indent=2)
EOF
run "$HPT" train --resume "$tmp/rch"
[ $rc -eq 1 ] && grep -q "changed since" "$tmp/err" && pass "(1) a char manifest's codepoint moved: resume refused" ||
    fail "(1) char manifest's codepoints changed: exit $rc"

mkdir "$tmp/ng"
python3 - "$tmp/c.txt" "$tmp/ng" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read(); cut = len(b) * 9 // 10
open(sys.argv[2] + "/train.bin", "wb").write(struct.pack("<%dH" % cut, *b[:cut]))
open(sys.argv[2] + "/val.bin", "wb").write(struct.pack("<%dH" % (len(b) - cut), *b[cut:]))
EOF
cp -r "$tmp/ng" "$tmp/ng0"
run "$HPT" train --data "$tmp/ng" --tokenizer byte $S --max-iters 20 --save-interval 10 --out "$tmp/rn"
ids "$tmp/ng" "val.bin" inc
run "$HPT" train --resume "$tmp/rn"
[ $rc -eq 1 ] && grep -q "changed since" "$tmp/err" && pass "(1) nanoGPT: a changed val.bin alone is noticed" ||
    fail "(1) nanoGPT: a changed val.bin: exit $rc"

# ---------------------------------------------------------------- (2)
cp -r "$tmp/sh" "$tmp/un" && rm "$tmp/un/manifest.json" && : >"$tmp/un/.part-000009.tmp"
run "$HPT" train --data "$tmp/un" --tokenizer byte $S --max-iters 2 --out "$tmp/ru"
[ $rc -eq 1 ] && grep -q "unfinished hpt tokenize" "$tmp/err" && [ ! -e "$tmp/ru/summary.json" ] &&
    pass "(2) an unfinished tokenize's directory: refused" || fail "(2) unfinished directory: exit $rc"
run "$HPT" train --data "$tmp/un/shard_train_*.bin" --tokenizer byte $S --max-iters 2 --out "$tmp/ru2"
[ $rc -eq 1 ] && grep -q "unfinished hpt tokenize" "$tmp/err" && pass "(2) ... and by a glob of its shards" ||
    fail "(2) unfinished directory by glob: exit $rc"
rm "$tmp/un/.part-000009.tmp"   # all shards, no manifest: a write of the manifest that failed
run "$HPT" train --data "$tmp/un" --tokenizer byte $S --max-iters 2 --out "$tmp/ru3"
[ $rc -eq 1 ] && grep -q "unfinished" "$tmp/err" && pass "(2) shards without their manifest: refused" ||
    fail "(2) shards without a manifest: exit $rc"
: >"$tmp/un/.part-000009.tmp"; : >"$tmp/un/manifest.json.tmp.123"
run "$HPT" tokenize --out "$tmp/un" --tokenizer byte --threads 1 --shard-tokens 10000 "$tmp/c.txt"
same=1; for f in "$tmp/sh"/*; do cmp -s "$f" "$tmp/un/$(basename "$f")" || same=0; done
[ $rc -eq 0 ] && [ $same = 1 ] && [ "$(ls -A "$tmp/un" | wc -l)" = "$(ls -A "$tmp/sh" | wc -l)" ] &&
    pass "(2) the same tokenize again finishes it: the fresh run's bytes, no leftovers" ||
    fail "(2) tokenize re-run: exit $rc, same $same, $(ls -A "$tmp/un" | tr '\n' ' ')"
run "$HPT" tokenize --out "$tmp/un" --tokenizer byte --threads 1 "$tmp/c.txt"
[ $rc -eq 2 ] && grep -q "finished tokenisation" "$tmp/err" && pass "(2) a finished directory: refused" ||
    fail "(2) tokenize into a finished directory: exit $rc"
mkdir "$tmp/mine" && : >"$tmp/mine/notes.txt" && : >"$tmp/mine/.part-000000.tmp"
run "$HPT" tokenize --out "$tmp/mine" --tokenizer byte --threads 1 "$tmp/c.txt"
[ $rc -eq 2 ] && [ -e "$tmp/mine/.part-000000.tmp" ] && [ -e "$tmp/mine/notes.txt" ] &&
    pass "(2) a directory with other files: refused, nothing removed" || fail "(2) other files: exit $rc"
mkdir "$tmp/inout" && head -c 5000 "$tmp/c.txt" >"$tmp/inout/shard_train_000001.bin"
run "$HPT" tokenize --out "$tmp/inout" --tokenizer byte "$tmp/inout/shard_train_000001.bin"
[ $rc -eq 2 ] && [ -s "$tmp/inout/shard_train_000001.bin" ] &&
    pass "(2) an input inside --out with a leftover's name: refused, not cleared" || fail "(2) input inside --out: exit $rc"
if command -v strace >/dev/null 2>&1; then
    # SIGKILL at the 3rd rename: some shards in place, no manifest
    for seed in 4 5 6 7 8 9; do words_text $seed; done >"$tmp/big.txt"
    ASAN_OPTIONS=detect_leaks=0 strace -f -qq -o /dev/null -e trace=rename -e inject=rename:signal=SIGKILL:when=3 \
        "$HPT" tokenize --out "$tmp/tk" --tokenizer byte --threads 1 --shard-tokens 5000 "$tmp/big.txt" >/dev/null 2>&1
    run "$HPT" train --data "$tmp/tk" --tokenizer byte $S --max-iters 2 --out "$tmp/rk"
    r1=$rc
    run "$HPT" tokenize --out "$tmp/tk" --tokenizer byte --threads 1 --shard-tokens 5000 "$tmp/big.txt"
    r2=$rc
    "$HPT" tokenize --out "$tmp/tk0" --tokenizer byte --threads 1 --shard-tokens 5000 "$tmp/big.txt" 2>/dev/null
    same=1; for f in "$tmp/tk0"/*; do cmp -s "$f" "$tmp/tk/$(basename "$f")" || same=0; done
    [ $r1 = 1 ] && [ $r2 = 0 ] && [ $same = 1 ] && [ -z "$(ls -A "$tmp/tk" | grep '^\.')" ] &&
        pass "(2) killed at the 3rd rename: refused by train; the re-run equals a fresh tokenize" ||
        fail "(2) killed tokenize: train exit $r1, re-run exit $r2, same $same"
else pass "(2) kill at a rename: skipped (no strace)"; fi

# ---------------------------------------------------------------- (3)
cp -r "$tmp/sh" "$tmp/sh3"
"$HPT" train --data "$tmp/sh3" $S --max-iters 1000000 --save-interval 20 --eval-interval 100000 --out "$tmp/r3" \
    >/dev/null 2>"$tmp/r3.err" &
p3=$!; pids="$pids $p3"
i=0; while [ "$(nckpt "$tmp/r3")" -lt 1 ] && kill -0 $p3 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
for f in "$tmp/sh3"/shard_train_*.bin; do truncate -s 1024 "$f"; done
i=0; while kill -0 $p3 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
kill -9 $p3 2>/dev/null; wait $p3; rc=$?
if [ $rc -eq 1 ] && grep -q "shard_train_.*changed while hpt read it" "$tmp/r3.err" && [ "$(nckpt "$tmp/r3")" -ge 1 ]; then
    pass "(3) shards truncated under a run: exit 1 naming the shard, $(nckpt "$tmp/r3") checkpoint(s) kept"
else fail "(3) shards truncated under a run: exit $rc ($(tail -c 200 "$tmp/r3.err"))"; fi
# ids rewritten in place (same size) under a running train: the first bad id
# read is exit 1 naming the shard and position (it was exit 2, "invalid
# argument", from the model)
cp -r "$tmp/sh" "$tmp/sh8"
"$HPT" train --data "$tmp/sh8" $S --max-iters 1000000 --save-interval 20 --eval-interval 100000 --out "$tmp/r38" \
    >/dev/null 2>"$tmp/r38.err" &
p8=$!; pids="$pids $p8"
i=0; while [ "$(nckpt "$tmp/r38")" -lt 1 ] && kill -0 $p8 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
python3 - "$tmp/sh8" <<'EOF'
import glob, sys
for p in glob.glob(sys.argv[1] + "/shard_train_*.bin"):
    with open(p, "r+b") as f:
        f.seek(1024); n = len(f.read()); f.seek(1024); f.write(b"\xff" * n)
EOF
i=0; while kill -0 $p8 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
kill -9 $p8 2>/dev/null; wait $p8; rc=$?
[ $rc -eq 1 ] && grep -q "shard_train_.*token id 65535 at token .* changed after the run opened it" "$tmp/r38.err" &&
    pass "(3, 8) ids rewritten in place under a run: exit 1 naming the shard and position" ||
    fail "(3, 8) ids rewritten under a run: exit $rc ($(tail -c 200 "$tmp/r38.err"))"
if command -v strace >/dev/null 2>&1; then
    # the input's mmap (strace -P: calls on that file only) held for 2 s
    # while it is truncated; LeakSanitizer cannot run under ptrace
    for tok in byte char; do
        cp "$tmp/c.txt" "$tmp/in.txt"
        ASAN_OPTIONS=detect_leaks=0 strace -f -qq -o /dev/null -P "$tmp/in.txt" -e trace=mmap \
            -e inject=mmap:delay_exit=2000000 "$HPT" tokenize --out "$tmp/t3$tok" --tokenizer $tok --threads 2 "$tmp/in.txt" >/dev/null 2>"$tmp/err" &
        p=$!; pids="$pids $p"
        sleep 0.7; truncate -s 100 "$tmp/in.txt"; wait $p; rc=$?
        [ $rc -eq 1 ] && grep -q "in.txt' changed while hpt tokenize read it" "$tmp/err" &&
            [ -z "$(ls -A "$tmp/t3$tok" 2>/dev/null)" ] &&
            pass "(3) tokenize ($tok) input truncated while mapped: exit 1 naming it, nothing left" ||
            fail "(3) tokenize ($tok) input truncated: exit $rc"
    done
else pass "(3) tokenize input truncated: skipped (no strace)"; fi

# ---------------------------------------------------------------- (5)
mkdir "$tmp/cg" && cp "$tmp/sh/shard_train_000001.bin" "$tmp/cg/c_train_1.bin" &&
    cp "$tmp/sh/shard_val_000000.bin" "$tmp/cg/c_val_0.bin"
C="--tokenizer byte --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 10 --warmup-iters 2
   --eval-iters 2 --threads 1 --lrs 1e-3 --seeds 1 --arms baseline"
cmp_run() { run "$HPT" compare --data "$1" $C --out "$2"; }
cmp_run "$tmp/cg/*train*.bin" "$tmp/co"
ids "$tmp/cg" "c_val_0.bin" inc
cmp_run "$tmp/cg/*train*.bin" "$tmp/co"
[ $rc -eq 0 ] && ! grep -q "reused" "$tmp/err" && pass "(5) compare, a glob of shards: a changed val shard reruns" ||
    fail "(5) compare glob: exit $rc, $(grep -c reused "$tmp/err") reused"
cmp_run "$tmp/cg/*train*.bin" "$tmp/co"
[ $rc -eq 0 ] && grep -q "reused" "$tmp/err" && pass "(5) ... and unchanged data is reused" || fail "(5) compare glob: not reused"
cp -r "$tmp/ng0" "$tmp/ng5"
cmp_run "$tmp/ng5/train.bin" "$tmp/co5"
ids "$tmp/ng5" "val.bin" inc
cmp_run "$tmp/ng5/train.bin" "$tmp/co5"
[ $rc -eq 0 ] && ! grep -q "reused" "$tmp/err" && pass "(5) compare, nanoGPT train.bin: a changed val.bin reruns" ||
    fail "(5) compare nanoGPT: exit $rc, $(grep -c reused "$tmp/err") reused"

# ---------------------------------------------------------------- (6)
mkdir "$tmp/sp" && truncate -s 300000000 "$tmp/sp/train.bin" && head -c 4000 /dev/zero >"$tmp/sp/val.bin"
run "$HPT" train --data "$tmp/sp" --tokenizer byte $S --max-iters 3 --rss-limit 200 --out "$tmp/rs"
[ $rc -eq 0 ] && pass "(6) 300 MB of train.bin under --rss-limit 200: trains" || fail "(6) --rss-limit: exit $rc"
mkdir "$tmp/ev" && cp "$tmp/ng0/val.bin" "$tmp/ev/val.bin" && head -c 3001 /dev/zero >"$tmp/ev/train.bin"
run "$HPT" eval --model "$tmp/rs/model.bin" --data "$tmp/ev"
[ $rc -eq 0 ] && grep -q '"tokens"' "$tmp/out" && pass "(6) eval reads the validation files only (a bad train.bin beside)" ||
    fail "(6) eval opened the train files: exit $rc"

mkdir "$tmp/vo" && cp "$tmp/sh/shard_val_000000.bin" "$tmp/vo/x_val_0.bin"
ok=1
for d in "$tmp/vo" "$tmp/vo/*val*.bin" "$tmp/ev/val.bin"; do
    run "$HPT" eval --model "$tmp/rs/model.bin" --data "$d"; [ $rc -eq 0 ] || ok=0
done
run "$HPT" train --data "$tmp/vo" --tokenizer byte $S --max-iters 2 --out "$tmp/rvo"
[ $ok = 1 ] && [ $rc -eq 1 ] && pass "(6) eval takes validation files alone (a directory, a glob, val.bin); train still needs both" ||
    fail "(6) validation files alone: eval ok $ok, train exit $rc"

# ---------------------------------------------------------------- (8)
cp -r "$tmp/sh" "$tmp/b8" && ids "$tmp/b8" "shard_*.bin" set0=250
run "$HPT" train --data "$tmp/b8" $S --max-iters 2 --out "$tmp/r8"
[ $rc -eq 1 ] && grep -q "past its manifest's max_id" "$tmp/err" && pass "(8) an id past the manifest's max_id: refused" ||
    fail "(8) id past max_id: exit $rc"
cp -r "$tmp/sh" "$tmp/b9" && ids "$tmp/b9" "shard_*.bin" set0=65535
run "$HPT" train --data "$tmp/b9" $S --max-iters 2 --out "$tmp/r9"
[ $rc -eq 1 ] && grep -q "token id 65535 (at token 0) is outside" "$tmp/err" &&
    pass "(8) id 65535 under a manifest: refused before the first step" || fail "(8) id 65535: exit $rc"
run "$HPT" eval --model "$tmp/rs/model.bin" --data "$tmp/b9"
[ $rc -eq 1 ] && pass "(8) ... and by eval (exit 1)" || fail "(8) eval of id 65535: exit $rc"

# ---------------------------------------------------------------- (10)
mkdir "$tmp/g" "$tmp/g/d[1]" "$tmp/g/d1"
cp "$tmp/sh/shard_val_000000.bin" "$tmp/g/d[1]/a_val_0.bin"; cp "$tmp/sh/shard_train_000001.bin" "$tmp/g/d[1]/a_train_0.bin"
cp "$tmp/sh/shard_val_000000.bin" "$tmp/g/d1/b_val_0.bin"; cp "$tmp/sh/shard_train_000002.bin" "$tmp/g/d1/b_train_0.bin"
cp "$tmp/sh/shard_train_000003.bin" "$tmp/g/d1/b_train_1.bin"
run "$HPT" train --data "$tmp/g/d[1]" --tokenizer byte $S --max-iters 2 --out "$tmp/rg"
cat "$tmp/out" "$tmp/err" | grep -q "10000 train / .* in 1 + 1 llm.c" && pass "(10) --data d[1] reads d[1]'s shard, not d1's" ||
    fail "(10) d[1]: exit $rc $(cat "$tmp/out" "$tmp/err" | grep '^data')"
run "$HPT" train --data "$tmp/g/d[1]/a_train_0.bin" --tokenizer byte $S --max-iters 2 --out "$tmp/rg2"
cat "$tmp/out" "$tmp/err" | grep -q "10000 train / .* in 1 + 1 llm.c" && pass "(10) a literal d[1]/a_train_0.bin finds its own val shard" ||
    fail "(10) d[1]/a_train_0.bin: exit $rc $(cat "$tmp/out" "$tmp/err" | grep '^data')"

# ---------------------------------------------------------------- more shards than open files
"$HPT" tokenize --out "$tmp/many" --tokenizer byte --threads 1 --shard-tokens 300 "$tmp/c.txt" 2>/dev/null
if [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -gt 400 ]; then
    (ulimit -Sn 100; "$HPT" train --data "$tmp/many" --tokenizer byte $S --max-iters 2 --out "$tmp/rm" >"$tmp/out" 2>"$tmp/err")
    rc=$?
    [ $rc -eq 0 ] && pass "$(ls "$tmp/many" | wc -l) shards under a soft limit of 100 open files: the limit is raised" ||
        fail "many shards: exit $rc"
fi
(ulimit -Sn 100; ulimit -Hn 100; "$HPT" train --data "$tmp/many" --tokenizer byte $S --max-iters 2 --out "$tmp/rm2" \
    >"$tmp/out" 2>"$tmp/err")
rc=$?
[ $rc -eq 1 ] && grep -q "every shard stays open for the run" "$tmp/err" &&
    pass "... and past the hard limit: exit 1 saying why" || fail "many shards past the hard limit: exit $rc"

# ---------------------------------------------------------------- trivial
mkdir "$tmp/ff" && cp "$tmp/sh/shard_val_000000.bin" "$tmp/ff/a_val_0.bin" && mkfifo "$tmp/ff/a_train_0.bin"
run "$HPT" train --data "$tmp/ff" --tokenizer byte $S --max-iters 2 --out "$tmp/rf"
[ $rc -eq 1 ] && grep -q "a_train_0.bin' (matched by .*) is not a regular file" "$tmp/err" &&
    pass "a FIFO named *_train_*.bin: refused by name" || fail "FIFO shard: exit $rc"
# --shard-tokens so small that the corpus would be over 10,000 shards: refused
# before any work where the tokenizer gives the count a floor (byte: 60 KB;
# gpt2's count is checked as it goes: cli_tokenize.sh)
run "$HPT" tokenize --out "$tmp/tiny" --tokenizer byte --threads 1 --shard-tokens 2 "$tmp/c.txt"
[ $rc -eq 2 ] && grep -q "more than 10000 shards" "$tmp/err" && [ ! -e "$tmp/tiny" ] &&
    pass "tokenize --shard-tokens 2 (byte): refused at once" || fail "tokenize --shard-tokens 2: exit $rc"

finish
