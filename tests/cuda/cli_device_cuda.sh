#!/bin/sh
# cli_device_cuda.sh — `hpt train --device cuda` on a machine with a GPU (make
# test-cuda): the lookup passes, and the trainer refuses with what exists
# (the GPT-2 family does not train on the GPU yet) before anything is
# written, instead of reaching its model->dev assertion. Where no GPU can be
# used (CI, this project's CPU machines) tests/cli_device.sh covers the
# refusal and this says skip.
test_name=cli_device_cuda; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 4 --eval-iters 2 --threads 1"

run $HPT train $small --device cuda --out "$tmp/cuda"
if grep -q -- '--device cuda: \(this hpt was built without CUDA\|no CUDA device\|CUDA device 0 cannot be used\)' "$tmp/err"; then
    echo "skip: $(grep -o -- '--device cuda: .*' "$tmp/err" | head -n 1)"
    finish; exit
fi
if [ "$rc" -ne 0 ] && grep -q -- '--device cuda: the GPT-2 family does not train or evaluate on the GPU' "$tmp/err" \
    && [ ! -e "$tmp/cuda" ]; then pass "--device cuda with a GPU: refused by the trainer, nothing written (exit $rc)"
else fail "--device cuda with a GPU (rc $rc, $(ls "$tmp/cuda" 2>/dev/null | head -n 1))"; fi
finish
