"""The fault matrix, sweep column (docs/reliability.md, "Fault matrix"): one test per fault, each
`servetune sweep` against `servetune sim` staging that fault, by default in model mode (a tiny
SGLang profile at --speed 200, so the cache protocol has a real flush and a canary it can verify)
with `--fault SPEC` on every completion: two points (cc 1 and 2, 2 requests per cc, 1 repeat), a
shared-prefix workload of 256 tokens (half shared) and 6 output tokens. Each asserts the exit
code, the measured receipts' error classes, what the cache protocol made of the fault (its own
canary and warm-up requests get the fault too: cache_state, cache_reason, verify, warm), whether
the sweep went on to the next point, sweep.json's counts and validity, and that every point's
receipt files are intact (measured: ids 0..n-1 once each; every line of every file whole JSON).
Loopback, port 0, bounded; every process started here is killed."""
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

c = Checker("fault_matrix_sweep")
TMP = tempfile.mkdtemp(prefix="st-fms-")
CCS = (1, 2)
PER_CC = 2
# 256 prompt tokens, half of them a shared prefix, 6 output tokens; the page size gives the hit
# rate its allowance of one page (the sim's SGLang caches whole 16-token pages).
WL = ("--workload", "shared-prefix", "--input-len", 256, "--prefix-frac", 0.5, "--output-len", 6,
      "--page-size", 16)

PROFILE = write_tiny_profile(TMP)


def read_lines(path):
    """(records, bad lines) of a JSONL file: a line is bad unless it is whole JSON ending in \\n."""
    recs, bad = [], []
    with open(path) as f:
        for ln in f.readlines():
            try:
                if not ln.endswith("\n"):
                    raise ValueError("no newline")
                recs.append(json.loads(ln))
            except ValueError:
                bad.append(ln)
    return recs, bad


class Run:
    """One sweep: exit code, output, sweep.json and every receipt file under DIR/points."""

    def __init__(self, rc, out, err, out_dir, wall):
        self.rc = rc
        self.out = out
        self.err = err
        self.dir = out_dir
        self.wall = wall
        self.js = None
        js = os.path.join(out_dir, "sweep.json")
        if os.path.exists(js):
            with open(js) as f:
                self.js = json.load(f)
        self.files = {}  # "cc1-r1.jsonl" -> (records, bad lines)
        pdir = os.path.join(out_dir, "points")
        if os.path.isdir(pdir):
            for name in sorted(os.listdir(pdir)):
                self.files[name] = read_lines(os.path.join(pdir, name))

    def point(self, cc):
        for p in (self.js or {}).get("points", []):
            if p["concurrency"] == cc:
                return p
        return None

    def measured(self, cc):
        return self.files.get("cc%d-r1.jsonl" % cc, (None, None))[0]

    def cache(self, cc):
        return self.files.get("cc%d-r1.cache.jsonl" % cc, (None, None))[0]


def run_sweep(url, *args, ccs=CCS, per_cc=PER_CC, wl=WL, seed=7, timeout=60, preexec=None):
    d = tempfile.mkdtemp(dir=TMP)
    cmd = [SERVETUNE, "sweep", "--url", url, "--out", d, "--no-progress", "--quiet",
           "--concurrency", ",".join(str(x) for x in ccs), "--requests-per-cc", per_cc,
           "--repeats", 1, "--seed", seed] + list(wl) + list(args)
    cmd = [str(a) for a in cmd]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=preexec)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return Run(p.returncode, out, err, d, time.monotonic() - t0)


def intact(name, r, ccs=CCS, per_cc=PER_CC):
    """Every file whole JSON; each measured file has ids 0..n-1 once each."""
    for fname, (_, bad) in r.files.items():
        c.check(not bad, "%s: %s: every line whole JSON, bad: %r" % (name, fname, bad[:1]))
    for cc in ccs:
        recs = r.measured(cc)
        c.check(recs is not None, "%s: cc%d: a receipts file" % (name, cc))
        ids = sorted(x["id"] for x in recs or [])
        want = list(range(per_cc * cc))
        c.check(ids == want, "%s: cc%d: ids %s once each, got %s" % (name, cc, want, ids))
        c.check(all(x["workload"]["point"] == "cc%d-r1" % cc for x in recs or []),
                "%s: cc%d: every receipt names its point" % (name, cc))
        c.check(r.cache(cc) is not None, "%s: cc%d: a cache receipts file" % (name, cc))


