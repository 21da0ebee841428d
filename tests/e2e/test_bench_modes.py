"""servetune bench modes: non-streaming, /v1/completions, several workers, --duration, SIGINT
(exit 130, receipts fsynced, summary marked interrupted, nothing lost), an API key that
never appears in any output, and a soak (--duration with a mixed workload) whose fitted items and
tokenizer calls stay bounded however many requests it may send."""
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, TINY_PROFILE, Checker, Sim, bench, by_rid, profile_sim  # noqa: E402,E501

c = Checker("bench_modes")

# Non-streaming chat and completions: tokens from usage, TTFT = E2E (the whole body at once).
for api in ("chat", "completions"):
    with Sim("--ttft-ms", "30", "--itl-ms", "5", trace=False) as sim:
        r = bench(sim.url, "--api", api, "--no-stream", "--concurrency", 2, "--requests", 4,
                  "--output-len", 10)
    s = r.summary
    c.check(s["requests"]["ok"] == 4, "%s non-stream: 4 ok, got %s" % (api, s["requests"]))
    c.check(s["output_tokens"] == 40, "%s non-stream: 40 tokens, got %d" % (api, s["output_tokens"]))
    for x in r.receipts:
        c.check(abs(x["ttft_ms"] - x["e2e_ms"]) < 0.01, "%s non-stream: ttft == e2e" % api)
        c.check(x["e2e_ms"] >= 30 + 9 * 5, "%s non-stream: e2e %.1f >= 75 ms" % (api, x["e2e_ms"]))

# Streaming completions.
with Sim("--ttft-ms", "10", "--itl-ms", "2") as sim:
    r = bench(sim.url, "--api", "completions", "--concurrency", 3, "--requests", 6,
              "--output-len", 8, "--chunk-times")
    trace = by_rid(sim.trace_lines())
c.check(r.summary["requests"]["ok"] == 6, "completions stream: 6 ok")
c.check(r.summary["output_tokens"] == 48, "completions stream: 48 tokens")

# Two workers share the load; ids are unique and cover 0..N-1.
with Sim("--ttft-ms", "5", "--itl-ms", "1", trace=False) as sim:
    r = bench(sim.url, "--workers", 2, "--concurrency", 8, "--requests", 40, "--output-len", 4)
c.check(sorted(x["id"] for x in r.receipts) == list(range(40)), "workers: ids 0..39 once each")
c.check(r.summary["client"]["workers"] == 2, "workers: 2 reported")
c.check(r.summary["requests"]["ok"] == 40, "workers: 40 ok")

# --duration stops issuing; in-flight requests finish normally.
with Sim("--ttft-ms", "20", "--itl-ms", "5", trace=False) as sim:
    t0 = time.monotonic()
    r = bench(sim.url, "--concurrency", 4, "--duration", 1, "--output-len", 4)
    el = time.monotonic() - t0
c.check(r.summary["requests"]["ok"] > 20, "duration: many requests in 1 s (%d)" % r.summary["requests"]["ok"])
c.check(r.summary["requests"]["failed"] == 0, "duration: none failed")
c.check(el < 5, "duration: ended in %.1f s" % el)

