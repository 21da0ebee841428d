"""servetune sweep and servetune probe capacity against the simulator in model mode, and the
bench --workload family: the hit rate of a shared-prefix point after flush and warm (within half a
point of the prefix fraction) and without warm (near 0); per-slot caches (llama.cpp dialect): every
slot warmed and the target met at cc 2 and 4, and missed, invalid, when the slots cannot be seen; the capacity probe's answer equal to
floor(pool / (doc + out)) on three profiles with different pools; prompts within 1% of their
length by the sim's tokenizer; byte-identical prompts across runs and arms with one window map;
each dialect's flush trap (vLLM without --dev-mode and llama.cpp without --slot-save-path:
uncontrolled, with the reason; SGLang busy: waited for and flushed); trace replay at the trace's
timestamps; bad input refused with exit 2 before any request. Python 3 standard library only;
loopback, port 0, small profiles at a high --speed; bounded in time."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, wait_for  # noqa: E402

c = Checker("sweep_probe")
TMP = tempfile.mkdtemp(prefix="st-sweep-")
SPEED = "200"
PAGE = 16
CONTEXT = 32768

# A 100M-parameter model on a slow memory bus: a decode step takes about 10 ms of virtual time,
# 50 us of real time at x200; prefill and admission follow SGLang (the whole output reserved).
BASE = """\
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
  dialect: sglang
  startup_s: 0.5
  context_length: %d
  page_size: %d
  max_batched_tokens: 8192
  admit_output_reserve: 1
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
seed: 3
""" % (CONTEXT, PAGE)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


PROFILE = write("tiny.yaml", BASE)


def http_req(sim, method, path, body=None, timeout=30):
    host, port = sim.addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    out = r.read()
    conn.close()
    return r.status, out


def explain(*args):
    r = subprocess.run([SERVETUNE, "sim", "--profile", PROFILE, *args, "--explain", "--json"],
                       capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)


class MSim(Sim):
    def __init__(self, *args, speed=SPEED):
        super().__init__("--profile", PROFILE, "--speed", speed, *args, trace=False)
        if not wait_for(lambda: self.health() == 200, timeout=15):
            raise RuntimeError("sim never became ready")

    def health(self):
        try:
            return http_req(self, "GET", "/health", timeout=5)[0]
        except OSError:
            return 0

    def metric(self, name):
        st, body = http_req(self, "GET", "/metrics")
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
                total += float(line.split()[-1])
        return total


class Run:
    def __init__(self, p, js):
        self.rc = p.returncode
        self.out = p.stdout
        self.err = p.stderr
        self.js = js


def tool(*args, json_path=None, timeout=120):
    cmd = [SERVETUNE] + [str(a) for a in args] + ["--no-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    js = None
    if json_path and os.path.exists(json_path):
        with open(json_path) as f:
            js = json.load(f)
    r = Run(p, js)
    r.cmd = " ".join(cmd)
    return r


def expect_rc(r, rc, what):
    c.check(r.rc == rc, "%s: exit %d, expected %d\ncmd: %s\nstdout:\n%s\nstderr:\n%s"
            % (what, r.rc, rc, r.cmd, r.out[-3000:], r.err[-3000:]))
    return r.rc == rc


def sweep(url, out, *args):
    os.makedirs(out, exist_ok=True)
    return tool("sweep", "--url", url, "--out", out, *args,
                json_path=os.path.join(out, "sweep.json"))


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def receipts_of(out):
    """Every measured receipt of a sweep, keyed (file, id)."""
    recs = {}
    pdir = os.path.join(out, "points")
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".jsonl") and ".cache" not in name:
            for r in read_jsonl(os.path.join(pdir, name)):
                recs[(name, r["id"])] = r
    return recs


HIT = ["--workload", "shared-prefix", "--input-len", 8192, "--prefix-frac", 0.9,
       "--output-len", 16, "--seed", 5]

# ---- hit rate within half a point of 0.9 after flush and warm; prompts within 1% ----
D1 = os.path.join(TMP, "hit90")
with MSim() as s:
    r = sweep(s.url, D1, *HIT, "--concurrency", "1,2,4", "--requests-per-cc", 2, "--repeats", 2,
              "--model", "tiny")
if expect_rc(r, 0, "hit90 sweep"):
    js = r.js
    c.check(js["kind"] == "sweep" and len(js["points"]) == 3, "three points: %s" % js.get("points"))
    c.check(js["time_scale"] == float(SPEED) and js["times"] == "virtual"
            and js["sim_clock"]["valid"] and js["sim_clock"]["late"] == 0,
            "time scale recorded: %s %s" % (js["time_scale"], js["times"]))
    for p in js["points"]:
        c.check(abs(p["hit_rate"] - 0.9) <= 0.005,
                "cc%d: hit rate %.4f within 0.005 of 0.9" % (p["concurrency"], p["hit_rate"]))
        c.check(p["cache_state"] == "flushed+warmed" and p["valid"],
                "cc%d: %s, valid %s" % (p["concurrency"], p["cache_state"], p["valid"]))
        c.check(p["output_tokens_per_s"]["median"] > 0 and p["ttft_ms"]["p50"] > 0,
                "cc%d: throughput and TTFT %s %s" % (p["concurrency"], p["output_tokens_per_s"],
                                                     p["ttft_ms"]))
        for rp in p["repeats"]:
            c.check(rp["flush"]["outcome"] == "flushed" and rp["verify"] == "ok",
                    "cc%d r%d: flush %s, verify %s" % (p["concurrency"], rp["repeat"],
                                                      rp["flush"], rp["verify"]))
            c.check(rp["canary_cached_tokens"]["after_flush"] == 0,
                    "canary after the flush: %s" % rp["canary_cached_tokens"])
            c.check(rp["ok"] == 2 * p["concurrency"] and rp["failed"] == 0,
                    "cc%d: %d ok of %d" % (p["concurrency"], rp["ok"], 2 * p["concurrency"]))
    c.check(re.search(r"^hit90 out cc1/2/4 = [\d.]+ / [\d.]+ / [\d.]+$", r.out, re.M),
            "the seed-003 summary line:\n%s" % r.out)
    c.check(os.path.exists(os.path.join(D1, "windows.json")), "windows.json written")
    recs1 = receipts_of(D1)
    c.check(len(recs1) == 2 * 2 * (1 + 2 + 4), "one receipt a request: %d" % len(recs1))
    off = [r for r in recs1.values() if abs(r["prompt_tokens"] - 8192) > 0.01 * 8192]
    c.check(not off, "prompts within 1%% of 8192 tokens: %s" % [r["prompt_tokens"] for r in off])
    c.check(all(r["workload"]["cache_state"] == "flushed+warmed" for r in recs1.values()),
            "every receipt records its cache state")
    c.check(all(r["completion_tokens"] == 16 for r in recs1.values()), "16 output tokens each")

# ---- the same window map: byte-identical prompts on another run and another arm ----
D2 = os.path.join(TMP, "hit90-arm2")
with MSim("--set", "engine.mem_fraction=0.8") as s:
    r = sweep(s.url, D2, *HIT, "--concurrency", "1,2,4", "--requests-per-cc", 2, "--repeats", 2,
              "--model", "tiny", "--windows", os.path.join(D1, "windows.json"))
if expect_rc(r, 0, "second arm with the window map") and os.path.isdir(D1):
    c.check(r.js["workload"]["windows_reused"], "the window map was reused")
    recs2 = receipts_of(D2)
    same = [k for k in recs1 if k in recs2 and recs1[k]["body_hash"] == recs2[k]["body_hash"]]
    c.check(len(recs1) > 0 and len(same) == len(recs1),
            "byte-identical request bodies: %d of %d" % (len(same), len(recs1)))

# ---- without warm the hit rate is near 0; without flush the previous point's prefix hits ----
# (Completions there: SGLang tokenizes prompts on /v1/tokenize, while for chat the token counter
# falls back to one-token completions, which leave every prompt in the cache.)
with MSim() as s:
    r = sweep(s.url, os.path.join(TMP, "nowarm"), *HIT, "--concurrency", 1,
              "--requests-per-cc", 1, "--repeats", 2, "--no-warm")
    r2 = sweep(s.url, os.path.join(TMP, "noflush"), *HIT, "--concurrency", 1,
               "--requests-per-cc", 1, "--repeats", 2, "--no-warm", "--no-flush", "--seed", 6,
               "--api", "completions")
if expect_rc(r, 0, "no-warm sweep"):
    p = r.js["points"][0]
    c.check(all(rp["hit_rate"] < 0.01 for rp in p["repeats"]),
            "no warm: hit rates %s near 0" % [rp["hit_rate"] for rp in p["repeats"]])
    c.check(p["cache_state"] == "flushed", "no warm: state %s" % p["cache_state"])
if expect_rc(r2, 0, "no-flush sweep"):
    p = r2.js["points"][0]
    c.check(p["cache_state"] == "warm" and abs(p["repeats"][1]["hit_rate"] - 0.9) <= 0.005,
            "no flush: repeat 2 hits the prefix repeat 1 left (%s), state %s"
            % ([rp["hit_rate"] for rp in p["repeats"]], p["cache_state"]))

# ---- a hit rate off its target marks the point invalid; SIGINT keeps the points done ----
with MSim("--set", "hardware.hbm_bytes_per_s=2GB/s") as s:
    r = sweep(s.url, os.path.join(TMP, "offtarget"), *HIT, "--concurrency", 1,
              "--requests-per-cc", 1, "--repeats", 1, "--hit-target", 0.5)
    out = os.path.join(TMP, "interrupted")
    os.makedirs(out)
    p = subprocess.Popen([SERVETUNE, "sweep", "--url", s.url, "--out", out, "--no-progress",
                          "--workload", "fixed", "--input-len", "512", "--output-len", "4000",
                          "--concurrency", "1,2", "--repeats", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = wait_for(lambda: os.path.exists(os.path.join(out, "points", "cc1-r1.jsonl")),
                       timeout=20)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    sout, serr = p.communicate(timeout=30)
if expect_rc(r, 0, "sweep with an unreachable target"):
    p0 = r.js["points"][0]
    c.check(not p0["valid"] and "misses the target 0.5000" in p0["repeats"][0]["invalid_reason"],
            "off target: invalid with the reason: %s" % p0["repeats"][0]["invalid_reason"])
    c.check("NO" in r.out and "(* invalid)" in r.out, "off target: the table says so:\n%s" % r.out)
c.check(started and p.returncode == 130, "SIGINT: exit %s (130)\n%s" % (p.returncode, serr))
if os.path.exists(os.path.join(out, "sweep.json")):
    with open(os.path.join(out, "sweep.json")) as f:
        js = json.load(f)
    c.check(js["interrupted"] and len(js["points"]) == 1 and not js["points"][0]["valid"]
            and "interrupted" in js["points"][0]["repeats"][0]["invalid_reason"],
            "SIGINT: the point in flight is kept and marked: %s" % js["points"])
else:
    c.check(False, "SIGINT: sweep.json written")

# ---- per-slot caches (llama.cpp): every slot primed, or the hit target is missed ----
# The sim in the llamacpp dialect caches per slot (engine.cache_scope auto): a prefix warmed once
# sits in one of the 4 slots. The tool reads total_slots from /props and warms every slot.
SLOTS = ["--workload", "shared-prefix", "--input-len", 2048, "--prefix-frac", 0.75,
         "--output-len", 8, "--concurrency", "2,4", "--requests-per-cc", 3, "--repeats", 1,
         "--seed", 7]
with MSim("--dialect", "llamacpp", "--slot-save-path", TMP, "--set", "engine.max_running=4") as s:
    r = sweep(s.url, os.path.join(TMP, "slots"), *SLOTS)
if expect_rc(r, 0, "sweep on llamacpp with 4 slots"):
    for p in r.js["points"]:
        rp = p["repeats"][0]
        c.check(rp["warm"] == {"requests": 4, "failed": 0, "slots": 4},
                "slots cc%d: every slot warmed: %s" % (p["concurrency"], rp["warm"]))
        c.check(p["valid"] and abs(p["hit_rate"] - 0.75) <= 0.01,
                "slots cc%d: hit %.4f of target 0.75, valid %s (%s)"
                % (p["concurrency"], p["hit_rate"], p["valid"], rp["invalid_reason"]))
# The same per-slot engine behind a vLLM face: no slot count on the wire, one warm-up request,
# and the requests on the other slots recompute: the hit rate misses and the point says so.
with MSim("--dev-mode", "--set", "engine.max_running=4", "--set", "engine.cache_scope=slot") as s:
    r = sweep(s.url, os.path.join(TMP, "slots-unseen"), *SLOTS)
if expect_rc(r, 0, "sweep on a per-slot cache the tool cannot see"):
    p = r.js["points"][1]
    rp = p["repeats"][0]
    c.check(rp["warm"]["slots"] is None and rp["warm"]["requests"] == 1,
            "unseen slots: one warm-up: %s" % rp["warm"])
    c.check(not p["valid"] and p["hit_rate"] < 0.7 and "misses the target" in rp["invalid_reason"],
            "unseen slots cc4: hit %.4f, invalid: %s" % (p["hit_rate"], rp["invalid_reason"]))

# ---- flush traps per dialect ----
SMALL = ["--workload", "shared-prefix", "--input-len", 2048, "--prefix-frac", 0.5,
         "--output-len", 8, "--concurrency", 1, "--requests-per-cc", 2, "--repeats", 1]
for dialect, extra, state, words in (
        ("vllm", [], "uncontrolled", "VLLM_SERVER_DEV_MODE"),
        ("vllm", ["--dev-mode"], "flushed+warmed", None),
        ("llamacpp", [], "uncontrolled", "slot-save-path"),
        ("llamacpp", ["--slot-save-path", TMP], "flushed+warmed", None)):
    name = "%s%s" % (dialect, extra[0] if extra else "")
    with MSim("--dialect", dialect, *extra) as s:
        r = sweep(s.url, os.path.join(TMP, "flush-" + name.replace("/", "_")), *SMALL)
    if not expect_rc(r, 0, "sweep on %s" % name):
        continue
    p = r.js["points"][0]
    rp = p["repeats"][0]
    c.check(p["cache_state"] == state, "%s: cache state %s, expected %s (%s)"
            % (name, p["cache_state"], state, rp["cache_reason"]))
    if words:
        c.check(words in rp["cache_reason"] and rp["flush"]["outcome"] == "unsupported",
                "%s: the reason names %s: %s" % (name, words, rp["cache_reason"]))
        c.check("uncontrolled" in r.out, "%s: the table says uncontrolled:\n%s" % (name, r.out))
    else:
        c.check(rp["verify"] == "ok", "%s: flush verified: %s" % (name, rp["cache_reason"]))

# SGLang answers 400 while a request runs: the flush waits for idle, then succeeds.
with MSim("--set", "hardware.hbm_bytes_per_s=2GB/s") as s:
    bg = {}

    def long_request():
        bg["r"] = http_req(s, "POST", "/v1/chat/completions", {
            "model": "tiny", "max_tokens": 1500,
            "messages": [{"role": "user", "content": "busy " * 50}]}, timeout=60)
        bg["end"] = time.monotonic()

    th = threading.Thread(target=long_request)
    th.start()
    busy = wait_for(lambda: s.metric("sglang:num_running_reqs") >= 1, timeout=10)
    r = sweep(s.url, os.path.join(TMP, "flush-busy"), *SMALL)
    th.join(60)
c.check(busy, "sglang: a request was running when the sweep started")
if expect_rc(r, 0, "sweep on a busy sglang"):
    rp = r.js["points"][0]["repeats"][0]
    c.check(rp["flush"]["outcome"] == "flushed" and rp["cache_state"] == "flushed+warmed",
            "sglang busy: waited and flushed: %s" % rp["flush"])
    c.check(bg.get("r", (0,))[0] == 200, "the busy request completed: %s" % bg.get("r", (0,))[0])
    # Both clocks are CLOCK_MONOTONIC: the measured requests start after the busy one ended.
    first = min(x["t_intended_ns"] for x in read_jsonl(rp["receipts"])) / 1e9
    c.check("end" in bg and first >= bg["end"] - 0.05,
            "sglang busy: the flush waited for the running request (it ended at %.3f, the point "
            "started at %.3f)" % (bg.get("end", 0), first))

# ---- capacity probe: floor(pool / (doc + out)) on three pools ----
DOC, OUT = 4096, 64
ex = explain()
fixed = ex["weights_bytes_per_gpu"] + ex["act_bytes"] + ex["graph_bytes"] + ex["reserve_bytes"]
for k in (2, 3, 5):
    want_pool = (k + 0.5) * (DOC + OUT)
    frac = (want_pool * ex["kv_bytes_per_token"] + fixed) / ex["gpu_mem_bytes"]
    sets = ["--set", "engine.mem_fraction=%.9f" % frac]
    pool = explain(*sets)["kv_pool_tokens"]
    out = os.path.join(TMP, "cap%d" % k)
    with MSim(*sets, speed="50") as s:
        s.log.flush()
        # One pool from the engine's own start-up line, the others from the server's routes.
        log = ["--server-log", os.path.join(s.dir, "sim.log")] if k == 3 else []
        r = tool("probe", "capacity", "--url", s.url, "--doc-len", DOC, "--output-len", OUT,
                 "--max-cc", k + 2, "--out", out, *log, json_path=os.path.join(out, "probe.json"))
    if not expect_rc(r, 0, "probe on pool %d" % pool):
        continue
    js = r.js
    want = pool // (DOC + OUT)
    c.check(want == k, "pool %d sized for %d documents" % (pool, k))
    c.check(js["max_concurrent_docs"] == want,
            "pool %d: max concurrent documents %s, expected %d\n%s"
            % (pool, js["max_concurrent_docs"], want, r.out))
    c.check(js["kv_pool_tokens"] == pool and js["doc_tokens"] == DOC,
            "pool %s (sim %d), doc %s" % (js["kv_pool_tokens"], pool, js["doc_tokens"]))
    c.check(("log line" in js["kv_pool_source"]) == (k == 3), "pool source: %s"
            % js["kv_pool_source"])
    c.check(abs(js["pool_over_doc"] - pool / DOC) < 1e-9, "pool / doc %s" % js["pool_over_doc"])
    # The first pass over the pool stops the probe: its documents queue or (depending on when
    # the scheduler admits the last one, which a loaded machine shifts) evict each other.
    last = js["passes"][-1]
    c.check(len(js["passes"]) == k + 1 and not last["fits"]
            and (last["queued"] or last["evicted"]),
            "stops at the first pass that does not fit (queued or evicted): %s"
            % [p["verdict"] for p in js["passes"]])
    c.check(all(len(p["ttft_ms"]) == p["concurrency"] for p in js["passes"]), "per-cc TTFTs")
    c.check("max concurrent documents %d (pool / (D+O) = %.2f)" % (want, pool / (DOC + OUT))
            in r.out, "the table line:\n%s" % r.out)

# ---- bench --workload: fixed lengths within 1%, a single long request, trace timestamps ----
with MSim() as s:
    d = tempfile.mkdtemp(prefix="st-wl-", dir=TMP)
    rcp = os.path.join(d, "fixed.jsonl")
    r = tool("bench", "--url", s.url, "--workload", "fixed", "--input-len", 2048,
             "--output-len", 32, "--ignore-eos", "--requests", 4, "--concurrency", 2,
             "--receipts", rcp, "--json", os.path.join(d, "fixed.json"),
             json_path=os.path.join(d, "fixed.json"))
    if expect_rc(r, 0, "bench --workload fixed"):
        recs = read_jsonl(rcp)
        c.check(all(abs(x["prompt_tokens"] - 2048) <= 20.48 and x["completion_tokens"] == 32
                    for x in recs), "fixed: prompts within 1%%, 32 out: %s"
                % [(x["prompt_tokens"], x["completion_tokens"]) for x in recs])
        c.check(r.js["workload"]["kind"] == "fixed", "summary names the workload")
    r = tool("bench", "--url", s.url, "--workload", "long", "--input-len", 24000,
             "--output-len", 8, "--requests", 1)
    if expect_rc(r, 0, "bench one long request"):
        c.check(re.search(r"^single     completed in [\d.]+ s, TTFT [\d.]+ s$", r.out, re.M),
                "single request line:\n%s" % r.out)

    # A Mooncake trace: the receipts' intended times keep the trace's offsets.
    stamps = [0, 120, 200, 450, 700]
    lines = ['{"timestamp": %d, "input_length": 600, "output_length": 4, "hash_ids": [%d, %d]}'
             % (t, i % 2, 10 + i) for i, t in enumerate(stamps)]
    trace = write("trace.jsonl", "\n".join(lines) + "\n")
    rcp = os.path.join(d, "trace.jsonl")
    r = tool("bench", "--url", s.url, "--workload", "trace", "--trace", trace, "--receipts", rcp)
    if expect_rc(r, 0, "bench --workload trace"):
        recs = sorted(read_jsonl(rcp), key=lambda x: x["id"])
        t0 = recs[0]["t_intended_ns"]
        offs = [(x["t_intended_ns"] - t0) / 1e6 for x in recs]
        c.check(len(recs) == len(stamps) and all(abs(o - t) < 0.001 for o, t in zip(offs, stamps)),
                "trace offsets kept: %s vs %s" % (offs, stamps))
        # On the simulator's clock each arrives exactly at its offset, whatever the client's delay.
        vi = [x.get("v_intended_ns") for x in recs]
        vs = [x.get("v_sent_ns") for x in recs]
        want = [t * 1000000 for t in stamps]
        c.check(vi == want and vs == want and all(x["clock"] == "virtual" for x in recs),
                "trace arrivals placed at their virtual offsets: %s %s" % (vi, vs))

    # ---- bad input: exit 2, nothing sent ----
    before = s.metric("sglang:num_requests_total")
    bad = write("bad-trace.jsonl", lines[0] + "\n" + lines[1] + "\n{\"timestamp\": oops}\n")
    tiny_corpus = write("tiny-corpus.jsonl", '{"text": "a few words only"}\n')
    for what, args, words in (
            ("prefix-frac 1.0", ["sweep", "--url", s.url, "--workload", "shared-prefix",
                                 "--prefix-frac", "1.0", "--concurrency", 1], "--prefix-frac"),
            ("over the context", ["sweep", "--url", s.url, "--input-len", CONTEXT + 10,
                                  "--concurrency", 1], "context"),
            ("probe over the context", ["probe", "capacity", "--url", s.url, "--doc-len", CONTEXT,
                                        "--output-len", 64], "context"),
            ("bad trace line", ["bench", "--url", s.url, "--workload", "trace", "--trace", bad],
             "bad-trace.jsonl:3"),
            ("bench prefix-frac 1", ["bench", "--url", s.url, "--workload", "shared-prefix",
                                     "--prefix-frac", "1"], "--prefix-frac"),
            ("corpus too small", ["bench", "--url", s.url, "--workload", "fixed", "--input-len",
                                  4096, "--corpus", tiny_corpus, "--requests", 2], "too small")):
        if what == "corpus too small":
            # Only the token counter may have spoken to the server (one-token calibrations).
            after = s.metric("sglang:num_requests_total")
            c.check(after == before, "bad input sent no request (%s -> %s)" % (before, after))
            gen = s.metric("sglang:generation_tokens_total")
        r = tool(*args)
        expect_rc(r, 2, what)
        c.check(words in r.err, "%s: the message names %s: %s" % (what, words, r.err.strip()))
    calls = s.metric("sglang:num_requests_total") - after
    c.check(s.metric("sglang:generation_tokens_total") - gen == calls,
            "corpus too small: no load, only %d one-token counter calls" % calls)
c.close()
