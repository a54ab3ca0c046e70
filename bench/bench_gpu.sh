#!/bin/sh
# bench_gpu.sh — hpt against PyTorch on the same GPU in one call (the GPU
# benchmark, ordered by value): GPT-2 124M at batch 16 x 1024 (GPT-2's
# BPE on Tiny Shakespeare) and nanoGPT's small CPU shape (4 layers, 4 heads,
# 128 wide, batch 12 x 64, characters), every precision mode hpt has against
# PyTorch's same mode, plus PyTorch's bf16 + torch.compile, and hpt's
# per-kernel profile at 124M. Per run: ms/step (hpt: summary.json's median
# step, every step synchronised by its loss read-back; PyTorch:
# bench/torch_gpu.py's median of 20 synchronised steps after 5 warm-up
# ones), tokens/s, peak memory and MFU.
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
# Each run is its own subcommand, so that bench/gpu_session.sh can give each
# its own time limit and put `make test-cuda` between them:
#     sh bench/bench_gpu.sh hpt WORK SHAPE PREC       hpt train, 25 steps: WORK/runs/hpt-SHAPE-PREC{/,.log}
#     sh bench/bench_gpu.sh torch WORK SHAPE MODES    bench/torch_gpu.py's MODES (comma-separated)
#     sh bench/bench_gpu.sh profile WORK PREC [ATT]   build/bench_step --profile at 124M, B16 x T1024
#     sh bench/bench_gpu.sh table WORK OUTDIR         OUTDIR/gpu_bench.{md,json} from what WORK/runs holds
# and without a subcommand every run in the order of value, then the table:
#     sh bench/bench_gpu.sh OUTDIR                    (runs in OUTDIR/runs)
# Each subcommand's last line of output is its result in one line (the
# session's record quotes it). Runs write only under WORK; no run keeps a
# model file (hpt's model.bin and checkpoints are deleted after the run:
# 0.5 GB each at 124M, and nothing here reads them).
#
# DATA: $HPT_BENCH_DATA, else .gpu/data/tinyshakespeare.txt (carried by the
# session), else bench/data/tinyshakespeare.txt; VOCAB: $HPT_BENCH_VOCAB,
# else .gpu/vocab (GPT-2's encoder.json and vocab.bpe).
#
# HPT_GPU_DRY=1 (gpu_session.sh --dry-run; CI's tests/cli_gpu_kit.sh): the
# same files from no GPU: hpt runs are `hpt train` on the CPU at a tiny
# shape (characters, 1 layer, 3 steps: real summary.json files, so that the
# table is tested against hpt's own keys), profiles are build/bench_step on
# the CPU at a tiny shape where it is built, else a made-up profile, and
# PyTorch's results are made up (marked "dry run").
set -u
HPT=${HPT:-./hpt}
BENCH_STEP=${BENCH_STEP:-build/bench_step}
PY=${PYTHON:-python3}
dry=${HPT_GPU_DRY:-0}
data=${HPT_BENCH_DATA:-}
if [ -z "$data" ]; then
    data=.gpu/data/tinyshakespeare.txt
    [ -f "$data" ] || data=bench/data/tinyshakespeare.txt
fi
vocab=${HPT_BENCH_VOCAB:-.gpu/vocab}

# shape_of NAME: sets flags (hpt's model flags), B, T, V (torch's vocabulary)
shape_of() {
    case $1 in
        gpt2-124m) flags="--tokenizer gpt2 --vocab $vocab --n-layer 12 --n-head 12 --n-embd 768"; B=16; T=1024; V=50257 ;;
        nanogpt-small) flags="--tokenizer char --n-layer 4 --n-head 4 --n-embd 128"; B=12; T=64; V=65 ;;
        *) echo "bench_gpu.sh: unknown shape '$1' (gpt2-124m, nanogpt-small)" >&2; exit 2 ;;
    esac
}

