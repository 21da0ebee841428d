"""Campaign runner e2e: a command baseline that fails to start as llama-server b4748 does with
-ctv q8_0 and no -fa (its captured log, tests/data/logs/llamacpp-b4748/fail_ctv_no_fa.log,
replayed by the start command, which then aborts). The campaign exits 2 quoting the cause ("V
cache quantization requires flash_attn"), not the last line; the failure folder keeps the log's
tail; a relative target.log lies in the archive (arms/baseline/), not in the plan's folder, so a
second campaign from the same plan starts a log of its own."""
import glob
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_boot")
LOG = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                    "logs", "llamacpp-b4748", "fail_ctv_no_fa.log"))
PLAN = """name: boot
target:
  kind: command
  start: "cat '%s'; kill -ABRT $$ # {x}"
  log: target.log
  base_url: http://127.0.0.1:%d
  health_url: http://127.0.0.1:%d/health
  health_timeout_s: 5
baseline:
  x: 1
arms:
  - name: two
    set: {x: 2}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 16}
  full:
    - {id: dec, kind: bench, output_tokens: 16}
rules:
  metrics:
    - {metric: dec.decode_tps}
"""
s_ = socket.socket()
s_.bind(("127.0.0.1", 0))
port = s_.getsockname()[1]
s_.close()
pd = cl.tmpdir()
pl = cl.write(pd, "boot.yaml", PLAN % (LOG, port, port))
for run in (1, 2):
    out = os.path.join(pd, "audit%d" % run)
    r = cl.campaign("run", pl, "--out", out, timeout=60)
    c.check(r.returncode == 2 and "baseline" in r.stderr and
            "V cache quantization requires flash_attn" in r.stderr,
            "run %d: exit 2 quoting the cause: %d %r" % (run, r.returncode, r.stderr[-1200:]))
    tails = glob.glob(os.path.join(out, "arms", "baseline", "failure-*", "log-tail.txt"))
    tail = open(tails[0]).read() if tails else ""
    c.check("requires flash_attn" in tail and "terminate called" in tail,
            "run %d: the failure folder keeps the log tail: %r" % (run, tails))
    logf = os.path.join(out, "arms", "baseline", "target.log")
    text = open(logf).read() if os.path.exists(logf) else ""
    c.check(text.count("V cache quantization requires flash_attn") == 1,
            "run %d: target.log in the archive, this campaign's only: %r" % (run, logf))
c.check(not os.path.exists(os.path.join(pd, "target.log")), "no target.log in the plan's folder")
c.close()
