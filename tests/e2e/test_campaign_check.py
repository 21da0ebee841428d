"""servetune campaign check: both example plans are valid (exit 0) with a stable hash; the hash
ignores comments and key order and follows any value; --json lists every arm with its resolved
start command; bad plans exit 2 with FILE:LINE before anything starts (unknown key, an arm that
changes nothing, an undeclared second variable, a rule on a metric no stage produces, an
on_best_of arm that changes nothing on top of one winner, a missing file); run without --out, a
bad plan given to run and resume of a folder without a campaign exit 2. Python 3 standard library only; no server, well under 10 s."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker  # noqa: E402

c = Checker("campaign_check")
TMP = tempfile.mkdtemp(prefix="st-campaign-")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLES = [os.path.join(ROOT, "examples", n) for n in ("seed000-mtp.yaml", "seed003-hit90.yaml", "seed000-mtp-compose.yaml", "seed003-hit90-command.yaml", "noisy-sim.yaml")]


def run(*args):
    return subprocess.run([SERVETUNE, "campaign"] + list(args), capture_output=True, text=True,
                          timeout=30)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def plan_hash(path):
    p = run("check", path, "--json")
    try:
        return p.returncode, json.loads(p.stdout)["hash"], p
    except (ValueError, KeyError):
        return p.returncode, None, p


PLAN = """\
name: t
target:
  kind: command
  start: serve --batch {batch} --steps {steps} --ctx {ctx}
  base_url: http://127.0.0.1:1
  health_url: http://127.0.0.1:1/health
baseline:
  batch: 2048
  steps: 2
fixed:
  ctx: 131072
arms:
  - name: a1
    set: {steps: 3}
%s
stages:
  screening:
    - {id: dec, kind: bench, output_tokens: 256, categories: [code]}
  full:
    - {id: dec, kind: bench, output_tokens: 16384, categories: [code]}
    - {id: mixed, kind: soak, duration_s: 600}
rules:
  metrics:
    - {metric: %s}
