"""The fault matrix, bench column (docs/reliability.md, "Fault matrix"): one test per fault, each
`servetune bench` against `servetune sim` staging that fault (fixed-timing mode, or model mode
with a tiny profile for the process faults). Each asserts the receipts' error classes, the exit
code, the summary's counts, exactly one receipt per issued request (ids 0..n-1 once each, every
line whole valid JSON) and what the run did next. Loopback, port 0, bounded; every process
started here is killed."""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import write_tiny_profile, dead_port, http_get, profile_sim, SERVETUNE, Checker, Sim, wait_for  # noqa: E402

c = Checker("fault_matrix_bench")
TMP = tempfile.mkdtemp(prefix="st-fmb-")
N = 4
FAST = ("--ttft-ms", "5", "--itl-ms", "2")

PROFILE = write_tiny_profile(TMP)


class Run:
    def __init__(self, rc, out, err, summary, lines, rpath):
        self.rc = rc
        self.out = out
        self.err = err
        self.summary = summary
        self.lines = lines  # raw receipt lines, None when there is no receipts file
        self.rpath = rpath
        self.receipts = []
        self.bad_lines = []
        for ln in lines or []:
            try:
                if not ln.endswith("\n"):
                    raise ValueError("no newline")
                self.receipts.append(json.loads(ln))
            except ValueError:
                self.bad_lines.append(ln)


def run_bench(url, *args, timeout=60, preexec=None):
    d = tempfile.mkdtemp(dir=TMP)
    js = os.path.join(d, "out.json")
    rpath = os.path.join(d, "out.jsonl")
    cmd = [SERVETUNE, "bench", "--url", url, "--json", js, "--receipts", rpath,
           "--no-progress", "--quiet"] + [str(a) for a in args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=preexec)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    summary = None
    if os.path.exists(js):
        try:
            summary = json.load(open(js))
        except ValueError:
            summary = None
    lines = None
    if os.path.exists(rpath):
        with open(rpath) as f:
            lines = f.readlines()
    return Run(p.returncode, out, err, summary, lines, rpath)


def intact(name, r, n):
    """Exactly one receipt per issued request: ids 0..n-1 once each, every line whole JSON."""
    c.check(r.lines is not None, "%s: a receipts file" % name)
    c.check(not r.bad_lines, "%s: every line whole valid JSON, bad: %r" % (name, r.bad_lines[:2]))
    ids = sorted(x["id"] for x in r.receipts)
    c.check(ids == list(range(n)), "%s: ids 0..%d once each, got %s" % (name, n - 1, ids))


def counts(name, r, ok, errors):
    s = r.summary
    c.check(s is not None, "%s: a summary" % name)
    if s is None:
        return
    q = s["requests"]
    want_failed = sum(errors.values())
    c.check(q["ok"] == ok and q["failed"] == want_failed and q["errors"] == errors,
            "%s: summary ok %d failed %d errors %s, got %s" % (name, ok, want_failed, errors, q))


def fixed_fault(name, fault, cls, extra=(), text="", n=N):
    """A per-request fault: every request fails with cls, the run goes on to the end (exit 0)."""
    with Sim(*FAST, "--fault", fault, trace=False) as sim:
        r = run_bench(sim.url, "--concurrency", 2, "--requests", n, "--output-len", 6, *extra)
    c.check(r.rc == 0, "%s: exit 0 (failures are data), got %d: %s" % (name, r.rc, r.err))
    intact(name, r, n)
    got = [x["error"] for x in r.receipts]
    c.check(got == [cls] * n, "%s: classes %s, want %s" % (name, got, cls))
    if text:
        msgs = [x.get("error_message", "") for x in r.receipts]
        c.check(all(text in m for m in msgs), "%s: messages %s mention %r" % (name, msgs, text))
    counts(name, r, 0, {cls: n})
    return r



def model_sim(*args, ready=True, speed="200"):
    return profile_sim(PROFILE, *args, ready=ready, speed=speed)


# ---- one test per row ----

