"""The seed-000 campaign (examples/seed000-mtp.yaml) on the calibrated simulator: the verdict
keeps MTP 2 and batch 2048 for the seed's reasons (MTP 1 slower; MTP 3 inside the 5% noise
threshold with less KV; batch 1024 on the best step count rejected by its slower 128K TTFT), each
reason traceable to receipts; the archive is complete and the restore proven. It runs unpaced
(--sim-speed max) while a load generator of its own keeps every core busy (ST_CAMPAIGN_BUSY=0
turns it off): the simulator's figures are its model's, whatever the host does, so the 128K TTFTs
equal the model's prefill (`sim --explain-request`) to the nanosecond and the decode rates are the
model's expected rate within what random speculative acceptance gives."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

if os.environ.get("ST_SANITIZED") == "1" and not os.environ.get("ST_FORCE_SEED000"):
    # The sanitizer build runs the runner's code through the faults, resume, compose and fault
    # matrix campaigns; this one measures the calibrated sim and runs in the plain build.
    print("campaign_run: skipped in the sanitizer build (runs in the plain build)")
    sys.exit(77)

c = Checker("campaign_run")
SPEED = os.environ.get("ST_CAMPAIGN_SPEED", "max")
plan = os.path.join(cl.ROOT, "examples", "seed000-mtp.yaml")
d = cl.tmpdir()
out = os.path.join(d, "audit")
with cl.Busy(os.environ.get("ST_CAMPAIGN_BUSY") != "0"):
    p = cl.campaign("run", plan, "--out", out, "--sim-speed", SPEED, "--nvidia-smi", "",
                    timeout=900)
c.check(p.returncode == 0, "seed000: exit 0: %d\n%s\n%s" % (p.returncode, p.stdout,
                                                             p.stderr[-4000:]))
s = cl.summary(out) if os.path.exists(os.path.join(out, "summary.json")) else None
c.check(s is not None, "summary.json written")
if s:
    c.check(s["complete"] and s["chosen"] == "baseline" and s["restored"],
            "MTP 2 / batch 2048 stays, restored: %r" % {k: s[k] for k in ("complete", "chosen", "restored")})
    base, m1, m3, b1024 = (cl.arm(s, n) for n in ("baseline", "mtp1", "mtp3", "batch1024"))
    c.check(base["verdict"] == "baseline", "baseline verdict")
    c.check(m1["verdict"] == "reject" and any("decode2048.decode_tps@" in r and "worse" in r
                                              for r in m1["reasons"]),
            "MTP 1 rejected as slower: %r" % m1["reasons"])
    c.check(m3["verdict"] == "inconclusive" and any("noise threshold" in r for r in m3["reasons"]),
            "MTP 3 inside the noise threshold: %r" % m3["reasons"])
    c.check(m3["kv_capacity_tokens"] and base["kv_capacity_tokens"]
            and m3["kv_capacity_tokens"] < base["kv_capacity_tokens"] < m1["kv_capacity_tokens"],
            "KV: MTP 3 < MTP 2 < MTP 1: %r %r %r" % (m3["kv_capacity_tokens"],
                                                   base["kv_capacity_tokens"],
                                                   m1["kv_capacity_tokens"]))
    c.check(b1024["on"] == "baseline", "batch1024 ran on the best step count (the baseline): %r"
            % b1024["on"])
    c.check(b1024["verdict"] == "reject" and any("guard" in r and "ttft" in r
                                                 for r in b1024["reasons"]),
            "batch 1024 rejected by a TTFT guard: %r" % b1024["reasons"])
    # The verdicts rest on the tests with enough samples: every decision names the test and
    # its n per side (3 or more), the TTFT guard included.
    for a in (m1, m3, b1024):
        for dd in a["decisions"]:
            c.check("Welch t on logs" in dd["reason"] and "per side" in dd["reason"],
                    "%s: the verdict names the test and n: %r" % (a["name"], dd["reason"]))
            g = [cm for cm in dd["comparisons"] if cm["kind"] == "guard"
                 and cm["metric"].endswith("ttft_s")]
            c.check(g and all(cm["n"] >= 3 and not cm["single"] for cm in g),
                    "%s: the TTFT guards decide on 3 samples or more: %r" %
                    (a["name"], [(cm["metric"], cm["n"]) for cm in g]))
    c.check(b1024["changed"] == {"engine.max_batched_tokens": "1024"},
            "batch1024 changes one parameter: %r" % b1024["changed"])

    def med(armname, metric):
        for m in s["metrics"]:
            if m["arm"] == armname and m["metric"] == metric and m["stage"] == "screening":
                return m
        return None

    for cat in ("code", "chinese", "reasoning"):
        mb, mm = med("baseline", "decode2048.decode_tps@" + cat), med("mtp1", "decode2048.decode_tps@" + cat)
        c.check(mb and mm and mb["n"] >= 3 and mm["n"] >= 3 and 100 < mb["agg"] < 150
                and mm["agg"] < 0.95 * mb["agg"],
                "decode %s: baseline %s, mtp1 %s (3 repeats or more each, MTP 1 >5%% slower)" %
                (cat, mb and mb["agg"], mm and mm["agg"]))
    def model(armname, step, stage="screening"):
        """The model's TTFT and decode rate (sim --explain-request) of the unit's one request
        alone, on the arm's profile: prompt and output tokens from its receipt."""
        a = cl.arm(s, armname)
        rec = os.path.join(out, "arms", armname, stage, step, "r1", "bench.receipts.jsonl")
        if not os.path.exists(rec):
            rec = os.path.join(out, "arms", armname, stage, step, "r1", "code.receipts.jsonl")
        r = json.loads(open(rec).readline())
        sets = []
        for k, v in sorted(a["params"].items()):
            if k.startswith("engine."):
                sets += ["--set", "%s=%s" % (k, v)]
        prof = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
        x = subprocess.run([cl.SERVETUNE, "sim", "--profile", prof] + sets +
                           ["--explain-request", "%d,%d" % (r["prompt_tokens"],
                                                            r["completion_tokens"]), "--json"],
                           capture_output=True, text=True)
        return json.loads(x.stdout)["request"]

    for armname in ("baseline", "batch1024"):
        t = med(armname, "long128k.ttft_s")
        want = model(armname, "long128k")["ttft_s"]
        c.check(t and abs(t["agg"] - want) <= 1e-8 * want,
                "%s long128k TTFT %s s is the model's prefill %.9f s" %
                (armname, t and t["agg"], want))
    for armname in ("baseline", "mtp1", "mtp3"):
        m = med(armname, "decode2048.decode_tps@code")
        want = model(armname, "decode2048")["decode_tps"]
        c.check(m and abs(m["agg"] / want - 1) < 0.03,
                "%s decode@code %s tok/s: the model's expected %.2f within the 3%% random "
                "acceptance gives" % (armname, m and m["agg"], want))
    t1, t2 = med("baseline", "long128k.ttft_s"), med("baseline", "long128k_repeat.ttft_s")
    c.check(t1 and t2 and t2["agg"] < 0.5 * t1["agg"],
            "the repeated 128K prompt meets the prefix cache: TTFT %s then %s" %
            (t1 and t1["agg"], t2 and t2["agg"]))
    tb = med("batch1024", "long128k.ttft_s")
    c.check(tb and t1 and tb["agg"] > 1.10 * t1["agg"],
            "batch 1024's 128K TTFT is >10%% slower: %s vs %s" % (tb and tb["agg"], t1 and t1["agg"]))
    c.check(not any(st["name"] == "full" and st["arms"] for st in s["stages"]),
            "nothing escalated: no full stage: %r" % s["stages"])
    cl.check_archive(c, out, "seed000")
    for f in ("report.md", "report.html", "final-state.json"):
        c.check(os.path.exists(os.path.join(out, f)), "archive has %s" % f)
    c.check("chosen: baseline" in p.stdout and "mtp3" in p.stdout, "verdict table printed")
c.close()
