#!/bin/sh
# Figure 3, scale: 10,000 concurrent streams held open (TTFT 100 ms, then one token a second for
# 30 s), and the client's memory per stream: peak VmRSS of the client while all streams are open,
# minus its VmRSS with one stream open, divided by the stream count (target: <= 16 KiB/stream).
set -eu
. "$(dirname "$0")/common.sh"
N=${N:-10000}
ulimit -n "$(ulimit -Hn)"
start_sim --ttft-ms 100 --itl-ms 1000 --tokens-per-chunk 1

measure() { # $1 = streams; prints peak RSS in KiB while they are open, and the receipts summary
    conc=$1
    # shellcheck disable=SC2086
    $CLIENT_PIN "$BIN" bench --url "http://$ADDR" --concurrency "$conc" --requests "$conc" \
        --input-len 16 --output-len 30 --ignore-eos --no-progress --quiet \
        --timeout-connect 60000 --json "$OUT/scale-$conc.json" &
    pid=$!
    peak=0
    fdpeak=0
    while kill -0 $pid 2>/dev/null; do
        rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$pid/status 2>/dev/null || echo 0)
        [ -n "$rss" ] && [ "$rss" -gt "$peak" ] && peak=$rss
        fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l || echo 0)
        [ "$fds" -gt "$fdpeak" ] && fdpeak=$fds
        sleep 0.5
    done
    wait $pid
    echo "$fdpeak" >"$OUT/scale-$conc.fds"
    echo "$peak"
}

one=$(measure 1)
many=$(measure "$N")
stop_sim
python3 - "$OUT/scale-$N.json" "$one" "$many" "$N" "$(cat "$OUT/scale-$N.fds")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
one, many, n, fds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print("scale: %d streams, %d ok, %d failed %s; client peak RSS %d KiB (1 stream: %d KiB): %.1f KiB per stream;"
      " peak descriptors %d"
      % (n, d["requests"]["ok"], d["requests"]["failed"], d["requests"]["errors"], many, one,
         (many - one) / n, fds))
PY
