#!/bin/sh
# cli_outer_sf.sh — `--mode hybrid --optimizer schedule-free`: the outer step
# on schedule-free AdamW (docs/hybrid.md, "The outer step under
# schedule-free"). No timing judged. Run by tests/run.sh from the repository
# root after `make`. The text: the first 40 KB of data/fortunes.txt where it
# has been made (`make data/fortunes.txt`), else words_text.
#
#   (a) --outer-lr 1 --outer-momentum 0 ("no change"): param_crc32 equal to
#       plain schedule-free training's, with jumps applied and kept
#   (b) the defaults train: jumps applied, a finite val loss, a crc of its own
#   (c) --outer-lr 100: jumps fail their check and roll back; the crc32 of
#       the params (y) logged after each rollback equals the one logged just
#       before its jump, and the scale falls
#   (d) SIGKILL after a checkpoint, resumed; and resumed from the checkpoint
#       of the steps around the first jumps and the first failed check: crc,
#       metrics and phases.jsonl equal to the uninterrupted run's (z, x, v,
#       the rate sums, the anchor, u and the snapshot all in the checkpoint)
#   (e) --outer-adapt agree: its gates logged; SIGKILL and resume: the same
#   (f) refused, exit 2 naming the flag: the phased predictors (coast,
#       stale-adam, linear, shrink read AdamW's moments) and --outer-moments
#       reset with schedule-free
test_name=cli_outer_sf; . tests/lib.sh

if [ -f data/fortunes.txt ]; then head -c 40000 data/fortunes.txt >"$tmp/text.txt"; else words_text 11 >"$tmp/text.txt"; fi
BASE="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
      --threads 1 --max-iters 160 --eval-interval 40 --keep-last 1000 --optimizer schedule-free --lr 3e-3 \
      --warmup-iters 10"
OUT="--mode hybrid --warmup-steps 20 --outer-interval 10 --outer-check 4"
summ() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]+"/summary.json")); o=s.get("outer_jumps",{})
print(o.get("applied",-1), o.get("kept",-1), o.get("rolled_back",-1), o.get("scale",-1), s["steps"], s["final_val_loss"])' "$1" 2>/dev/null; }
same_run() {
    cmp -s "$1/phases.jsonl" "$2/phases.jsonl" || { echo "     phases.jsonl differs"; return 1; }
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'EOF'
import json, sys
wall = {"time_s", "rss_bytes", "step_ms"}
def load(p):
    return [{k: v for k, v in json.loads(l).items() if k not in wall} for l in open(p)]
sys.exit(load(sys.argv[1]) != load(sys.argv[2]))
EOF
}

# ---------------------------------------------------------------- (a)

run "$HPT" train $BASE --out "$tmp/base"; B=$(crc_of "$tmp/base")
run "$HPT" train $BASE $OUT --outer-lr 1 --outer-momentum 0 --out "$tmp/id"
set -- $(summ "$tmp/id")
if [ $rc -eq 0 ] && [ -n "$B" ] && [ "$(crc_of "$tmp/id")" = "$B" ] && [ "${1:-0}" -ge 10 ] && [ "$2" = "$1" ]; then
    pass "(a) eta 1, mu 0: crc $B equal to plain schedule-free's, $1 jumps applied and kept"
else fail "(a) eta 1, mu 0: status $rc, crc '$(crc_of "$tmp/id")' (schedule-free '$B'), summary '$*'"; fi

# ---------------------------------------------------------------- (b)

run "$HPT" train $BASE $OUT --out "$tmp/def"
set -- $(summ "$tmp/def")
if [ $rc -eq 0 ] && [ "${1:-0}" -ge 10 ] && [ "$(crc_of "$tmp/def")" != "$B" ] &&
   python3 -c "import math,sys; sys.exit(not math.isfinite(float(sys.argv[1])))" "$6" &&
   grep -q '"phase":"predict"' "$tmp/def/metrics.jsonl" &&
   python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["optimizer"] != "schedule-free")' "$tmp/def/summary.json"
then pass "(b) defaults (eta 1, mu 0.5): $1 jumps, $2 kept, $3 rolled back, final val $6"
else fail "(b) defaults: status $rc, summary '$*'"; fi

# ---------------------------------------------------------------- (c)

run "$HPT" train $BASE $OUT --outer-lr 100 --out "$tmp/big"
set -- $(summ "$tmp/big")
restored=$(python3 - "$tmp/big/phases.jsonl" <<'EOF'
import json, re, sys
before, ok, bad = None, 0, 0
for l in open(sys.argv[1]):
    r = json.loads(l)["reason"]
    m = re.search(r"params crc32 ([0-9a-f]{8}) before it", r)
    if m: before = m.group(1)
    m = re.search(r"params crc32 ([0-9a-f]{8}) restored", r)
    if m:
        if m.group(1) == before: ok += 1
        else: bad += 1
print(ok if bad == 0 else -bad)
EOF
)
if [ $rc -eq 0 ] && [ "${3:-0}" -ge 2 ] && [ "${restored:-0}" -eq "$3" ] &&
   python3 -c "import sys; sys.exit(not float(sys.argv[1]) <= 0.25)" "$4"; then
    pass "(c) eta 100: $3 of $1 jumps rolled back, each restoring the bytes of before its jump; scale $4"
