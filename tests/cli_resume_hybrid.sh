#!/bin/sh
# cli_resume_hybrid.sh — checkpoints and bit-exact resume of `hpt train
# --mode hybrid` (costs are counted in passes by default: no wall clock in the controller's decisions).
# Run by tests/run.sh from the repository root after `make`.
#
#   (a) an uninterrupted 200-step hybrid run with several Predict phases and
#       --save-interval 10: param_crc32 X
#   (b) the same run killed with SIGKILL after its 3rd, 9th and 15th
#       checkpoint appeared (a kill that comes too late is replayed by
#       deleting the newer checkpoints), then `hpt train --resume DIR`: X,
#       metrics.jsonl equal in every field but the wall-clock ones, and
#       phases.jsonl equal byte for byte
#   (c) with a checkpoint every step: resumed from the step before and the
#       step after each of the first Predict phases, the same again
#   (d) SIGTERM in hybrid mode: exit 0 naming the checkpoint; resume: X
#   (e) --resume --mode baseline of a hybrid run: exit 2
#   (f) a crafted checkpoint (the divergence monitor's loss-ring position
#       set to 5e7, the CRC repaired): --resume exits 1 naming the HYBR
#       section, no crash (it was a SIGSEGV: the ring was restored unchecked)
#   (g) a checkpoint of an older HYBR version (3): exit 1, "older hpt"
#   (h) phases.jsonl cut mid-line, or deleted, after a checkpoint: the
#       resume goes on with a warning naming the file, and ends with the
#       uninterrupted run's crc (it was a hard error: the run was lost)
test_name=cli_resume_hybrid; . tests/lib.sh

python3 -c "
import random
random.seed(5)
words = 'the of and to in a is that for it as was with be by on not he this are or his from at which'.split()
print(' '.join(random.choice(words) for _ in range(8000)))" >"$tmp/text.txt"

HYB="--mode hybrid --warmup-steps 20 --full-steps 5 --min-predict-steps 2 --max-predict-steps 6 --correct-steps 2 \
     --confidence-threshold 0 --predictor linear --predict-waste-budget 0.5"
CFG="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
     --threads 1 --max-iters 200 --eval-interval 50 --keep-last 1000 $HYB"


# ---------------------------------------------------------------- (a)

run "$HPT" train $CFG --save-interval 10 --out "$tmp/a"
X=$(crc_of "$tmp/a")
npred=$(grep -c '"phase":"predict"' "$tmp/a/metrics.jsonl" 2>/dev/null)
if [ $rc -eq 0 ] && [ -n "$X" ] && [ "$npred" -ge 3 ] && [ "$(nckpt "$tmp/a")" -eq 20 ]; then
    pass "(a) uninterrupted hybrid run: crc $X, $npred Predict phases, 20 checkpoints"
else fail "(a) uninterrupted hybrid run: status $rc, crc '$X', ${npred:-0} Predict phases, $(nckpt "$tmp/a") checkpoints"; fi

# ---------------------------------------------------------------- (b)

for k in 3 9 15; do
    d="$tmp/b$k"
    kill_after "$d" $k $((10 * k)) $CFG --save-interval 10
    run "$HPT" train --resume "$d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$d")" = "$X" ] && same_run "$tmp/a" "$d"; then
        pass "(b) SIGKILL after checkpoint $k ($how), resumed: crc $X, same metrics and phases"
    else fail "(b) SIGKILL after checkpoint $k ($how): status $rc, crc '$(crc_of "$d")' (want $X)"; fi
done

# ---------------------------------------------------------------- (c)

run "$HPT" train $CFG --save-interval 1 --out "$tmp/c"
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/c")" = "$X" ]; then pass "(c) a checkpoint every step: crc $X"
else fail "(c) checkpoint every step: status $rc, crc '$(crc_of "$tmp/c")' (want $X)"; fi
# the steps of the first three Predict phases, and the step after each
steps=$(python3 -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
s = [d["step"] for d in L if d.get("phase") == "predict"][:3]
print(" ".join(str(x) for v in s for x in (v, v + 1)))' "$tmp/c/metrics.jsonl")
for s in $steps; do
    d="$tmp/c$s"
    rm -rf "$d"; cp -r "$tmp/c" "$d"; cut_after "$d" "$s"
    run "$HPT" train --resume "$d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$d")" = "$X" ] && same_run "$tmp/c" "$d"; then
        pass "(c) resumed at step $s (next to a Predict phase): crc $X, same metrics and phases"
    else fail "(c) resumed at step $s: status $rc, crc '$(crc_of "$d")' (want $X)"; fi
done

# ---------------------------------------------------------------- (d)

LONG="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
      --threads 1 --max-iters 3000 --eval-interval 500 --save-interval 1000 $HYB"
run "$HPT" train $LONG --out "$tmp/dref"
Y=$(crc_of "$tmp/dref")
"$HPT" train $LONG --out "$tmp/d" >"$tmp/out" 2>"$tmp/err" &
pid=$!; pids="$pids $pid"
i=0
while [ ! -s "$tmp/d/metrics.jsonl" ] && kill -0 $pid 2>/dev/null && [ $i -lt 6000 ]; do sleep 0.01; i=$((i + 1)); done
kill -TERM $pid 2>/dev/null
wait $pid; rc=$?
if [ $rc -eq 0 ] && grep -q 'checkpoint saved' "$tmp/err"; then
    run "$HPT" train --resume "$tmp/d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/d")" = "$Y" ] && same_run "$tmp/dref" "$tmp/d"; then
        pass "(d) SIGTERM: exit 0 with a checkpoint; resumed: crc $Y, same metrics and phases"
    else fail "(d) SIGTERM then resume: status $rc, crc '$(crc_of "$tmp/d")' (want $Y)"; fi
