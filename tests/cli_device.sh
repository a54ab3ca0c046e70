#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_device.sh — --device (the device table, src/device): cpu is the default
# and trains to the default's bits; a device this build lacks (cuda without
# nvcc) or an unknown one is refused before anything is written, by hpt
# train, hpt compare and the Python binding alike.
# --device cuda's reason depends on the build and the machine: "this hpt was
# built without CUDA" (no nvcc at build time), "no CUDA device (...)" (the
# CUDA build where there is no usable GPU: CI). Where a GPU is usable the
# cuda checks are skipped (tests/cuda/cli_device_cuda.sh trains there).
# --device guard (src/device/device_guard.c) runs the CPU's kernels on memory
# the host cannot touch between the device's calls: every path that trains
# on a GPU is run here on it, and any host read or write of device memory
# (the failure a GPU would show) is a crash. It must give the CPU's bits,
# and checkpoints must move between it and the CPU both ways.
test_name=cli_device; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 12 --eval-iters 2 --threads 1"

run $HPT train $small --out "$tmp/default"
d=$(crc_of "$tmp/default")
run $HPT train $small --device cpu --out "$tmp/cpu"
if [ "$rc" -eq 0 ] && [ -n "$d" ] && [ "$(crc_of "$tmp/cpu")" = "$d" ]; then pass "--device cpu trains to the default's bits ($d)"
else fail "--device cpu (rc $rc, crc $(crc_of "$tmp/cpu") vs $d)"; fi

if $HPT --help 2>&1 | grep -q -- '--device cpu|cuda'; then pass "--help lists --device"; else fail "--help lists --device"; fi

cuda_why='--device cuda: \(this hpt was built without CUDA\|no CUDA device (.*)\|CUDA device 0 cannot be used\|cuBLAS cannot be used\)'
run $HPT train $small --device cuda --out "$tmp/cuda"
gpu=0
if [ "$rc" -eq 0 ]; then gpu=1; echo "skip: a GPU is usable here: the cuda refusals (tests/cuda/ trains on it)"
elif grep -q -- "$cuda_why" "$tmp/err" && [ ! -e "$tmp/cuda" ]; then
    pass "--device cuda refused with the reason, nothing written (exit $rc)"
else fail "--device cuda (rc $rc, $(ls "$tmp/cuda" 2>/dev/null | head -n 1))"; fi

# the guard device: the CPU's bits on every training path a GPU takes
for extra in "" "--grad-accum 2" "--optimizer schedule-free" "--ema 0.9" "--init $tmp/default/model.bin"; do
    rm -rf "$tmp/g" "$tmp/c"
    run $HPT train $small $extra --device guard --out "$tmp/g"
    grc=$rc
    run $HPT train $small $extra --device cpu --out "$tmp/c"
    if [ "$grc" -eq 0 ] && [ "$rc" -eq 0 ] && [ -n "$(crc_of "$tmp/c")" ] && [ "$(crc_of "$tmp/g")" = "$(crc_of "$tmp/c")" ]; then
        pass "--device guard ${extra:-(plain)}: no host access to device memory, the CPU's bits ($(crc_of "$tmp/c"))"
    else fail "--device guard ${extra:-(plain)} (rc $grc/$rc, crc $(crc_of "$tmp/g") vs $(crc_of "$tmp/c"))"; fi
done
# a non-finite loss on the device: the trainer zeroes the step's gradient
# before it stops with the reason (that was once a host memset of device
# memory, a SIGSEGV on a GPU, which the guard row turns into a crash here).
# The NaN is forced by --init from the default run's model.bin with every
# parameter NaN (CRC rewritten), so the first forward's loss is NaN.
nan_model "$tmp/default/model.bin" "$tmp/nan.bin"
for extra in "" "--grad-accum 2" "--mode hybrid"; do
    rm -rf "$tmp/nan"
    run $HPT train $small $extra --init "$tmp/nan.bin" --device guard --out "$tmp/nan"
    if [ "$rc" -eq 1 ] && grep -q 'training loss is nan at step 1' "$tmp/err"; then
        pass "--device guard ${extra:-(plain)}, a NaN loss: exit 1 with the reason, no host access to device memory"
    else fail "--device guard ${extra:-(plain)}, a NaN loss (rc $rc, want 1 and 'training loss is nan at step 1')"; fi
