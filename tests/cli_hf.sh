#!/bin/sh
# tier: fast (make test; tests/run.sh)
# hpt import / eval / export against PyTorch: the fixtures of
# tools/ref/gpt2_hf_ref.py (a random GPT-2,
# vocab 256, named by transformers' module tree: F32 GPT2Model names as the
# hub's file, wte.weight, ..., with the mask buffers; F16 GPT2LMHeadModel's
# transformer.-prefixed names with the tied lm_head.weight, no buffers; BF16
# the same without lm_head, as save_pretrained writes) imported and
# evaluated within 1e-5 of torch's loss; export gives every tensor back bit
# for bit under the hub's names and a re-import the same model file byte for
# byte; crafted safetensors files (tests/hf_files.py craft) refused with the
# reason, exit 1, nothing written; a hollow file that declares a large model
# refused at a few MB; the input and an existing output never overwritten;
# a char model through export and import unchanged.
test_name=cli_hf; . tests/lib.sh
fx=tests/fixtures/hf
exp() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' $fx/expected.json "$1"; }
# close A B: |A - B| <= 1e-5 |B|
close() { python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * abs(b))' "$1" "$2"; }
field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())[sys.argv[2]])' "$tmp/out" "$1"; }

# (a) import + eval = torch, for each layout and dtype
for v in f32 f16 bf16; do
    case $v in f32) src=$fx/model.safetensors ;; f16) src=$fx/prefixed/model.safetensors ;; bf16) src=$fx/bf16/model.safetensors ;; esac
    run "$HPT" import --from $src --out $tmp/$v.bin
    [ $rc -eq 0 ] && [ -s $tmp/$v.bin ] && pass "import $v ($src)" || fail "import $v: rc $rc"
    run "$HPT" eval --model $tmp/$v.bin --data $fx/text.txt --threads 1
    if [ $rc -eq 0 ] && close "$(field loss)" "$(exp $v)" && [ "$(field tokens)" = "$(exp tokens)" ]; then
        pass "eval $v: loss $(field loss) = torch $(exp $v) within 1e-5 over $(field tokens) tokens (windows of 48, last one 46)"
    else fail "eval $v: $(cat $tmp/out) vs torch $(exp $v)"; fi
done
run "$HPT" eval --model $tmp/f32.bin --data $fx/text.txt --threads 2
close "$(field loss)" "$(exp f32)" && pass "eval with 2 threads" || fail "eval 2 threads: $(cat $tmp/out)"
python3 -c 'import json,math,sys; d=json.loads(open(sys.argv[1]).read()); sys.exit(abs(d["ppl"]-math.exp(d["loss"]))>1e-6*d["ppl"])' $tmp/out \
    && pass "ppl = exp(loss)" || fail "ppl: $(cat $tmp/out)"

# (b) export gives every tensor back (F16/BF16 widened exactly to F32)
for v in f32 f16 bf16; do
    case $v in f32) src=$fx/model.safetensors ;; f16) src=$fx/prefixed/model.safetensors ;; bf16) src=$fx/bf16/model.safetensors ;; esac
    run "$HPT" export --model $tmp/$v.bin --out $tmp/$v.safetensors
    [ $rc -eq 0 ] || fail "export $v: rc $rc"
    run python3 tests/hf_files.py compare $src $tmp/$v.safetensors
    [ $rc -eq 0 ] && pass "export $v: $(cat $tmp/out)" || fail "export $v: $(cat $tmp/out $tmp/err)"
done
# (c) import of the export: the same model file byte for byte
cp $fx/config.json $tmp/config.json
run "$HPT" import --from $tmp/f32.safetensors --out $tmp/again.bin
cmp -s $tmp/again.bin $tmp/f32.bin && pass "import(export(model)) = model byte for byte" || fail "re-import differs"

