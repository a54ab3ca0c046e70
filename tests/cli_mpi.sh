#!/bin/sh
# cli_mpi.sh — data-parallel training under mpirun (OpenMPI). Run by
# tests/run.sh from the repository root after `make`. Skipped (passing, with
# the reason) where mpirun is not installed; CI installs OpenMPI
# (scripts/install-deps.sh), so it runs there.
#
#   (a) `mpirun -np 2 hpt train --grad-accum 1` equals `hpt train
#       --grad-accum 2` bit for bit: param_crc32 and every metrics.jsonl
#       field but the clocks; summary.json says ranks 2 and one all-reduce
#       per step; the run directory holds one run's files (rank 0 alone
#       wrote them: one metrics line per step)
#   (b) the same in hybrid mode, with forced Predict phases (fewer
#       all-reduces than steps), phases.jsonl equal too
#   (c) 2 ranks x --grad-accum 2 against one process with --grad-accum 4:
#       the same sums in another order, so equal within float rounding
#   (d) one rank SIGKILLed after the 3rd checkpoint: the job ends (no hang),
#       and `mpirun -np 2 hpt train --resume DIR` reaches (a)'s param_crc32
#   (e) resuming that run in one process, or on 3 ranks: refused (exit 2)
#       with the reason
#   (f) a rank whose parameters drift (a test hook flips one bit) stops the
#       job with a message naming the drift
#   (g) --cost-by-time (clock-driven hybrid choices) refused under mpirun
test_name=cli_mpi; . tests/lib.sh

if ! command -v mpirun >/dev/null 2>&1; then
    echo "skip cli_mpi: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
    finish; exit $?
fi
# two ranks on however many cores there are; root in CI containers
MPI="mpirun --oversubscribe --allow-run-as-root -np 2"
# OpenMPI's own allocations are not ours to chase under LeakSanitizer
[ -n "${SANITIZED:-}" ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 --eval-iters 2 --threads 1"
BASE="$CFG --max-iters 200 --eval-interval 50"
HYB="--mode hybrid --warmup-steps 20 --full-steps 5 --min-predict-steps 10 --max-predict-steps 30 --correct-steps 2 \
     --confidence-threshold 0 --predict-waste-budget 1 --backoff-after 1000 --predictor shrink"

# files DIR: the run directory's names, one line
files() { ls -A "$1" | tr '\n' ' '; }

# (a) baseline
run "$HPT" train $BASE --grad-accum 2 --out "$tmp/one"
run timeout 60 $MPI "$HPT" train $BASE --grad-accum 1 --out "$tmp/two"
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/one")" ] && [ "$(crc_of "$tmp/one")" = "$(crc_of "$tmp/two")" ]; then
    pass "2 ranks x accum 1 = 1 process x accum 2: param_crc32 $(crc_of "$tmp/two")"
else fail "2 ranks x accum 1: status $rc, crc '$(crc_of "$tmp/two")' (want '$(crc_of "$tmp/one")')"; fi
if same_metrics "$tmp/one" "$tmp/two"; then pass "metrics.jsonl equal but the clocks"
else fail "metrics.jsonl differs from the single process's"; fi
if [ "$(summary_field "$tmp/two" ranks)" = 2 ] && [ "$(summary_field "$tmp/two" allreduce_calls)" = 200 ] &&
   [ "$(summary_field "$tmp/two" allreduce_bytes)" -gt 0 ] && [ -n "$(summary_field "$tmp/two" comm_s)" ]; then
    pass "summary.json: ranks 2, allreduce_calls 200 (one per step), bytes and comm_s"
else fail "summary.json: ranks '$(summary_field "$tmp/two" ranks)', allreduce_calls '$(summary_field "$tmp/two" allreduce_calls)'"; fi
if [ "$(files "$tmp/two")" = "$(files "$tmp/one")" ] && [ "$(wc -l <"$tmp/two/metrics.jsonl")" -eq 200 ] &&
   [ -z "$(summary_field "$tmp/one" ranks)" ]; then
    pass "one writer: the single run's files ($(files "$tmp/two")), 200 metrics lines; no ranks member alone"
else fail "run directory: '$(files "$tmp/two")' vs '$(files "$tmp/one")', $(wc -l <"$tmp/two/metrics.jsonl") lines"; fi

# (b) hybrid
run "$HPT" train $BASE $HYB --grad-accum 2 --out "$tmp/h1"
run timeout 60 $MPI "$HPT" train $BASE $HYB --grad-accum 1 --out "$tmp/h2"
calls=$(summary_field "$tmp/h2" allreduce_calls)
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/h1")" ] && [ "$(crc_of "$tmp/h1")" = "$(crc_of "$tmp/h2")" ] &&
   cmp -s "$tmp/h1/phases.jsonl" "$tmp/h2/phases.jsonl" && [ "$calls" -lt 200 ] &&
   [ "$calls" = "$(summary_field "$tmp/h2" optimizer_updates)" ]; then
    pass "hybrid: 2 ranks = 1 process x accum 2 (crc $(crc_of "$tmp/h2"), phases.jsonl equal, $calls all-reduces for 200 steps)"
