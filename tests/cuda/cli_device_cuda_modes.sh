#!/bin/sh
# cli_device_cuda_modes.sh — `hpt train --device cuda` end to end on a
# machine with a GPU (make test-cuda), the second half of
# cli_device_cuda.sh's checks (split so the two run side by side):
#   - --mode hybrid (the outer step, plain and under schedule-free) on the
#     GPU near the CPU's, jumps applied; killed and resumed to its bits;
#   - on the CUDA emulator only (it counts every copy): a training step's
#     host-device traffic, plain and hybrid, under a tenth of the parameters;
#   - the memory ledger: --vram-limit and a model over the GPU's memory are
#     refused with the figures before anything is written; summary.json's
#     plan against the driver's peak (printed: the record of the margin);
#   - --precision tf32 and bf16 train (their losses near fp32's); fp16 and
#     bf16 with the T x T attention are refused;
#   - what stays on the CPU is refused.
# Where no GPU can be used it says skip, as cli_device_cuda.sh does.
test_name=cli_device_cuda_modes; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 4 --eval-iters 2 --threads 1"
run $HPT train $small --device cuda --out "$tmp/probe"
why=$(cuda_unusable); [ -z "$why" ] || { echo "skip: $why"; finish; exit; }
[ "$rc" -eq 0 ] || fail "--device cuda (rc $rc: $(cat "$tmp/err"))"
val() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_val_loss"])' "$1/summary.json" 2>/dev/null; }

# the hybrid on the device (its outer step and rollback kernels, its buffers
# in device memory): against the same run on the CPU (the kernels round
# differently, so the final val within 1e-3, jumps applied), killed and
# resumed on the GPU to the uninterrupted GPU run's bits; its own time, the
# record of "under 1% of a step" (printed, not asserted: timing)
hyb="--max-iters 300 --eval-interval 100 --mode hybrid --outer-interval 20"
for extra in "--outer-lr 3" "--outer-lr 3 --optimizer schedule-free"; do
    rm -rf "$tmp/hg" "$tmp/hc"
    run $HPT train $small $hyb $extra --device cuda --out "$tmp/hg"
    grc=$rc
    run $HPT train $small $hyb $extra --device cpu --out "$tmp/hc"
    jumps=$(python3 -c 'import json,sys; j = json.load(open(sys.argv[1]))["outer_jumps"]; print(j["applied"], j["rolled_back"])' "$tmp/hg/summary.json" 2>/dev/null)
    own=$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); t = d["phase_time_s"]; print("%.3g%%" % (100 * (d["predictor_overhead_s"] + d["controller_overhead_s"]) / sum(t.values())))' "$tmp/hg/summary.json" 2>/dev/null)
    if [ "$grc" -eq 0 ] && [ "${jumps%% *}" -gt 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-3 * abs(b))' \
        "$(val "$tmp/hg")" "$(val "$tmp/hc")"; then
        pass "--mode hybrid $extra on the GPU: final val $(val "$tmp/hg") against the CPU's $(val "$tmp/hc") (jumps applied, rolled back: $jumps; its own time $own of the run)"
    else fail "hybrid $extra on the GPU (rc $grc, val $(val "$tmp/hg") vs $(val "$tmp/hc"), jumps $jumps)"; fi
done
rm -rf "$tmp/hg"; run $HPT train $small $hyb --outer-lr 3 --device cuda --out "$tmp/hg"
kill_after "$tmp/hk" 3 150 $small $hyb --outer-lr 3 --save-interval 50 --keep-last 10 --device cuda
run $HPT train --resume "$tmp/hk" --device cuda
if [ "$rc" -eq 0 ] && [ -n "$(crc_of "$tmp/hg")" ] && [ "$(crc_of "$tmp/hk")" = "$(crc_of "$tmp/hg")" ]; then
    pass "the hybrid killed ($how) and resumed on the GPU: the uninterrupted GPU run's bits"
else fail "hybrid kill/resume on the GPU (rc $rc, crc $(crc_of "$tmp/hk") vs $(crc_of "$tmp/hg"))"; fi

