#!/bin/sh
# tier: fast (make test; tests/run.sh)
# check_headers.sh — every public header (include/*.h) compiles alone, first
# in a file, as C11 with -Wall -Wextra -Werror (and as C++ where g++ is
# installed), and declares what it names there: hpt.h includes
# hpt_hybrid.h, hpt_settings.h and hpt_rundir.h at its end,
# and each of those includes hpt.h before its guard, so either order works.
test_name=check_headers; . tests/lib.sh
cc=${VEC_CC:-cc}
for h in include/*.h; do
    name=$(basename "$h")
    printf '#include "%s"\nsize_t f(void);\nsize_t f(void) { return sizeof(hpt_train_config) + sizeof(hpt_hybrid_config) + sizeof(hpt_setting) + sizeof(hpt_rundir); }\n' \
        "$name" >"$tmp/inc.c"
    if $cc -std=c11 -Wall -Wextra -Werror -Iinclude -fsyntax-only "$tmp/inc.c" 2>"$tmp/err"; then pass "$name alone (C11)"
    else fail "$name alone (C11): $(head -n 3 "$tmp/err")"; fi
    if command -v g++ >/dev/null 2>&1; then
        if g++ -x c++ -Wall -Wextra -Werror -Iinclude -fsyntax-only "$tmp/inc.c" 2>"$tmp/err"; then pass "$name alone (C++)"
        else fail "$name alone (C++): $(head -n 3 "$tmp/err")"; fi
    fi
done
finish
