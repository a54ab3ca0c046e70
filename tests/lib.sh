# lib.sh — what the CLI tests share. Sourced from the repository root after
# setting `test_name`:
#
#     test_name=cli_memory; . tests/lib.sh
#
# Gives: $HPT (./hpt unless set), a fresh $tmp removed on exit (after
# SIGKILLing every pid listed in $pids, so no trainer outlives its test),
# pass/fail counting, run (status in $rc, output in $tmp/out and $tmp/err),
# crc_of DIR, words_text SEED (reproducible English-ish text), and finish,
# the closing line and exit status. Exits at once if ./hpt is not built.
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
