#!/bin/sh
# Bounded fuzzing of hpt's loaders (the state file, text, Fashion-MNIST IDX, hpt import's safetensors, token shards) and of resume down to the steps after it
# (one checkpoint section at a time: TCFG, TRST, DATA, LOGS, HYBR) with libFuzzer (Debian: clang-14,
# libfuzzer-14-dev, libclang-rt-14-dev), under ASan and UBSan (any report stops the target), without BLAS
# or OpenMP (the loaders need neither). Seeds: a real model.bin and
# checkpoint from a tiny training run, and a small text.
#
#   sh bench/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# Writes build-fuzz/ and bench/results/fuzz.json; exits 1 if a target crashed.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
# Debian's clang-14 package installs clang-14; the clang package adds `clang`
cc=$(command -v clang-14 || command -v clang || true)
[ -n "$cc" ] || { echo "fuzz: needs clang (apt-get install clang-14 libfuzzer-14-dev libclang-rt-14-dev)" >&2; exit 1; }
out=build-fuzz
mkdir -p $out/corpus-state $out/corpus-text $out/corpus-idx $out/corpus-resume $out/corpus-safetensors $out/corpus-shard $out/artifacts
src=$(ls src/base/*.c src/kernels/*.c src/device/*.c src/model/*.c src/data/*.c src/io/*.c src/train/*.c src/hybrid/*.c src/hybrid/phased/*.c src/run/*.c | grep -v -e device_cuda_load.c -e phased_none.c)   # the CPU-only build's rows: no CUDA plugin (device_nocuda.c), the phased extension's row present
flags="-std=c11 -D_GNU_SOURCE -DHPT_NO_BLAS -O1 -g -Iinclude $(pkg-config --cflags libcjson) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Wno-unknown-pragmas"
for t in state text idx resume safetensors shard; do
    "$cc" $flags bench/fuzz/fuzz_$t.c $src -lm -lz $(pkg-config --libs libcjson) -o $out/fuzz_$t
done
# seeds
[ -x ./hpt ] || make -j2 hpt >&2
python3 -c "print('the quick brown fox jumps over the lazy dog. ' * 200)" > $out/corpus-text/seed.txt
./hpt train --data $out/corpus-text/seed.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
    --max-iters 4 --eval-iters 1 --save-interval 2 --threads 1 --overwrite --out $out/seedrun >/dev/null 2>&1
cp $out/seedrun/model.bin $out/corpus-state/model.bin
cp $out/seedrun/checkpoints/*.bin $out/corpus-state/ 2>/dev/null || true
# the resume target's bases (fuzz_resume.c): a text checkpoint and a hybrid
# one taken after Predict phases, each halfway through its run (steps remain
# to be run after the resume), with the run's logs; its seeds are their
# TCFG, TRST, DATA, LOGS and HYBR payloads behind the selector byte
base=$out/base
rm -rf $base $out/seedtext $out/seedhyb; mkdir -p $base
./hpt train --data $out/corpus-text/seed.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
    --max-iters 20 --eval-iters 1 --eval-interval 5 --save-interval 10 --threads 1 --out $out/seedtext >/dev/null 2>&1
./hpt train --data $out/corpus-text/seed.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
    --max-iters 60 --eval-iters 1 --eval-interval 10 --threads 1 --mode hybrid --warmup-steps 10 --full-steps 5 \
    --confidence-threshold 0 --ensemble 2 --hidden 8 --bptt 4 --save-interval 30 --out $out/seedhyb >/dev/null 2>&1
cp $out/seedtext/checkpoints/ckpt-00000010.bin $base/text.bin
cp $out/seedtext/metrics.jsonl $base/text.metrics.jsonl
cp $out/seedhyb/checkpoints/ckpt-00000030.bin $base/hybrid.bin
cp $out/seedhyb/metrics.jsonl $base/hybrid.metrics.jsonl
cp $out/seedhyb/phases.jsonl $base/hybrid.phases.jsonl
rm -f $out/corpus-resume/*
resume_max=$(python3 - $base $out/corpus-resume <<'PY'
import struct, sys
base, corpus = sys.argv[1], sys.argv[2]
fuzzed = ["TCFG", "TRST", "DATA", "LOGS", "HYBR"]
longest = 0
for b, name in enumerate(["text", "hybrid"]):
    data = open(f"{base}/{name}.bin", "rb").read()
    off, secs = 32, {}
    while data[off:off + 4] != b"END!":
        n = struct.unpack_from("<Q", data, off + 8)[0]
        secs[data[off:off + 4].decode()] = data[off + 16:off + 16 + n]
        off += 16 + n
    for i, tag in enumerate(fuzzed[:5 if b else 4]):
        seed = bytes([b | i << 1]) + secs[tag]
        open(f"{corpus}/{name}-{tag}", "wb").write(seed)
        longest = max(longest, len(seed))
# HYBR patches (selector 1 | 5 << 1): the version and config, then the start
# of every block (its length and first fields), as fuzz_resume.c reads them
h = secs["HYBR"]
starts, off = [0, 92], 100
while off + 8 <= len(h):
    starts.append(off)
    off += 8 + struct.unpack_from("<Q", h, off)[0]
for k, at in enumerate(starts):
    open(f"{corpus}/hybrid-patch-{k}", "wb").write(bytes([1 | 5 << 1]) + struct.pack("<I", at) + h[at:at + 96])
print(longest + 1024)
PY
)
# IDX seeds: a valid header with a short payload, gzipped and plain
python3 - $out/corpus-idx <<'PY'
import gzip, struct, sys
d = sys.argv[1]
raw = bytes([0, 0, 8, 3]) + struct.pack(">III", 60000, 28, 28) + bytes(range(256)) * 8
open(f"{d}/plain.idx", "wb").write(raw)
open(f"{d}/small.gz", "wb").write(gzip.compress(raw))
PY
# safetensors seeds: the hpt import fixtures (F32 GPT2Model names with the
# mask buffers, F16 GPT2LMHeadModel's with lm_head, BF16 as save_pretrained
# writes it) and the crafted files of cli_hf.sh
cp tests/fixtures/hf/model.safetensors $out/corpus-safetensors/f32.safetensors
cp tests/fixtures/hf/prefixed/model.safetensors $out/corpus-safetensors/f16.safetensors
cp tests/fixtures/hf/bf16/model.safetensors $out/corpus-safetensors/bf16.safetensors
rm -rf $out/crafted && mkdir -p $out/crafted && python3 tests/hf_files.py craft tests/fixtures/hf/model.safetensors $out/crafted
for f in $out/crafted/*.safetensors; do cp "$f" $out/corpus-safetensors/crafted-$(basename "$f"); done
# shard seeds (selector byte, then the file): a valid llm.c shard, nanoGPT
# ids, and llm.c's bad cases: version 2, a count past the size, an id past 255
python3 - $out/corpus-shard <<'PY'
import struct, sys
d = sys.argv[1]
ids = struct.pack("<300H", *[(i * 31) % 256 for i in range(300)])
def llmc(magic=20240520, version=1, n=300, body=ids):
    return bytes([0]) + struct.pack("<256i", magic, version, n, *([0] * 253)) + body
open(f"{d}/llmc", "wb").write(llmc())
open(f"{d}/nano", "wb").write(bytes([1]) + ids)
open(f"{d}/version2", "wb").write(llmc(version=2))
open(f"{d}/count", "wb").write(llmc(n=301))
open(f"{d}/bigid", "wb").write(llmc(body=ids[:-2] + struct.pack("<H", 999)))
PY
status=0
res="{"
for t in state text idx resume safetensors shard; do
    log=$out/fuzz_$t.log
    max_len=65536
    [ $t = resume ] && max_len=$resume_max
    [ $t = safetensors ] && max_len=262144
    # every seed kept and mutated (the resume seeds cover the same code until
    # mutated: without keep_seed, libFuzzer would keep one per base)
    if $out/fuzz_$t -max_total_time="$secs" -max_len=$max_len -len_control=0 -keep_seed=1 -timeout=20 -rss_limit_mb=2048 \
        -artifact_prefix=$out/artifacts/ $out/corpus-$t >"$log" 2>&1; then rc=0; else rc=$?; status=1; fi
    runs=$(grep -o "Done [0-9]* runs" "$log" | grep -o "[0-9]*" || true)
    echo "fuzz_$t: ${runs:-?} inputs in ${secs}s, exit $rc (log $log)"
    res="$res\"fuzz_$t\": {\"seconds\": $secs, \"inputs\": ${runs:-null}, \"exit\": $rc},"
done
echo "${res%,}, \"date\": \"$(date -u +%FT%TZ)\"}" > bench/results/fuzz.json
exit $status
