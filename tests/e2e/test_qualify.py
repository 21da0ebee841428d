"""servetune qualify against the model-mode sim (a tiny vision profile at --speed 200): the
screening suite passes at quality.error_rate 0 and fails every verified check at error rate 1
(throughput-categories is not quality and passes); --compare shows the regression only when the
arm has errors; the quality suite gives 7/7 and 0/7; a text-only profile makes the media checks
unsupported with the server's message; a bad suite file exits 2 with FILE:LINE before any
request. Python 3 standard library only; bounded in time (well under 60 s)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker, Sim  # noqa: E402

c = Checker("qualify")
TMP = tempfile.mkdtemp(prefix="st-qualify-")

TINY = """\
model:
  name: tiny-vl
  layers: 4
  hidden: 1024
  heads: 8
  kv_heads: 2
  head_dim: 128
  params_total: 1e8
  params_active: 1e8
  params_dense: 1e8
%shardware:
  gpu_mem_bytes: 8GB
engine:
  startup_s: 1
  context_length: 32768
  graph_sizes: [1, 2, 4]
  reserve_bytes: 100MB
  act_bytes_per_token: 16KB
quality:
  error_rate: 0
seed: 7
"""

MEDIA = {"ocr", "multi-image", "video", "long-text-image"}
SCREENING = ["arithmetic", "json", "multi-turn", "ocr", "multi-image", "video", "long-retrieval",
             "long-text-image", "queued", "throughput-categories"]


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


VL = write("tiny-vl.yaml", TINY % "  vision_params: 1e6\n  vision_patch: 28\n")
TEXT = write("tiny-text.yaml", TINY % "")


def sim(profile, rate):
    return Sim("--profile", profile, "--speed", "200", "--set", "quality.error_rate=%g" % rate,
               trace=False)


def qualify(url, *args, timeout=120):
    js = os.path.join(TMP, "q%d.json" % len(os.listdir(TMP)))
    p = subprocess.run([SERVETUNE, "qualify", "--url", url, "--json", js, "--quiet"] +
                       [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    doc = json.load(open(js)) if os.path.exists(js) else None
    return p, doc, js


def statuses(doc):
    return {ch["name"]: ch["status"] for ch in doc["checks"]}


# ---- screening at error rate 0: every check passes; the run says it was the sim ----
out = os.path.join(TMP, "runs", "q1")
with sim(VL, 0) as s:
    p, base, base_path = qualify(s.url, "--suite", "screening", "--out", out)
c.check(p.returncode == 0, "screening at rate 0: rc %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
c.check(base is not None and base["sim"] is True and base["passed"] == base["total"] == 10,
        "10/10 passed: %r" % (base and statuses(base)))
c.check(base is not None and [ch["name"] for ch in base["checks"]] == SCREENING,
        "the screening checks in order")
c.check(base is not None and all(ch["evidence"] for ch in base["checks"]), "evidence for each")
c.check("SIMULATED" in p.stdout and "10/10 passed" in p.stdout, "table: %r" % p.stdout)
c.check(os.path.exists(os.path.join(out, "qualify.json")) and
        os.path.exists(os.path.join(out, "table.txt")), "--out keeps the JSON and the table")
rec = [json.loads(l) for l in open(os.path.join(out, "receipts.jsonl"))]
# 1 request per check, except queued (twice the sim's slots, at least 8) and throughput (9).
nreq = {ch["name"]: ch["requests"] for ch in base["checks"]} if base else {}
c.check(len(rec) == sum(nreq.values()) and nreq.get("queued", 0) >= 8 and
        nreq.get("throughput-categories") == 9, "one receipt per request: %d %r" % (len(rec), nreq))
c.check(all(r["http_status"] == 200 and r["verdict"] == "pass" for r in rec), "receipts pass")
lr = [r for r in rec if r["check"] == "long-retrieval"]
c.check(base and base["chars_per_token"] == 4 and "tokenize" in base["chars_per_token_source"] and
        lr and 0.84 * 32768 < lr[0]["prompt_tokens"] < 0.87 * 32768,
        "long-retrieval near the context, measured by the tokenize route: %r"
        % (lr and lr[0]["prompt_tokens"]))
tpr = [r for r in rec if r["check"] == "throughput-categories"]
c.check(len(tpr) == 9 and all(r["completion_tokens"] == 2048 and r["finish_reason"] == "length"
                              and r["reply"] for r in tpr), "throughput: streamed 2048 tokens each")
tp = [ch for ch in base["checks"] if ch["name"] == "throughput-categories"][0] if base else {}
c.check(set(tp.get("median_tokens_per_s", {})) == {"code", "chinese", "reasoning"},
        "throughput medians per category: %r" % tp)

# ---- error rate 1: the expected failures, and the regression against the baseline ----
with sim(VL, 1) as s:
    p, arm, _ = qualify(s.url, "--suite", "screening", "--compare", base_path)
    p2, arm2, _ = qualify(s.url, "--suite", "quality")
c.check(p.returncode == 1, "rate 1: rc %d %s" % (p.returncode, p.stderr))
st = statuses(arm) if arm else {}
c.check(all(st.get(n) == "fail" for n in SCREENING if n != "throughput-categories") and
        st.get("throughput-categories") == "pass", "rate 1: every verified check fails: %r" % st)
cmp = arm.get("compare", {}) if arm else {}
c.check(cmp.get("regressions") == 9 and cmp.get("verdict") == "regressed" and
        {r["name"] for r in cmp.get("regressed", [])} == set(SCREENING) - {"throughput-categories"},
        "9 regressions: %r" % cmp)
c.check("REGRESSED arithmetic" in p.stdout, "the table names the regressions")
c.check(p2.returncode == 1 and arm2 and arm2["passed"] == 0 and arm2["total"] == 7,
        "quality at rate 1: 0/7 (%r)" % (arm2 and statuses(arm2)))

# ---- the baseline against itself: no regression; quality 7/7 with reasoning_effort ----
with sim(VL, 0) as s:
    p, same, _ = qualify(s.url, "--suite", "screening", "--compare", base_path)
    p2, q, _ = qualify(s.url, "--suite", "quality", "--reasoning-effort", "medium")
    p3, other, _ = qualify(s.url, "--suite", "screening", "--seed", "2", "--compare", base_path)
c.check(p.returncode == 0 and same and same["compare"]["regressions"] == 0 and
        same["compare"]["verdict"] == "no-regression", "no regression against itself")
c.check(p2.returncode == 0 and q and q["passed"] == 7 and q["total"] == 7 and
        q.get("reasoning_effort") == "medium", "quality 7/7: %r %s" % (q and statuses(q), p2.stderr))
c.check(p3.returncode == 2 and "same seed" in p3.stderr, "compare across seeds refused: %r"
        % p3.stderr)

# ---- error rate 0.5: the same seeds give the same staged answers on two sims ----
with sim(VL, 0.5) as s:
    p, half1, half_path = qualify(s.url, "--suite", "quality")
with sim(VL, 0.5) as s:
    p2, half2, _ = qualify(s.url, "--suite", "quality", "--compare", half_path)
c.check(half1 and half2 and statuses(half1) == statuses(half2) and
        0 < half1["passed"] < 7 and half2["compare"]["regressions"] == 0,
        "rate 0.5: repeatable per seed, some pass and some fail: %r %r"
        % (half1 and statuses(half1), half2 and statuses(half2)))

# ---- --repeat: each check runs on seeds SEED..SEED+N-1 and passes only when every run does ----
with sim(VL, 0.5) as s:
    p, rep1, rep_path = qualify(s.url, "--suite", "quality", "--repeat", "3")
    p2, rep2, _ = qualify(s.url, "--suite", "quality", "--repeat", "3", "--compare", rep_path)
    p3, _, _ = qualify(s.url, "--suite", "quality", "--compare", rep_path)
ok = rep1 and rep1["repeat"] == 3 and all(ch["runs"] == 3 and ch["requests"] == 3 and
                                          (ch["status"] == "pass") == (ch["runs_passed"] == 3)
                                          for ch in rep1["checks"])
c.check(ok and any(0 < ch["runs_passed"] < 3 for ch in rep1["checks"]) and
        statuses(rep1) == statuses(rep2) and rep2["compare"]["regressions"] == 0,
        "--repeat 3 at rate 0.5: %r" % (rep1 and [(ch["name"], ch["runs_passed"])
                                                  for ch in rep1["checks"]]))
c.check(p3.returncode == 2 and "same repeat" in p3.stderr, "compare across repeats refused: %r"
        % p3.stderr)

# ---- a text-only server: media checks are unsupported, with its message ----
with sim(TEXT, 0) as s:
    p, doc, _ = qualify(s.url, "--suite", "screening")
st = statuses(doc) if doc else {}
c.check(all(st.get(n) == "unsupported" for n in MEDIA), "media unsupported: %r" % st)
c.check(all(st.get(n) == "pass" for n in SCREENING if n not in MEDIA), "the rest pass: %r" % st)
ev = [ch["evidence"] for ch in doc["checks"] if ch["name"] == "ocr"][0] if doc else ""
c.check("does not accept images" in ev, "the server's message kept: %r" % ev)
c.check(p.returncode == 0 and doc["unsupported"] == 4, "unsupported is not failed: rc %d"
        % p.returncode)
with sim(TEXT, 0) as s:
    p, doc, _ = qualify(s.url, "--suite", "screening", "--compare", base_path)
c.check(p.returncode == 1 and doc and doc["compare"]["regressions"] == 4 and
        {r["name"]: r["arm"] for r in doc["compare"]["regressed"]} == {n: "unsupported" for n in MEDIA},
        "vision turned off regresses against a baseline that passed: %r" % (doc and doc["compare"]))

# ---- a text-only llama.cpp (b4748's answer): an image part is an HTTP 500 server_error naming
# the content part type and echoing the request over many lines; the media checks are
# unsupported, the run exits 0, and the evidence stays one line (table.txt a line per check) ----
with Sim("--profile", TEXT, "--speed", "200", "--dialect", "llamacpp", "--set",
         "quality.error_rate=0", trace=False) as s:
    out = os.path.join(TMP, "runs-llamacpp")
    p, doc, _ = qualify(s.url, "--suite", "screening", "--out", out)
st = statuses(doc) if doc else {}
c.check(all(st.get(n) == "unsupported" for n in MEDIA) and
        all(st.get(n) == "pass" for n in SCREENING if n not in MEDIA),
        "llamacpp 500 for media: unsupported, the rest pass: %r %s" % (st, p.stderr[-500:]))
c.check(p.returncode == 0 and doc and doc["unsupported"] == 4 and doc["failed"] == 0,
        "a text-only llama.cpp exits 0: rc %d" % p.returncode)
ev = [ch["evidence"] for ch in doc["checks"] if ch["name"] == "ocr"][0] if doc else ""
c.check("HTTP 500" in ev and 'Unsupported content part type: "image_url"' in ev and
        "\n" not in ev and "  " not in ev, "one-line evidence with the server's words: %r" % ev)
rows = open(os.path.join(out, "table.txt")).read().splitlines() if doc else []
# suite line, SIMULATED line, the header, one row per check, the totals.
c.check(len(rows) == 3 + len(SCREENING) + 1 and rows[-1] == "6/10 passed, 4 unsupported",
        "table.txt: one line per check: %d lines %r" % (len(rows), rows[-1:]))
rcpts = [json.loads(l) for l in open(os.path.join(out, "receipts.jsonl"))] if doc else []
media_r = [r for r in rcpts if r["check"] in MEDIA]
c.check(media_r and all(r["http_status"] == 500 and r["verdict"] == "unsupported" and
                        "\n" not in r["evidence"] and "\n" not in r.get("error", "")
                        for r in media_r),
        "media receipts: 500, unsupported, one-line evidence: %r"
        % [(r["check"], r["http_status"], r["verdict"]) for r in media_r])

# ---- the fixed-mode sim ignores X-Servetune-Expect, and the output says so ----
with Sim(trace=False) as s:
    p, doc, _ = qualify(s.url, "--suite", "quality")
c.check(p.returncode == 1 and doc and doc["sim"] is True and "fixed mode" in doc["sim_note"] and
        "fixed mode" in p.stdout, "fixed-mode sim: %r" % (doc and doc.get("sim_note")))

# ---- user suites and bad input ----
mine = write("my-checks.yaml", "suite: mine\nchecks: [arithmetic]\nquestions:\n"
             "  - name: cap\n    prompt: capital of France?\n    verify: exact\n"
             "    answer: Paris\n")
with sim(VL, 0) as s:
    p, doc, _ = qualify(s.url, "--suite", mine)
c.check(p.returncode == 0 and doc and doc["suite"] == "mine" and doc["passed"] == 2,
        "a user suite: %r %s" % (doc, p.stderr))
bad = write("bad.yaml", "questions:\n  - name: a\n    prompt: hi\n    verify: fuzzy\n"
            "    answer: x\n")
p, doc, _ = qualify("http://127.0.0.1:9", "--suite", bad)
c.check(p.returncode == 2 and bad + ":4: unknown verifier" in p.stderr and doc is None,
        "bad suite: exit 2, file:line: %r" % p.stderr)
bads = write("bads.yaml", "questions:\n  - name: a\n    prompt: hi\n    verify: schema\n"
             "    expect: '{}'\n    schema: '{\"type\": \"objekt\"}'\n")
p, _, _ = qualify("http://127.0.0.1:9", "--suite", bads)
c.check(p.returncode == 2 and bads + ":6: bad schema" in p.stderr, "bad schema: %r" % p.stderr)
p, _, _ = qualify("http://127.0.0.1:9", "--suite", "nosuch")
c.check(p.returncode == 2 and "no suite" in p.stderr, "unknown suite name: %r" % p.stderr)

c.close()