# (d) bad files: the reason, exit 1, no output, no crash
mkdir $tmp/bad && python3 tests/hf_files.py craft $fx/model.safetensors $tmp/bad && cp $fx/config.json $tmp/bad/
n=0; bad=0
while IFS="$(printf '\t')" read -r c why; do
    run "$HPT" import --from $tmp/bad/$c.safetensors --out $tmp/bad/$c.bin
    if [ -z "$why" ]; then
        [ $rc -eq 0 ] || { fail "$c: a valid file refused"; bad=$((bad + 1)); }
    elif [ $rc -ne 1 ] || ! grep -qF "$why" $tmp/err || [ -e $tmp/bad/$c.bin ]; then
        fail "$c: rc $rc (want 1 and '$why')"; bad=$((bad + 1))
    fi
    n=$((n + 1))
done < $tmp/bad/cases.txt
[ $bad -eq 0 ] && pass "$n crafted files: each refused with its reason (exit 1) or, the unusual good ones (a tied lm_head, a BOOL mask, hpt's old names), accepted"

# (e) n_head: config.json, --n-head, mismatches
mkdir $tmp/nocfg && cp $fx/model.safetensors $tmp/nocfg/
run "$HPT" import --from $tmp/nocfg/model.safetensors --out $tmp/nocfg.bin
[ $rc -ne 0 ] && grep -q "config.json" $tmp/err && pass "no config.json, no --n-head: refused" || fail "no config: rc $rc"
run "$HPT" import --from $tmp/nocfg/model.safetensors --out $tmp/nocfg.bin --n-head 2
cmp -s $tmp/nocfg.bin $tmp/f32.bin && pass "--n-head 2 without config.json: the same model" || fail "--n-head 2"
run "$HPT" import --from $tmp/nocfg/model.safetensors --out $tmp/nocfg3.bin --n-head 3
[ $rc -ne 0 ] && grep -q "multiple of n_head 3" $tmp/err && pass "--n-head 3 (32 channels): refused" || fail "--n-head 3: rc $rc"
sed 's/"n_embd": 32/"n_embd": 64/' $fx/config.json > $tmp/nocfg/config.json
run "$HPT" import --from $tmp/nocfg/model.safetensors --out $tmp/nocfg64.bin
[ $rc -eq 1 ] && grep -q "n_embd 64, the tensors say 32" $tmp/err && pass "config.json disagreeing with the shapes: refused" || fail "config mismatch: rc $rc"
sed 's/gelu_new/relu/' $fx/config.json > $tmp/nocfg/config.json
run "$HPT" import --from $tmp/nocfg/model.safetensors --out $tmp/relu.bin
[ $rc -eq 1 ] && grep -q "gelu_new" $tmp/err && pass "another activation function: refused" || fail "activation: rc $rc"
run "$HPT" import --from $fx/model.safetensors --out $tmp/char.bin --tokenizer char
[ $rc -ne 0 ] && [ ! -e $tmp/char.bin ] && grep -q "no character table" $tmp/err &&
    pass "--tokenizer char on a file without a char table: refused" || fail "char: rc $rc"

