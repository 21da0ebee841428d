#!/bin/sh
# The simulator's figures are its model's: on the seed-000 profile (profiles/seed000-vl-mtp.yaml),
# a 1K-token prompt with 2048 output tokens and a 126K-token prompt with 64, one request alone,
# measured by `servetune bench` at each of SPEEDS (default "max 200") with BUSY (default: one per
# core) busy loops of this script's own running, against `servetune sim --explain-request P,N`
# (the cost model's TTFT and decode rate for that request). Twice: with speculation off (every
# step deterministic) and as profiled (MTP 2: each step's accepted drafts are drawn, so a single
# request's decode rate scatters around the expected rate the model gives; so as profiled it also
# sends 40 such 2048-token requests one after another and compares their mean rate with the
# expected one). Target: TTFT and decode within 0.5%. Measured against the project's own
# simulator.
set -eu
. "$(dirname "$0")/common.sh"
SPEEDS=${SPEEDS:-"max 200"}
BUSY=${BUSY:-$NCPU}
PROFILE=profiles/seed000-vl-mtp.yaml
busy_start "$BUSY"
echo "sim-exact: $BUSY busy loop(s) on $NCPU core(s)"
rc=0
for spec in off mtp2; do
    if [ "$spec" = off ]; then
        SETS="--set engine.spec_method=none --set engine.spec_steps=0 --set engine.startup_s=0"
    else
        SETS="--set engine.startup_s=0"
    fi
    for speed in $SPEEDS; do
        # shellcheck disable=SC2086
        start_sim --profile "$PROFILE" $SETS --speed "$speed"
        for case in "1024 2048" "126000 64"; do
            set -- $case
            rcp="$OUT/exact-$spec-$speed-$1.jsonl"
            "$BIN" bench --url "http://$ADDR" --workload fixed --input-len "$1" --output-len "$2" \
                --ignore-eos --requests 1 --quiet --no-progress --receipts "$rcp" >/dev/null
            p=$(jq_py_line "$rcp" 'r["prompt_tokens"]')
            # shellcheck disable=SC2086
            "$BIN" sim --profile "$PROFILE" $SETS --explain-request "$p,$2" --json >"$rcp.model"
            python3 - "$rcp" "$rcp.model" "$spec" "$speed" <<'PY' || rc=1
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m = json.load(open(sys.argv[2]))["request"]
ttft = (r["v_first_content_ns"] - r["v_intended_ns"]) / 1e9
dec = (r["completion_tokens"] - 1) / ((r["v_last_content_ns"] - r["v_first_content_ns"]) / 1e9)
dt = 100 * (ttft / m["ttft_s"] - 1)
dd = 100 * (dec / m["decode_tps"] - 1)
ok = abs(dt) <= 0.5 and (sys.argv[3] != "off" or abs(dd) <= 0.5)
print("spec %-4s --speed %-4s prompt %6d out %4d: TTFT %.6f s vs model %.6f s (%+.5f%%), decode %.3f vs %.3f tok/s (%+.4f%%)%s; lag %.2f ms%s"
      % (sys.argv[3], sys.argv[4], r["prompt_tokens"], r["completion_tokens"], ttft, m["ttft_s"], dt,
         dec, m["decode_tps"], dd, "" if sys.argv[3] == "off" else " (drawn acceptance)",
         r["sim_lag_ms"], "" if ok else "  MISSED 0.5%"))
sys.exit(0 if ok else 1)
PY
        done
        if [ "$spec" = mtp2 ]; then
            rcp="$OUT/exact-$spec-$speed-mean.jsonl"
            "$BIN" bench --url "http://$ADDR" --workload fixed --input-len 1024 --output-len 2048 \
                --ignore-eos --requests 40 --quiet --no-progress --receipts "$rcp" >/dev/null
            p=$(jq_py_line "$rcp" 'r["prompt_tokens"]')
            # shellcheck disable=SC2086
            "$BIN" sim --profile "$PROFILE" $SETS --explain-request "$p,2048" --json >"$rcp.model"
            python3 - "$rcp" "$rcp.model" "$speed" <<'PY' || rc=1
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
m = json.load(open(sys.argv[2]))["request"]
d = [(r["completion_tokens"] - 1) / ((r["v_last_content_ns"] - r["v_first_content_ns"]) / 1e9)
     for r in rs]
mean = sum(d) / len(d)
dd = 100 * (mean / m["decode_tps"] - 1)
print("spec mtp2 --speed %-4s prompt %6d out 2048, %d requests: mean decode %.3f vs expected %.3f tok/s (%+.4f%%; one request %.3f to %.3f)%s"
      % (sys.argv[3], rs[0]["prompt_tokens"], len(d), mean, m["decode_tps"], dd, min(d), max(d),
         "" if abs(dd) <= 0.5 else "  MISSED 0.5%"))
sys.exit(0 if abs(dd) <= 0.5 else 1)
PY
        fi
        stop_sim
    done
done
exit $rc
