"""servetune probe capacity on a slot-limited server (issue 14, finding 5): the simulator in
llama.cpp dialect with engine.max_running 2 (/props total_slots 2) and a pool for many more
documents: the answer is 2, the pass of 3 is queued by the measured-prefill rule (a document that
started only after another ended) as well as over the slots, and the output names the slot count
and where it was read as the limit, not the pool. Its /metrics answers late while requests run
(fault metrics_busy_delay_s, as llama.cpp serves /metrics through its busy task queue): scraped on
a connection of its own with a short timeout, the timed-out scrapes are counted and unknown (the
gauge never reads 0 from them), and the passes' TTFTs are those of a run without the fault. Then
a pool that holds 2 documents behind 8 slots: the pool is the limit; and SGLang's running limit
read from /server_info. Python 3 standard library
only; loopback, port 0, a small profile at a high --speed; bounded in time."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, wait_for  # noqa: E402
import urllib.request  # noqa: E402

c = Checker("probe_slots")
TMP = tempfile.mkdtemp(prefix="st-slots-")
DOC, OUT = 4096, 64

# tests/e2e/test_sweep_probe.py's small model, in llama.cpp's dialect.
PROFILE = os.path.join(TMP, "tiny.yaml")
with open(PROFILE, "w") as f:
    f.write("""\
model:
  name: tiny
  layers: 4
  hidden: 1024
  heads: 8
  kv_heads: 2
  head_dim: 128
  params_total: 1e8
  params_active: 1e8
  params_dense: 1e8
hardware:
  gpu_mem_bytes: 2GB
  hbm_bytes_per_s: 20GB/s
