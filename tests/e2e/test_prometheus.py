"""A real Prometheus (Debian's prometheus 2.42) scrapes the model-mode simulator's /metrics in each
dialect (vllm, sglang, llamacpp): every target is up with no scrape error, as many samples as the
exposition has lines, and no sample rejected (duplicates, out of order, out of bounds, over a
limit); then `promtool check metrics` on each dialect's text exits 0, or 3 with naming lint only
(':' in the engines' names, a counter without "_total" as llama.cpp declares one), never a
parse error or other lint. Skips (77) when prometheus or promtool is missing. Python 3 standard
library only; every process on 127.0.0.1 port 0, stopped by its PID; well under a minute."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker, Sim, wait_for  # noqa: E402

PROMETHEUS = os.environ.get("ST_PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("ST_PROMTOOL", "/usr/bin/promtool")
if not (os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)):
    print("skip: %s or %s is not there" % (PROMETHEUS, PROMTOOL))
    sys.exit(77)

c = Checker("prometheus")
TMP = tempfile.mkdtemp(prefix="st-prom-")
DIALECTS = ["vllm", "sglang", "llamacpp"]

# The tiny profile of the model-mode tests, with MTP on so that the speculative series exist.
PROFILE = os.path.join(TMP, "tiny.yaml")
with open(PROFILE, "w") as f:
    f.write("""\
model:
  name: tiny-prom
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
  startup_s: 0.2
  context_length: 4096
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
  spec_method: mtp
  spec_steps: 2
  spec_accept: [0.8, 0.5]
seed: 5
""")

# promtool's lint of names (promlint): allowed; any other message fails the test.
NAMING = [r"metric names should not contain ':'$",
          r'counter metrics should have "_total" suffix$']


def http(url, body=None, timeout=5):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def ready(url):
    try:
        return http(url + "/health")[0] == 200
    except OSError:
        return False


def samples(text):
    return sum(1 for l in text.splitlines() if l.strip() and not l.startswith("#"))


sims = {}
prom = None
try:
    # ---- one simulator per dialect, each with some traffic so counters and histograms move ----
    for d in DIALECTS:
        s = Sim("--profile", PROFILE, "--speed", "100", "--dialect", d, trace=False)
        sims[d] = s
        c.check(wait_for(lambda: ready(s.url), timeout=10), "%s sim ready" % d)
        for i in range(2):
            st, _ = http(s.url + "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hello %d" % i}],
                          "max_tokens": 8})
            c.check(st == 200, "%s completion %d: %d" % (d, i, st))

    # ---- prometheus, its own config and storage, scraping every 200 ms ----
    cfg = os.path.join(TMP, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n"
                "scrape_configs:\n")
        for d in DIALECTS:
            f.write("  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n"
                    % (d, sims[d].addr))
    plog = open(os.path.join(TMP, "prometheus.log"), "w+")
    prom = subprocess.Popen([PROMETHEUS, "--config.file=" + cfg,
                             "--storage.tsdb.path=" + os.path.join(TMP, "data"),
                             "--web.listen-address=127.0.0.1:0"],
                            stdout=plog, stderr=subprocess.STDOUT, cwd=TMP)
    addr = []

    def listening():
        plog.flush()
        plog.seek(0)
        m = re.search(r'msg="Listening on" address=(127\.0\.0\.1:\d+)', plog.read())
        if m:
            addr.append(m.group(1))
        return bool(m) or prom.poll() is not None

    c.check(wait_for(listening, timeout=20) and addr, "prometheus listens")
    base = "http://" + addr[0] if addr else None

    def query(q):
        st, body = http(base + "/api/v1/query?query=" + urllib.parse.quote(q))
        doc = json.loads(body)
        return {r["metric"].get("job"): float(r["value"][1])
                for r in doc["data"]["result"]} if doc.get("status") == "success" else {}

    def targets():
        st, body = http(base + "/api/v1/targets")
        return {t["labels"]["job"]: t for t in json.loads(body)["data"]["activeTargets"]}

    # At least two scrapes of each target: the first one and one more.
    def scraped():
        try:
            t = targets()
            return all(t.get(d, {}).get("health") == "up" for d in DIALECTS) and \
                all(v >= 2 for v in query("count_over_time(up[1m])").values()) and \
                len(query("count_over_time(up[1m])")) == 3
        except (OSError, ValueError, KeyError):
            return False

    c.check(base is not None and wait_for(scraped, timeout=20, step=0.2),
            "every target scraped twice and healthy")
    if base:
        t = targets()
        up = query("up")
        n = query("scrape_samples_scraped")
        added = query("scrape_series_added")
        for d in DIALECTS:
            td = t.get(d, {})
            c.check(td.get("health") == "up" and td.get("lastError") == "",
                    "%s: health %r, lastError %r" % (d, td.get("health"), td.get("lastError")))
            c.check(up.get(d) == 1, "%s: up == 1 (%r)" % (d, up.get(d)))
            _, text = http(sims[d].url + "/metrics")
            want = samples(text.decode())
            c.check(n.get(d) == want, "%s: %r samples scraped, the exposition has %d"
                    % (d, n.get(d), want))
            c.check(d in added, "%s: scrape_series_added reported" % d)
        # Prometheus's own counters of rejected samples: none for any target.
        _, own = http(base + "/metrics")
        own = own.decode()
        for name in ("prometheus_target_scrapes_sample_duplicate_timestamp_total",
                     "prometheus_target_scrapes_sample_out_of_order_total",
                     "prometheus_target_scrapes_sample_out_of_bounds_total",
                     "prometheus_target_scrapes_exceeded_sample_limit_total",
                     "prometheus_target_scrapes_exemplar_out_of_order_total"):
            m = re.search(r"^%s (\S+)$" % name, own, re.M)
            c.check(m is not None and float(m.group(1)) == 0,
                    "%s is 0: %r" % (name, m and m.group(1)))

    # ---- promtool check metrics on each dialect's exposition ----
    for d in DIALECTS:
        _, text = http(sims[d].url + "/metrics")
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           timeout=30)
        lines = [l for l in (r.stdout + r.stderr).decode().splitlines() if l.strip()]
        other = [l for l in lines if not any(re.search(p, l) for p in NAMING)]
        c.check(r.returncode in (0, 3) and (r.returncode == 0) == (not lines) and not other,
                "%s: promtool exit %d, messages other than naming lint: %r"
                % (d, r.returncode, other[:5]))
        if d == "vllm":
            c.check(r.returncode == 3 and any("vllm:" in l and "':'" in l for l in lines),
                    "vllm: the ':' of its names is reported: %r" % lines[:3])
finally:
    if prom is not None and prom.poll() is None:
        prom.send_signal(signal.SIGTERM)
        try:
            prom.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
    for s in sims.values():
        s.stop()
    shutil.rmtree(TMP, ignore_errors=True)
c.close()
