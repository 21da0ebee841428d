"""servetune sim in model mode (--profile): start-up lines per dialect with the pool figure,
out-of-memory and profile errors, /health before and after start-up, --explain --json, the
X-Sim-Time-Scale header, several tokens per chunk under MTP, cached tokens of a repeated prompt,
the cache-flush routes and their traps per dialect, /metrics names per dialect, queueing when the
pool is short, the over-context 400, X-Servetune-Expect, scenario faults and crash_after_requests.
Python 3 standard library only; port 0, loopback, tiny profiles at --speed 100 or more, bounded
in time (well under 60 s)."""
import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, wait_for  # noqa: E402

c = Checker("sim_model")
TMP = tempfile.mkdtemp(prefix="st-model-")

# A 100M-parameter model with one MTP layer on a 2 GB GPU: fits easily, steps of a few ms.
TINY = """\
model:
  name: tiny-mtp
  layers: 4
  hidden: 1024
  heads: 8
  kv_heads: 2
  head_dim: 128
  params_total: 1e8
  params_active: 1e8
  params_dense: 1e8
  mtp_layers: 1
  vision_params: 1e6
  vision_patch: 28
hardware:
  gpu_mem_bytes: 2GB
engine:
  startup_s: 1
  context_length: 4096
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
quality:
  error_rate: 0
seed: 7
"""
MTP = ["--set", "engine.spec_method=mtp", "--set", "engine.spec_steps=2",
       "--set", "engine.spec_accept=[1.0, 1.0]"]
# Slow decode (a slow memory bus), so a request lasts long enough in real time to be seen running.
SLOW = ["--set", "hardware.hbm_bytes_per_s=2GB/s"]


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


PROFILE = write("tiny.yaml", TINY)


