#!/bin/sh
# cli_compare_jobs.sh — `hpt compare --jobs N` trains runs side by side and
# measures the same runs as one at a time (no timing is judged):
#   - --jobs 2 and --jobs 1 over a sweep with --schedules, --budgets and
#     the schedule-free, ema and hybrid arms, 2 seeds: the same run
#     directories, each run's final val and parameters (param_crc32) equal
#     bit for bit, the same tuned LRs and schedules, all runs counted
#   - side by side for real: with --jobs 2 some two runs' children were
#     alive at once (their train.log files open over overlapping spans,
#     read from each run's first and last metrics line's wall time)
#   - results.json records jobs 2 (jobs 1 without the flag), results.md says
#     "2 runs side by side"
#   - a warning when --jobs x --threads exceeds the cores
#   - Ctrl-C with 2 runs training: exit 1 with the message, every child
#     gone; the same command continues (resumes the stopped runs from their
#     checkpoints) and ends with the uninterrupted comparison's bits
#   - bad --jobs (0, 65, not a number): exit 2
test_name=cli_compare_jobs; . tests/lib.sh

words_text 4242 >"$tmp/data.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 40 --warmup-iters 5 --eval-iters 2 --threads 1"
ARGS="--extend-sweep 0 --lrs 1e-2,2e-2 --schedules d2z,wsd --arms baseline,hybrid,ema,schedule-free --budgets 0.5 --seeds 2"
run "$HPT" compare $CFG $ARGS --jobs 2 --out "$tmp/j2"
j2_rc=$rc; cp "$tmp/err" "$tmp/err2"
run "$HPT" compare $CFG $ARGS --out "$tmp/j1"
if [ $j2_rc -eq 0 ] && [ $rc -eq 0 ] && grep -q "compare: 23 runs" "$tmp/err2" && grep -q '^\[23/23\]' "$tmp/err2"; then
    pass "--jobs 2 and --jobs 1: exit 0, 23 runs planned and counted"
else fail "--jobs: status $j2_rc / $rc, $(grep -o 'compare: [0-9]* runs' "$tmp/err2"), last $(grep '^\[' "$tmp/err2" | tail -1)"; fi

python3 - "$tmp/j1" "$tmp/j2" >"$tmp/check" 2>&1 <<'EOF'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
errs = []
ra, rb = sorted(os.listdir(a + "/runs")), sorted(os.listdir(b + "/runs"))
if ra != rb or len(ra) != 23: errs.append("run directories differ: %r vs %r" % (ra, rb))
for n in ra:
    x = json.load(open("%s/runs/%s/summary.json" % (a, n)))
    y = json.load(open("%s/runs/%s/summary.json" % (b, n)))
    for k in ("final_val_loss", "param_crc32", "steps"):
        if x.get(k) != y.get(k): errs.append("%s: %s %r vs %r" % (n, k, x.get(k), y.get(k)))
x, y = json.load(open(a + "/results.json")), json.load(open(b + "/results.json"))
for k in ("tuned_lr", "baseline_schedule"):
    if x.get(k) != y.get(k): errs.append("%s %r vs %r" % (k, x.get(k), y.get(k)))
for arm in x["arms"]:
    if x["arms"][arm].get("schedule") != y["arms"][arm].get("schedule"): errs.append("%s schedule differs" % arm)
if x.get("jobs") != 1 or y.get("jobs") != 2: errs.append("jobs %r / %r, want 1 / 2" % (x.get("jobs"), y.get("jobs")))
print("\n".join(errs) if errs else "ok")
EOF
if [ "$(cat "$tmp/check")" = ok ]; then pass "the same runs, final vals and parameters bit for bit; tuned LRs and schedules equal; results.json jobs 1 / 2"
else fail "--jobs 2 against --jobs 1: $(head -5 "$tmp/check")"; fi