# GPU-resident training: what a step moves between
# host and device, counted by the CUDA emulator (HPT_CUDA_EMU_STATS: every
# cudaMemcpy each way), so only there. A run of 80 steps against one of 40:
# the difference is 40 steps' traffic, without the start's upload and the
# end's checkpoint. It must stay under a tenth of the parameters' bytes a
# step, plain and with the hybrid's outer step (jumps and rollbacks on the
# device, which must happen inside the 40 steps compared), where a
# parameter-sized copy would be 10 times that.
if [ -n "${HPT_CUDA_EMULATED:-}" ]; then
    hyb_fast="--mode hybrid --warmup-steps 10 --outer-interval 10"
    for mode in "" "$hyb_fast --outer-lr 3" "$hyb_fast --outer-lr 100"; do
        for n in 40 80; do
            rm -rf "$tmp/tr$n"
            run env HPT_CUDA_EMU_STATS="$tmp/tr$n.json" $HPT train $small --max-iters $n --eval-interval 0 $mode \
                --device cuda --out "$tmp/tr$n"
        done
        msg=$(python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
a, b = (json.load(open("%s/tr%d.json" % (t, n))) for n in (40, 80))
pb = json.load(open(t + "/tr80/summary.json"))["memory_bytes"]["params"]
up, down = ((b[k]["bytes"] - a[k]["bytes"]) / 40 for k in ("h2d", "d2h"))
launches = (b["launches"] - a["launches"]) / 40
# the hybrid's jumps (and rollbacks) must fall inside the 40 steps compared
ja, jb = (json.load(open("%s/tr%d/summary.json" % (t, n))).get("outer_jumps") for n in (40, 80))
jumps = "" if ja is None else "; jumps %d applied, %d rolled back in them" % (
    jb["applied"] - ja["applied"], jb["rolled_back"] - ja["rolled_back"])
print("%.0f B up and %.0f B down a step, %.0f launches; parameters %d B%s" % (up, down, launches, pb, jumps))
sys.exit(0 if up + down < pb / 10 and (ja is None or jb["applied"] > ja["applied"]) else 1)
PY
        )
        if [ $? -eq 0 ] && [ "$rc" -eq 0 ]; then pass "${mode:-plain training}: a step's host-device traffic: $msg"
        else fail "${mode:-plain training}: host-device traffic (rc $rc: $msg)"; fi
    done
fi

# the memory ledger
run $HPT train $small --device cuda --vram-limit 1 --n-embd 256 --out "$tmp/vl"
if [ "$rc" -ne 0 ] && grep -q 'more than --vram-limit 1.0 MiB' "$tmp/err" && [ ! -e "$tmp/vl" ]; then
    pass "--vram-limit refuses a bigger plan, nothing written"
else fail "--vram-limit on the GPU (rc $rc: $(cat "$tmp/err"))"; fi
run $HPT train --data "$tmp/data.txt" --n-layer 48 --n-head 16 --n-embd 4096 --block-size 64 --batch-size 8 \
    --max-iters 1 --device cuda --out "$tmp/huge"
if [ "$rc" -ne 0 ] && grep -q 'of device memory .* but only .* is free' "$tmp/err" && [ ! -e "$tmp/huge" ]; then
    pass "a model over the GPU's memory is refused with needed vs free, nothing written"
else fail "GPU out of memory (rc $rc: $(cat "$tmp/err"))"; fi
dm=$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1]))["device_memory_bytes"]; print(d["plan"], d["peak_used"], d["total"])' "$tmp/hg/summary.json")
set -- $dm
if [ -n "$dm" ] && [ "$2" -ge "$1" ]; then
    pass "summary.json: plan $1 B, the driver's peak $2 B (margin $(( ($2 - $1) / 1048576 )) MiB: context-free workspace and rounding), of $3 B"
else fail "device memory in summary.json ($dm)"; fi

# precision
run $HPT train $small --device cuda --precision tf32 --out "$tmp/tf32"
if [ "$rc" -eq 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-2 * abs(b))' \
    "$(val "$tmp/tf32")" "$(val "$tmp/probe")"; then pass "--precision tf32 trains (val $(val "$tmp/tf32") against fp32's $(val "$tmp/probe"))"
else fail "--precision tf32 (rc $rc: $(cat "$tmp/err"))"; fi
run $HPT train $small --device cuda --precision bf16 --out "$tmp/bf16"
if [ "$rc" -eq 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 2e-2 * abs(b))' \
    "$(val "$tmp/bf16")" "$(val "$tmp/probe")"; then pass "--precision bf16 trains (val $(val "$tmp/bf16") against fp32's $(val "$tmp/probe"))"
else fail "--precision bf16 (rc $rc: $(cat "$tmp/err"))"; fi
run env HPT_CUDA_ATTENTION=materialise $HPT train $small --device cuda --precision bf16 --out "$tmp/bf16-mat"
if [ "$rc" -ne 0 ] && grep -q 'T x T attention, which has no bf16 kernels' "$tmp/err" && [ ! -e "$tmp/bf16-mat" ]; then
    pass "--precision bf16 with the T x T attention refused before anything is written"
else fail "bf16 with HPT_CUDA_ATTENTION=materialise (rc $rc: $(cat "$tmp/err"))"; fi
run $HPT train $small --device cuda --precision fp16 --out "$tmp/fp16"
if [ "$rc" -ne 0 ] && [ ! -e "$tmp/fp16" ]; then pass "--precision fp16 refused"
else fail "--precision fp16 (rc $rc)"; fi

# what runs on the CPU only
run $HPT train --task fashion-mnist --model mlp --max-iters 2 --device cuda --out "$tmp/fm"
if [ "$rc" -ne 0 ] && grep -q 'classifiers.*CPU only' "$tmp/err"; then pass "a classifier on the GPU is refused with the reason"
elif [ "$rc" -ne 0 ] && grep -q "install Debian's dataset-fashion-mnist" "$tmp/err"; then
    # the task reads its data before it builds (and refuses) the model: a
    # machine without the data set (the GPU image) cannot reach the check.
    # Not "skip:" (gpu_session.sh counts those as failures): a note
    echo "note: the classifier refusal not reached: no Fashion-MNIST here ($(head -n 1 "$tmp/err"))"
else fail "classifier on the GPU (rc $rc: $(cat "$tmp/err"))"; fi
finish
