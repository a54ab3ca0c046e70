#!/bin/sh
# tier: fast (make test; tests/run.sh)
# Allocations are planned before they are made: a model file
# whose config passes every format check but asks for hundreds of GiB of
# activations, and legal flags far beyond the machine, are refused at once
# with the figures (needed vs available) and status 1 (a resource limit of
# this machine, not a malformed command: the same flags run on a bigger one),
# before anything is allocated or written.
test_name=cli_alloc; . tests/lib.sh

# (a) a forged model file: 3.4 MB of parameters that pass the CRC and the
# parameter-count check, for a GPT-2 of 256 layers at block size 8192 whose
# attention activations alone are 256 x 16 heads x 8192^2 floats (1.1 TB)
python3 - "$tmp/forged.bin" <<'PY'
import struct, sys, zlib
V, T, L, NH, C = 256, 8192, 256, 16, 16
n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C      # V = 256 is its own padded vocab
def sec(tag, body): return tag + struct.pack('<IQ', 0, len(body)) + body
body = sec(b'CONF', struct.pack('<I6I', 6, 1, V, T, L, NH, C)) + sec(b'TOKN', struct.pack('<II', 0, 256)) \
     + sec(b'PARM', struct.pack('<Q', n) + bytes(4 * n))
size = 32 + len(body) + 20
head = b'HPTSTATE' + struct.pack('<IIIIQ', 1, 32, 0x01020304, 0, size)
data = head + body + b'END!' + struct.pack('<IQ', 0, 4)
open(sys.argv[1], 'wb').write(data + struct.pack('<I', zlib.crc32(data)))
PY
run timeout 60 "$HPT" sample --model "$tmp/forged.bin" --tokens 1 --threads 1
if [ $rc -eq 1 ] && grep -q "the model needs .* GiB (parameters .*activations .* GiB) .*available" "$tmp/err"; then
    pass "(a) forged model file: refused with the figures ($(grep -o 'needs [0-9.]* GiB' "$tmp/err"))"
else fail "(a) forged model file: rc $rc"; fi

# (b) legal flags far beyond the machine: refused before the run directory
# exists (the issue's --n-embd 16384 --block-size 1024, at a batch that makes
# it tens of TB, beyond any machine this test runs on)
python3 -c "print('to be or not to be that is the question ' * 400)" > "$tmp/text.txt"
run timeout 60 "$HPT" train --data "$tmp/text.txt" --n-embd 16384 --block-size 1024 --batch-size 4096 --max-iters 1 --out "$tmp/big"
if [ $rc -eq 1 ] && grep -q "training needs .* GiB (parameters .*AdamW moments .*) but only .* is available" "$tmp/err" &&
   [ ! -e "$tmp/big" ]; then pass "(b) --n-embd 16384 --block-size 1024: refused ($(grep -o 'needs [0-9.]* GiB' "$tmp/err")), nothing written"
else fail "(b) huge flags: rc $rc, out dir $(ls -d "$tmp/big" 2>&1)"; fi

# (c) --rss-limit below the planned arenas: refused at the start, not after allocating
run "$HPT" train --data "$tmp/text.txt" --n-layer 2 --n-embd 256 --max-iters 1 --rss-limit 8 --out "$tmp/lim"
if [ $rc -eq 1 ] && grep -q "more than --rss-limit 8.0 MiB" "$tmp/err" && [ ! -e "$tmp/lim" ]; then
    pass "(c) --rss-limit below the plan: refused with the figures"
else fail "(c) --rss-limit: rc $rc"; fi

# (d) image tasks too (the CNN's im2col buffers grow with the batch)
F=/usr/share/datasets/fashion-mnist
if [ -f "$F/train-images-idx3-ubyte.gz" ]; then
    run "$HPT" train --task fashion-mnist --model cnn --batch-size 65536 --max-iters 1 --rss-limit 1000 --out "$tmp/cnn"
    if [ $rc -eq 1 ] && grep -q "training needs .* GiB .*activations" "$tmp/err" && [ ! -e "$tmp/cnn" ]; then
        pass "(d) fashion-mnist CNN at batch 65536: refused"
    else fail "(d) CNN batch 65536: rc $rc"; fi
else echo "skip (d) no Fashion-MNIST in $F"; fi

finish
