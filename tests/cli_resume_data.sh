#!/bin/sh
# tier: fast (make test; tests/run.sh)
# cli_resume_data.sh — a resume checks that the data is the data the run
# began with (`--resume` once trained on silently after the data file
# changed). Checkpoints record the data's size and CRC-32 (DSRC):
#   (a) the file changed, same size other content: resume exits 1 naming
#       the file and --allow-data-change; with the flag it goes on, saying
#       what changes, and its checkpoints record the new data
#   (b) the file truncated (the train/val split moves): refused the same way,
#       accepted with the flag
#   (c) the file restored: resume is bit-exact again, no word about the data
#   (d) a checkpoint from before the record (the TCFG v1 fixture) resumes
#       with a note; --allow-data-change without --resume: exit 2
#   (e) Fashion-MNIST: a label changed in one IDX file is refused naming the
#       directory (when the dataset is installed)
test_name=cli_resume_data; . tests/lib.sh

# the char set of words_text shows up in its first lines, so a change that
# keeps it (lines moved, a cut) leaves the vocabulary and the model alone
words_text 2727 >"$tmp/data.txt"
cp "$tmp/data.txt" "$tmp/orig.txt"
CFG="--data $tmp/data.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 \
     --max-iters 40 --eval-interval 20 --eval-iters 2 --save-interval 10 --keep-last 5 --threads 1"

# the uninterrupted run, then a copy cut back to its checkpoint at step 20
run "$HPT" train $CFG --out "$tmp/full"
X=$(crc_of "$tmp/full")
[ $rc -eq 0 ] && [ -n "$X" ] || fail "uninterrupted run: status $rc"
# at20 NAME: a copy of the run as a kill after step 20 leaves it
at20() { rm -rf "$tmp/$1"; cp -r "$tmp/full" "$tmp/$1"; cut_after "$tmp/$1" 20; }

# ---------------------------------------------------------------- (a)
# the first line moved to the end: the same size and characters, each
# window's text another
python3 - "$tmp/data.txt" <<'EOF'
import sys
p = sys.argv[1]
lines = open(p, "rb").read().split(b"\n")[:-1]
open(p, "wb").write(b"\n".join(lines[1:] + lines[:1]) + b"\n")
EOF
cmp -s "$tmp/data.txt" "$tmp/orig.txt" && fail "(a) the data did not change"
[ "$(wc -c <"$tmp/data.txt")" -eq "$(wc -c <"$tmp/orig.txt")" ] || fail "(a) the size changed"
at20 a
run "$HPT" train --resume "$tmp/a"
if [ $rc -eq 1 ] && grep -q "the data '$tmp/data.txt' changed since" "$tmp/err" &&
   grep -q "allow-data-change" "$tmp/err" && grep -q "CRC-32" "$tmp/err"; then
    pass "(a) same size, other content: refused (exit 1) naming the file"
else fail "(a) same size, other content: status $rc: $(tail -n 1 "$tmp/err")"; fi
[ -e "$tmp/a/checkpoints/ckpt-00000040.bin" ] && fail "(a) the refused resume trained on"
run "$HPT" train --resume "$tmp/a" --allow-data-change
if [ $rc -eq 0 ] && grep -q "allow-data-change: '$tmp/data.txt' changed since the checkpoint" "$tmp/err" &&
   grep -q "What changes" "$tmp/err" && [ -n "$(crc_of "$tmp/a")" ] && [ "$(crc_of "$tmp/a")" != "$X" ]; then
    pass "(a) --allow-data-change: goes on to the end on the new data, saying what changes"
else fail "(a) --allow-data-change: status $rc, crc $(crc_of "$tmp/a") (uninterrupted $X)"; fi
# its checkpoints from the change on record the new data: from the one at
# step 30, a plain resume goes on without the flag
cut_after "$tmp/a" 30
run "$HPT" train --resume "$tmp/a"
if [ $rc -eq 0 ] && grep -q "from '.*ckpt-00000030.bin'" "$tmp/err" && ! grep -q "changed" "$tmp/err"; then
    pass "(a) the checkpoints written after the change record the new data"
else fail "(a) resume from the checkpoint after the change: status $rc: $(tail -n 1 "$tmp/err")"; fi

