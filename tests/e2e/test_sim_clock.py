"""The simulator's virtual clock (docs/sim.md, "Virtual time"): what a load measures against the
engine-model simulator is its virtual time, exact and the same whatever the speed and the host's
load; when the simulator cannot keep its clock it says so (lag per event on each response, in its
/metrics) and the load, or the campaign unit, is invalid with the reason.

1. One closed-loop bench (cc 3, mixed lengths, MTP) at --speed max, at --speed 50 and at max
   with every core kept busy: every receipt's virtual times are identical, and so is the summary
   apart from its wall-clock fields.
2. A starved simulator (fault slow_step_us: 20 ms of real time at each engine step, at --speed 100
   where a step has 0.2 ms): its lag grows past 1 s; the events carry it (vt: NS LAG), /metrics
   shows it, the bench says INVALID with the reason, and a campaign unit on such an arm is
   INVALID: its metrics are left out and its journaled detail says why.
3. A request whose stream already said it was done is placed late: X-Sim-Late, counted in
   /metrics, and the load's summary calls it invalid.
3b. A stream's requests received out of order (each on its own connection; a loaded host did it
   to a trace replay): the one that came early (X-Sim-Seq past the next) waits for the earlier
   one, and both are placed at their declared times, not late (the flake: X-Sim-Arrival 0).
"""
import json
import os
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker, bench, http_get, profile_sim, wait_for  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("sim_clock")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
FAST = ["--set", "engine.startup_s=0.1", "--set", "engine.max_running=4"]
LOAD = ["--concurrency", 3, "--requests", 9, "--workload", "mixed", "--mix",
        "fixed=1,shared-prefix=1,distinct=1", "--prefix-frac", 0.5, "--input-len", 600,
        "--output-len", 40, "--ignore-eos", "--seed", 11]
WALL = ("wall_s", "client", "time_scale", "config", "receipts", "lag_max_ms")


def virtual(recs):
    keys = ("id", "v_intended_ns", "v_sent_ns", "v_first_content_ns", "v_last_content_ns",
            "v_end_ns", "prompt_tokens", "completion_tokens", "cached_tokens", "ttft_ms",
            "e2e_ms", "tpot_ms", "content_chunks")
    return sorted(tuple(r.get(k) for k in keys) for r in recs)


def strip(d):
    if isinstance(d, dict):
        return {k: strip(v) for k, v in d.items() if k not in WALL}
    return d


def run_at(speed, busy=False):
    s = profile_sim(PROFILE, *FAST, speed=speed)
    try:
        with cl.Busy(busy):
            r = bench(s.url, *LOAD)
    finally:
        s.stop()
    return r


# ---- 1. the same figures at every speed and under load ----
runs = {"max": run_at("max"), "50": run_at("50"), "max-busy": run_at("max", busy=True)}
ref = runs["max"]
c.check(ref.summary["times"] == "virtual" and ref.summary["sim_clock"]["valid"]
        and ref.summary["sim_clock"]["requests"] == 9 and ref.summary["requests"]["ok"] == 9,
        "virtual times, 9 ok, the clock held: %r" % ref.summary.get("sim_clock"))
c.check(all(r["clock"] == "virtual" and r["v_sent_ns"] == r["v_intended_ns"] for r in ref.receipts),
        "closed loop: each request placed where its slot's previous one ended")
for name, r in runs.items():
    if name == "max":
        continue
    c.check(virtual(r.receipts) == virtual(ref.receipts),
            "%s: every receipt's virtual times equal the unpaced run's" % name)
    c.check(strip(r.summary) == strip(ref.summary),
            "%s: the summary equals the unpaced run's but for wall-clock fields:\n%r\nvs\n%r"
            % (name, strip(r.summary), strip(ref.summary)))
    c.check(r.summary["sim_clock"]["valid"] and r.summary["sim_clock"]["late"] == 0,
            "%s: the clock held: %r" % (name, r.summary["sim_clock"]))
# ITL is measured per step: the chunk gaps are the engine's step times (tens of ms), not the
# client's reads.
c.check(ref.summary["icl_ms"]["min"] > 5, "chunk gaps are engine steps: %r" % ref.summary["icl_ms"])

