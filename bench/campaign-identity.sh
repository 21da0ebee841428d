#!/bin/sh
# The simulator's figures do not move with host load or speed: the seed-000 and seed-003
# campaigns (examples/seed000-mtp.yaml, examples/seed003-hit90.yaml) RUNS times (default 3) at
# each of SPEEDS (default "max 500": unpaced, and paced at 500 virtual seconds per real second),
# every run while BUSY (default: one per core) busy loops of this script's own keep the cores
# busy, and every summary.json compared with the first run's, field by field (sim_speed, the
# setting, aside: bench/summary-same.py). Prints each run's wall time and the comparison; exits 1
# when a summary differs. Measured against the project's own simulator.
set -eu
. "$(dirname "$0")/common.sh"
RUNS=${RUNS:-3}
SPEEDS=${SPEEDS:-"max 500"}
SEEDS=${SEEDS:-"seed000-mtp seed003-hit90"}
BUSY=${BUSY:-$NCPU}
busy_start "$BUSY"
mkdir -p "$OUT/identity"
echo "campaign-identity: $BUSY busy loop(s) on $NCPU core(s); runs $RUNS; speeds $SPEEDS"
rc=0
for seed in $SEEDS; do
    ref=""
    all=""
    for speed in $SPEEDS; do
        r=1
        while [ "$r" -le "$RUNS" ]; do
            out="$OUT/identity/$seed-$speed-r$r"
            rm -rf "$out"
            t0=$(date +%s.%N)
            "$BIN" campaign run "examples/$seed.yaml" --out "$out" --sim-speed "$speed" \
                --nvidia-smi "" >"$out.log" 2>&1 || { echo "$seed $speed r$r: exit $?"; rc=1; }
            t1=$(date +%s.%N)
            echo "$seed --sim-speed $speed run $r: $(python3 -c "print('%.1f' % ($t1 - $t0))") s wall, chosen $(jq_py "$out/summary.json" 'd["chosen"]')"
            if [ -z "$ref" ]; then ref="$out/summary.json"; else all="$all $out/summary.json"; fi
            r=$((r + 1))
        done
    done
    # shellcheck disable=SC2086
    python3 "$(dirname "$0")/summary-same.py" "$ref" $all || rc=1
done
exit $rc