def classes(recs):
    return [x["error"] for x in sorted(recs or [], key=lambda x: x["id"])]


def canaries(recs):
    return [x for x in recs or [] if (x.get("workload") or {}).get("cache") == "canary"]


def warmups(recs):
    return [x for x in recs or [] if (x.get("workload") or {}).get("cache") != "canary"]


def failed_points(name, r, cls, ccs=CCS, per_cc=PER_CC):
    """Every measured request of every point failed with cls; each point is in sweep.json,
    invalid, with its counts; the sweep went on to the last point and exited 0."""
    c.check(r.rc == 0, "%s: exit 0 (failures are data), got %d: %s" % (name, r.rc, r.err))
    c.check(r.js is not None and len(r.js["points"]) == len(ccs),
            "%s: sweep.json with every point (the sweep went on)" % name)
    intact(name, r, ccs, per_cc)
    for cc in ccs:
        n = per_cc * cc
        got = classes(r.measured(cc))
        c.check(got == [cls] * n, "%s: cc%d: classes %s, want %s" % (name, cc, got, cls))
        p = r.point(cc)
        if p is None:
            c.check(False, "%s: cc%d in sweep.json" % (name, cc))
            continue
        rp = p["repeats"][0]
        c.check(p["errors"] == n and rp["ok"] == 0 and rp["failed"] == n
                and rp["errors"] == {cls: n} and rp["issued"] == n
                and rp["receipts_records"] == n and rp["receipts_error"] is None,
                "%s: cc%d: counts errors %d, ok 0, failed %d {%s: %d}, got %s"
                % (name, cc, n, n, cls, n, {k: rp.get(k) for k in
                                           ("ok", "failed", "errors", "issued",
                                            "receipts_records", "receipts_error")}))
        why = "%d of %d requests failed" % (n, n)
        c.check(not p["valid"] and not rp["valid"] and why in rp["invalid_reason"]
                and "no request succeeded" in rp["invalid_reason"],
                "%s: cc%d: invalid, '%s', got %s %r" % (name, cc, why, p["valid"],
                                                        rp["invalid_reason"]))


def protocol_ok(name, r, ccs=CCS):
    """The fault did not touch the cache protocol (the canary and warm-up have one output token):
    flushed, verified with the canary, warmed."""
    for cc in ccs:
        p = r.point(cc)
        if p is None:
            continue
        rp = p["repeats"][0]
        c.check(p["cache_state"] == "flushed+warmed" and rp["verify"] == "ok"
                and rp["flush"]["outcome"] == "flushed"
                and rp["canary_cached_tokens"]["after_flush"] == 0
                and rp["warm"] == {"requests": 1, "failed": 0, "slots": None},
                "%s: cc%d: flushed, verified, warmed: %s %s %s %s %s"
                % (name, cc, p["cache_state"], rp["verify"], rp["flush"],
                   rp["canary_cached_tokens"], rp["warm"]))
        cache = r.cache(cc) or []
        c.check(cache and all(x["ok"] for x in cache),
                "%s: cc%d: canary and warm-up requests ok: %s" % (name, cc, classes(cache)))
        # Each small load numbers its requests from 0: the canaries (cc1: sent twice before the
        # flush, as nothing was cached yet, then once to verify; later points: once before,
        # once after) and the one warm-up are told apart by order and their workload tag.
        can, warm = canaries(cache), warmups(cache)
        c.check(len(can) == (3 if cc == ccs[0] else 2) and len(warm) == 1
                and [x["id"] for x in can + warm] == [0] * len(cache),
                "%s: cc%d: canaries %d, warm-ups %d" % (name, cc, len(can), len(warm)))