# ---- 2. a starved simulator: lag, reported and invalid ----
s = profile_sim(PROFILE, *FAST, "--fault", "slow_step_us=20000", speed="100")
try:
    r = bench(s.url, "--requests", 1, "--input-len", 100, "--output-len", 120, "--ignore-eos",
              "--chunk-times")
    st, body = http_get(s.addr, "/metrics")
finally:
    s.stop()
sc = r.summary["sim_clock"]
c.check(not sc["valid"] and sc["lag_max_ms"] > 1000 and "behind its clock" in sc["invalid_reason"],
        "starved: lag %.0f ms, invalid: %r" % (sc["lag_max_ms"], sc["invalid_reason"]))
c.check("INVALID" in r.out and "behind its clock" in r.out, "the table says INVALID:\n%s" % r.out)
rec = r.receipts[0]
c.check(rec["sim_lag_ms"] > 1000, "the receipt carries the request's worst lag: %s ms"
        % rec["sim_lag_ms"])
vals = {}
for line in body.decode().splitlines():
    if line.startswith("servetune_sim_"):
        k, v = line.split()
        vals[k] = float(v)
c.check(vals.get("servetune_sim_clock_lag_max_seconds", 0) > 1
        and vals.get("servetune_sim_clock_lag_events_total", 0) > 50
        and vals.get("servetune_sim_speed") == 100,
        "/metrics shows the lag: %r" % vals)
# The starved run's figures are still the model's: the same request unpaced and unstarved.
s = profile_sim(PROFILE, *FAST, speed="max")
try:
    r2 = bench(s.url, "--requests", 1, "--input-len", 100, "--output-len", 120, "--ignore-eos")
finally:
    s.stop()
c.check(virtual(r2.receipts) == virtual(r.receipts),
        "a starved simulator's stamps are still the model's (only late): %r vs %r"
        % (virtual(r2.receipts), virtual(r.receipts)))

# ---- 3. a declared request the simulator cannot honour is placed late ----
# A session of two streams at --speed 1: stream 1 runs one long request, stream 0 a short one and
# says it is done; a third request on stream 0 cannot be placed where it says.
s = profile_sim(PROFILE, *FAST, speed="1")
try:
    def chat(stream, next_, max_tokens, out):
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": max_tokens}).encode()
        req = urllib.request.Request(s.url + "/v1/chat/completions", data=body, headers={
            "Content-Type": "application/json", "X-Sim-Session": "t3", "X-Sim-Streams": "2",
            "X-Sim-Stream": str(stream), "X-Sim-Arrival": "0", "X-Sim-Next": next_})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out.append(dict((k.lower(), v) for k, v in resp.headers.items()))
            resp.read()
    long_, short = [], []
    t1 = threading.Thread(target=chat, args=(1, "none", 150, long_))
    t0 = threading.Thread(target=chat, args=(0, "none", 4, short))
    t1.start()
    t0.start()
    t0.join()
    late = []
    chat(0, "none", 4, late)  # its stream said it was done, while the session still runs
    t1.join()
    st, body = http_get(s.addr, "/metrics")
finally:
    s.stop()
c.check(long_ and short and long_[0].get("x-sim-clock") == "virtual"
        and long_[0].get("x-sim-arrival") == "0" and short[0].get("x-sim-arrival") == "0"
        and "x-sim-late" not in long_[0] and "x-sim-late" not in short[0],
        "both first requests placed at their session's start: %r %r" % (long_, short))
c.check(late and "x-sim-late" in late[0], "a request of a done stream is late: %r" % late)
c.check(b"servetune_sim_late_arrivals_total 1.0" in body, "/metrics counts it: %r"
        % [l for l in body.decode().splitlines() if "late" in l])

# ---- 3b. a stream's requests out of order: placed in the stream's order ----
# The trace of test_sweep_probe (0, 120, 200, 450, 700 ms, one open-loop stream, cap 1024) on
# stream 0: the first three in order, then the last (none) before the fourth, each on its own
# connection. Stream 1's one long request keeps the session open meanwhile (as the bench's other
# requests did): without the order, the fourth found its stream done and was placed late.
MS = 1000000
TIMES = [0, 120 * MS, 200 * MS, 450 * MS, 700 * MS]


