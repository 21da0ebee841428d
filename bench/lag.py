#!/usr/bin/env python3
"""Compares what the client saw with what the simulator wrote.

usage: lag.py RECEIPTS.jsonl TRACE.jsonl [--warmup-ids N]

Both files use CLOCK_MONOTONIC of one machine: the receipt gives t_sent_ns plus each content
chunk's offset (bench --chunk-times), the trace gives the time the simulator handed each event to
its socket layer (sim --trace). For every content chunk of every measured request it computes
lag = client arrival - server write, and prints the distribution of |lag| for first tokens and for
all chunks, plus tokens written and received per second over the same window."""
import json
import sys


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 1)) - 1))
    return xs[k]


def main():
    rpath, tpath = sys.argv[1], sys.argv[2]
    warm = 0
    if "--warmup-ids" in sys.argv:
        warm = int(sys.argv[sys.argv.index("--warmup-ids") + 1])
    writes = {}
    with open(tpath) as f:
        for line in f:
            e = json.loads(line)
            if e.get("tokens", 0) > 0:
                writes.setdefault(e["rid"], []).append((e["t_ns"], e["tokens"]))
    first, every = [], []
    missing = 0
    t_lo, t_hi = None, None
    srv_tokens = cli_tokens = 0
    with open(rpath) as f:
        recs = [json.loads(l) for l in f]
    for r in recs:
        if r["id"] < warm or not r["ok"]:
            continue
        w = writes.get("st-%d" % r["id"])
        ch = r.get("chunks")
        if not w or ch is None or len(w) != len(ch):
            missing += 1
            continue
        for i, (off, _b, _k) in enumerate(ch):
            lag = (r["t_sent_ns"] + off - w[i][0]) / 1e6
            every.append(lag)
            if i == 0:
                first.append(lag)
        srv_tokens += sum(k for _, k in w)
        cli_tokens += r["completion_tokens"]
        lo, hi = r["t_intended_ns"], r["t_end_ns"]
        t_lo = lo if t_lo is None else min(t_lo, lo)
        t_hi = hi if t_hi is None else max(t_hi, hi)
    span = (t_hi - t_lo) / 1e9 if t_lo is not None else float("nan")
    absf = [abs(x) for x in first]
    abse = [abs(x) for x in every]
    print("requests compared: %d (unmatched %d)" % (len(first), missing))
    print("first token  |lag| ms: p50 %.4f p90 %.4f p99 %.4f max %.4f" % (
        pct(absf, .5), pct(absf, .9), pct(absf, .99), max(absf) if absf else float("nan")))
    print("every chunk  |lag| ms: p50 %.4f p90 %.4f p99 %.4f max %.4f (n=%d)" % (
        pct(abse, .5), pct(abse, .9), pct(abse, .99), max(abse) if abse else float("nan"), len(abse)))
    neg = [x for x in every if x < 0]
    print("client read before write(2) returned: %d chunks, at most %.4f ms early" % (
        len(neg), -min(neg) if neg else 0.0))
    print("tokens written by the server %d, received %d, over %.3f s: %.0f vs %.0f tok/s (%.2f%%)" % (
        srv_tokens, cli_tokens, span, srv_tokens / span, cli_tokens / span,
        100.0 * cli_tokens / srv_tokens if srv_tokens else float("nan")))


main()
