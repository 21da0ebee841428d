#!/bin/sh
# Figure 2, ingestion with one token per write: TTFT 0, ITL 5 ms, 200 tokens, concurrency 512.
# Offered: each stream sends 200 tokens over 199 x 5 ms, so 512 streams offer
# 512 x 200 / 0.995 s = 102,915 tokens/s. Reports delivered/offered and client CPU per token
# (target: >= 99% delivered with <= 3 us of client CPU per token).
set -eu
. "$(dirname "$0")/common.sh"
REQ=${REQ:-4096}
start_sim --ttft-ms 0 --itl-ms 5 --tokens-per-chunk 1 --trace "$OUT/onewrite-trace.jsonl"
# shellcheck disable=SC2086
$CLIENT_PIN "$BIN" bench --url "http://$ADDR" --concurrency 512 --requests "$REQ" --warmup 512 \
    --input-len 16 --output-len 200 --ignore-eos --no-progress --quiet --json "$OUT/onewrite.json" \
    --chunk-times --receipts "$OUT/onewrite.jsonl"
stop_sim
jq_py "$OUT/onewrite.json" '"onewrite: %.0f tok/s delivered of %.0f offered by the schedule (%.1f%%), p50 request span %.1f ms (ideal 995), %.3f us client CPU/token, %d failed" % (d["output_tokens_per_s"], 512*200/0.995, 100*d["output_tokens_per_s"]/(512*200/0.995), d["e2e_ms"]["p50"], d["client"]["cpu_us_per_token"], d["requests"]["failed"])'
python3 "$(dirname "$0")/lag.py" "$OUT/onewrite.jsonl" "$OUT/onewrite-trace.jsonl" --warmup-ids 512
