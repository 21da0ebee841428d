"""servetune sim on its own, through raw sockets: routes, the streaming timeline and event shapes,
tokens per chunk, non-streaming bodies, every fault key, X-Sim errors, keep-alive, the command line
checks, SIGTERM (exit 0) and the --trace file. Python 3 standard library only; port 0, loopback,
bounded in time (a few seconds)."""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, by_rid  # noqa: E402

c = Checker("sim_basic")
TTFT_MS, ITL_MS = 20, 5


class Resp:
    def __init__(self):
        self.status = 0
        self.headers = {}
        self.body = bytearray()
        self.end = "ok"  # ok | eof (closed before the last chunk) | reset | timeout
        self.t_headers = None

    def events(self):
        """SSE events as (kind, payload bytes, size): kind is data or comment."""
        out = []
        for piece in bytes(self.body).split(b"\n\n"):
            if not piece:
                continue
            size = len(piece) + 2
            if piece.startswith(b"data: "):
                out.append(("data", piece[6:], size))
            elif piece.startswith(b":"):
                out.append(("comment", piece, size))
            else:
                out.append(("junk", piece, size))
        return out

    def data(self):
        return [p for k, p, _ in self.events() if k == "data"]

    def json(self):
        return json.loads(bytes(self.body))


class Conn:
    """One keep-alive HTTP/1.1 connection that reads chunked or sized bodies by hand."""

    def __init__(self, addr, timeout=5.0):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.buf = bytearray()

    def close(self):
        self.s.close()

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError
        self.buf += d

    def _until(self, sep):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + len(sep)]
                return out
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def send(self, method, path, body=None, headers=None):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        h = {"Host": "sim", "Content-Length": str(len(data))}
        h.update(headers or {})
        if body is not None:
            h["Content-Type"] = "application/json"
        head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items())
        self.s.sendall(head.encode() + b"\r\n" + data)
        self.t_sent = time.monotonic()

    def response(self):
        r = Resp()
        try:
            lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
            r.t_headers = time.monotonic()
            r.status = int(lines[0].split()[1])
            for line in lines[1:]:
                k, v = line.split(":", 1)
                r.headers[k.strip().lower()] = v.strip()
            if r.headers.get("transfer-encoding") == "chunked":
                while True:
                    n = int(self._until(b"\r\n").split(b";")[0], 16)
                    if n == 0:
                        self._until(b"\r\n")
                        break
                    r.body += self._exact(n)
                    self._exact(2)
            else:
                r.body += self._exact(int(r.headers.get("content-length", "0")))
        except EOFError:
            r.end = "eof"
        except ConnectionResetError:
            r.end = "reset"
        except socket.timeout:
            r.end = "timeout"
        r.body += b""  # keep whatever arrived
        return r

    def request(self, method, path, body=None, headers=None):
        self.send(method, path, body, headers)
        return self.response()


def one(addr, method, path, body=None, headers=None, timeout=5.0):
    k = Conn(addr, timeout)
    try:
        return k.request(method, path, body, headers)
    finally:
        k.close()


def chat(n, stream=True, usage=False, content="hello world!"):
    b = {"model": "sim", "messages": [{"role": "user", "content": content}], "max_tokens": n,
         "stream": stream}
    if usage:
        b["stream_options"] = {"include_usage": True}
    return b


def tok(i):
    m = i % 17576
    return " " + chr(97 + m // 676) + chr(97 + (m // 26) % 26) + chr(97 + m % 26)


def content_events(r):
    """Parsed content chunks: (text, finish_reason)."""
    out = []
    for p in r.data():
        if p == b"[DONE]":
            continue
        try:
            j = json.loads(p)
        except ValueError:
            continue
        for ch in j.get("choices", []):
            d = ch.get("delta", {})
            t = d.get("content", ch.get("text"))
            if t:
                out.append((t, ch.get("finish_reason")))
    return out


def check_basic(addr):
    r = one(addr, "GET", "/health")
    c.check(r.status == 200 and r.json() == {"status": "ok"}, "health: 200 ok, got %d %r" % (r.status, r.body))
    c.check(r.headers.get("x-sim-time-scale") == "1", "health: X-Sim-Time-Scale: 1")
    r = one(addr, "GET", "/v1/models")
    m = r.json()
    c.check(r.status == 200 and m["object"] == "list" and m["data"][0]["id"] == "sim"
            and m["data"][0]["owned_by"] == "servetune-sim", "models: %r" % m)
    r = one(addr, "GET", "/nope")
    c.check(r.status == 404 and r.json() == {"error": {"message": "File Not Found", "type": "not_found_error",
                                                       "code": 404}}, "404: %d %r" % (r.status, r.body))
    c.check(r.headers.get("x-sim-time-scale") == "1", "404: X-Sim-Time-Scale: 1")
    r = one(addr, "GET", "/v1/chat/completions")
    c.check(r.status == 405 and r.json()["error"]["code"] == 405, "405: %d %r" % (r.status, r.body))
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "ttft_ms=1,bogus=2"})
    c.check(r.status == 400 and "bogus" in r.json()["error"]["message"], "bad X-Sim key: %d %r" % (r.status, r.body))
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "itl_ms=fast"})
    c.check(r.status == 400 and "itl_ms" in r.json()["error"]["message"], "bad X-Sim value: %r" % r.body)
    r = one(addr, "POST", "/v1/chat/completions", b"{not json")
    c.check(r.status == 400 and r.json()["error"]["code"] == 400, "invalid JSON body: %d" % r.status)
    r = one(addr, "POST", "/v1/chat/completions", chat(0))
    c.check(r.status == 400 and "max_tokens" in r.json()["error"]["message"], "max_tokens 0: %r" % r.body)


