#!/bin/sh
# cli_mpi_local.sh — local-step mode (--sync-interval H, DiLoCo's outer
# Nesterov step over the ranks' mean displacement). Run by tests/run.sh from
# the repository root after `make`. The one-process checks always run; the
# mpirun ones are skipped (passing, with the reason) where mpirun is not
# installed; CI installs OpenMPI (scripts/install-deps.sh), so they run there.
#
#   (a) one process, --sync-interval 10 at outer lr 1 and momentum 0 (the
#       outer step with one replica, plain averaging): the baseline's
#       param_crc32 bit for bit
#   (b) bad values and combinations exit 2 with the reason
#   (c) 2 ranks, H 10, 205 steps: summary.json says 21 all-reduces (one per
#       10 steps and one at the last step), each of the parameters plus one
#       flag; the run learns (final val well below the first train loss);
#       the run ends with status 0, so the ranks' end-of-run drift check
#       passed
#   (d) checkpoints fall on syncs (--save-interval 25 -> steps 30, 50, 80);
#       one rank SIGKILLed after the 3rd: `mpirun -np 2 hpt train --resume`
#       reaches (c)'s param_crc32 and metrics.jsonl (every rank's own AdamW
#       moments came back from rank 0's file)
#   (e) a drifting anchor on rank 1 (a test hook) stops the job
#   (f) SIGTERM to mpirun: the ranks stop at the next sync (H 7) and save
#       there; the resume reaches the uninterrupted run's param_crc32
test_name=cli_mpi_local; . tests/lib.sh
[ -n "${SANITIZED:-}" ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 --eval-iters 2 --threads 1"

# (a) one replica at eta 1, mu 0: the outer step leaves the weights alone
run "$HPT" train $CFG --max-iters 120 --eval-interval 40 --out "$tmp/base"
run "$HPT" train $CFG --max-iters 120 --eval-interval 40 --sync-interval 10 --sync-outer-lr 1 --sync-outer-momentum 0 \
    --out "$tmp/one"
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/base")" ] && [ "$(crc_of "$tmp/one")" = "$(crc_of "$tmp/base")" ] &&
   [ "$(summary_field "$tmp/one" sync_interval)" = 10 ]; then
    pass "one process, --sync-interval 10 at lr 1 momentum 0 = baseline (crc $(crc_of "$tmp/one"))"
else fail "one process local-step: status $rc, crc '$(crc_of "$tmp/one")' (want '$(crc_of "$tmp/base")')"; fi

# (b) bad values exit 2
for bad in "--sync-interval -1" "--sync-outer-lr 0" "--sync-outer-lr 101" "--sync-outer-momentum 1" \
           "--sync-outer-momentum -0.1" "--sync-interval x" "--sync-interval 5 --mode hybrid" \
           "--sync-interval 5 --ema 0.99" "--sync-interval 5 --optimizer schedule-free"; do
    run "$HPT" train $CFG --max-iters 10 $bad --out "$tmp/bad"
    if [ $rc -eq 2 ] && [ -s "$tmp/err" ]; then pass "$bad: exit 2 ($(head -n 1 "$tmp/err" | cut -c 1-80))"
    else fail "$bad: status $rc (want 2)"; fi
done

if ! command -v mpirun >/dev/null 2>&1; then
    echo "skip cli_mpi_local (c)-(e): mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
    finish; exit $?
fi
MPI="mpirun --oversubscribe --allow-run-as-root -np 2"
LOCAL="$CFG --max-iters 205 --eval-interval 50 --sync-interval 10"

# (c) one all-reduce per 10 steps, learning, ranks equal at the end
run timeout 60 $MPI "$HPT" train $LOCAL --out "$tmp/two"
n=$(summary_field "$tmp/two" params)
first=$(head -n 1 "$tmp/two/metrics.jsonl" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["train_loss"])' 2>/dev/null)
if [ $rc -eq 0 ] && [ "$(summary_field "$tmp/two" allreduce_calls)" = 21 ] && [ -n "$n" ] &&
   [ "$(summary_field "$tmp/two" allreduce_bytes)" = $((21 * (n + 1) * 4)) ]; then
    pass "2 ranks, H 10, 205 steps: 21 all-reduces of $n parameters + 1 flag ($(summary_field "$tmp/two" allreduce_bytes) bytes)"
