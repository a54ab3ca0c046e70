#!/bin/sh
# tier: fast (make test; tests/run.sh)
# Memory guard rails: --rss-warn logs one warning; --rss-limit saves an
# emergency checkpoint and stops with a clear message and status 1; the run
# then resumes (with the limit lifted) to the same parameters as a run that
# was never stopped.
test_name=cli_memory; . tests/lib.sh
python3 -c "print('all the world is a stage and all the men and women merely players ' * 300)" > "$tmp/text.txt"
small="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 40 --eval-interval 20 --eval-iters 1 --threads 1"

$HPT train $small --out "$tmp/ref" >/dev/null 2>&1 || fail "reference run"
out=$($HPT train $small --rss-warn 1 --out "$tmp/warn" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c "passed --rss-warn")" -eq 1 ] || fail "--rss-warn: rc $rc, $(echo "$out" | grep -c "passed --rss-warn") warnings"
[ "$(crc_of "$tmp/warn")" = "$(crc_of "$tmp/ref")" ] || fail "--rss-warn changed the run"

out=$($HPT train $small --rss-limit 1 --out "$tmp/lim" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "passed --rss-limit 1.0 MiB at step 1; emergency checkpoint saved" || fail "--rss-limit: rc $rc: $(echo "$out" | tail -1)"
[ -f "$tmp/lim/checkpoints/ckpt-00000001.bin" ] || fail "no emergency checkpoint"
$HPT train --resume "$tmp/lim" >/dev/null 2>&1 || fail "resume after the emergency save"
[ "$(crc_of "$tmp/lim")" = "$(crc_of "$tmp/ref")" ] || fail "resumed run ends elsewhere: $(crc_of "$tmp/lim") vs $(crc_of "$tmp/ref")"

finish
