#!/bin/sh
# gpu_session.sh — the one prepared script for a session that is lent the GPU
# machine (15 minutes of device time in all, machine start included): it
# builds hpt there with nvcc and the carried Debian packages, runs
# `make test-cuda`, compute-sanitizer's memcheck on the device row's test and
# on a short GPT-2 training run, then bench/bench_gpu.sh (hpt against PyTorch)
# in the time left, and writes the record (machine, date, commit, results,
# the benchmark's table) and every log to $OUT. Nothing here needs the
# network: that machine has none.
#
# On the CPU machine, first:
#     sh bench/gpu_session.sh --prepare
#   downloads the .debs into .gpu/debs (scripts/gpu-debs.sh) once, copies the
#   benchmark's text (Tiny Shakespeare, from ../shared/data or $HPT_BENCH_TEXT)
#   into .gpu/data and GPT-2's vocabulary files into .gpu/vocab, and writes
#   .gpu/commit (HEAD, and whether the tree has uncommitted changes: the
#   copy there may have no .git to ask).
# Then on the GPU machine, from the repository root, with .gpu carried
# (the device tool: command "sh bench/gpu_session.sh", carry [".gpu"],
# timeout_s 600):
#     sh bench/gpu_session.sh
# Every step has its own time limit (build 240 s, tests 300 s, memcheck
# 90 + 60 + 60 s, the benchmark what is left), each cut to what is left of 570 s
# less a margin for the record, and a failed step does not stop
# the ones after it; the record says what each gave. The exit status is
# make test-cuda's (4 where it passed only by skipping with a GPU present:
# nothing was tested). Commit $OUT/record.md under bench/results/ (CI cannot
# make it): e.g. bench/results/gpu-test-<date>.md.
set -u

if [ "${1:-}" = "--prepare" ]; then
    [ -n "$(ls .gpu/debs/*.deb 2>/dev/null)" ] || sh scripts/gpu-debs.sh || exit 1
    text=${HPT_BENCH_TEXT:-../shared/data/tinyshakespeare.txt}
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
    echo "$(ls .gpu/debs/*.deb | wc -l) packages in .gpu/debs; now on the GPU machine: sh bench/gpu_session.sh (carry .gpu)"
    exit 0
fi

out=${OUT:-/tmp/hpt-gpu-session}
mkdir -p "$out"
log() { echo "$*" | tee -a "$out/session.log"; }
started=$(date +%s)
# The device tool's call ends at 600 s: every step's limit is its own or
# what is left of 570 s less `reserve` (the record's margin: the
# steps' own limits add up to 240 + 300 + 90 + 60 + 60 = 750 s, past the
# call's end, where the record would never be written).
reserve=15
budget() {  # budget LIMIT: LIMIT, or fewer seconds when fewer are left (at least 1: `timeout 0` is no limit)
    _b=$((570 - reserve - ($(date +%s) - started)))
    [ "$_b" -gt "$1" ] && _b=$1
    [ "$_b" -lt 1 ] && _b=1
    echo "$_b"
}
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
log "gpu_session.sh $stamp in $(pwd)"

# ---- the machine
{
    echo "date: $stamp"
    echo "host: $(uname -a)"
    echo "cpus: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo
    grep PRETTY_NAME /etc/os-release 2>/dev/null
    gcc --version 2>&1 | head -n 1
} > "$out/machine.txt" 2>&1
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
log "gpu: ${gpu:-none (nvidia-smi: $(head -n 1 "$out/nvidia-smi.txt"))}"

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
nvcc --version > "$out/nvcc.txt" 2>&1
log "nvcc: $(grep -m1 release "$out/nvcc.txt" || echo 'not found')"

