#!/bin/sh
# mpi_local_quality.sh — local-step mode against synchronous data-parallel
# training at equal tokens: quality only, not time. Two
# ranks of a small GPT (MODEL: L2 H4 C64, block 64, batch 12 per rank, so 24
# sequences a step either way), tinyshakespeare, STEPS steps at --lr LR
# (linear decay to 0), 1 thread per rank. Rows: synchronous (one all-reduce
# per step), then --sync-interval H for each H in HS and each outer
# (lr, momentum) pair in OUTER. Every row trains on the same tokens (every
# rank draws every micro-batch; a rank trains its own), so the final val
# losses compare directly; one seed per row.
#
#   sh bench/mpi_local_quality.sh          (~8 min on 2 cores)
# Environment: MODEL ("--n-layer 2 --n-head 4 --n-embd 64"), STEPS (600),
# LR (4e-3), HS ("10 50"), OUTER ("1,0 1,0.5 0.7,0.9 1,0.7 1.3,0.5"),
# SEED (1337). Writes runs/mpi-local-quality/<row>/ (a finished
# row is reused) and bench/results/mpi_local_quality.json.
set -eu
cd "$(dirname "$0")/.."
command -v mpirun >/dev/null || { echo "mpi_local_quality.sh: mpirun is not installed" >&2; exit 1; }
make -j2 hpt >/dev/null
MODEL=${MODEL:---n-layer 2 --n-head 4 --n-embd 64}; STEPS=${STEPS:-600}; LR=${LR:-4e-3}; HS=${HS:-10 50}; OUTER=${OUTER:-1,0 1,0.5 0.7,0.9 1,0.7 1.3,0.5}; SEED=${SEED:-1337}
data=bench/data/tinyshakespeare.txt
dir=runs/mpi-local-quality
mkdir -p "$dir"
MPI="mpirun --oversubscribe --allow-run-as-root -np 2"
cfg="--data $data $MODEL --max-iters $STEPS --lr $LR --eval-interval $((STEPS / 4)) --eval-iters 20 --threads 1 --seed $SEED"

row() {  # row NAME FLAGS...
    name=$1; shift
    if [ -f "$dir/$name/summary.json" ]; then echo "$name: reused"; return; fi
    rm -rf "${dir:?}/$name"
    $MPI ./hpt train $cfg "$@" --out "$dir/$name" >"$dir/$name.log" 2>&1 || { echo "$name failed: see $dir/$name.log" >&2; exit 1; }
    echo "$name: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("val", d["final_val_loss"], "all-reduces", d["allreduce_calls"])' "$dir/$name/summary.json")"
}
rows="sync"
row sync
for h in $HS; do
    for o in $OUTER; do
        eta=${o%,*}; mu=${o#*,}
        row "local-h$h-lr$eta-mu$mu" --sync-interval "$h" --sync-outer-lr "$eta" --sync-outer-momentum "$mu"
        rows="$rows local-h$h-lr$eta-mu$mu"
    done
done

python3 - "$dir" "$STEPS" "$LR" "$SEED" "$MODEL" $rows <<'EOF'
import json, sys, datetime
d, steps, lr, seed, model, rows = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5] + " --block-size 64", sys.argv[6:]
out = {"benchmark": "mpi_local_quality", "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "config": {"ranks": 2, "threads_per_rank": 1, "model": model, "batch_per_rank": 12,
                  "steps": steps, "lr": lr, "schedule": "linear to 0", "seed": seed,
                  "data": "bench/data/tinyshakespeare.txt"},
       "note": "quality only: every row trains on the same tokens; the clocks of this shared machine are not results",
       "rows": []}
for r in rows:
    s = json.load(open(f"{d}/{r}/summary.json"))
    val = [json.loads(l) for l in open(f"{d}/{r}/metrics.jsonl") if "val_loss" in l]
    out["rows"].append({"row": r, "sync_interval": s.get("sync_interval", 0), "outer_lr": s.get("sync_outer_lr"),
                        "outer_momentum": s.get("sync_outer_momentum"), "final_val_loss": s["final_val_loss"],
                        "val_curve": [[v["step"], v["val_loss"]] for v in val], "tokens": val[-1]["tokens"],
                        "allreduce_calls": s["allreduce_calls"], "allreduce_bytes": s["allreduce_bytes"]})
json.dump(out, open("bench/results/mpi_local_quality.json", "w"), indent=1)
print("row                         H    eta  mu   final val  all-reduces")
for r in out["rows"]:
    print(f'{r["row"]:27s} {r["sync_interval"]:<4} {"" if r["outer_lr"] is None else round(r["outer_lr"], 3):<4} {"" if r["outer_momentum"] is None else round(r["outer_momentum"], 3):<4} {r["final_val_loss"]:.4f}     {r["allreduce_calls"]}')
EOF
