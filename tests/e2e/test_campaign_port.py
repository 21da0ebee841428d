"""A command campaign owns base_url's port (docs/campaign-targets.md, "The port"): the
simulator, started by the plan's start command on a fixed free port, is the server.

1. Port taken: a listener of this test's own with SO_REUSEPORT (as llama-server binds, so a bind
   test would not see it), then a second simulator, hold the port: the campaign refuses before
   any load, exit 2, naming the owner's pid and command name; nothing was started or sent.
2. After the owner is gone, `resume` completes; the starting state says a server ran, so the
   restore leaves the baseline running (final-state.json names its process group).
3. Restore to "nothing running": a campaign on a free port ends with nothing listening on it and
   final-state.json's `port_free` check says what it checked.
4. Ctrl-C then `resume`, on both starting states: after the Ctrl-C the restore left the port as
   found (free, or the baseline running and journaled as `server_left`); the resume stops that
   server before its first bring-up and decides as the uninterrupted campaign did.
Loopback only, bounded in time; every process started here is stopped by its pid."""
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_port")
TMP = cl.tmpdir("st-port-")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")
SPEED = "100"
EXE = os.path.realpath(SERVETUNE)
BENCH = "{id: dec, kind: bench, output_tokens: 64, concurrency: [2], repeats: 2}"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def plan(port, name):
    start = ("exec %s sim --profile %s --speed %s --set engine.startup_s=1 "
             "--set engine.mem_fraction={mem} --listen 127.0.0.1:{port}" % (EXE, PROFILE, SPEED))
    return """name: %s
target:
  kind: command
  start: %s
  base_url: http://127.0.0.1:%d
  health_url: http://127.0.0.1:%d/health
  health_timeout_s: 20
  stop_timeout_s: 10
baseline: {port: %d, mem: 0.985}
arms:
  - name: control
    set: {mem: 0.99}
  - name: third
    set: {mem: 0.98}
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - %s
  full:
    - %s
rules:
  noise: 0.05
  metrics:
    - {metric: dec.decode_tps}
""" % (name, start, port, port, port, BENCH, BENCH)


def listening(port):
    """LISTEN sockets on port in /proc/net/tcp{,6}."""
    n = 0
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            parts = ln.split()
            if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[3] == "0A":
                n += 1
    return n


def answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def servers_on(port):
    """servetune processes whose command line names the port (the campaign's servers)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith(EXE + " sim") and ("127.0.0.1:%d" % port) in cmd:
            found.append(int(pid))
    return found


def stop_group(pgid):
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)


def cleanup(label, port):
    left = servers_on(port)
    c.check(not left, "%s: no server of the campaign left on port %d: %r" % (label, port, left))
    for pid in left:
        os.kill(pid, signal.SIGKILL)


def decisions(out):
    """What an interruption must not change (test_campaign_resume.py's shape)."""
    s = cl.summary(out)
    return {
        "complete": s["complete"], "chosen": s["chosen"], "restored": s["restored"],
        "arms": [(a["name"], a["verdict"], a["on"], a["failure"] and a["failure"]["kind"],
                  sorted((g["stage"], g["name"], g["passed"]) for g in a["gates"]))
                 for a in s["arms"]],
        "metrics": sorted((m["stage"], m["arm"], m["metric"], m["n"]) for m in s["metrics"]),
    }


def records(out):
    return [(k, o) for _, k, o in cl.journal(out)]


def check_names(out):
    fs = cl.load(os.path.join(out, "final-state.json"))
    return fs, {x["name"]: x for x in fs.get("checks", [])}


def interrupt(label, out, args, log):
    """Starts campaign ARGS, sends SIGINT once the arm `control` is up; returns the exit code."""
    p = cl.start(*args, log=log)
    end = time.monotonic() + 60
    while time.monotonic() < end and p.poll() is None:
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        if "control: up in" in text:
            break
        time.sleep(0.05)
    c.check(p.poll() is None, "%s: the campaign still runs when control is up" % label)
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    try:
        return p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def occupied_run(label, port, occupier, want_pid, want_comm):
    """campaign run onto a port that occupier holds: refused, owner named, nothing started."""
    d = os.path.join(TMP, label)
    os.makedirs(d)
    pl = cl.write(d, "plan.yaml", plan(port, label))
    out = os.path.join(d, "audit")
    t0 = time.monotonic()
    r = cl.campaign("run", pl, "--out", out, "--sim-speed", SPEED, "--nvidia-smi", "",
                    timeout=120)
    secs = time.monotonic() - t0
    print("%s: exit %d in %.1f s: %s" % (label, r.returncode, secs, r.stderr.strip()[-400:]))
    c.check(r.returncode == 2, "%s: exit 2 (refused), got %d" % (label, r.returncode))
    c.check("pid %d (%s)" % (want_pid, want_comm) in r.stderr and "taken" in r.stderr,
            "%s: the refusal names the owner pid %d (%s): %r" % (label, want_pid, want_comm,
                                                                  r.stderr[-800:]))
    c.check("resume" in r.stderr, "%s: it says how to go on: %r" % (label, r.stderr[-400:]))
    recs = records(out)
    kinds = [k for k, _ in recs]
    c.check("arm_up" not in kinds and "receipts" not in kinds,
            "%s: no arm came up and nothing was sent: %r" % (label, kinds))
    state = [o for k, o in recs if k == "unit_end" and o["unit"] == "state"]
    st = state[0]["result"] if state else {}
    c.check(st.get("running") is True and st.get("port", {}).get("pid") == want_pid,
            "%s: the starting state says a server ran on the port, and which: %r" %
            (label, st.get("port")))
    mine = [p for p in servers_on(port) if p != want_pid]
    c.check(not mine, "%s: no server of the campaign runs: %r" % (label, mine))
    return out


# ---- 1. the port taken: a SO_REUSEPORT listener of ours, then another simulator ----

port = free_port()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)
probe = socket.socket()
probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
try:
    probe.bind(("127.0.0.1", port))
    reuse_binds = True
