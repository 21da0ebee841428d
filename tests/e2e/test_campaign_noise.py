"""Verdicts under noise, end to end: a campaign on the simulator with staged noise (profile
perf.noise_cv 0.05: every request's step times times a seeded lognormal factor) and sequential
repeats ({min: 3, max: 12}). An arm identical to the baseline ends inconclusive; an arm made 15%
faster (step overhead 10 -> 8.7 ms) is promoted in screening and full and chosen; every decision
names its test, n per side and its interval, and summary.json holds the comparisons. Then kill -9
during the sequential repeats and resume: the same verdicts and the same repeat counts."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker, write_tiny_profile  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_noise")
SPEED = os.environ.get("ST_CAMPAIGN_SPEED", "max")
d = cl.tmpdir()
write_tiny_profile(d)
PLAN = """name: noise
target:
  kind: sim
  profile: tiny.yaml
  overrides: {perf.noise_cv: 0.05}
  health_timeout_s: 60
baseline:
  label: a
  engine.step_overhead_s: 0.01
arms:
  - name: same
    set: {label: b}
    note: changes nothing the simulator models
  - name: fast
    set: {engine.step_overhead_s: 0.0087}
    note: decode about 15% faster
stages:
  order: interleaved
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 256, repeats: {min: 3, max: 12}}
  full:
    - {id: dec, kind: bench, output_tokens: 256, repeats: {min: 3, max: 12}}
rules:
  noise: 0.05
  alpha: 0.05
  escalation: promoted
  metrics:
    - {metric: dec.decode_tps}
"""
plan = cl.write(d, "noise.yaml", PLAN)
ARGS = ["--sim-speed", SPEED, "--nvidia-smi", ""]


def counts(s):
    """Samples per stage, arm and metric: what a resume must reproduce."""
    return sorted((m["stage"], m["arm"], m["metric"], m["n"]) for m in s["metrics"]
                  if m["metric"].startswith("dec."))


def verdicts(s):
    return [(a["name"], a["verdict"], [(dd["stage"], dd["verdict"]) for dd in a["decisions"]])
            for a in s["arms"]]


ref = os.path.join(d, "ref")
t0 = time.monotonic()
p = cl.campaign("run", plan, "--out", ref, *ARGS, timeout=600)
T = time.monotonic() - t0
print("uninterrupted run: %.1f s" % T)
c.check(p.returncode == 0, "noise campaign: exit 0: %d %s" % (p.returncode, p.stderr[-2000:]))
s = cl.summary(ref) if os.path.exists(os.path.join(ref, "summary.json")) else None
c.check(s is not None, "summary.json written")
if s:
    same, fast = cl.arm(s, "same"), cl.arm(s, "fast")
    c.check(same["verdict"] == "inconclusive",
            "the arm identical to the baseline is inconclusive: %r" % same["reasons"])
    c.check(fast["verdict"] == "promote" and s["chosen"] == "fast",
            "the 15%% faster arm is promoted and chosen: %s, chosen %s: %r" %
            (fast["verdict"], s["chosen"], fast["reasons"]))
    fd = [dd for dd in fast["decisions"] if dd["stage"] == "screening"]
    c.check(fd and fd[0]["verdict"] == "promote", "promoted in screening: %r" % fd)
    for dd in fast["decisions"] + same["decisions"]:
        r = dd["reason"]
        c.check("Welch t on logs" in r and "per side" in r and "[" in r and "%" in r,
                "the verdict names the test, n per side and the interval: %r" % r)
        cm = dd.get("comparisons") or []
        c.check(len(cm) == 1 and cm[0]["metric"] == "dec.decode_tps" and cm[0]["n"] >= 3
                and cm[0]["lo"] is not None and cm[0]["lo"] <= cm[0]["rel"] <= cm[0]["hi"],
                "summary.json holds the comparison with its interval: %r" % cm)
    ranked = [cm for dd in fast["decisions"] for cm in dd["comparisons"]]
    c.check(all(cm["finding"] == "better" and cm["lo"] > 0.0125 for cm in ranked),
            "the fast arm's intervals clear the margin: %r" % [(cm["lo"], cm["hi"]) for cm in ranked])
    # The staged noise is there: the baseline's repeats spread by a few percent, not 0.
    cvs = [m["cv"] for m in s["metrics"] if m["arm"] == "baseline" and m["metric"] == "dec.decode_tps"]
    c.check(cvs and all(0.015 < v < 0.15 for v in cvs), "the baseline's repeats are noisy: CV %r" % cvs)
    st = s.get("statistics") or {}
    c.check(st.get("test") == "welch_t_log" and "holm" in st.get("correction", "")
            and st.get("alpha") == 0.05, "the summary says which test and correction: %r" % st)
    c.check(max(n for (_, _, _, n) in counts(s)) > 3, "sequential repeats ran: %r" % counts(s))
    cl.check_archive(c, ref, "noise")

# kill -9 during the sequential repeats (a unit r4 or later has begun), then resume.
if s:
    out = os.path.join(d, "k")
    proc = cl.start("run", plan, "--out", out, *ARGS, log=os.path.join(d, "k.log"))
    jpath = os.path.join(out, "journal.jsonl")
    deadline = time.monotonic() + 10 * T + 60
    killed_at = None
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(jpath):
            with open(jpath, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            begun = [ln for ln in text.splitlines() if " unit_begin " in ln and "/dec/r" in ln
                     and int(ln.rsplit("/dec/r", 1)[1].split('"')[0]) >= 4]
            if len(begun) >= 2:
                killed_at = begun[-1].split('"unit":"')[1].split('"')[0] if '"unit":"' in begun[-1] \
                    else begun[-1][-60:]
                os.killpg(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.05)
    proc.wait()
    c.check(killed_at is not None, "killed during the sequential repeats (at %s)" % killed_at)
    r = cl.campaign("resume", out, timeout=600)
    c.check(r.returncode == 0, "resume: exit 0: %d %s" % (r.returncode, r.stderr[-2000:]))
    if os.path.exists(os.path.join(out, "summary.json")):
        k = cl.summary(out)
        c.check(verdicts(k) == verdicts(s) and k["chosen"] == s["chosen"],
                "resume gives the same verdicts:\n%r\nvs\n%r" % (verdicts(k), verdicts(s)))
        c.check(counts(k) == counts(s),
                "resume gives the same repeat counts:\n%r\nvs\n%r" % (counts(k), counts(s)))
        cl.check_archive(c, out, "noise-resumed")
c.close()
