#!/bin/sh
# The main job on the embedded simulator: the seed-000 campaign (examples/seed000-mtp.yaml: MTP
# 1 and 3 against MTP 2, then batch 1024 on the best step count) on the simulator calibrated to
# the seed, time-scaled; prints the verdict table and leaves the audit archive with its reports.
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