# (f) eval and export refusals
printf 'x' > $tmp/one.txt
run "$HPT" eval --model $tmp/f32.bin --data $tmp/one.txt
[ $rc -eq 1 ] && grep -q "nothing to predict" $tmp/err && pass "eval of a 1-token file: refused" || fail "eval 1 token: rc $rc"
run "$HPT" eval --model $fx/model.safetensors --data $fx/text.txt
[ $rc -eq 1 ] && pass "eval of a file that is not an hpt model: exit 1" || fail "eval non-model: rc $rc"
python3 - $tmp/f32.bin $tmp/nan.bin <<'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"PARM") + 16 + 8          # wte[0]
b[i:i + 4] = struct.pack("<f", float("nan"))
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
PY
run "$HPT" eval --model $tmp/nan.bin --data $fx/text.txt
[ $rc -eq 1 ] && grep -q "not finite" $tmp/err && [ ! -s $tmp/out ] && pass "eval of a model holding a NaN: exit 1, no JSON with nan in it" || fail "eval NaN: rc $rc"
run "$HPT" export --model $tmp/missing.bin --out $tmp/x.safetensors
[ $rc -eq 1 ] && [ ! -e $tmp/x.safetensors ] && pass "export of a missing model: exit 1" || fail "export missing: rc $rc"
run "$HPT" import --from $fx/model.safetensors
[ $rc -eq 2 ] && pass "import without --out: usage error" || fail "import usage: rc $rc"
# (g) the padded vocabulary: a char model (vocab 12, hpt pads wte to 16 rows)
# exports its 11 real rows, and every matrix transposed to [in, out]
printf 'abc def ghij\n' > $tmp/c.txt; i=0; while [ $i -lt 9 ]; do cat $tmp/c.txt $tmp/c.txt > $tmp/c2.txt; mv $tmp/c2.txt $tmp/c.txt; i=$((i + 1)); done
run "$HPT" train --data $tmp/c.txt --n-layer 1 --n-head 2 --n-embd 8 --block-size 8 --batch-size 2 --max-iters 3 --eval-iters 1 --threads 1 --out $tmp/char
run "$HPT" export --model $tmp/char/model.bin --out $tmp/char.safetensors
run python3 - $tmp/char/model.bin $tmp/char.safetensors <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
off, secs = 32, {}
while b[off:off + 4] != b"END!":
    n = struct.unpack_from("<Q", b, off + 8)[0]
    secs[b[off:off + 4]] = b[off + 16:off + 16 + n]
    off += 16 + n
