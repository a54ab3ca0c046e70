# lib.sh — what the CLI tests share. Sourced from the repository root after
# setting `test_name`:
#
#     test_name=cli_memory; . tests/lib.sh
#
# Gives: $HPT (./hpt unless set), a fresh $tmp removed on exit (after
# SIGKILLing every pid listed in $pids, so no trainer outlives its test),
# pass/fail counting, run (status in $rc, output in $tmp/out and $tmp/err),
# crc_of DIR, summary_field DIR KEY, same_metrics A B, words_text SEED
# (reproducible English-ish text), nan_model SRC DST (a model.bin whose
# parameters are NaN), set_hybr_version CKPT V, cuda_unusable (why --device
# cuda could not run), and finish, the closing line
# and exit status. Exits at once if ./hpt is not built.
set -u
HPT=${HPT:-./hpt}
tmp=$(mktemp -d "/tmp/hpt_${test_name}.XXXXXX") || exit 1
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
failures=0

pass() { echo "ok   $1"; }
# fail MESSAGE: counted; the last lines of the last run's stderr shown with it
fail() {
    echo "FAIL $1"
    [ -s "$tmp/err" ] && sed 's/^/     stderr: /' "$tmp/err" | tail -n 5
    failures=$((failures + 1))
}
# run CMD...: stdout to $tmp/out, stderr to $tmp/err, status to $rc
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }

# crc_of DIR: the run's param_crc32 from its summary.json ("" if none)
crc_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["param_crc32"])' "$1/summary.json" 2>/dev/null; }

# summary_field DIR KEY: a member of DIR/summary.json ("" if missing)
summary_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1/summary.json" "$2" 2>/dev/null; }

# curve_ok DIR COND: prints DIR's val losses and lr range and exits 0 when the
# Python expression COND holds over lines (metrics.jsonl, parsed), vals (its
# val losses), lrs (its lr per step) and s (summary.json); math is imported.
curve_ok() {
    python3 - "$1" "$2" <<'EOF'
import json, math, sys
d, cond = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
vals = [l["val_loss"] for l in lines if "val_loss" in l]
s = json.load(open(d + "/summary.json"))
lrs = [l["lr"] for l in lines]
print("     val losses %s, lr %g .. %g (peak %g)" % (" ".join("%.3f" % v for v in vals), lrs[0], lrs[-1], max(lrs)))
sys.exit(0 if eval(cond) else 1)
EOF
}

# val_losses DIR: DIR's val losses from metrics.jsonl, one line
val_losses() { python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["val_loss"]) for l in open(sys.argv[1]) if "val_loss" in l))' "$1/metrics.jsonl"; }

# same_metrics A B: A's and B's metrics.jsonl equal line for line but for the
# wall-clock fields (time_s, rss_bytes, step_ms)
same_metrics() {
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'EOF'
import json, sys
def load(p):
    return [{k: v for k, v in json.loads(l).items() if k not in ("time_s", "rss_bytes", "step_ms")}
            for l in open(p)]
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
EOF
}

# words_text SEED: ~20 KB of sentences of common words drawn by an LCG, the
# same on every machine for a seed
words_text() {
    awk -v s="$1" 'BEGIN {
        n = split("the of and a to in is you that it he was for on are as with his they at be " \
                  "this have from or one had by word but not what all were we when your can said", w, " ")
        bytes = 0; line = ""
        while (bytes < 20000) {
            s = (s * 69069 + 1) % 4294967296
            word = w[1 + int(s / 65536) % n]
            if (length(line) + length(word) > 70) { print line "."; bytes += length(line) + 2; line = word }
            else line = line (line == "" ? "" : " ") word
        }
        print line
    }'
}