"""


def plan(extra_arm="", metric="dec.decode_tps@code"):
    return PLAN % (extra_arm, metric)


# The examples: valid, the same hash twice, every arm in the JSON.
for ex in EXAMPLES:
    p = run("check", ex)
    c.check(p.returncode == 0 and "hash" in p.stdout and "estimate" in p.stdout,
            "%s: exit 0 with a hash and an estimate: %d %r" % (ex, p.returncode, p.stderr))
    rc1, h1, p1 = plan_hash(ex)
    rc2, h2, _ = plan_hash(ex)
    c.check(rc1 == 0 and h1 and len(h1) == 64 and h1 == h2, "%s: same hash twice" % ex)
    doc = json.loads(p1.stdout) if rc1 == 0 else {}
    text = open(ex).read()
    names = [a["name"] for a in doc.get("arms", [])]
    c.check(len(names) > 0 and all(("name: " + n) in text for n in names),
            "%s: --json lists the arms: %r" % (ex, names))
    c.check(len(doc.get("stages", [])) == 2 and doc.get("estimate_s", 0) > 0
            and "rules" in doc, "%s: stages, rules, estimate_s" % ex)
    c.check(p.stdout.count("\n  ") > 0 and all(n in p.stdout for n in names),
            "%s: the text names every arm" % ex)

seed3 = json.loads(run("check", EXAMPLES[3], "--json").stdout)
c.check(len(seed3["arms"]) == 5, "seed003 has 5 arms")
up = seed3["arms"][1]["runs"][0]["up"]
c.check(up.startswith("deploy/serve.sh --tp 4 --pp-size 2 --mem-fraction-static 0.90")
        and "--context-length 1048576" in up, "seed003 tp4pp2: resolved start: %r" % up)
seed0 = json.loads(run("check", EXAMPLES[2], "--json").stdout)
b1024 = seed0["arms"][2]
c.check(b1024["name"] == "batch1024" and [r["on"] for r in b1024["runs"]]
        == ["baseline", "mtp1", "mtp3"], "seed000 batch1024: one run per possible winner")
c.check(b1024["runs"][2]["params"]["num_speculative_tokens"] == "3"
        and b1024["runs"][2]["params"]["max_num_batched_tokens"] == "1024",
        "seed000 batch1024 on mtp3: %r" % b1024["runs"][2]["params"])

# The hash: comments and key order do not change it; a value does.
base = write("base.yaml", plan())
_, hb, pb = plan_hash(base)
c.check(hb is not None, "the small plan checks: %r" % pb.stderr)
comment = write("comment.yaml", "# a comment\n" + plan().replace("batch: 2048", "batch: 2048 # x"))
c.check(plan_hash(comment)[1] == hb, "a comment leaves the hash")
reordered = plan().replace("baseline:\n  batch: 2048\n  steps: 2\n",
                           "baseline:\n  steps: 2\n  batch: 2048\n")
reordered = reordered.replace("name: t\n", "") + "name: t\n"
c.check(plan_hash(write("order.yaml", reordered))[1] == hb, "key order leaves the hash")
c.check(plan_hash(write("value.yaml", plan().replace("batch: 2048", "batch: 4096")))[1]
        not in (None, hb), "a value changes the hash")
doc = json.loads(run("check", base, "--json").stdout)
c.check(doc["arms"][0]["runs"][0]["up"] == "serve --batch 2048 --steps 3 --ctx 131072"
        and doc["baseline"]["up"] == "serve --batch 2048 --steps 2 --ctx 131072",
        "resolved start commands: %r" % doc["arms"][0]["runs"])

# The estimate, by hand at 32 tokens/s: screening dec 3 x 256 / 32 = 24 s plus a 300 s bring-up;
# full dec 3 x 16384 / 32 = 1536 s, the soak 600 s, a bring-up 300 s. No arm escalating: the
# baseline and a1 screened, the baseline restored (2 x 324 + 300); one escalating: plus both
# through the full stage (2 x 2436).
est = json.loads(run("check", base, "--json", "--decode-tps", "32").stdout)
c.check(est["estimate"]["min_s"] == 948 and est["estimate_s"] == 5820
        and est["stages"][0]["steps"][0]["estimate_s"] == 24,
        "estimate by hand: %r %r" % (est["estimate"], est["estimate_s"]))

# Bad plans: exit 2, FILE:LINE, nothing on stdout.
bad = [
    ("unknown.yaml", "bogus: 1\n" + plan(), ":1:", "unknown key 'bogus'"),
    ("nothing.yaml", plan().replace("set: {steps: 3}", "set: {steps: 2}"), ":13:",
     "changes nothing"),
    ("twovars.yaml", plan().replace("set: {steps: 3}", "set: {steps: 3, batch: 1024}"), ":13:",
     "multi_variable"),
    ("metric.yaml", plan(metric="nope.ttft_s"), ":24:", "no stage has a step 'nope'"),
    ("onbest.yaml", plan("  - name: a2\n    on_best_of: [baseline, a1]\n    set: {steps: 3}"),
     ":15:", "changes nothing on top of a1"),
]
for name, text, where, what in bad:
    path = write(name, text)
    p = run("check", path)
    c.check(p.returncode == 2 and (path + where) in p.stderr and what in p.stderr
            and p.stdout == "", "%s: exit 2 with %s%s %s: %d %r" % (name, name, where, what,
                                                                    p.returncode, p.stderr))
missing = os.path.join(TMP, "missing.yaml")
p = run("check", missing)
c.check(p.returncode == 2 and missing in p.stderr, "missing file: exit 2 naming it: %r"
        % p.stderr)
p = run("check")
c.check(p.returncode == 2, "no plan: exit 2")
# server.preemptions is a metric a plan can gate on (seed 003-style capacity: no preemption).
pre = write("preempt.yaml", plan() + """  gates:
    limits:
      - {name: no_preemption, metric: server.preemptions, aggregate: max, max: 0}
""")
p = run("check", pre, "--json")
c.check(p.returncode == 0 and "server.preemptions" in p.stdout,
        "a limit on server.preemptions checks: %d %r" % (p.returncode, p.stderr))
p = run("check", write("preempt-bad.yaml", plan(metric="server.preemption")))
c.check(p.returncode == 2 and "preemptions" in p.stderr,
        "an unknown server metric names the known ones: %r" % p.stderr)

p = run("run", base)
c.check(p.returncode == 2 and "--out DIR is required" in p.stderr, "run without --out: exit 2: %r"
        % p.stderr)
p = run("resume", os.path.dirname(base))
c.check(p.returncode == 2 and "no campaign here" in p.stderr, "resume of a folder without a "
        "campaign: exit 2: %r" % p.stderr)
p = run("run", write("bad-run.yaml", plan().replace("name: t\n", "name: t\nbogus: 1\n")),
        "--out", os.path.join(os.path.dirname(base), "never"))
c.check(p.returncode == 2 and "bogus" in p.stderr
        and not os.path.exists(os.path.join(os.path.dirname(base), "never", "journal.jsonl")),
        "run of a bad plan: exit 2 before anything is written: %r" % p.stderr)

c.close()
