#!/bin/sh
# tier: fast
# cli_gpu_kit.sh — the GPU kit brings its record back: a dry run
# of bench/gpu_session.sh (no GPU: hpt's runs on the CPU at a tiny shape,
# make test-cuda, memcheck and PyTorch faked; the same file plumbing, the
# same table and record) must leave $OUT within what the GPU machine sends
# back (at most 8 files, each at most 16 MiB, 64 MiB in all, no deeper than
# $OUT/a/b/file, names of [A-Za-z0-9._-]; the kit's own rule: at most 6
# files, record.md among them, no model, checkpoint or plot, in $OUT or in
# its tarball), end its output with the record, keep nothing outside $OUT,
# and run its steps in the order of their value (what a cut-off keeps).
# Then a step that hangs: cut at its limit (the kill reaches it), the steps
# after it skipped for time and said so, the script within its budget.
test_name=cli_gpu_kit; . tests/lib.sh
order="build hpt-gpt2-124m-bf16 profile-gpt2-124m-bf16 torch-gpt2-124m-bf16 test-cuda hpt-gpt2-124m-tf32
hpt-gpt2-124m-fp32 torch-gpt2-124m-tf32-fp32 profile-gpt2-124m-fp32 profile-gpt2-124m-tf32
profile-gpt2-124m-tf32-materialise profile-gpt2-124m-tf32-flash-fp32 memcheck-device memcheck-train-fp32
memcheck-train-bf16 hpt-nanogpt-small-fp32 hpt-nanogpt-small-tf32 hpt-nanogpt-small-bf16 torch-nanogpt-small"

# limits OUT WHAT: $OUT against the machine's and the kit's rules
limits() {
    _o=$1; _w=$2; _bad=""
    _n=$(find "$_o" -mindepth 1 | wc -l)
    [ "$_n" -le 6 ] || _bad="$_bad; $_n entries (at most 6)"
    _deep=$(cd "$_o" && find . -mindepth 1 | awk -F/ 'NF - 1 > 3' | head -n 1)
    [ -z "$_deep" ] || _bad="$_bad; deeper than \$OUT/a/b/file: $_deep"
    _odd=$(cd "$_o" && find . -mindepth 1 | sed 's|^\./||' | tr '/' '\n' | grep -v -x '[A-Za-z0-9._-]*' | head -n 1)
    [ -z "$_odd" ] || _bad="$_bad; a name outside [A-Za-z0-9._-]: '$_odd'"
    _big=$(find "$_o" -type f -size +16M | head -n 1)
    [ -z "$_big" ] || _bad="$_bad; over 16 MiB: $_big"
    _tot=$(find "$_o" -type f -exec cat {} + | wc -c)
    [ "$_tot" -le 67108864 ] || _bad="$_bad; $_tot bytes in all"
    for _f in record.md gpu_bench.md gpu_bench.json session.log logs.tar.gz; do
        [ -f "$_o/$_f" ] || _bad="$_bad; no $_f"
    done
    _media=$( { find "$_o" -type f; tar -tzf "$_o/logs.tar.gz" 2>/dev/null; } | grep -E '\.(bin|png|svg)$' | head -n 1)
    [ -z "$_media" ] || _bad="$_bad; a model or plot: $_media"
    tar -tzf "$_o/logs.tar.gz" > /dev/null 2>&1 || _bad="$_bad; logs.tar.gz does not list"
    if [ -z "$_bad" ]; then pass "$_w: \$OUT within the limits ($_n files, $_tot bytes: $(ls "$_o" | tr '\n' ' '))"
    else fail "$_w: \$OUT$_bad"; fi
}
# ends_with_record OUT STDOUT WHAT
ends_with_record() {
    if [ -s "$1/record.md" ] && tail -n "$(wc -l < "$1/record.md")" "$2" | cmp -s - "$1/record.md"; then
        pass "$3: the output ends with record.md ($(wc -c < "$1/record.md") bytes)"
    else fail "$3: the output does not end with record.md"; fi
}

# ---- a whole dry run
mkdir -p "$tmp/t1"
t0=$(date +%s)
run env OUT="$tmp/out1" TMPDIR="$tmp/t1" timeout 60 sh bench/gpu_session.sh --dry-run
dt=$(($(date +%s) - t0))
[ "$rc" -eq 0 ] && pass "--dry-run: exit 0 in $dt s" || fail "--dry-run: exit $rc after $dt s"
limits "$tmp/out1" "--dry-run"
ends_with_record "$tmp/out1" "$tmp/out" "--dry-run"
[ -z "$(ls -A "$tmp/t1")" ] && pass "--dry-run: nothing kept outside \$OUT (its work directory removed)" ||
    fail "--dry-run left $(ls -A "$tmp/t1") in TMPDIR"
