#!/bin/sh
# Is training from Python as fast as the CLI? (The thread count and
# OpenBLAS's core selection must behave as in `hpt train`: libhpt makes it
# as it loads, in both.) nanoGPT's CPU config, STEPS steps, 2 threads, no
# evaluation until the end; `./hpt train` and `hpt.train(...)` alternate
# REPEATS times each, and the median of each one's median_step_ms is
# compared. Both must end at the same param_crc32 (the same run).
#
#   sh bench/python_speed.sh         (STEPS=300, REPEATS=3: ~2 min on 2 idle cores)
# Writes bench/results/python_speed.json. Run it on an idle machine.
set -eu
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300}; REPEATS=${REPEATS:-3}
make -j2 >/dev/null
PY=python3
"$PY" -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
data=bench/data/tinyshakespeare.txt
tmp=$(mktemp -d /tmp/hpt_pyspeed.XXXXXX); trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$REPEATS"); do
    ./hpt train --data $data --max-iters "$STEPS" --eval-interval 0 --eval-iters 4 --threads 2 \
        --out "$tmp/cli$i" >/dev/null 2>&1
    PYTHONPATH=python "$PY" -c "
import hpt
hpt.train(data='$data', max_iters=$STEPS, eval_interval=0, eval_iters=4, threads=2, out='$tmp/py$i')" >/dev/null 2>&1
done
"$PY" - "$tmp" "$REPEATS" "$STEPS" <<'PY'
import json, os, statistics, sys, datetime
tmp, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(k): return [json.load(open(f"{tmp}/{k}{i}/summary.json")) for i in range(1, n + 1)]
cli, py = load("cli"), load("py")
mc, mp = statistics.median(s["median_step_ms"] for s in cli), statistics.median(s["median_step_ms"] for s in py)
same = len({s["param_crc32"] for s in cli + py}) == 1
out = {"bench": "python_speed", "date": datetime.datetime.utcnow().isoformat() + "Z", "steps": steps, "repeats": n,
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
       "cli_median_step_ms": [s["median_step_ms"] for s in cli], "python_median_step_ms": [s["median_step_ms"] for s in py],
       "blas_core": {"cli": cli[0].get("blas_core"), "python": py[0].get("blas_core")},
       "python_over_cli": mp / mc, "same_param_crc32": same}
print(f"cli {mc:.2f} ms/step, python {mp:.2f} ms/step: python/cli {mp / mc:.3f}; "
      f"blas core cli {out['blas_core']['cli']}, python {out['blas_core']['python']}; same run: {same}")
os.makedirs("bench/results", exist_ok=True)
json.dump(out, open("bench/results/python_speed.json.tmp", "w"), indent=1)
os.replace("bench/results/python_speed.json.tmp", "bench/results/python_speed.json")
PY
