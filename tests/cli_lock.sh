#!/bin/sh
# tier: fast (make test; tests/run.sh)
# The run directory's advisory lock: a second trainer (or a resume) on a
# directory in use is refused with the holder's pid and a non-zero exit, and
# nothing of the first run is overwritten; after the first dies (SIGKILL
# included) the directory can be resumed at once.
test_name=cli_lock; . tests/lib.sh

python3 -c "print('to be or not to be that is the question ' * 400)" > "$tmp/text.txt"
small="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 1 --threads 1"
$HPT train $small --max-iters 1000000 --eval-interval 0 --save-interval 50 --out "$tmp/run" >"$tmp/first.log" 2>&1 &
pid=$!; pids=$pid
# find, not ls: the run prunes old checkpoints while we look
have_ckpt() { find "$tmp/run/checkpoints" -name 'ckpt-*.bin' 2>/dev/null | grep -q .; }
for i in $(seq 1 100); do have_ckpt && break; sleep 0.1; done
have_ckpt || fail "first run wrote no checkpoint: $(tail -2 "$tmp/first.log")"
lines=$(wc -l < "$tmp/run/metrics.jsonl")

out=$($HPT train $small --max-iters 10 --out "$tmp/run" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "in use by another hpt (pid $pid)" || fail "second trainer: rc $rc: $out"
out=$($HPT train --resume "$tmp/run" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "pid $pid" || fail "resume of a live run: rc $rc: $out"
[ "$(wc -l < "$tmp/run/metrics.jsonl")" -ge "$lines" ] || fail "the first run's metrics were truncated"
kill -0 $pid 2>/dev/null || fail "the first run died"

kill -9 $pid; wait $pid 2>/dev/null
out=$($HPT train --resume "$tmp/run" --log-interval 1000000 2>&1 </dev/null & sleep 1; kill -INT $! 2>/dev/null; wait $!); rc=$?
[ $rc -eq 0 ] || fail "resume after SIGKILL: rc $rc: $(echo "$out" | tail -2)"

finish
