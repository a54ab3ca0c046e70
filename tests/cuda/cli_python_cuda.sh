#!/bin/sh
# cli_python_cuda.sh — the Python binding on the GPU (make test-cuda):
# hpt.train(device="cuda") gives `hpt train --device cuda`'s bits (the same
# kernels behind the same table), and a model's eval and sample on "cuda"
# give `hpt eval` and `hpt sample --device cuda`'s loss and text. Where no
# GPU can be used it says skip. Under the CUDA emulator (make CUDA=emu
# test-cuda) the package's library is the native build's (python/hpt,
# make), given the emulator's plugin through HPT_CUDA_PLUGIN; a native build
# without the CUDA row (no nvcc) skips.
test_name=cli_python_cuda; . tests/lib.sh
if [ -n "${SANITIZED:-}" ]; then echo "skip: a sanitizer build's library cannot be loaded into python3"; exit 0; fi
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "skip: no python3 with numpy"; exit 0; }
[ -f python/hpt/libhpt.so ] || { echo "skip: python/hpt/libhpt.so is not built (make)"; exit 0; }
if [ -n "${HPT_CUDA_EMULATED:-}" ]; then
    grep -q hpt_device_cuda_impl python/hpt/libhpt.so ||
        { echo "skip: the native build (python/hpt) has no CUDA row to give the emulator's plugin"; exit 0; }
    HPT_CUDA_PLUGIN=$(pwd)/${BUILD:-build-cudaemu}/libhpt_cuda.so; export HPT_CUDA_PLUGIN
fi
words_text 1 > "$tmp/data.txt"
# eval reads every token of its file: 3 KB of it (on the CPU's CUDA emulator
# the whole 20 KB took a minute a side)
head -c 3000 "$tmp/data.txt" > "$tmp/eval.txt"
opts="--n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --max-iters 20 --eval-interval 10 --eval-iters 2 --threads 1 --seed 5"
run $HPT train --data "$tmp/data.txt" $opts --device cuda --out "$tmp/cli"
why=$(cuda_unusable); [ -z "$why" ] || { echo "skip: $why"; exit 0; }
[ "$rc" -eq 0 ] || { fail "hpt train --device cuda (rc $rc: $(cat "$tmp/err"))"; finish; exit; }
$HPT sample --model "$tmp/cli/model.bin" --tokens 40 --seed 3 --temperature 0.8 --top-k 5 --device cuda > "$tmp/sample.txt" 2>"$tmp/err"
$HPT eval --model "$tmp/cli/model.bin" --data "$tmp/eval.txt" --device cuda > "$tmp/eval.json" 2>>"$tmp/err"
PYTHONPATH=python "$py" - "$tmp" $opts > "$tmp/py.out" 2>&1 <<'PY'
import json, sys
import hpt
tmp, argv = sys.argv[1], sys.argv[2:]
opts = {argv[i][2:].replace("-", "_"): argv[i + 1] for i in range(0, len(argv), 2)}
cli = json.load(open(tmp + "/cli/summary.json"))
py = hpt.train(data=tmp + "/data.txt", out=tmp + "/py", device="cuda", **opts)
print("train", py["param_crc32"] == cli["param_crc32"], py["param_crc32"], cli["param_crc32"])
m = hpt.load(tmp + "/cli/model.bin")
text = m.sample(tokens=40, seed=3, temperature=0.8, top_k=5, device="cuda")
print("sample", text == open(tmp + "/sample.txt").read()[:-1])
ev, cev = m.eval(tmp + "/eval.txt", device="cuda"), json.load(open(tmp + "/eval.json"))
# the CLI prints 9 significant digits
print("eval", abs(ev["loss"] - cev["loss"]) <= 1e-8 * cev["loss"] and ev["tokens"] == cev["tokens"], ev["loss"], cev["loss"])
PY
if grep -q '^train True' "$tmp/py.out"; then pass "hpt.train(device=\"cuda\"): the CLI's bits ($(grep '^train' "$tmp/py.out" | cut -d' ' -f3))"
else fail "hpt.train on cuda: $(cat "$tmp/py.out")"; fi
if grep -q '^sample True' "$tmp/py.out"; then pass "Model.sample(device=\"cuda\"): hpt sample --device cuda's text"
else fail "Model.sample on cuda: $(cat "$tmp/py.out" "$tmp/err")"; fi
if grep -q '^eval True' "$tmp/py.out"; then pass "Model.eval(device=\"cuda\"): hpt eval --device cuda's loss ($(grep '^eval' "$tmp/py.out" | cut -d' ' -f3))"
else fail "Model.eval on cuda: $(cat "$tmp/py.out")"; fi
finish
