#!/bin/sh
# tier: fast (make test; tests/run.sh)
# metrics.jsonl write errors: a run whose metrics.jsonl cannot
# be written (here: a file size limit, which makes the write past it fail
# with EFBIG, as a full disk fails with ENOSPC) stops with status 1 and a
# message naming metrics.jsonl, instead of going on and reporting success
# with a truncated log.
test_name=cli_metrics; . tests/lib.sh
python3 -c "print('to be or not to be that is the question ' * 400)" > "$tmp/text.txt"
tiny="--data $tmp/text.txt --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 --batch-size 2 --eval-iters 1 --threads 1"

# the same run without a limit succeeds, and its metrics.jsonl is over the limit
run "$HPT" train $tiny --max-iters 400 --eval-interval 0 --out "$tmp/free"
size=$(wc -c < "$tmp/free/metrics.jsonl" 2>/dev/null || echo 0)
if [ $rc -eq 0 ] && [ "$size" -gt 40000 ] && [ "$(wc -c < "$tmp/free/model.bin")" -lt 16000 ]; then
    pass "a 400-step run writes $size bytes of metrics (model.bin under 16 KB)"
else fail "unlimited run: rc $rc, metrics $size bytes"; fi

# 32 KiB per file (ulimit -f counts 512-byte blocks in sh); SIGXFSZ ignored
(trap '' XFSZ; ulimit -f 64 2>/dev/null && exec "$HPT" train $tiny --max-iters 400 --eval-interval 0 \
    --out "$tmp/limited") >"$tmp/out" 2>"$tmp/err"; rc=$?
if ! grep -q . "$tmp/err" && [ $rc -eq 0 ] && [ "$(wc -c < "$tmp/limited/metrics.jsonl")" -ge 40000 ]; then
    echo "skip: the file size limit did not apply"
elif [ $rc -eq 1 ] && grep -q "cannot write '.*metrics.jsonl': File too large" "$tmp/err" && [ ! -e "$tmp/limited/summary.json" ]; then
    pass "metrics.jsonl over the file size limit: status 1 naming it, no summary.json"
else fail "metrics.jsonl write error: rc $rc: $(tail -2 "$tmp/err")"; fi

finish