except OSError:
    reuse_binds = False
probe.close()
c.check(reuse_binds, "staging: a second SO_REUSEPORT bind succeeds beside the listener (a bind "
        "test alone would call the port free)")
comm = open("/proc/self/comm").read().strip()
occupied_run("reuseport", port, ls, os.getpid(), comm)
ls.close()
cleanup("reuseport", port)

port = free_port()
occ = subprocess.Popen([EXE, "sim", "--listen", "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
end = time.monotonic() + 10
while time.monotonic() < end and not answers(port):
    time.sleep(0.05)
taken_out = occupied_run("sim-taken", port, occ, occ.pid, "servetune")
occ.terminate()
occ.wait(timeout=10)

# ---- 2. owner gone: resume completes; the restore leaves the baseline running, as found ----

r = cl.campaign("resume", taken_out, timeout=300)
print("sim-taken resume: exit %d" % r.returncode)
c.check(r.returncode == 0, "resume after the port is freed completes: %d %s" %
        (r.returncode, r.stderr[-1200:]))
if os.path.exists(os.path.join(taken_out, "final-state.json")):
    fs, checks = check_names(taken_out)
    c.check(fs.get("restored") is True and fs.get("left_running") is True and
            "baseline_up" in checks and "port_free" not in checks,
            "running at the start: the restore leaves the baseline running: %r" % fs.get("checks"))
    ref_running = decisions(taken_out)
    pg = int(fs.get("pgid") or 0)
    c.check(pg > 1 and answers(port), "the restored baseline (group %d) answers on %d" % (pg, port))
    if pg > 1:
        stop_group(pg)
else:
    ref_running = None
cl.check_archive(c, taken_out, "sim-taken")
cleanup("sim-taken", port)

# ---- 3. restore to "nothing running" leaves nothing running ----

port = free_port()
d = os.path.join(TMP, "free")
os.makedirs(d)
free_plan = cl.write(d, "plan.yaml", plan(port, "free"))
free_out = os.path.join(d, "audit")
r = cl.campaign("run", free_plan, "--out", free_out, "--sim-speed", SPEED, "--nvidia-smi", "",
                timeout=300)
print("free: exit %d" % r.returncode)
c.check(r.returncode == 0, "free port: the campaign completes, restore proven: %d %s" %
        (r.returncode, r.stderr[-1200:]))
time.sleep(0.2)
c.check(listening(port) == 0 and not answers(port),
        "after the restore to nothing running nothing listens on %d (%d listeners) or answers" %
        (port, listening(port)))
ref_free = None
if os.path.exists(os.path.join(free_out, "final-state.json")):
    fs, checks = check_names(free_out)
    pf = checks.get("port_free", {})
    c.check(fs.get("restored") is True and fs.get("left_running") is False and
            checks.get("baseline_up", {}).get("ok") and checks.get("baseline_stopped", {}).get("ok")
            and pf.get("ok") and "/proc/net/tcp" in pf.get("detail", "") and
            "connect" in pf.get("detail", ""),
            "final-state: baseline up, stopped, port free with what was checked: %r" %
            fs.get("checks"))
    ref_free = decisions(free_out)
c.check("restore: proven" in r.stdout and "port_free" in r.stdout,
        "the verdict table says what the restore checked: %r" % r.stdout[-400:])
cl.check_archive(c, free_out, "free")
cleanup("free", port)

# ---- 4a. Ctrl-C then resume, nothing running at the start ----

port = free_port()
d = os.path.join(TMP, "int-free")
os.makedirs(d)
pl = cl.write(d, "plan.yaml", plan(port, "free"))
out = os.path.join(d, "audit")
rc = interrupt("int-free", out, ["run", pl, "--out", out, "--sim-speed", SPEED, "--nvidia-smi",
                                 ""], os.path.join(d, "run.log"))
c.check(rc == 130, "int-free: Ctrl-C exits 130: %r" % rc)
c.check(listening(port) == 0 and not answers(port) and not servers_on(port),
        "int-free: after the Ctrl-C the port is free again, as found")
r = cl.campaign("resume", out, timeout=300)
c.check(r.returncode == 0, "int-free: resume completes: %d %s" % (r.returncode, r.stderr[-800:]))
if os.path.exists(os.path.join(out, "summary.json")) and ref_free:
    c.check(decisions(out) == ref_free, "int-free: the resumed campaign decides as the "
            "uninterrupted one: %r vs %r" % (decisions(out), ref_free))
cl.check_archive(c, out, "int-free")
cleanup("int-free", port)

# ---- 4b. Ctrl-C then resume, a server running at the start ----

port = free_port()
d = os.path.join(TMP, "int-running")
os.makedirs(d)
pl = cl.write(d, "plan.yaml", plan(port, "sim-taken"))
out = os.path.join(d, "audit")
occ = subprocess.Popen([EXE, "sim", "--listen", "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
end = time.monotonic() + 10
while time.monotonic() < end and not answers(port):
    time.sleep(0.05)
r = cl.campaign("run", pl, "--out", out, "--sim-speed", SPEED, "--nvidia-smi", "", timeout=120)
c.check(r.returncode == 2, "int-running: refused while the port is taken: %d" % r.returncode)
occ.terminate()
occ.wait(timeout=10)
rc = interrupt("int-running", out, ["resume", out], os.path.join(d, "resume1.log"))
c.check(rc == 130, "int-running: Ctrl-C exits 130: %r" % rc)
left = [o for k, o in records(out) if k == "server_left"]
lpg = int(left[-1]["evidence"].get("pgid", 0)) if left else 0
c.check(lpg > 1 and answers(port), "int-running: the interrupted restore left the baseline "
        "running (as found) and journaled it: %r" % [k for k, _ in records(out)][-6:])
r = cl.campaign("resume", out, timeout=300)
c.check(r.returncode == 0, "int-running: resume completes: %d %s" % (r.returncode,
                                                                     r.stderr[-800:]))
c.check("stopped the server process group %d" % lpg in r.stderr,
        "int-running: the resume stopped the leftover group %d first: %r" % (lpg, r.stderr[:800]))
stopped = [o for k, o in records(out) if k == "leftover_stopped"]
c.check(stopped and stopped[-1].get("pgid") == lpg and stopped[-1].get("how") == "signal",
        "int-running: journal leftover_stopped for group %d: %r" % (lpg, stopped))
ups = [o for k, o in records(out) if k in ("arm_up", "arm_reup")]
c.check(ups and all(not o["evidence"].get("port", {}).get("taken") for o in ups),
        "int-running: every bring-up found the port free")
if os.path.exists(os.path.join(out, "summary.json")) and ref_running:
    c.check(decisions(out) == ref_running, "int-running: the resumed campaign decides as the "
            "one resumed without interruption: %r vs %r" % (decisions(out), ref_running))
cl.check_archive(c, out, "int-running")
if os.path.exists(os.path.join(out, "final-state.json")):
    pg = int(cl.load(os.path.join(out, "final-state.json")).get("pgid") or 0)
    if pg > 1:
        stop_group(pg)
cleanup("int-running", port)
c.close()
