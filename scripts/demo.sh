#!/bin/sh
# The main job on the embedded simulator: start `servetune sim` on a free loopback port, run a
# short `servetune bench` against it, print the summary table, stop the simulator.
# Usage: scripts/demo.sh [path/to/servetune]
set -eu
bin=${1:-build/servetune}
out=${DEMO_OUT:-runs/demo}
mkdir -p "$out"
log="$out/sim.log"

"$bin" sim --listen 127.0.0.1:0 --ttft-ms 200 --itl-ms 20 --tokens-per-chunk 1 >"$log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null || true' EXIT INT TERM

addr=""
i=0
while [ $i -lt 100 ]; do
    addr=$(sed -n 's/^listening on //p' "$log" | head -n 1)
    [ -n "$addr" ] && break
    if ! kill -0 $sim 2>/dev/null; then
        echo "demo: the simulator exited:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.05
    i=$((i + 1))
done
if [ -z "$addr" ]; then
    echo "demo: the simulator did not report its address" >&2
    exit 1
fi

echo "demo: simulator on $addr (TTFT 200 ms, ITL 20 ms, 1 token per chunk)"
echo "demo: servetune bench --url http://$addr --api chat --concurrency 64 --requests 640 --input-len 128 --output-len 64 --ignore-eos"
"$bin" bench --url "http://$addr" --api chat --concurrency 64 --requests 640 --warmup 64 \
    --input-len 128 --output-len 64 --ignore-eos --no-progress \
    --json "$out/summary.json" --receipts "$out/receipts.jsonl"
echo "demo: summary in $out/summary.json, receipts in $out/receipts.jsonl"
