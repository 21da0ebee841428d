#!/bin/sh
# Resource bounds over time: a long closed-loop run (default 1 hour, DUR seconds) of 64 streams
# against the fixed-timing simulator (TTFT 100 ms, ITL 20 ms, 200 tokens), sampling the client's
# VmRSS and open descriptors every 10 s. Prints the peak RSS, the RSS at 10% of the run and at the
# end, the growth over the second half (linear fit, KiB per hour) and the peak descriptor count.
# Flat memory = growth in the second half within noise (a few hundred KiB per hour).
# Usage: sh bench/soak.sh      (BIN, OUT, DUR, CC override)
set -eu
. "$(dirname "$0")/common.sh"
DUR=${DUR:-3600}
CC=${CC:-64}
start_sim --ttft-ms 100 --itl-ms 20 --tokens-per-chunk 1
csv="$OUT/soak-samples.csv"
echo "t_s,rss_kib,fds" >"$csv"
# shellcheck disable=SC2086
$CLIENT_PIN "$BIN" bench --url "http://$ADDR" --concurrency "$CC" --duration "$DUR" \
    --requests 1000000000 --input-len 128 --output-len 200 --ignore-eos --no-progress --quiet \
    --json "$OUT/soak.json" --receipts "$OUT/soak-receipts.jsonl" &
pid=$!
t0=$(date +%s)
while kill -0 $pid 2>/dev/null; do
    rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$pid/status 2>/dev/null || true)
    fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l || true)
    [ -n "$rss" ] && echo "$(($(date +%s) - t0)),$rss,$fds" >>"$csv"
    sleep 10
done
wait $pid
stop_sim
python3 - "$csv" "$OUT/soak.json" "$DUR" <<'PY'
import csv, json, sys
rows = [(float(r["t_s"]), int(r["rss_kib"]), int(r["fds"])) for r in csv.DictReader(open(sys.argv[1]))]
d = json.load(open(sys.argv[2]))
dur = float(sys.argv[3])
peak = max(r[1] for r in rows)
at10 = next(r[1] for r in rows if r[0] >= 0.1 * dur) if any(r[0] >= 0.1 * dur for r in rows) else rows[0][1]
half = [r for r in rows if r[0] >= rows[-1][0] / 2]
n = len(half)
mt = sum(r[0] for r in half) / n
mr = sum(r[1] for r in half) / n
var = sum((r[0] - mt) ** 2 for r in half)
slope = sum((r[0] - mt) * (r[1] - mr) for r in half) / var * 3600 if var > 0 else 0.0
print("soak: %.0f s, %d requests ok, %d failed; client RSS peak %d KiB, at 10%% %d KiB, at the end %d KiB;"
      " second-half growth %+.0f KiB/hour; peak descriptors %d (%d samples)"
      % (rows[-1][0], d["requests"]["ok"], d["requests"]["failed"], peak, at10, rows[-1][1], slope,
         max(r[2] for r in rows), len(rows)))
PY
