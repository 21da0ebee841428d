#!/bin/sh
# The decision engine's error-rate table (README, "Verdicts under noise"): bench/decide_error.c over
# every cell, 10,000 trials each, the cells spread over the cores (a cell's seed follows from its
# coordinates, so the rows do not depend on how they are split). Pure arithmetic on seeded draws:
# the same table from the same build and libm, whatever the machine's load. Usage: sh bench/decide_error.sh [BUILD_DIR] [TRIALS]
set -eu
B=${1:-build}
T=${2:-10000}
exe="$B/bench/decide_error"
[ -x "$exe" ] || { echo "decide_error.sh: build first ($exe missing)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
i=0
for order in interleaved blocked; do
    for shape in single seed000 seed003; do
        for m in 1 3; do
            for sp in 0 0.03; do
                # Blocked order differs from interleaved only under a bring-up spread.
                if [ "$order" = blocked ] && [ "$sp" = 0 ]; then continue; fi
                for cv in 0.02 0.05 0.10 0.20; do
                    i=$((i + 1))
                    printf '%04d --order %s --shape %s --metrics %s --spread %s --cv %s\n' \
                        "$i" "$order" "$shape" "$m" "$sp" "$cv" >> "$dir/jobs"
                done
            done
        done
    done
done
# shellcheck disable=SC2016
xargs -P "$(nproc)" -L 1 sh -c 'n=$1; shift; "$0" --trials "'"$T"'" --no-header "$@" > "'"$dir"'/$n.out"' \
    "$exe" < "$dir/jobs"
echo "| shape | order | ranked | CV | bring-up | effect | promote | reject | mean repeats arm / baseline |"
echo "|---|---|---|---|---|---|---|---|---|"
cat "$dir"/[0-9]*.out
