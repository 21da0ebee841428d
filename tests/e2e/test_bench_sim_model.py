"""servetune bench against the simulator in model mode (--profile): the numbers the client
reports follow the engine model. A repeated prompt is served from the prefix cache (cached
tokens = its full blocks, the hit rate follows), a flush empties the cache, requests queue exactly
when the KV pool is full, and the tokens per chunk follow the speculative acceptance."""
import http.client
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker, Sim, bench, wait_for  # noqa: E402

c = Checker("bench_sim_model")
TMP = tempfile.mkdtemp(prefix="st-bsm-")
PAGE = 16
TINY = """\
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
  mtp_layers: 1
hardware:
  gpu_mem_bytes: 2GB
engine:
  dialect: sglang
  startup_s: 0.5
  context_length: 4096
  page_size: %d
  admit_output_reserve: 1
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
seed: 3
""" % PAGE
PROFILE = os.path.join(TMP, "tiny.yaml")
with open(PROFILE, "w") as f:
    f.write(TINY)


def http_req(sim, method, path):
    host, port = sim.addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    conn.request(method, path)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def model_sim(*args):
    s = Sim("--profile", PROFILE, "--speed", "200", *args, trace=False)
    if not wait_for(lambda: http_req(s, "GET", "/health")[0] == 200, timeout=10):
        raise RuntimeError("sim never became ready")
    return s


def explain(*args):
    import subprocess
    from stlib import SERVETUNE
    r = subprocess.run([SERVETUNE, "sim", "--profile", PROFILE, *args, "--explain", "--json"],
                       capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)


def full_blocks(p):
    # The engine always computes the last prompt token, so a prompt that is an exact number of
    # blocks reuses one block fewer.
    return (p - 1) // PAGE * PAGE


# ---- repeated prompts hit the prefix cache; a flush empties it ----
LOAD = ["--concurrency", 2, "--requests", 6, "--input-len", 300, "--output-len", 8, "--seed", 11]
with model_sim() as s:
    r1 = bench(s.url, *LOAD)
    r2 = bench(s.url, *LOAD)
    st, body = http_req(s, "POST", "/flush_cache")
    c.check(st == 200, "flush_cache answered %d %r" % (st, body))
    r3 = bench(s.url, *LOAD)
for name, r in (("first", r1), ("repeat", r2), ("after flush", r3)):
    c.check(r.summary["requests"]["ok"] == 6, "%s: 6 ok, got %s" % (name, r.summary["requests"]))
c.check(all(x["cached_tokens"] == 0 for x in r1.receipts), "first run: nothing cached: %s"
        % [x["cached_tokens"] for x in r1.receipts])
for x in r2.receipts:
    c.check(x["cached_tokens"] == full_blocks(x["prompt_tokens"]),
            "repeat: request %d cached %s of %s prompt tokens, want %d" % (
                x["id"], x["cached_tokens"], x["prompt_tokens"], full_blocks(x["prompt_tokens"])))
hit = r2.summary["cached_tokens"] / r2.summary["prompt_tokens"]
want = sum(full_blocks(x["prompt_tokens"]) for x in r2.receipts) / r2.summary["prompt_tokens"]
c.check(abs(hit - want) < 1e-9 and hit > 0.9, "repeat: hit rate %.4f, want %.4f" % (hit, want))
c.check(all(x["cached_tokens"] == 0 for x in r3.receipts), "after flush: nothing cached: %s"
        % [x["cached_tokens"] for x in r3.receipts])

# ---- queueing appears exactly when the pool is full ----
# Prompts of P tokens with OUT output tokens, P + OUT a whole number of blocks; the pool is sized
# for exactly N such requests (SGLang-style admission reserves the whole output).
N, OUT = 4, 64
with model_sim() as s:
    probe = bench(s.url, "--requests", 1, "--input-len", 500, "--output-len", 1)
