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
# the outer Nesterov step's two users: local-step training in one process
# (--sync-interval) and the hybrid's outer predictor, plain, with its
# per-tensor gate and under schedule-free (rates that keep some jumps and
# roll others back)
$HPT train $small --max-iters 200 --eval-interval 100 --sync-interval 10 --sync-outer-lr 1.5 --sync-outer-momentum 0.6 --out "$tmp/ls" >/dev/null 2>&1; echo "local-step $(crc "$tmp/ls")"
out="--mode hybrid --predictor outer --warmup-steps 20 --outer-interval 10 --outer-check 4 --outer-lr 8 --outer-momentum 0.6"
$HPT train $small --max-iters 200 --eval-interval 100 $out --out "$tmp/o" >/dev/null 2>&1; echo "hybrid-outer $(crc "$tmp/o")"
$HPT train $small --max-iters 200 --eval-interval 100 $out --outer-adapt agree --out "$tmp/oa" >/dev/null 2>&1; echo "hybrid-outer-agree $(crc "$tmp/oa")"
$HPT train $small --max-iters 200 --eval-interval 100 $out --optimizer schedule-free --lr 3e-3 --out "$tmp/osf" >/dev/null 2>&1; echo "hybrid-outer-sf $(crc "$tmp/osf")"