def run(*args, timeout=20):
    return subprocess.run([SERVETUNE, "sim"] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def explain(*args):
    r = run("--profile", PROFILE, *args, "--explain", "--json")
    return json.loads(r.stdout)


class ModelSim(Sim):
    """A model-mode sim; waits for /health 200 unless told not to."""

    def __init__(self, *args, ready=True, speed="100"):
        super().__init__("--profile", PROFILE, "--speed", speed, *args, trace=False)
        if ready:
            ok = wait_for(lambda: get(self, "/health")[0] == 200, timeout=10)
            if not ok:
                raise RuntimeError("sim never became ready")

    def stderr(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


def request(sim, method, path, body=None, headers=None, timeout=20):
    host, port = sim.addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    hd = {"Content-Type": "application/json"}
    hd.update(headers or {})
    conn.request(method, path, body=data, headers=hd)
    r = conn.getresponse()
    out = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return r.status, hdrs, out


def get(sim, path):
    try:
        st, _, body = request(sim, "GET", path, timeout=5)
        return st, body
    except OSError:
        return 0, b""


def chat_bg(*args, **kw):
    """chat() for a thread whose server may be killed under it."""
    try:
        return chat(*args, **kw)
    except OSError as e:
        return (0, {}, str(e).encode())


def chat(sim, content, max_tokens=8, stream=False, usage=True, headers=None, extra=None):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    if stream:
        body["stream"] = True
        if usage:
            body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return request(sim, "POST", "/v1/chat/completions", body, headers)


def stamped(raw):
    """The SSE events of a model-mode stream as (virtual ns, lag ns, data bytes): every event
    carries the simulator's "vt: NS LAG" field before its data line (docs/sim.md)."""
    out = []
    for piece in raw.split(b"\n\n"):
        vt, data = None, None
        for line in piece.split(b"\n"):
            if line.startswith(b"vt: "):
                vt = tuple(int(x) for x in line[4:].split())
            elif line.startswith(b"data: "):
                data = line[6:]
        if data is not None:
            out.append((vt, data))
    return out


def events(raw):
    return [json.loads(d) for _, d in stamped(raw) if d != b"[DONE]"]


def stream_text(evs):
    return "".join(e["choices"][0]["delta"].get("content") or ""
                   for e in evs if e.get("choices"))


def usage_of(evs):
    for e in evs:
        if e.get("usage"):
            return e["usage"]
    return None


def metrics(sim):
    st, body = get(sim, "/metrics")
    vals = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            vals[name.split("{")[0] if "{" in name else name] = float(v)
    return body.decode(), vals


LONG = "lorem ipsum dolor sit amet " * 60  # about 400 tokens


# ---- --explain ----
ex = explain()
for k in ("kv_pool_tokens", "kv_bytes_per_token", "weights_bytes_per_gpu", "fits"):
    c.check(k in ex, "--explain --json has %s" % k)
c.check(ex["fits"] is True and ex["kv_pool_tokens"] > 0, "tiny profile fits: %r" % ex)
bad = explain("--set", "hardware.gpu_mem_bytes=300MB")
c.check(bad["fits"] is False and bad["reason"], "--explain of a profile that does not fit: %r"
        % bad.get("reason"))
r = run("--profile", PROFILE, "--explain")
c.check(r.returncode == 0 and "pool" in r.stdout and "decode" in r.stdout,
        "--explain text: rc %d %r" % (r.returncode, r.stdout[:200]))

# ---- start-up lines, OOM and profile errors ----
pool = ex["kv_pool_tokens"]
for dialect, needle in (("vllm", "GPU KV cache size: {:,} tokens".format(pool)),
                        ("sglang", "KV Cache is allocated. #tokens: %d" % pool),
                        ("llamacpp", "cells")):
    s = ModelSim("--dialect", dialect)
    err = s.stderr()
    c.check(needle in err, "%s start-up line %r in %r" % (dialect, needle, err[:600]))
    if dialect == "sglang":
        c.check("max_total_num_tokens=%d" % pool in err, "sglang max_total_num_tokens line")
        c.check("The server is fired up and ready to roll!" in err, "sglang ready line")
    if dialect == "vllm":
        c.check("Maximum concurrency for 4,096 tokens per request" in err, "vllm concurrency line")
    if dialect == "llamacpp":
        c.check("main: server is listening on http://" + s.addr in err, "llama.cpp listening line")
    c.check(s.stop() == 0, "%s exits 0 on SIGTERM" % dialect)

for dialect, needle in (("vllm", "Error"), ("sglang", "Error"), ("llamacpp", "failed to allocate")):
    r = run("--profile", PROFILE, "--dialect", dialect, "--set", "hardware.gpu_mem_bytes=300MB",
            "--listen", "127.0.0.1:0")
    c.check(r.returncode == 1 and needle in r.stderr and "listening" not in r.stdout,
            "%s OOM: rc %d, %r" % (dialect, r.returncode, r.stderr[-300:]))
r = run("--profile", PROFILE, "--fault", "startup_oom=1", "--listen", "127.0.0.1:0")
c.check(r.returncode == 1 and "EngineCore failed to start" in r.stderr, "startup_oom fault: %r"
        % r.stderr[-200:])

badp = write("bad.yaml", "model:\n  layers: 4\nengine:\n  tp: lots\n")
r = run("--profile", badp, "--listen", "127.0.0.1:0")
c.check(r.returncode == 2 and badp + ":4:" in r.stderr and "engine.tp" in r.stderr,
        "bad profile: rc %d %r" % (r.returncode, r.stderr))
r = run("--profile", PROFILE, "--set", "engine.tp=0", "--listen", "127.0.0.1:0")
c.check(r.returncode == 2 and "engine.tp" in r.stderr, "bad --set: rc %d %r"
        % (r.returncode, r.stderr))
r = run("--profile", PROFILE, "--set", "engine.tp=3", "--listen", "127.0.0.1:0")
c.check(r.returncode == 2, "impossible profile (tp 3 on 1 GPU): rc %d %r"
        % (r.returncode, r.stderr))
r = run("--profile", os.path.join(TMP, "missing.yaml"), "--listen", "127.0.0.1:0")
c.check(r.returncode == 2, "missing profile: rc %d" % r.returncode)
r = run("--dialect", "sglang", "--listen", "127.0.0.1:0")
c.check(r.returncode == 2 and "--profile" in r.stderr, "--dialect without --profile: %r"
        % r.stderr)
r = run("--profile", PROFILE, "--ttft-ms", "5", "--listen", "127.0.0.1:0")
c.check(r.returncode == 2, "--ttft-ms with --profile: rc %d" % r.returncode)

# ---- /health before and after start-up, the time-scale header ----
s = ModelSim("--dialect", "llamacpp", "--fault", "slow_start_s=100", ready=False)
st, body = get(s, "/health")
c.check(st == 503 and b"Loading model" in body, "llama.cpp /health while loading: %d %r"
        % (st, body))
st, _, body = chat(s, "hi")
c.check(st == 503, "completion while loading: %d" % st)
c.check(wait_for(lambda: get(s, "/health")[0] == 200, timeout=10), "/health 200 after start-up")
st, body = get(s, "/health")
c.check(body == b'{"status":"ok"}', "llama.cpp health body %r" % body)
s.stop()

s = ModelSim("--speed", "250", speed="250")
for path in ("/health", "/v1/models", "/metrics", "/nothing"):
    st, hd, _ = request(s, "GET", path)
    c.check(hd.get("x-sim-time-scale") == "250", "%s X-Sim-Time-Scale %r" % (path, hd))
st, hd, _ = chat(s, "hi")
c.check(st == 200 and hd.get("x-sim-time-scale") == "250", "completion X-Sim-Time-Scale")
st, _, body = request(s, "GET", "/v1/models")
m = json.loads(body)
c.check(m["data"][0]["id"] == "tiny-mtp" and m["data"][0]["max_model_len"] == 4096,
        "vllm /v1/models %r" % m)
s.stop()

# ---- MTP: several tokens per chunk; usage; cached tokens ----
s = ModelSim(*MTP)
st, hd, raw = chat(s, "count to ten", max_tokens=31, stream=True)
evs = events(raw)
sizes = [len(e["choices"][0]["delta"]["content"]) // 4 for e in evs
         if e.get("choices") and e["choices"][0]["delta"].get("content")]
u = usage_of(evs)
c.check(st == 200 and u and u["completion_tokens"] == 31 and sum(sizes) == 31,
        "MTP stream: usage %r, chunk sizes %r" % (u, sizes))
c.check(max(sizes or [0]) == 3 and sizes.count(3) >= 9, "MTP chunks carry 3 tokens: %r" % sizes)
# Every event carries the simulator's virtual time: the headers' arrival, then each engine step.
vts = [v for v, _ in stamped(raw)]
c.check(hd.get("x-sim-clock") == "virtual" and vts and all(v and v[1] >= 0 for v in vts),
        "every event stamped vt: NS LAG: %r" % vts[:3])
ts = [v[0] for v in vts if v]
c.check(ts == sorted(ts) and len(set(ts)) == len(sizes) + 1,
        "one stamp per engine step, rising: %r" % ts[:12])
c.check(ts and int(hd.get("x-sim-arrival", "-1")) == ts[0],
        "X-Sim-Arrival %r is the role chunk's time %r" % (hd.get("x-sim-arrival"), ts[:1]))
_, vals = metrics(s)
c.check(vals.get("vllm:spec_decode_num_accepted_tokens_total", 0) > 0,
        "spec metrics count accepted tokens")

st, _, b1 = chat(s, LONG, max_tokens=4)
st2, _, b2 = chat(s, LONG, max_tokens=4)
u1, u2 = json.loads(b1)["usage"], json.loads(b2)["usage"]
c.check(u1["prompt_tokens_details"]["cached_tokens"] == 0, "first prompt: cached 0 (%r)" % u1)
c.check(u2["prompt_tokens_details"]["cached_tokens"] >= u2["prompt_tokens"] - 16,
        "repeated prompt: cached %r of %r" % (u2["prompt_tokens_details"], u2["prompt_tokens"]))
st, _, _ = request(s, "POST", "/reset_prefix_cache")
c.check(st == 404, "vllm /reset_prefix_cache without --dev-mode: %d" % st)
st, _, body = request(s, "POST", "/tokenize", {"prompt": "hello world, this is"})
tk = json.loads(body)
c.check(tk["count"] == 5 and len(tk["tokens"]) == 5 and tk["max_model_len"] == 4096,
        "vllm /tokenize %r" % tk)
s.stop()

s = ModelSim("--dev-mode")
chat(s, LONG, max_tokens=2)
st, _, body = request(s, "POST", "/reset_prefix_cache")
c.check(st == 200 and body == b"", "vllm /reset_prefix_cache with --dev-mode: %d %r" % (st, body))
st, _, b3 = chat(s, LONG, max_tokens=2)
c.check(json.loads(b3)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0,
        "cached 0 after /reset_prefix_cache")
s.stop()

# ---- SGLang /flush_cache: 400 while a request runs, 200 idle, ?timeout= waits ----
s = ModelSim("--dialect", "sglang", *SLOW)
chat(s, LONG, max_tokens=2)
box = {}
t = threading.Thread(target=lambda: box.update(r=chat_bg(s, LONG + "x", max_tokens=500)))
t.start()
time.sleep(0.15)
st, _, body = request(s, "POST", "/flush_cache")
c.check(st == 400 and body.startswith(b"Cache flushed."), "sglang /flush_cache while running: %d"
        % st)
st, _, body = request(s, "GET", "/flush_cache?timeout=1000")
c.check(st == 200, "sglang /flush_cache?timeout= waits for idle: %d" % st)
t.join()
c.check(box["r"][0] == 200, "the running request finished: %d" % box["r"][0])
st, _, b4 = chat(s, LONG, max_tokens=2)
c.check(json.loads(b4)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0,
        "sglang: cached 0 after /flush_cache")
st, _, body = request(s, "GET", "/get_server_info")
info = json.loads(body)
c.check(info["max_total_num_tokens"] == pool and "internal_states" in info
        and info["internal_states"][0]["memory_usage"]["token_capacity"] == pool,
        "sglang /get_server_info %r" % {k: info.get(k) for k in ("max_total_num_tokens",)})
text, vals = metrics(s)
for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_used_tokens",
             "sglang:token_usage", "sglang:cache_hit_rate", "sglang:spec_accept_length",
             "sglang:num_retracted_reqs", "sglang:prompt_tokens_total",
             "sglang:generation_tokens_total", "sglang:cached_tokens_total",
             "sglang:time_to_first_token_seconds_bucket"):
    c.check(name in text, "sglang /metrics has %s" % name)
c.check("# TYPE sglang:time_to_first_token_seconds histogram" in text, "sglang TTFT histogram")
st, _, _ = request(s, "POST", "/reset_prefix_cache")
c.check(st == 404, "sglang has no /reset_prefix_cache: %d" % st)
s.stop()

# ---- llama.cpp slots erase, props, metrics, timings ----
s = ModelSim("--dialect", "llamacpp")
st, _, body = request(s, "POST", "/slots/0?action=erase")
c.check(st == 501 and b"slot-save-path" in body, "llama.cpp erase without --slot-save-path: %d %r"
        % (st, body))
st, _, body = request(s, "GET", "/props")
props = json.loads(body)
c.check(props["total_slots"] >= 1 and props["default_generation_settings"]["n_ctx"] > 0,
        "llama.cpp /props %r" % {k: props.get(k) for k in ("total_slots",)})
st, _, raw = chat(s, "hello", max_tokens=5, stream=True, usage=False)
evs = events(raw)
fin = [e for e in evs if e.get("choices") and e["choices"][0].get("finish_reason")]
c.check(fin and "timings" in fin[-1] and fin[-1]["timings"]["predicted_n"] == 5,
        "llama.cpp finish chunk carries timings: %r" % fin[-1:])
c.check(evs[0]["choices"][0]["delta"].get("role") == "assistant"
        and evs[0]["choices"][0]["delta"]["content"] is None, "llama.cpp role delta content null")
text, vals = metrics(s)
for name in ("llamacpp:requests_processing", "llamacpp:requests_deferred",
             "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
             "llamacpp:n_decode_total"):
    c.check(name in text, "llama.cpp /metrics has %s" % name)
st, _, body = request(s, "POST", "/tokenize", {"content": "hello world, this is"})
c.check(st == 200 and list(json.loads(body)) == ["tokens"], "llama.cpp /tokenize %r" % body)
s.stop()
s = ModelSim("--dialect", "llamacpp", "--slot-save-path", TMP)
st, _, body = request(s, "POST", "/slots/0?action=erase")
c.check(st == 200 and json.loads(body)["id_slot"] == 0, "llama.cpp erase with the path: %d %r"
        % (st, body))
s.stop()

# ---- vLLM metrics, queueing, over-context ----
# A pool of about 4,500 tokens (vLLM refuses a pool under the context, 4,096): three prompts of
# ~1,250 tokens fit, the others wait. The pool is linear in mem_fraction; solve for it.
fixed = ex["weights_bytes_per_gpu"] + ex["act_bytes"] + ex["graph_bytes"] + ex["reserve_bytes"]
frac = (4500 * ex["kv_bytes_per_token"] + fixed) / ex["gpu_mem_bytes"]
QUEUE = SLOW + ["--set", "engine.mem_fraction=%.6f" % frac]
qex = explain(*QUEUE)
s = ModelSim(*QUEUE)
prompt = "abcd " * 1000  # ~1,250 tokens with the template
threads = [threading.Thread(target=chat_bg, args=(s, str(i) + prompt), kwargs={"max_tokens": 100})
           for i in range(5)]
for th in threads:
    th.start()
seen = {"waiting": 0, "running": 0}


def sample_queue():
    _, v = metrics(s)
    seen["waiting"] = max(seen["waiting"], v.get("vllm:num_requests_waiting", 0))
    seen["running"] = max(seen["running"], v.get("vllm:num_requests_running", 0))
    return seen["waiting"] > 0


wait_for(sample_queue, timeout=5, step=0.01)
print("queue sample:", seen, "pool", qex["kv_pool_tokens"])
for th in threads:
    th.join()
c.check(seen["waiting"] > 0 and seen["running"] >= 1,
        "queueing with a pool of %d tokens: %r" % (qex["kv_pool_tokens"], seen))
text, vals = metrics(s)
for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
             "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
             "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket",
             "vllm:cache_config_info"):
    c.check(name in text, "vllm /metrics has %s" % name)