P = probe.receipts[0]["prompt_tokens"]
OUT += (-(P + OUT)) % PAGE
need = N * (P + OUT)
ex = explain()
fixed = ex["weights_bytes_per_gpu"] + ex["act_bytes"] + ex["graph_bytes"] + ex["reserve_bytes"]
frac = (need + PAGE / 2) * ex["kv_bytes_per_token"] / ex["gpu_mem_bytes"] + fixed / ex["gpu_mem_bytes"]
SIZED = ["--set", "engine.mem_fraction=%.9f" % frac, "--set", "hardware.hbm_bytes_per_s=20GB/s"]
pool = explain(*SIZED)["kv_pool_tokens"]
c.check(pool // (P + OUT) == N, "pool %d holds %d requests of %d tokens" % (pool, pool // (P + OUT), P + OUT))
for conc in (N, N + 1):
    with model_sim(*SIZED) as s:
        r = bench(s.url, "--concurrency", conc, "--requests", conc, "--input-len", 500,
                  "--output-len", OUT, "--ignore-eos", "--seed", 21)
    recs = sorted(r.receipts, key=lambda x: x["ttft_ms"])
    first_end = min(x["e2e_ms"] for x in recs)
    # A queued request starts only when a running one frees its KV, at about the first end.
    late = [x for x in recs if x["ttft_ms"] > 0.5 * first_end]
    c.check(r.summary["requests"]["ok"] == conc, "cc%d: all ok" % conc)
    if conc == N:
        c.check(not late, "cc%d (fits): no request waits for another to finish; ttfts %s, first end %.1f"
                % (conc, [round(x["ttft_ms"], 1) for x in recs], first_end))
    else:
        c.check(len(late) == 1, "cc%d (one over): exactly one request queues; ttfts %s, first end %.1f"
                % (conc, [round(x["ttft_ms"], 1) for x in recs], first_end))

# ---- tokens per chunk follow the speculative acceptance ----
MTP = ["--set", "engine.spec_method=mtp", "--set", "engine.spec_steps=2",
       "--set", "engine.spec_accept=[0.8, 0.5]"]
EXPECT = 1 + 0.8 + 0.8 * 0.5
with model_sim(*MTP) as s:
    r = bench(s.url, "--concurrency", 4, "--requests", 8, "--input-len", 64, "--output-len", 300,
              "--ignore-eos")
    st, body = http_req(s, "GET", "/metrics")
tokens = sum(x["completion_tokens"] for x in r.receipts)
chunks = sum(x["content_chunks"] for x in r.receipts)
c.check(tokens == 8 * 300, "mtp: every request got its 300 tokens (%d)" % tokens)
c.check(abs(tokens / chunks - EXPECT) < 0.12, "mtp: %.3f tokens a chunk, expected %.2f"
        % (tokens / chunks, EXPECT))
c.check(r.summary["itl_ms"]["count"] > 0, "mtp: ITL samples recorded")
c.check(r.summary["icl_ms"]["mean"] > r.summary["itl_ms"]["mean"] * 1.5,
        "mtp: a chunk gap (%.3f ms) spans about %.1f token gaps (%.3f ms)"
        % (r.summary["icl_ms"]["mean"], EXPECT, r.summary["itl_ms"]["mean"]))
lines = [l for l in body.decode().splitlines() if l.startswith("sglang:spec_accept_length")]
c.check(lines and abs(float(lines[0].split()[-1]) - EXPECT) < 0.12,
        "mtp: the server's own accept length %s" % lines)

# ---- the window: warm-up overlap counts the tokens received inside it (docs/metrics.md) ----
# Closed loop cc 2, 11 identical requests, the first 3 warm-up: request 2 (warm-up) runs beside
# request 3 (the first measured), and the run ends with one stream (request 10) draining alone.
# Every request takes the same virtual time T, so the server streams 2 x 16 tokens per T while
# two run and 16 per T in the drain: the window [start of 3, end of 10] is 5 T holding 8 measured
# requests plus request 2's 16 tokens: 144 tokens over 5 T, what the server streamed in it.
# Without request 2's tokens (the old definition) it read 128 / 5 T, 11% low. CPU per token
# divides by all 176 tokens of the run.
with model_sim() as s:
    r = bench(s.url, "--concurrency", 2, "--requests", 11, "--warmup", 3, "--input-len", 64,
              "--output-len", 16, "--ignore-eos")
recs = sorted(r.receipts, key=lambda x: x["id"])
spans = [x["v_end_ns"] - x["v_intended_ns"] for x in recs]
c.check(max(spans[:10]) - min(spans[:10]) <= 2 and spans[10] <= spans[0],
        "window: the requests two at a time take one virtual time, the last alone less: %s" % spans)
sm = r.summary
c.check(sm["requests"]["warmup"] == 3 and sm["output_tokens"] == 8 * 16,
        "window: 3 warm-up, 8 measured x 16 tokens: %s %s" % (sm["requests"], sm["output_tokens"]))
c.check(sm["window_output_tokens"] == 8 * 16 + 16,
        "window: request 2's 16 tokens arrived inside it: %s" % sm["window_output_tokens"])
W = (recs[10]["v_end_ns"] - recs[3]["v_intended_ns"]) / 1e9
c.check(recs[3]["v_intended_ns"] == recs[2]["v_intended_ns"] and abs(W - 5 * spans[0] / 1e9) < 1e-5,
        "window: request 2 starts with request 3; 5 request times (%.6f s)" % W)
c.check(abs(sm["duration_s"] - W) < 1e-9, "window: %.9f s, expected %.9f" % (sm["duration_s"], W))
want = 144 / W
c.check(abs(sm["output_tokens_per_s"] - want) < 1e-6 * want,
        "window: %.3f tok/s, expected %.3f (old definition: %.3f)"
        % (sm["output_tokens_per_s"], want, 128 / W))
c.check(abs(sm["client"]["cpu_us_per_token"] - sm["client"]["cpu_s"] * 1e6 / (11 * 16))
        < 1e-6 * sm["client"]["cpu_us_per_token"] + 1e-9,
        "window: CPU per token over all 176 tokens: %s" % sm["client"])
c.close()
