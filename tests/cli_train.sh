#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_train.sh — the hpt command line end to end. Run by tests/run.sh from the
# repository root after `make` has built ./hpt; prints one line per check and
# exits non-zero if any failed.
#
#   usage errors     --help, an unknown flag, a non-numeric value, n-embd not
#                    divisible by n-head, a missing and an empty data file
#   a tiny run       1 layer, C 16, 30 steps on ~20 KB of generated text:
#                    metrics.jsonl (30 lines, every field, val_loss exactly on
#                    steps 10, 20, 30), summary.json (every field), model.bin
#   determinism      same seed -> same param_crc32, another seed -> another,
#                    --threads 2 -> the same as --threads 1
#   plots            loss.svg/png at the end of a run; hpt plot redraws them; its errors
#   sampling         deterministic for a seed; a corrupted model.bin is refused
# Takes a few seconds.
test_name=cli_train; . tests/lib.sh

# ---------------------------------------------------------------- data

# ~20 KB of English-ish text: sentences of common words drawn by an LCG, so
# the file is the same on every machine.
awk 'BEGIN {
    n = split("the of and a to in is you that it he was for on are as with his they at be " \
              "this have from or one had by word but not what all were we when your can said " \
              "there use an each which she do how their if will up other about out many then " \
              "them these so some her would make like him into time has look two more write go " \
              "see number no way could people my than first water been call who its now find " \
              "long down day did get come made may part", w, " ")
    s = 12345; bytes = 0; line = ""
    while (bytes < 20000) {
        len = 4 + int(s / 7) % 9
        sentence = ""
        for (i = 0; i < len; i++) {
            s = (s * 69069 + 1) % 4294967296
            word = w[1 + int(s / 65536) % n]
            if (i == 0) word = toupper(substr(word, 1, 1)) substr(word, 2)
            sentence = sentence (i ? " " : "") word
        }
        sentence = sentence (s % 5 == 0 ? "?" : ".")
        if (length(line) + length(sentence) > 70) { print line; bytes += length(line) + 1; line = sentence }
        else line = line (line == "" ? "" : " ") sentence
    }
    print line
}' >"$tmp/data.txt"
size=$(wc -c <"$tmp/data.txt")
if [ "$size" -lt 19000 ]; then echo "FAIL could not generate the data file ($size bytes)"; exit 1; fi
: >"$tmp/empty.txt"

TINY="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 30 \
      --eval-interval 10 --eval-iters 2"

# ---------------------------------------------------------------- usage errors

run "$HPT" --help
if [ $rc -eq 0 ] && grep -q -- '--data' "$tmp/out"; then pass "--help exits 0 and documents --data"
else fail "--help: status $rc, or no --data in its output"; fi

run "$HPT" train --data "$tmp/data.txt" --no-such-flag 3
if [ $rc -eq 2 ] && grep -q -- '--no-such-flag' "$tmp/err"; then pass "unknown flag: exit 2 naming the flag"
else fail "unknown flag: status $rc (want 2), or the message does not name --no-such-flag"; fi

run "$HPT" train --data "$tmp/data.txt" --lr abc
if [ $rc -eq 2 ] && grep -q -- 'abc' "$tmp/err"; then pass "--lr abc: exit 2"
else fail "--lr abc: status $rc (want 2)"; fi

run "$HPT" train --data "$tmp/data.txt" --n-embd 30 --n-head 4 --out "$tmp/never"
if [ $rc -ne 0 ] && grep -q -- 'n-embd' "$tmp/err" && [ ! -e "$tmp/never/model.bin" ]; then
    pass "--n-embd 30 --n-head 4: refused with a message"
else fail "--n-embd 30 --n-head 4: status $rc, or no message naming --n-embd"; fi

run "$HPT" train --data "$tmp/no-such-file.txt" $TINY --out "$tmp/never"
if [ $rc -ne 0 ] && grep -q -- "$tmp/no-such-file.txt" "$tmp/err"; then pass "missing data file: refused, naming the path"
else fail "missing data file: status $rc, or the message does not name the path"; fi

run "$HPT" train --data "$tmp/empty.txt" $TINY --out "$tmp/never"
if [ $rc -ne 0 ] && grep -q -- "empty" "$tmp/err"; then pass "empty data file: refused"
else fail "empty data file: status $rc, or no 'empty' in the message"; fi

# ---------------------------------------------------------------- a tiny run

# train NAME ARGS...: a tiny run into $tmp/NAME; sets rc
train() {
    name=$1; shift
    run "$HPT" train --data "$tmp/data.txt" $TINY --out "$tmp/$name" "$@"
}

