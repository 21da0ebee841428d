#!/bin/sh
# Figure 4, accuracy: 1,000 concurrent streams, TTFT 200 ms, ITL 20 ms. The client's receive
# times are compared with the times the simulator wrote each event (its --trace, same monotonic
# clock). Target: p99 of |client - server| <= 0.1 ms for first tokens and for every chunk.
#
# Two arrangements of the same 1,000 streams:
#  spread  - open loop at 847 req/s (each request lasts 200 + 49 x 20 = 1,180 ms, so about 1,000
#            are in flight), arrivals evenly spaced: events reach the client evenly spread.
#  inphase - closed loop, all 1,000 started at once: every stream writes in the same instant,
#            so each 20 ms the client receives a burst of 1,000 events at once.
set -eu
. "$(dirname "$0")/common.sh"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
run() { # $1 = name, rest = bench load options
    name=$1
    shift
    start_sim --ttft-ms 200 --itl-ms 20 --tokens-per-chunk 1 --trace "$OUT/accuracy-$name-trace.jsonl"
    # shellcheck disable=SC2086
    $CLIENT_PIN "$BIN" bench --url "http://$ADDR" "$@" --input-len 16 --output-len 50 --ignore-eos \
        --no-progress --quiet --json "$OUT/accuracy-$name.json" --chunk-times \
        --receipts "$OUT/accuracy-$name.jsonl"
    stop_sim
    echo "accuracy ($name):"
    python3 "$(dirname "$0")/lag.py" "$OUT/accuracy-$name.jsonl" "$OUT/accuracy-$name-trace.jsonl" \
        --warmup-ids 1000
}
run spread --rate 847 --arrival constant --requests 4000 --warmup 1000
run inphase --concurrency 1000 --requests 3000 --warmup 1000
