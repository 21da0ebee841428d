"""Helpers for the end-to-end tests: start `servetune sim` on 127.0.0.1 port 0, run
`servetune bench` against it, read receipts, summaries and the simulator's trace.
Python 3 standard library only. Every process started here is bounded in time and killed."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SERVETUNE = os.environ.get("SERVETUNE", "build/servetune")


class Sim:
    def __init__(self, *args, trace=True):
        self.dir = tempfile.mkdtemp(prefix="st-e2e-")
        self.trace = os.path.join(self.dir, "trace.jsonl") if trace else None
        cmd = [SERVETUNE, "sim", "--listen", "127.0.0.1:0"] + list(args)
        if self.trace:
            cmd += ["--trace", self.trace]
        self.log = open(os.path.join(self.dir, "sim.log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError("sim did not start: %r" % line)
        self.addr = line.split()[-1]
        self.url = "http://" + self.addr

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def trace_lines(self):
        self.stop()
        with open(self.trace) as f:
            return [json.loads(l) for l in f if l.strip()]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Result:
    def __init__(self, proc, summary, receipts, out, err):
        self.rc = proc.returncode
        self.summary = summary
        self.receipts = receipts
        self.out = out
        self.err = err


def bench(url, *args, timeout=120, expect_rc=0, env=None):
    d = tempfile.mkdtemp(prefix="st-bench-")
    js = os.path.join(d, "out.json")
    rc_path = os.path.join(d, "out.jsonl")
    cmd = [SERVETUNE, "bench", "--url", url, "--json", js, "--receipts", rc_path,
           "--no-progress"] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    summary = json.load(open(js)) if os.path.exists(js) else None
    receipts = None
    if os.path.exists(rc_path):
        with open(rc_path) as f:
            receipts = [json.loads(l) for l in f]
    r = Result(p, summary, receipts, p.stdout, p.stderr)
    if expect_rc is not None and r.rc != expect_rc:
        raise AssertionError("bench exit %d (expected %d)\ncmd: %s\nstdout:\n%s\nstderr:\n%s"
                             % (r.rc, expect_rc, " ".join(cmd), r.out, r.err))
    return r


def by_rid(trace):
    """Trace events grouped by request id, in order."""
    out = {}
    for e in trace:
        out.setdefault(e["rid"], []).append(e)
    return out


class Checker:
    """Collects failures so that one run reports every broken expectation."""

    def __init__(self, name):
        self.name = name
        self.failures = []
        self.checks = 0

    def check(self, cond, msg):
        self.checks += 1
        if not cond:
            self.failures.append(msg)
            print("FAIL:", msg, flush=True)

    def close(self):
        print("%s: %d checks, %d failed" % (self.name, self.checks, len(self.failures)))
        if self.checks == 0:
            print("no checks ran")
            sys.exit(1)
        sys.exit(1 if self.failures else 0)


def wait_for(pred, timeout=10.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


# A small SGLang-dialect engine profile that starts in 0.5 s of virtual time: the process faults
# of the fault matrix (bench and sweep columns) stage on it.
TINY_PROFILE = """\
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
engine:
  dialect: sglang
  startup_s: 0.5
  context_length: 4096
  page_size: 16
  admit_output_reserve: 1
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
seed: 3
"""


def write_tiny_profile(dir_):
    path = os.path.join(dir_, "tiny.yaml")
    with open(path, "w") as f:
        f.write(TINY_PROFILE)
    return path


def dead_port():
    """A loopback port nothing listens on (bound, then closed)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(addr, path):
    import http.client
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def profile_sim(profile, *args, ready=True, speed="200"):
    """The model-mode sim on profile; with ready, waits (10 s at most) until /health answers."""
    s = Sim("--profile", profile, "--speed", speed, *args, trace=False)
    if ready and not wait_for(lambda: http_get(s.addr, "/health")[0] == 200, timeout=10):
        s.kill()
        raise RuntimeError("sim never became ready")
    return s