def protocol_hit(name, r, cls, ccs=CCS):
    """The canary and the warm-up got the fault too: the flush itself worked, but it could not be
    verified; the warm-up request failed (recorded in warm.failed)."""
    for cc in ccs:
        p = r.point(cc)
        if p is None:
            continue
        rp = p["repeats"][0]
        want = "flushed, not verified: the canary request failed (%s; see its receipt)" % cls
        c.check(rp["flush"]["outcome"] == "flushed" and rp["verify"] == "unverifiable"
                and rp["cache_reason"].startswith(want)
                and "warm-up: 1 of 1 requests failed" in rp["cache_reason"]
                and rp["canary_cached_tokens"] == {"before_flush": None, "after_flush": None},
                "%s: cc%d: flushed, unverifiable, %r; got %s %s %r %s"
                % (name, cc, want, rp["flush"]["outcome"], rp["verify"], rp["cache_reason"],
                   rp["canary_cached_tokens"]))
        # The warm-up was sent and failed: the state says flushed, not warmed, and why.
        c.check(rp["warm"] == {"requests": 1, "failed": 1, "slots": None}
                and p["cache_state"] == "flushed",
                "%s: cc%d: warm %s, state %s" % (name, cc, rp["warm"], p["cache_state"]))
        cache = r.cache(cc) or []
        can, warm = canaries(cache), warmups(cache)
        c.check(len(can) == 1 and len(warm) == 1
                and [x["error"] for x in can + warm] == [cls, cls],
                "%s: cc%d: one canary (not retried) and one warm-up, both %s: %s"
                % (name, cc, cls, classes(cache)))


def fixed_fault(name, fault, cls, extra=(), text="", hits_protocol=False):
    with msim("--fault", fault) as sim:
        r = run_sweep(sim.url, *extra)
    failed_points(name, r, cls)
    if hits_protocol:
        protocol_hit(name, r, cls)
    else:
        protocol_ok(name, r)
    if text:
        msgs = [x.get("error_message") or "" for cc in CCS for x in r.measured(cc) or []]
        c.check(msgs and all(text in m for m in msgs),
                "%s: messages %s mention %r" % (name, msgs[:2], text))
    return r



def msim(*args, ready=True, speed="200"):
    return profile_sim(PROFILE, *args, ready=ready, speed=speed)


def nothing_written(name, r):
    c.check(r.js is None and not r.files, "%s: no sweep.json, no receipts: %s %s"
            % (name, r.js is not None, sorted(r.files)))


# ---- one test per row ----

def test_connection_refused():
    # Nothing listens: the preflight fails before any request, point or file.
    r = run_sweep("http://127.0.0.1:%d" % dead_port())
    c.check(r.rc == 2, "refused: exit 2, got %d" % r.rc)
    c.check("cannot reach" in r.err, "refused: stderr %r says 'cannot reach'" % r.err)
    nothing_written("refused", r)


def test_reset_mid_stream():
    fixed_fault("reset", "reset_after=2", "closed", text="connection closed early")


def test_close_without_done():
    fixed_fault("early close", "close_after=2", "closed")


def test_stall_before_first_token():
    # The canary and the warm-up stall too (one output token does not help before token 0).
    fixed_fault("stall before first token", "stall_after=0", "first_token_timeout",
                extra=("--timeout-first-token", 150), hits_protocol=True)


def test_stall_between_chunks():
    fixed_fault("stall between chunks", "stall_after=2", "stall", extra=("--timeout-idle", 150),
                text="no event")


def test_429_with_retry_after():
    r = fixed_fault("429 Retry-After", "status=429,retry_after=2", "status", text="429",
                    hits_protocol=True)
    recs = [x for cc in CCS for x in r.measured(cc) or []]
    c.check(recs and all(x.get("retry_after_s") == 2 and x["status"] == 429 for x in recs),
            "429 Retry-After: status 429, retry_after_s 2 on every receipt")
    # No wait and no retry: 10 requests (6 measured, 2 canaries, 2 warm-ups) answered 429 with
    # Retry-After 2 s, and the whole sweep took well under 2 s.
    wall = (r.js or {}).get("wall_s", -1)
    c.check(0 <= wall < 2.0, "429 Retry-After: the sweep did not wait (wall %.2f s)" % wall)


