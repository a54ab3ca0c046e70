#!/bin/sh
# cli_device_cuda.sh — `hpt train --device cuda` end to end on a machine with
# a GPU (make test-cuda). Where no GPU can be used (CI, this project's CPU
# machines) it says skip; tests/cli_device.sh runs the same paths on the
# guard device there.
#   - a d4 and a d12 model's first 10 training losses, fp32 (TF32 off),
#     within 1e-4 relative of the CPU's from the same init and batches (the
#     flash attention), and d4's with HPT_CUDA_ATTENTION=materialise too, its
#     plan larger by exactly the T x T probabilities;
#   - kill -9 and resume on the GPU: the uninterrupted GPU run's bits, in
#     fp32 and in bf16 (bf16 activations);
#   - checkpoints between the devices: killed on one, resumed on the other,
#     the final val loss within 1e-3 relative of the uninterrupted run's (the
#     two devices' kernels round differently); a GPU checkpoint's weights
#     evaluate to the same loss on both (eval within 1e-5);
#   - the memory ledger: --vram-limit and a model over the GPU's memory are
#     refused with the figures before anything is written; summary.json's
#     plan against the driver's peak (printed: the record of the margin);
#   - --mode hybrid (the outer step, plain and under schedule-free) on the
#     GPU near the CPU's, jumps applied; killed and resumed to its bits;
#   - on the CUDA emulator only (it counts every copy): a training step's
#     host-device traffic, plain and hybrid, under a tenth of the parameters;
#   - --precision tf32 and bf16 train (their losses near fp32's);
#   - eval and sample on the GPU; what stays on the CPU is refused;
#   - a NaN loss (forced by NaN weights) stops the run with the reason.
test_name=cli_device_cuda; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 4 --eval-iters 2 --threads 1"

run $HPT train $small --device cuda --out "$tmp/probe"
if grep -q -- '--device cuda: \(this hpt was built without CUDA\|no CUDA device\|CUDA device 0 cannot be used\|cuBLAS cannot be used\)' "$tmp/err"; then
    echo "skip: $(grep -o -- '--device cuda: .*' "$tmp/err" | head -n 1)"
    finish; exit
fi
if [ "$rc" -eq 0 ]; then pass "--device cuda trains"; else fail "--device cuda (rc $rc: $(cat "$tmp/err"))"; fi

# a non-finite loss: the step's gradient is zeroed through the row before the
# run stops with the reason (once a host memset of device memory,
# a SIGSEGV on a GPU). The NaN: --init from the probe's model.bin with every
# parameter NaN (tests/cli_device.sh does the same on the guard device).
nan_model "$tmp/probe/model.bin" "$tmp/nan.bin"
run $HPT train $small --init "$tmp/nan.bin" --device cuda --out "$tmp/nan"
if [ "$rc" -eq 1 ] && grep -q 'training loss is nan at step 1' "$tmp/err"; then
    pass "a NaN loss on the GPU: exit 1 with the reason"
else fail "a NaN loss on the GPU (rc $rc, want 1 and 'training loss is nan at step 1')"; fi