# hpt WORK SHAPE PREC
run_hpt() {
    work=$1; shape_of "$2"; p=$3
    d="$work/runs/hpt-$2-$p"
    mkdir -p "$work/runs"; rm -rf "$d"
    dev="--device cuda --precision $p"; steps=25; text=$data; threads=0
    if [ "$dry" = 1 ]; then
        # the CPU's fp32 at a tiny shape: the same files, in a second
        text="$work/runs/dry-text"   # no .txt: data, not a log for the tarball
        [ -f "$text" ] || head -c 200000 "$data" > "$text" 2>/dev/null || seq 1 40000 > "$text"
        flags="--tokenizer char --n-layer 1 --n-head 2 --n-embd 32"; B=4; T=32; steps=3; dev="--device cpu"; threads=1
    fi
    [ -f "$text" ] || { echo "hpt $2 $p: no data file '$text'"; return 2; }
    # 25 steps: the median is past the first steps' allocations and cuBLAS's
    # heuristics. No checkpoint (--save-interval 0); the session stops a run
    # that outlives its limit with SIGKILL, so none is written then either.
    $HPT train --data "$text" $flags --batch-size "$B" --block-size "$T" --max-iters "$steps" \
        --eval-interval 0 --eval-iters 1 --save-interval 0 --threads $threads $dev --out "$d" \
        < /dev/null > "$d.log" 2>&1
    rc=$?
    rm -rf "$d/model.bin" "$d/checkpoints"
    tail -n 5 "$d.log"   # the whole log is beside the run (the session's tarball has it)
    "$PY" - "$d/summary.json" "$2" "$p" "$rc" <<'EOF'
import json, sys
f, shape, p, rc = sys.argv[1:]
try:
    s = json.load(open(f))
except (OSError, ValueError):
    print("hpt %s %s: rc %s, no summary.json" % (shape, p, rc)); sys.exit(0)
peak = s.get("device_memory_bytes", {}).get("peak_used")
print("hpt %s %s: rc %s, %.1f ms/step, %.0f tokens/s, peak %s, final val %.4f" % (
    shape, p, rc, s["median_step_ms"], s["tokens_per_s"], "%.2f GiB" % (peak / 2**30) if peak else "n/a",
    s["final_val_loss"]))
EOF
    return $rc
}

# torch WORK SHAPE MODES: runs/torch-SHAPE-TAG.json (TAG: the modes, + and , as -)
run_torch() {
    work=$1; shape_of "$2"; modes=$3
    mkdir -p "$work/runs"
    tag=$(echo "$modes" | tr ',+' '--')
    j="$work/runs/torch-$2-$tag.json"
    L=$(echo "$flags" | sed 's/.*--n-layer \([0-9]*\).*/\1/'); NH=$(echo "$flags" | sed 's/.*--n-head \([0-9]*\).*/\1/')
    C=$(echo "$flags" | sed 's/.*--n-embd \([0-9]*\).*/\1/')
    if [ "$dry" = 1 ]; then
        "$PY" - "$j" "$modes" "$B" "$T" <<'EOF'
import json, sys
j, modes, B, T = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
ms = {"fp32": 300.0, "tf32": 100.0, "bf16": 47.0, "bf16+compile": 33.0}
res = {"gpu": "dry run (no GPU)", "torch": "none", "modes": {}}
for m in modes:
    res["modes"][m] = {"ms_per_step": ms.get(m, 50.0), "tokens_per_s": round(B * T / ms.get(m, 50.0) * 1e3),
                       "peak_mem_bytes": 16 << 30, "loss": 11.0}
    print(m, res["modes"][m])
json.dump(res, open(j, "w"), indent=1)
EOF
        rc=$?
    else
        "$PY" bench/torch_gpu.py --layers "$L" --heads "$NH" --embd "$C" --vocab "$V" --batch "$B" --block "$T" \
            --modes "$modes" --json "$j" < /dev/null
        rc=$?
    fi
    "$PY" - "$j" "$2" "$rc" <<'EOF'
import json, sys
j, shape, rc = sys.argv[1:]
try:
    t = json.load(open(j))
except (OSError, ValueError):
    print("torch %s: rc %s, no results" % (shape, rc)); sys.exit(0)
print("torch %s: rc %s, %s" % (shape, rc, ", ".join(
    "%s %s" % (m, "error" if "error" in r else "%.1f ms/step" % r["ms_per_step"]) for m, r in t["modes"].items())))
EOF
    return $rc
}

