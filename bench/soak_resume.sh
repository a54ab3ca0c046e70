#!/bin/sh
# Soak test of checkpoint/resume (not run by CI): a small hybrid
# run (Predict phases kept and rolled back, a checkpoint every 10 steps) is
# SIGKILLed at 20 random moments, one per trial, each in a fresh directory,
# and `hpt train --resume` continues it to the end. Each trial must end
# bit-exactly like the uninterrupted run: the same param_crc32, the same
# metrics.jsonl in every field but the wall-clock ones (time_s, step_ms,
# rss_bytes), the same phases.jsonl byte for byte.
#
#   sh bench/soak_resume.sh [TRIALS] [SEED]      (default 20 trials, seed 1)
# Needs ./hpt and data/fortunes.txt (make && make data/fortunes.txt). Writes
# bench/results/soak_resume.json; exits 1 if any trial differs. A kill that
# lands before the first checkpoint leaves nothing to resume, one that lands
# after the run finished nothing to kill: the trial runs again from scratch,
# killed a little later or earlier (counted as restarts; after 5, a run that
# finished is compared as it is).
set -eu
cd "$(dirname "$0")/.."
trials=${1:-20}
seed=${2:-1}
[ -x ./hpt ] || { echo "soak: build ./hpt first (make)" >&2; exit 1; }
[ -f data/fortunes.txt ] || { echo "soak: make data/fortunes.txt first" >&2; exit 1; }
work=$(mktemp -d /tmp/hpt_soak.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$trials" "$seed" <<'PY'
import json, os, random, shutil, signal, subprocess, sys, time

work, trials, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# bench/crc_invariance.sh's hybrid run (the shrink predictor forced to predict
# every few steps: jumps kept and rolled back), longer, a checkpoint every 10
CFG = ("--data data/fortunes.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 "
       "--eval-iters 4 --threads 1 --max-iters 800 --eval-interval 100 --save-interval 10 --keep-last 3 "
       "--mode hybrid --warmup-steps 20 --full-steps 5 --min-predict-steps 10 --max-predict-steps 30 "
       "--correct-steps 2 --confidence-threshold 0 --predict-waste-budget 1 --backoff-after 1000 "
       "--predictor shrink").split()
WALL = {"time_s", "step_ms", "rss_bytes"}

def train(args, out):
    return subprocess.run(["./hpt", "train"] + args + ["--out", out] if out else ["./hpt", "train"] + args,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

def crc(d):
    try: return json.load(open(f"{d}/summary.json"))["param_crc32"]
    except Exception: return None

def metrics(d):
    try: return [{k: v for k, v in json.loads(l).items() if k not in WALL} for l in open(f"{d}/metrics.jsonl")]
    except Exception: return None

def phases(d):
    try: return open(f"{d}/phases.jsonl", "rb").read()
    except Exception: return None

def newest_ckpt(d):
    try: steps = [int(f[5:13]) for f in os.listdir(f"{d}/checkpoints") if f.startswith("ckpt-") and f.endswith(".bin")]
    except FileNotFoundError: return None
    return max(steps) if steps else None

ref = f"{work}/ref"
t0 = time.time()
r = train(CFG, ref)
ref_s = time.time() - t0
if r.returncode != 0: sys.exit("soak: the reference run failed: " + r.stderr[-500:])
ref_crc, ref_metrics, ref_phases = crc(ref), metrics(ref), phases(ref)
npred = sum(1 for m in ref_metrics if m.get("phase") == "predict")
kept = sum(1 for m in ref_metrics if m.get("phase") == "predict" and m.get("accepted") == 1)
print(f"reference: {ref_s:.1f} s, param_crc32 {ref_crc}, {len(ref_metrics)} metrics lines, "
      f"{npred} Predict phases ({kept} kept)")

rng = random.Random(seed)
results, failed = [], 0
for k in range(trials):
    d = f"{work}/t{k}"
    kill_at = rng.uniform(0.02, 0.98) * ref_s
    restarts, how = 0, None
    while True:
        shutil.rmtree(d, ignore_errors=True)
        p = subprocess.Popen(["./hpt", "train"] + CFG + ["--out", d], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=kill_at)
            how = "finished before the kill"
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            how = "killed"
        ck = newest_ckpt(d)
        if how == "killed" and ck is None and restarts < 5:
            restarts += 1          # nothing to resume yet: run again, killed a little later
            kill_at += 0.1 * ref_s
            continue
        if how != "killed" and restarts < 5:
            restarts += 1          # the machine ran faster than the reference: earlier
            kill_at *= 0.7
            continue
        break
    resumed_rc = None
    if how == "killed":
        r = train(["--resume", d], None)
        resumed_rc = r.returncode
    same = {"crc": crc(d) == ref_crc, "metrics": metrics(d) == ref_metrics, "phases": phases(d) == ref_phases}
    ok = all(same.values()) and resumed_rc in (None, 0)
    failed += not ok
    results.append({"trial": k + 1, "kill_at_s": round(kill_at, 3), "outcome": how, "restarts": restarts,
                    "resumed_from_step": ck if how == "killed" else None, "resume_exit": resumed_rc,
                    "param_crc32": crc(d), "same_param_crc32": same["crc"], "same_metrics": same["metrics"],
                    "same_phases": same["phases"], "ok": ok})
    print(f"trial {k + 1:2d}: kill at {kill_at:5.2f} s: {how}" +
          (f", resumed from step {ck}: exit {resumed_rc}" if how == "killed" else "") +
          f", crc {crc(d)} {'==' if same['crc'] else '!='} {ref_crc}, metrics {'same' if same['metrics'] else 'DIFFER'}, "
          f"phases {'same' if same['phases'] else 'DIFFER'}: {'ok' if ok else 'FAIL'}")

commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
summary = {"test": "bench/soak_resume.sh", "trials": trials, "seed": seed, "passed": trials - failed,
           "failed": failed, "killed_and_resumed": sum(1 for r in results if r["outcome"] == "killed"),
           "finished_before_kill": sum(1 for r in results if r["outcome"] != "killed"),
           "restarts": sum(r["restarts"] for r in results),
           "reference": {"param_crc32": ref_crc, "seconds": round(ref_s, 2), "metrics_lines": len(ref_metrics),
                         "predict_phases": npred, "predict_kept": kept},
           "config": " ".join(CFG), "compared": "param_crc32; metrics.jsonl without time_s, step_ms, rss_bytes; "
           "phases.jsonl byte for byte", "commit": commit, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "results": results}
os.makedirs("bench/results", exist_ok=True)
with open("bench/results/soak_resume.json", "w") as f:
    json.dump(summary, f, indent=1)
    f.write("\n")
print(f"soak_resume: {trials - failed} of {trials} trials bit-exact ({summary['killed_and_resumed']} killed and "
      f"resumed, {summary['finished_before_kill']} finished before the kill); bench/results/soak_resume.json")
sys.exit(1 if failed else 0)
PY