else fail "hybrid: status $rc, crc '$(crc_of "$tmp/h2")' vs '$(crc_of "$tmp/h1")', all-reduces '$calls'"; fi

# (c) accum 2 on each of 2 ranks: the same four gradients, summed as
# (g0+g1)+(g2+g3) instead of ((g0+g1)+g2)+g3
run "$HPT" train $CFG --max-iters 60 --eval-interval 60 --grad-accum 4 --out "$tmp/a4"
run timeout 60 $MPI "$HPT" train $CFG --max-iters 60 --eval-interval 60 --grad-accum 2 --out "$tmp/a22"
if [ $rc -eq 0 ] && python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-3)' \
       "$(summary_field "$tmp/a4" final_val_loss)" "$(summary_field "$tmp/a22" final_val_loss)"; then
    pass "2 ranks x accum 2 ~ 1 process x accum 4: val $(summary_field "$tmp/a22" final_val_loss) vs $(summary_field "$tmp/a4" final_val_loss)"
else fail "2 ranks x accum 2: status $rc, val '$(summary_field "$tmp/a22" final_val_loss)' vs '$(summary_field "$tmp/a4" final_val_loss)'"; fi

# (d) SIGKILL one rank after the 3rd checkpoint, resume on 2 ranks
kill_rank_after "$tmp/k" 3 $MPI "$HPT" train $BASE --grad-accum 1 --save-interval 20 --keep-last 10 --out "$tmp/k"
if kill -0 $mpid 2>/dev/null; then fail "mpirun still running 30 s after a rank was killed"; kill -9 $mpid 2>/dev/null
else pass "one rank SIGKILLed: the job ended ($how)"; fi
wait $mpid 2>/dev/null
[ "$how" = "finished first: replayed" ] && cut_after "$tmp/k" 60
run timeout 60 $MPI "$HPT" train --resume "$tmp/k"
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/k")" = "$(crc_of "$tmp/one")" ] && same_metrics "$tmp/one" "$tmp/k"; then
    pass "mpirun -np 2 --resume: the uninterrupted run's crc $(crc_of "$tmp/k") and metrics"
else fail "resume on 2 ranks: status $rc, crc '$(crc_of "$tmp/k")' (want '$(crc_of "$tmp/one")')"; fi

# (e) another rank count: refused with the reason, nothing changed
cut_after "$tmp/k" 60
before=$(ls "$tmp/k/checkpoints" | tr '\n' ' ')
run "$HPT" train --resume "$tmp/k"
if [ $rc -eq 2 ] && grep -q "trained on 2 ranks" "$tmp/err" && grep -q "mpirun -np 2" "$tmp/err"; then
    pass "resume in one process: refused (exit 2) naming mpirun -np 2"
else fail "resume in one process: status $rc (want 2 and the reason)"; fi
run timeout 60 mpirun --oversubscribe --allow-run-as-root -np 3 "$HPT" train --resume "$tmp/k"
if [ $rc -ne 0 ] && grep -q "trained on 2 ranks, this resume runs on 3" "$tmp/err" &&
   [ "$(ls "$tmp/k/checkpoints" | tr '\n' ' ')" = "$before" ]; then
    pass "resume on 3 ranks: refused (exit $rc) with the reason, checkpoints untouched"
else fail "resume on 3 ranks: status $rc (want non-zero and the reason)"; fi

# (f) drift: rank 1 flips a parameter bit after step 1; the check at the
# first evaluation stops the job
HPT_TEST_DRIFT_RANK=1 run timeout 60 $MPI -x HPT_TEST_DRIFT_RANK "$HPT" train $CFG --max-iters 40 --eval-interval 20 \
    --out "$tmp/drift"
if [ $rc -ne 0 ] && grep -q "parameters drifted apart at step 20" "$tmp/err" && [ ! -e "$tmp/drift/summary.json" ]; then
    pass "a drifting rank stops the job (exit $rc) at the step-20 check"
else fail "drift: status $rc (want non-zero and 'drifted apart')"; fi

# (g) clock-driven hybrid choices would differ between ranks
run timeout 60 $MPI "$HPT" train $CFG --max-iters 20 $HYB --cost-by-time --out "$tmp/cbt"
if [ $rc -eq 2 ] && grep -q -- "--cost-by-time cannot be used under mpirun" "$tmp/err" && [ ! -e "$tmp/cbt" ]; then
    pass "--cost-by-time under mpirun: refused (exit 2)"
else fail "--cost-by-time under mpirun: status $rc (want 2)"; fi

finish