# SIGINT: exit 130, a summary marked interrupted, one valid receipt per issued request.
sim = Sim("--ttft-ms", "50", "--itl-ms", "50", trace=False)
d = sim.dir
p = subprocess.Popen([SERVETUNE, "bench", "--url", sim.url, "--concurrency", "4", "--requests", "1000",
                      "--output-len", "100", "--grace", "300", "--no-progress", "--json", d + "/s.json",
                      "--receipts", d + "/r.jsonl"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(1.0)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=30)
sim.stop()
c.check(p.returncode == 130, "sigint: exit 130, got %d (%s)" % (p.returncode, err))
s = json.load(open(d + "/s.json"))
recs = [json.loads(l) for l in open(d + "/r.jsonl")]
c.check(s["interrupted"] is True, "sigint: summary interrupted")
c.check(len(recs) == s["requests"]["issued"], "sigint: receipts %d == issued %d" % (len(recs), s["requests"]["issued"]))
c.check(any(x["error"] == "interrupted" for x in recs), "sigint: in-flight requests recorded as interrupted")
c.check(len({x["id"] for x in recs}) == len(recs), "sigint: no duplicate receipt")

# The API key never appears in receipts, summary, stdout or stderr, from a file or the environment.
KEY = "sk-servetune-planted-3f9a1c"
with Sim("--ttft-ms", "1", "--itl-ms", "1", "--fault", "status=401", trace=False) as sim:
    kf = os.path.join(sim.dir, "key")
    with open(kf, "w") as f:
        f.write(KEY + "\n")
    os.chmod(kf, 0o600)
    r1 = bench(sim.url, "--api-key-file", kf, "--requests", 2, "--output-len", 2, expect_rc=None)
    env = dict(os.environ, SERVETUNE_API_KEY=KEY)
    r2 = bench(sim.url, "--requests", 2, "--output-len", 2, "--save-text", expect_rc=None, env=env)
    os.chmod(kf, 0o644)
    p3 = subprocess.run([SERVETUNE, "bench", "--url", sim.url, "--api-key-file", kf],
                        capture_output=True, text=True, timeout=30)
for r in (r1, r2):
    blob = json.dumps(r.summary) + json.dumps(r.receipts) + r.out + r.err
    c.check(KEY not in blob, "api key: not in any output")
c.check(p3.returncode == 2 and "0600" in p3.stderr and KEY not in p3.stderr,
        "api key: a group/world-readable key file is refused (%d %r)" % (p3.returncode, p3.stderr))
# A soak as a campaign runs it (bench --workload mixed --requests N --duration S): however large
# N (a long soak's 10 requests a second per slot), the build fits 256 items, with a bounded
# number of tokenizer calls, and the load repeats them in order. Counts, not times.
prof = os.path.join(tempfile.mkdtemp(prefix="st-soak-"), "tiny.yaml")
with open(prof, "w") as f:
    f.write(TINY_PROFILE)
SOAK = ["--workload", "mixed", "--mix", "fixed=1,shared-prefix=1,distinct=1", "--prefix-frac",
        0.5, "--input-len", 64, "--output-len", 4, "--ignore-eos", "--concurrency", 4, "--seed", 3]
s = profile_sim(prof, speed="max")
try:
    long_soak = bench(s.url, *SOAK, "--requests", 200000, "--duration", 2, timeout=240)
    short = bench(s.url, *SOAK, "--requests", 200, "--duration", 2, timeout=120)
    soak300 = bench(s.url, *SOAK, "--requests", 300, "--duration", 60, timeout=120)
    all300 = bench(s.url, *SOAK, "--requests", 300, timeout=120)
finally:
    s.stop()
wl, ws = long_soak.summary["workload"], short.summary["workload"]
c.check(wl["items"] == 256, "soak of 200000 requests: 256 items fitted, got %d" % wl["items"])
c.check(ws["items"] == 200, "soak of 200 requests: all 200 fitted, got %d" % ws["items"])
# What a soak uses is what fitting every item gives: the same windows, lengths and counts.
a = {x["id"]: x for x in soak300.receipts}
b = {x["id"]: x for x in all300.receipts}
c.check(soak300.summary["workload"]["items"] == 256 and all300.summary["workload"]["items"] == 300
        and all(a[i]["workload"] == b[i]["workload"] and
                a[i]["prompt_tokens"] == b[i]["prompt_tokens"] for i in range(256)),
        "soak: its 256 items are those of the build of all 300")
c.check(0 < wl["counter_calls"] <= 256 * 8 + 64,
        "soak: tokenizer calls bounded by the fitted items: %d" % wl["counter_calls"])
by_id = {x["id"]: x for x in long_soak.receipts}
past = [i for i in by_id if i >= 256 and i - 256 in by_id]
c.check(len(by_id) > 256 and past and
        all(by_id[i]["workload"]["windows"] == by_id[i - 256]["workload"]["windows"] and
            by_id[i]["workload"]["kind"] == by_id[i - 256]["workload"]["kind"] for i in past),
        "soak: requests past the 256th repeat the items in order (%d sent)" % len(by_id))
c.close()
