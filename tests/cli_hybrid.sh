#!/bin/sh
# tier: fast (make test; tests/run.sh)
# CLI invariants of --mode hybrid (issue: the hybrid predictive trainer):
#   - the phased controller (coast) with Predict disabled (threshold > 1), and
#     the outer path (the default) with no jump due (--outer-interval beyond
#     the run), are bit-identical to baseline; the outer path does jump when
#     one is due;
#   - Predict phases run no backward pass: the model's own count of backward
#     calls equals the real steps, and predict lines say backward 0;
#   - every transition is logged with a reason;
#   - resident memory after 1000 hybrid steps is within 1 MiB of that after 100;
#   - bad hybrid flags exit 2 naming the flag.
test_name=cli_hybrid; . tests/lib.sh

python3 -c "
import random
random.seed(5)
words = 'the of and to in a is that for it as was with be by on not he this are or his from at which'.split()
print(' '.join(random.choice(words) for _ in range(8000)))" > "$tmp/text.txt"
small="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --threads 1"

$HPT train $small --max-iters 60 --eval-interval 30 --out "$tmp/base" >/dev/null 2>&1 || fail "baseline run"
# the threshold gates the phased controller only (the outer predictor has no
# confidence gate without --outer-gate dynamics): pin the predictor
$HPT train $small --max-iters 60 --eval-interval 30 --mode hybrid --predictor coast --confidence-threshold 2 \
    --warmup-steps 5 --out "$tmp/off" >/dev/null 2>&1 || fail "hybrid run with predict disabled"
[ "$(crc_of "$tmp/base")" = "$(crc_of "$tmp/off")" ] || fail "predict disabled: crc $(crc_of "$tmp/base") != $(crc_of "$tmp/off")"
# the outer path's own: no jump due in the run (interval > max-iters) is the baseline
$HPT train $small --max-iters 60 --eval-interval 30 --mode hybrid --outer-interval 1000 --warmup-steps 5 \
    --out "$tmp/outer-off" >/dev/null 2>&1 || fail "outer run with no jump due"
[ "$(crc_of "$tmp/base")" = "$(crc_of "$tmp/outer-off")" ] ||
    fail "outer, no jump due: crc $(crc_of "$tmp/base") != $(crc_of "$tmp/outer-off")"
# ... and with jumps due it departs from it (else the check above proves nothing)
$HPT train $small --max-iters 60 --eval-interval 30 --mode hybrid --outer-interval 10 --outer-check 4 \
    --warmup-steps 5 --out "$tmp/outer-on" >/dev/null 2>&1 || fail "outer run with jumps due"
python3 - "$tmp/outer-off/summary.json" "$tmp/outer-on/summary.json" 2>"$tmp/py.err" <<'PY' || fail "outer jumps: $(cat "$tmp/py.err")"
import json, sys
off, on = (json.load(open(p))["outer_jumps"] for p in sys.argv[1:3])
assert off["applied"] == 0, f"no jump due, yet {off['applied']} applied"
assert on["applied"] >= 1, "jumps due, none applied"
PY
[ "$(crc_of "$tmp/base")" != "$(crc_of "$tmp/outer-on")" ] || fail "outer jumps left the parameters at the baseline's"

# the accounting of Predict phases, for a control and for hpt's shrink
# predictor (its ring fills after 6 x 20 real steps)
for pred in stale-adam shrink; do
$HPT train $small --max-iters 200 --eval-interval 100 --mode hybrid --warmup-steps 20 --full-steps 5 \
    --min-predict-steps 2 --max-predict-steps 6 --correct-steps 2 --confidence-threshold 0 \
    --predictor $pred --overwrite --out "$tmp/hyb" >"$tmp/hyb.log" 2>&1 || fail "hybrid run ($pred): $(tail -2 "$tmp/hyb.log")"
python3 - "$tmp/hyb" <<'PY' || fail "hybrid accounting ($pred)"
import json, sys
d = sys.argv[1]
lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
s = json.load(open(f"{d}/summary.json"))
real = [l for l in lines if l["backward"] == 1]
pred = [l for l in lines if l["phase"] == "predict"]
assert pred, "no predict phase ran"
assert all(l["backward"] == 0 and l["probe"] > 0 and l["predicted_steps"] > 0 for l in pred), pred[:2]
assert s["model_backward_calls"] == s["backward_passes"] == len(real), (s["model_backward_calls"], s["backward_passes"], len(real))
assert s["optimizer_updates"] == len(real)
assert s["steps"] == 200 and s["steps"] == len(real) + s["predict_phases"]["steps_kept"], s
assert all(k in lines[-1] for k in ("phase", "backward", "probe", "predicted_loss", "confidence", "residual", "step_ms"))
for k in ("phase_steps", "backward_passes", "phase_time_s", "predictor_overhead_s", "controller_overhead_s", "predict_phases", "memory_bytes_hybrid", "rolled_back"):
    assert k in s, k
steps = [l["step"] for l in lines]
assert steps == sorted(steps), "step counter went backwards"
trans = [json.loads(l) for l in open(f"{d}/phases.jsonl")]
assert trans and all(t["reason"] for t in trans), trans[:3]
assert any(t["phase"] == "predict" for t in trans)
# the training clock holds all of the hybrid's work: it is the sum of the
# time spent in each phase, not just the trainer's own steps
# the loss plot shades the Predict phases
import xml.dom.minidom
svg = xml.dom.minidom.parse(f"{d}/loss.svg")
assert "legend: hybrid Predict phases" in svg.getElementsByTagName("desc")[0].firstChild.data.splitlines(), "no Predict band in loss.svg"
pt = sum(s["phase_time_s"].values())
assert abs(s["train_s"] - pt) <= 0.01 * s["train_s"] + 1e-3, (s["train_s"], s["phase_time_s"])
# the controller's own time on real steps is part of that clock, not all of it
assert 0 < s["controller_overhead_s"] < s["train_s"] - s["predictor_overhead_s"], s["controller_overhead_s"]
PY
done

grep -q "^hybrid .*hybrid state .* MiB (snapshot" "$tmp/hyb.log" || fail "no hybrid config/memory line at start"

# memory: no growth over a long hybrid run (the original leaked 10 GB).
# Not under sanitizers: ASan's quarantine grows resident memory by design.
if [ -n "${SANITIZED:-}" ]; then
    echo "skip: resident-memory check under SANITIZE=$SANITIZED"
else
$HPT train $small --max-iters 1000 --eval-interval 0 --mode hybrid --warmup-steps 20 --full-steps 5 \
    --min-predict-steps 2 --max-predict-steps 6 --correct-steps 2 --confidence-threshold 0 \
    --predictor linear --out "$tmp/mem" >/dev/null 2>&1 || fail "1000-step hybrid run"
python3 - "$tmp/mem" <<'PY' || fail "resident memory grew"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
at = lambda n: next(l["rss_bytes"] for l in lines if l["step"] >= n)
grow = at(1000) - at(100)
print(f"rss after 100 steps {at(100)} B, after 1000 {at(1000)} B, growth {grow} B")
assert grow <= 1 << 20, grow
PY
fi

out=$($HPT train $small --mode hybrid --predictor oracle 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--predictor" || fail "bad --predictor: rc $rc: $out"
out=$($HPT train $small --predictor coast 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--mode hybrid" || fail "hybrid flag in baseline mode: rc $rc: $out"
out=$($HPT train $small --mode hybrid --full-steps 0 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--full-steps" || fail "bad --full-steps: rc $rc: $out"

finish