train run1 --seed 1 --threads 1
if [ $rc -eq 0 ]; then pass "tiny training run exits 0"; else fail "tiny training run: status $rc"; fi

if python3 - "$tmp/run1" <<'EOF'
import json, sys
d = sys.argv[1]
errors = []
lines = open(d + "/metrics.jsonl").read().splitlines()
if len(lines) != 30:
    errors.append("metrics.jsonl has %d lines, want 30" % len(lines))
need = ["step", "train_loss", "lr", "grad_norm", "time_s", "tokens", "rss_bytes"]
for i, line in enumerate(lines):
    rec = json.loads(line)
    for k in need:
        if not isinstance(rec.get(k), (int, float)):
            errors.append("line %d: %s missing or not a number" % (i + 1, k))
    if rec.get("step") != i + 1:
        errors.append("line %d: step %r" % (i + 1, rec.get("step")))
    has_val = "val_loss" in rec
    if has_val != (rec.get("step") in (10, 20, 30)):
        errors.append("step %r: val_loss %s" % (rec.get("step"), "present" if has_val else "missing"))
    if has_val and not (isinstance(rec["val_loss"], float) and 0 < rec["val_loss"] < 10):
        errors.append("step %r: val_loss %r" % (rec.get("step"), rec["val_loss"]))
    if rec.get("tokens") != 4 * 16 * (i + 1):
        errors.append("line %d: tokens %r, want %d" % (i + 1, rec.get("tokens"), 64 * (i + 1)))
s = json.load(open(d + "/summary.json"))
for k in ["params", "final_val_loss", "best_val_loss", "train_s", "wall_s", "eval_s",
          "tokens_per_s", "peak_rss_bytes"]:
    if not isinstance(s.get(k), (int, float)) or s[k] < 0:
        errors.append("summary.json: %s = %r" % (k, s.get(k)))
crc = s.get("param_crc32")
if not (isinstance(crc, str) and len(crc) == 8 and all(c in "0123456789abcdef" for c in crc)):
    errors.append("summary.json: param_crc32 = %r" % (crc,))
vals = [json.loads(l)["val_loss"] for l in lines if "val_loss" in json.loads(l)]
if vals and s.get("final_val_loss") != vals[-1]:
    errors.append("final_val_loss %r is not the last val_loss %r" % (s.get("final_val_loss"), vals[-1]))
if vals and s.get("best_val_loss") != min(vals):
    errors.append("best_val_loss %r is not the minimum %r" % (s.get("best_val_loss"), min(vals)))
first = json.loads(lines[0])["train_loss"]
if not first > vals[-1]:
    errors.append("no learning: first train loss %r, final val loss %r" % (first, vals[-1]))
for e in errors[:10]:
    print("     " + e)
sys.exit(1 if errors else 0)
EOF
then pass "metrics.jsonl (30 steps, val_loss at 10/20/30) and summary.json are complete"
else fail "metrics.jsonl / summary.json (see above)"; fi
[ -s "$tmp/run1/model.bin" ] && pass "model.bin written" || fail "no model.bin"