def test_429_without_retry_after():
    r = fixed_fault("429 no Retry-After", "status=429,retry_after=-1", "status", text="429",
                    hits_protocol=True)
    recs = [x for cc in CCS for x in r.measured(cc) or []]
    c.check(recs and all("retry_after_s" not in x for x in recs),
            "429 no Retry-After: no retry_after_s field")


def test_500():
    r = fixed_fault("500", "status=500", "status", text="500", hits_protocol=True)
    c.check(all(x["status"] == 500 for cc in CCS for x in r.measured(cc) or []), "500: status 500")


def test_503():
    r = fixed_fault("503", "status=503", "status", text="503", hits_protocol=True)
    c.check(all(x["status"] == 503 for cc in CCS for x in r.measured(cc) or []), "503: status 503")


def test_non_sse_body():
    fixed_fault("non-SSE", "nonsse=1", "not_sse", text="Content-Type", hits_protocol=True)


def test_malformed_json():
    fixed_fault("malformed JSON", "malformed_at=2", "parse", text="event")


def test_oversize_event():
    fixed_fault("oversize", "oversize_at=2", "oversize", text="exceeded")


def test_invalid_utf8():
    fixed_fault("invalid UTF-8", "bad_utf8_at=2", "utf8", text="UTF-8")


def test_error_mid_stream():
    fixed_fault("error mid-stream", "error_at=2", "stream_error", text="sim error")


def test_slow_start():
    # Health stays 503 for 0.5 + 400 virtual s (2 s real at speed 200). sweep does not wait for
    # /health either: the preflight passes, but building the workload asks the server to count
    # tokens, which a loading server refuses, so the sweep stops there, before any point.
    sim = msim("--fault", "slow_start_s=400", ready=False)
    try:
        st, _ = http_get(sim.addr, "/health")
        c.check(st == 503, "slow start: /health 503 while loading, got %d" % st)
        r = run_sweep(sim.url)
        loading = http_get(sim.addr, "/health")[0] == 503
    finally:
        sim.stop()
    c.check(loading, "slow start: the sweep ended while the server was still loading")
    print("slow start: exit %d: %s" % (r.rc, r.err.strip()))
    c.check(r.rc == 2, "slow start: exit 2, got %d: %s" % (r.rc, r.err))
    c.check("token counter" in r.err and "503" in r.err and "Loading model" in r.err,
            "slow start: stderr %r names the token counter's 503 Loading model" % r.err)
    nothing_written("slow start", r)


def test_startup_oom():
    p = subprocess.run([SERVETUNE, "sim", "--profile", PROFILE, "--listen", "127.0.0.1:0",
                        "--fault", "startup_oom=1"], capture_output=True, text=True, timeout=20)
    c.check(p.returncode == 1, "startup OOM: sim exit 1, got %d" % p.returncode)
    c.check("listening on" not in p.stdout, "startup OOM: nothing listened")
    r = run_sweep("http://127.0.0.1:%d" % dead_port())
    c.check(r.rc == 2, "startup OOM: sweep exit 2, got %d" % r.rc)
    c.check("cannot reach" in r.err, "startup OOM: stderr %r says 'cannot reach'" % r.err)
    nothing_written("startup OOM", r)