done
# checkpoints move between the devices: killed on one, resumed on the other,
# the uninterrupted run's bits
long="$small --max-iters 400 --eval-interval 100 --save-interval 50 --keep-last 10"
run $HPT train $long --out "$tmp/whole"
whole=$(crc_of "$tmp/whole")
for pair in "guard cpu" "cpu guard"; do
    set -- $pair
    rd="$tmp/move-$1"
    $HPT train $long --device "$1" --out "$rd" >/dev/null 2>&1 &
    pid=$!; i=0
    while [ "$(ls "$rd/checkpoints" 2>/dev/null | grep -c '^ckpt-.*\.bin$')" -lt 2 ] && kill -0 $pid 2>/dev/null && [ $i -lt 3000 ]; do
        sleep 0.01; i=$((i + 1))
    done
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    run $HPT train --resume "$rd" --device "$2"
    on=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"])' "$rd/summary.json" 2>/dev/null)
    if [ "$rc" -eq 0 ] && [ -n "$whole" ] && [ "$(crc_of "$rd")" = "$whole" ] && [ "$on" = "$2" ]; then
        pass "killed on $1, resumed on $2: the uninterrupted run's bits ($whole)"
    else fail "killed on $1, resumed on $2 (rc $rc, crc $(crc_of "$rd") vs $whole, summary's device '$on')"; fi
done
# the memory ledger on a device with memory of its own (the guard row reports
# HPT_GUARD_MIB as its size): a plan over --vram-limit or over the free memory
# is refused with the figures before anything is written; summary.json's plan
# agrees with what the device saw the run hold (page rounding: within 1%)
run $HPT train $small --device guard --vram-limit 1 --n-embd 64 --out "$tmp/vl"
if [ "$rc" -ne 0 ] && grep -q 'needs .* of device memory (parameters .*), more than --vram-limit 1.0 MiB' "$tmp/err" \
    && [ ! -e "$tmp/vl" ]; then pass "--vram-limit refuses a bigger plan with the figures, nothing written"
else fail "--vram-limit (rc $rc: $(cat "$tmp/err"))"; fi
# the limit is the device instance's, opened with it on a resume too: a
# finished run of that size, resumed under 1 MiB, is refused and left as it was
$HPT train $small --device guard --n-embd 64 --max-iters 10 --eval-interval 10 --save-interval 10 --out "$tmp/vr" >/dev/null 2>&1
n0=$(nckpt "$tmp/vr")
run $HPT train --resume "$tmp/vr" --device guard --vram-limit 1
if [ "$n0" -ge 1 ] && [ "$rc" -ne 0 ] && grep -q 'more than --vram-limit 1.0 MiB' "$tmp/err" && [ "$(nckpt "$tmp/vr")" = "$n0" ]; then
    pass "--resume --vram-limit 1: the device opened with it refuses the plan, the run unchanged"
else fail "--resume --vram-limit 1 ($n0 checkpoints, rc $rc: $(head -c 300 "$tmp/err"))"; fi
run env HPT_GUARD_MIB=1 $HPT train $small --device guard --n-embd 64 --out "$tmp/oom"
if [ "$rc" -ne 0 ] && grep -q 'needs .* of device memory .* but only 1.0 MiB of 1.0 MiB is free' "$tmp/err" \
    && [ ! -e "$tmp/oom" ]; then pass "a plan over the device's free memory is refused with needed vs free"
else fail "device out of memory (rc $rc: $(cat "$tmp/err"))"; fi
run $HPT train $small --device guard --out "$tmp/led"
if [ "$rc" -eq 0 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["device_memory_bytes"]
sys.exit(not (0 < d["plan"] <= d["peak_used"] <= 1.01 * d["plan"] + 65536))' "$tmp/led/summary.json"; then
    pass "summary.json: the ledger's plan and the device's peak agree ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device_memory_bytes"])' "$tmp/led/summary.json"))"
