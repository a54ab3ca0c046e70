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

# finish: the closing line; the test's exit status
finish() {
    echo "$test_name: $failures failed"
    [ "$failures" -eq 0 ]
}

if [ ! -x "$HPT" ]; then echo "FAIL $HPT not built (run make)"; exit 1; fi