def check_stream(addr):
    k = Conn(addr)
    body = chat(6, usage=True, content="x" * 13)  # 13 bytes -> 4 prompt tokens
    k.send("POST", "/v1/chat/completions", body, {"X-Request-Id": "t-stream"})
    t0 = k.t_sent
    r = k.response()
    k.close()
    c.check(r.status == 200 and r.end == "ok", "stream: 200 and a clean end (%d %s)" % (r.status, r.end))
    c.check(r.headers.get("content-type") == "text/event-stream", "stream: content type")
    c.check(r.headers.get("cache-control") == "no-cache", "stream: cache-control")
    c.check(r.headers.get("x-sim-time-scale") == "1", "stream: X-Sim-Time-Scale")
    c.check(r.t_headers - t0 < TTFT_MS / 1000.0, "stream: headers before the first token")
    ev = r.data()
    c.check(len(ev) == 1 + 6 + 1 + 1, "stream: role + 6 content + usage + done, got %d" % len(ev))
    role = json.loads(ev[0])
    c.check(role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
            and role["choices"][0]["finish_reason"] is None, "stream: role chunk %r" % role)
    c.check(role["object"] == "chat.completion.chunk" and role["id"].startswith("chatcmpl-sim-")
            and role["model"] == "sim" and isinstance(role["created"], int), "stream: chunk fields")
    for i in range(6):
        j = json.loads(ev[1 + i])
        ch = j["choices"][0]
        c.check(ch["delta"]["content"] == tok(i), "stream: token %d text %r" % (i, ch["delta"]))
        c.check(ch["finish_reason"] == ("length" if i == 5 else None), "stream: finish_reason %d" % i)
        c.check("usage" not in j, "stream: no running usage")
    u = json.loads(ev[7])
    c.check(u["choices"] == [] and u["usage"] == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                                                  "prompt_tokens_details": {"cached_tokens": 0}},
            "stream: usage chunk %r" % u)
    c.check(ev[8] == b"[DONE]", "stream: [DONE] last")

    # Without include_usage: no usage chunk; with continuous_usage_stats: running usage.
    b = chat(3)
    b["stream_options"] = {"continuous_usage_stats": True}
    r = one(addr, "POST", "/v1/chat/completions", b, {"X-Sim": "role_chunk=off,done=off,cached=5"})
    ev = [json.loads(p) for p in r.data()]
    c.check(len(ev) == 3 and all("usage" in e for e in ev), "continuous usage: 3 chunks with usage")
    c.check([e["usage"]["completion_tokens"] for e in ev] == [1, 2, 3], "continuous usage: running counts")
    r = one(addr, "POST", "/v1/chat/completions", b, {"X-Sim": "usage=never"})
    c.check(all("usage" not in json.loads(p) for p in r.data() if p != b"[DONE]"),
            "usage=never: no running usage either")
    r = one(addr, "POST", "/v1/chat/completions", chat(2), {"X-Sim": "usage=always,cached=5"})
    u = json.loads(r.data()[-2])
    c.check(u["usage"]["prompt_tokens_details"]["cached_tokens"] == 5, "usage=always, cached=5: %r" % u)

    # tokens_per_chunk=3: 3, 3, 3, 1 with the role chunk in the same write as the first.
    r = one(addr, "POST", "/v1/chat/completions", chat(10), {"X-Sim": "tokens_per_chunk=3,role_chunk=first",
                                                             "X-Request-Id": "t-tpc"})
    ce = content_events(r)
    c.check([len(t) // 4 for t, _ in ce] == [3, 3, 3, 1], "tpc=3: token counts %r" % ce)
    c.check("".join(t for t, _ in ce) == "".join(tok(i) for i in range(10)), "tpc=3: text")

    # The end of the content at a batch boundary (a batch holds at most 1024 events) with nothing
    # after it (no usage, no [DONE]) still ends the response: this hung once.
    for n in range(1019, 1025):
        r = one(addr, "POST", "/v1/chat/completions", chat(n), {"X-Sim": "ttft_ms=0,itl_ms=0,done=off"},
                timeout=2.0)
        c.check(r.end == "ok" and len(content_events(r)) == n, "batch boundary n=%d: %s, %d chunks"
                % (n, r.end, len(content_events(r))))

    # Completions stream: no role chunk, text chunks.
    r = one(addr, "POST", "/v1/completions", {"prompt": "abcdefgh", "max_tokens": 4, "stream": True,
                                              "stream_options": {"include_usage": True}})
    ev = r.data()
    j0 = json.loads(ev[0])
    c.check(j0["object"] == "text_completion" and j0["choices"][0]["text"] == tok(0), "completions: %r" % j0)
    c.check(len(ev) == 4 + 1 + 1, "completions: 4 chunks + usage + done")
    c.check(json.loads(ev[4])["usage"]["prompt_tokens"] == 2, "completions: prompt tokens ceil(8/4)")

    # SSE comments while waiting for the first token; delayed headers.
    r = one(addr, "POST", "/v1/chat/completions", chat(2), {"X-Sim": "ping_ms=5,ttft_ms=32"})
    kinds = [kd for kd, _, _ in r.events()]
    c.check(kinds[:1] == ["data"] and kinds.count("comment") == 6, "ping: role then 6 comments: %r" % kinds)
    k = Conn(addr)
    k.send("POST", "/v1/chat/completions", chat(2), {"X-Sim": "headers_delay_ms=100,ttft_ms=0"})
    r = k.response()
    k.close()
    c.check(r.t_headers - k.t_sent >= 0.099, "headers_delay: headers after %.1f ms" % ((r.t_headers - k.t_sent) * 1e3))


def check_nonstream(addr):
    k = Conn(addr)
    k.send("POST", "/v1/chat/completions", chat(5, stream=False), {"X-Request-Id": "t-body"})
    r = k.response()
    dt = time.monotonic() - k.t_sent
    k.close()
    j = r.json()
    c.check(r.status == 200 and r.headers.get("content-type") == "application/json", "non-stream: 200 json")
    c.check(j["object"] == "chat.completion" and j["choices"][0]["message"] == {
        "role": "assistant", "content": "".join(tok(i) for i in range(5))}, "non-stream: message %r" % j)
    c.check(j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 5
            and j["usage"]["prompt_tokens"] == 3, "non-stream: usage %r" % j["usage"])
    c.check(dt >= (TTFT_MS + 4 * ITL_MS) / 1000.0, "non-stream: body after ttft + 4 itl (%.1f ms)" % (dt * 1e3))
    r = one(addr, "POST", "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 2})
    j = r.json()
    c.check(j["object"] == "text_completion" and j["choices"][0]["text"] == tok(0) + tok(1)
            and j["usage"]["prompt_tokens"] == 3, "non-stream completions: %r" % j)
    r = one(addr, "POST", "/v1/completions", {"prompt": "a", "max_tokens": 2}, {"X-Sim": "usage=never"})
    c.check("usage" not in r.json(), "non-stream usage=never")


def check_faults(addr):
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "status=429"})
    c.check(r.status == 429 and r.headers.get("retry-after") == "1", "429: Retry-After 1 (%r)" % r.headers)
    c.check(r.json()["error"]["code"] == 429 and r.headers.get("content-type") == "application/json", "429: body")
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "status=429,retry_after=7"})
    c.check(r.headers.get("retry-after") == "7", "429: Retry-After 7")
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "status=429,retry_after=-1"})
    c.check(r.status == 429 and "retry-after" not in r.headers, "429: no Retry-After with -1")
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "status=503"})
    c.check(r.status == 503 and r.json()["error"]["code"] == 503 and "retry-after" not in r.headers, "503")

    r = one(addr, "POST", "/v1/chat/completions", chat(6), {"X-Sim": "stall_after=2"}, timeout=0.4)
    c.check(r.end == "timeout" and len(content_events(r)) == 2, "stall_after=2: 2 chunks then silence (%s, %d)"
            % (r.end, len(content_events(r))))
    r = one(addr, "POST", "/v1/chat/completions", chat(6), {"X-Sim": "close_after=2", "X-Request-Id": "t-close"})
    c.check(r.end == "eof" and len(content_events(r)) == 2 and b"[DONE]" not in r.body,
            "close_after=2: 2 chunks then EOF without the last chunk (%s)" % r.end)
    r = one(addr, "POST", "/v1/chat/completions", chat(6), {"X-Sim": "reset_after=2"})
    c.check(r.end == "reset" and len(content_events(r)) <= 2, "reset_after=2: connection reset (%s)" % r.end)
    r = one(addr, "POST", "/v1/chat/completions", chat(4), {"X-Sim": "malformed_at=2"})
    ev = r.data()
    bad = []
    for p in ev:
        try:
            json.loads(p) if p != b"[DONE]" else None
        except ValueError:
            bad.append(p)
    c.check(r.end == "ok" and len(bad) == 1 and b'" aab"' in bad[0] and ev[-1] == b"[DONE]",
            "malformed_at=2: only content chunk 2 is invalid JSON")
    r = one(addr, "POST", "/v1/chat/completions", chat(4), {"X-Sim": "oversize_at=2"})
    sizes = [(len(p), p) for p in r.data()]
    big = [p for n, p in sizes if n > 2 * 1024 * 1024]
    c.check(len(big) == 1 and json.loads(big[0])["choices"][0]["delta"]["content"] == tok(1),
            "oversize_at=2: one valid JSON data line over 2 MiB")
    r = one(addr, "POST", "/v1/chat/completions", chat(4), {"X-Sim": "bad_utf8_at=2"})
    ev = r.data()
    raw = [p for p in ev if b"\xc3\x28" in p]
    c.check(len(raw) == 1, "bad_utf8_at=2: one chunk with \\xC3\\x28")
    if raw:
        try:
            raw[0].decode("utf-8")
            c.check(False, "bad_utf8_at=2: the chunk is invalid UTF-8")
        except UnicodeDecodeError:
            pass
        j = json.loads(raw[0].decode("utf-8", "replace"))
        c.check(len(j["choices"][0]["delta"]["content"]) >= 3, "bad_utf8_at=2: JSON syntax intact")
    r = one(addr, "POST", "/v1/chat/completions", chat(6), {"X-Sim": "error_at=2", "X-Request-Id": "t-error"})
    ev = r.data()
    c.check(r.end == "ok" and len(content_events(r)) == 2 and ev[-1] == b"[DONE]" and json.loads(ev[-2]) == {
        "error": {"message": "sim error", "type": "InternalServerError", "code": 500}},
        "error_at=2: 2 chunks, the error event, [DONE], a clean end")
    r = one(addr, "POST", "/v1/chat/completions", chat(3), {"X-Sim": "nonsse=1"})
    c.check(r.status == 200 and r.headers.get("content-type") == "application/json"
            and r.json()["object"] == "chat.completion", "nonsse=1: a plain JSON body")


