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
#   - eval and sample on the GPU;
#   - a NaN loss (forced by NaN weights) stops the run with the reason.
# cli_device_cuda_modes.sh has the hybrid, the traffic, the memory ledger,
# the precisions and what stays on the CPU: two scripts, so that make's -j2
# runs them side by side (on the CPU's CUDA emulator each takes minutes).
test_name=cli_device_cuda; . tests/lib.sh
words_text 1 > "$tmp/data.txt"
small="--data $tmp/data.txt --n-layer 1 --n-head 1 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 4 --eval-iters 2 --threads 1"

run $HPT train $small --device cuda --out "$tmp/probe"
why=$(cuda_unusable); [ -z "$why" ] || { echo "skip: $why"; finish; exit; }
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

finish
