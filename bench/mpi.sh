#!/bin/sh
# mpi.sh — data parallelism on one machine. nanoGPT's CPU
# config (L4 H4 C128, block 64, tinyshakespeare), 24 sequences per optimizer
# step in every row, STEPS steps:
#   1proc-2threads        one process, --threads 2, --batch-size 12 --grad-accum 2
#   2ranks-1thread        mpirun -np 2, --threads 1 each, --batch-size 12
#                         (synchronous: one all-reduce per step)
#   2ranks-1thread-h10    the same in local-step mode, --sync-interval 10
# Each row: tokens/s over the training clock (rank 0's), the median step,
# comm_s (rank 0's seconds inside MPI_Allreduce, waiting for the slower rank
# included) and its share of train_s, all-reduce calls and bytes per rank.
# The first two rows train the same run bit for bit (tests/cli_mpi.sh), so
# their param_crc32 are checked equal.
#
# Then bytes per step at GPT-2 124M shapes, computed (not measured: two
# 124M ranks do not fit this machine's memory beside the others): n floats
# of gradient plus one float per micro-batch loss and one stop flag per
# synchronous step, n + 1 floats per sync in local-step mode (the layout the
# measured rows' allreduce_bytes are checked against), and the ring
# all-reduce's traffic per rank, 2 (N - 1) / N x that, for N = 2, 8, 64.
# n is bench/results/gpt2_124m.json's params.
#
#   sh bench/mpi.sh            (STEPS=300: ~3 min on 2 idle cores; the
#                               figures are only worth that on an idle machine)
# Environment: STEPS (300), H (10). Writes runs/mpi-bench/<row>/ (fresh each
# time) and bench/results/mpi.json.
set -eu
cd "$(dirname "$0")/.."
command -v mpirun >/dev/null || { echo "mpi.sh: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
make -j2 hpt >/dev/null
STEPS=${STEPS:-300}; H=${H:-10}
data=bench/data/tinyshakespeare.txt
dir=runs/mpi-bench
rm -rf "$dir"; mkdir -p "$dir"
MPI="mpirun --oversubscribe --allow-run-as-root -np 2"
# evaluation only at the end (its time is outside the training clock anyway)
cfg="--data $data --batch-size 12 --max-iters $STEPS --eval-interval 0 --eval-iters 20"

./hpt train $cfg --threads 2 --grad-accum 2 --out "$dir/1proc-2threads" >"$dir/1proc-2threads.log" 2>&1
$MPI ./hpt train $cfg --threads 1 --out "$dir/2ranks-1thread" >"$dir/2ranks-1thread.log" 2>&1
$MPI ./hpt train $cfg --threads 1 --sync-interval "$H" --out "$dir/2ranks-1thread-h$H" >"$dir/2ranks-1thread-h$H.log" 2>&1

python3 - "$dir" "$STEPS" "$H" <<'EOF'
import json, sys, datetime, os, platform
d, steps, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = ["1proc-2threads", "2ranks-1thread", f"2ranks-1thread-h{H}"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
out = {"benchmark": "mpi", "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "cpu": cpu,
       "nproc": os.cpu_count(), "steps": steps,
       "config": "L4 H4 C128 block 64, 24 sequences per step (batch 12 x 2), tinyshakespeare", "rows": [],
       "note": "throughput is only a result on an idle machine; this file may come from a sanity run"}
for r in rows:
    s = json.load(open(f"{d}/{r}/summary.json"))
    n, calls, nbytes = s["params"], s.get("allreduce_calls", 0), s.get("allreduce_bytes", 0)
    row = {"row": r, "ranks": s.get("ranks", 1), "threads_per_rank": s["threads"], "tokens_per_s": s["tokens_per_s"],
           "median_step_ms": s["median_step_ms"], "train_s": s["train_s"], "comm_s": s.get("comm_s", 0.0),
           "comm_share": s.get("comm_s", 0.0) / s["train_s"], "allreduce_calls": calls, "allreduce_bytes": nbytes,
           "final_val_loss": s["final_val_loss"], "param_crc32": s["param_crc32"]}
    if calls:
        # the layout: n + micro + 1 floats per synchronous step, n + 1 per sync
        per = n + (1 if "sync_interval" in s else 2 + 1)
        row["allreduce_floats_per_call"] = nbytes // 4 // calls
        row["layout_checked"] = nbytes == calls * per * 4
    out["rows"].append(row)
out["same_run_bit_for_bit"] = out["rows"][0]["param_crc32"] == out["rows"][1]["param_crc32"]
n124 = json.load(open("bench/results/gpt2_124m.json"))["params"]
ring = lambda N, b: 2 * (N - 1) / N * b
out["gpt2_124m"] = {"params": n124, "per_rank": []}
for N in (2, 8, 64):
    sync_b = (n124 + N + 1) * 4
    local_b = (n124 + 1) * 4
    out["gpt2_124m"]["per_rank"].append({
        "ranks": N, "sync_allreduce_bytes_per_step": sync_b, "sync_ring_bytes_per_step": ring(N, sync_b),
        f"local_h{H}_allreduce_bytes_per_step": local_b / H, f"local_h{H}_ring_bytes_per_step": ring(N, local_b) / H})
json.dump(out, open("bench/results/mpi.json", "w"), indent=1)
print("row                    ranks thr  tok/s    step ms  comm_s  share  all-reduces  layout")
for r in out["rows"]:
    print(f'{r["row"]:22s} {r["ranks"]:<5} {r["threads_per_rank"]:<4} {r["tokens_per_s"]:<8.0f} {r["median_step_ms"]:<8.1f} '
          f'{r["comm_s"]:<7.2f} {r["comm_share"]:<6.1%} {r["allreduce_calls"]:<12} {r.get("layout_checked", "")}')
print("same run bit for bit (1 process x accum 2 = 2 ranks):", out["same_run_bit_for_bit"])
for p in out["gpt2_124m"]["per_rank"]:
    print(f'124M, {p["ranks"]} ranks: sync {p["sync_ring_bytes_per_step"] / 1e6:.0f} MB/step/rank on the ring, '
          f'local-step H={H} {p[f"local_h{H}_ring_bytes_per_step"] / 1e6:.0f} MB/step/rank')
EOF
