#!/bin/sh
# tier: fast (make test; tests/run.sh)
# check_fuzz.sh — the fuzz targets (bench/fuzz/*.c) still compile against the
# library's headers: they call internal APIs (the shard reader, the
# checkpoint's sections), and only CI's fuzz stage builds them with clang
# and libFuzzer, last; a signature changed under them had failed CI there
# (fuzz_shard.c against hpt_shards_open's new argument). gcc's syntax check
# with every warning an error, as bench/fuzz.sh compiles them.
test_name=check_fuzz; . tests/lib.sh
cc=${VEC_CC:-cc}
for f in bench/fuzz/*.c; do
    if $cc -std=c11 -D_GNU_SOURCE -DHPT_NO_BLAS -Wall -Wextra -Werror -Wno-unknown-pragmas -Iinclude \
        $(pkg-config --cflags libcjson 2>/dev/null) -fsyntax-only "$f" 2>"$tmp/err"; then
        pass "$f compiles"
    else fail "$f: $(head -n 3 "$tmp/err")"; fi
done
finish