# side by side: the spans between each run's start (its train.log's birth,
# approximated by compare-args.txt, written just before the child starts)
# and its summary.json overlap for some pair
python3 - "$tmp/j2" >"$tmp/check" 2>&1 <<'EOF'
import os, sys
d = sys.argv[1] + "/runs"
spans = []
for n in os.listdir(d):
    t0 = os.stat("%s/%s/compare-args.txt" % (d, n)).st_mtime
    t1 = os.stat("%s/%s/summary.json" % (d, n)).st_mtime
    spans.append((t0, t1))
spans.sort()
print("ok" if any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)) else "no two runs overlapped")
EOF
if [ "$(cat "$tmp/check")" = ok ]; then pass "--jobs 2: runs trained side by side (overlapping spans)"
else fail "$(cat "$tmp/check")"; fi
if grep -q "2 runs side by side" "$tmp/j2/results.md" && ! grep -q "side by side" "$tmp/j1/results.md"; then
    pass "results.md: '2 runs side by side' with --jobs 2 only"
else fail "results.md does not say the runs trained side by side"; fi

ncpu=$(getconf _NPROCESSORS_ONLN)
run "$HPT" compare $CFG --threads 1 --lrs 1e-2 --arms baseline --seeds 1 --jobs $((ncpu + 1)) --out "$tmp/w"
if [ $rc -eq 0 ] && grep -q "warning: --jobs $((ncpu + 1)) x --threads 1 is more than the $ncpu cores" "$tmp/err"; then
    pass "--jobs x --threads over the cores: a warning, the comparison still runs"
else fail "oversubscription: status $rc, no warning"; fi

# Ctrl-C while two runs train: long enough runs, a checkpoint every 50 steps
LONG="--data $tmp/data.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --max-iters 3000 \
      --warmup-iters 5 --eval-iters 2 --threads 1 --lrs 1e-2 --arms baseline,hybrid --seeds 1"
"$HPT" compare $LONG --jobs 2 --out "$tmp/k" >"$tmp/out" 2>"$tmp/err" &
cpid=$!; pids="$pids $cpid"
i=0
while [ $i -lt 100 ] && [ "$(find "$tmp/k/runs" -name metrics.jsonl 2>/dev/null | wc -l)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -INT $cpid; wait $cpid; rc=$?
sleep 0.5
alive=$(pgrep -f "hpt train.*$tmp/k" | wc -l)
if [ $rc -eq 1 ] && grep -q "compare interrupted; run the same command again" "$tmp/err" && [ "$alive" -eq 0 ]; then
    pass "Ctrl-C with 2 runs training: exit 1, the message, no child left"
else fail "Ctrl-C: status $rc, $alive children alive"; fi
run "$HPT" compare $LONG --jobs 2 --out "$tmp/k"
resumed=$(grep -l "resum" "$tmp/k"/runs/*/train.log 2>/dev/null | wc -l)
run2_rc=$rc
run "$HPT" compare $LONG --out "$tmp/k1"
if [ $run2_rc -eq 0 ] && [ $rc -eq 0 ] && [ "$(crc_of "$tmp/k/runs/baseline-lr0.01-s1337")" = "$(crc_of "$tmp/k1/runs/baseline-lr0.01-s1337")" ] &&
   [ "$(crc_of "$tmp/k/runs/hybrid-lr0.01-s1337")" = "$(crc_of "$tmp/k1/runs/hybrid-lr0.01-s1337")" ]; then
    pass "the same command continues ($resumed run(s) resumed from a checkpoint) and ends with the uninterrupted bits"
else fail "continue after Ctrl-C: status $run2_rc / $rc, crc $(crc_of "$tmp/k/runs/hybrid-lr0.01-s1337") vs $(crc_of "$tmp/k1/runs/hybrid-lr0.01-s1337")"; fi

for bad in 0 65 two; do
    run "$HPT" compare $CFG --lrs 1e-2 --arms baseline --seeds 1 --jobs $bad --out "$tmp/bad"
    if [ $rc -eq 2 ] && grep -q -- "--jobs" "$tmp/err"; then pass "--jobs $bad: exit 2 naming the flag"
    else fail "--jobs $bad: status $rc"; fi
done
finish
