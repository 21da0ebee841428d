"""A server that closes kept-alive connections (issue 14): llama.cpp b4748 sends
`Keep-Alive: timeout=5, max=100` and then closes after each streamed response, so a pooled
connection is dead when the client reuses it; libcurl's own retries land on other dead ones and
give up ("Connection died, tried 5 times"): 4-8% of streamed requests failed `closed`.

The simulator stages the worst case of it (engine.keepalive_close: the second request on a
connection is dropped unanswered, the connection shut). Every request must still succeed: the
one that found a dead connection is sent once more on a fresh one and says so in its receipt
(retried_fresh), and from then on the run opens a fresh connection per request, so at most the
requests in flight at that moment are retried. Against the same server without the quirk
nothing is retried and connections are reused (the simulator sees fewer connections than
requests). Python 3 standard library only; port 0; a few seconds."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker, bench, profile_sim  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("bench_keepalive")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
CC = 4
N = 200
LOAD = ["--concurrency", str(CC), "--requests", str(N), "--input-len", "64", "--output-len", "8",
        "--seed", "3"]

for api in ("chat", "completions"):
    with profile_sim(PROFILE, "--set", "engine.dialect=llamacpp", "--set",
                     "engine.keepalive_close=true", "--set", "engine.startup_s=0.1",
                     speed="max") as s:
        r = bench(s.url, "--api", api, *LOAD)
    bad = [x for x in r.receipts if not x["ok"]]
    c.check(r.summary["requests"]["ok"] == N and not bad,
            "%s: every request succeeds on a server that drops kept-alive requests: %d ok, "
            "failed %r" % (api, r.summary["requests"]["ok"], [(x["error"], x.get("error_message"))
                                                  for x in bad[:3]]))
    retried = [x for x in r.receipts if x.get("retried_fresh")]
    c.check(1 <= len(retried) <= CC,
            "%s: the requests that found a dead connection were retried on a fresh one "
            "(1..%d): %d" % (api, CC, len(retried)))
    c.check(all(x["ok"] and x["ttft_ms"] is not None for x in retried),
            "%s: the retried requests are measured like the others" % api)

# The same server without the quirk: no retry, no receipt says one.
with profile_sim(PROFILE, "--set", "engine.dialect=llamacpp", "--set", "engine.startup_s=0.1",
                 speed="max") as s:
    r = bench(s.url, *LOAD)
c.check(r.summary["requests"]["ok"] == N and not any(x.get("retried_fresh") for x in r.receipts),
        "a server that keeps its connections: nothing retried")
c.close()
