#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# convergence_table.sh - rounds the simulator needs to bring the swarm's MSE
# (mean over live peers and elements of (x - weighted mean)^2) to 1e-9,
# from standard normal float32 vectors of 16 elements, for several swarm
# sizes N, group sizes M and per-round miss probabilities P, averaged over
# 10 seeds. Everything else is moshpit-sim's default: weights 1, balanced
# grid positions, d chosen from N, no loss, no churn.
#
# usage: tests/sim/convergence_table.sh [path/to/moshpit-sim]
# environment: SIZES (default "256 1024 4096 10000"), GROUPS_M ("8 16"),
#              PROBS ("0 0.005 0.01"), SEEDS (10), JOBS (2), MAX_ROUNDS (60)
# Prints a markdown table: mean rounds (min-max over the seeds); a cell
# with seeds that never reached the target says how many did.
set -euo pipefail

SIM=${1:-build-sim/tests/sim/moshpit-sim}
SIZES=${SIZES:-"256 1024 4096 10000"}
GROUPS_M=${GROUPS_M:-"8 16"}
PROBS=${PROBS:-"0 0.005 0.01"}
SEEDS=${SEEDS:-10}
JOBS=${JOBS:-2}
MAX_ROUNDS=${MAX_ROUNDS:-60}
TARGET=1e-9

if [ ! -x "$SIM" ]; then
    echo "convergence_table.sh: no moshpit-sim at $SIM" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# one line per run: N M P seed
for n in $SIZES; do
    for m in $GROUPS_M; do
        for p in $PROBS; do
            for s in $(seq 1 "$SEEDS"); do
                echo "$n $m $p $s"
            done
        done
    done
done >"$work/runs"

# each run writes "<rounds or NA>" to its own file
export SIM TARGET MAX_ROUNDS work
xargs -P "$JOBS" -L 1 sh -c '
    out=$("$SIM" --peers "$0" --group-size "$1" --fail-prob "$2" \
        --seed "$3" --rounds "$MAX_ROUNDS" --target-mse "$TARGET" \
        --stop --quiet) || { echo "run $0 $1 $2 $3 failed" >&2; exit 255; }
    r=$(printf "%s\n" "$out" | sed -n "s/.*first reached at round \([0-9]*\).*/\1/p")
    echo "${r:-NA}" >"$work/r_$0_$1_$2_$3"
' <"$work/runs"

printf '| N | M | grid |'
for p in $PROBS; do printf ' P = %s |' "$p"; done
printf '\n|---|---|---|'
for p in $PROBS; do printf -- '---|'; done
printf '\n'
for n in $SIZES; do
    for m in $GROUPS_M; do
        # the layout as the peers pick it (d and the sides of the grid)
        grid=$("$SIM" --peers "$n" --group-size "$m" --layout |
               sed -n 's/^d [0-9]* grid //p')
        printf '| %s | %s | %s |' "$n" "$m" "$grid"
        for p in $PROBS; do
            cat "$work"/r_"$n"_"$m"_"$p"_* | awk -v seeds="$SEEDS" '
                $1 != "NA" { s += $1; k++;
                             if (k == 1 || $1 < lo) lo = $1;
                             if ($1 > hi) hi = $1 }
                END {
                    if (k == 0) { printf " not reached |"; exit }
                    printf " %.1f (%d-%d)", s / k, lo, hi
                    if (k < seeds) printf ", %d of %d reached", k, seeds
                    printf " |"
                }'
        done
        printf '\n'
    done
done
