"""The seed-003 campaign (examples/seed003-hit90.yaml) on the calibrated simulator reproduces the
seed's ranking: TP4PP2 at 0.90 beats the serving TP2PP4 at 0.85 on hit90 output throughput,
passes the full stage and is chosen; TP8 + EAGLE and both DP-attention arms fail the capacity
gate (no queueing of four 128K documents at cc4); the restore is proven. It runs unpaced
(--sim-speed max) while a load generator of its own keeps every core busy (ST_CAMPAIGN_BUSY=0
turns it off): the figures are the model's whatever the host does. About a minute, so it runs in
the plain build only (the ASan build skips it: exit 77)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

if os.environ.get("ST_SANITIZED") == "1" and not os.environ.get("ST_FORCE_SEED003"):
    print("campaign_seed003: skipped in the sanitizer build (runs in the plain build)")
    sys.exit(77)

c = Checker("campaign_seed003")
SPEED = os.environ.get("ST_CAMPAIGN_SPEED", "max")
plan = os.path.join(cl.ROOT, "examples", "seed003-hit90.yaml")
out = os.path.join(cl.tmpdir(), "audit")
with cl.Busy(os.environ.get("ST_CAMPAIGN_BUSY") != "0"):
    p = cl.campaign("run", plan, "--out", out, "--sim-speed", SPEED, "--nvidia-smi", "",
                    timeout=1500)
c.check(p.returncode == 0, "seed003: exit 0: %d\n%s\n%s" % (p.returncode, p.stdout[-3000:],
                                                             p.stderr[-3000:]))
s = cl.summary(out) if os.path.exists(os.path.join(out, "summary.json")) else None
c.check(s is not None, "summary.json written")
if s:
    c.check(s["complete"] and s["restored"] and s["chosen"] == "tp4pp2_090",
            "TP4PP2 at 0.90 chosen, restored: %r" % {k: s[k] for k in ("complete", "chosen", "restored")})
    a6 = cl.arm(s, "tp4pp2_090")
    c.check(a6["verdict"] == "promote" and [d["verdict"] for d in a6["decisions"]] ==
            ["promote", "promote"], "TP4PP2 promoted in screening and full: %r" % a6["decisions"])
    for name in ("tp8_eagle", "dp4_attention", "dp2_attention"):
        a = cl.arm(s, name)
        c.check(a["verdict"] == "reject" and any("gate no_queue_cc4 failed" in r
                                                 for r in a["reasons"]),
                "%s fails the capacity gate no_queue_cc4: %r" % (name, a["reasons"]))
    kv = {a["name"]: a["kv_capacity_tokens"] for a in s["arms"]}
    c.check(kv == {"baseline": 801216, "tp4pp2_090": 647040, "tp8_eagle": 279680,
                   "dp4_attention": 97792, "dp2_attention": 219072},
            "KV pools as the calibrated profile stages them: %r" % kv)

    def m(arm, metric, stage="screening"):
        for x in s["metrics"]:
            if x["arm"] == arm and x["metric"] == metric and x["stage"] == stage:
                return x["agg"]
        return None

    for cc in (4, 8, 16):
        b, a = m("baseline", "hit90.output_tps@cc%d" % cc), m("tp4pp2_090", "hit90.output_tps@cc%d" % cc)
        c.check(b and a and a > 1.05 * b, "hit90 cc%d: TP4PP2 %s > baseline %s by > 5%%" % (cc, a, b))
    for arm in ("baseline", "tp4pp2_090"):
        hr = m(arm, "hit90.hit_rate@cc1")
        c.check(hr is not None and abs(hr - 0.8999) < 0.0001,
                "%s hit90 hit rate at cc1: %s (the seed's 0.8999)" % (arm, hr))
    c.check(m("baseline", "long512k.completed") == 1 and m("tp4pp2_090", "long512k.completed") == 1,
            "a 512K request completes on both")
    c.check(m("baseline", "quality.pass_count") == 7, "quality 7/7 on the baseline")
    c.check([st["arms"] for st in s["stages"]] ==
            [["baseline", "tp4pp2_090", "tp8_eagle", "dp4_attention", "dp2_attention"],
             ["baseline", "tp4pp2_090"]], "stages: %r" % s["stages"])
    cl.check_archive(c, out, "seed003")
c.close()
