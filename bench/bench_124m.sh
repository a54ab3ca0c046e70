#!/usr/bin/env bash
# bench_124m.sh — full training steps of hpt at GPT-2 124M shapes (L12 H12
# C768, vocab 50257 -> 50304, block 1024, batch 4 x seq 64) with
# build/bench_step, on 2 threads with the OpenMP OpenBLAS (the binary carries
# an rpath to it). Writes bench/results/gpt2_124m.json and prints the table
# and the peak RSS (from /usr/bin/time -v when available, else the program's
# own getrusage figure).
#
# Usage: bench/bench_124m.sh [--out FILE] [--build] [bench_step flags...]
#   e.g. bench/bench_124m.sh --steps 2 --warmup 1 --out /tmp/smoke.json
# Environment: THREADS (2), OUT (bench/results/gpt2_124m.json),
# OPENBLAS_CORETYPE (passed through; recorded in the JSON). Unset, bench_step
# makes the CLI's choice (Haswell where OpenBLAS falls back to Prescott); on
# AVX-512 CPUs OPENBLAS_CORETYPE=SkylakeX was 1.4-1.6x faster in spot checks.
# The binary is built with `make -j2 build/bench_step` when missing; --build
# rebuilds it (and libhpt.a) first.
set -euo pipefail

cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
OUT=${OUT:-bench/results/gpt2_124m.json}
BUILD=0
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --build) BUILD=1; shift ;;
        --threads) THREADS=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done

BIN=build/bench_step
if [ "$BUILD" = 1 ] || ! [ -x "$BIN" ] || [ bench/bench_step.c -nt "$BIN" ]; then
    echo "building $BIN (make -j2 $BIN)" >&2
    make -j2 "$BIN" >&2
fi
if ! ldd "$BIN" | grep -q 'openblas-openmp/libopenblas'; then
    echo "WARNING: $BIN does not resolve libopenblas from the OpenMP build:" >&2
    ldd "$BIN" | grep -i blas >&2 || echo "  (no BLAS linked: built with BLAS=0?)" >&2
fi
mkdir -p "$(dirname "$OUT")"

CMD=("$BIN" --threads "$THREADS" "${ARGS[@]}" --json "$OUT")
TIMEV=$(mktemp "${TMPDIR:-/tmp}/bench124m.XXXXXX")
trap 'rm -f "$TIMEV"' EXIT
echo "running: ${CMD[*]}" >&2
if [ -x /usr/bin/time ] && /usr/bin/time -v true 2>/dev/null; then
    /usr/bin/time -v -o "$TIMEV" "${CMD[@]}"
    RSS_KB=$(awk -F': *' '/Maximum resident set size/ {print $2}' "$TIMEV")
    RSS_SRC="/usr/bin/time -v"
else
    "${CMD[@]}"
    RSS_KB=""
    RSS_SRC="getrusage (in bench_step)"
fi

PY=$(command -v /usr/bin/python3 || command -v python3)
"$PY" - "$OUT" "${RSS_KB:-}" "$RSS_SRC" "${CMD[*]}" "${OPENBLAS_CORETYPE-}" "$(git rev-parse HEAD 2>/dev/null || echo unknown)" <<'EOF'
import json, os, sys
out, rss_kb, src, cmd, coretype, rev = sys.argv[1:7]
d = json.load(open(out))
peak = int(rss_kb) * 1024 if rss_kb else d["peak_rss_bytes_getrusage"]
d["peak_rss_bytes"] = peak
d["peak_rss_source"] = src
d["command"] = cmd
d["env"] = {"OPENBLAS_CORETYPE": coretype or None}
d["hpt_git_commit"] = rev
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(d, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print(f"{'peak RSS (' + src + ')':28s} {peak / 1048576:.1f} MiB")
if d.get("openblas_core") == "Prescott":
    print("WARNING: OpenBLAS runs its SSE3 (Prescott) kernels on this CPU; set OPENBLAS_CORETYPE "
          "(Cooperlake/SkylakeX for AVX-512, Haswell for AVX2)", file=sys.stderr)
print(f"wrote {out}")
EOF
