"""Each fault the simulator can stage gives its own error class in the receipt, the run goes on
and every request has exactly one receipt; bad input gives exit 2 and no receipts file."""
import http.server
import os
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, bench  # noqa: E402

c = Checker("bench_faults")
N = 4

# (sim fault spec, extra bench args, expected error class, text expected in the message)
CASES = [
    ("status=503", [], "status", "503"),
    ("status=429,retry_after=2", [], "status", "429"),
    ("stall_after=2", ["--timeout-idle", 300], "stall", "no event"),
    ("close_after=2", [], "closed", ""),
    ("reset_after=2", [], "closed", ""),
    ("malformed_at=2", [], "parse", "event"),
    ("oversize_at=2", [], "oversize", ""),
    ("bad_utf8_at=2", [], "utf8", ""),
    ("error_at=2", [], "stream_error", "sim error"),
    ("nonsse=1", [], "not_sse", "Content-Type"),
    ("headers_delay_ms=2000", ["--timeout-headers", 200], "headers_timeout", ""),
    ("ttft_ms=2000", ["--timeout-first-token", 200], "first_token_timeout", ""),
    ("ttft_ms=2000", ["--timeout-total", 300], "total_timeout", ""),
]

for fault, extra, cls, text in CASES:
    with Sim("--ttft-ms", "5", "--itl-ms", "2", "--fault", fault, trace=False) as sim:
        r = bench(sim.url, "--concurrency", 2, "--requests", N, "--output-len", 6, *extra)
    got = [x["error"] for x in r.receipts]
    c.check(len(r.receipts) == N and sorted(x["id"] for x in r.receipts) == list(range(N)),
            "%s: one receipt per request, got ids %s" % (fault, [x["id"] for x in r.receipts]))
    c.check(all(g == cls for g in got), "%s: error classes %s, want %s" % (fault, got, cls))
    if text:
        c.check(all(text in x.get("error_message", "") for x in r.receipts),
                "%s: messages %s mention %r" % (fault, [x.get("error_message") for x in r.receipts], text))
    s = r.summary
    c.check(s["requests"]["failed"] == N and s["requests"]["errors"].get(cls) == N,
            "%s: summary errors %s" % (fault, s["requests"]["errors"]))

# Faults that a robust client must take in its stride.
for fault in ("done=off", "role_chunk=off", "ping_ms=5,ttft_ms=30", "usage=never"):
    with Sim("--ttft-ms", "5", "--itl-ms", "2", "--fault", fault, trace=False) as sim:
        r = bench(sim.url, "--concurrency", 2, "--requests", N, "--output-len", 6)
    c.check(r.summary["requests"]["ok"] == N, "%s: all ok, got %s" % (fault, r.summary["requests"]))

# The server dies mid-run: later requests fail with 'connect', earlier ones are kept.
sim = Sim("--ttft-ms", "20", "--itl-ms", "5", trace=False)
p = subprocess.Popen([SERVETUNE, "bench", "--url", sim.url, "--rate", "40", "--arrival", "constant",
                      "--requests", "40", "--output-len", "4", "--no-progress", "--receipts",
                      os.path.join(sim.dir, "r.jsonl"), "--json", os.path.join(sim.dir, "s.json"),
                      "--timeout-connect", "500"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
import time  # noqa: E402
time.sleep(0.4)
sim.kill()
out, err = p.communicate(timeout=60)
import json  # noqa: E402
recs = [json.loads(l) for l in open(os.path.join(sim.dir, "r.jsonl"))]
classes = {x["error"] for x in recs}
c.check(p.returncode == 0, "server exit: bench exits 0 (failures are data), got %d: %s" % (p.returncode, err))
c.check(len(recs) == 40, "server exit: 40 receipts, got %d" % len(recs))
c.check(any(x["ok"] for x in recs), "server exit: requests before the exit are ok")
c.check("connect" in classes, "server exit: later requests fail with connect, classes %s" % classes)

# Bad input: exit 2, a message naming the input, and no receipts file.
BAD = [0]


def bad(args, want):
    BAD[0] += 1
    d = os.path.join(sim.dir, "bad-%d" % BAD[0])
    os.makedirs(d, exist_ok=True)
    rpath = os.path.join(d, "r.jsonl")
    p = subprocess.run([SERVETUNE, "bench", "--receipts", rpath, "--no-progress"] + args,
                       capture_output=True, text=True, timeout=60)
    c.check(p.returncode == 2, "%s: exit 2, got %d" % (args, p.returncode))
    c.check(want in p.stderr, "%s: stderr %r mentions %r" % (args, p.stderr, want))
    c.check(not os.path.exists(rpath), "%s: no receipts file" % (args,))

# A port with nothing listening.
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead_port = s.getsockname()[1]
s.close()
bad(["--url", "http://127.0.0.1:%d" % dead_port], "cannot reach")
bad(["--url", "not a url"], "not a valid URL")
bad(["--url", "ftp://127.0.0.1:1"], "http or https")
bad(["--url", "http://127.0.0.1:1", "--concurrency", "zero"], "--concurrency")
bad(["--url", "http://127.0.0.1:1", "--extra-body", "[1]"], "--extra-body")
# A length range without --workload would silently use its low end: refused, naming the range.
bad(["--url", "http://127.0.0.1:1", "--output-len", "10:200"], "--output-len 10:200 is a range")
bad(["--url", "http://127.0.0.1:1", "--input-len", "64:512"], "--input-len 64:512 is a range")


# A server that is not OpenAI-compatible (a plain file server: /v1/models is 404).
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
bad(["--url", "http://127.0.0.1:%d" % httpd.server_address[1]], "404")
httpd.shutdown()

c.close()
