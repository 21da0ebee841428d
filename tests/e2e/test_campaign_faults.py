"""Campaign runner e2e against the model-mode simulator: an arm whose profile does not fit
memory is rejected with OOM evidence; a sim that crashes mid-stage fails that arm only; quality
errors reject an arm; the baseline stays; the restore is proven. Bad input: an edited plan is
refused by resume, a start command that exits at once and a health URL that never answers exit 2
with the server left as it was."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_faults")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
SPEED = os.environ.get("ST_CAMPAIGN_SPEED", "100")

PLAN = """name: faults
target:
  kind: sim
  profile: %s
  health_timeout_s: 120
baseline:
  engine.mem_fraction: 0.985
  quality.error_rate: 0
  fault.crash_after_requests: 0
arms:
  - name: oom
    set: {engine.mem_fraction: 0.5}
  - name: crash
    set: {fault.crash_after_requests: 4}
  - name: badquality
    set: {quality.error_rate: 1}
  - name: same
    set: {engine.mem_fraction: 0.99}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: quality, kind: qualify, suite: quality}
    - {id: dec, kind: bench, output_tokens: 256, categories: [code], repeats: 2}
  full:
    - {id: dec, kind: bench, output_tokens: 256, categories: [code], repeats: 2}
rules:
  noise: 0.05
  escalation: promoted
  metrics:
    - {metric: dec.decode_tps@code}