else fail "device memory in summary.json (rc $rc)"; fi

# --precision: fp32 is every device's (the default's bits); tf32 and bf16 are a GPU's
run $HPT train $small --precision fp32 --out "$tmp/fp32"
if [ "$rc" -eq 0 ] && [ "$(crc_of "$tmp/fp32")" = "$d" ]; then pass "--precision fp32: the default's bits"
else fail "--precision fp32 (rc $rc)"; fi
for dv in cpu guard; do
    run $HPT train $small --device $dv --precision tf32 --out "$tmp/tf32-$dv"
    if [ "$rc" -ne 0 ] && grep -q -- '--precision tf32: the CPU computes in fp32 only' "$tmp/err" && [ ! -e "$tmp/tf32-$dv" ]; then
        pass "--precision tf32 on --device $dv refused with the reason"
    else fail "--precision tf32 on $dv (rc $rc: $(cat "$tmp/err"))"; fi
done

# what runs on the CPU only in this version is refused there, with the reason
run $HPT train --task fashion-mnist --model mlp --max-iters 2 --device guard --out "$tmp/fm"
if [ "$rc" -ne 0 ] && grep -q 'classifiers.*CPU only' "$tmp/err" && [ ! -e "$tmp/fm" ]; then
    pass "a classifier on --device guard is refused with the reason"
else fail "classifier on guard (rc $rc: $(cat "$tmp/err"))"; fi
run $HPT train $small --mode hybrid --predictor shrink --device guard --out "$tmp/hy"
if [ "$rc" -ne 0 ] && grep -q 'only the outer step .* runs on the device' "$tmp/err" && [ ! -e "$tmp/hy" ]; then
    pass "a phased predictor on --device guard is refused with the reason"
else fail "phased hybrid on guard (rc $rc: $(cat "$tmp/err"))"; fi

# the hybrid's default path (the outer step) on the device: the CPU's bits with
# jumps kept, with jumps rolled back (--outer-lr 100), under schedule-free, and
# killed and resumed on the device
hyb="--max-iters 300 --eval-interval 100 --mode hybrid --outer-interval 20"
for extra in "--outer-lr 3" "--outer-lr 100" "--outer-lr 3 --optimizer schedule-free"; do
    rm -rf "$tmp/hg" "$tmp/hc"
    run $HPT train $small $hyb $extra --device guard --out "$tmp/hg"
    grc=$rc
    run $HPT train $small $hyb $extra --device cpu --out "$tmp/hc"
    jumps=$(python3 -c 'import json,sys; j = json.load(open(sys.argv[1]))["outer_jumps"]; print(j["applied"], j["rolled_back"])' "$tmp/hg/summary.json" 2>/dev/null)
    if [ "$grc" -eq 0 ] && [ -n "$(crc_of "$tmp/hc")" ] && [ "$(crc_of "$tmp/hg")" = "$(crc_of "$tmp/hc")" ] && [ "${jumps%% *}" -gt 0 ]; then
        pass "--mode hybrid $extra on --device guard: the CPU's bits (jumps applied, rolled back: $jumps)"
    else fail "hybrid $extra on guard (rc $grc, crc $(crc_of "$tmp/hg") vs $(crc_of "$tmp/hc"), jumps $jumps)"; fi
done
rd="$tmp/hk"
$HPT train $small $hyb --outer-lr 3 --save-interval 50 --keep-last 10 --device guard --out "$rd" >/dev/null 2>&1 &
pid=$!; i=0
while [ "$(ls "$rd/checkpoints" 2>/dev/null | grep -c '^ckpt-.*\.bin$')" -lt 3 ] && kill -0 $pid 2>/dev/null && [ $i -lt 3000 ]; do
    sleep 0.01; i=$((i + 1))
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
run $HPT train --resume "$rd" --device guard
rm -rf "$tmp/hc"; run $HPT train $small $hyb --outer-lr 3 --device cpu --out "$tmp/hc"
if [ -n "$(crc_of "$tmp/hc")" ] && [ "$(crc_of "$rd")" = "$(crc_of "$tmp/hc")" ]; then
    pass "the hybrid killed and resumed on --device guard: the uninterrupted CPU run's bits"