def metric_of(addr, name):
    st, body = http_get(addr, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def traced(s, i, out, stream=0, max_tokens=4):
    if stream:
        arrival, seq, nxt = 0, 0, "none"
    else:
        arrival, seq = TIMES[i], i
        nxt = "at=%d,cap=1024" % TIMES[i + 1] if i + 1 < len(TIMES) else "none"
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": max_tokens}).encode()
    req = urllib.request.Request(s.url + "/v1/chat/completions", data=body, headers={
        "Content-Type": "application/json", "X-Sim-Session": "reorder", "X-Sim-Streams": "2",
        "X-Sim-Stream": str(stream), "X-Sim-Arrival": str(arrival), "X-Sim-Seq": str(seq),
        "X-Sim-Next": nxt})
    with urllib.request.urlopen(req, timeout=60) as resp:
        out[i] = dict((k.lower(), v) for k, v in resp.headers.items())
        resp.read()


s = profile_sim(PROFILE, *FAST, speed="1")
try:
    got = {}
    tl = threading.Thread(target=traced, args=(s, "long", got, 1, 300))
    tl.start()
    for i in range(3):
        traced(s, i, got)
    t4 = threading.Thread(target=traced, args=(s, 4, got))
    t4.start()
    # Received (parked, or, without the order, already answered) before the fourth is sent.
    wait_for(lambda: metric_of(s.addr, "servetune_sim_parked_total") == 1 or 4 in got,
             timeout=10)
    parked = metric_of(s.addr, "servetune_sim_parked_total")
    traced(s, 3, got)
    t4.join(60)
    tl.join(60)
    late = metric_of(s.addr, "servetune_sim_late_arrivals_total")
finally:
    s.stop()
c.check(parked == 1, "the last request, received before the fourth, waits for it: "
        "parked_total %r" % parked)
arr = [got.get(i, {}).get("x-sim-arrival") for i in range(5)]
c.check(arr == [str(t) for t in TIMES] and not any("x-sim-late" in h for h in got.values())
        and late == 0 and "long" in got, "out-of-order requests placed at their declared "
        "times, none late: %r (late_arrivals_total %r)" % (arr, late))

# ---- 4. a campaign unit on a starved arm is invalid ----
d = cl.tmpdir()
plan = cl.write(d, "plan.yaml", """name: clock
target:
  kind: sim
  profile: %s
  overrides: {engine.startup_s: 0.1}
baseline: {fault.slow_step_us: 0}
arms:
  - name: starved
    set: {fault.slow_step_us: 20000}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 120, repeats: 1}
  full:
    - {id: dec, kind: bench, output_tokens: 120, repeats: 1}
rules:
  metrics:
    - {metric: dec.decode_tps, samples: 1}
""" % PROFILE)
out = os.path.join(d, "audit")
p = cl.campaign("run", plan, "--out", out, "--sim-speed", "100", "--nvidia-smi", "", timeout=300)
c.check(p.returncode == 0, "campaign: exit 0: %d %s" % (p.returncode, p.stderr[-1500:]))
if os.path.exists(os.path.join(out, "summary.json")):
    s = cl.summary(out)
    units = cl.live_units(cl.journal(out))
    u = units.get("screening/starved/dec/r1")
    detail = u and u["end"]["result"].get("detail", "")
    c.check(u is not None and "INVALID" in detail and "behind its clock" in detail,
            "the starved unit is INVALID with the reason: %r" % detail)
    ok = units.get("screening/baseline/dec/r1")
    c.check(ok is not None and "INVALID" not in ok["end"]["result"].get("detail", ""),
            "the baseline's unit is valid")
    m = [x for x in s["metrics"] if x["arm"] == "starved" and x["metric"] == "dec.decode_tps"]
    c.check(not m or m[0]["n"] == 0, "no decode sample from the invalid unit: %r" % m)
    a = cl.arm(s, "starved")
    c.check(a["verdict"] != "promote", "an arm with no valid sample is not promoted: %r"
            % a["reasons"])
    c.check("INVALID" in p.stdout + p.stderr, "the progress line says INVALID")
c.close()
