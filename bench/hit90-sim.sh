#!/bin/sh
# Seed 003's hit90 sweep against the simulator's model of the winning arm (A6: TP4 PP2, SGLang,
# pool 647,040): 128K prompts with a 90% shared prefix, 512 output tokens, concurrency 1, 2, 3,
# 4, 8, 16, 2 x cc requests a point, flush + verify + warm before each point. The simulator runs
# at most SPEED (default 100; max: unpaced) times faster than the modelled server; the client
# measures in its virtual time from its stamps, so the figures are the same at every SPEED.
# Prints the sweep's table, then the virtual duration of its measured points (on the modelled
# server's clock) against the wall time of the whole command and of its load phases (canary,
# warm-up and points). Target: the sweep finishes >= 100x faster than its virtual duration. Paced,
# the loads run at most SPEED times faster than their virtual time; the rest of the command
# (building the workload through the server's tokenizer, preflight) only adds wall time.
set -eu
. "$(dirname "$0")/common.sh"
SPEED=${SPEED:-100}
REPEATS=${REPEATS:-1}
PROFILE=${PROFILE:-profiles/seed003-mla-moe-8gpu.yaml}
# The modelled start-up (420 virtual seconds) is not part of the sweep: skip it.
start_sim --profile "$PROFILE" --dialect sglang --speed "$SPEED" --set engine.startup_s=0
python3 -c "
import sys, time, urllib.request
for _ in range(200):
    try:
        urllib.request.urlopen('http://$ADDR/health', timeout=2)
        sys.exit(0)
    except Exception:
        time.sleep(0.05)
sys.exit('bench: simulator not ready')"
# shellcheck disable=SC2086
$CLIENT_PIN "$BIN" sweep --url "http://$ADDR" --workload shared-prefix --input-len 131072 \
    --prefix-frac 0.9 --output-len 512 --concurrency 1,2,3,4,8,16 --requests-per-cc 2 \
    --repeats "$REPEATS" --no-progress --out "$OUT/hit90"
stop_sim
jq_py "$OUT/hit90/sweep.json" '"hit90-sim: virtual %.1f s (the measured points, on the simulator'"'"'s clock; --speed '"$SPEED"'); wall %.1f s for the whole command, %.1f s of it in loads (%.1f s building the workload: %d tokenizer calls): %.1fx faster than virtual for the command, %.1fx for its loads; hit rates %s; the clock %s" % (d["virtual_s"], d["wall_s"], d["load_wall_s"], d["wall_s"] - d["load_wall_s"], d["workload"]["counter_calls"], d["virtual_s"] / d["wall_s"], d["virtual_s"] / d["load_wall_s"], [round(p["hit_rate"], 4) for p in d["points"]], "held" if d["sim_clock"]["valid"] else d["sim_clock"]["invalid_reason"])'