# cut_after DIR S: delete the checkpoints past step S (what a kill at S leaves)
cut_after() {
    for _f in "$1"/checkpoints/ckpt-*.bin; do
        _s=$(basename "$_f" .bin); _s=${_s#ckpt-}
        [ "$(expr "$_s" + 0)" -gt "$2" ] && rm -f "$_f"
    done
}
# nckpt DIR: how many checkpoints DIR holds
nckpt() { ls "$1/checkpoints" 2>/dev/null | grep -c '^ckpt-.*\.bin$'; }

# kill_after DIR K S ARGS...: `hpt train ARGS --out DIR` in the background,
# SIGKILLed once DIR holds K checkpoints; a run that finishes first is cut
# back to step S instead (the same state a kill there leaves). Says which in $how.
kill_after() {
    _d=$1; _k=$2; _s=$3; shift 3
    "$HPT" train "$@" --out "$_d" >/dev/null 2>&1 &
    _pid=$!; pids="$pids $_pid"
    _i=0
    while [ "$(nckpt "$_d")" -lt "$_k" ] && kill -0 $_pid 2>/dev/null && [ $_i -lt 6000 ]; do sleep 0.01; _i=$((_i + 1)); done
    kill -9 $_pid 2>/dev/null && how="killed at $(nckpt "$_d") checkpoints" || how="finished first: replayed"
    wait $_pid 2>/dev/null
    [ "$how" = "finished first: replayed" ] && cut_after "$_d" "$_s"
}

# kill_rank_after DIR K CMD...: run CMD (an mpirun job writing to DIR, its
# output in DIR.log) in the background, SIGKILL one of its ranks once DIR
# holds K checkpoints, and wait up to 30 s for the job to end. Sets mpid
# (still running if the job hung) and how (what happened, for messages).
kill_rank_after() {
    _d=$1; _k=$2; shift 2
    "$@" >"$_d.log" 2>&1 &
    mpid=$!; pids="$pids $mpid"
    _i=0
    while [ "$(nckpt "$_d")" -lt "$_k" ] && kill -0 $mpid 2>/dev/null && [ $_i -lt 3000 ]; do sleep 0.01; _i=$((_i + 1)); done
    _rank=$(ps -o pid= --ppid $mpid 2>/dev/null | tail -n 1 | tr -d ' ')
    how="finished first: replayed"
    [ -n "$_rank" ] && kill -9 "$_rank" 2>/dev/null && how="rank pid $_rank killed at $(nckpt "$_d") checkpoints"
    _i=0
    while kill -0 $mpid 2>/dev/null && [ $_i -lt 3000 ]; do sleep 0.01; _i=$((_i + 1)); done
}

# finish: the closing line; the test's exit status
finish() {
    echo "$test_name: $failures failed"
    [ "$failures" -eq 0 ]
}

if [ ! -x "$HPT" ]; then echo "FAIL $HPT not built (run make)"; exit 1; fi

# ---------------------------------------------------------------- the outer path (cli_outer*.sh)

# outer_summ DIR: "applied kept rolled_back scale steps final_val" of a hybrid run
outer_summ() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]+"/summary.json")); o=s.get("outer_jumps",{})
print(o.get("applied",-1), o.get("kept",-1), o.get("rolled_back",-1), o.get("scale",-1), s["steps"], s["final_val_loss"])' "$1" 2>/dev/null; }

# same_run A B: metrics.jsonl equal but for the wall-clock fields, phases.jsonl byte for byte
same_run() {
    cmp -s "$1/phases.jsonl" "$2/phases.jsonl" || { echo "     phases.jsonl differs"; return 1; }
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PYEOF'
import json, sys
wall = {"time_s", "rss_bytes", "step_ms"}
def load(p):
    return [{k: v for k, v in json.loads(l).items() if k not in wall} for l in open(p)]
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            print("     metrics line %d differs: %s / %s" % (i + 1, x, y))
            break
    else:
        print("     metrics: %d lines against %d" % (len(a), len(b)))
    sys.exit(1)
PYEOF
}

# outer_restores DIR: the rollbacks in DIR/phases.jsonl whose restored
# params crc32 equals the one logged before their jump (-N: N did not)
outer_restores() {
    python3 - "$1/phases.jsonl" <<'PYEOF'
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
PYEOF
}