# the loss plot: drawn at the end of the run, redrawn the same by hpt plot
if python3 - "$tmp/run1" <<'EOF'
import sys, os, xml.dom.minidom
d = sys.argv[1]
svg = xml.dom.minidom.parse(d + "/loss.svg")
text = svg.getElementsByTagName("desc")[0].firstChild.data.splitlines()   # the legend, as text
ok = "legend: train loss (smoothed)" in text and "legend: val loss" in text
ok = ok and open(d + "/loss.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
ok = ok and not os.path.exists(d + "/accuracy.svg")   # text tasks have no accuracy
sys.exit(0 if ok else 1)
EOF
then pass "loss.svg (train and val loss in the legend) and loss.png written at the end of the run"
else fail "loss plot of the tiny run"; fi
cp "$tmp/run1/loss.svg" "$tmp/loss1.svg"
run "$HPT" plot "$tmp/run1"
if [ $rc -eq 0 ] && cmp -s "$tmp/run1/loss.svg" "$tmp/loss1.svg"; then pass "hpt plot DIR redraws the same loss.svg"
else fail "hpt plot: status $rc, or a different SVG"; fi
run "$HPT" plot "$tmp/no-such-run"
if [ $rc -eq 1 ] && grep -q "no-such-run/metrics.jsonl" "$tmp/err"; then pass "hpt plot of a missing run: exit 1 naming metrics.jsonl"
else fail "hpt plot of a missing run: status $rc"; fi
mkdir -p "$tmp/emptyrun" && : >"$tmp/emptyrun/metrics.jsonl"
run "$HPT" plot "$tmp/emptyrun"
if [ $rc -eq 1 ] && grep -q "no steps" "$tmp/err"; then pass "hpt plot of an empty metrics.jsonl: exit 1"
else fail "hpt plot of an empty metrics.jsonl: status $rc"; fi
run "$HPT" plot
if [ $rc -eq 2 ]; then pass "hpt plot without a directory: exit 2"; else fail "hpt plot without a directory: status $rc"; fi


train run2 --seed 1 --threads 1
c1=$(crc_of "$tmp/run1"); c2=$(crc_of "$tmp/run2")
if [ $rc -eq 0 ] && [ -n "$c1" ] && [ "$c1" = "$c2" ]; then pass "same seed, same parameters (param_crc32 $c1)"
else fail "same seed: param_crc32 $c1 vs $c2 (status $rc)"; fi
if cmp -s "$tmp/run1/model.bin" "$tmp/run2/model.bin"; then pass "same seed, byte-identical model.bin"
else fail "same seed: model.bin files differ"; fi

train run3 --seed 2 --threads 1
c3=$(crc_of "$tmp/run3")
if [ $rc -eq 0 ] && [ -n "$c3" ] && [ "$c3" != "$c1" ]; then pass "another seed, other parameters ($c3)"
else fail "seed 2: param_crc32 $c3 vs seed 1 $c1 (status $rc)"; fi

# OMP_WAIT_POLICY=passive: on a shared 2-core machine, libgomp's spinning
# barriers can stretch this 0.05 s run to 10+ s while a co-tenant holds the
# other core; the policy changes waiting, never results.
run env OMP_WAIT_POLICY=passive "$HPT" train --data "$tmp/data.txt" $TINY --out "$tmp/run4" --seed 1 --threads 2
c4=$(crc_of "$tmp/run4")
if [ $rc -eq 0 ] && [ "$c4" = "$c1" ]; then pass "--threads 2 gives the parameters of --threads 1"
else fail "--threads 2: param_crc32 $c4 vs --threads 1 $c1 (status $rc): the kernels are not thread-count independent"; fi

# ---------------------------------------------------------------- sampling

run "$HPT" sample --model "$tmp/run1/model.bin" --tokens 50 --seed 3 --threads 1
cp "$tmp/out" "$tmp/sample1"
src=$rc
run "$HPT" sample --model "$tmp/run1/model.bin" --tokens 50 --seed 3 --threads 1
if [ $src -eq 0 ] && [ $rc -eq 0 ] && [ "$(wc -c <"$tmp/sample1")" -ge 40 ] && cmp -s "$tmp/sample1" "$tmp/out"; then
    pass "sample: exit 0, prints text, the same twice for a seed"
else fail "sample: status $src/$rc, $(wc -c <"$tmp/sample1") bytes, or two runs differ"; fi
run "$HPT" sample --model "$tmp/run1/model.bin" --tokens 50 --seed 4 --threads 1
if [ $rc -eq 0 ] && ! cmp -s "$tmp/sample1" "$tmp/out"; then pass "sample: another seed, other text"
else fail "sample --seed 4: status $rc, or the same text as --seed 3"; fi

# flip one byte in the middle of the parameters
cp "$tmp/run1/model.bin" "$tmp/bad.bin"
mid=$(( $(wc -c <"$tmp/bad.bin") / 2 ))
printf '\125' | dd of="$tmp/bad.bin" bs=1 seek=$mid conv=notrunc 2>/dev/null
cmp -s "$tmp/bad.bin" "$tmp/run1/model.bin" &&
    printf '\252' | dd of="$tmp/bad.bin" bs=1 seek=$mid conv=notrunc 2>/dev/null
run "$HPT" sample --model "$tmp/bad.bin" --tokens 5 --threads 1
if [ $rc -ne 0 ] && grep -q -i -E 'crc|corrupt' "$tmp/err"; then pass "sample refuses a corrupted model.bin (CRC)"
else fail "corrupted model.bin: status $rc, or no CRC/corrupt in the message"; fi

run "$HPT" sample --model "$tmp/no-such-model.bin"
if [ $rc -ne 0 ] && grep -q -- "no-such-model.bin" "$tmp/err"; then pass "sample: missing model file refused, naming it"
else fail "sample of a missing model: status $rc"; fi

finish
