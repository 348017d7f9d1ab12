#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The simulator must print the same bytes on every architecture for the
# same seed (its arithmetic is integer or IEEE double in a fixed order, its
# random numbers its own): runs a native moshpit-sim and another build of
# it (an ARM one under qemu-user, say) with the arguments of
# sim_repro.cmake, once plain and once with Byzantine peers and a robust
# rule, and compares the outputs byte for byte.
# Usage: sim_cross_compare.sh NATIVE-SIM OTHER-SIM [EMULATOR [ARGS...]]
set -euo pipefail
native="${1:?native moshpit-sim}"
other="${2:?the other moshpit-sim}"
shift 2
emu=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--peers 600 --group-size 8 --rounds 8 --fail-prob 0.02 --loss 0.01
      --churn 3 --weights random --positions random --seed 11)
fails=0
for variant in plain robust; do
    extra=()
    [ "$variant" = robust ] && extra=(--byzantine 6 --aggregation clip)
    "$native" "${args[@]}" "${extra[@]}" >"$tmp/native"
    "${emu[@]}" "$other" "${args[@]}" "${extra[@]}" >"$tmp/other"
    grep -qE "target MSE .* (first reached at round|not reached in)" \
        "$tmp/native" || { echo "FAIL: $variant: no final line"; fails=1; }
    if cmp -s "$tmp/native" "$tmp/other"; then
        echo "sim_cross_compare: $variant: identical," \
             "$(wc -c <"$tmp/native") bytes, sha256" \
             "$(sha256sum <"$tmp/native" | cut -c1-16)"
    else
        echo "FAIL: $variant: outputs differ (< native, > other):"
        diff "$tmp/native" "$tmp/other" | head -20
        fails=1
    fi
done
exit "$fails"
