#!/bin/sh
# tier: fast (make test; tests/run.sh)
# A run directory holds one run. A new run into a directory that
# holds one is refused (status 2) naming it and the ways on, and leaves it
# untouched; --overwrite replaces it wholly (no stale checkpoints, logs or
# phases), but only after every check of the new run passed: an --overwrite
# that fails (bad data, too large a model, a live run) destroys nothing.
test_name=cli_rundir; . tests/lib.sh

python3 -c "print('to be or not to be that is the question ' * 400)" > "$tmp/text.txt"
small="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 1 --threads 1"
A="$tmp/a"
sums() { (cd "$1" && find . -type f ! -name .hpt.lock | sort | xargs md5sum) 2>/dev/null; }

run "$HPT" train $small --max-iters 20 --eval-interval 10 --save-interval 10 --out "$A"
[ $rc -eq 0 ] && [ -f "$A/checkpoints/ckpt-00000020.bin" ] || fail "first run: rc $rc"
sums "$A" > "$tmp/before"

# (a) a fresh run into it: refused with status 2, naming the ways on; nothing touched
run "$HPT" train $small --max-iters 5 --out "$A"
if [ $rc -eq 2 ] && grep -q "already holds a run" "$tmp/err" && grep -q -- "--resume $A" "$tmp/err" &&
   grep -q -- "--overwrite" "$tmp/err"; then pass "(a) a new run into a run directory is refused (status 2)"
else fail "(a) new run into a run directory: rc $rc"; fi
sums "$A" > "$tmp/after"
if cmp -s "$tmp/before" "$tmp/after"; then pass "(a) the old run is untouched"
else fail "(a) the refused run changed the directory: $(diff "$tmp/before" "$tmp/after" | head -3)"; fi

# (b) --overwrite whose other checks fail: the old run stays whole
run "$HPT" train --data "$tmp/missing.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --max-iters 5 --overwrite --out "$A"
rc1=$rc; sums "$A" > "$tmp/after1"
run "$HPT" train $small --n-embd 16384 --n-head 4 --block-size 1024 --max-iters 5 --overwrite --out "$A"
rc2=$rc; sums "$A" > "$tmp/after2"
if [ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && cmp -s "$tmp/before" "$tmp/after1" && cmp -s "$tmp/before" "$tmp/after2"; then
    pass "(b) a failing --overwrite (missing data, too large a model) leaves the old run whole"
else fail "(b) failing --overwrite: rc $rc1/$rc2, directory changed: $(diff "$tmp/before" "$tmp/after2" | head -3)"; fi

# (c) --overwrite replaces it wholly: same result as a fresh directory, no old checkpoints
run "$HPT" train $small --max-iters 5 --eval-interval 5 --out "$tmp/ref"
ref=$(crc_of "$tmp/ref")
run "$HPT" train $small --max-iters 5 --eval-interval 5 --overwrite --out "$A"
if [ $rc -eq 0 ] && [ "$(crc_of "$A")" = "$ref" ] && [ ! -e "$A/checkpoints" ] &&
   [ "$(wc -l < "$A/metrics.jsonl")" -eq 5 ]; then
    pass "(c) --overwrite: the new run alone (param_crc32 $ref, 5 metrics lines, no old checkpoints)"
else fail "(c) --overwrite: rc $rc, crc $(crc_of "$A") vs $ref, $(wc -l < "$A/metrics.jsonl") lines, checkpoints: $(ls "$A/checkpoints" 2>&1 | head -2)"; fi
run "$HPT" train --resume "$A"
if [ $rc -ne 0 ] && [ "$(crc_of "$A")" = "$ref" ]; then pass "(c) a later --resume cannot restore the old run's checkpoint"
else fail "(c) --resume after --overwrite: rc $rc, crc $(crc_of "$A")"; fi

# (d) a hybrid run's phases.jsonl goes too
H="$tmp/h"
run "$HPT" train $small --max-iters 30 --eval-interval 15 --mode hybrid --warmup-steps 5 --full-steps 5 --out "$H"
[ $rc -eq 0 ] && [ -f "$H/phases.jsonl" ] || fail "(d) hybrid run: rc $rc"
run "$HPT" train $small --max-iters 5 --overwrite --out "$H"
if [ $rc -eq 0 ] && [ ! -e "$H/phases.jsonl" ]; then pass "(d) --overwrite of a hybrid run removes its phases.jsonl"
else fail "(d) rc $rc, phases.jsonl $(ls "$H/phases.jsonl" 2>&1)"; fi

# (e) other files are not a run, and --overwrite keeps them
mkdir -p "$tmp/e" && echo notes > "$tmp/e/notes.txt"
run "$HPT" train $small --max-iters 3 --out "$tmp/e"
rc1=$rc
run "$HPT" train $small --max-iters 3 --overwrite --out "$tmp/e"
if [ $rc1 -eq 0 ] && [ $rc -eq 0 ] && [ "$(cat "$tmp/e/notes.txt")" = notes ]; then pass "(e) a directory of other files is usable; --overwrite keeps them"
else fail "(e) rc $rc1/$rc"; fi

# (f) --overwrite is a new run's flag
run "$HPT" train --resume "$A" --overwrite
[ $rc -eq 2 ] && pass "(f) --resume with --overwrite: usage error" || fail "(f) --resume --overwrite: rc $rc"

# (g) a live run is never replaced
"$HPT" train $small --max-iters 1000000 --eval-interval 0 --out "$tmp/live" >/dev/null 2>&1 &
pid=$!; pids=$pid
for i in $(seq 1 100); do [ -s "$tmp/live/metrics.jsonl" ] && break; sleep 0.1; done
run "$HPT" train $small --max-iters 3 --overwrite --out "$tmp/live"
if [ $rc -ne 0 ] && grep -q "in use by another hpt (pid $pid)" "$tmp/err" && kill -0 $pid 2>/dev/null &&
   [ -s "$tmp/live/metrics.jsonl" ]; then pass "(g) --overwrite of a live run is refused"
else fail "(g) --overwrite of a live run: rc $rc"; fi
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null

finish