def test_server_exit():
    # The engine dies after answering 10 completions in full: cc1's protocol (the canary twice, as
    # nothing was cached yet, the verifying canary, the warm-up) and its 2 requests, cc2's
    # protocol (2 canaries, the warm-up), then cc2's first request to finish. Seed 1 gives cc2's
    # first two requests 16 and 40 output tokens; with decode steps of 10 ms (20 GB/s at speed 1)
    # the longer one, sent together with the other, still has 240 ms to go when the server exits
    # (20 ms after its fatal line), so it is in flight.
    ccs = (1, 2, 3)
    wl = WL[:WL.index("--output-len")] + ("--output-len", "4:40", "--page-size", 16)
    sim = msim("--fault", "crash_after_requests=10", "--set", "engine.startup_s=0",
               "--set", "hardware.hbm_bytes_per_s=20GB/s", speed="1")
    try:
        r = run_sweep(sim.url, ccs=ccs, wl=wl, seed=1)
        code = sim.proc.wait(timeout=10)
    finally:
        sim.stop()
    c.check(code == 1, "server exit: sim exit 1, got %s" % code)
    c.check(r.rc == 0, "server exit: exit 0 (failures are data), got %d: %s" % (r.rc, r.err))
    c.check(r.js is not None and len(r.js["points"]) == 3, "server exit: every point in sweep.json")
    intact("server exit", r, ccs)
    got = {cc: classes(r.measured(cc)) for cc in ccs}
    lens = [x["output_len"] for x in sorted(r.measured(2) or [], key=lambda x: x["id"])]
    print("server exit: classes %s; cc2 output lengths %s" % (got, lens))
    # cc1 ran before the crash: valid, verified.
    p1 = r.point(1)
    c.check(p1 is not None and p1["valid"] and p1["repeats"][0]["verify"] == "ok"
            and got[1] == [None, None], "server exit: cc1 valid and verified")
    # cc2: request 0 is answered (the crash), request 1 is cut ('closed');
    # a request sent in the 20 ms before the process was gone is cut too; then 'connect'.
    seq = [g for g in got[2] if g is not None] + got[3]
    nclosed = seq.count("closed")
    c.check(lens[:2] == [16, 40] and got[2][:2] == [None, "closed"]
            and seq == ["closed"] * nclosed + ["connect"] * (len(seq) - nclosed),
            "server exit: cc2's request 0 ok, 1 'closed', then 'closed' or 'connect', then only "
            "'connect'")
    p2 = r.point(2)
    if p2:
        rp = p2["repeats"][0]
        c.check(not p2["valid"] and rp["ok"] == 1 and rp["failed"] == 3
                and "3 of 4 requests failed" in rp["invalid_reason"]
                and p2["cache_state"] == "flushed+warmed" and rp["verify"] == "ok",
                "server exit: cc2 verified, 1 ok, 3 failed, invalid: %s" % rp["invalid_reason"])
    # The last point: the flush cannot reach the server, the cache is uncontrolled, and the
    # canary, the warm-up and every request fail with 'connect'.
    p3 = r.point(3)
    if p3:
        rp = p3["repeats"][0]
        c.check(p3["cache_state"] == "uncontrolled" and rp["flush"]["outcome"] == "error"
                and rp["cache_reason"].startswith("flush error: POST ")
                and "/flush_cache" in rp["cache_reason"] and rp["verify"] == "none",
                "server exit: cc3 uncontrolled, flush error: %s %r" % (p3["cache_state"],
                                                                      rp["cache_reason"]))
        c.check(classes(r.cache(3)) == ["connect", "connect"] and rp["warm"]["failed"] == 1,
                "server exit: cc3 canary and warm-up 'connect': %s" % classes(r.cache(3)))
        c.check(got[3] == ["connect"] * 6 and rp["errors"] == {"connect": 6} and not p3["valid"],
                "server exit: cc3 6 x connect, invalid: %s" % rp["errors"])


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
    # 200 blocks (3,200 tokens) are left, enough for the 2,049-token canary alone. Admission
    # reserves no output blocks; decode steps of 10 ms (20 GB/s) keep both cc2 requests running
    # together (40 ms real each), and two requests of 1,600 + 800 tokens (800 shared) need
    # 50 + 2 x (50 + 50) = 250 blocks as they grow: one is preempted (retracted), readmitted, and
    # still completes. cc1 needs at most 150 blocks: no preemption there.
    ccs, n_out = (1, 2), 800
    sim = msim("--fault", "memory_pressure_blocks=20321", "--set", "engine.admit_output_reserve=0",
               "--set", "hardware.hbm_bytes_per_s=20GB/s")
    try:
        r = run_sweep(sim.url, ccs=ccs, per_cc=1,
                      wl=("--workload", "shared-prefix", "--input-len", 1600, "--prefix-frac",
                          0.5, "--output-len", n_out, "--page-size", 16))
        _, body = http_get(sim.addr, "/metrics")
    finally:
        sim.stop()
    c.check(r.rc == 0, "memory pressure: exit 0, got %d: %s" % (r.rc, r.err))
    intact("memory pressure", r, ccs, 1)
    for cc in ccs:
        recs = r.measured(cc) or []
        c.check(recs and all(x["ok"] and x["completion_tokens"] == n_out for x in recs),
                "memory pressure: cc%d: every request completes with %d tokens: %s"
                % (cc, n_out, classes(recs)))
        p = r.point(cc)
        c.check(p is not None and p["errors"] == 0 and p["cache_state"] == "flushed+warmed"
                and p["repeats"][0]["verify"] == "ok",
                "memory pressure: cc%d no error, verified: %s" % (cc, p and (
                    p["errors"], p["cache_state"], p["repeats"][0]["verify"])))
    pre = prom_value(body.decode(), "sglang:num_retracted_reqs")
    p1, p2 = r.point(1), r.point(2)
    print("memory pressure: %s preemptions; cc1 hit %s valid %s; cc2 hit %s valid %s %r"
          % (pre, p1 and p1["hit_rate"], p1 and p1["valid"], p2 and p2["hit_rate"],
             p2 and p2["valid"], p2 and p2["repeats"][0]["invalid_reason"]))
    c.check(pre is not None and pre > 0, "memory pressure: preemptions in /metrics, got %s" % pre)
    c.check(p1 is not None and p1["valid"] and abs(p1["hit_rate"] - 0.5) < 0.02,
            "memory pressure: cc1 (no preemption) valid, hit 0.5")
    # A preempted request is prefilled again when readmitted and then finds its own prompt in
    # the cache: the point's hit rate rises above the target and the sweep marks it invalid.
    if p2:
        c.check(not p2["valid"] and p2["hit_rate"] > 0.52
                and "misses the target 0.5000" in p2["repeats"][0]["invalid_reason"],
                "memory pressure: cc2 invalid, hit rate above the target")