engine:
  dialect: llamacpp
  startup_s: 0.5
  context_length: 32768
  page_size: 16
  max_batched_tokens: 8192
  admit_output_reserve: 1
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
seed: 3
""")


def explain(*args):
    r = subprocess.run([SERVETUNE, "sim", "--profile", PROFILE, *args, "--explain", "--json"],
                       capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)


class MSim(Sim):
    def __init__(self, *args):
        super().__init__("--profile", PROFILE, "--speed", "50", *args, trace=False)
        if not wait_for(lambda: self.health() == 200, timeout=15):
            raise RuntimeError("sim never became ready")

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status
        except OSError:
            return 0


def probe(sim, out, *args):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "probe.json")
    cmd = [SERVETUNE, "probe", "capacity", "--url", sim.url, "--doc-len", str(DOC),
           "--output-len", str(OUT), "--out", out, "--no-progress"] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    js = None
    if os.path.exists(path):
        with open(path) as f:
            js = json.load(f)
    ok = p.returncode == 0 and js is not None
    c.check(ok, "%s: exit %d\nstdout:\n%s\nstderr:\n%s"
            % (" ".join(cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return (js, p.stdout) if ok else (None, p.stdout)


# ---- two slots, a pool for 15 documents: the slot count is the limit ----
runs = {}
for name, extra in (("plain", []), ("slow-metrics", ["--fault", "metrics_busy_delay_s=20"])):
    with MSim("--set", "engine.max_running=2", "--slot-save-path", TMP, *extra) as s:
        runs[name] = probe(s, os.path.join(TMP, name), "--max-cc", 6, "--metrics-timeout", 100)

js, out = runs["plain"]
if js:
    c.check(js["max_concurrent_docs"] == 2 and js["limit_found"] and js["limit"] == "slots",
            "two slots: answer %s, limit %s (expected 2, slots)\n%s"
            % (js["max_concurrent_docs"], js["limit"], out))
    c.check(js["slots"] == 2 and js["slots_source"] == "GET /props total_slots",
            "slots read from the server: %s (%s)" % (js["slots"], js["slots_source"]))
    # The pool would hold far more: it is not what stopped the probe.
    c.check(js["expected_max_docs"] is not None and js["expected_max_docs"] > 2,
            "the pool holds more than the slots: %s" % js["expected_max_docs"])
    passes = js["passes"]
    c.check([p["concurrency"] for p in passes] == [1, 2, 3],
            "stops at the first pass over the slots: %s" % [p["verdict"] for p in passes])
    c.check(all(p["fits"] and not p["over_slots"] for p in passes[:2]),
            "cc1 and cc2 fit: %s" % [p["verdict"] for p in passes[:2]])
    last = passes[-1]
    # Measured, not only inferred from the slot count: the third document started after one of
    # the first two ended, far past its own prefill.
    c.check(last["over_slots"] and last["queued"] and last["waited"] == 1 and not last["fits"],
            "cc3: over the slots and queued by the knee rule: %s" % last["verdict"])
    c.check("3 documents > 2 slots (GET /props total_slots)" in last["verdict"]
            and "started after doc" in last["verdict"], "cc3 verdict: %s" % last["verdict"])
    c.check(last["prefill_ms_per_token"] is not None and last["prefill_ms_per_token"] > 0,
            "the prefill rate measured in seeding: %s" % last["prefill_ms_per_token"])
    c.check("slots      2 (GET /props total_slots)" in out
            and "limit      the slot count, not the KV pool: 2 slots (GET /props total_slots)"
            in out, "the table names the slot limit:\n%s" % out)
    c.check("max concurrent documents 2 (pool / (D+O) = " in out, "the answer line:\n%s" % out)

js2, out2 = runs["slow-metrics"]
if js2:
    c.check(js2["max_concurrent_docs"] == 2 and js2["limit"] == "slots",
            "slow /metrics: answer %s, limit %s" % (js2["max_concurrent_docs"], js2["limit"]))
    c.check(js2["scrapes_timed_out"] >= 1
            and js2["scrapes_timed_out"] == sum(p["scrapes_timed_out"] for p in js2["passes"]),
            "slow /metrics: timed-out scrapes counted: %s of %s"
            % ([p["scrapes_timed_out"] for p in js2["passes"]], [p["scrapes"] for p in js2["passes"]]))
    c.check("%d timed out (over 100 ms: unknown, not 0)" % js2["scrapes_timed_out"] in out2,
            "the table says how many timed out:\n%s" % out2)
    for p in js2["passes"]:
        answered = p["scrapes"] - p["scrapes_timed_out"] - p["scrapes_failed"]
        c.check((p["waiting_max"] is None) == (answered == 0),
                "cc%d: waiting %s from %d answered scrapes (null when none answered)"
                % (p["concurrency"], p["waiting_max"], answered))
    # The scrapes held nothing: on the simulator's clock the passes are those of the plain run.
    if js:
        a = [p["ttft_ms"] for p in js["passes"]]
        b = [p["ttft_ms"] for p in js2["passes"]]
        c.check(a == b, "slow /metrics: the same TTFTs as without the fault: %s vs %s" % (b, a))

# ---- eight slots, a pool for 2 documents of 4,096 + 64: the pool is the limit ----
# (llama.cpp allocates its whole context as one KV cache the slots share: the pool is n_ctx.)
sets = ["--set", "engine.context_length=%d" % int(2.5 * (DOC + OUT)),
        "--set", "engine.max_running=8"]
pool = explain(*sets)["kv_pool_tokens"]
c.check(pool // (DOC + OUT) == 2, "the pool %d holds 2 documents" % pool)
with MSim(*sets, "--slot-save-path", TMP) as s:
    # The pool given: the sim's start-up line says "8/8 seqs", which reads as 8 KV streams of
    # n_ctx cells, and /props as n_ctx per slot x 8; the sim's slots share one pool of n_ctx.
    js, out = probe(s, os.path.join(TMP, "pool"), "--max-cc", 5, "--pool", pool)
if js:
    c.check(js["max_concurrent_docs"] == 2 and js["limit"] == "kv_pool",
            "eight slots, pool for 2: answer %s, limit %s\n%s"
            % (js["max_concurrent_docs"], js["limit"], out))
    c.check(js["slots"] == 8 and js["kv_pool_tokens"] == pool,
            "both limits known: slots %s, pool %s (sim %d)" % (js["slots"], js["kv_pool_tokens"],
                                                                pool))
    last = js["passes"][-1]
    c.check(last["concurrency"] == 3 and not last["over_slots"] and not last["fits"]
            and (last["queued"] or last["evicted"]),
            "cc3 within the slots does not fit: %s" % last["verdict"])
    c.check("limit      the KV pool, not the slot count: pool / (D+O) = " in out
            and "8 slots (GET /props total_slots)" in out, "the table names the pool:\n%s" % out)

# ---- every pass up to the slot count fits: the answer is the slot count, not ">= 2" ----
with MSim("--set", "engine.max_running=2", "--slot-save-path", TMP) as s:
    js, out = probe(s, os.path.join(TMP, "upto"), "--max-cc", 2)
if js:
    c.check(js["max_concurrent_docs"] == 2 and js["limit_found"] and js["limit"] == "slots"
            and len(js["passes"]) == 2,
            "up to the slots: answer %s, limit %s, found %s"
            % (js["max_concurrent_docs"], js["limit"], js["limit_found"]))
    c.check("max concurrent documents 2 (" in out, "no '>= 2':\n%s" % out)

# ---- SGLang states its running limit (/server_info): two running requests are the limit ----
with MSim("--dialect", "sglang", "--set", "engine.max_running=2") as s:
    js, out = probe(s, os.path.join(TMP, "sglang"), "--max-cc", 4)
if js:
    c.check(js["max_concurrent_docs"] == 2 and js["limit"] == "slots" and js["slots"] == 2
            and "effective_max_running_requests_per_dp" in js["slots_source"],
            "sglang: answer %s, limit %s, slots %s (%s)"
            % (js["max_concurrent_docs"], js["limit"], js["slots"], js["slots_source"]))
    c.check(js["passes"][-1]["queued"], "sglang cc3 queued: %s" % js["passes"][-1]["verdict"])
c.close()