c.check('num_gpu_blocks="%d"' % qex["kv_pool_blocks"] in text, "cache_config_info num_gpu_blocks")
c.check(vals.get("vllm:time_to_first_token_seconds_count") == 5, "TTFT histogram counted 5")
st, _, body = chat(s, "word " * 5000, max_tokens=4)
err = json.loads(body)
c.check(st == 400 and "maximum context length" in err["error"]["message"],
        "over-context 400: %d %r" % (st, body[:200]))
st, _, body = request(s, "POST", "/v1/chat/completions", b"{not json")
c.check(st == 400 and b"error" in body, "malformed body 400: %d" % st)
s.stop()

# ---- images count by the PNG header; a client that leaves is aborted in the engine ----
png = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 2048, 1536)
       + b"\x08\x02\x00\x00\x00" + b"\x00" * 16)
url = "data:image/png;base64," + base64.b64encode(png).decode()
s = ModelSim(*SLOW)
parts = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": url}}]
st, _, body = request(s, "POST", "/v1/chat/completions",
                      {"messages": [{"role": "user", "content": parts}], "max_tokens": 2})
st2, _, body2 = request(s, "POST", "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": parts[:1]}], "max_tokens": 2})
img = 74 * 55  # ceil(2048 / 28) * ceil(1536 / 28) patches
c.check(st == 200 and json.loads(body)["usage"]["prompt_tokens"]
        == json.loads(body2)["usage"]["prompt_tokens"] + img,
        "image tokens by the patch rule: %r %r" % (body[-160:], body2[-160:]))
