#!/bin/sh
# bench_gpu.sh — hpt against PyTorch on the same GPU in one call (issue 24's
# benchmark): GPT-2 124M at batch 16 x 1024 (GPT-2's BPE on Tiny
# Shakespeare) and nanoGPT's small CPU shape (4 layers, 4 heads, 128 wide,
# batch 12 x 64, characters), every precision mode hpt has against
# PyTorch's same mode, plus PyTorch's bf16 + torch.compile. Per run:
# ms/step (hpt: summary.json's median step, every step synchronised by its
# loss read-back; PyTorch: bench/torch_gpu.py's median of 20 synchronised
# steps after 5 warm-up ones), tokens/s, peak memory and MFU.
#
# Peak memory is not measured alike: hpt's is the driver's (the GPU's free
# memory before the model was built, less the least free seen: it counts
# cuBLAS's workspace), PyTorch's torch.cuda.max_memory_allocated (live
# tensors only: its cache and the context are not counted). MFU: the model's
# FLOPs per step (hpt's count, summary.json: 6 per parameter-token plus
# attention's 12 L C T per token) over the GPU's dense peak for the mode
# (NVIDIA's H100/H200 SXM figures: fp32 66.9, tf32 494.7, bf16 989.4
# TFLOP/s; the PCIe H100: 51.2, 378, 756), the same FLOP count for both.
#
# On the GPU machine, after the build (bench/gpu_session.sh runs it):
#     sh bench/bench_gpu.sh OUTDIR [DATA [VOCAB]]
# DATA: a text file (default .gpu/data/tinyshakespeare.txt, carried);
# VOCAB: GPT-2's encoder.json and vocab.bpe (default .gpu/vocab). Writes
# OUTDIR/gpu_bench.json and OUTDIR/gpu_bench.md; about 4 minutes on an H100.
set -u
out=${1:?usage: bench_gpu.sh OUTDIR [DATA [VOCAB]]}
data=${2:-.gpu/data/tinyshakespeare.txt}
vocab=${3:-.gpu/vocab}
HPT=${HPT:-./hpt}
BENCH_STEP=${BENCH_STEP:-build/bench_step}
PY=${PYTHON:-python3}
mkdir -p "$out/runs"
# HPT_BENCH_DEADLINE (epoch seconds; gpu_session.sh sets it): each run's
# limit is cut so that the table below is still written before then
deadline=${HPT_BENCH_DEADLINE:-0}
limit() {  # limit SECONDS: SECONDS, or what is left before the deadline less 10 s (at least 1)
    _l=$1
    if [ "$deadline" -gt 0 ]; then
        _l=$((deadline - $(date +%s) - 10))
        [ "$_l" -gt "$1" ] && _l=$1
        [ "$_l" -lt 1 ] && _l=1
    fi
    echo "$_l"
}
[ -f "$data" ] || { echo "bench_gpu.sh: no data file '$data'" >&2; exit 2; }

# shape name, hpt's model flags, batch, block, torch's vocabulary
shapes="gpt2-124m|--tokenizer gpt2 --vocab $vocab --n-layer 12 --n-head 12 --n-embd 768|16|1024|50257
nanogpt-small|--tokenizer char --n-layer 4 --n-head 4 --n-embd 128|12|64|65"

echo "$shapes" | while IFS='|' read -r name flags B T V; do
    for p in fp32 tf32 bf16; do
        d="$out/runs/hpt-$name-$p"
        rm -rf "$d"
        # 25 steps: the median is past the first steps' allocations and cuBLAS's heuristics
        timeout "$(limit 300)" $HPT train --data "$data" $flags --batch-size "$B" --block-size "$T" --max-iters 25 \
            --eval-interval 0 --eval-iters 1 --threads 0 --device cuda --precision "$p" --out "$d" \
            < /dev/null > "$d.log" 2>&1
        echo "hpt $name $p: rc $? $(tail -n 1 "$d.log")"
    done
    L=$(echo "$flags" | sed 's/.*--n-layer \([0-9]*\).*/\1/'); NH=$(echo "$flags" | sed 's/.*--n-head \([0-9]*\).*/\1/')
    C=$(echo "$flags" | sed 's/.*--n-embd \([0-9]*\).*/\1/')
    timeout "$(limit 600)" "$PY" bench/torch_gpu.py --layers "$L" --heads "$NH" --embd "$C" --vocab "$V" --batch "$B" --block "$T" \
        --json "$out/runs/torch-$name.json" < /dev/null > "$out/runs/torch-$name.log" 2>&1
    echo "torch $name: rc $? $(tail -n 1 "$out/runs/torch-$name.log")"
done

