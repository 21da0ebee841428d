"""Helpers for the campaign e2e tests: run `servetune campaign run|resume`, read an audit
archive (summary.json, final-state.json, journal.jsonl), check a journal's integrity and that
every metric in the summary traces back to receipts. Python 3 standard library only."""
import json
import os
import signal
import subprocess
import tempfile
import time
import zlib

SERVETUNE = os.environ.get("SERVETUNE", "build/servetune")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = os.path.join(ROOT, "profiles")


class Busy:
    """A load generator of the test's own: one busy loop per core (or N), at the same priority as
    the test, for as long as the `with` block runs; each loop ends with the block (and dies with
    this process). The simulator's figures must not notice (docs/sim.md, "Virtual time")."""

    def __init__(self, on=True, n=None):
        self.n = (n or os.cpu_count() or 2) if on else 0
        self.procs = []

    def __enter__(self):
        code = ("import ctypes, os, signal\n"
                "ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
                "while True:\n    pass\n")
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(["python3", "-c", code]))
        if self.procs:
            time.sleep(0.2)  # every loop spinning before the campaign starts
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def tmpdir(prefix="st-camp-"):
    return tempfile.mkdtemp(prefix=prefix)


def write(dir_, name, text):
    path = os.path.join(dir_, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def campaign(*args, timeout=600, env=None):
    """Runs servetune campaign ARGS; returns the CompletedProcess (text)."""
    cmd = [SERVETUNE, "campaign"] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def start(*args, env=None, log=None):
    """Starts servetune campaign ARGS in the background (its own session: a kill -9 of it
    reaches only it); returns the Popen."""
    cmd = [SERVETUNE, "campaign"] + [str(a) for a in args]
    out = open(log, "a") if log else subprocess.DEVNULL
    return subprocess.Popen(cmd, stdout=out, stderr=out, env=env, start_new_session=True)


def load(path):
    with open(path) as f:
        return json.load(f)


def summary(out):
    return load(os.path.join(out, "summary.json"))


def arm(summ, name):
    for a in summ["arms"]:
        if a["name"] == name:
            return a
    return None


def journal(out):
    """The journal's records as (seq, kind, obj) after checking each line's CRC-32C, seq and
    JSON. Raises AssertionError on a bad line."""
    recs = []
    with open(os.path.join(out, "journal.jsonl"), "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    assert lines[-1] == b"", "the journal ends with a newline"
    for i, line in enumerate(lines[:-1]):
        crc, rest = line.split(b" ", 1)
        assert int(crc, 16) == crc32c(rest), "line %d: bad CRC" % (i + 1)
        seq, kind, js = rest.split(b" ", 2)
        assert int(seq) == i, "line %d: seq %s" % (i + 1, seq)
        recs.append((i, kind.decode(), json.loads(js)))
    return recs


_CRC_TABLE = []


def crc32c(data):
    if not _CRC_TABLE:
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC_TABLE.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def live_units(recs):
    """Units as the journal defines them: {unit: (begin_seq, end_record or None)}, the voided
    instances dropped; and the receipts records of each live unit."""
    units, receipts, current = {}, {}, None
    inst = {}
    for seq, kind, obj in recs:
        if kind == "unit_begin":
            current = obj["unit"]
            inst[current] = {"begin": seq, "end": None, "receipts": []}
        elif kind == "unit_end":
            inst[obj["unit"]]["end"] = obj
            units[obj["unit"]] = inst.pop(obj["unit"])
            current = None
        elif kind == "unit_discard":
            inst.pop(obj["unit"], None)
            current = None
        elif kind == "receipts" and current is not None:
            inst[current]["receipts"].append(obj)
    return units


def check_archive(c, out, label):
    """Integrity of an archive: the journal's lines, no unit done twice, every unit's receipts
    journaled exactly once and equal to its files, every summary metric traced to units that
    exist and hold receipts."""
    recs = journal(out)
    ends = [o["unit"] for _, k, o in recs if k == "unit_end"]
    c.check(len(ends) == len(set(ends)), "%s: no unit completed twice: %r" %
            (label, [u for u in set(ends) if ends.count(u) > 1]))
    units = live_units(recs)
    summ = summary(out)
    for u, inst in units.items():
        if u in ("state", "restore") or u.endswith("/up") or u.endswith("/down"):
            continue
        res = inst["end"]["result"]
        journaled = {}
        for r in inst["receipts"]:
            journaled.setdefault(r["file"], []).extend(r["receipts"])
        stage, armname, step, rep = u.split("/")
        udir = os.path.join(out, "arms", armname, stage, step, rep)
        for f in res.get("files", []):
            path = os.path.join(udir, f["file"])
            lines = [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else None
            c.check(lines is not None and len(lines) == f["lines"] ==
                    len(journaled.get(f["file"], [])),
                    "%s: unit %s file %s: %s lines on disk, %s in the result, %d journaled" %
                    (label, u, f["file"], None if lines is None else len(lines), f["lines"],
                     len(journaled.get(f["file"], []))))
    for m in summ["metrics"]:
        for u in m["units"]:
            if u in ("up", "watch"):
                continue
            c.check(u in units, "%s: metric %s of %s traces to unit %s" %
                    (label, m["metric"], m["arm"], u))
    return recs, units
