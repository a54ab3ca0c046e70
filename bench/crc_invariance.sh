#!/bin/sh
# crc_invariance.sh — the param_crc32 of a fixed set of runs, one per line
# ("name crc"), for showing that a refactor changes no arithmetic: run it
# before and after and diff the two outputs. Baseline text, hybrid with each
# predictor forced to predict (jumps kept and rolled back), Fashion-MNIST MLP and CNN, and a hybrid run
# killed with SIGKILL and resumed (its line must equal the uninterrupted one).
#   sh bench/crc_invariance.sh [HPT] > before.txt
# Lines that changed on purpose: hybrid-linear, hybrid-shrink and the resumed
# shrink run when a predictor began to wait for its history (their Predict
# phases no longer begin before the predictor's ring holds its snapshots: 20
# and 120 updates here).
set -u
HPT=${1:-./hpt}
data=${DATA:-data/fortunes.txt}
[ -f "$data" ] || make -s "$data" >/dev/null
tmp=$(mktemp -d /tmp/hpt_crc.XXXXXX); trap 'rm -rf "$tmp"' EXIT
crc() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["param_crc32"])' "$1/summary.json" 2>/dev/null || echo missing; }
small="--data $data --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 --eval-iters 4 --threads 1"
hyb="--mode hybrid --warmup-steps 20 --full-steps 5 --min-predict-steps 10 --max-predict-steps 30 --correct-steps 2 --confidence-threshold 0 --predict-waste-budget 1 --backoff-after 1000"

$HPT train $small --max-iters 400 --eval-interval 100 --out "$tmp/base" >/dev/null 2>&1; echo "baseline $(crc "$tmp/base")"
for p in coast shrink stale-adam linear; do
    $HPT train $small --max-iters 400 --eval-interval 100 $hyb --predictor $p --out "$tmp/h-$p" >/dev/null 2>&1
    echo "hybrid-$p $(crc "$tmp/h-$p")"
done
$HPT train --task fashion-mnist --model mlp --max-iters 150 --eval-interval 75 --eval-iters 4 --threads 1 --out "$tmp/mlp" >/dev/null 2>&1; echo "fashion-mlp $(crc "$tmp/mlp")"
$HPT train --task fashion-mnist --model cnn --max-iters 30 --batch-size 16 --eval-interval 15 --eval-iters 2 --threads 1 --out "$tmp/cnn" >/dev/null 2>&1; echo "fashion-cnn $(crc "$tmp/cnn")"
# the shrink run again, killed after its 3rd checkpoint and resumed
$HPT train $small --max-iters 400 --eval-interval 100 $hyb --predictor shrink --save-interval 60 --keep-last 10 --out "$tmp/k" >/dev/null 2>&1 &
pid=$!; i=0
while [ "$(ls "$tmp/k/checkpoints" 2>/dev/null | grep -c '^ckpt-.*\.bin$')" -lt 3 ] && kill -0 $pid 2>/dev/null && [ $i -lt 6000 ]; do sleep 0.01; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
$HPT train --resume "$tmp/k" >/dev/null 2>&1; echo "hybrid-shrink-resumed $(crc "$tmp/k")"
