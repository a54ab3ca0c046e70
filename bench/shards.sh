#!/bin/sh
# shards.sh — token shards' measurements, on an idle machine, one run each side
# by side:
#   1. `hpt tokenize --out` throughput (MB/s) at 1 and 2 threads on a corpus
#      of HPT_SHARDS_MB megabytes (default 1100: over 1 GB), built in /tmp
#      from the text this machine has (Debian's fortunes, the Shakespeare
#      corpus, the UTF-8 plain-text files under /usr/share/doc), repeated;
#      the two outputs compared byte for byte
#   2. start-up time and peak RSS of a 10-step `hpt train --tokenizer gpt2`
#      from the text file vs from the shards (start-up: from the process's
#      start to its first metrics.jsonl line, less that step's time)
#   3. the loader's own throughput, batches of 16 x 1024 (build/bench_loader)
# Writes bench/results/shards.json. The corpus and the shards stay in
# HPT_SHARDS_DIR (default /tmp/hpt-shards-bench; never in the repository).
#
#   sh bench/shards.sh                         # the real run (~10 min on 2 cores)
#   HPT_SHARDS_MB=2 sh bench/shards.sh         # end to end on a tiny corpus (a check, not a measurement)
set -eu
cd "$(dirname "$0")/.."
mb=${HPT_SHARDS_MB:-1100}
dir=${HPT_SHARDS_DIR:-/tmp/hpt-shards-bench}
out=${HPT_SHARDS_JSON:-bench/results/shards.json}
make -j2 hpt build/bench_loader >/dev/null
mkdir -p "$dir"
corpus=$dir/corpus-${mb}MB.txt

# ---------------------------------------------------------------- the corpus
if [ ! -f "$corpus" ]; then
    python3 - "$corpus" "$mb" <<'EOF'
