#!/bin/sh
# tier: fast (make test; tests/run.sh)
# check_layers.sh — the library's rooms depend one way:
# every arrow between rooms goes to a room the table below lets it use, and
# the table itself has no circle. Two kinds of arrow are derived, not listed:
#   - includes: each `#include "..."` of a room's sources (.c, .h, .cu),
#     resolved as the compiler does (the file's directory, then include/);
#     include/ is the public face, which every room may include;
#   - calls: each symbol a room's object leaves undefined (nm) that another
#     room's object defines, so a call made through a public header (hpt.h
#     declares functions of every layer) is an arrow too. From the objects of
#     BUILD (make's); skipped, with a line saying so, where there are none.
# Each arrow against the table is printed as file:line (the include, or the
# first use of the symbol) with the two rooms. A directory under src/ that
# no room names fails too: a new room is a line here and a word in
# Makefile's LIB_ROOMS.
#
#   sh tests/check_layers.sh [ROOT [BUILD]]   (default: this tree, $BUILD or build)
#
# ROOT lets it read another tree, e.g. an older commit's checkout.
test_name=check_layers; . tests/lib.sh
root=${1:-.}
build=${2:-${BUILD:-build}}

# room   | its directories                  | the rooms it may use (itself always)
table='
base     | src/base src/mpi                 | -
kernels  | src/kernels                      | base
device   | src/device src/cuda              | base kernels
model    | src/model                        | base kernels device
data     | src/data                         | base
io       | src/io                           | base kernels device model data
train    | src/train                        | base kernels device model data io
hybrid   | src/hybrid src/hybrid/phased     | base kernels device model data io train
report   | src/report                       | base
run      | src/run                          | base kernels device model data io train hybrid
cli      | cli                              | base kernels device model data io train hybrid report run
'
# src/cuda is the device layer's CUDA backend: device.c's table holds its
# row and it implements device.h, so it is one room with src/device, as
# src/hybrid/phased (the driver's extension, one row of its table, handed
# the driver's services) is with src/hybrid: the table's reference to its
# row is the one arrow between them, which tests/cli_nophased.sh checks.
# src/mpi is base's MPI plugin (libhpt_mpi.so, the process group's MPI
# calls), one room with src/base as src/cuda is with src/device.
# src/report (run directories) uses only base; cli/ uses it.

# dirs: "dir room" per line, longest directory first (src/hybrid/phased
# before src/hybrid)
printf '%s\n' "$table" | awk -F'|' 'NF == 3 { gsub(/^ +| +$/, "", $1); n = split($2, d, " ");
    for (i = 1; i <= n; i++) print length(d[i]), d[i], $1 }' | sort -rn | cut -d' ' -f2- >"$tmp/dirs"
# allowed: "room used" per line
printf '%s\n' "$table" | awk -F'|' 'NF == 3 { gsub(/^ +| +$/, "", $1); n = split($3, u, " ");
    print $1, $1; for (i = 1; i <= n; i++) if (u[i] != "-") print $1, u[i] }' >"$tmp/allowed"

# the table: every room it lets another use is a room, and no circle
bad=$(awk 'NR == FNR { room[$1] = 1; next } !($2 in room) { print $1 " may use " $2 ", which is no room" }' \
    "$tmp/allowed" "$tmp/allowed")
[ -z "$bad" ] && pass "the table names rooms only" || fail "$bad"
if tsort "$tmp/allowed" >/dev/null 2>"$tmp/err"; then pass "the table has no circle"
else fail "the table has a circle: $(tr '\n' ' ' <"$tmp/err")"; fi

cd "$root" || { fail "no tree at $root"; finish; exit 1; }

# every directory under src/ belongs to a room
unknown=""
for d in $(find src -type d | sort); do
    [ "$d" = src ] && continue
    awk -v d="$d" '$1 == d { f = 1 } END { exit !f }' "$tmp/dirs" || unknown="$unknown $d"
done
[ -z "$unknown" ] && pass "every directory under src/ is in a room" || fail "not in the table:$unknown"