conf = struct.unpack_from("<7I", secs[b"CONF"])
V, T, L, NH, C = conf[2:7]
Vp = (V + 7) // 8 * 8
p = struct.unpack_from("<%df" % ((len(secs[b"PARM"]) - 8) // 4), secs[b"PARM"], 8)
s = open(sys.argv[2], "rb").read()
hn = struct.unpack_from("<Q", s)[0]
h = json.loads(s[8:8 + hn])
def get(name):
    a, e = h[name]["data_offsets"]
    return h[name]["shape"], struct.unpack_from("<%df" % ((e - a) // 4), s, 8 + hn + a)
shape, wte = get("wte.weight")
assert V == 12 and Vp == 16 and shape == [V, C], (V, Vp, shape)
assert list(wte) == list(p[:V * C]), "wte rows"
assert any(x != 0 for x in p[:V * C])
# qkvw follows wte (Vp x C) and wpe (T x C), then ln1w, ln1b: (L, 3C, C) in hpt, [C, 3C] in HF
q0 = Vp * C + T * C + 2 * L * C
shape, qkv = get("h.0.attn.c_attn.weight")
assert shape == [C, 3 * C]
assert all(qkv[i * 3 * C + o] == p[q0 + o * C + i] for i in range(C) for o in range(3 * C)), "qkvw transposed"
print("V %d padded to %d: %d rows exported, c_attn [%d, %d] = qkvw transposed" % (V, Vp, V, C, 3 * C))
PY
[ $rc -eq 0 ] && pass "(g) $(cat $tmp/out)" || fail "(g) padded vocabulary: $(cat $tmp/out $tmp/err)"
# ... and carries its character table in __metadata__, so
# the import gives back the trained model file byte for byte: the same
# config, the same 12 characters, every parameter (the padded rows were 0)
run "$HPT" import --from $tmp/char.safetensors --out $tmp/char_back.bin --n-head 2
i_rc=$rc
meta=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack_from("<Q",b)[0]; m=json.loads(b[8:8+n])["__metadata__"]; print(m["hpt_tokenizer"], m["hpt_chars"])' $tmp/char.safetensors)
if [ $i_rc -eq 0 ] && cmp -s $tmp/char_back.bin $tmp/char/model.bin; then
    pass "(g) char model: export (metadata '$meta'), import = the trained model.bin byte for byte"
else fail "(g) char round trip: import rc $i_rc, metadata '$meta'"; fi
run "$HPT" eval --model $tmp/char/model.bin --data $tmp/c.txt --threads 1
l1=$(cat $tmp/out)
run "$HPT" eval --model $tmp/char_back.bin --data $tmp/c.txt --threads 1
[ $rc -eq 0 ] && [ -n "$l1" ] && [ "$(cat $tmp/out)" = "$l1" ] && pass "(g) char model: eval after the round trip = before: $l1" ||
    fail "(g) char eval: '$l1' vs '$(cat $tmp/out)'"
"$HPT" export --model $tmp/char_back.bin --out $tmp/char_back.safetensors 2>/dev/null && cmp -s $tmp/char.safetensors $tmp/char_back.safetensors &&
    pass "(g) char model: export(import(export)) = export byte for byte" || fail "(g) second export differs"

# (i) the input is never the output, an existing output only with --overwrite:
# exit 2 and the file as it was
cp $tmp/f32.bin $tmp/keep.bin
run "$HPT" export --model $tmp/keep.bin --out $tmp/keep.bin --overwrite
[ $rc -eq 2 ] && grep -q "is the input file" $tmp/err && cmp -s $tmp/keep.bin $tmp/f32.bin &&
    pass "export --model X --out X (even with --overwrite): refused, X intact" || fail "export onto itself: rc $rc"
ln $tmp/keep.bin $tmp/keep_link.bin
run "$HPT" export --model $tmp/keep.bin --out $tmp/./keep_link.bin --overwrite
[ $rc -eq 2 ] && grep -q "is the input file" $tmp/err && cmp -s $tmp/keep.bin $tmp/f32.bin &&
    pass "export onto a hard link of its input: refused" || fail "export onto a hard link: rc $rc"
cp $fx/model.safetensors $tmp/nocfg/self.safetensors
run "$HPT" import --from $tmp/nocfg/self.safetensors --out $tmp/nocfg/../nocfg/self.safetensors --n-head 2 --overwrite
[ $rc -eq 2 ] && grep -q "is the input file" $tmp/err && cmp -s $tmp/nocfg/self.safetensors $fx/model.safetensors &&
    pass "import --from X --out X (another spelling of X): refused, X intact" || fail "import onto itself: rc $rc"
run "$HPT" export --model $tmp/f32.bin --out $tmp/f16.safetensors
[ $rc -eq 2 ] && grep -q "exists" $tmp/err && grep -q -- "--overwrite" $tmp/err &&
    python3 tests/hf_files.py compare $fx/prefixed/model.safetensors $tmp/f16.safetensors >/dev/null &&
    pass "export over an existing file: refused without --overwrite, the file intact" || fail "export existing: rc $rc"
cp $tmp/f16.bin $tmp/f16_before.bin
run "$HPT" import --from $fx/model.safetensors --out $tmp/f16.bin
[ $rc -eq 2 ] && grep -q "exists" $tmp/err && cmp -s $tmp/f16.bin $tmp/f16_before.bin &&
    pass "import over an existing file: refused without --overwrite, the file intact" || fail "import existing: rc $rc"
run "$HPT" import --from $fx/model.safetensors --out $tmp/f16.bin --overwrite
[ $rc -eq 0 ] && cmp -s $tmp/f16.bin $tmp/f32.bin && pass "import --overwrite replaces it" || fail "import --overwrite: rc $rc"
run "$HPT" export --model $tmp/f32.bin --out $tmp/f16.safetensors --overwrite
[ $rc -eq 0 ] && cmp -s $tmp/f16.safetensors $tmp/f32.safetensors && pass "export --overwrite replaces it" ||
    fail "export --overwrite: rc $rc"
ls $tmp | grep -q '\.tmp\.' && fail "a temporary file was left: $(ls $tmp | grep '\.tmp\.')"

# (j) a 137 KB file naming 64 blocks of width 256 whose
# tensors are empty is refused by the shape check before anything is
# allocated (before the fix it reserved and zeroed 0.4 GB of parameters and
# gradients first), at a few MB of peak RSS
python3 tests/hf_files.py hollow $tmp/hollow.safetensors 256 64
rss=$(python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1], "w"))
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' $tmp/err "$HPT" import --from $tmp/hollow.safetensors --out $tmp/hollow.bin --n-head 1)
set -- $rss
if [ "$1" = 1 ] && [ "$2" -lt 65536 ] && grep -q "'h.0.ln_1.weight' has shape \[0\], expected \[256\]" $tmp/err && [ ! -e $tmp/hollow.bin ]; then
    pass "hollow 64 x 256 file: refused by its shapes at $(($2 / 1024)) MB peak RSS"
else fail "hollow file: rc $1, peak RSS $2 KB"; fi

# (h) GPT-2's own vocabulary (50257, as the hub's 124M file): imported with
# the gpt2 tokenizer recorded (needs scripts/install-deps.sh's vocabulary),
# eval counts the file's gpt2 tokens, sample decodes, export gives it back
mkdir $tmp/v50k && sed 's/"vocab_size": 256/"vocab_size": 50257/' $fx/config.json >$tmp/v50k/config.json
run python3 tests/hf_files.py widen $fx/model.safetensors $tmp/v50k/model.safetensors 50257
run "$HPT" import --from $tmp/v50k/model.safetensors --out $tmp/v50k.bin
i_rc=$rc
kind=$(python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); i=b.index(b"TOKN"); print(*struct.unpack_from("<2I", b, i+16))' $tmp/v50k.bin 2>/dev/null)
n=$("$HPT" tokenize $fx/text.txt 2>/dev/null | wc -l)
run "$HPT" eval --model $tmp/v50k.bin --data $fx/text.txt --threads 1
if [ $i_rc -eq 0 ] && [ "$kind" = "2 50257" ] && [ $rc -eq 0 ] && [ "$(field tokens)" = $((n - 1)) ]; then
    pass "(h) vocab 50257: imported as gpt2 (TOKN $kind), eval over $(field tokens) tokens = hpt tokenize's $n - 1"
else fail "(h) vocab 50257: import rc $i_rc, TOKN '$kind', eval rc $rc: $(cat $tmp/out) (tokenize: $n)"; fi
run "$HPT" sample --model $tmp/v50k.bin --tokens 8 --prompt "Hello" --seed 3
s_rc=$rc
run "$HPT" export --model $tmp/v50k.bin --out $tmp/v50k.safetensors
e_rc=$rc
run python3 tests/hf_files.py compare $tmp/v50k/model.safetensors $tmp/v50k.safetensors
[ $s_rc -eq 0 ] && [ $e_rc -eq 0 ] && [ $rc -eq 0 ] && pass "(h) sample, export: $(cat $tmp/out)" ||
    fail "(h) sample rc $s_rc, export rc $e_rc: $(cat $tmp/out $tmp/err)"
# and fine-tuned from it (train --init: the tokenizer comes from the file)
run "$HPT" train --init $tmp/v50k.bin --data tests/fixtures/gpt2_tok/english.txt --block-size 8 --batch-size 2 \
    --max-iters 4 --eval-iters 1 --eval-interval 4 --threads 1 --out $tmp/ft50k
kind=$(python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); i=b.index(b"TOKN"); print(*struct.unpack_from("<2I", b, i+16))' $tmp/ft50k/model.bin 2>/dev/null)
[ $rc -eq 0 ] && [ "$kind" = "2 50257" ] && cat $tmp/out $tmp/err | grep -q "gpt2 tokenizer, vocab 50257" &&
    pass "(h) train --init of it: gpt2 tokenizer, model.bin TOKN $kind" || fail "(h) train --init: rc $rc, TOKN '$kind'"
finish
