#!/bin/sh
# cli_nophased.sh — the phased design is an extension of the hybrid driver
# (src/hybrid/extension.h), not a part of it:
#   (a) the driver's objects call none of the phased design's functions and
#       the phased design's objects call none of the driver's but the
#       services it is handed (nm on BUILD's objects);
#   (b) `make PHASED=0` builds libhpt and hpt without src/hybrid/phased/
#       into build-nophased/ (its archive holds none of its objects);
#   (c) there a baseline run and an outer-predictor hybrid run train to the
#       same bits as this build's (the default path never went through it);
#   (d) there --predictor coast|stale-adam|linear|shrink and --outer-gate
#       dynamics exit 2 with the reason, and --help still lists them.
# Not in the fast tier: (b) compiles the library once more (about a minute
# of CPU on 2 cores; make reuses it after).
test_name=cli_nophased; . tests/lib.sh
BUILD=${BUILD:-build}

# ---------------------------------------------------------------- (a)

# the symbols a set of objects leaves undefined
undef() { nm -u "$@" 2>/dev/null | awk 'NF == 2 { print $2 }' | sort -u; }
driver=$(ls "$BUILD"/src/hybrid/*.o 2>/dev/null)
phased=$(ls "$BUILD"/src/hybrid/phased/*.o 2>/dev/null)
if [ -z "$driver" ] || [ -z "$phased" ]; then
    echo "skip (a): no objects in $BUILD/src/hybrid (make first)"
else
    # the phased design's own functions: what its objects define
    nm --defined-only $phased | awk '$2 ~ /[TDBR]/ { print $3 }' | sort -u >"$tmp/phased_defs"
    # the one name the driver may know: the row in its extension table
    calls=$(undef $driver | grep -Fxf "$tmp/phased_defs" | grep -vx hpt_hyb_ext_phased_row)
    [ -z "$calls" ] && pass "(a) the driver calls nothing of the phased design but its row" ||
        fail "(a) the driver calls the phased design's $(echo $calls)"
    nm --defined-only $driver | awk '$2 ~ /[TDBR]/ { print $3 }' | sort -u >"$tmp/driver_defs"
    # what it may call of src/hybrid/: the predictors' dispatch and the HYBR walker
    back=$(undef $phased | grep -Fxf "$tmp/driver_defs" | grep -Ev '^hpt_(pred_|walk_)')
    [ -z "$back" ] && pass "(a) the phased design calls nothing of the driver's but predict.h and hybr_walk.h" ||
        fail "(a) the phased design calls the driver's $(echo $back)"
fi

# ---------------------------------------------------------------- (b)

NB=build-nophased
${MAKE:-make} -s PHASED=0 hpt >"$tmp/make.log" 2>&1
if [ $? -ne 0 ] || [ ! -x "$NB/hpt" ]; then
    fail "(b) make PHASED=0 hpt: $(tail -n 3 "$tmp/make.log")"
    finish; exit 1
fi
members=$(ar t "$NB/libhpt.a")
if echo "$members" | grep -qx phased_none.o && ! echo "$members" | grep -qE '^(phased|phased_ext|learner|dynamics|encoder|phase|pred_coast)\.o$'; then
    pass "(b) make PHASED=0: $NB/hpt, its libhpt.a without the phased design ($(echo "$members" | wc -l) members)"
else fail "(b) $NB/libhpt.a holds: $(echo $members)"; fi

# ---------------------------------------------------------------- (c)

words_text 7 >"$tmp/text.txt"
BASE="--data $tmp/text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 \
      --threads 1 --max-iters 60 --eval-interval 30"
OUT="--mode hybrid --warmup-steps 10 --predictor outer --outer-interval 8 --outer-check 4"
for arm in baseline outer; do
    args=$BASE; [ $arm = outer ] && args="$BASE $OUT"
    run "$NB/hpt" train $args --out "$tmp/np-$arm"; rc_np=$rc
    run $HPT train $args --out "$tmp/full-$arm"
    a=$(crc_of "$tmp/np-$arm"); b=$(crc_of "$tmp/full-$arm")
    if [ $rc_np -eq 0 ] && [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then
        pass "(c) $arm without the phased design: crc $a, equal to this build's"
    else fail "(c) $arm: exit $rc_np / $rc, crc '$a' (this build '$b')"; fi
done
jumps=$(outer_summ "$tmp/np-outer" | cut -d' ' -f1)
[ "${jumps:-0}" -ge 3 ] && pass "(c) the outer run jumped $jumps times" || fail "(c) outer jumps: '$jumps'"

# ---------------------------------------------------------------- (d)

for p in coast stale-adam linear shrink; do
    run "$NB/hpt" train $BASE --mode hybrid --predictor $p --out "$tmp/np-$p"
    if [ $rc -eq 2 ] && grep -q -- "--predictor $p is the phased design's, which this build of hpt leaves out" "$tmp/err"; then
        pass "(d) --predictor $p: exit 2 with the reason"
    else fail "(d) --predictor $p: exit $rc: $(tail -n 1 "$tmp/err")"; fi
done
run "$NB/hpt" train $BASE $OUT --outer-gate dynamics --out "$tmp/np-gate"
if [ $rc -eq 2 ] && grep -q -- "--outer-gate dynamics reads the phased design's learned dynamics" "$tmp/err"; then
    pass "(d) --outer-gate dynamics: exit 2 with the reason"
else fail "(d) --outer-gate dynamics: exit $rc: $(tail -n 1 "$tmp/err")"; fi
run "$NB/hpt" train --help
if [ $rc -eq 0 ] && grep -q -- "--predictor coast|stale-adam|linear|shrink|outer" "$tmp/out"; then
    pass "(d) --help lists every predictor name"
else fail "(d) --help: exit $rc"; fi

finish