# ---- the carried packages, unpacked into a temporary prefix (never into /)
deps=$(mktemp -d /tmp/hpt-deps.XXXXXX)
ndeb=0
for f in .gpu/debs/*.deb; do
    [ -f "$f" ] || continue
    dpkg -x "$f" "$deps" && ndeb=$((ndeb + 1))
done
log "debs: $ndeb unpacked into $deps"
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

# OpenBLAS: the image has the pthread build; the Makefile's default is
# Debian's OpenMP build's folder (slower alongside OpenMP, same results)
blas=""
ol=/usr/lib/x86_64-linux-gnu
if [ ! -d $ol/openblas-openmp ] && [ -e $ol/openblas-pthread/libopenblas.so ]; then
    blas="OPENBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread OPENBLAS_LIB=$ol/openblas-pthread"
fi
log "blas: ${blas:-the Makefile's default}"

# ---- build: the CUDA build (CUDA=1: fail loudly where nvcc is missing)
j=$(nproc)
t0=$(date +%s)
timeout "$(budget 240)" make -j"$j" CUDA=1 DEPS_PREFIX="$deps" $blas all bench > "$out/build.log" 2>&1
build_rc=$?
nwarn=$(grep -c -i 'warning' "$out/build.log")
log "build: make CUDA=1 DEPS_PREFIX=... all bench: rc $build_rc, $nwarn warning lines, $(($(date +%s) - t0)) s"
./hpt --version > "$out/hpt-version.txt" 2>&1

# ---- make test-cuda: up to 300 s (the hybrid's and the Python binding's
# device tests came after the first limit of 180 s was set; nothing has
# timed them on a GPU, and a cut-off run records half its results)
t0=$(date +%s)
timeout "$(budget 300)" make -j"$j" CUDA=1 DEPS_PREFIX="$deps" $blas test-cuda > "$out/test-cuda.log" 2>&1
test_rc=$?
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/test-cuda.log" | tail -n 1)
log "make test-cuda: rc $test_rc, ${summary:-no summary line}, $(($(date +%s) - t0)) s"
grep -E '(: [0-9]+ passed, [0-9]+ failed|^FAIL|skip:|^ok |^note: )' "$out/test-cuda.log" > "$out/test-cuda-results.txt"
# a test that skipped where nvidia-smi sees a GPU tested nothing: the
# session failed (a driver or toolkit mismatch, a busy GPU), whatever make says
nskip=$(grep -c 'skip:' "$out/test-cuda-results.txt")
if [ -n "$gpu" ] && [ "$nskip" -gt 0 ]; then
    log "make test-cuda: $nskip skipped with a GPU present: counted as a failure"
    [ "$test_rc" -eq 0 ] && test_rc=4
fi

# ---- compute-sanitizer memcheck on the device row's test, smaller sizes
# (each run only where 20 s or more are left: the benchmark and the record
# come after them)
san_rc=skipped
if command -v compute-sanitizer >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    lim=$(budget 90)
    if [ -x build/cuda/test_device_cuda ] && [ "$lim" -ge 20 ]; then
        t0=$(date +%s)
        # API errors are not its to report: hpt checks every CUDA call itself
        # (an unexpected error aborts), and the test's deliberate 256 TiB
        # cudaMalloc would count as one. No leak check: the reductions' block
        # sums are a buffer kept for the process's life (device_cuda.cu).
        HPT_CUDA_TEST_MAX_N=100003 timeout "$lim" "$cs" --tool memcheck --report-api-errors no --error-exitcode 3 \
            build/cuda/test_device_cuda > "$out/memcheck.log" 2>&1
        san_rc=$?
        log "memcheck test_device_cuda (n <= 100003): rc $san_rc ($(grep -m1 'ERROR SUMMARY' "$out/memcheck.log")), $(($(date +%s) - t0)) s (limit $lim s)"
    fi
    # and the model's kernels: three training steps of a small GPT-2 on the
    # GPU, in fp32 (the flash kernels) and bf16 (bf16 activations and the
    # flash kernels' tensor-core twins)
    head -c 200000 .gpu/data/tinyshakespeare.txt > /tmp/hpt-memcheck.txt 2>/dev/null || echo "to be or not to be $(seq 1 5000)" > /tmp/hpt-memcheck.txt
    for p in fp32 bf16; do
        lim=$(budget 60)
        if [ "$lim" -ge 20 ]; then
            t0=$(date +%s)
            rm -rf /tmp/hpt-memcheck-run
            timeout "$lim" "$cs" --tool memcheck --report-api-errors no --error-exitcode 3 ./hpt train --data /tmp/hpt-memcheck.txt \
                --n-layer 2 --n-head 2 --n-embd 64 --block-size 32 --batch-size 4 --max-iters 3 --eval-iters 1 --device cuda \
                --precision $p --out /tmp/hpt-memcheck-run > "$out/memcheck-train-$p.log" 2>&1
            rc=$?
            san_train_rc="${san_train_rc:+$san_train_rc, }$p $rc"
            log "memcheck hpt train --device cuda --precision $p (2x64, 3 steps): rc $rc ($(grep -m1 'ERROR SUMMARY' "$out/memcheck-train-$p.log")), $(($(date +%s) - t0)) s (limit $lim s)"
        else
            log "memcheck hpt train --precision $p: skipped ($lim s left)"
        fi
    done
fi

# ---- the benchmark, in the time left (the device tool's call is 600 s at
# most): bench_gpu.sh is told the deadline, so that its own steps stop in
# time for it to write its table before this timeout
left=$(budget 600)
bench_rc=skipped
if [ "$build_rc" -eq 0 ] && [ "$left" -gt 60 ]; then
    t0=$(date +%s)
    HPT_BENCH_DEADLINE=$((t0 + left)) timeout "$left" sh bench/bench_gpu.sh "$out/bench" > "$out/bench.log" 2>&1
    bench_rc=$?
    log "bench_gpu.sh: rc $bench_rc in $(($(date +%s) - t0)) s (limit $left s)"
else
    log "bench_gpu.sh: skipped ($left s left, build rc $build_rc)"
fi

# ---- the record
{
    echo "# make test-cuda on the GPU machine"
    echo
    echo "- date: $stamp (session $(($(date +%s) - started)) s)"
    echo "- GPU: ${gpu:-none}"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(grep PRETTY_NAME /etc/os-release 2>/dev/null | cut -d'"' -f2)"
    echo "- toolkit: $(grep -m1 release "$out/nvcc.txt" 2>/dev/null | sed 's/.*release/release/')"
    echo "- commit: $commit"
    echo "- build: \`make CUDA=1 DEPS_PREFIX=<$ndeb carried .debs> $blas all bench\`: rc $build_rc, $nwarn warning lines"
    echo "- \`make test-cuda\`: rc $test_rc, ${summary:-no summary line}, $nskip skipped"
    echo "- compute-sanitizer memcheck, test_device_cuda at n <= 100003: rc $san_rc; hpt train --device cuda (3 steps): rc ${san_train_rc:-skipped}"
    echo "- bench/bench_gpu.sh: rc $bench_rc"
    echo
    echo "## results"
    echo
    echo '```'
    cat "$out/test-cuda-results.txt"
    echo '```'
    echo
    echo "## hpt against PyTorch (bench/bench_gpu.sh)"
    echo
    cat "$out/bench/gpu_bench.md" 2>/dev/null || echo "(no table: see bench.log)"
    echo
    echo "Logs beside this file: build.log, test-cuda.log, memcheck.log, nvidia-smi.txt, machine.txt."
} > "$out/record.md"
log "record: $out/record.md"
rm -rf "$deps"
exit $test_rc