""" % PROFILE

d = cl.tmpdir()
plan = cl.write(d, "faults.yaml", PLAN)
out = os.path.join(d, "audit")
p = cl.campaign("run", plan, "--out", out, "--sim-speed", SPEED, "--nvidia-smi", "")
c.check(p.returncode == 0, "faults: exit 0: %d\n%s\n%s" % (p.returncode, p.stdout, p.stderr[-3000:]))
if os.path.exists(os.path.join(out, "summary.json")):
    s = cl.summary(out)
    c.check(s["complete"] is True and s["chosen"] in ("baseline", "same") and s["restored"] is True,
            "complete, baseline chosen, restored: %r" % {k: s[k] for k in ("complete", "chosen", "restored")})
    oom = cl.arm(s, "oom")
    c.check(oom and oom["verdict"] == "reject" and oom["failure"] and oom["failure"]["kind"] == "oom",
            "oom arm rejected with an oom failure: %r" % oom)
    if oom and oom["failure"]:
        ev = os.path.join(out, oom["failure"]["evidence"])
        c.check(os.path.isdir(ev) and os.path.exists(os.path.join(ev, "failure.json")),
                "oom evidence folder %s" % ev)
        c.check(any("oom" in r or "memory" in r.lower() for r in oom["reasons"]),
                "oom reason names the gate: %r" % oom["reasons"])
        log = os.path.join(out, "arms", "oom", "server.log")
        c.check(os.path.exists(log) and "memory" in open(log, errors="replace").read().lower(),
                "the oom arm's server log holds the out-of-memory message")
    crash = cl.arm(s, "crash")
    c.check(crash and crash["verdict"] == "reject" and crash["failure"]
            and crash["failure"]["kind"] == "exit",
            "crash arm rejected with an exit failure: %r" % crash)
    c.check(crash and any("server_exit" in r for r in crash["reasons"]),
            "crash reason names server_exit: %r" % (crash and crash["reasons"]))
    bq = cl.arm(s, "badquality")
    c.check(bq and bq["verdict"] == "reject" and any("quality" in r for r in bq["reasons"]),
            "badquality rejected by the quality gate: %r" % (bq and bq["reasons"]))
    same = cl.arm(s, "same")
    # Its verdict is a timing comparison (noise on a busy machine); that it ran is the point.
    c.check(same and same["failure"] is None and same["decisions"]
            and all(g["passed"] for g in same["gates"]),
            "the arm after the failures still ran, every gate passed: %r" % same)
    c.check(any(m["arm"] == "same" and m["metric"] == "dec.decode_tps@code" and m["n"] == 2
                for m in s["metrics"]), "the last arm has its two decode samples")
    fs = cl.load(os.path.join(out, "final-state.json"))
    c.check(fs.get("restored") is True, "final-state.json restored: %r" % fs)
    for f in ("plan.yaml", "plan.sha256", "journal.jsonl", "report.md", "report.html",
              "state/start.json"):
        c.check(os.path.exists(os.path.join(out, f)), "archive has %s" % f)
    c.check(open(os.path.join(out, "plan.sha256")).read().strip() ==
            json.loads(cl.campaign("check", plan, "--json").stdout)["hash"],
            "plan.sha256 is the plan's hash")
    cl.check_archive(c, out, "faults")
    c.check("oom" in p.stdout and "reject" in p.stdout and "chosen: baseline" in p.stdout,
            "the verdict table: %r" % p.stdout[-2000:])

    # Pre-registration: an edited plan is refused by resume (archive copy, then the original).
    orig = open(os.path.join(out, "plan.yaml")).read()
    cl.write(out, "plan.yaml", orig.replace("repeats: 2}", "repeats: 3}", 1))
    r = cl.campaign("resume", out)
    c.check(r.returncode == 2 and "edited" in r.stderr, "edited archive plan refused: %d %r" %
            (r.returncode, r.stderr))
    cl.write(out, "plan.yaml", orig)
    cl.write(d, "faults.yaml", PLAN.replace("noise: 0.05", "noise: 0.04"))
    r = cl.campaign("resume", out)
    c.check(r.returncode == 2 and "edited" in r.stderr, "edited original plan refused: %d %r" %
            (r.returncode, r.stderr))
    cl.write(d, "faults.yaml", PLAN)
    r = cl.campaign("resume", out)
    c.check(r.returncode == 0, "resume of a complete campaign is a no-op run: %d %r" %
            (r.returncode, r.stderr[-1000:]))
    # --compare-with: this baseline against an earlier campaign's (here: itself, so no drift).
    r = cl.campaign("resume", out, "--compare-with", out)
    cmpd = cl.summary(out).get("compare") if r.returncode == 0 else None
    c.check(cmpd is not None and cmpd["drifted"] is False and len(cmpd["drift"]) > 0
            and all(x["beyond"] is False for x in cmpd["drift"]) and "did not drift" in r.stderr,
            "--compare-with itself: no drift: %r %r" % (cmpd, r.stderr[-500:]))
    r = cl.campaign("run", plan, "--out", out)
    c.check(r.returncode == 2 and "resume" in r.stderr, "run onto an archive refused: %r" % r.stderr)

# Secrets: a planted API key (environment and key file) appears nowhere in the archive, the
# journal, the reports or the output.
KEY = "sk-planted-7f3a9c1e5b2d4f60"
kd = cl.tmpdir()
keyfile = cl.write(kd, "key", KEY + "\n")
os.chmod(keyfile, 0o600)
kplan = cl.write(kd, "k.yaml", PLAN.replace("name: faults", "name: secrets").split("arms:")[0] + """arms:
  - name: same
    set: {engine.mem_fraction: 0.99}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 64, categories: [code], repeats: 1}
    - {id: qual, kind: qualify, suite: quality}
  full:
    - {id: dec, kind: bench, output_tokens: 64, categories: [code], repeats: 1}
rules:
  metrics:
    - {metric: dec.decode_tps@code, samples: 1}