# Where hpt's step goes: build/bench_step --profile at GPT-2 124M, batch 16 x
# 1024, on random tokens, every kernel call synchronised before and after
# (so each row is its kernels' GPU time; the sum runs a little over the
# unprofiled step), in each mode, and under tf32 with the T x T attention
# (HPT_CUDA_ATTENTION=materialise: 9 GiB more, fits an H100) and with the
# flash kernels kept off the tensor cores (flash-fp32: what the twins gain)
for run in "fp32|" "tf32|" "bf16|" "tf32|materialise" "tf32|flash-fp32"; do
    p=${run%%|*}; att=${run#*|}
    tag="gpt2-124m-$p${att:+-$att}"
    timeout "$(limit 120)" env ${att:+HPT_CUDA_ATTENTION=$att} "$BENCH_STEP" --device cuda --precision "$p" \
        --batch 16 --seq 1024 --steps 3 --warmup 1 --profile --json "$out/runs/profile-$tag.json" \
        < /dev/null > "$out/runs/profile-$tag.log" 2>&1
    echo "profile $tag: rc $? $(grep 'median step' "$out/runs/profile-$tag.log")"
done

"$PY" - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
peaks = {"fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12, "bf16+compile": 989.4e12}
rows, res = [], {"hpt": {}, "torch": {}}
gpu = "?"
for f in sorted(glob.glob(out + "/runs/torch-*.json")):
    t = json.load(open(f))
    gpu = t["gpu"]
    res["torch"][os.path.basename(f)[6:-5]] = t
if "PCIe" in gpu:
    peaks = {"fp32": 51.2e12, "tf32": 378e12, "bf16": 756e12, "bf16+compile": 756e12}
for name in ("gpt2-124m", "nanogpt-small"):
    flops = None
    for p in ("fp32", "tf32", "bf16"):
        d = "%s/runs/hpt-%s-%s" % (out, name, p)
        try:
            s = json.load(open(d + "/summary.json"))
        except (OSError, ValueError):
            log = open(d + ".log").read().strip().splitlines() if os.path.exists(d + ".log") else ["no log"]
            res["hpt"]["%s/%s" % (name, p)] = {"error": log[-1][:300]}
            rows.append((name, "hpt", p, None, None, None, None, log[-1][:80]))
            continue
        ms = s["median_step_ms"]
        flops = s["gflops_per_s"] * 1e9 * ms / 1e3
        peak = s.get("device_memory_bytes", {}).get("peak_used")
        res["hpt"]["%s/%s" % (name, p)] = {"ms_per_step": ms, "tokens_per_s": s["tokens_per_s"], "peak_mem_bytes": peak,
                                           "flops_per_step": flops, "final_val_loss": s["final_val_loss"]}
        rows.append((name, "hpt", p, ms, s["tokens_per_s"], peak, flops / (ms / 1e3) / peaks[p],
                     "bf16 activations, fp32 master weights" if p == "bf16" else ""))
    t = res["torch"].get(name, {}).get("modes", {})
    for mode, r in t.items():
        if "error" in r:
            rows.append((name, "PyTorch", mode, None, None, None, None, r["error"][:80]))
            continue
        mfu = flops / (r["ms_per_step"] / 1e3) / peaks[mode] if flops else None
        rows.append((name, "PyTorch", mode, r["ms_per_step"], r["tokens_per_s"], r["peak_mem_bytes"], mfu, ""))
res["gpu"] = gpu
json.dump(res, open(out + "/gpu_bench.json", "w"), indent=1)
with open(out + "/gpu_bench.md", "w") as fh:
    fh.write("GPU: %s. hpt's peak memory is the driver's, PyTorch's its allocator's (bench/bench_gpu.sh). "
             "hpt's bf16 keeps activations in bf16 and parameters, gradients and AdamW's state in fp32, as "
             "PyTorch's autocast (bf16 GEMMs and activations, fp32 weights) does.\n\n" % gpu)
    fh.write("| shape | who | mode | ms/step | tokens/s | peak memory (GiB) | MFU | note |\n|---|---|---|---|---|---|---|---|\n")
    for name, who, mode, ms, tps, mem, mfu, note in rows:
        fmt = lambda v, f: f % v if v is not None else "—"
        fh.write("| %s | %s | %s | %s | %s | %s | %s | %s |\n" % (name, who, mode, fmt(ms, "%.1f"), fmt(tps, "%.0f"),
                 fmt(mem / 2**30 if mem else None, "%.2f"), fmt(mfu * 100 if mfu else None, "%.1f%%"), note))
    # the per-kernel profiles: ms/step of each kernel slot, one column a run
    profs = []
    for f in sorted(glob.glob(out + "/runs/profile-*.json")):
        try:
            profs.append((os.path.basename(f)[8:-5], json.load(open(f))))
        except (OSError, ValueError):
            pass
    if profs:
        fh.write("\nWhere hpt's step goes (build/bench_step --profile, GPT-2 124M, B16 x T1024, random tokens; "
                 "every kernel call synchronised, so a row is its kernels' GPU time; ms/step):\n\n")
        fh.write("| kernel | " + " | ".join(t for t, _ in profs) + " |\n|---|" + "---|" * len(profs) + "\n")
        kernels = []
        for _, p in profs:
            for r in p.get("profile", []):
                if r["kernel"] not in kernels:
                    kernels.append(r["kernel"])
        for k in kernels:
            cells = []
            for _, p in profs:
                r = [x for x in p.get("profile", []) if x["kernel"] == k]
                cells.append("%.2f" % r[0]["ms"] if r else "—")
            fh.write("| %s | %s |\n" % (k, " | ".join(cells)))
        fh.write("| unattributed | %s |\n" % " | ".join("%.2f" % p.get("profile_unattributed_ms", 0) for _, p in profs))
        fh.write("| **step (profiled)** | %s |\n" % " | ".join("%.1f" % p["median_step_ms"] for _, p in profs))
print(open(out + "/gpu_bench.md").read())
EOF
