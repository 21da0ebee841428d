#!/bin/sh
# How long the whole campaigns take on the simulator, unpaced (--sim-speed max), on a quiet
# machine: the seed-003 campaign (examples/seed003-hit90.yaml: five arms, screening and full, the
# 600 s soak and the 512K request included; target <= 60 s) and `make demo`'s seed-000 campaign
# (scripts/demo.sh; target <= 20 s after the build). Prints each wall time and the choice.
# Measured against the project's own simulator.
set -eu
. "$(dirname "$0")/common.sh"
out="$OUT/time-seed003"
rm -rf "$out"
t0=$(date +%s.%N)
"$BIN" campaign run examples/seed003-hit90.yaml --out "$out" --sim-speed max --nvidia-smi "" \
    >"$out.log" 2>&1
t1=$(date +%s.%N)
echo "seed003-hit90 --sim-speed max: $(python3 -c "print('%.1f' % ($t1 - $t0))") s wall, chosen $(jq_py "$out/summary.json" 'd["chosen"]'), complete $(jq_py "$out/summary.json" 'd["complete"]')"
t0=$(date +%s.%N)
DEMO_OUT="$OUT/time-demo" sh scripts/demo.sh "$BIN" >"$OUT/time-demo.log" 2>&1
t1=$(date +%s.%N)
echo "make demo (scripts/demo.sh, after the build): $(python3 -c "print('%.1f' % ($t1 - $t0))") s wall, chosen $(jq_py "$OUT/time-demo/seed000/summary.json" 'd["chosen"]')"
