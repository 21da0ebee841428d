#!/bin/sh
# The main job on the embedded simulator: the seed-000 campaign (examples/seed000-mtp.yaml: MTP
# 1 and 3 against MTP 2, then batch 1024 on the best step count) on the simulator calibrated to
# the seed, time-scaled; then examples/noisy-sim.yaml (an arm identical to the baseline and one
# 15% faster under staged noise); prints the verdict tables and leaves the audit archives.
# Usage: scripts/demo.sh [path/to/servetune]     (DEMO_OUT, DEMO_SPEED override the defaults)
set -eu
bin=${1:-build/servetune}
out=${DEMO_OUT:-runs/demo}
speed=${DEMO_SPEED:-max}
archive="$out/seed000"
mkdir -p "$out"
rm -rf "$archive"

echo "demo: servetune campaign run examples/seed000-mtp.yaml --out $archive --sim-speed $speed"
echo "demo: (--sim-speed $speed: the simulator's figures are its model's at any speed; max runs"
echo "demo:  it as fast as the CPU allows, a few seconds)"
"$bin" campaign run examples/seed000-mtp.yaml --out "$archive" --sim-speed "$speed"
echo "demo: reports in $archive/report.md and $archive/report.html; summary in $archive/summary.json"

# Verdicts under noise: the same rules on a simulator with 5% noise per request (sequential
# repeats until the tests can tell; examples/noisy-sim.yaml).
noisy="$out/noisy"
rm -rf "$noisy"
nspeed=${DEMO_NOISY_SPEED:-max}
echo "demo: servetune campaign run examples/noisy-sim.yaml --out $noisy --sim-speed $nspeed"
echo "demo: (an arm identical to the baseline and one 15% faster, under 5% noise per request)"
"$bin" campaign run examples/noisy-sim.yaml --out "$noisy" --sim-speed "$nspeed"
echo "demo: the comparisons and their intervals: $noisy/report.md (section Comparisons)"