elif [ $rc -eq 0 ] && [ "$(crc_of "$tmp/d")" = "$Y" ]; then
    pass "(d) SIGTERM came after the run finished (crc $Y)"
else fail "(d) SIGTERM: status $rc (want 0 and a checkpoint)"; fi

# ---------------------------------------------------------------- (e)

run "$HPT" train --resume "$tmp/a" --mode baseline
if [ $rc -eq 2 ] && grep -q 'hybrid' "$tmp/err"; then pass "(e) --resume --mode baseline of a hybrid run: exit 2"
else fail "(e) --resume --mode baseline of a hybrid run: status $rc (want 2)"; fi

# ---------------------------------------------------------------- (f)

# craft CKPT: div.loss.next = 5e7 in the HYBR section, the CRC trailer repaired
cat >"$tmp/craft.py" <<'EOF'
import struct, sys, zlib
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
off = 32
while off < len(b) - 20:
    tag, n = bytes(b[off:off + 4]), struct.unpack_from("<Q", b, off + 8)[0]
    if tag == b"HYBR": break
    off += 16 + n
else: sys.exit("no HYBR section")
h = off + 16
ver = struct.unpack_from("<I", b, h)[0]
# after u32 version, the config (88 bytes; 108 from version 5: the outer
# rows; 120 from version 6), u64 phases.jsonl length: the phase controller's
# block (u64 length + bytes; from version 7 only for a phased predictor, the
# config's 11th word not 4, outer), then the divergence monitor's
cfg = 120 if ver >= 6 else 108 if ver >= 5 else 88
phased = ver < 7 or struct.unpack_from("<i", b, h + 4 + 10 * 4)[0] != 4
ph_len = struct.unpack_from("<Q", b, h + 4 + cfg + 8)[0] + 8 if phased else 0
div = h + 4 + cfg + 8 + ph_len
# where loss.next sits in the monitor's block: version 3 saved the struct
# (config 28 bytes, loss.v[256], loss.n, loss.next); version 4 saves it
# field by field, the loss ring's n and next first
at = {3: 28 + 1024 + 4, 4: 4, 5: 4, 6: 4, 7: 4}.get(ver)
if at is None: sys.exit("HYBR version %d: unknown layout" % ver)
struct.pack_into("<i", b, div + at, 50000000)
struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
open(p, "wb").write(b)
EOF
rm -rf "$tmp/f"; cp -r "$tmp/a" "$tmp/f"
for _f in "$tmp/f"/checkpoints/ckpt-*.bin; do [ "$_f" = "$tmp/f/checkpoints/ckpt-00000100.bin" ] || rm -f "$_f"; done
if python3 "$tmp/craft.py" "$tmp/f/checkpoints/ckpt-00000100.bin"; then
    run "$HPT" train --resume "$tmp/f"
    if [ $rc -eq 1 ] && grep -q 'HYBR' "$tmp/err"; then
        pass "(f) a crafted HYBR section (loss ring position 5e7, CRC repaired): exit 1, '$(grep HYBR "$tmp/err" | head -1 | cut -c1-150)'"
    else fail "(f) a crafted HYBR section (loss ring position 5e7, CRC repaired): status $rc (want 1 naming HYBR, no crash)"; fi
else fail "(f) could not craft the checkpoint"; fi

# ---------------------------------------------------------------- (g)

rm -rf "$tmp/g"; cp -r "$tmp/a" "$tmp/g"; cut_after "$tmp/g" 100
set_hybr_version "$tmp/g/checkpoints/ckpt-00000100.bin" 3
run "$HPT" train --resume "$tmp/g"
if [ $rc -eq 1 ] && grep -q 'HYBR version 3 was written by an older hpt' "$tmp/err"; then
    pass "(g) HYBR version 3: exit 1, '$(grep -o 'HYBR version 3.*' "$tmp/err" | cut -c1-110)...'"
else fail "(g) HYBR version 3: status $rc (want 1, 'older hpt')"; fi

# ---------------------------------------------------------------- (h)

for how in cut deleted; do
    d="$tmp/h$how"
    rm -rf "$d"; cp -r "$tmp/a" "$d"; cut_after "$d" 100
    if [ $how = cut ]; then
        size=$(wc -c <"$d/phases.jsonl")
        python3 -c "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]) // 3 + 7)" "$d/phases.jsonl" "$size"
    else rm -f "$d/phases.jsonl"; fi
    run "$HPT" train --resume "$d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$d")" = "$X" ] && grep -q "warning.*phases.jsonl" "$tmp/err" && \
       python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" "$d/phases.jsonl"; then
        pass "(h) phases.jsonl $how after checkpoint 100: resumed with a warning, crc $X, the log whole lines"
    else fail "(h) phases.jsonl $how: status $rc, crc '$(crc_of "$d")' (want 0 and $X, a warning)"; fi
done

finish
