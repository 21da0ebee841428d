#!/bin/sh
# Figure 4, accuracy: 1,000 concurrent streams, TTFT 200 ms, ITL 20 ms. The client's receive
# times are compared with the times the simulator wrote each event (its --trace, same monotonic
# clock). Target: p99 of |client - server| <= 0.1 ms for first tokens and for every chunk.
set -eu
. "$(dirname "$0")/common.sh"
ulimit -n 65536 2>/dev/null || true
REQ=${REQ:-3000}
start_sim --ttft-ms 200 --itl-ms 20 --tokens-per-chunk 1 --trace "$OUT/accuracy-trace.jsonl"
# shellcheck disable=SC2086
$CLIENT_PIN "$BIN" bench --url "http://$ADDR" --concurrency 1000 --requests "$REQ" --warmup 1000 \
    --input-len 16 --output-len 50 --ignore-eos --no-progress --quiet --json "$OUT/accuracy.json" \
    --chunk-times --receipts "$OUT/accuracy.jsonl"
stop_sim
python3 "$(dirname "$0")/lag.py" "$OUT/accuracy.jsonl" "$OUT/accuracy-trace.jsonl" --warmup-ids 1000
