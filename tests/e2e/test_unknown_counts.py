"""Unknown is not zero (issue 14): what a server does not say stays unknown in receipts, summaries,
the sweep's verdict and the campaign's gates; what the wire allows is derived and says how.

The simulator stages the three ways a server reports cached prompt tokens (engine.cached_report):
`usage` (usage.prompt_tokens_details, timings.cache_n, the prefix counters), `evaluated`
(llama.cpp b4748: only timings.prompt_n, the tokens it evaluated) and `none` (nothing at all).
- evaluated: every receipt's cached count is derived as prompt_tokens - timings.prompt_n, says
  so, and equals the count the same run reports directly under `usage` (the simulator is
  deterministic for a seed);
- none: receipts say null, the bench summary says null and bench prints "cached unknown"; a
  sweep with a hit target is `unverifiable` (valid null), not invalid at a hit rate of 0;
- a campaign on the llama.cpp dialect (no preemption counter) with a limit on
  server.preemptions rejects the arm with that reason, and the archive's metrics carry no
  server.preemptions value for any arm.
Python 3 standard library only; port 0; about 20 s."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, bench, profile_sim  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("unknown_counts")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
FROM_EVAL = "usage.prompt_tokens - timings.prompt_n"
# The same prompt prefix for every request: a repeat finds it cached.
LOAD = ["--workload", "shared-prefix", "--prefix-frac", "0.75", "--input-len", "512",
        "--output-len", "8", "--requests", "12", "--concurrency", "2", "--seed", "5"]


def run_bench(dialect, report):
    with profile_sim(PROFILE, "--set", "engine.dialect=" + dialect, "--set",
                     "engine.cached_report=" + report, "--set", "engine.startup_s=0.1",
                     "--seed", "9", speed="max") as s:
        return bench(s.url, *LOAD)


# ---- llama.cpp b4748's wire: derived, and equal to what the server would have said ----
told = run_bench("llamacpp", "usage")
derived = run_bench("llamacpp", "evaluated")
tc = [r["cached_tokens"] for r in told.receipts]
dc = [r["cached_tokens"] for r in derived.receipts]
c.check(any(x and x > 0 for x in tc), "usage: the repeats were served from the cache: %s" % tc)
c.check(all(r.get("cached_tokens_from") == "usage.prompt_tokens_details.cached_tokens"
            for r in told.receipts), "usage: the receipts name the usage details")
c.check(sorted(tc) == sorted(dc), "evaluated: derived counts equal the told ones: %s vs %s"
        % (tc, dc))
c.check(all(r.get("cached_tokens_from") == FROM_EVAL for r in derived.receipts),
        "evaluated: every receipt says it was derived: %s"
        % sorted({str(r.get("cached_tokens_from")) for r in derived.receipts}))
c.check(derived.summary["cached_tokens"] == told.summary["cached_tokens"] == sum(tc)
        and derived.summary["cached_tokens_from"] == FROM_EVAL
        and derived.summary["cached_tokens_requests"] == 12,
        "evaluated: the summary's total and source: %r" %
        {k: derived.summary.get(k) for k in ("cached_tokens", "cached_tokens_from",
                                             "cached_tokens_requests")})
c.check("cached (%s)" % FROM_EVAL in derived.out, "bench names the derivation:\n%s" % derived.out)

# ---- a server that says nothing ----
silent = run_bench("vllm", "none")
c.check(all(r["cached_tokens"] is None and "cached_tokens_from" not in r
            for r in silent.receipts), "none: every receipt says null")
c.check(silent.summary["cached_tokens"] is None and silent.summary["cached_tokens_requests"] == 0
        and silent.summary["cached_tokens_from"] is None,
        "none: the summary says unknown: %r" % silent.summary.get("cached_tokens"))
c.check("cached unknown (the server did not say)" in silent.out,
        "none: bench prints unknown, not 0:\n%s" % silent.out)

with profile_sim(PROFILE, "--set", "engine.cached_report=none", "--set", "engine.startup_s=0.1",
                 speed="max") as s:
    d = cl.tmpdir("st-unk-")
    js = os.path.join(d, "sweep.json")
    p = subprocess.run([SERVETUNE, "sweep", "--url", s.url, "--workload", "shared-prefix",
                        "--prefix-frac", "0.9", "--input-len", "1024", "--output-len", "8",
                        "--concurrency", "1,2", "--requests-per-cc", "4", "--repeats", "1",
                        "--hit-target", "0.9", "--json", js, "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    c.check(p.returncode == 0, "sweep exit 0: %d\n%s" % (p.returncode, p.stderr[-2000:]))
    sw = json.load(open(js)) if os.path.exists(js) else {"points": []}
    pts = sw["points"]
    c.check(len(pts) == 2 and all(pt["valid"] is None and pt["hit_rate"] is None for pt in pts),
            "sweep: every point unverifiable (valid null, hit rate null): %r"
            % [(pt.get("valid"), pt.get("hit_rate")) for pt in pts])
    reasons = [r["invalid_reason"] for pt in pts for r in pt.get("repeats", [])]
    c.check(reasons and all(r.startswith("unverifiable: 0 of ") for r in reasons),
            "sweep: the reason says why: %r" % reasons)
    c.check("unverifiable" in p.stdout and " NO" not in p.stdout and "(? unverifiable)" in p.stdout,
            "sweep: the table says unverifiable, not NO:\n%s" % p.stdout)

# ---- a gate on a counter the dialect does not have ----
PLAN = """\
name: unknown-preemptions
target:
  kind: sim
  profile: %s
  overrides: {engine.startup_s: 1, engine.dialect: llamacpp}
  health_timeout_s: 60
baseline: {engine.mem_fraction: 0.985}
arms:
  - name: more_mem
    set: {engine.mem_fraction: 0.99}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 32, concurrency: [2], repeats: 2}
  full:
    - {id: dec, kind: bench, output_tokens: 32, concurrency: [2], repeats: 2}
rules:
  noise: 0.05
  metrics:
    - {metric: dec.decode_tps}
  gates:
    limits:
      - {name: no_preemption, metric: server.preemptions, aggregate: max, max: 0}
""" % PROFILE
d = cl.tmpdir("st-unk-camp-")
plan = cl.write(d, "plan.yaml", PLAN)
out = os.path.join(d, "audit")
p = cl.campaign("run", plan, "--out", out, "--sim-speed", "max", "--nvidia-smi", "", timeout=300)
s = cl.summary(out) if os.path.exists(os.path.join(out, "summary.json")) else None
c.check(s is not None, "campaign: summary.json written (exit %d)\n%s" % (p.returncode,
                                                                        p.stderr[-3000:]))
if s:
    a = cl.arm(s, "more_mem")
    want = ("gate no_preemption failed: server.preemptions has no value (the server does not "
            "report it")
    c.check(a and a["verdict"] == "reject" and any(want in r for r in a["reasons"]),
            "campaign: the arm fails the gate for want of the counter: %r"
            % ((a and (a["verdict"], a["reasons"])),))
    sp = [m for m in s["metrics"] if m["metric"] == "server.preemptions"]
    c.check(sp == [], "campaign: no server.preemptions value invented: %r" % sp)
c.close()