def test_connection_refused():
    # Nothing listens: the preflight cannot reach the server; nothing is sent, no receipts file.
    r = run_bench("http://127.0.0.1:%d" % dead_port(), "--requests", N)
    c.check(r.rc == 2, "refused: exit 2, got %d" % r.rc)
    c.check("cannot reach" in r.err, "refused: stderr %r says 'cannot reach'" % r.err)
    c.check(r.lines is None, "refused: no receipts file")


def test_reset_mid_stream():
    fixed_fault("reset", "reset_after=2", "closed", text="connection closed early")


def test_close_without_done():
    fixed_fault("early close", "close_after=2", "closed")


def test_stall_before_first_token():
    fixed_fault("stall before first token", "stall_after=0", "first_token_timeout",
                extra=("--timeout-first-token", 300))


def test_stall_between_chunks():
    fixed_fault("stall between chunks", "stall_after=2", "stall", extra=("--timeout-idle", 300),
                text="no event")


def test_429_with_retry_after():
    r = fixed_fault("429 Retry-After", "status=429,retry_after=2", "status", text="429")
    ra = [x.get("retry_after_s") for x in r.receipts]
    c.check(ra == [2] * N, "429 Retry-After: retry_after_s %s, want 2 each" % ra)
    c.check(all(x["status"] == 429 for x in r.receipts), "429 Retry-After: status 429")


def test_429_without_retry_after():
    r = fixed_fault("429 no Retry-After", "status=429,retry_after=-1", "status", text="429")
    c.check(all("retry_after_s" not in x for x in r.receipts),
            "429 no Retry-After: no retry_after_s field")


def test_500():
    r = fixed_fault("500", "status=500", "status", text="500")
    c.check(all(x["status"] == 500 for x in r.receipts), "500: status 500")


def test_503():
    r = fixed_fault("503", "status=503", "status", text="503")
    c.check(all(x["status"] == 503 for x in r.receipts), "503: status 503")


def test_non_sse_body():
    fixed_fault("non-SSE", "nonsse=1", "not_sse", text="Content-Type")


def test_malformed_json():
    fixed_fault("malformed JSON", "malformed_at=2", "parse", text="event")


def test_oversize_event():
    fixed_fault("oversize", "oversize_at=2", "oversize", text="exceeded")


def test_invalid_utf8():
    fixed_fault("invalid UTF-8", "bad_utf8_at=2", "utf8", text="UTF-8")


def test_error_mid_stream():
    fixed_fault("error mid-stream", "error_at=2", "stream_error", text="sim error")


def test_slow_start():
    # Health stays 503 for 0.5 + 400 virtual s (2 s real at speed 200). bench does not wait.
    sim = model_sim("--fault", "slow_start_s=400", ready=False)
    try:
        st, _ = http_get(sim.addr, "/health")
        c.check(st == 503, "slow start: /health 503 while loading, got %d" % st)
        r = run_bench(sim.url, "--concurrency", 2, "--requests", N, "--output-len", 4)
        loading = http_get(sim.addr, "/health")[0] == 503
    finally:
        sim.stop()
    c.check(loading, "slow start: the run ended while the server was still loading")
    print("slow start: exit %d, %s" % (r.rc, [x.get("error_message") for x in r.receipts][:1]))
    c.check(r.rc == SLOW_START_RC, "slow start: exit %d, got %d: %s" % (SLOW_START_RC, r.rc, r.err))
    if SLOW_START_RC == 0:
        intact("slow start", r, N)
        got = {x["error"] for x in r.receipts}
        c.check(got == {"status"}, "slow start: classes %s, want status (503 Loading)" % got)
        c.check(all(x["status"] == 503 for x in r.receipts), "slow start: every status 503")
        counts("slow start", r, 0, {"status": N})
    else:
        c.check(r.lines is None, "slow start: no receipts file")


