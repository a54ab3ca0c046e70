#!/bin/sh
# Bounded fuzzing of hpt's loaders (the state file, text, Fashion-MNIST IDX, checkpoint resume) with libFuzzer (Debian: clang-14,
# libfuzzer-14-dev, libclang-rt-14-dev), under ASan and UBSan, without BLAS
# or OpenMP (the loaders need neither). Seeds: a real model.bin and
# checkpoint from a tiny training run, and a small text.
#
#   sh bench/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# Writes build-fuzz/ and bench/results/fuzz.json; exits 1 if a target crashed.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
command -v clang >/dev/null || { echo "fuzz: needs clang (apt-get install clang-14 libfuzzer-14-dev libclang-rt-14-dev)" >&2; exit 1; }
out=build-fuzz
mkdir -p $out/corpus-state $out/corpus-text $out/corpus-idx $out/corpus-resume $out/artifacts
src=$(ls src/base/*.c src/kernels/*.c src/model/*.c src/train/*.c src/hybrid/*.c)
flags="-std=c11 -D_GNU_SOURCE -DHPT_NO_BLAS -O1 -g -Iinclude $(pkg-config --cflags libcjson) -fsanitize=fuzzer,address,undefined -Wno-unknown-pragmas"
for t in state text idx resume; do
    clang $flags bench/fuzz/fuzz_$t.c $src -lm -lz $(pkg-config --libs libcjson) -o $out/fuzz_$t
done
# seeds
[ -x ./hpt ] || make -j2 hpt >&2
python3 -c "print('the quick brown fox jumps over the lazy dog. ' * 200)" > $out/corpus-text/seed.txt
./hpt train --data $out/corpus-text/seed.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
    --max-iters 4 --eval-iters 1 --save-interval 2 --threads 1 --overwrite --out $out/seedrun >/dev/null 2>&1
cp $out/seedrun/model.bin $out/corpus-state/model.bin
cp $out/seedrun/checkpoints/*.bin $out/corpus-state/ 2>/dev/null || true
cp $out/seedrun/checkpoints/*.bin $out/corpus-resume/
# a hybrid checkpoint (HYBR section), taken after its first Predict phase
rm -rf $out/seedhyb
./hpt train --data $out/corpus-text/seed.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 \
    --max-iters 40 --eval-iters 1 --threads 1 --mode hybrid --warmup-steps 10 --full-steps 5 \
    --confidence-threshold 0 --ensemble 2 --hidden 8 --bptt 4 --save-interval 20 --out $out/seedhyb >/dev/null 2>&1
for f in $out/seedhyb/checkpoints/*.bin; do cp "$f" $out/corpus-resume/hyb-$(basename "$f"); done
# IDX seeds: a valid header with a short payload, gzipped and plain
python3 - $out/corpus-idx <<'PY'
import gzip, struct, sys
d = sys.argv[1]
raw = bytes([0, 0, 8, 3]) + struct.pack(">III", 60000, 28, 28) + bytes(range(256)) * 8
open(f"{d}/plain.idx", "wb").write(raw)
open(f"{d}/small.gz", "wb").write(gzip.compress(raw))
PY
status=0
res="{"
for t in state text idx resume; do
    log=$out/fuzz_$t.log
    if $out/fuzz_$t -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -artifact_prefix=$out/artifacts/ $out/corpus-$t >"$log" 2>&1; then rc=0; else rc=$?; status=1; fi
    runs=$(grep -o "Done [0-9]* runs" "$log" | grep -o "[0-9]*" || true)
    echo "fuzz_$t: ${runs:-?} inputs in ${secs}s, exit $rc (log $log)"
    res="$res\"fuzz_$t\": {\"seconds\": $secs, \"inputs\": ${runs:-null}, \"exit\": $rc},"
done
echo "${res%,}, \"date\": \"$(date -u +%FT%TZ)\"}" > bench/results/fuzz.json
exit $status
