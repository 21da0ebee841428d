"""Crash safety of campaigns: `kill -9` of servetune at seeded random points (ST_KILL_POINTS,
default 20; every fifth campaign starts with a SIGINT instead: exit 130, restored, an incomplete
summary), then `resume`, gives the summary of an uninterrupted run (verdicts, choice, gates,
metric names and sample counts; timings aside), a journal with no torn, duplicate or lost
record, every receipt journaled once, and the restore proven. A torn last line (power cut) is
dropped on resume, never read as data."""
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_resume")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
SPEED = os.environ.get("ST_CAMPAIGN_SPEED", "100")
# 20 kill points in the plain build; the sanitizer build (same code, checked for memory errors)
# takes 6 to keep CI's time.
POINTS = int(os.environ.get("ST_KILL_POINTS",
                            "6" if os.environ.get("ST_SANITIZED") == "1" else "20"))

PLAN = """name: resume
target:
  kind: sim
  profile: %s
  overrides: {engine.startup_s: 2}
  health_timeout_s: 120
baseline:
  engine.spec_steps: 2
  engine.graph_sizes: [1, 3]
  engine.mem_fraction: 0.985
arms:
  - name: mtp1
    set: {engine.spec_steps: 1, engine.graph_sizes: [1, 2]}
    multi_variable: true
  - name: oom
    set: {engine.mem_fraction: 0.5}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 1024, categories: [code], repeats: 3}
    - {id: long, kind: bench, input_tokens: 16000, output_tokens: 16, repeats: 2}
  full:
    - {id: dec, kind: bench, output_tokens: 1024, categories: [code], repeats: 3}
rules:
  noise: 0.05
  escalation: promoted
  metrics:
    - {metric: dec.decode_tps@code}
  guards:
    - {metric: long.ttft_s, max_worse: 0.5}
""" % PROFILE

d = cl.tmpdir()
plan = cl.write(d, "resume.yaml", PLAN)
ARGS = ["--sim-speed", SPEED, "--nvidia-smi", ""]


def shape(s):
    """What must not depend on where the run was killed."""
    return {
        "complete": s["complete"], "chosen": s["chosen"], "restored": s["restored"],
        "arms": [(a["name"], a["verdict"], a["on"], a["failure"] and a["failure"]["kind"],
                  sorted((g["stage"], g["name"], g["passed"]) for g in a["gates"]))
                 for a in s["arms"]],
        "metrics": sorted((m["stage"], m["arm"], m["metric"], m["n"]) for m in s["metrics"]),
        "stages": s["stages"],
    }


# The uninterrupted run.
ref_out = os.path.join(d, "ref")
t0 = time.monotonic()
p = cl.campaign("run", plan, "--out", ref_out, *ARGS)
T = time.monotonic() - t0
c.check(p.returncode == 0, "uninterrupted run: exit 0: %d %s" % (p.returncode, p.stderr[-2000:]))
ref = shape(cl.summary(ref_out))
c.check(ref["chosen"] == "baseline" and [a[1] for a in ref["arms"]] ==
        ["baseline", "reject", "reject"], "reference verdicts: %r" % ref["arms"])
cl.check_archive(c, ref_out, "ref")
print("uninterrupted run: %.2f s" % T, flush=True)


EXE = os.path.realpath(cl.SERVETUNE)


def leftovers(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and cmd.startswith(EXE + " "):
            found.append((pid, cmd[:200]))
    return found


rng = random.Random(20261130)
kills = 0
k = 0
while kills < POINTS:
    out = os.path.join(d, "k%02d" % k)
    chain = 1 + (k % 3)  # kills in a row on the same campaign: 1, 2 or 3
    args = ["run", plan, "--out", out] + ARGS
    done = False
    torn = False
    for j in range(chain):
        at = rng.uniform(0.02, max(0.1, T * 0.95))
        proc = cl.start(*args, log=os.path.join(d, "k%02d.log" % k))
        time.sleep(at)
        sig = signal.SIGINT if (k % 5 == 4 and j == 0) else signal.SIGKILL
        if proc.poll() is None:
            proc.send_signal(sig)
            kills += 1
        rc = proc.wait(timeout=120)
        if sig == signal.SIGINT and rc != 0:
            # Ctrl-C: the arm stopped, the start restored, a partial summary, exit 130.
            c.check(rc == 130, "k%02d: SIGINT exits 130: %d" % (k, rc))
            part = cl.summary(out) if os.path.exists(os.path.join(out, "summary.json")) else None
            c.check(part is not None and part["complete"] is False,
                    "k%02d: SIGINT leaves a summary marked incomplete" % k)
        if rc == 0:
            done = True
            break
        args = ["resume", out]
        if k == 1 and j == 0:
            # A power cut in the middle of a record: a torn last line.
            with open(os.path.join(out, "journal.jsonl"), "ab") as f:
                f.write(b"0badc0de 99999 receipts {\"unit\":\"screening/x")
            torn = True
    r = None
    if not done:
        r = cl.campaign("resume", out, timeout=300)
        c.check(r.returncode == 0, "k%02d: resume completes: %d %s" % (k, r.returncode,
                                                                     r.stderr[-1500:]))
    if torn:
        logs = open(os.path.join(d, "k%02d.log" % k), errors="replace").read() + (r.stderr if r else "")
        c.check("dropped a torn last record" in logs, "k%02d: the torn line was dropped on resume"
                % k)
    if os.path.exists(os.path.join(out, "summary.json")):
        got = shape(cl.summary(out))
        c.check(got == ref, "k%02d: same summary as the uninterrupted run:\n%r\nvs\n%r" %
                (k, got, ref))
        cl.check_archive(c, out, "k%02d" % k)
    else:
        c.check(False, "k%02d: no summary.json" % k)
    time.sleep(0.3)
    left = leftovers(out) + leftovers(PROFILE)
    c.check(not left, "k%02d: no servetune process left behind: %r" % (k, left))
    k += 1
print("%d kill points over %d campaigns" % (kills, k), flush=True)

# Interleaved order (A B A B across repeats): the same decisions; the journal shows the repeats
# taking turns over the arms; kills and resumes keep it.
iplan = cl.write(d, "inter.yaml", PLAN.replace("stages:\n", "stages:\n  order: interleaved\n", 1))
iout = os.path.join(d, "inter")
proc = cl.start("run", iplan, "--out", iout, *ARGS, log=os.path.join(d, "inter.log"))
time.sleep(rng.uniform(0.3, max(0.4, T * 0.8)))
if proc.poll() is None:
    proc.send_signal(signal.SIGKILL)
proc.wait()
r = cl.campaign("resume", iout, timeout=300)
c.check(r.returncode == 0, "interleaved: resume completes: %d %s" % (r.returncode, r.stderr[-1000:]))
if os.path.exists(os.path.join(iout, "summary.json")):
    got = shape(cl.summary(iout))
    c.check(got == ref, "interleaved: the decisions of the blocked run:\n%r\nvs\n%r" % (got, ref))
    recs, units = cl.check_archive(c, iout, "inter")
    order = [o["unit"] for _, kind, o in recs if kind == "unit_end" and o["unit"].endswith("/r1")
             or kind == "unit_end" and o["unit"].endswith("/r2")]
    dec = [u for u in order if "/dec/" in u and u.startswith("screening/")]
    c.check(dec[:4] == ["screening/baseline/dec/r1", "screening/mtp1/dec/r1",
                        "screening/baseline/dec/r2", "screening/mtp1/dec/r2"],
            "interleaved: repeat 1 of each arm, then repeat 2: %r" % dec[:6])
c.close()