def test_backpressure():
    # Fixed-timing mode (ttft 0, itl 0): the server writes as fast as the kernel takes it;
    # 4 + 8 requests of 20,000 tokens. The fixed-timing sim keeps no cache: nothing to flush,
    # nothing to verify, no shared prefix (the fixed workload), no hit target.
    ccs, toks = (4, 8), 20000
    with Sim("--ttft-ms", "0", "--itl-ms", "0", trace=False) as sim:
        r = run_sweep(sim.url, ccs=ccs, per_cc=1,
                      wl=("--workload", "fixed", "--input-len", 64, "--output-len", toks))
    c.check(r.rc == 0, "backpressure: exit 0, got %d: %s" % (r.rc, r.err))
    intact("backpressure", r, ccs, 1)
    for cc in ccs:
        recs = r.measured(cc) or []
        c.check(recs and all(x["ok"] and x["completion_tokens"] == toks
                             and x["content_chunks"] == toks and x["content_bytes"] == 4 * toks
                             for x in recs),
                "backpressure: cc%d: every token arrives: %s" % (cc, classes(recs)))
        p = r.point(cc)
        c.check(p is not None and p["valid"] and p["cache_state"] == "flushed"
                and p["repeats"][0]["verify"] == "unverifiable",
                "backpressure: cc%d valid, flushed (unverifiable): %s"
                % (cc, p and (p["valid"], p["cache_state"], p["repeats"][0]["cache_reason"])))


def fsize_limit(limit):
    def lim():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return lim


