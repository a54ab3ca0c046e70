#!/bin/sh
# gpu_session.sh — the one prepared script for a session that is lent the GPU
# machine: it builds hpt there with nvcc and the carried Debian packages,
# then runs, in the order of their value, hpt's GPT-2 124M step in bf16,
# its per-kernel profile, PyTorch bf16 and bf16 + torch.compile beside it,
# `make test-cuda`, hpt and PyTorch in tf32 and fp32, the other profiles,
# compute-sanitizer's memcheck, and the nanoGPT shape last, each step under
# its own time limit, and brings the record back. Nothing here needs the
# network: that machine has none.
#
# What comes back from that machine is at most 8 files of $OUT, each at
# most 16 MiB, 64 MiB in all, no deeper than $OUT/a/b/file, names of
# [A-Za-z0-9._-] only, and the last 12,000 characters of the output. So
# every run writes under a temporary directory, and $OUT ends with 5 files:
#     record.md       device, driver, date, commit, each step's result and time,
#                     make test-cuda's failures, the benchmark's table
#     gpu_bench.md    the benchmark's tables (bench/bench_gpu.sh), and .json
#     gpu_bench.json
#     session.log     this script's log
#     logs.tar.gz     every other log: each step's output, the runs'
#                     summary.json and metrics.jsonl, nvidia-smi (text files
#                     only: no model, checkpoint or plot)
# and the record is printed last, so that the output's tail holds it even
# where no file comes back. No benchmark run keeps a model file.
#
# Time: the machine's call ends at 600 s; this script ends within 540 s
# (HPT_GPU_BUDGET) of its start. Every step runs under `timeout -k`, its
# limit its own or what is left of the budget less the record's reserve
# (20 s) and the kill's grace (5 s), whichever is less; a step that cannot
# have its minimum is skipped and the record says so. A failed step does
# not stop the ones after it (a step that needs hpt's build is skipped
# where the build failed). hpt train answers SIGTERM by finishing its step
# and saving a checkpoint (1.5 GB at 124M), so the benchmark's hpt runs are
# stopped with SIGKILL instead: nothing of them is needed but their log.
#
# make test-cuda (the correctness record the issue's goals ask for) runs
# after the three most valuable benchmark steps (hpt bf16, its profile,
# PyTorch bf16 beside it: about 2 minutes after the build) and before
# everything else, limited to 180 s: late enough that a slow test suite
# cannot take the headline figures with it, early enough that the
# lower-value steps are the ones the budget cuts.
#
# On the CPU machine, first:
#     sh bench/gpu_session.sh --prepare
#   downloads the .debs into .gpu/debs (scripts/gpu-debs.sh) once, copies the
#   benchmark's text (Tiny Shakespeare, from ../shared/data, $HPT_BENCH_TEXT
#   or bench/data) into .gpu/data and GPT-2's vocabulary files into
#   .gpu/vocab, and writes .gpu/commit (HEAD, and whether the tree has
#   uncommitted changes: the copy there may have no .git to ask).
# Then on the GPU machine, from the repository root, with .gpu carried
# (the device tool: command "sh bench/gpu_session.sh", carry [".gpu"],
# timeout_s 600):
#     sh bench/gpu_session.sh
# The exit status is make test-cuda's (4 where it passed only by skipping
# with a GPU present: nothing was tested; 3 where it did not run). Commit
# $OUT/record.md under bench/results/ (CI cannot make it): e.g.
# bench/results/gpu-<date>.md.
#
#     sh bench/gpu_session.sh --dry-run
# does the same without a GPU, to test the kit (tests/cli_gpu_kit.sh, in
# CI): no build (./hpt as built), make test-cuda and memcheck replaced by a
# line that says so, hpt's runs on the CPU at a tiny shape, PyTorch's
# results made up (bench_gpu.sh, HPT_GPU_DRY), every step's minimum 1 s, the
# record's reserve 3 s and the grace 1 s; the same files in $OUT, the same
# record. HPT_GPU_DRY_HANG=STEP makes that step hang (the time limits'
# test).
set -u

