#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_flags.sh — hpt train's flags, which come from the settings table
# (src/train/settings.h). For every row of the table (listed by
# `test_settings --dump`): it appears in `hpt --help`, a valid value parses,
# and a value below or above its range (or a bad name, or a value given to a
# switch) is a usage error (exit 2) naming the flag. Then the products of
# flags that must fit the step counter: --epochs x batches per
# epoch beyond --max-iters' limit, and --batch-size x --grad-accum beyond an
# int, are usage errors naming the flags, before anything is written. Last,
# a checkpoint whose TCFG holds an out-of-range setting (CRC repaired) is
# refused on --resume naming the setting.
test_name=cli_flags; . tests/lib.sh
BUILD=${BUILD:-build}
if [ ! -x "$BUILD/test_settings" ]; then make -s "$BUILD/test_settings" >/dev/null 2>&1; fi
if ! "$BUILD/test_settings" --dump >"$tmp/table.tsv" || [ ! -s "$tmp/table.tsv" ]; then
    echo "FAIL $BUILD/test_settings --dump (build it: make $BUILD/test_settings)"; exit 1
fi
"$HPT" --help >"$tmp/help.txt" 2>&1

# letters N: a string of N a's
letters() { awk -v n="$1" 'BEGIN { s = ""; for (i = 0; i < n; i++) s = s "a"; print s }'; }
value() { case "$1" in @*) letters "${1#@}" ;; *) printf '%s' "$1" ;; esac; }

# try FLAG VALUE: hpt train FLAG VALUE --zz-end ("(none)": the flag alone;
# "=V": FLAG=V). Parsing is left to right, so a flag that parses leaves the
# error to the unknown --zz-end.
try() {
    case "$2" in
        "(none)") run "$HPT" train "$1" --zz-end ;;
        =*) run "$HPT" train "$1$2" --zz-end ;;
        *) run "$HPT" train "$1" "$(value "$2")" --zz-end ;;
    esac
}

rows=0
tab=$(printf '\t')
while IFS="$tab" read -r flag ok lo hi; do
    rows=$((rows + 1))
    grep -qE -- "(^|[ ,])$flag( |$|,)" "$tmp/help.txt" || fail "$flag is not in hpt --help"
    try "$flag" "$ok"
    if [ $rc -ne 2 ] || ! grep -q -- "--zz-end" "$tmp/err" || grep -q -- "$flag" "$tmp/err"; then
        fail "$flag $ok: does not parse (status $rc)"
    fi
    for bad in "$lo" "$hi"; do
        [ "$bad" = "-" ] && continue
        if [ "$ok" = "(none)" ]; then try "$flag" "=$bad"; else try "$flag" "$bad"; fi
        if [ $rc -ne 2 ] || ! grep -q -- "$flag" "$tmp/err"; then
            fail "$flag $(echo "$bad" | cut -c1-20): status $rc (want 2, naming the flag)"
        fi
    done
done <"$tmp/table.tsv"
if [ "$rows" -gt 50 ]; then pass "all $rows flags of the table: in --help, parse, refuse out-of-range values with exit 2"
else fail "only $rows rows in the table dump"; fi

# ---------------------------------------------------------------- products

words_text 7 >"$tmp/data.txt"
# ~20 KB of text: ~18k windows per epoch at --batch-size 1, so 40000 epochs is
# 7e8 steps, past the 1e8 a run may plan (before, such a run was started: the
# timeout keeps a binary without the check from running for days)
run timeout 60 "$HPT" train --data "$tmp/data.txt" --out "$tmp/e" --epochs 40000 --batch-size 1 --block-size 8 \
    --n-layer 1 --n-head 1 --n-embd 8
if [ $rc -eq 2 ] && grep -q -- "--epochs" "$tmp/err" && grep -q -- "--batch-size" "$tmp/err" && [ ! -e "$tmp/e" ]; then
    pass "--epochs 40000 --batch-size 1: usage error naming both, nothing written"
else fail "--epochs 40000 --batch-size 1: status $rc (want 2 naming --epochs and --batch-size), or $tmp/e written"; fi

FM=/usr/share/datasets/fashion-mnist
if [ -f "$FM/train-images-idx3-ubyte.gz" ]; then
    # 60000 images x 40000 epochs overflowed the int step count: a negative
    # --max-iters, then "out of memory" after metrics.jsonl was truncated
    run timeout 60 "$HPT" train --task fashion-mnist --out "$tmp/f" --epochs 40000 --batch-size 1
    if [ $rc -eq 2 ] && grep -q -- "--epochs" "$tmp/err" && [ ! -e "$tmp/f" ]; then
        pass "fashion-mnist --epochs 40000 --batch-size 1: usage error, nothing written"
    else fail "fashion-mnist --epochs 40000 --batch-size 1: status $rc (want 2)"; fi
else
    echo "skip fashion-mnist --epochs (no $FM)"
fi

run timeout 60 "$HPT" train --data "$tmp/data.txt" --out "$tmp/g" --batch-size 65536 --grad-accum 65536 \
    --n-layer 1 --n-head 1 --n-embd 8 --block-size 1 --max-iters 1
