#!/bin/sh
# Memory guard rails: --rss-warn logs one warning; --rss-limit saves an
# emergency checkpoint and stops with a clear message and status 1; the run
# then resumes (with the limit lifted) to the same parameters as a run that
# was never stopped.
set -u
HPT=${HPT:-./hpt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
python3 -c "print('all the world is a stage and all the men and women merely players ' * 300)" > "$tmp/text.txt"
small="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 40 --eval-interval 20 --eval-iters 1 --threads 1"
crc() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['param_crc32'])" "$1/summary.json"; }

$HPT train $small --out "$tmp/ref" >/dev/null 2>&1 || fail "reference run"
out=$($HPT train $small --rss-warn 1 --out "$tmp/warn" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c "passed --rss-warn")" -eq 1 ] || fail "--rss-warn: rc $rc, $(echo "$out" | grep -c "passed --rss-warn") warnings"
[ "$(crc "$tmp/warn")" = "$(crc "$tmp/ref")" ] || fail "--rss-warn changed the run"

out=$($HPT train $small --rss-limit 1 --out "$tmp/lim" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "passed --rss-limit 1.0 MiB at step 1; emergency checkpoint saved" || fail "--rss-limit: rc $rc: $(echo "$out" | tail -1)"
[ -f "$tmp/lim/checkpoints/ckpt-00000001.bin" ] || fail "no emergency checkpoint"
$HPT train --resume "$tmp/lim" >/dev/null 2>&1 || fail "resume after the emergency save"
[ "$(crc "$tmp/lim")" = "$(crc "$tmp/ref")" ] || fail "resumed run ends elsewhere: $(crc "$tmp/lim") vs $(crc "$tmp/ref")"

[ $fails -eq 0 ] && echo "cli_memory: all passed" || echo "cli_memory: $fails failed"
[ $fails -eq 0 ]