def test_disk_full():
    # RLIMIT_FSIZE (SIGXFSZ ignored) makes write() fail with EFBIG: the stand-in for ENOSPC. The
    # limit is per file: cc1's files (4 receipts of about 1,050 bytes) fit; cc4's 16 do not.
    ccs = (1, 4, 8)
    sim = msim()
    try:
        r = run_sweep(sim.url, ccs=ccs, per_cc=4, preexec=fsize_limit(6144))
    finally:
        sim.stop()
    # The cache receipts of a fresh server: cc1's three canaries (about 830 bytes each, with the
    # simulator's virtual times) fit in 2,900 bytes, its warm-up (about 940) does not.
    sim = msim()
    try:
        r2 = run_sweep(sim.url, preexec=fsize_limit(2900))
    finally:
        sim.stop()
    print("disk full: %s" % r.err.strip())
    c.check(r.rc == 3, "disk full: exit 3, got %d: %s" % (r.rc, r.err))
    path = os.path.join(r.dir, "points", "cc4-r1.jsonl")
    c.check("receipts %s: File too large; the sweep stopped early" % path in r.err,
            "disk full: stderr %r names the receipts file and the error" % r.err)
    for fname, (_, bad) in r.files.items():
        c.check(not bad, "disk full: %s: no torn line, bad: %r" % (fname, bad[:1]))
    c.check(sorted(r.files) == ["cc1-r1.cache.jsonl", "cc1-r1.jsonl", "cc4-r1.cache.jsonl",
                                "cc4-r1.jsonl"],
            "disk full: the sweep stopped at cc4 (no cc8 files): %s" % sorted(r.files))
    c.check(os.path.getsize(path) <= 6144, "disk full: the file is within the limit")
    recs = r.measured(4) or []
    ids = [x["id"] for x in recs]
    c.check(0 < len(ids) < 16 and len(set(ids)) == len(ids),
            "disk full: some of cc4's receipts, none twice: %s" % ids)
    c.check(sorted(x["id"] for x in r.measured(1) or []) == [0, 1, 2, 3],
            "disk full: cc1's receipts all there")
    js = r.js
    c.check(js is not None and [p["concurrency"] for p in js["points"]] == [1, 4],
            "disk full: sweep.json with cc1 and cc4 only")
    p1, p4 = r.point(1), r.point(4)
    c.check(p1 is not None and p1["valid"] and p1["repeats"][0]["receipts_records"] == 4
            and p1["repeats"][0]["receipts_error"] is None, "disk full: cc1 valid, 4 records")
    if p4:
        rp = p4["repeats"][0]
        print("disk full: cc4 %s" % {k: rp[k] for k in ("requests", "issued", "ok",
                                                        "receipts_records", "receipts_error",
                                                        "invalid_reason")})
        # The point stopped issuing at the failure (in-flight requests end): fewer than 16 sent;
        # sweep.json says how many records were kept and why, and the point is not valid.
        c.check(rp["receipts_records"] == len(ids) and rp["receipts_error"] == "File too large"
                and rp["issued"] < 16 and rp["ok"] + rp["failed"] == rp["issued"]
                and rp["issued"] <= len(ids) + 1 + 4,
                "disk full: cc4 records %d = %d kept, error, issued %d < 16"
                % (rp["receipts_records"], len(ids), rp["issued"]))
        c.check(not p4["valid"] and "receipts not all written (File too large): %d of %d kept"
                % (len(ids), rp["issued"]) in rp["invalid_reason"],
                "disk full: cc4 invalid with the reason, got %s %r"
                % (p4["valid"], rp["invalid_reason"]))

    # A canary or warm-up receipt that cannot be written stops the sweep before it measures.
    print("disk full (cache receipts): %s" % r2.err.strip())
    cpath = os.path.join(r2.dir, "points", "cc1-r1.cache.jsonl")
    c.check(r2.rc == 3 and "receipts %s: File too large; the sweep stopped early" % cpath in r2.err,
            "disk full (cache): exit 3 naming %s, got %d: %s" % (cpath, r2.rc, r2.err))
    c.check(sorted(r2.files) == ["cc1-r1.cache.jsonl"],
            "disk full (cache): nothing measured: %s" % sorted(r2.files))
    recs, bad = r2.files.get("cc1-r1.cache.jsonl", ([], []))
    c.check(not bad and len(canaries(recs)) == 3 and not warmups(recs),
            "disk full (cache): the three canaries kept whole, the warm-up not: %s, bad %r"
            % (len(recs), bad[:1]))
    c.check(r2.js is not None and r2.js["points"] == [],
            "disk full (cache): sweep.json with no point")


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
