#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# robust_table.sh - the simulated swarm under attack: B Byzantine peers
# (every value 1e20 before each call, protocol followed) among N, groups of
# M = 8, for each aggregation rule. Per cell: err after ROUNDS rounds (the
# rms distance of the honest peers from the honest peers' initial weighted
# mean; values are standard normal, so 1 is the spread of the data), the
# worst over the seeds, and the mean round at which the honest peers agree
# (mse <= 1e-9), with how many seeds got there.
#
# usage: tests/sim/robust_table.sh [path/to/moshpit-sim]
# environment: SIZES (default "256 1024"), BYZ ("0 1 4 16"), SEEDS (5),
#              ROUNDS (10), COUNT (64), JOBS (2)
set -euo pipefail

SIM=${1:-build/tests/sim/moshpit-sim}
SIZES=${SIZES:-"256 1024"}
BYZ=${BYZ:-"0 1 4 16"}
RULES="mean trimmed clip"
SEEDS=${SEEDS:-5}
ROUNDS=${ROUNDS:-10}
COUNT=${COUNT:-64}
JOBS=${JOBS:-2}

if [ ! -x "$SIM" ]; then
    echo "robust_table.sh: no moshpit-sim at $SIM" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for n in $SIZES; do
    for b in $BYZ; do
        for a in $RULES; do
            for s in $(seq 1 "$SEEDS"); do
                echo "$n $b $a $s"
            done
        done
    done
done >"$work/runs"

# each run writes "<err> <consensus round or NA>" to its own file
export SIM ROUNDS COUNT work
xargs -P "$JOBS" -L 1 sh -c '
    out=$("$SIM" --peers "$0" --byzantine "$1" --aggregation "$2" \
        --seed "$3" --rounds "$ROUNDS" --count "$COUNT" --quiet) ||
        { echo "run $0 $1 $2 $3 failed" >&2; exit 255; }
    e=$(printf "%s\n" "$out" | sed -n "s/^err \([^ ]*\) after.*/\1/p")
    r=$(printf "%s\n" "$out" | sed -n "s/.*first reached at round \([0-9]*\).*/\1/p")
    echo "${e:-0} ${r:-NA}" >"$work/r_$0_$1_$2_$3"
' <"$work/runs"

printf '| N | B |'
for a in $RULES; do printf ' %s |' "$a"; done
printf '\n|---|---|'
for a in $RULES; do printf -- '---|'; done
printf '\n'
for n in $SIZES; do
    for b in $BYZ; do
        printf '| %s | %s |' "$n" "$b"
        for a in $RULES; do
            cat "$work"/r_"$n"_"$b"_"$a"_* | awk -v seeds="$SEEDS" '
                { if ($1 + 0 > worst) worst = $1 + 0
                  if ($2 != "NA") { s += $2; k++ } }
                END {
                    printf " %.3g,", worst
                    if (k == 0) printf " no consensus |"
                    else if (k < seeds)
                        printf " agree at %.1f (%d of %d) |", s / k, k, seeds
                    else printf " agree at %.1f |", s / k
                }'
        done
        printf '\n'
    done
done
