#!/bin/sh
# Prints the seed stagings of docs/simulator.md from `servetune sim --explain --json`: KV pools
# and speeds of the seed-000 and seed-003 arms. Usage: scripts/stage-seeds.sh [build/servetune]
set -eu
B=${1:-build/servetune}
P0=profiles/seed000-vl-mtp.yaml
P3=profiles/seed003-mla-moe-8gpu.yaml
EAGLE="--set engine.spec_method=eagle --set engine.spec_steps=4 --set engine.spec_accept=[0.815,0.815,0.815,0.815] --set engine.spec_accept_halflife_tokens=0"

show() { # $1 = label, rest = sim arguments
    label=$1
    shift
    # shellcheck disable=SC2086
    "$B" sim "$@" --explain --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
label = sys.argv[1]
print("%-34s pool %9s tokens  KV budget %6.3f GiB  decode@1K %6.1f  @128K %6.1f tok/s  prefill 128K %6.2f s  fits %s" % (
    label, format(d["kv_pool_tokens"], ","), d["kv_budget_bytes"] / 2**30,
    d["decode_tps"]["1024"], d["decode_tps"]["131072"], d["prefill_s"]["131072"], d["fits"]))
' "$label"
}

echo "# seed 000: MTP steps at equal budget (capture sizes follow the step count), then batch 1024"
show "MTP 1, graphs [1,2]" --profile $P0 --set engine.spec_steps=1 --set "engine.graph_sizes=[1,2]"
show "MTP 2 (baseline), graphs [1,3]" --profile $P0
show "MTP 3, graphs [1,4]" --profile $P0 --set engine.spec_steps=3 --set "engine.graph_sizes=[1,4]"
show "MTP 2, max_batched_tokens 1024" --profile $P0 --set engine.max_batched_tokens=1024
echo "# seed 003: arms (SGLang)"
show "A1 TP2PP4 @0.85" --profile $P3 --set engine.tp=2 --set engine.pp=4 --set engine.mem_fraction=0.85
show "A6 TP4PP2 @0.90 (profile)" --profile $P3
# shellcheck disable=SC2086
show "A3 TP8 + EAGLE @0.88" --profile $P3 --set engine.tp=8 --set engine.pp=1 --set engine.mem_fraction=0.88 $EAGLE
# shellcheck disable=SC2086
show "DP attention dp2 + EAGLE @0.88" --profile $P3 --set engine.tp=8 --set engine.pp=1 --set engine.dp_attention=2 --set engine.mem_fraction=0.88 $EAGLE
# shellcheck disable=SC2086
show "DP attention dp4 + EAGLE @0.88" --profile $P3 --set engine.tp=8 --set engine.pp=1 --set engine.dp_attention=4 --set engine.mem_fraction=0.88 $EAGLE