# outer_resumes RUN X ARGS...: RUN is `hpt train ARGS --save-interval 1`
# uninterrupted, with crc X. Killed after checkpoints 5 and 12 (of
# --save-interval 10), and resumed from RUN's checkpoints of the steps
# around its first two jumps and its first failed check: each resumed run
# must end with crc X and RUN's metrics and phases.
outer_resumes() {
    _run=$1; _x=$2; shift 2
    for _n in 5 12; do
        kill_after "$tmp/k$_n" $_n $((10 * _n)) "$@" --save-interval 10
        run "$HPT" train --resume "$tmp/k$_n"
        if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/k$_n")" = "$_x" ] && same_run "$_run" "$tmp/k$_n"; then
            pass "(d) SIGKILL after checkpoint $_n ($how), resumed: crc $_x, same metrics and phases"
        else fail "(d) SIGKILL after checkpoint $_n ($how): status $rc, crc '$(crc_of "$tmp/k$_n")' (want $_x)"; fi
    done
    _steps=$(python3 -c '
import json, sys
s = [json.loads(l)["step"] for l in open(sys.argv[1]) if json.loads(l).get("phase") == "jump"][:2]
r = [json.loads(l)["step"] for l in open(sys.argv[2]) if "failed its check" in json.loads(l)["reason"]][:1]
print(" ".join(str(x) for v in s for x in (v - 1, v, v + 2)), " ".join(str(x) for v in r for x in (v - 1, v)))' \
        "$_run/metrics.jsonl" "$_run/phases.jsonl")
    [ -n "$_steps" ] || fail "(d) no jump or failed check in $_run's logs"
    for _at in $_steps; do
        rm -rf "$tmp/c$_at"; cp -r "$_run" "$tmp/c$_at"; cut_after "$tmp/c$_at" "$_at"
        run "$HPT" train --resume "$tmp/c$_at"
        if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/c$_at")" = "$_x" ] && same_run "$_run" "$tmp/c$_at"; then
            pass "(d) resumed at step $_at (around a jump or a rollback): crc $_x, same metrics and phases"
        else fail "(d) resumed at step $_at: status $rc, crc '$(crc_of "$tmp/c$_at")' (want $_x)"; fi
    done
}

# outer_rollbacks ARGS...: (c) `hpt train ARGS --outer-lr 100`: jumps fail
# their check and roll back, each restoring the bytes of before its jump,
# and the scale falls to 0.25 or below
outer_rollbacks() {
    run "$HPT" train "$@" --outer-lr 100 --out "$tmp/big"
    set -- $(outer_summ "$tmp/big")
    _r=$(outer_restores "$tmp/big")
    if [ $rc -eq 0 ] && [ "${3:-0}" -ge 2 ] && [ "${_r:-0}" -eq "$3" ] &&
       python3 -c "import sys; sys.exit(not float(sys.argv[1]) <= 0.25)" "$4"; then
        pass "(c) eta 100: $3 of $1 jumps rolled back, each restoring the bytes of before its jump; scale $4"
    else fail "(c) eta 100: status $rc, summary '$*', byte-exact restores '$_r'"; fi
}

# outer_resume_suite ARGS...: (d) `hpt train ARGS --save-interval 1` (no
# argument with a space) with jumps kept and rolled back, then
# outer_resumes against it
outer_resume_suite() {
    _args="$*"
    run "$HPT" train "$@" --save-interval 1 --out "$tmp/a"
    _x=$(crc_of "$tmp/a")
    set -- $(outer_summ "$tmp/a")
    if [ $rc -eq 0 ] && [ -n "$_x" ] && [ "${2:-0}" -ge 1 ] && [ "${3:-0}" -ge 1 ]; then
        pass "(d) a checkpoint every step: crc $_x, $1 jumps, $2 kept, $3 rolled back"
    else fail "(d) a checkpoint every step: status $rc, crc '$_x', summary '$*'"; fi
    outer_resumes "$tmp/a" "$_x" $_args
}

# nan_model SRC DST: SRC's model.bin with every parameter NaN (its CRC
# rewritten), so a run started from it (--init DST) has a NaN first loss
nan_model() {
    python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"PARM") + 16                       # the chunk's payload: u64 count, then the floats
n = struct.unpack_from("<Q", b, i)[0]
b[i + 8:i + 8 + 4 * n] = struct.pack("<f", float("nan")) * n
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
PY
}

# set_hybr_version CKPT V: CKPT's HYBR section with version word V (the
# file's CRC rewritten), for the refusals of a section an older hpt wrote
set_hybr_version() {
    python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
p, v = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
off = 32
while bytes(b[off:off + 4]) != b"HYBR": off += 16 + struct.unpack_from("<Q", b, off + 8)[0]
struct.pack_into("<I", b, off + 16, v)
struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
open(p, "wb").write(b)
PY
}

# cuda_unusable: why the last run's `--device cuda` could not be used (from
# $tmp/err: no CUDA in this build, no device, a device or cuBLAS that cannot
# be used), or nothing where it could: the CUDA scripts say skip on it
cuda_unusable() {
    grep -o -- '--device cuda: \(this hpt was built without CUDA\|no CUDA device\|CUDA device 0 cannot be used\|cuBLAS cannot be used\).*' \
        "$tmp/err" | head -n 1
}