if [ "${1:-}" = "--prepare" ]; then
    [ -n "$(ls .gpu/debs/*.deb 2>/dev/null)" ] || sh scripts/gpu-debs.sh || exit 1
    text=${HPT_BENCH_TEXT:-../shared/data/tinyshakespeare.txt}
    [ -f "$text" ] || text=bench/data/tinyshakespeare.txt
    mkdir -p .gpu/data .gpu/vocab
    [ -f "$text" ] && cp "$text" .gpu/data/tinyshakespeare.txt || echo "no benchmark text at $text: bench_gpu.sh will say so"
    for f in encoder.json vocab.bpe; do
        cp "${HPT_VOCAB:-/usr/local/share/hpt/gpt2}/$f" .gpu/vocab/ 2>/dev/null || echo "no GPT-2 $f: scripts/install-deps.sh installs it"
    done
    {
        echo "commit $(git rev-parse HEAD)"
        echo "branch $(git rev-parse --abbrev-ref HEAD)"
        echo "uncommitted $(git status --porcelain --untracked-files=no | wc -l) files"
        echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    } > .gpu/commit
    cat .gpu/commit
    echo "$(ls .gpu/debs/*.deb | wc -l) packages in .gpu/debs ($(du -sh .gpu | cut -f1) in .gpu); now on the GPU machine: sh bench/gpu_session.sh (carry .gpu)"
    exit 0
fi

dry=0
case ${1:-} in
    --dry-run) dry=1 ;;
    "") ;;
    *) echo "usage: sh bench/gpu_session.sh [--prepare | --dry-run]" >&2; exit 2 ;;
esac

started=$(date +%s)
budget_s=${HPT_GPU_BUDGET:-540}
deadline=$((started + budget_s))
if [ "$dry" = 1 ]; then reserve=3; grace=1; else reserve=20; grace=5; fi
out=${OUT:-}
[ -n "$out" ] || out=$(mktemp -d /tmp/hpt-gpu-out.XXXXXX)
mkdir -p "$out" || exit 1
others=$(ls -A "$out" | grep -v -x -E 'record.md|gpu_bench.md|gpu_bench.json|session.log|logs.tar.gz' | wc -l)
# every run writes here, never under $OUT (removed at the end, after the tarball)
work=$(mktemp -d "${TMPDIR:-/tmp}/hpt-gpu.XXXXXX") || exit 1
mkdir -p "$work/logs"
: > "$out/session.log"
: > "$work/steps.txt"
log() { echo "$*" | tee -a "$out/session.log"; }
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
log "gpu_session.sh$([ "$dry" = 1 ] && echo ' --dry-run') $stamp in $(pwd): budget $budget_s s, work in $work"

# ---- the machine
{
    echo "date: $stamp"
    echo "host: $(uname -a)"
    echo "cpus: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo
    grep PRETTY_NAME /etc/os-release 2>/dev/null
    gcc --version 2>&1 | head -n 1
} > "$work/logs/machine.txt" 2>&1
gpu=""
if [ "$dry" = 0 ]; then
    timeout -k 5 15 nvidia-smi > "$work/logs/nvidia-smi.txt" 2>&1
    gpu=$(timeout -k 5 15 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
fi
log "gpu: ${gpu:-none ($([ "$dry" = 1 ] && echo 'dry run' || head -n 1 "$work/logs/nvidia-smi.txt"))}"

# ---- the commit: git where the tree has it, else what --prepare wrote
if commit=$(git rev-parse HEAD 2>/dev/null); then
    commit="$commit ($(git status --porcelain --untracked-files=no | wc -l) files uncommitted)"
elif [ -f .gpu/commit ]; then
    commit="$(sed -n 's/^commit //p' .gpu/commit) (from .gpu/commit: $(sed -n 's/^uncommitted //p' .gpu/commit) uncommitted)"
else
    commit="unknown (no .git, no .gpu/commit: run --prepare on the CPU machine)"
fi
log "commit: $commit"

# ---- the toolkit: nvcc on PATH, or the usual place
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then PATH=/usr/local/cuda/bin:$PATH; fi
nvcc --version > "$work/logs/nvcc.txt" 2>&1
toolkit=$(grep -m1 release "$work/logs/nvcc.txt" | sed 's/.*release/release/')
log "nvcc: ${toolkit:-not found}"

# ---- the steps
# record ID RESULT SECONDS LIMIT LINE: one row of the record's table
record() {
    echo "$1|$2|$3|$4|$(echo "$5" | tr '|`' "/'" | cut -c1-120)" >> "$work/steps.txt"
    log "[$1] $2${3:+, $3 s}${4:+ (limit $4 s)}${5:+: $5}"
}
build_rc=none   # the build's status; "none" until it ran
# step ID MIN MAX SIG NEEDS CMD...: CMD under `timeout -k $grace -s SIG`, its
# limit MAX or what is left, whichever is less; skipped below MIN, or where
# NEEDS is "build" and the build failed. Output in $work/logs/ID.log; the
# record quotes its last line. Sets step_rc (the status, or "skipped").
step() {
    id=$1; min=$2; max=$3; sig=$4; needs=$5; shift 5
    [ "$dry" = 1 ] && min=1
    step_rc=skipped
    if [ "$needs" = build ] && [ "$build_rc" != 0 ]; then
        record "$id" "skipped: the build $([ "$build_rc" = none ] && echo 'did not run' || echo "failed (rc $build_rc)")" "" "" ""
        return
    fi
    left=$((deadline - reserve - $(date +%s)))
    lim=$((left - grace))
    [ "$lim" -gt "$max" ] && lim=$max
    if [ "$lim" -lt "$min" ]; then
        record "$id" "skipped: $left s left of the budget, it needs $min s and $grace s to stop" "" "" ""
        return
    fi
    if [ "$dry" = 1 ]; then   # the steps only a GPU machine can run: a line that says so
        case $id in
            build) set -- sh -c 'echo "dry run: no build; ./hpt and build/ as they are"' ;;
            test-cuda) set -- sh -c 'echo "== dry run: make test-cuda not run"; echo "ok   dry run"; echo "1 passed, 0 failed"' ;;
            memcheck-*) set -- sh -c 'echo "========= ERROR SUMMARY: 0 errors (dry run: no compute-sanitizer)"' ;;
        esac
        # (its pid in the log: the test checks that the limit's kill reached it)
        [ "$id" = "${HPT_GPU_DRY_HANG:-}" ] && set -- sh -c 'echo "dry run: hanging, pid $$"; exec sleep 1000'
    fi
    t0=$(date +%s)
    timeout -k "$grace" -s "$sig" "$lim" "$@" < /dev/null > "$work/logs/$id.log" 2>&1
    step_rc=$?
    dt=$(($(date +%s) - t0))
    if [ "$step_rc" -eq 0 ]; then res=ok
    elif [ "$dt" -ge "$lim" ] && { [ "$step_rc" -eq 124 ] || [ "$step_rc" -eq 137 ]; }; then res="cut at its limit (rc $step_rc)"
    else res="failed (rc $step_rc)"; fi
    record "$id" "$res" "$dt" "$lim" "$(grep -v '^[[:space:]]*$' "$work/logs/$id.log" | tail -n 1)"
}

