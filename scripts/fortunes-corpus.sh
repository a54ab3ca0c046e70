#!/bin/sh
# Prints the default text corpus: every English fortune file from Debian's
# `fortunes` package (the plain-text files, not the .dat indexes or .u8
# links), concatenated in a fixed order so every machine trains on the same
# bytes. About 2 MB.
set -eu
dir=/usr/share/games/fortunes
[ -d "$dir" ] || { echo "fortunes-corpus: $dir missing; install Debian's 'fortunes' package" >&2; exit 1; }
found=0
for f in $(ls "$dir" | LC_ALL=C sort); do
    case "$f" in *.dat|*.u8) continue ;; esac
    [ -f "$dir/$f" ] || continue
    cat "$dir/$f"
    found=1
done
[ "$found" = 1 ] || { echo "fortunes-corpus: no fortune files in $dir" >&2; exit 1; }
