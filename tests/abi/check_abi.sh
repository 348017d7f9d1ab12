#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compares the ABI of the built libmoshpit.so with the last release's
# (tests/abi/moshpit.abi, written by make_baseline.sh) and fails on any
# change that could break a program built against that release:
# - abidiff (libabigail) on everything the header declares: functions
#   removed or changed, types changed, the soname; new functions and new
#   enum values pass;
# - its own check of moshpit_config_t and moshpit_round_t, which may grow:
#   every field of the release keeps its name, type and offset, and new
#   fields start at or after the release's size (never in its tail
#   padding), but for fields named reserved_pad*: those fill the tail
#   padding so that the next field starts at the release's size, and the
#   library never reads them.
# Exit 77 (ctest: skipped) without abidw/abidiff, without debug
# information, or on another architecture than the baseline's.
# Arguments: the shared library, source dir.
set -euo pipefail
lib="$1"
src="$2"
here="$src/tests/abi"
# shellcheck source=tests/abi/abidw_options.sh
. "$here/abidw_options.sh"
base="$here/moshpit.abi"
for tool in abidw abidiff; do
    command -v "$tool" >/dev/null ||
        { echo "skipped: no $tool (Debian: abigail-tools)"; exit 77; }
done
sections=$(readelf -S "$lib")
grep -q '\.debug_info' <<<"$sections" ||
    { echo "skipped: $lib has no debug information"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
abi_dump "$lib" "$tmp/now.abi" "$src/include"
arch() { sed -n "1s/.*architecture='\([^']*\)'.*/\1/p" "$1"; }
if [ "$(arch "$base")" != "$(arch "$tmp/now.abi")" ]; then
    echo "skipped: the baseline is for $(arch "$base"), this build" \
        "$(arch "$tmp/now.abi")"
    exit 77
fi
release=$(cat "$here/baseline_version")

status=0
rc=0
abidiff --no-added-syms --suppressions "$here/growable.supp" "$base" \
    "$tmp/now.abi" >"$tmp/report" || rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$tmp/report"
    echo "abidiff exit status $rc (4: ABI change, 8: incompatible change)"
    status=1
fi

# fields "offset name type-id" of struct $2 in ABI file $1, then its size
fields() {
    awk -v want="$2" '
        /<class-decl / {
            inside = index($0, "name=\x27" want "\x27") > 0
            if (inside && match($0, /size-in-bits=.[0-9]+/))
                size = substr($0, RSTART + 14, RLENGTH - 14)
            next
        }
        inside && /<\/class-decl>/ { inside = 0 }
        inside && /layout-offset-in-bits=/ {
            match($0, /layout-offset-in-bits=.[0-9]+/)
            off = substr($0, RSTART + 23, RLENGTH - 23)
        }
        inside && /<var-decl / {
            match($0, /name=.[^\x27]+/); name = substr($0, RSTART + 6, RLENGTH - 6)
            match($0, /type-id=.[^\x27]+/); type = substr($0, RSTART + 9, RLENGTH - 9)
            print off, name, type
        }
        END { print "size", size }' "$1"
}
for s in moshpit_config moshpit_round; do
    fields "$base" "$s" >"$tmp/old"
    fields "$tmp/now.abi" "$s" >"$tmp/new"
    old_size=$(sed -n 's/^size //p' "$tmp/old")
    new_size=$(sed -n 's/^size //p' "$tmp/new")
    n_old=$(grep -vc '^size' "$tmp/old" || true)
    if [ -z "$old_size" ] || [ "$n_old" -eq 0 ]; then
        echo "struct $s is not in the baseline"
        status=1
        continue
    fi
    # the release's fields, unchanged and first
    if ! grep -v '^size' "$tmp/new" | head -n "$n_old" |
        cmp -s - <(grep -v '^size' "$tmp/old"); then
        echo "struct $s: the fields of $release changed (offset name type):"
        diff <(grep -v '^size' "$tmp/old") <(grep -v '^size' "$tmp/new") || true
        status=1
    fi
    # new fields only past the release's size
    while read -r off name _; do
        if [ "$off" -lt "$old_size" ] && [ "${name#reserved_pad}" = "$name" ]; then
            echo "struct $s: new field $name at bit $off, inside the" \
                "$old_size bits of $release (tail padding)"
            status=1
        fi
    done < <(grep -v '^size' "$tmp/new" | tail -n +"$((n_old + 1))")
    if [ -z "$new_size" ] || [ "$new_size" -lt "$old_size" ]; then
        echo "struct $s shrank from $old_size to ${new_size:-?} bits"
        status=1
    fi
    echo "struct $s: $((old_size / 8)) bytes in $release, $((new_size / 8)) now"
done
if [ "$status" -ne 0 ]; then
    echo "abi check: incompatible with $release (tests/abi/README.md)"
    exit 1
fi
echo "abi check: compatible with $release" \
    "($(grep -c '<function-decl' "$tmp/now.abi") functions," \
    "$(grep -c '<function-decl' "$base") in $release)"
