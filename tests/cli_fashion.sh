#!/bin/sh
# tier: fast (make test; tests/run.sh)
# CLI tests of the fashion-mnist task: bad IDX files are named in a clear
# error with a non-zero exit; a short real MLP run writes accuracy into the
# metrics and summary; a saved classifier reloads (sample refuses it: it has
# no tokenizer). Uses Debian's dataset-fashion-mnist when installed.
test_name=cli_fashion; . tests/lib.sh
FM=/usr/share/datasets/fashion-mnist

# expect_error DIR PATTERN: training on DIR must exit non-zero and say PATTERN
expect_error() {
    out=$($HPT train --task fashion-mnist --model mlp --data "$1" --max-iters 1 --out "$tmp/run" 2>&1)
    rc=$?
    [ $rc -ne 0 ] || fail "exit 0 on $1"
    echo "$out" | grep -q -- "$2" || fail "message for $1 lacks '$2': $out"
}

# synthetic IDX files: header + payload, gzipped
python3 - "$tmp" <<'PY'
import gzip, os, struct, sys
d = sys.argv[1]
def idx(path, dims, payload, magic=None):
    hdr = magic if magic is not None else bytes([0, 0, 8, len(dims)])
    with gzip.open(path, "wb") as f:
        f.write(hdr + b"".join(struct.pack(">I", x) for x in dims) + payload)
def good(dirname, n_train=60000, n_test=10000):
    os.makedirs(dirname, exist_ok=True)
    for pre, n in (("train", n_train), ("t10k", n_test)):
        idx(f"{dirname}/{pre}-images-idx3-ubyte.gz", [n, 28, 28], bytes(n * 784))
        idx(f"{dirname}/{pre}-labels-idx1-ubyte.gz", [n], bytes(i % 10 for i in range(n)))
good(f"{d}/trunc")
with gzip.open(f"{d}/trunc/train-images-idx3-ubyte.gz", "rb") as f: data = f.read()
with gzip.open(f"{d}/trunc/train-images-idx3-ubyte.gz", "wb") as f: f.write(data[:len(data) // 2])
good(f"{d}/magic")
idx(f"{d}/magic/t10k-labels-idx1-ubyte.gz", [10000], bytes(10000), magic=bytes([0, 0, 8, 3]))
good(f"{d}/dims")
idx(f"{d}/dims/train-images-idx3-ubyte.gz", [60000, 32, 32], bytes(60000 * 1024))
good(f"{d}/count")
idx(f"{d}/count/train-labels-idx1-ubyte.gz", [59999], bytes(59999))
good(f"{d}/label")
idx(f"{d}/label/t10k-labels-idx1-ubyte.gz", [10000], bytes([12]) * 10000)
os.makedirs(f"{d}/notgz", exist_ok=True)
open(f"{d}/notgz/train-images-idx3-ubyte.gz", "wb").write(b"hello")
PY

expect_error "$tmp/nowhere" "nowhere/train-images-idx3-ubyte.gz"
expect_error "$tmp/trunc" "train-images-idx3-ubyte.gz' is truncated"
expect_error "$tmp/magic" "t10k-labels-idx1-ubyte.gz' has magic"
expect_error "$tmp/dims" "32x32 images"
expect_error "$tmp/count" "59999 labels"
expect_error "$tmp/label" "not a class"
expect_error "$tmp/notgz" "train-images-idx3-ubyte.gz"
out=$($HPT train --task fashion-mnist --model transformer 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--model" || fail "bad --model: rc $rc: $out"

if [ -f "$FM/train-images-idx3-ubyte.gz" ]; then
    $HPT train --task fashion-mnist --model mlp --max-iters 60 --eval-interval 30 --threads 2 \
        --out "$tmp/mlp" >"$tmp/log" 2>&1 || { fail "mlp run: $(tail -3 "$tmp/log")"; }
    python3 - "$tmp/mlp" <<'PY' || fail "mlp run outputs"
import json, sys
d = sys.argv[1]
lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
assert len(lines) == 60, len(lines)
ev = [l for l in lines if "val_loss" in l]
assert [l["step"] for l in ev] == [30, 60], ev
assert all(0.5 < l["val_accuracy"] <= 1.0 for l in ev), ev   # 60 steps of an MLP: well above chance
s = json.load(open(f"{d}/summary.json"))
assert s["task"] == "fashion-mnist" and 0.5 < s["test_accuracy"] <= 1.0, s
for k in ("params", "final_val_loss", "train_s", "wall_s", "peak_rss_bytes", "param_crc32"):
    assert k in s, k
import xml.dom.minidom   # image tasks get an accuracy plot beside the loss plot
for p in ("loss", "accuracy"):
    xml.dom.minidom.parse(f"{d}/{p}.svg")
    assert open(f"{d}/{p}.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n", p
PY
    out=$($HPT sample --model "$tmp/mlp/model.bin" 2>&1); rc=$?
    [ $rc -ne 0 ] && echo "$out" | grep -q "not a language model" || fail "sample on a classifier: rc $rc: $out"
else
    echo "skip: $FM not installed (apt-get install dataset-fashion-mnist)"
fi

finish