else fail "2 ranks local-step: status $rc, allreduce_calls '$(summary_field "$tmp/two" allreduce_calls)' (want 21), bytes '$(summary_field "$tmp/two" allreduce_bytes)'"; fi
if [ -n "$first" ] && python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < 0.6 * float(sys.argv[2]))' \
       "$(summary_field "$tmp/two" final_val_loss)" "$first"; then
    pass "learns: final val $(summary_field "$tmp/two" final_val_loss) from a first train loss of $first; the end-of-run drift check passed"
else fail "local-step did not learn: final val '$(summary_field "$tmp/two" final_val_loss)', first train loss '$first'"; fi

# (d) checkpoints at syncs; SIGKILL one rank; resume bit-exact
kill_rank_after "$tmp/k" 3 $MPI "$HPT" train $LOCAL --save-interval 25 --keep-last 10 --out "$tmp/k"
wait $mpid 2>/dev/null
names=$(ls "$tmp/k/checkpoints" | head -n 3 | tr '\n' ' ')
if [ "$names" = "ckpt-00000030.bin ckpt-00000050.bin ckpt-00000080.bin " ]; then
    pass "checkpoints at the syncs at or after each --save-interval 25: $names"
else fail "checkpoints: '$names' (want steps 30, 50, 80)"; fi
[ "$how" = "finished first: replayed" ] && cut_after "$tmp/k" 80
run timeout 60 $MPI "$HPT" train --resume "$tmp/k"
if [ $rc -eq 0 ] && [ -n "$(crc_of "$tmp/two")" ] && [ "$(crc_of "$tmp/k")" = "$(crc_of "$tmp/two")" ] &&
   same_metrics "$tmp/two" "$tmp/k"; then
    pass "SIGKILL ($how), mpirun -np 2 --resume: the uninterrupted crc $(crc_of "$tmp/k") and metrics"
else fail "local-step resume: status $rc, crc '$(crc_of "$tmp/k")' (want '$(crc_of "$tmp/two")')"; fi

# (e) rank 1's anchor flips a bit after step 1: the sync at step 10 gives it
# other weights, and the check at the step-20 evaluation stops the job
HPT_TEST_DRIFT_RANK=1 run timeout 60 $MPI -x HPT_TEST_DRIFT_RANK "$HPT" train $CFG --max-iters 40 --eval-interval 20 \
    --sync-interval 10 --out "$tmp/drift"
if [ $rc -ne 0 ] && grep -q "parameters drifted apart at step 20" "$tmp/err" && [ ! -e "$tmp/drift/summary.json" ]; then
    pass "a drifting anchor stops the job (exit $rc) at the step-20 check"
else fail "drift: status $rc (want non-zero and 'drifted apart')"; fi

# (f) SIGTERM to mpirun mid-run: the stop request rides the next sync's
# all-reduce; the checkpoint is at that sync, and the resume is exact
SIG="$CFG --max-iters 3000 --eval-interval 1000 --sync-interval 7"
$MPI "$HPT" train $SIG --out "$tmp/sig" >"$tmp/sig.log" 2>&1 &
mpid=$!; pids="$pids $mpid"
i=0
while [ "$(cat "$tmp/sig/metrics.jsonl" 2>/dev/null | wc -l)" -lt 50 ] && kill -0 $mpid 2>/dev/null && [ $i -lt 3000 ]; do
    sleep 0.01; i=$((i + 1)); done
kill -TERM $mpid 2>/dev/null
wait $mpid 2>/dev/null
saved=$(ls "$tmp/sig/checkpoints" 2>/dev/null | head -n 1 | sed 's/ckpt-0*\([0-9]*\)\.bin/\1/')
run timeout 120 $MPI "$HPT" train $SIG --out "$tmp/sigfull"
full=$(crc_of "$tmp/sigfull")
run timeout 120 $MPI "$HPT" train --resume "$tmp/sig"
if [ -n "$saved" ] && [ $((saved % 7)) -eq 0 ] && [ "$saved" -lt 3000 ] && grep -q "interrupted after step $saved" "$tmp/sig.log" &&
   [ $rc -eq 0 ] && [ -n "$full" ] && [ "$(crc_of "$tmp/sig")" = "$full" ]; then
    pass "SIGTERM to mpirun: stopped and saved at the sync at step $saved; the resume reaches crc $full"
else fail "SIGTERM in local-step mode: saved at '$saved', resume status $rc, crc '$(crc_of "$tmp/sig")' (want '$full')"; fi

finish