else fail "(c) eta 100: status $rc, summary '$*', byte-exact restores '$restored'"; fi

# ---------------------------------------------------------------- (d)

CFG="$BASE $OUT --outer-lr 12 --outer-momentum 0.5"
run "$HPT" train $CFG --save-interval 1 --out "$tmp/a"
X=$(crc_of "$tmp/a")
set -- $(summ "$tmp/a")
if [ $rc -eq 0 ] && [ -n "$X" ] && [ "${2:-0}" -ge 1 ] && [ "${3:-0}" -ge 1 ]; then
    pass "(d) eta 12, a checkpoint every step: crc $X, $1 jumps, $2 kept, $3 rolled back"
else fail "(d) eta 12, a checkpoint every step: status $rc, crc '$X', summary '$*'"; fi
for k in 5 12; do
    d="$tmp/k$k"
    kill_after "$d" $k $((10 * k)) $CFG --save-interval 10
    run "$HPT" train --resume "$d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$d")" = "$X" ] && same_run "$tmp/a" "$d"; then
        pass "(d) SIGKILL after checkpoint $k ($how), resumed: crc $X, same metrics and phases"
    else fail "(d) SIGKILL after checkpoint $k ($how): status $rc, crc '$(crc_of "$d")' (want $X)"; fi
done
steps=$(python3 -c '
import json, sys
s = [json.loads(l)["step"] for l in open(sys.argv[1]) if json.loads(l).get("phase") == "predict"][:2]
r = [json.loads(l)["step"] for l in open(sys.argv[2]) if "failed its check" in json.loads(l)["reason"]][:1]
print(" ".join(str(x) for v in s for x in (v - 1, v, v + 2)), " ".join(str(x) for v in r for x in (v - 1, v)))' \
    "$tmp/a/metrics.jsonl" "$tmp/a/phases.jsonl")
[ -n "$steps" ] || fail "(d) no jump or failed check found in the run's logs"
for s in $steps; do
    d="$tmp/c$s"
    rm -rf "$d"; cp -r "$tmp/a" "$d"; cut_after "$d" "$s"
    run "$HPT" train --resume "$d"
    if [ $rc -eq 0 ] && [ "$(crc_of "$d")" = "$X" ] && same_run "$tmp/a" "$d"; then
        pass "(d) resumed at step $s (around a jump or a rollback): crc $X, same metrics and phases"
    else fail "(d) resumed at step $s: status $rc, crc '$(crc_of "$d")' (want $X)"; fi
done

# ---------------------------------------------------------------- (e)

V="--outer-adapt agree --outer-lr 3"
run "$HPT" train $BASE $OUT $V --out "$tmp/v"
rc1=$rc; Y=$(crc_of "$tmp/v")
set -- $(summ "$tmp/v")
kill_after "$tmp/vk" 6 60 $BASE $OUT $V --save-interval 10
run "$HPT" train --resume "$tmp/vk"
if [ $rc1 -eq 0 ] && [ $rc -eq 0 ] && [ "${1:-0}" -ge 5 ] && grep -q 'per-tensor agreement gates mean' "$tmp/v/phases.jsonl" &&
   [ -n "$Y" ] && [ "$Y" != "$B" ] && [ "$(crc_of "$tmp/vk")" = "$Y" ] && same_run "$tmp/v" "$tmp/vk"; then
    pass "(e) $V: $1 jumps, gates logged; SIGKILL after checkpoint 6, resumed: crc $Y, same metrics and phases"
else fail "(e) $V: status $rc1/$rc, summary '$*', crc '$(crc_of "$tmp/vk")' (want '$Y')"; fi

# ---------------------------------------------------------------- (f)

for bad in "--predictor coast" "--predictor stale-adam" "--predictor linear" "--predictor shrink" \
           "--outer-moments reset"; do
    flag=${bad%% *}
    run "$HPT" train $BASE $OUT $bad --out "$tmp/bad"
    if [ $rc -eq 2 ] && grep -q -- "$flag" "$tmp/err" && grep -q -- "schedule-free" "$tmp/err" &&
       [ ! -e "$tmp/bad/summary.json" ]; then pass "(f) $bad with schedule-free: exit 2, '$(head -c 100 "$tmp/err")'"
    else fail "(f) $bad with schedule-free: status $rc (want 2 naming $flag)"; fi
done

finish
