#!/bin/sh
# tier: fast (make test; tests/run.sh)
# Smaller I/O defects: a FIFO as --data or --model is refused
# at once (not a hang in open); a run started with a relative --data resumes
# from any working directory; hpt plot fails with status 1 (not 2, usage)
# on a run whose data it cannot draw; a full disk's message names the file;
# --resume of a directory without checkpoints leaves no .hpt.lock behind.
test_name=cli_io; . tests/lib.sh
H=$(cd "$(dirname "$HPT")" && pwd)/$(basename "$HPT")
python3 -c "print('to be or not to be that is the question ' * 400)" > "$tmp/text.txt"
small="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 1 --threads 1"

# (a) FIFOs
mkfifo "$tmp/fifo" || { echo "FAIL mkfifo"; exit 1; }
run timeout 20 "$H" train --data "$tmp/fifo" $small --max-iters 1 --out "$tmp/f1"
if [ $rc -eq 1 ] && grep -q "is not a regular file (it is a FIFO)" "$tmp/err"; then pass "(a) --data FIFO: refused at once"
else fail "(a) --data FIFO: rc $rc (124: hung)"; fi
run timeout 20 "$H" sample --model "$tmp/fifo" --tokens 1
if [ $rc -eq 1 ] && grep -q "is not a regular file (it is a FIFO)" "$tmp/err"; then pass "(a) sample --model FIFO: refused at once"
else fail "(a) sample --model FIFO: rc $rc (124: hung)"; fi

# (b) relative --data, resumed from elsewhere
mkdir "$tmp/w" && cp "$tmp/text.txt" "$tmp/w/data.txt"
(cd "$tmp/w" && "$H" train --data data.txt $small --max-iters 20 --eval-interval 10 --save-interval 10 --out run >/dev/null 2>&1) ||
    fail "(b) run with a relative --data"
rm "$tmp/w/run/summary.json" "$tmp/w/run/checkpoints/ckpt-00000020.bin"
(cd / && "$H" train --resume "$tmp/w/run" >"$tmp/out" 2>"$tmp/err"); rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/w/run/summary.json" ]; then pass "(b) --resume from another working directory (relative --data)"
else fail "(b) resume from another cwd: rc $rc"; fi

# (c) hpt plot: a run whose values cannot be drawn is a data error (1), not a usage error (2)
mkdir "$tmp/p"
printf '{"step":1,"train_loss":1e308}\n{"step":2,"train_loss":-1e308}\n{"step":3,"train_loss":1e308}\n' > "$tmp/p/metrics.jsonl"
run "$H" plot "$tmp/p"
if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then pass "(c) hpt plot on undrawable data: status $rc (not 2)"
else fail "(c) hpt plot on undrawable data: status $rc"; fi
run "$H" plot "$tmp/nothing-here"
[ $rc -eq 1 ] && pass "(c) hpt plot on a missing run: status 1" || fail "(c) hpt plot on a missing run: status $rc"

# (d) a full disk: the error names the file that could not be saved
full=""
mkdir "$tmp/mnt"
if mount -t tmpfs -o size=64k tmpfs "$tmp/mnt" 2>/dev/null; then
    full=tmpfs
    run "$H" train --data "$tmp/text.txt" $small --n-embd 64 --max-iters 2 --eval-interval 0 --out "$tmp/mnt/run"
    umount "$tmp/mnt"
else
    # no mount: a file size limit makes writes past 64 KiB fail (EFBIG); SIGXFSZ ignored
    (trap '' XFSZ; ulimit -f 128 2>/dev/null && exec "$H" train --data "$tmp/text.txt" $small --n-embd 64 --max-iters 2 \
        --eval-interval 0 --out "$tmp/run-fsize") >"$tmp/out" 2>"$tmp/err"; rc=$?
    grep -q "File too large" "$tmp/err" && full="ulimit -f"
fi
if [ -z "$full" ]; then echo "skip (d) neither a tmpfs mount nor a file size limit is available"
elif [ $rc -eq 1 ] && grep -q "cannot save '.*model.bin'" "$tmp/err"; then pass "(d) a full disk ($full): the message names model.bin"
else fail "(d) full disk ($full): rc $rc: $(tail -1 "$tmp/err")"; fi

# (e) --resume of a directory that holds no run leaves nothing behind
mkdir "$tmp/empty"
run "$H" train --resume "$tmp/empty"
if [ $rc -ne 0 ] && grep -q "no checkpoints" "$tmp/err" && [ -z "$(ls -A "$tmp/empty")" ]; then
    pass "(e) --resume without checkpoints: refused, no .hpt.lock left"
else fail "(e) --resume without checkpoints: rc $rc, left: $(ls -A "$tmp/empty")"; fi

finish