# losses: metrics.jsonl's train_loss per step, the GPU's against the CPU's
losses_agree() {  # cpu_dir gpu_dir steps rtol
    python3 - "$@" <<'EOF'
import json, sys
c, g, n, tol = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def losses(d):
    return [json.loads(l)["train_loss"] for l in open(d + "/metrics.jsonl") if '"train_loss"' in l][:n]
a, b = losses(c), losses(g)
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == n else float("inf")
print("worst relative difference %.3g over %d steps" % (worst, n))
sys.exit(0 if worst <= tol else 1)
EOF
}
# d12 on a GPU only: on the CPU's CUDA emulator its 20 steps take minutes,
# and d4 runs the same kernels
archs="d4:--n-layer 4 --n-head 4 --n-embd 128"
[ -n "${HPT_CUDA_EMULATED:-}" ] || archs="$archs;d12:--n-layer 12 --n-head 12 --n-embd 192"
IFS=';'; set -- $archs; unset IFS
for arch in "$@"; do
    name=${arch%%:*}; flags=${arch#*:}
    common="--data $tmp/data.txt $flags --block-size 64 --batch-size 8 --max-iters 10 --eval-interval 0 --eval-iters 2 --threads 0"
    run $HPT train $common --device cpu --out "$tmp/$name-cpu"
    run $HPT train $common --device cuda --out "$tmp/$name-gpu"
    # set: a failed GPU run skips losses_agree, and lib.sh's set -u would end
    # the whole script at the fail message's $msg
    msg="not compared"
    if [ "$rc" -eq 0 ] && msg=$(losses_agree "$tmp/$name-cpu" "$tmp/$name-gpu" 10 1e-4); then
        pass "$name: the first 10 losses on the GPU within 1e-4 of the CPU's ($msg)"
    else fail "$name: GPU losses against the CPU's (rc $rc: $msg)"; fi
done

# the attention: the runs above used the flash kernels (the default); the
# T x T ones (HPT_CUDA_ATTENTION=materialise) give the CPU's losses too, and
# a plan larger by exactly L B NH T (T - 1) floats (att: probabilities, not
# one log-sum-exp per row): 4 x 8 x 4 x 64 x 63 x 4 bytes at d4
common="--data $tmp/data.txt --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 8 --max-iters 10 --eval-interval 0 --eval-iters 2 --threads 0"
run env HPT_CUDA_ATTENTION=materialise $HPT train $common --device cuda --out "$tmp/d4-gpu-mat"
if [ "$rc" -eq 0 ] && msg=$(losses_agree "$tmp/d4-cpu" "$tmp/d4-gpu-mat" 10 1e-4); then
    pass "d4, HPT_CUDA_ATTENTION=materialise: the first 10 losses within 1e-4 of the CPU's ($msg)"
else fail "d4, HPT_CUDA_ATTENTION=materialise: losses against the CPU's (rc $rc: $msg)"; fi
plans=$(python3 -c 'import json,sys; print(*(json.load(open(d + "/summary.json"))["device_memory_bytes"]["plan"] for d in sys.argv[1:]))' "$tmp/d4-gpu" "$tmp/d4-gpu-mat" 2>/dev/null)
set -- $plans
if [ $# -eq 2 ] && [ $(( $2 - $1 )) -eq $(( 4 * 8 * 4 * 64 * 63 * 4 )) ]; then
    pass "the flash attention's plan: $1 B, the T x T attention's $2 B"
else fail "plans of the two attentions ($plans)"; fi

# kill -9 and resume: on the GPU (bit-exact), and across devices (within rounding).
# On the CPU's CUDA emulator (make CUDA=emu test-cuda, tests/cudaemu) a tenth
# of the steps: it runs a step of this model in ~0.6 s, a GPU in milliseconds
if [ -n "${HPT_CUDA_EMULATED:-}" ]; then iters=30; every=5; else iters=300; every=50; fi
long="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 64 --block-size 32 --batch-size 8 --max-iters $iters --eval-interval $((2 * every)) --eval-iters 4 --threads 0 --save-interval $every --keep-last 10"
run $HPT train $long --device cuda --out "$tmp/whole-gpu"
whole_gpu=$(crc_of "$tmp/whole-gpu")
run $HPT train $long --device cpu --out "$tmp/whole-cpu"
val() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_val_loss"])' "$1/summary.json" 2>/dev/null; }
# lib.sh's kill_after: SIGKILLed once 2 checkpoints are written, or, where
# the GPU finished all its steps before the poll saw them, cut back to the
# second checkpoint (what a kill there leaves), so the resume always has steps to run
kill_after "$tmp/k-gpu" 2 $((2 * every)) $long --device cuda
run $HPT train --resume "$tmp/k-gpu" --device cuda
if [ "$rc" -eq 0 ] && [ -n "$whole_gpu" ] && [ "$(crc_of "$tmp/k-gpu")" = "$whole_gpu" ]; then
    pass "killed with SIGKILL and resumed on the GPU: the uninterrupted run's bits ($whole_gpu)"
else fail "GPU kill/resume (rc $rc, crc $(crc_of "$tmp/k-gpu") vs $whole_gpu)"; fi
# bf16 (bf16 activations, fp32 master weights and optimizer state): the
# weights' bf16 copy is rebuilt by every forward and the checkpoint keeps
# the precision, so a killed bf16 run resumes to the uninterrupted one's
# bits too, and those differ from fp32's (the bf16 kernels ran)
run $HPT train $long --device cuda --precision bf16 --out "$tmp/whole-bf16"
whole_bf16=$(crc_of "$tmp/whole-bf16")
kill_after "$tmp/k-bf16" 2 $((2 * every)) $long --device cuda --precision bf16
run $HPT train --resume "$tmp/k-bf16" --device cuda
if [ "$rc" -eq 0 ] && [ -n "$whole_bf16" ] && [ "$whole_bf16" != "$whole_gpu" ] &&
    [ "$(crc_of "$tmp/k-bf16")" = "$whole_bf16" ]; then
    pass "--precision bf16 killed with SIGKILL and resumed on the GPU: the uninterrupted bf16 run's bits ($whole_bf16, fp32's $whole_gpu)"
else fail "bf16 kill/resume (rc $rc, crc $(crc_of "$tmp/k-bf16") vs $whole_bf16, fp32 $whole_gpu)"; fi
for pair in "cuda cpu whole-gpu" "cpu cuda whole-cpu"; do
    set -- $pair
    kill_after "$tmp/x-$1" 2 $((2 * every)) $long --device "$1"
    run $HPT train --resume "$tmp/x-$1" --device "$2"
    if [ "$rc" -eq 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-3 * abs(b))' \
        "$(val "$tmp/x-$1")" "$(val "$tmp/$3")"; then
        pass "killed on $1, resumed on $2: final val $(val "$tmp/x-$1") against the uninterrupted $(val "$tmp/$3")"
    else fail "killed on $1, resumed on $2 (rc $rc, val $(val "$tmp/x-$1") vs $(val "$tmp/$3"))"; fi
done
ck=$(ls "$tmp/whole-gpu/checkpoints/"ckpt-*.bin | head -n 1)
run $HPT eval --model "$ck" --data "$tmp/data.txt" --device cpu
ev_cpu=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["loss"])' < "$tmp/out")
run $HPT eval --model "$ck" --data "$tmp/data.txt" --device cuda
ev_gpu=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["loss"])' < "$tmp/out" 2>/dev/null)
if [ "$rc" -eq 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * abs(b))' "$ev_gpu" "$ev_cpu"; then
    pass "a GPU checkpoint evaluates alike on both devices ($ev_gpu, $ev_cpu)"
else fail "eval of a GPU checkpoint (rc $rc: $ev_gpu vs $ev_cpu)"; fi
run $HPT sample --model "$ck" --tokens 20 --device cuda
if [ "$rc" -eq 0 ] && [ -s "$tmp/out" ]; then pass "hpt sample --device cuda"; else fail "sample on the GPU (rc $rc)"; fi

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
dm=$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1]))["device_memory_bytes"]; print(d["plan"], d["peak_used"], d["total"])' "$tmp/whole-gpu/summary.json")
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
