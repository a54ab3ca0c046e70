#!/bin/sh
# cli_device.sh — --device (the device table, src/device): cpu is the default
# and trains to the default's bits; a device this build lacks (cuda without
# nvcc) or an unknown one is refused before anything is written, by hpt
# train, hpt compare and the Python binding alike.
# --device cuda's reason depends on the build and the machine: "this hpt was
# built without CUDA" (no nvcc at build time), "no CUDA device (...)" (the
# CUDA build where there is no usable GPU: CI). Where a GPU is usable the
# lookup passes and the trainer refuses instead, also before anything is
# written: "--device cuda: the GPT-2 family does not train on the GPU in this
# version yet" (src/train/trainer.c); no machine that runs this has one.
test_name=cli_device; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 12 --eval-iters 2 --threads 1"

run $HPT train $small --out "$tmp/default"
d=$(crc_of "$tmp/default")
run $HPT train $small --device cpu --out "$tmp/cpu"
if [ "$rc" -eq 0 ] && [ -n "$d" ] && [ "$(crc_of "$tmp/cpu")" = "$d" ]; then pass "--device cpu trains to the default's bits ($d)"
else fail "--device cpu (rc $rc, crc $(crc_of "$tmp/cpu") vs $d)"; fi

if $HPT --help 2>&1 | grep -q -- '--device cpu|cuda'; then pass "--help lists --device"; else fail "--help lists --device"; fi

cuda_why='--device cuda: \(this hpt was built without CUDA\|no CUDA device (.*)\|CUDA device 0 cannot be used\|the GPT-2 family does not train or evaluate on the GPU\)'
run $HPT train $small --device cuda --out "$tmp/cuda"
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" && [ ! -e "$tmp/cuda" ]; then
    pass "--device cuda refused with the reason, nothing written (exit $rc)"
else fail "--device cuda (rc $rc, $(ls "$tmp/cuda" 2>/dev/null | head -n 1))"; fi

run $HPT train $small --device tpu --out "$tmp/tpu"
if [ "$rc" -ne 0 ] && grep -q 'cpu, cuda' "$tmp/err" && [ ! -e "$tmp/tpu" ]; then pass "an unknown device is refused, listing the table"
else fail "--device tpu (rc $rc)"; fi

run $HPT compare $small --device cuda --seeds 1 --out "$tmp/cmp"
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" "$tmp/out"; then pass "hpt compare --device cuda refused with the reason"
else fail "hpt compare --device cuda (rc $rc)"; fi

# eval and sample take --device too: cpu runs, cuda is refused with the reason
# before the model is read
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device cpu
if [ "$rc" -eq 0 ] && grep -q '"loss"' "$tmp/out"; then pass "hpt eval --device cpu"; else fail "hpt eval --device cpu (rc $rc)"; fi
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device cuda
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" && [ ! -s "$tmp/out" ]; then pass "hpt eval --device cuda refused with the reason"
else fail "hpt eval --device cuda (rc $rc)"; fi
run $HPT sample --run "$tmp/default" --tokens 5 --device cpu
if [ "$rc" -eq 0 ]; then pass "hpt sample --device cpu"; else fail "hpt sample --device cpu (rc $rc)"; fi
run $HPT sample --run "$tmp/default" --tokens 5 --device cuda
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" && [ ! -s "$tmp/out" ]; then pass "hpt sample --device cuda refused with the reason"
else fail "hpt sample --device cuda (rc $rc)"; fi

# resume: the device may be given again (a run may move between devices)
run $HPT train $small --device cpu --max-iters 6 --save-interval 3 --out "$tmp/r"
run $HPT train --resume "$tmp/r" --device cpu
if [ "$rc" -eq 0 ]; then pass "--resume accepts --device"; else fail "--resume --device cpu (rc $rc)"; fi

py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -n "${SANITIZED:-}${VARIANT_BUILD:-}" ] || [ -z "$py" ]; then
    echo "skip: the Python binding's --device (sanitizer/ARCH build, or no python3 with numpy)"
else
    run env PYTHONPATH=python "$py" -c "
import sys, hpt
try:
    hpt.train(data=sys.argv[1], n_layer=1, n_head=1, n_embd=16, block_size=16, batch_size=4, max_iters=2,
              device='cuda', out=sys.argv[2])
except hpt.Error as e:
    print('refused:', e); sys.exit(0)
sys.exit(1)" "$tmp/data.txt" "$tmp/py"
    if [ "$rc" -eq 0 ] && grep -q -- "$cuda_why" "$tmp/out"; then pass "hpt.train(device='cuda') raises hpt.Error with the reason"
    else fail "python device='cuda' (rc $rc: $(cat "$tmp/out"))"; fi
fi
finish