else fail "hybrid kill/resume on guard (crc $(crc_of "$rd") vs $(crc_of "$tmp/hc"))"; fi

run $HPT train $small --device tpu --out "$tmp/tpu"
if [ "$rc" -ne 0 ] && grep -q 'cpu, cuda' "$tmp/err" && [ ! -e "$tmp/tpu" ]; then pass "an unknown device is refused, listing the table"
else fail "--device tpu (rc $rc)"; fi

# hpt compare passes --device to every run it starts: on guard each run says
# so in its args and summary.json, and trains to the CPU's bits
run $HPT compare $small --device guard --arms baseline --lrs 3e-3 --extend-sweep 0 --seeds 1 --out "$tmp/cmpg"
run_g=$(ls -d "$tmp"/cmpg/runs/baseline-* 2>/dev/null | head -n 1)
rm -rf "$tmp/cmpc"; run $HPT train $small --lr 3e-3 --min-lr 0 --seed 1337 --eval-interval 1 --out "$tmp/cmpc"
if [ -n "$run_g" ] && grep -q -- '--device guard' "$run_g/compare-args.txt" &&
    python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["device"] != "guard")' "$run_g/summary.json" &&
    [ -n "$(crc_of "$tmp/cmpc")" ] && [ "$(crc_of "$run_g")" = "$(crc_of "$tmp/cmpc")" ]; then
    pass "hpt compare --device guard: its run trains on guard, to the CPU's bits"
else fail "hpt compare --device guard (run ${run_g:-none}: $(cat "$run_g/compare-args.txt" 2>/dev/null); crc $(crc_of "$run_g") vs $(crc_of "$tmp/cmpc"))"; fi

if [ $gpu = 0 ]; then
run $HPT compare $small --device cuda --seeds 1 --out "$tmp/cmp"
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" "$tmp/out"; then pass "hpt compare --device cuda refused with the reason"
else fail "hpt compare --device cuda (rc $rc)"; fi
fi

# eval and sample take --device too: cpu runs, cuda is refused with the reason
# before the model is read
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device cpu
if [ "$rc" -eq 0 ] && grep -q '"loss"' "$tmp/out"; then pass "hpt eval --device cpu"; else fail "hpt eval --device cpu (rc $rc)"; fi
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device cuda
if [ "$rc" -ne 0 ] && grep -q -- "$cuda_why" "$tmp/err" && [ ! -s "$tmp/out" ]; then pass "hpt eval --device cuda refused with the reason"
else fail "hpt eval --device cuda (rc $rc)"; fi
run $HPT sample --run "$tmp/default" --tokens 5 --device cpu
if [ "$rc" -eq 0 ]; then pass "hpt sample --device cpu"; else fail "hpt sample --device cpu (rc $rc)"; fi
# on the guard device: the CPU's numbers and text (the model's logits read back through the device)
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device cpu
cpu_eval=$(cat "$tmp/out")
run $HPT eval --model "$tmp/default/model.bin" --data "$tmp/data.txt" --device guard
if [ "$rc" -eq 0 ] && [ -n "$cpu_eval" ] && [ "$(cat "$tmp/out")" = "$cpu_eval" ]; then pass "hpt eval --device guard: the CPU's loss"
else fail "hpt eval --device guard (rc $rc: $(cat "$tmp/out") vs $cpu_eval)"; fi
run $HPT sample --run "$tmp/default" --tokens 30 --seed 5 --device cpu
cpu_text=$(cat "$tmp/out")
run $HPT sample --run "$tmp/default" --tokens 30 --seed 5 --device guard
if [ "$rc" -eq 0 ] && [ -n "$cpu_text" ] && [ "$(cat "$tmp/out")" = "$cpu_text" ]; then pass "hpt sample --device guard: the CPU's text"
else fail "hpt sample --device guard (rc $rc)"; fi
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