# room_of PATH (relative to root) on stdin per line -> "PATH ROOM" ("-" if none)
room_of() { awk 'NR == FNR { dir[++n] = $1; rm[n] = $2; next }
    { r = "-"; for (i = 1; i <= n; i++) { p = dir[i] "/"; if (substr($1, 1, length(p)) == p && index(substr($1, length(p) + 1), "/") == 0) { r = rm[i]; break } }
      print $1, r }' "$tmp/dirs" -; }

# ---------------------------------------------------------------- includes
# "file line included-path" for every quoted include of a room's file, the
# path resolved against the file's directory (then include/)
for d in $(cut -d' ' -f1 "$tmp/dirs"); do
    ls "$d"/*.c "$d"/*.h "$d"/*.cu 2>/dev/null
done | sort -u >"$tmp/files"
while read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
    while read -r line inc; do
        p=$(printf '%s/%s\n' "$(dirname "$f")" "$inc" | awk -F/ '{ n = 0; for (i = 1; i <= NF; i++) {
            if ($i == "." || $i == "") continue; if ($i == "..") { if (n > 0) n--; continue } s[++n] = $i }
            o = s[1]; for (i = 2; i <= n; i++) o = o "/" s[i]; print o }')
        if [ -f "$p" ]; then echo "$f $line $p"; elif [ -f "include/$inc" ]; then echo "$f $line include/$inc"; fi
    done
done <"$tmp/files" >"$tmp/incs"
cut -d' ' -f1 "$tmp/incs" | room_of >"$tmp/from"
cut -d' ' -f3 "$tmp/incs" | room_of >"$tmp/to"
paste -d' ' "$tmp/incs" "$tmp/from" "$tmp/to" | awk 'NR == FNR { ok[$1 " " $2] = 1; next }
    { from = $5; to = $7; if ($3 ~ /^include\// || to == "-" || from == to) next
      if (!((from " " to) in ok)) print $1 ":" $2 ": " from " -> " to " (#include \"" $3 "\")" }' "$tmp/allowed" - >"$tmp/bad"
n=$(wc -l <"$tmp/incs")
if [ -s "$tmp/bad" ]; then cat "$tmp/bad"; fail "$(wc -l <"$tmp/bad") include(s) against the table (of $n)"
else pass "$n includes, none against the table"; fi

# ---------------------------------------------------------------- calls
# the objects of the rooms' sources (a stale object, whose source has
# moved or gone, is not read)
: >"$tmp/objs"
for f in $(grep -v '\.h$' "$tmp/files"); do
    o="$build/${f%.*}.o"
    [ -f "$o" ] && echo "$f $o" >>"$tmp/objs"
done
if [ ! -s "$tmp/objs" ]; then
    echo "skip calls: no objects in $root/$build (run make first)"
elif ! command -v nm >/dev/null 2>&1; then
    echo "skip calls: no nm"
else
    cut -d' ' -f1 "$tmp/objs" | room_of >"$tmp/objroom"
    # "symbol file room" for every defined global symbol, "U symbol file room" for every undefined
    while read -r f o; do
        r=$(awk -v f="$f" '$1 == f { print $2 }' "$tmp/objroom")
        nm -g "$o" 2>/dev/null | awk -v f="$f" -v r="$r" 'NF == 3 && $2 ~ /^[TDBRCVWGS]$/ { print "D", $3, f, r }
                                                           NF == 2 && $1 == "U" { print "U", $2, f, r }'
    done <"$tmp/objs" >"$tmp/syms"
    awk 'NR == FNR { ok[$1 " " $2] = 1; next }
         $1 == "D" { if (!($2 in def)) { def[$2] = $3; droom[$2] = $4 }; next }
         { u[++n] = $0 }
         END { for (i = 1; i <= n; i++) { split(u[i], x, " "); s = x[2]
                   if (!(s in def) || droom[s] == x[4] || ((x[4] " " droom[s]) in ok)) continue
                   print x[3], s, x[4], droom[s], def[s] } }' "$tmp/allowed" "$tmp/syms" | sort -u >"$tmp/badcalls"
    : >"$tmp/bad"
    while read -r f s from to where; do
        line=$(grep -n -w "$s" "$f" | head -n 1 | cut -d: -f1)
        echo "$f:${line:-1}: $from -> $to ($s, defined in $where)" >>"$tmp/bad"
    done <"$tmp/badcalls"
    n=$(grep -c '^U' "$tmp/syms")
    if [ -s "$tmp/bad" ]; then cat "$tmp/bad"; fail "$(wc -l <"$tmp/bad") call(s) against the table (of $n undefined symbols in $(wc -l <"$tmp/objs") objects)"
    else pass "$(wc -l <"$tmp/objs") objects' $n undefined symbols, no call against the table"; fi
fi
finish