# ---------------------------------------------------------------- (b)
cp "$tmp/orig.txt" "$tmp/data.txt"
head -c 15000 "$tmp/orig.txt" >"$tmp/data.txt"
at20 b
run "$HPT" train --resume "$tmp/b"
if [ $rc -eq 1 ] && grep -q "changed since" "$tmp/err" && grep -q "split would move" "$tmp/err"; then
    pass "(b) truncated: refused, the moving split named"
else fail "(b) truncated: status $rc: $(tail -n 1 "$tmp/err")"; fi
run "$HPT" train --resume "$tmp/b" --allow-data-change
if [ $rc -eq 0 ] && grep -q "split moved" "$tmp/err" && [ -n "$(crc_of "$tmp/b")" ]; then
    pass "(b) truncated, --allow-data-change: goes on to the end"
else fail "(b) truncated, --allow-data-change: status $rc: $(tail -n 1 "$tmp/err")"; fi

# ---------------------------------------------------------------- (c)
cp "$tmp/orig.txt" "$tmp/data.txt"
at20 c
run "$HPT" train --resume "$tmp/c"
if [ $rc -eq 0 ] && [ "$(crc_of "$tmp/c")" = "$X" ] && ! grep -qi "changed\|no record" "$tmp/err"; then
    pass "(c) the data as it was: resumes bit-exact ($X), nothing said about the data"
else fail "(c) unchanged data: status $rc, crc $(crc_of "$tmp/c") want $X"; fi

# ---------------------------------------------------------------- (d)
cp -r tests/fixtures/ckpt_v1 "$tmp/d"
run "$HPT" train --resume "$tmp/d"
if [ $rc -eq 0 ] && grep -q "holds no record of its data" "$tmp/err"; then
    pass "(d) a checkpoint from before the record: resumes, with a note"
else fail "(d) old checkpoint: status $rc: $(tail -n 1 "$tmp/err")"; fi
run "$HPT" train $CFG --allow-data-change --out "$tmp/d2"
if [ $rc -eq 2 ] && grep -q "only applies with --resume" "$tmp/err"; then pass "(d) --allow-data-change without --resume: exit 2"
else fail "(d) --allow-data-change on a new run: status $rc"; fi

# ---------------------------------------------------------------- (e)
FM=/usr/share/datasets/fashion-mnist
if [ -f "$FM/t10k-labels-idx1-ubyte.gz" ]; then
    mkdir "$tmp/fm"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        ln -s "$FM/$f.gz" "$tmp/fm/$f.gz"
    done
    FCFG="--task fashion-mnist --model mlp --data $tmp/fm --max-iters 4 --eval-interval 2 --eval-iters 1 \
          --batch-size 16 --save-interval 2 --threads 1"
    run "$HPT" train $FCFG --out "$tmp/e"
    [ $rc -eq 0 ] || fail "(e) fashion-mnist run: status $rc"
    cut_after "$tmp/e" 2
    # one test label changed, same size
    rm "$tmp/fm/t10k-labels-idx1-ubyte.gz"
    python3 - "$FM/t10k-labels-idx1-ubyte.gz" "$tmp/fm/t10k-labels-idx1-ubyte.gz" <<'EOF'
import gzip, sys
b = bytearray(gzip.open(sys.argv[1]).read())
b[8] = (b[8] + 1) % 10
gzip.open(sys.argv[2], "wb").write(bytes(b))
EOF
    run "$HPT" train --resume "$tmp/e"
    if [ $rc -eq 1 ] && grep -q "the data '$tmp/fm' changed since" "$tmp/err"; then
        pass "(e) fashion-mnist: a changed label file refused naming the directory"
    else fail "(e) fashion-mnist changed labels: status $rc: $(tail -n 1 "$tmp/err")"; fi
    run "$HPT" train --resume "$tmp/e" --allow-data-change
    [ $rc -eq 0 ] && pass "(e) fashion-mnist: --allow-data-change goes on" ||
        fail "(e) fashion-mnist --allow-data-change: status $rc: $(tail -n 1 "$tmp/err")"
else
    echo "skip (e): $FM not installed"
fi

finish
