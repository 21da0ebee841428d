#!/bin/sh
# Figure 1, ingestion with tokens in bursts: TTFT 0, ITL 0, one token per chunk, 1,000 tokens per
# request, concurrency 64. Reports output tokens/s and client CPU per token (target: >= 1,500,000
# tokens/s parsed on one client core, i.e. <= 0.67 us of client CPU per token).
set -eu
. "$(dirname "$0")/common.sh"
REQ=${REQ:-3200}
start_sim --ttft-ms 0 --itl-ms 0 --tokens-per-chunk 1
# shellcheck disable=SC2086
$CLIENT_PIN "$BIN" bench --url "http://$ADDR" --concurrency 64 --requests "$REQ" --warmup 64 \
    --input-len 16 --output-len 1000 --ignore-eos --no-progress --quiet --json "$OUT/ingest.json"
stop_sim
jq_py "$OUT/ingest.json" '"ingest: %.0f output tok/s wall, %.3f us client CPU/token = %.0f tok/s per client core, %d failed" % (d["output_tokens_per_s"], d["client"]["cpu_us_per_token"], 1e6/d["client"]["cpu_us_per_token"], d["requests"]["failed"])'
