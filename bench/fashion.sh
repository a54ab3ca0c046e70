#!/bin/sh
# Fashion-MNIST targets: the default MLP and CNN (hpt's defaults for
# --task fashion-mnist) against the dataset's published baselines
# (/usr/share/doc/dataset-fashion-mnist/benchmark/baselines.json): at least
# 88% test accuracy for the MLP and 91% for the CNN. Reports test accuracy
# and training time per epoch on 2 threads.
#
#   sh bench/fashion.sh            writes runs/fashion-{mlp,cnn}/, bench/results/fashion.json
set -eu
cd "$(dirname "$0")/.."
[ -x ./hpt ] || make -j2 hpt >&2
for m in mlp cnn; do
    cmd="./hpt train --task fashion-mnist --model $m --threads 2 --overwrite --out runs/fashion-$m"
    echo "$cmd" >&2
    $cmd
done
python3 - <<'PY'
import json, datetime
res = {"bench": "fashion", "date": datetime.datetime.utcnow().isoformat() + "Z",
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
       "targets": {"mlp": 0.88, "cnn": 0.91}, "runs": {}}
for m in ("mlp", "cnn"):
    s = json.load(open(f"runs/fashion-{m}/summary.json"))
    evals = [json.loads(l) for l in open(f"runs/fashion-{m}/metrics.jsonl") if "val_accuracy" in l]
    epochs = len(evals)
    res["runs"][m] = {"command": f"./hpt train --task fashion-mnist --model {m} --threads 2",
                      "model": s["model"], "params": s["params"], "epochs": epochs,
                      "test_accuracy": s["test_accuracy"], "final_val_loss": s["final_val_loss"],
                      "train_s": s["train_s"], "s_per_epoch": s["train_s"] / epochs,
                      "eval_s": s["eval_s"], "median_step_ms": s["median_step_ms"],
                      "peak_rss_bytes": s["peak_rss_bytes"], "blas_core": s.get("blas_core"),
                      "accuracy_per_epoch": [e["val_accuracy"] for e in evals]}
    r = res["runs"][m]
    print(f"{m}: {r['test_accuracy']*100:.2f}% test accuracy after {epochs} epochs "
          f"(target {res['targets'][m]*100:.0f}%), {r['s_per_epoch']:.1f} s/epoch, {r['median_step_ms']:.1f} ms/step")
json.dump(res, open("bench/results/fashion.json", "w"), indent=1)
PY
