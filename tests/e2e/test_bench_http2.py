"""HTTP/2: servetune bench through nghttpx (Debian's nghttp2-proxy) in front of the simulator,
as h2c with prior knowledge and as h2 over TLS negotiated by ALPN. TLS is verified by default:
a self-signed certificate is refused (exit 2, a message naming the certificate problem) unless
--insecure is given, which the summary records. Skipped (exit 77) when nghttpx or openssl is
missing."""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim, bench  # noqa: E402

if not shutil.which("nghttpx") or not shutil.which("openssl"):
    print("nghttpx or openssl missing: skipped")
    sys.exit(77)

c = Checker("bench_http2")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


with Sim("--ttft-ms", "20", "--itl-ms", "2", trace=False) as sim:
    d = sim.dir
    key, crt = os.path.join(d, "key.pem"), os.path.join(d, "crt.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    h2c_port, tls_port = free_port(), free_port()
    host, port = sim.addr.rsplit(":", 1)
    proxy = subprocess.Popen(["nghttpx", "--conf=/dev/null", "--workers=1",
                              "--frontend=127.0.0.1,%d;no-tls" % h2c_port,
                              "--frontend=127.0.0.1,%d" % tls_port,
                              "--backend=%s,%s" % (host, port),
                              "--errorlog-file=" + os.path.join(d, "nghttpx.log"), key, crt],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def up(p):
            try:
                socket.create_connection(("127.0.0.1", p), timeout=0.2).close()
                return True
            except OSError:
                return False
        end = time.monotonic() + 10
        while time.monotonic() < end and not (up(h2c_port) and up(tls_port)):
            time.sleep(0.05)

        r = bench("http://127.0.0.1:%d" % h2c_port, "--http", "h2c", "--concurrency", 8,
                  "--requests", 24, "--output-len", 12, "--ignore-eos")
        c.check(r.summary["requests"]["ok"] == 24, "h2c: 24 ok, got %s" % r.summary["requests"])
        c.check(all(x["http"] == "2" for x in r.receipts), "h2c: every receipt says HTTP/2: %s"
                % {x["http"] for x in r.receipts})
        c.check(r.summary["output_tokens"] == 24 * 12, "h2c: token count")
        c.check(r.summary["ttft_ms"]["min"] >= 20, "h2c: ttft >= 20 ms")

        p = subprocess.run([SERVETUNE, "bench", "--url", "https://127.0.0.1:%d" % tls_port,
                            "--requests", "2", "--no-progress"], capture_output=True, text=True,
                           timeout=60)
        c.check(p.returncode == 2, "tls: self-signed certificate refused by default (exit %d)" % p.returncode)
        c.check("certificate" in p.stderr.lower(), "tls: message names the certificate: %r" % p.stderr)

        r = bench("https://127.0.0.1:%d" % tls_port, "--insecure", "--concurrency", 4,
                  "--requests", 8, "--output-len", 6)
        c.check(r.summary["requests"]["ok"] == 8, "tls: 8 ok with --insecure")
        c.check(all(x["http"] == "2" for x in r.receipts), "tls: h2 by ALPN")
        c.check(r.summary["config"]["insecure"] is True, "tls: --insecure recorded in the summary")
        c.check(len(r.receipts) == 8 and all(x.get("tls_verified") is False for x in r.receipts),
                "tls: --insecure recorded in every receipt (tls_verified false)")

        r = bench("http://127.0.0.1:%d" % h2c_port, "--concurrency", 2, "--requests", 4,
                  "--output-len", 4)
        c.check(all(x["http"] == "1.1" for x in r.receipts), "default: HTTP/1.1 on cleartext")
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
c.close()