""")
kout = os.path.join(kd, "audit")
env = dict(os.environ, SERVETUNE_API_KEY=KEY)
r = cl.campaign("run", kplan, "--out", kout, "--sim-speed", SPEED, "--nvidia-smi", "",
                "--api-key-file", keyfile, env=env)
c.check(r.returncode == 0, "secrets campaign: exit 0: %d %s" % (r.returncode, r.stderr[-1500:]))
leaks = [] if KEY not in r.stdout + r.stderr else ["stdout/stderr"]
nfiles = 0
for base, _, files in os.walk(kout):
    for f in files:
        path = os.path.join(base, f)
        nfiles += 1
        with open(path, "rb") as fh:
            if KEY.encode() in fh.read():
                leaks.append(os.path.relpath(path, kout))
c.check(nfiles > 20 and not leaks, "the planted key is in none of %d archive files: %r" %
        (nfiles, leaks))

# A url target: the operator switches the server when asked (one line on stdin confirms,
# "skip" gives up: that arm fails "operator", the others go on).
import subprocess  # noqa: E402
from stlib import Sim  # noqa: E402
URL_PLAN = """name: url
target:
  kind: url
  base_url: %s
  health_timeout_s: 30
baseline:
  setting: a
arms:
  - name: b
    set: {setting: b}
  - name: c
    set: {setting: c}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 64, categories: [code], repeats: 1}
  full:
    - {id: dec, kind: bench, output_tokens: 64, categories: [code], repeats: 1}
rules:
  metrics:
    - {metric: dec.decode_tps@code, samples: 1}
"""
with Sim("--profile", PROFILE, "--set", "engine.startup_s=1", "--speed", SPEED, trace=False) as sim:
    ud = cl.tmpdir()
    up = cl.write(ud, "url.yaml", URL_PLAN % sim.url)
    uout = os.path.join(ud, "audit")
    r = subprocess.run([cl.SERVETUNE, "campaign", "run", up, "--out", uout, "--nvidia-smi", ""],
                       input="\n" * 2 + "skip\n" + "\n" * 4, capture_output=True, text=True,
                       timeout=300)
    c.check(r.returncode == 0, "url campaign: exit 0: %d %s" % (r.returncode, r.stderr[-1500:]))
    c.check("OPERATOR: switch the server to arm 'b'" in r.stderr and "setting=b" in r.stderr,
            "the operator is asked to switch to b with its parameters")
    if os.path.exists(os.path.join(uout, "summary.json")):
        us = cl.summary(uout)
        b, cc = cl.arm(us, "b"), cl.arm(us, "c")
        c.check(b["failure"] is None and b["verdict"] in ("inconclusive", "promote", "reject")
                and any(m["arm"] == "b" for m in us["metrics"]), "arm b ran: %r" % b)
        c.check(cc["verdict"] == "reject" and cc["failure"] and cc["failure"]["kind"] == "operator"
                and any("startup" in x for x in cc["reasons"]),
                "arm c, skipped by the operator, is rejected by the startup gate: %r" % cc)
        c.check(us["restored"] is True, "url: the operator switched back, health answered")

# Bad input: the baseline's start command exits at once; a health URL that never answers.
CMD_PLAN = """name: bad
target:
  kind: command
  start: %s
  base_url: http://127.0.0.1:%d
  health_url: http://127.0.0.1:%d/health
  health_timeout_s: 2
baseline:
  x: 1
arms:
  - name: two
    set: {x: 2}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 16}
  full:
    - {id: dec, kind: bench, output_tokens: 16}
rules:
  metrics:
    - {metric: dec.decode_tps}
"""
import socket  # noqa: E402
s_ = socket.socket()
s_.bind(("127.0.0.1", 0))
port = s_.getsockname()[1]
s_.close()
for label, start, word in (("exits at once", "/bin/false {x}", "start"),
                           ("never healthy", "sleep 30 # {x}", "health")):
    pd = cl.tmpdir()
    pl = cl.write(pd, "bad.yaml", CMD_PLAN % (start, port, port))
    r = cl.campaign("run", pl, "--out", os.path.join(pd, "audit"), timeout=60)
    c.check(r.returncode == 2 and word in r.stderr and "baseline" in r.stderr,
            "%s: exit 2 naming the baseline and '%s': %d %r" % (label, word, r.returncode,
                                                                r.stderr[-800:]))
c.close()