if [ $rc -eq 2 ] && grep -q -- "--batch-size" "$tmp/err" && grep -q -- "--grad-accum" "$tmp/err" && [ ! -e "$tmp/g" ]; then
    pass "--batch-size 65536 --grad-accum 65536: usage error naming both"
else fail "--batch-size 65536 --grad-accum 65536: status $rc (want 2 naming both)"; fi

# a hybrid flag without --mode hybrid, and --resume with a config flag
run "$HPT" train --data "$tmp/data.txt" --out "$tmp/h" --whole-phase
if [ $rc -eq 2 ] && grep -q -- "--whole-phase only applies with --mode hybrid" "$tmp/err"; then pass "hybrid flag without --mode hybrid: exit 2"
else fail "hybrid flag without --mode hybrid: status $rc"; fi
run "$HPT" train --resume "$tmp/none" --n-layer 2
if [ $rc -eq 2 ] && grep -q -- "--n-layer cannot be given" "$tmp/err"; then pass "--resume with --n-layer: exit 2 naming it"
else fail "--resume with --n-layer: status $rc"; fi

# ---------------------------------------------------------------- a checkpoint's settings are checked on load

run "$HPT" train --data "$tmp/data.txt" --out "$tmp/c" --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 \
    --batch-size 2 --max-iters 4 --save-interval 2 --eval-interval 4 --eval-iters 1 --threads 1
ck="$tmp/c/checkpoints/ckpt-00000004.bin"
if [ $rc -eq 0 ] && [ -f "$ck" ]; then
    # n_layer in TCFG set to 0, the file's CRC repaired: only the settings check can refuse it
    python3 - "$ck" <<'PY'
import struct, sys, zlib
p = sys.argv[1]; d = bytearray(open(p, "rb").read())
pos = 32
while d[pos:pos + 4] != b"TCFG":
    pos += 16 + struct.unpack_from("<Q", d, pos + 8)[0]
q = pos + 16 + 8
for _ in range(4):
    q += 4 + struct.unpack_from("<I", d, q)[0]
struct.pack_into("<i", d, q + 4, 0)  # after the tokenizer: n_layer
struct.pack_into("<I", d, len(d) - 4, zlib.crc32(bytes(d[:-4])))
open(p, "wb").write(bytes(d))
PY
    rm -f "$tmp/c/checkpoints/ckpt-00000002.bin"
    run "$HPT" train --resume "$tmp/c"
    if [ $rc -ne 0 ] && grep -q -- "--n-layer must be in \[1, 256\], got 0" "$tmp/err"; then
        pass "a checkpoint with --n-layer 0 in its TCFG is refused, naming the setting"
    else fail "a checkpoint with n_layer 0: status $rc, or the message does not name --n-layer"; fi
else fail "the run for the checkpoint test: status $rc"; fi


# the one outer step has one flag pair: --outer-lr / --outer-momentum set the
# hybrid's jumps and local-step training's sync alike; the local steps' old
# names are aliases (the same run, bit for bit), and the pair without either
# user is refused
words_text 300 >"$tmp/o.txt"
small="--data $tmp/o.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 30 --eval-interval 30 --eval-iters 1 --threads 1 --sync-interval 10"
run "$HPT" train $small --outer-lr 1.5 --outer-momentum 0.6 --out "$tmp/on"; a=$rc
run "$HPT" train $small --sync-outer-lr 1.5 --sync-outer-momentum 0.6 --out "$tmp/os"; b=$rc
if [ $a -eq 0 ] && [ $b -eq 0 ] && [ -n "$(crc_of "$tmp/on")" ] && [ "$(crc_of "$tmp/on")" = "$(crc_of "$tmp/os")" ] &&
   python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if abs(s["sync_outer_lr"] - 1.5) < 1e-6 and abs(s["sync_outer_momentum"] - 0.6) < 1e-6 else 1)' "$tmp/on/summary.json"; then
    pass "local steps: --outer-lr/--outer-momentum and the --sync-outer-* aliases give the same run ($(crc_of "$tmp/on"))"
else fail "local steps with --outer-lr: status $a/$b, crc $(crc_of "$tmp/on") vs $(crc_of "$tmp/os")"; fi
run "$HPT" train $small --sync-interval 0 --outer-lr 2 --out "$tmp/o0"
if [ $rc -eq 2 ] && grep -q -- "--outer-lr only applies with --mode hybrid" "$tmp/err" && [ ! -e "$tmp/o0" ]; then
    pass "--outer-lr without --mode hybrid or --sync-interval: usage error"
else fail "--outer-lr alone: status $rc: $(head -c 200 "$tmp/err")"; fi
n=$(grep -c -- "--sync-outer" "$tmp/help.txt")
if grep -q -- "--outer-lr X" "$tmp/help.txt" && [ "$n" -le 2 ] && ! grep -q -- "^  --sync-outer" "$tmp/help.txt"; then
    pass "--help lists --outer-lr once, the --sync-outer-* names only as its aliases"
else fail "--help and the outer flags ($n mentions of --sync-outer)"; fi

finish