# profile WORK PREC [ATT]: ATT is HPT_CUDA_ATTENTION's value (materialise:
# the T x T attention, 9 GiB more, fits an H100; flash-fp32: the flash
# kernels kept off the tensor cores, what the twins gain)
run_profile() {
    work=$1; p=$2; att=${3:-}
    mkdir -p "$work/runs"
    tag="gpt2-124m-$p${att:+-$att}"
    j="$work/runs/profile-$tag.json"
    # every kernel call synchronised before and after, so each row is its
    # kernels' GPU time (the sum runs a little over the unprofiled step)
    if [ "$dry" != 1 ]; then
        env ${att:+HPT_CUDA_ATTENTION=$att} "$BENCH_STEP" --device cuda --precision "$p" \
            --batch 16 --seq 1024 --steps 3 --warmup 1 --profile --json "$j" < /dev/null
        rc=$?
    elif [ -x "$BENCH_STEP" ]; then
        "$BENCH_STEP" --device cpu --n-layer 1 --n-head 2 --n-embd 32 --vocab 65 --block-size 16 --batch 2 --seq 16 \
            --steps 2 --warmup 1 --threads 1 --profile --json "$j" < /dev/null
        rc=$?
    else
        echo "dry run: no $BENCH_STEP built (make bench): a made-up profile"
        "$PY" -c 'import json, sys
json.dump({"median_step_ms": 70.0, "profile_unattributed_ms": 1.0,
           "profile": [{"kernel": k, "ms": v} for k, v in (("matmul_forward", 20.0), ("attention_forward", 9.0))]},
          open(sys.argv[1], "w"))' "$j"
        rc=$?
    fi
    ms=$("$PY" -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["median_step_ms"])' "$j" 2>/dev/null)
    echo "profile $tag: rc $rc, ${ms:-no} ms/step (profiled)"
    return $rc
}