def check_keepalive(addr):
    k = Conn(addr)
    ok = 0
    for i in range(30):
        if i % 3 == 0:
            r = k.request("GET", "/health")
            ok += r.status == 200
        else:
            r = k.request("POST", "/v1/chat/completions", chat(3, stream=i % 3 == 1),
                          {"X-Sim": "ttft_ms=0,itl_ms=0"})
            ok += r.status == 200 and r.end == "ok"
    k.close()
    c.check(ok == 30, "keep-alive: 30 requests on one connection, %d ok" % ok)
    # A client that goes away mid-stream does not disturb the next one.
    k = Conn(addr)
    k.send("POST", "/v1/chat/completions", chat(1000), {"X-Sim": "itl_ms=1"})
    k._until(b"aab")
    k.close()
    r = one(addr, "GET", "/health")
    c.check(r.status == 200, "a client that left mid-stream does not disturb the server")


def check_trace(trace):
    t = by_rid(trace)
    ev = t.get("t-stream", [])
    kinds = [e["kind"] for e in ev]
    c.check(kinds == ["arrive", "headers", "role"] + ["content"] * 6 + ["usage", "done", "close"],
            "trace t-stream kinds %r" % kinds)
    if len(ev) == 12:
        arrive = ev[0]["t_ns"]
        c.check([e["seq"] for e in ev[1:]] == list(range(11)), "trace: seq 0..10")
        c.check(all(ev[i]["t_ns"] <= ev[i + 1]["t_ns"] for i in range(11)), "trace: times in order")
        content = ev[3:9]
        c.check(sum(e["tokens"] for e in content) == 6 and all(e["tokens"] == 1 for e in content), "trace: tokens")
        for j, e in enumerate(content):
            due = arrive + (TTFT_MS + j * ITL_MS) * 1_000_000
            c.check(due <= e["t_ns"] < due + 50_000_000, "trace: content %d written %.3f ms after due"
                    % (j, (e["t_ns"] - due) / 1e6))
        c.check(ev[1]["t_ns"] - arrive < 5_000_000, "trace: headers at once")
        c.check(all(e["bytes"] > 0 for e in ev[2:11]), "trace: event sizes")
        c.check(ev[10]["bytes"] == len("data: [DONE]\n\n"), "trace: [DONE] size")
    tpc = [e for e in t.get("t-tpc", []) if e["kind"] == "content"]
    c.check([e["tokens"] for e in tpc] == [3, 3, 3, 1], "trace: tpc=3 tokens %r" % [e["tokens"] for e in tpc])
    roles = [e for e in t.get("t-tpc", []) if e["kind"] == "role"]
    c.check(len(roles) == 1 and tpc and roles[0]["t_ns"] == tpc[0]["t_ns"], "trace: role_chunk=first shares the write")
    body = [e["kind"] for e in t.get("t-body", [])]
    c.check(body == ["arrive", "headers", "finish"], "trace: non-stream kinds %r" % body)
    fin = [e for e in t.get("t-body", []) if e["kind"] == "finish"]
    c.check(fin and fin[0]["tokens"] == 5, "trace: non-stream body carries 5 tokens")
    close = [e["kind"] for e in t.get("t-close", [])]
    c.check(close[-3:] == ["content", "content", "close"], "trace: close_after kinds %r" % close)
    err = [e["kind"] for e in t.get("t-error", [])]
    c.check(err[-4:] == ["content", "error", "done", "close"], "trace: error_at kinds %r" % err)
    arrives = [e for e in trace if e["kind"] == "arrive"]
    c.check(len(arrives) >= 40 and all("t_ns" in e and "seq" not in e for e in arrives), "trace: arrive lines")
    c.check(any(e["rid"].startswith("sim-") for e in arrives), "trace: sim-<k> ids without X-Request-Id")