host, port = s.addr.rsplit(":", 1)
sock = socket.create_connection((host, int(port)))
req = json.dumps({"messages": [{"role": "user", "content": "go"}], "max_tokens": 3000,
                  "stream": True}).encode()
sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
             b"\r\nContent-Length: %d\r\n\r\n%s" % (len(req), req))
c.check(wait_for(lambda: metrics(s)[1].get("vllm:num_requests_running", 0) == 1, timeout=5),
        "the streaming request runs")
sock.close()
c.check(wait_for(lambda: metrics(s)[1].get("vllm:num_requests_running", 1) == 0, timeout=5),
        "a client that leaves is aborted in the engine")
c.check(metrics(s)[1].get("vllm:generation_tokens_total", 0) < 3000, "aborted before the end")
s.stop()

# ---- X-Servetune-Expect ----
ANSWER = "The answer is 42."
s = ModelSim()
st, _, body = chat(s, "what is six times seven?", max_tokens=16,
                   headers={"X-Servetune-Expect": ANSWER})
txt = json.loads(body)["choices"][0]["message"]["content"]
c.check(txt.startswith(ANSWER), "error_rate 0: right answer %r" % txt)
st, _, raw = chat(s, "what is six times seven?", max_tokens=16, stream=True,
                  headers={"X-Servetune-Expect": ANSWER})