# ---- the carried packages, unpacked into a temporary prefix (never into /)
deps="$work/deps"
mkdir -p "$deps"
ndeb=0
if [ "$dry" = 0 ]; then
    t0=$(date +%s)
    for f in .gpu/debs/*.deb; do
        [ -f "$f" ] || continue
        dpkg -x "$f" "$deps" && ndeb=$((ndeb + 1))
    done
    record deps "$ndeb .debs unpacked" $(($(date +%s) - t0)) "" ""
fi
if [ "$ndeb" -gt 0 ]; then
    export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # fontconfig's configuration and a font from the packages, for the plots
    cat > "$deps/fonts.conf" <<EOF
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">$deps/etc/fonts/fonts.conf</include>
  <dir>$deps/usr/share/fonts</dir>
  <cachedir>$deps/fontcache</cachedir>
</fontconfig>
EOF
    export FONTCONFIG_FILE="$deps/fonts.conf"
fi

# OpenBLAS: the image has the pthread build; the Makefile's default is
# Debian's OpenMP build's folder (slower alongside OpenMP, same results)
blas=""
ol=/usr/lib/x86_64-linux-gnu
if [ ! -d $ol/openblas-openmp ] && [ -e $ol/openblas-pthread/libopenblas.so ]; then
    blas="OPENBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread OPENBLAS_LIB=$ol/openblas-pthread"
fi
j=$(nproc)
export HPT=${HPT:-./hpt}
mk="make -j$j CUDA=1 DEPS_PREFIX=$deps $blas"
b="sh bench/bench_gpu.sh"
export HPT_GPU_DRY=$dry

# ---- build: the CUDA build (CUDA=1: fail loudly where nvcc is missing)
step build 60 240 TERM none $mk all bench
build_rc=$step_rc
nwarn=$(grep -c -i 'warning' "$work/logs/build.log" 2>/dev/null)
hpt_version=$(timeout 10 "$HPT" --version 2>&1 | head -n 1)

# ---- in the order of value
step hpt-gpt2-124m-bf16 30 120 KILL build $b hpt "$work" gpt2-124m bf16
step profile-gpt2-124m-bf16 20 90 TERM build $b profile "$work" bf16
step torch-gpt2-124m-bf16 60 180 TERM none $b torch "$work" gpt2-124m bf16,bf16+compile

# make test-cuda: here, bounded (the header says why). tests/run.sh keeps
# each test's whole output in build/test-logs/ (its own stdout has the
# results, and the failures' last 40 lines): this run's go in the tarball
touch "$work/test-cuda.start"
# 4 tests at a time (tests/run.sh would take make's -j$j): GPU contexts side
# by side, and the CPU references' threads, without oversubscribing 16 cores
step test-cuda 60 180 TERM build env TEST_JOBS=4 $mk test-cuda
test_rc=$step_rc
tl="$work/logs/test-cuda.log"
mkdir -p "$work/logs/test-logs"
[ "$dry" = 0 ] && find build/test-logs -type f -name '*.log' -newer "$work/test-cuda.start" \
    -exec cp {} "$work/logs/test-logs/" \; 2>/dev/null
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tl" 2>/dev/null | tail -n 1)
nskip=$(cat "$tl" "$work"/logs/test-logs/*.log 2>/dev/null | grep -c 'skip:')
# a test that skipped where nvidia-smi sees a GPU tested nothing: the
# session failed (a driver or toolkit mismatch, a busy GPU), whatever make says
if [ -n "$gpu" ] && [ "${nskip:-0}" -gt 0 ]; then
    log "make test-cuda: $nskip skipped with a GPU present: counted as a failure"
    [ "$test_rc" = 0 ] && test_rc=4
fi
test_note="rc $test_rc"
[ "$test_rc" = skipped ] && { test_rc=3; test_note="did not run"; }

step hpt-gpt2-124m-tf32 30 90 KILL build $b hpt "$work" gpt2-124m tf32
step hpt-gpt2-124m-fp32 30 120 KILL build $b hpt "$work" gpt2-124m fp32
step torch-gpt2-124m-tf32-fp32 40 120 TERM none $b torch "$work" gpt2-124m tf32,fp32
step profile-gpt2-124m-fp32 15 60 TERM build $b profile "$work" fp32
step profile-gpt2-124m-tf32 15 60 TERM build $b profile "$work" tf32
step profile-gpt2-124m-tf32-materialise 15 60 TERM build $b profile "$work" tf32 materialise
step profile-gpt2-124m-tf32-flash-fp32 15 60 TERM build $b profile "$work" tf32 flash-fp32

# compute-sanitizer memcheck: the device row's test at smaller sizes, and
# three training steps of a small GPT-2 on the GPU in fp32 (the flash
# kernels) and bf16 (bf16 activations and the flash kernels' tensor-core
# twins). API errors are not its to report: hpt checks every CUDA call
# itself (an unexpected error aborts), and the test's deliberate 256 TiB
# cudaMalloc would count as one. No leak check: the reductions' block sums
# are a buffer kept for the process's life (device_cuda.cu).
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$cs" ] || [ "$dry" = 1 ]; then
    mc="$cs --tool memcheck --report-api-errors no --error-exitcode 3"
    if [ -x build/cuda/test_device_cuda ] || [ "$dry" = 1 ]; then
        step memcheck-device 20 90 TERM build env HPT_CUDA_TEST_MAX_N=100003 $mc build/cuda/test_device_cuda
    else record memcheck-device "skipped: build/cuda/test_device_cuda not built (make test-cuda builds it)" "" "" ""; fi
    for f in .gpu/data/tinyshakespeare.txt bench/data/tinyshakespeare.txt; do
        [ -f "$f" ] && head -c 200000 "$f" > "$work/memcheck-text" && break
    done
    [ -s "$work/memcheck-text" ] || seq 1 40000 > "$work/memcheck-text"
    for p in fp32 bf16; do
        step memcheck-train-$p 20 60 TERM build $mc "$HPT" train --data "$work/memcheck-text" --n-layer 2 --n-head 2 \
            --n-embd 64 --block-size 32 --batch-size 4 --max-iters 3 --eval-iters 1 --device cuda --precision $p \
            --out "$work/memcheck-run-$p"
        rm -rf "$work/memcheck-run-$p/model.bin" "$work/memcheck-run-$p/checkpoints"
    done
else
    record memcheck "skipped: no compute-sanitizer" "" "" ""
fi

# the nanoGPT shape last
for p in fp32 tf32 bf16; do step hpt-nanogpt-small-$p 10 40 KILL build $b hpt "$work" nanogpt-small $p; done
step torch-nanogpt-small 30 120 TERM none $b torch "$work" nanogpt-small fp32,tf32,bf16,bf16+compile

# ---- the table, the record, the logs (in the reserve)
timeout -k 2 10 $b table "$work" "$out" > "$work/logs/table.log" 2>&1 || log "table: $(tail -n 1 "$work/logs/table.log")"

ran=$(($(date +%s) - started))
{
    echo "# hpt on the GPU machine: make test-cuda and the benchmark$([ "$dry" = 1 ] && echo ' (DRY RUN: no GPU, nothing measured)')"
    echo
    echo "- date: $stamp (the script ran $ran s of its $budget_s s budget)"
    echo "- GPU: ${gpu:-none} (name, driver, memory, compute capability)"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(grep PRETTY_NAME /etc/os-release 2>/dev/null | cut -d'"' -f2)"
    echo "- toolkit: ${toolkit:-no nvcc}"
    echo "- commit: $commit"
    echo "- hpt: ${hpt_version:-not built}; build: \`make CUDA=1 DEPS_PREFIX=<$ndeb carried .debs> $blas all bench\`: rc $build_rc, ${nwarn:-no} warning lines"
    echo "- **make test-cuda: $test_note, ${summary:-no summary line}, ${nskip:-0} skipped** (the script's exit status: $test_rc)"
    [ "$others" -gt 0 ] && echo "- note: \$OUT held $others other files before this run (not this script's)"
    echo
    echo "## Steps, in the order run"
    echo
    echo "A step's limit is its own or what was left of the budget, whichever is less; one that could not have its minimum was skipped."
    echo
    echo "| step | result | s | limit | last line of its log |"
    echo "|---|---|---|---|---|"
    while IFS='|' read -r id res dt lim line; do
        echo "| $id | $res | $dt | $lim | ${line:+\`$line\`} |"
    done < "$work/steps.txt"
    fails=$(grep -E '^(FAIL|FAILED)' "$tl" 2>/dev/null)
    if [ -n "$fails" ]; then
        echo
        echo "## make test-cuda's failures ($(echo "$fails" | wc -l) lines; the first 12, cut at 160 characters)"
        echo
        echo '```'
        echo "$fails" | head -n 12 | cut -c1-160
        echo '```'
    fi
    echo
    echo "## hpt against PyTorch (bench/bench_gpu.sh)"
    echo
    cat "$out/gpu_bench.md" 2>/dev/null || echo "(no table: logs.tar.gz has logs/table.log)"
    echo
    echo "Beside this file: gpu_bench.md and .json (the tables), session.log, logs.tar.gz (every step's log as logs/STEP.log, the runs' summary.json and metrics.jsonl, nvidia-smi, make's output)."
} > "$out/record.md"

# the tarball: text files only (no model, checkpoint or plot), each cut to
# its last 4 MiB, under the 16 MiB a file may have; where it is still over,
# the logs alone cut to 256 KiB each
cp "$out/record.md" "$work/record.md"
( cd "$work" && find . -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' -o -name '*.jsonl' -o -name '*.md' \) \
    ! -path './deps/*' | sed 's|^\./||' | sort > "$work/tarlist" )
while read -r f; do
    if [ "$(wc -c < "$work/$f")" -gt 4194304 ]; then
        { echo "[cut by gpu_session.sh: the last 4 MiB]"; tail -c 4194304 "$work/$f"; } > "$work/$f.cut" && mv "$work/$f.cut" "$work/$f"
    fi
done < "$work/tarlist"
tar -czf "$out/logs.tar.gz" -C "$work" -T "$work/tarlist" 2>> "$out/session.log"
if [ "$(wc -c < "$out/logs.tar.gz")" -gt 16000000 ]; then
    grep '\.log$' "$work/tarlist" > "$work/tarlist2"
    while read -r f; do tail -c 262144 "$work/$f" > "$work/$f.cut" && mv "$work/$f.cut" "$work/$f"; done < "$work/tarlist2"
    tar -czf "$out/logs.tar.gz" -C "$work" -T "$work/tarlist2"
    log "logs.tar.gz: over 16 MB with every file: the logs' last 256 KiB only"
fi
log "done in $(($(date +%s) - started)) s: $out holds $(ls "$out" | tr '\n' ' ')"
[ "${HPT_GPU_KEEP:-0}" = 1 ] && log "work kept in $work" || rm -rf "$work"

# the record last: the output's tail (12,000 characters) comes back even
# where no file does; where the record is longer, printed without the
# per-kernel profile (gpu_bench.md has it)
echo
if [ "$(wc -c < "$out/record.md")" -le 11000 ]; then cat "$out/record.md"
else
    awk '/^Where hpt.s step goes/ { skip = 1; print "(the per-kernel profile: in gpu_bench.md, left out here to fit the output'"'"'s tail)"; next }
         skip && /step \(profiled\)/ { skip = 0; next } !skip' "$out/record.md"
fi
exit "$test_rc"
