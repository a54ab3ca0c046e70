#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_ckpt_outer.sh — checkpoints of the outer Nesterov step's two users,
# written by hpt 4b2fe02 (before the step was one module, src/train/outer.c),
# resume in this build. Run by tests/run.sh from the repository root after
# `make`. The fixtures (tests/fixtures/ckpt_outer/, the step-20 checkpoint of
# a 40-step run on tests/fixtures/v1_data.txt, with its metrics.jsonl and
# phases.jsonl; the data path in their TCFG was rewritten to the relative
# tests/fixtures/v1_data.txt, as ckpt_v1 holds it, with TCFG's length, the
# file size and the CRC repaired: they were written with an absolute path
# that exists only on the machine that wrote them):
#   ls   local-step training in one process (--sync-interval 5, eta 1.5,
#        mu 0.6): the LSTP block (the outer momentum; the weights are the
#        anchor)
#   hyb  the hybrid's outer path (--outer-interval 5, --outer-check 3, eta 8,
#        mu 0.6), saved right after a jump (its check under way): HYBR's
#        predictor arena (anchor, then momentum), the snapshot
#   sf   the same with --outer-adapt agree under --optimizer schedule-free:
#        the gates, x's anchor
# Each resumes to the end: param_crc32 equal to the old binary's
# uninterrupted run (written below) where this build reproduces that run
# from scratch (the same numerics), else the run must still finish from
# step 20 (a build whose arithmetic differs cannot be compared bit for bit),
# and metrics.jsonl equal to this build's uninterrupted run's (the old
# phase names taken as the new ones).
test_name=cli_ckpt_outer; . tests/lib.sh

# same_lines A B: A's and B's metrics.jsonl equal but for the wall-clock
# fields and the outer path's phase names: the fixtures' lines up to step
# 20 were written when a jump was logged as `predict` and its check as
# `correct` (now `jump` and `check`)
same_lines() {
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'EOF2'
import json, sys
new = {"predict": "jump", "correct": "check"}
def load(p):
    out = []
    for l in open(p):
        d = {k: v for k, v in json.loads(l).items() if k not in ("time_s", "rss_bytes", "step_ms")}
        if "phase" in d: d["phase"] = new.get(d["phase"], d["phase"])
        out.append(d)
    return out
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
EOF2
}

B="--data tests/fixtures/v1_data.txt --n-layer 1 --n-head 2 --n-embd 8 --block-size 8 --batch-size 4 --max-iters 40 \
   --eval-interval 10 --eval-iters 2 --threads 1 --save-interval 20 --keep-last 5"
H="--mode hybrid --predictor outer --warmup-steps 10 --outer-interval 5 --outer-check 3 --outer-lr 8 --outer-momentum 0.6"
for case in "ls 79ade2b8 --sync-interval 5 --sync-outer-lr 1.5 --sync-outer-momentum 0.6" \
            "hyb 09b178be $H" \
            "sf 9be67d7f $H --outer-adapt agree --optimizer schedule-free --lr 3e-3"; do
    set -- $case
    name=$1 want=$2
    shift 2
    run "$HPT" train $B "$@" --out "$tmp/ref-$name"
    same_build=$([ "$(crc_of "$tmp/ref-$name")" = "$want" ] && echo 1 || echo 0)
    cp -r "tests/fixtures/ckpt_outer/$name" "$tmp/$name"
    run "$HPT" train --resume "$tmp/$name"
    got=$(crc_of "$tmp/$name")
    if [ $rc -eq 0 ] && [ $same_build = 1 ] && [ "$got" = "$want" ] && same_lines "$tmp/ref-$name" "$tmp/$name"; then
        pass "($name) the old checkpoint resumes to the old binary's parameters ($want), metrics equal"
    elif [ $rc -eq 0 ] && [ $same_build = 0 ] && [ -n "$got" ] && grep -q "step 20 of 40" "$tmp/err"; then
        pass "($name) the old checkpoint resumes from step 20 to the end (this build's numerics differ, crc not compared)"
    else fail "($name) old checkpoint: status $rc, crc '$got' (want $want; this build reproduces it: $same_build)"; fi
done

finish
