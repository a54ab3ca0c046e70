#!/bin/sh
# tokenize_speed.sh — how fast --tokenizer gpt2 encodes the 1 MB benchmark
# corpus (the goal: well under a second): `hpt tokenize` on
# bench/data/tinyshakespeare.txt against the same on a 1-byte file (the
# vocabulary's loading and checks, and the process), median of 7 runs each,
# alternating. Writes bench/results/tokenize.json. Time it on an idle machine.
set -eu
cd "$(dirname "$0")/.."
make -j2 hpt >/dev/null
python3 - <<'EOF2'
import json, platform, statistics, subprocess, time
corpus, one = "bench/data/tinyshakespeare.txt", "tests/fixtures/gpt2_tok/one.txt"
def once(path):
    t = time.perf_counter()
    out = subprocess.run(["./hpt", "tokenize", "--tokenizer", "gpt2", path], check=True, capture_output=True).stdout
    return time.perf_counter() - t, out.count(b"\n")
full, base = [], []
for _ in range(7):
    t, n = once(corpus); full.append(t)
    base.append(once(one)[0])
mb = len(open(corpus, "rb").read()) / 1e6
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
r = {"corpus": corpus, "megabytes": mb, "tokens": n, "cpu": cpu,
     "median_total_s": statistics.median(full), "median_load_s": statistics.median(base),
     "median_encode_s": statistics.median(full) - statistics.median(base),
     "runs_total_s": full, "runs_load_s": base,
     "command": "./hpt tokenize --tokenizer gpt2 " + corpus + " (minus the same on a 1-byte file)"}
r["encode_mb_per_s"] = mb / r["median_encode_s"]
json.dump(r, open("bench/results/tokenize.json", "w"), indent=1)
print(f"{corpus}: {mb:.2f} MB, {n} tokens; total {r['median_total_s']:.3f} s, of which loading the vocabulary "
      f"{r['median_load_s']:.3f} s: encoding {r['median_encode_s']:.3f} s ({r['encode_mb_per_s']:.1f} MB/s)")
EOF2
