#!/bin/sh
# cli_stdout.sh — a failed write to standard output fails the command
# (not a silent loss): every subcommand that prints, run with stdout on /dev/full
# (every write fails with ENOSPC, as on a full disk), exits 1 with a message
# naming standard output; before, tokenize, eval, sample and --help exited 0
# having written nothing. Also: a command with nothing to print does not
# fail when stdout is closed (`>&-`), and the same commands into a file
# still exit 0.
test_name=cli_stdout; . tests/lib.sh
if [ ! -w /dev/full ]; then echo "skip: no /dev/full on this machine"; finish; exit; fi

words_text 3 > "$tmp/text.txt"
printf '104 105 10\n' > "$tmp/ids.txt"
"$HPT" train --data "$tmp/text.txt" --tokenizer char --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 \
    --batch-size 2 --max-iters 2 --eval-iters 1 --threads 1 --out "$tmp/run" >/dev/null 2>"$tmp/err" ||
    { fail "training the model for sample and eval"; finish; exit; }
model=$tmp/run/model.bin

# full CMD...: CMD with stdout on /dev/full must exit 1 naming standard output
full() {
    "$@" >/dev/full 2>"$tmp/err"; rc=$?
    if [ $rc -eq 1 ] && grep -q "cannot write to standard output" "$tmp/err"; then pass "> /dev/full: $*: exit 1, says so"
    else fail "> /dev/full: $*: exit $rc, want 1 with 'cannot write to standard output'"; fi
}
full "$HPT" --help
full "$HPT" help
full "$HPT" --version
full "$HPT" train --help
full "$HPT" sample --help
full "$HPT" compare --help
full "$HPT" plot --help
full "$HPT" import --help
full "$HPT" eval --help
full "$HPT" tokenize --help
full "$HPT" tokenize --tokenizer byte "$tmp/text.txt"
full "$HPT" tokenize --tokenizer byte --decode "$tmp/ids.txt"
full "$HPT" sample --model "$model" --tokens 20 --threads 1
full "$HPT" sample --model "$model" --tokens 20 --threads 1 --prompt "the"
full "$HPT" eval --model "$model" --data "$tmp/text.txt"

# a usage error (status 2, nothing printed to stdout) keeps its status and message
"$HPT" tokenize >/dev/full 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "tokenize needs a FILE" "$tmp/err" && ! grep -q "standard output" "$tmp/err"; then
    pass "a usage error with stdout on /dev/full: exit 2, its own message only"
else fail "a usage error with stdout on /dev/full: exit $rc"; fi

# nothing printed, stdout closed: not a failure (train prints to stderr)
"$HPT" train --data "$tmp/text.txt" --tokenizer char --n-layer 1 --n-head 1 --n-embd 8 --block-size 8 \
    --batch-size 2 --max-iters 1 --eval-iters 1 --threads 1 --out "$tmp/run2" >&- 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/run2/summary.json" ]; then pass "train with stdout closed (nothing written to it): exit 0"
else fail "train with stdout closed: exit $rc"; fi

# the same commands into a file: exit 0, the output complete
run "$HPT" tokenize --tokenizer byte "$tmp/text.txt"
if [ $rc -eq 0 ] && [ "$(wc -l < "$tmp/out")" -eq "$(wc -c < "$tmp/text.txt")" ]; then pass "tokenize into a file: exit 0, one line per byte"
else fail "tokenize into a file: exit $rc"; fi
run "$HPT" eval --model "$model" --data "$tmp/text.txt"
if [ $rc -eq 0 ] && grep -q '"loss"' "$tmp/out"; then pass "eval into a file: exit 0"; else fail "eval into a file: exit $rc"; fi
run "$HPT" --help
if [ $rc -eq 0 ] && grep -q "hpt train" "$tmp/out"; then pass "--help into a file: exit 0"; else fail "--help into a file: exit $rc"; fi

finish