# table WORK OUTDIR
run_table() {
    "$PY" - "$1" "$2" <<'EOF'
import glob, json, os, sys
work, out = sys.argv[1:]
order = {"fp32": 0, "tf32": 1, "bf16": 2, "bf16+compile": 3}
peaks = {"fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12, "bf16+compile": 989.4e12}
res = {"hpt": {}, "torch": {}}
gpu, torch_v = "?", "?"
for f in sorted(glob.glob(work + "/runs/torch-*.json")):   # one file per call: a shape's modes merged
    try:
        t = json.load(open(f))
    except (OSError, ValueError):
        continue
    gpu, torch_v = t.get("gpu", gpu), t.get("torch", torch_v)
    shape = next((s for s in ("gpt2-124m", "nanogpt-small") if os.path.basename(f).startswith("torch-" + s)), None)
    if shape:
        res["torch"].setdefault(shape, {}).update(t.get("modes", {}))
if "PCIe" in gpu:
    peaks = {"fp32": 51.2e12, "tf32": 378e12, "bf16": 756e12, "bf16+compile": 756e12}
rows = []
for name in ("gpt2-124m", "nanogpt-small"):
    flops, tps = None, {}
    for p in ("fp32", "tf32", "bf16"):
        d = "%s/runs/hpt-%s-%s" % (work, name, p)
        if not os.path.exists(d + ".log"):
            continue   # not run (skipped for time, or not this shape)
        try:
            s = json.load(open(d + "/summary.json"))
        except (OSError, ValueError):
            log = open(d + ".log", errors="replace").read().strip().splitlines() or ["empty log"]
            res["hpt"]["%s/%s" % (name, p)] = {"error": log[-1][:300]}
            rows.append((name, "hpt", p, None, None, None, None, None, log[-1][:80].replace("|", "/")))
            continue
        ms = s["median_step_ms"]
        flops = s["gflops_per_s"] * 1e9 * ms / 1e3
        peak = s.get("device_memory_bytes", {}).get("peak_used")
        tps[p] = s["tokens_per_s"]
        res["hpt"]["%s/%s" % (name, p)] = {"ms_per_step": ms, "tokens_per_s": s["tokens_per_s"], "peak_mem_bytes": peak,
                                           "flops_per_step": flops, "final_val_loss": s["final_val_loss"],
                                           "device": s.get("device")}
        rows.append((name, "hpt", p, ms, s["tokens_per_s"], peak, flops / (ms / 1e3) / peaks[p], None,
                     "bf16 activations, fp32 master weights" if p == "bf16" else ""))
    t = res["torch"].get(name, {})
    for mode in sorted(t, key=lambda m: order.get(m, 9)):
        r = t[mode]
        if "error" in r:
            rows.append((name, "PyTorch", mode, None, None, None, None, None, r["error"][:80].replace("|", "/")))
            continue
        mfu = flops / (r["ms_per_step"] / 1e3) / peaks[mode] if flops else None
        rows.append((name, "PyTorch", mode, r["ms_per_step"], r["tokens_per_s"], r["peak_mem_bytes"], mfu, None, ""))
    # hpt's tokens/s over PyTorch's in the same mode (eager), the comparison the issue's goals name
    for i, row in enumerate(rows):
        if row[0] == name and row[1] == "hpt" and row[4] and "error" not in t.get(row[2], {"error": 1}):
            rows[i] = row[:7] + (row[4] / t[row[2]]["tokens_per_s"],) + row[8:]
res["gpu"], res["torch_version"] = gpu, torch_v
json.dump(res, open(out + "/gpu_bench.json", "w"), indent=1)
fmt = lambda v, f: f % v if v is not None else "—"
with open(out + "/gpu_bench.md", "w") as fh:
    fh.write("GPU: %s (PyTorch %s). hpt's peak memory is the driver's, PyTorch's its allocator's "
             "(bench/bench_gpu.sh). hpt's bf16 keeps activations in bf16 and parameters, gradients and AdamW's "
             "state in fp32, as PyTorch's autocast does. x PyTorch: hpt's tokens/s over PyTorch eager's in the same "
             "mode.\n\n" % (gpu, torch_v))
    fh.write("| shape | who | mode | ms/step | tokens/s | x PyTorch | peak memory (GiB) | MFU | note |\n"
             "|---|---|---|---|---|---|---|---|---|\n")
    for name, who, mode, ms, tps, mem, mfu, ratio, note in rows:
        fh.write("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
            name, who, mode, fmt(ms, "%.1f"), fmt(tps, "%.0f"), fmt(ratio, "%.2f"),
            fmt(mem / 2**30 if mem else None, "%.2f"), fmt(mfu * 100 if mfu else None, "%.1f%%"), note))
    if not rows:
        fh.write("| (no run finished) | | | | | | | | |\n")
    # the per-kernel profiles: ms/step of each kernel slot, one column a run
    profs = []
    for f in sorted(glob.glob(work + "/runs/profile-*.json"), key=os.path.getmtime):   # in the order run
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
print("table: %d rows, %d profiles in %s/gpu_bench.md" % (len(rows), len(profs), out))
EOF
}

case ${1:-} in
    hpt) shift; run_hpt "$@"; exit $? ;;
    torch) shift; run_torch "$@"; exit $? ;;
    profile) shift; run_profile "$@"; exit $? ;;
    table) shift; run_table "$@"; exit $? ;;
    ""|-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 2 ;;
esac

# Every run, in the order of its value (what a cut-off keeps): hpt's
# headline, its profile, PyTorch's bf16 beside it, the other modes, the
# other profiles, the nanoGPT shape. No time limits here: the session sets
# them (this is for a GPU machine of one's own).
out=$1
mkdir -p "$out"
for s in "hpt gpt2-124m bf16" "profile bf16" "torch gpt2-124m bf16,bf16+compile" "hpt gpt2-124m tf32" \
         "hpt gpt2-124m fp32" "torch gpt2-124m tf32,fp32" "profile fp32" "profile tf32" \
         "profile tf32 materialise" "profile tf32 flash-fp32" "hpt nanogpt-small fp32" "hpt nanogpt-small tf32" \
         "hpt nanogpt-small bf16" "torch nanogpt-small fp32,tf32,bf16,bf16+compile"; do
    set -- $s
    cmd=$1; shift
    sh "$0" "$cmd" "$out" "$@" > "$out/$cmd-$(echo "$*" | tr ' ,+' '---').log" 2>&1
    tail -n 1 "$out/$cmd-$(echo "$*" | tr ' ,+' '---').log"
done
run_table "$out" "$out"
cat "$out/gpu_bench.md"