def test_startup_oom():
    p = subprocess.run([SERVETUNE, "sim", "--profile", PROFILE, "--listen", "127.0.0.1:0",
                        "--fault", "startup_oom=1"], capture_output=True, text=True, timeout=20)
    c.check(p.returncode == 1, "startup OOM: sim exit 1, got %d" % p.returncode)
    c.check("listening on" not in p.stdout, "startup OOM: nothing listened")
    c.check("memory" in p.stderr.lower(), "startup OOM: sim stderr %r says memory" % p.stderr)
    r = run_bench("http://127.0.0.1:%d" % dead_port(), "--requests", N)
    c.check(r.rc == 2, "startup OOM: bench exit 2, got %d" % r.rc)
    c.check("cannot reach" in r.err, "startup OOM: bench stderr %r says 'cannot reach'" % r.err)
    c.check(r.lines is None, "startup OOM: no receipts file")


def test_server_exit():
    # The engine dies after answering 3 completions in full; concurrency 1 orders the requests.
    # At speed 0.01 a request lasts about 0.1 s, longer than the 20 ms from the crash line to
    # the exit, so request 3 is in flight when the server goes.
    n = 8
    sim = model_sim("--fault", "crash_after_requests=3", "--set", "engine.startup_s=0",
                    speed="0.01")
    try:
        r = run_bench(sim.url, "--concurrency", 1, "--requests", n, "--output-len", 16,
                      "--timeout-connect", 500)
        code = sim.proc.wait(timeout=10)
    finally:
        sim.stop()
    c.check(code == 1, "server exit: sim exit 1, got %s" % code)
    c.check(r.rc == 0, "server exit: exit 0 (failures are data), got %d: %s" % (r.rc, r.err))
    intact("server exit", r, n)
    by_id = sorted(r.receipts, key=lambda x: x["id"])
    got = [x["error"] for x in by_id]
    c.check(got[:3] == [None] * 3, "server exit: the first 3 ok, got %s" % got)
    c.check(all(g in ("closed", "connect") for g in got[3:]),
            "server exit: later ones closed (cut) or connect, got %s" % got)
    # The crash cuts the stream in flight; a request sent in the 20 ms before the process is
    # gone is accepted and then cut too; from then on nothing listens.
    tail = got[3:]
    nclosed = tail.count("closed")
    want = ["closed"] * nclosed + ["connect"] * (len(tail) - nclosed)
    c.check(1 <= nclosed < len(tail) and tail == want,
            "server exit: 'closed' then only 'connect', got %s" % got)
    print("server exit: classes in id order %s" % got)
    errs = {}
    for g in got[3:]:
        errs[g] = errs.get(g, 0) + 1
    counts("server exit", r, 3, errs)


def prom_value(text, name):
    total = 0.0
    found = False
    for ln in text.splitlines():
        if ln.startswith(name) and not ln.startswith("#"):
            rest = ln[len(name):]
            if rest[:1] in (" ", "{"):
                total += float(ln.rsplit(" ", 1)[1])
                found = True
    return total if found else None


def test_memory_pressure():
    # Blocks are taken out of the pool; admission reserves no output blocks (vLLM's way), so
    # running requests that grow are preempted (retracted) and readmitted, and still complete.
    n = 8
    sim = model_sim("--fault", MEM_FAULT, "--set", "engine.admit_output_reserve=0")
    try:
        r = run_bench(sim.url, "--concurrency", n, "--requests", n, "--input-len", 400,
                      "--output-len", 200)
        _, body = http_get(sim.addr, "/metrics")
    finally:
        sim.stop()
    c.check(r.rc == 0, "memory pressure: exit 0, got %d: %s" % (r.rc, r.err))
    intact("memory pressure", r, n)
    c.check(all(x["ok"] for x in r.receipts),
            "memory pressure: every request completes, got %s" % [x["error"] for x in r.receipts])
    c.check(all(x["completion_tokens"] == 200 for x in r.receipts),
            "memory pressure: 200 tokens each")
    counts("memory pressure", r, n, {})
    pre = prom_value(body.decode(), "sglang:num_retracted_reqs")
    print("memory pressure: %s preemptions" % pre)
    c.check(pre is not None and pre > 0, "memory pressure: preemptions in /metrics, got %s" % pre)