r=$tmp/out1/record.md
# steps RECORD: the step table's rows (between "## Steps" and the next section)
steps() { awk '/^## / { on = /^## Steps/ } on && /^\| [a-z0-9-]+ \| / && !/^\| step \|/' "$1"; }
ran=$(steps "$r" | cut -d' ' -f2 | tr '\n' ' ')
want=$(echo $order)
[ "$ran" = "$want " ] && pass "the steps in the order of their value, make test-cuda after PyTorch bf16, the nanoGPT shape last" ||
    fail "the steps' order: '$ran', want '$want'"
nok=$(steps "$r" | grep -c '^| [a-z0-9-]* | ok |')
[ "$nok" -eq 19 ] && pass "every step ok in the dry run (19)" || fail "$nok of 19 steps ok: $(steps "$r" | grep -v '| ok |' | head -n 3)"
if grep -q '^- date: ' "$r" && grep -q '^- GPU: ' "$r" && grep -q '^- commit: [0-9a-f]\{40\}' "$r" &&
    grep -q '^- \*\*make test-cuda: rc 0, 1 passed, 0 failed' "$r" && grep -q 'DRY RUN' "$r"; then
    pass "the record names the date, the GPU, the commit, make test-cuda's result and says it is a dry run"
else fail "the record's header: $(head -n 10 "$r")"; fi
# the table is built from hpt's real summary.json files (the CPU's, at a tiny shape)
if grep -q '^| gpt2-124m | hpt | bf16 | [0-9.]* | [0-9]* | ' "$tmp/out1/gpu_bench.md" &&
    grep -q '^| nanogpt-small | PyTorch | bf16+compile | ' "$tmp/out1/gpu_bench.md" &&
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["hpt"]["gpt2-124m/bf16"]["ms_per_step"] > 0' \
        "$tmp/out1/gpu_bench.json" 2>/dev/null; then
    pass "gpu_bench.md and .json hold hpt's rows from its summary.json and PyTorch's"
else fail "the benchmark table: $(head -n 8 "$tmp/out1/gpu_bench.md")"; fi
if tar -tzf "$tmp/out1/logs.tar.gz" | grep -q '^logs/hpt-gpt2-124m-bf16.log$' &&
    tar -tzf "$tmp/out1/logs.tar.gz" | grep -q '^runs/hpt-gpt2-124m-bf16/summary.json$'; then
    pass "logs.tar.gz holds each step's log and the runs' summary.json"
else fail "logs.tar.gz: $(tar -tzf "$tmp/out1/logs.tar.gz" | head -n 5 | tr '\n' ' ')"; fi

# ---- a step that hangs, in a budget of 7 s (3 s reserved for the record)
mkdir -p "$tmp/t2"
t0=$(date +%s)
run env OUT="$tmp/out2" TMPDIR="$tmp/t2" HPT_GPU_BUDGET=7 HPT_GPU_DRY_HANG=hpt-gpt2-124m-bf16 \
    timeout 60 sh bench/gpu_session.sh --dry-run
dt=$(($(date +%s) - t0))
r=$tmp/out2/record.md
[ "$rc" -eq 3 ] && [ "$dt" -le 12 ] && pass "a hung step: the script ends in $dt s of its 7 s budget, exit 3 (make test-cuda did not run)" ||
    fail "a hung step: exit $rc after $dt s (want 3 within 12 s: the budget and a margin for a loaded machine)"
limits "$tmp/out2" "a hung step"
ends_with_record "$tmp/out2" "$tmp/out" "a hung step"
grep -q '^| hpt-gpt2-124m-bf16 | cut at its limit (rc 137) |' "$r" && pass "the hung step is recorded as cut at its limit" ||
    fail "the hung step's row: $(grep 'hpt-gpt2-124m-bf16' "$r")"
nskip=$(steps "$r" | grep -c '^| [a-z0-9-]* | skipped: [0-9-]* s left of the budget')
[ "$nskip" -eq 17 ] && pass "the 17 steps after it are skipped for time, and the record says so" ||
    fail "$nskip of 17 steps skipped for time"
mkdir -p "$tmp/x" && tar -xzf "$tmp/out2/logs.tar.gz" -C "$tmp/x" logs/hpt-gpt2-124m-bf16.log 2>/dev/null
hung=$(sed -n 's/.*hanging, pid \([0-9]*\).*/\1/p' "$tmp/x/logs/hpt-gpt2-124m-bf16.log" 2>/dev/null)
# gone, or a zombie (dead: its parent, the limit's timeout, died with it, and
# this machine's init may reap it late)
st=$( [ -n "$hung" ] && ps -o stat= -p "$hung" 2>/dev/null | tr -d " ")
case "${hung:-none}/$st" in
    none/*) fail "the hung process: no pid in its log" ;;
    */|*/Z*) pass "the limit's kill reached the hung process (pid $hung: ${st:-gone})" ;;
    *) fail "the hung process: pid $hung still runs ($st)" ;;
esac
[ -n "$hung" ] && pids="$pids $hung"   # lib.sh kills it on exit if it does outlive its limit
finish