import os, sys
path, mb = sys.argv[1], float(sys.argv[2])
want = int(mb * 1e6)
def texts():
    roots = ["/usr/share/games/fortunes", "bench/data", "/usr/share/doc"]
    for root in roots:
        for d, subdirs, files in sorted(os.walk(root)):
            subdirs.sort()
            for f in sorted(files):
                if f.endswith((".gz", ".dat", ".u8", ".png", ".jpg", ".html", ".pdf")):
                    continue
                p = os.path.join(d, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                b = open(p, "rb").read()
                try:
                    b.decode("utf-8")
                except UnicodeDecodeError:
                    continue  # hpt refuses what is not UTF-8 text for gpt2
                if b and b"\0" not in b:
                    yield b
base = b"\n".join(texts()) + b"\n"
if not base.strip():
    sys.exit("shards.sh: found no text to build a corpus from")
with open(path + ".tmp", "wb") as f:
    n = 0
    while n < want:
        chunk = base[:want - n]
        f.write(chunk)
        n += len(chunk)
os.replace(path + ".tmp", path)
print(f"corpus: {path}, {n / 1e6:.1f} MB from {len(base) / 1e6:.1f} MB of distinct text, repeated", file=sys.stderr)
EOF
fi
bytes=$(wc -c <"$corpus")

# seconds CMD...: wall time of CMD (its output to $dir/last.log); with
# FIRST=DIR, the time to DIR/metrics.jsonl's first line instead
seconds() {
    python3 - "$dir/last.log" "${FIRST:-}" "$@" <<'EOF'
import os, subprocess, sys, time
log, first, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t = time.perf_counter()
with open(log, "w") as f:
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    seen = None
    while p.poll() is None:
        if first and seen is None and os.path.exists(first + "/metrics.jsonl") and os.path.getsize(first + "/metrics.jsonl"):
            seen = time.perf_counter() - t
        time.sleep(0.002)
    if p.returncode:
        sys.exit(f"shards.sh: {' '.join(cmd)} failed (exit {p.returncode}), see {log}")
print(f"{seen if first else time.perf_counter() - t:.3f}")
EOF
}

# ---------------------------------------------------------------- 1. tokenize
rm -rf "$dir/shards1" "$dir/shards2"
tok1=$(seconds ./hpt tokenize --out "$dir/shards1" --threads 1 "$corpus")
tok2=$(seconds ./hpt tokenize --out "$dir/shards2" --threads 2 "$corpus")
same=true
for f in "$dir"/shards1/*; do cmp -s "$f" "$dir/shards2/$(basename "$f")" || same=false; done
echo "tokenize: 1 thread ${tok1} s, 2 threads ${tok2} s, outputs identical: $same" >&2

# ---------------------------------------------------------------- 2. a 10-step run
# small batches: the model's logits (B x T x 50304 floats) would hide the data's memory
RUN="--tokenizer gpt2 --n-layer 2 --n-head 4 --n-embd 128 --block-size 128 --batch-size 4 --max-iters 10
     --eval-iters 1 --eval-interval 0 --threads 2 --overwrite"
rm -rf "$dir/run-text" "$dir/run-shards"
first_text=$(FIRST="$dir/run-text" seconds ./hpt train --data "$corpus" $RUN --out "$dir/run-text")
first_shards=$(FIRST="$dir/run-shards" seconds ./hpt train --data "$dir/shards1" $RUN --out "$dir/run-shards")

# ---------------------------------------------------------------- 3. the loader
loader=$(build/bench_loader --data "$dir/shards1" --batch 16 --seq 1024 --seconds 3)

python3 - "$out" "$corpus" "$bytes" "$tok1" "$tok2" "$same" "$dir" "$first_text" "$first_shards" "$loader" <<'EOF'
import json, platform, sys
out, corpus, nbytes, tok1, tok2, same, d, first_text, first_shards, loader = sys.argv[1:]
nbytes, tok1, tok2 = int(nbytes), float(tok1), float(tok2)
m = json.load(open(d + "/shards1/manifest.json"))
def run(name, first):
    s = json.load(open(f"{d}/{name}/summary.json"))
    step = s["train_s"] / s["steps"]  # the first line comes after one step
    return {"first_line_s": float(first), "step_s": step, "startup_s": float(first) - step,
            "peak_rss_bytes": s["peak_rss_bytes"], "steps": s["steps"]}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
r = {"corpus": corpus, "megabytes": nbytes / 1e6, "tokens": m["tokens"], "cpu": cpu,
     "tokenize": {"threads_1_s": tok1, "threads_2_s": tok2, "mb_per_s_1": nbytes / 1e6 / tok1,
                  "mb_per_s_2": nbytes / 1e6 / tok2, "speedup": tok1 / tok2, "identical_output": same == "true"},
     "run_10_steps": {"from_text": run("run-text", first_text), "from_shards": run("run-shards", first_shards)},
     "loader": json.loads(loader),
     "command": "sh bench/shards.sh (HPT_SHARDS_MB=%s)" % (nbytes // 1000000)}
json.dump(r, open(out, "w"), indent=1)
t, s = r["run_10_steps"]["from_text"], r["run_10_steps"]["from_shards"]
print(f"corpus {r['megabytes']:.0f} MB, {m['tokens']['train'] + m['tokens']['val']} tokens")
print(f"tokenize: {r['tokenize']['mb_per_s_1']:.1f} MB/s at 1 thread, {r['tokenize']['mb_per_s_2']:.1f} MB/s at 2 "
      f"({r['tokenize']['speedup']:.2f}x), identical output: {same}")
print(f"10-step run from text:   start-up {t['startup_s']:.2f} s, peak RSS {t['peak_rss_bytes'] / 2**20:.0f} MiB")
print(f"10-step run from shards: start-up {s['startup_s']:.2f} s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB")
print(f"loader: {r['loader']['batches_per_s']:.0f} batches of 16x1024/s = {r['loader']['tokens_per_s'] / 1e6:.0f}M tokens/s")
print(f"wrote {out}")
EOF