def check_cli():
    def run(args):
        return subprocess.run([SERVETUNE, "sim"] + args, capture_output=True, text=True, timeout=10)
    p = run(["--itl-ms", "soon"])
    c.check(p.returncode == 2 and "--itl-ms" in p.stderr, "cli: bad --itl-ms -> 2 (%d %r)" % (p.returncode, p.stderr))
    p = run(["--tokens-per-chunk", "9"])
    c.check(p.returncode == 2 and "--tokens-per-chunk" in p.stderr, "cli: bad --tokens-per-chunk -> 2")
    p = run(["--fault", "explode=1"])
    c.check(p.returncode == 2 and "explode" in p.stderr, "cli: bad --fault -> 2")
    p = run(["--listen", "0.0.0.0:0"])
    c.check(p.returncode == 2 and "--allow-remote" in p.stderr, "cli: non-loopback refused -> 2")
    p = run(["--listen", "nowhere"])
    c.check(p.returncode == 2 and "--listen" in p.stderr, "cli: bad --listen -> 2")
    p = run(["--help"])
    c.check(p.returncode == 0 and "--ttft-ms" in p.stdout, "cli: --help")


def check_ipv6():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
    except OSError:
        return  # no IPv6 loopback here
    p = subprocess.Popen([SERVETUNE, "sim", "--listen", "[::1]:0"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    c.check(line.startswith("listening on [::1]:") and not line.endswith(":0\n"), "ipv6: %r" % line)
    if line.startswith("listening on "):
        r = one(line.split()[-1], "GET", "/health")
        c.check(r.status == 200, "ipv6: health")
    p.terminate()
    c.check(p.wait(timeout=10) == 0, "ipv6: exit 0 on SIGTERM")


t_start = time.monotonic()
sim = Sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS))
try:
    c.check(sim.addr.startswith("127.0.0.1:") and not sim.addr.endswith(":0"), "listening line %r" % sim.addr)
    check_basic(sim.addr)
    check_stream(sim.addr)
    check_nonstream(sim.addr)
    check_faults(sim.addr)
    check_keepalive(sim.addr)
finally:
    rc = sim.stop()
c.check(rc == 0, "SIGTERM: exit 0, got %s" % rc)
check_trace(sim.trace_lines())
check_cli()
check_ipv6()
c.check(time.monotonic() - t_start < 30, "bounded: %.1f s" % (time.monotonic() - t_start))
c.close()