c.check(stream_text(events(raw)).startswith(ANSWER), "streamed answer %r"
        % stream_text(events(raw)))
st, _, body = chat(s, "what is six times seven?", max_tokens=16)
c.check(ANSWER not in json.loads(body)["choices"][0]["message"]["content"],
        "no header, no answer")
s.stop()
s = ModelSim("--set", "quality.error_rate=1")
st, _, body = chat(s, "what is six times seven?", max_tokens=16,
                   headers={"X-Servetune-Expect": ANSWER})
txt = json.loads(body)["choices"][0]["message"]["content"]
c.check(not txt.startswith(ANSWER) and len(txt) >= len(ANSWER), "error_rate 1: wrong answer %r"
        % txt)
s.stop()

# ---- faults: scenario status, memory pressure, crash_after_requests ----
scen = write("scenario.yaml", "# every request fails\nstatus: 503\nstatus_rate: 1\n")
s = ModelSim("--dialect", "sglang", "--scenario", scen)
st, _, body = chat(s, "hi")
c.check(st == 503 and json.loads(body).get("object") == "error", "scenario status 503: %d %r"
        % (st, body))
s.stop()
badscen = write("badscen.yaml", "status: 503\nnope: 1\n")
r = run("--profile", PROFILE, "--scenario", badscen, "--listen", "127.0.0.1:0")
c.check(r.returncode == 2 and badscen + ":2:" in r.stderr, "bad scenario: %r" % r.stderr)

s = ModelSim(*SLOW, "--fault", "memory_pressure_blocks=1000000,memory_pressure_at_s=5")
th = threading.Thread(target=chat_bg, args=(s, LONG), kwargs={"max_tokens": 400})
th.start()
preempted = wait_for(lambda: metrics(s)[1].get("vllm:num_preemptions_total", 0) > 0, timeout=5)
c.check(preempted, "memory pressure preempts")
s.kill()
th.join()

s = ModelSim("--fault", "crash_after_requests=2")
chat(s, "one")
chat(s, "two")
try:
    s.proc.wait(timeout=5)
except subprocess.TimeoutExpired:
    pass
c.check(s.proc.returncode == 1 and "sim crash after 2 requests" in s.stderr(),
        "crash_after_requests: rc %r %r" % (s.proc.returncode, s.stderr()[-200:]))
s.stop()

c.close()