def test_backpressure():
    # ttft 0, itl 0: the server writes as fast as the kernel takes it; 8 x 20000 tokens.
    n, toks = 8, 20000
    with Sim("--ttft-ms", "0", "--itl-ms", "0", trace=False) as sim:
        r = run_bench(sim.url, "--concurrency", 8, "--requests", n, "--output-len", toks)
    c.check(r.rc == 0, "backpressure: exit 0, got %d: %s" % (r.rc, r.err))
    intact("backpressure", r, n)
    c.check(all(x["ok"] for x in r.receipts),
            "backpressure: no error, got %s" % [x.get("error_message") for x in r.receipts])
    c.check(all(x["completion_tokens"] == toks and x["content_chunks"] == toks
                and x["content_bytes"] == 4 * toks for x in r.receipts),
            "backpressure: every token arrives")
    counts("backpressure", r, n, {})


def test_disk_full():
    # RLIMIT_FSIZE (SIGXFSZ ignored) makes write() fail with EFBIG: the stand-in for ENOSPC.
    limit = 4096

    def lim():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    n = 200
    sim = Sim(*FAST)
    try:
        r = run_bench(sim.url, "--concurrency", 2, "--requests", n, "--output-len", 4,
                      preexec=lim)
        trace = sim.trace_lines()
    finally:
        sim.stop()
    c.check(r.rc == 3, "disk full: exit 3, got %d: %s" % (r.rc, r.err))
    c.check(r.rpath in r.err and "receipts" in r.err and "File too large" in r.err,
            "disk full: stderr %r names the receipts file and the error" % r.err)
    c.check(r.lines is not None and 0 < len(r.lines) < n,
            "disk full: some receipts, fewer than %d" % n)
    c.check(not r.bad_lines, "disk full: no torn line, bad: %r" % r.bad_lines[:1])
    c.check(os.path.getsize(r.rpath) <= limit, "disk full: the file is within the limit")
    ids = [x["id"] for x in r.receipts]
    c.check(len(set(ids)) == len(ids), "disk full: no receipt twice")
    sent = [e for e in trace if e.get("kind") == "arrive" and str(e["rid"]).startswith("st-")]
    print("disk full: %d receipts kept, %d requests reached the server; stderr: %s"
          % (len(ids), len(sent), r.err.strip()))
    # The run stopped issuing: at most the records written, the one that failed, and what was
    # in flight (2 slots) reached the server.
    c.check(len(sent) <= len(ids) + 3,
            "disk full: stopped issuing, %d sent for %d receipts" % (len(sent), len(ids)))
    # The summary (small enough to fit) says how many records are in the file and why it ended.
    s = r.summary
    c.check(s is not None and s["receipts"]["records"] == len(ids)
            and "too large" in (s["receipts"]["error"] or "")
            and s["requests"]["issued"] == len(sent),
            "disk full: summary receipts %s, issued %s (sent %d)"
            % (s and s["receipts"], s and s["requests"]["issued"], len(sent)))


SLOW_START_RC = 0  # bench does not wait for /health: the run goes ahead and gets 503s
# The pool is 20521 blocks of 16 tokens; this leaves 60 (960 tokens) from the start, forever:
# one request (400 + 200 tokens, 38 blocks) always fits, two do not.
MEM_FAULT = "memory_pressure_blocks=20461"

TESTS = [
    test_connection_refused, test_reset_mid_stream, test_close_without_done,
    test_stall_before_first_token, test_stall_between_chunks, test_429_with_retry_after,
    test_429_without_retry_after, test_500, test_503, test_non_sse_body, test_malformed_json,
    test_oversize_event, test_invalid_utf8, test_error_mid_stream, test_slow_start,
    test_startup_oom, test_server_exit, test_memory_pressure, test_backpressure, test_disk_full,
]

if __name__ == "__main__":
    only = sys.argv[1:]
    t0 = time.monotonic()
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        t1 = time.monotonic()
        try:
            t()
        except Exception as e:  # one broken row must not hide the others
            c.check(False, "%s raised %r" % (t.__name__, e))
        print("%s: %.2f s" % (t.__name__, time.monotonic() - t1), flush=True)
    print("total %.2f s" % (time.monotonic() - t0))
    shutil.rmtree(TMP, ignore_errors=True)
    c.close()
