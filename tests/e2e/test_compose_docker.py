"""A whole campaign against a Docker Compose deployment on a real Docker Engine (issue 14):
Debian's dockerd 20.10 of the test's own (tests/support/dockerlib.py) and docker-compose 1.29
(v1: containers named PROJECT_SERVICE_1). The image is built offline (`docker import` of the
servetune binary, its libraries, busybox and the profiles); its entry /bin/serve turns vLLM-style
flags into `servetune sim` on the host network, and `--alloc-mb N` makes it allocate N MiB
instead, so that the kernel's OOM killer ends it inside its memory limit.

1. The engine's own behaviours the fake CLI lacks, seen through docker: a kernel OOM kill is
   OOMKilled true with exit 137; unless-stopped really restarts a killed server (RestartCount);
   a stopped container still has a health status ("unhealthy", though no probe failed).
2. The deployment runs with unless-stopped; a campaign with arm mtp1 and arm oom (the kernel
   OOM-kills it) runs to its end: oom is rejected with an oom failure (not a crash), every arm ran
   from an override file with restart "no", and the service is back as it was, proven.
3. A deployment that was stopped at the start, and its compose file edited while the campaign
   runs: the restore cannot be proven (exit 1, only the hash fails), and it leaves the service
   stopped as it was found (container_stopped, nothing_answers), not running.
At the end the engine is stopped by PID: no container, process, mount or cgroup is left.
Exit 77 (skip) only when the engine cannot start here (not root, no dockerd)."""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402
import dockerlib as dl  # noqa: E402

if os.environ.get("ST_SANITIZED") == "1":
    # The whole campaign on a real engine runs in the plain build; the sanitizer build runs the
    # compose backend's C driver against the same engine (test_compose_docker_c) and the fake.
    print("compose_docker: skipped in the sanitizer build (runs in the plain build)")
    sys.exit(77)

NAME = "compose_docker"
IMAGE = dl.SIM_IMAGE
T0 = time.monotonic()

COMPOSE = """services:
  vlm:
    image: %s
    network_mode: host
    restart: unless-stopped
    mem_limit: 512m
    env_file: vlm.env
    environment:
      SIM_SPEED: "100"
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:%d/health"]
      interval: 1s
      timeout: 2s
      retries: 2
    command: ["/bin/serve", "--port", "%d", "--alloc-mb", "0", "--num-speculative-tokens", "2",
              "--cuda-graph-sizes", "1", "3", "--max-num-batched-tokens", "2048"]
"""

PLAN = """name: compose-docker
target:
  kind: compose
  compose_file: docker-compose.yml
  service: vlm
  override: command
  base_url: http://127.0.0.1:%d
  health_url: http://127.0.0.1:%d/health
  health_timeout_s: 60
  stop_timeout_s: 10
baseline:
  num_speculative_tokens: 2
  cuda_graph_sizes: [1, 3]
  alloc_mb: 0
fixed:
  model_revision: 918b78a
arms:
%s
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 256, categories: [code], repeats: %d}
  full:
    - {id: dec, kind: bench, output_tokens: 256, categories: [code], repeats: %d}
rules:
  metrics:
    - {metric: dec.decode_tps@code}
  gates:
    oom: true
"""

ARMS = """  - name: mtp1
    set: {num_speculative_tokens: 1, cuda_graph_sizes: [1, 2]}
    multi_variable: true
  - name: oom
    set: {alloc_mb: 1024}
    note: "1 GiB of host memory in a 512 MiB limit, so the kernel's OOM killer ends it"
"""

ARM_ONE = """  - name: mtp1
    set: {num_speculative_tokens: 1, cuda_graph_sizes: [1, 2]}
    multi_variable: true"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait(pred, timeout, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def deploy(eng, d, port):
    """The deployment as it runs before the campaign (docker-compose up -d, as its owner did)."""
    compose = cl.write(d, "docker-compose.yml", COMPOSE % (IMAGE, port, port))
    cl.write(d, "vlm.env", "HF_TOKEN=not-a-real-token\n")
    eng.compose(compose, "up", "-d", "vlm")
    return compose


def container(eng, compose):
    cid = eng.compose(compose, "ps", "-a", "-q", "vlm").stdout.strip()
    return eng.inspect(cid) if cid else {}


def healthy(eng, compose):
    i = container(eng, compose)
    return i if i.get("State", {}).get("Health", {}).get("Status") == "healthy" else None


def engine_facts(c, eng, d):
    """What the real engine does that the fake does not model, seen through docker-compose."""
    f = cl.write(d, "facts.yml", """services:
  oom:
    image: %s
    network_mode: host
    restart: "no"
    mem_limit: 32m
    command: ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]
  loop:
    image: %s
    network_mode: host
    restart: unless-stopped
    command: ["sleep", "600"]
    healthcheck: {test: ["CMD", "true"], interval: 1s, timeout: 1s, retries: 1}
""" % (IMAGE, IMAGE))
    eng.compose(f, "up", "-d", "oom", "loop")
    cid = eng.compose(f, "ps", "-a", "-q", "oom").stdout.strip()
    st = wait(lambda: (lambda s: s if not s["Running"] else None)(eng.inspect(cid)["State"]), 20)
    c.check(st and st["OOMKilled"] is True and st["ExitCode"] == 137,
            "engine: a kernel OOM kill is OOMKilled true, exit 137: %r" % st)
    i = eng.inspect(cid)
    project = i["Config"]["Labels"].get("com.docker.compose.project")
    c.check(project and i["Name"] == "/%s_oom_1" % project and
            i["Config"]["Labels"].get("com.docker.compose.version", "").startswith("1."),
            "v1 names the container PROJECT_SERVICE_1: %s (project %s)" % (i["Name"], project))
    lid = eng.compose(f, "ps", "-a", "-q", "loop").stdout.strip()
    i = wait(lambda: (lambda i: i if i["State"].get("Health", {}).get("Status") == "healthy"
                      else None)(eng.inspect(lid)), 20)
    c.check(i is not None, "engine: the healthcheck says healthy")
    pid = i["State"]["Pid"] if i else 0
    if pid > 1:
        os.kill(pid, 9)
    i = wait(lambda: (lambda i: i if i["RestartCount"] >= 1 and i["State"]["Running"] else None)(
        eng.inspect(lid)), 20)
    c.check(i is not None and i["State"]["Pid"] != pid,
            "engine: unless-stopped restarts a killed server (RestartCount %s)" %
            (i and i["RestartCount"]))
    wait(lambda: eng.inspect(lid)["State"].get("Health", {}).get("Status") == "healthy", 20)
    eng.compose(f, "stop", "-t", "1", "loop")
    # 20.10 keeps a Health object on a stopped container and turns it "unhealthy" at the exit,
    # though no probe failed: not a probe's answer of now (the backend reads it only while the
    # container runs).
    h = eng.inspect(lid)["State"]
    h, running = h.get("Health") or {}, h["Running"]
    c.check(not running and h.get("Status") == "unhealthy" and h.get("FailingStreak") == 0 and
            h.get("Log") and all(p["ExitCode"] == 0 for p in h["Log"]),
            "engine: a stopped container still has a health status, from no probe: %r" % h)
    eng.compose(f, "rm", "-f", "oom", "loop")


def campaign_proven(c, eng, d):
    port = free_port()
    compose = deploy(eng, d, port)
    before = wait(lambda: healthy(eng, compose), 60)
    c.check(before is not None, "the deployment comes up healthy")
    plan = cl.write(d, "plan.yaml", PLAN % (port, port, ARMS, 2, 2))
    out = os.path.join(d, "audit")
    t = time.monotonic()
    p = cl.campaign("run", plan, "--out", out, "--docker", dl.DOCKER, "--nvidia-smi", "",
                    env=eng.env(), timeout=600)
    print("campaign with mtp1 and oom: %.1f s" % (time.monotonic() - t), flush=True)
    c.check(p.returncode == 0, "compose campaign: exit 0: %d\n%s\n%s" %
            (p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
    if not os.path.exists(os.path.join(out, "summary.json")):
        c.check(False, "summary.json written")
        return
    s = cl.summary(out)
    c.check(s["complete"] and s["chosen"] == "baseline" and s["restored"] is True,
            "complete, baseline kept, restored: %r" %
            {k: s[k] for k in ("complete", "chosen", "restored")})
    oom = cl.arm(s, "oom")
    c.check(oom and oom["verdict"] == "reject" and oom["failure"] and
            oom["failure"]["kind"] == "oom", "oom: rejected with an oom failure: %r" % oom)
    if oom and oom["failure"]:
        ev = os.path.join(out, oom["failure"]["evidence"])
        text = open(os.path.join(ev, "failure.json")).read() if os.path.isdir(ev) else ""
        c.check("OOMKilled" in text and "137" in text,
                "the oom failure names OOMKilled and exit code 137: %r" % text[:600])
        c.check(any("memory" in r.lower() or "oom" in r for r in oom["reasons"]),
                "the oom reason names the gate: %r" % oom["reasons"])
    m1 = cl.arm(s, "mtp1")
    c.check(m1 and m1["failure"] is None and m1["decisions"],
            "mtp1 ran and was decided: %r" % m1)
    for arm, want in (("mtp1", '"--num-speculative-tokens", "1"'),
                      ("oom", '"--alloc-mb", "1024"')):
        ov = os.path.join(out, "arms", arm, "compose.override.yml")
        text = open(ov).read() if os.path.exists(ov) else ""
        c.check(want in text and 'restart: "no"' in text,
                "%s ran from an override file with restart no: %r" % (arm, text[:400]))
    fs = cl.load(os.path.join(out, "final-state.json"))
    names = {ch["name"]: ch["ok"] for ch in fs.get("checks", [])}
    c.check(fs.get("restored") is True and names and all(names.values()),
            "final-state: every check held: %r" % names)
    for want in ("restart_policy", "container_running", "oom_killed_false", "image",
                 "container_stable", "healthy"):
        c.check(any(n == want or n.startswith(want) for n in names),
                "final-state checks %s: %r" % (want, list(names)))
    c.check(any(n.startswith("compose_file_sha256") for n in names) and
            any(n.startswith("env_file_sha256") for n in names),
            "final-state checks the compose and env files' hashes: %r" % list(names))
    st = open(os.path.join(out, "state", "start.json")).read()
    c.check("unless-stopped" in st and "docker-compose.yml" in st,
            "the starting state has the restart policy and the compose file")
    j = open(os.path.join(out, "journal.jsonl")).read()
    c.check("not-a-real-token" not in j, "the env file's content is not in the journal")
    c.check('"compose_cli":"/usr/bin/docker-compose"' in j,
            "the backend ran docker-compose v1 next to /usr/bin/docker")
    cl.check_archive(c, out, "compose-docker")
    i = container(eng, compose)
    c.check(i.get("Name", "").endswith("_vlm_1"), "v1's container name: %s" % i.get("Name"))
    c.check(i.get("HostConfig", {}).get("RestartPolicy", {}).get("Name") == "unless-stopped"
            and i.get("State", {}).get("Running") is True and not i["State"].get("OOMKilled"),
            "after the campaign the service runs with unless-stopped: %r" % i.get("State"))
    cmd = i.get("Config", {}).get("Cmd") or []
    c.check("--num-speculative-tokens" in cmd and
            cmd[cmd.index("--num-speculative-tokens") + 1] == "2" and
            cmd[cmd.index("--alloc-mb") + 1] == "0",
            "the restored service runs the baseline's command: %r" % cmd)
    c.check(wait(lambda: healthy(eng, compose), 30) is not None,
            "the restored service is healthy for the engine too")
    eng.compose(compose, "stop", "-t", "5", "vlm")


def campaign_edited(c, eng, d):
    port = free_port()
    compose = deploy(eng, d, port)
    wait(lambda: healthy(eng, compose), 60)
    eng.compose(compose, "stop", "-t", "5", "vlm")  # nothing runs at the start
    plan = cl.write(d, "plan.yaml", PLAN % (port, port, ARM_ONE, 2, 2))
    out = os.path.join(d, "audit")
    proc = subprocess.Popen([cl.SERVETUNE, "campaign", "run", plan, "--out", out, "--docker",
                             dl.DOCKER, "--nvidia-smi", ""], env=eng.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jpath = os.path.join(out, "journal.jsonl")
    edited = False
    end = time.monotonic() + 120
    while time.monotonic() < end and proc.poll() is None:
        if os.path.exists(jpath) and '"unit":"screening/mtp1/up"' in open(jpath).read():
            with open(compose, "a") as f:
                f.write("# edited by hand during the campaign\n")
            edited = True
            break
        time.sleep(0.05)
    try:
        so, se = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        so, se = proc.communicate()
    c.check(edited, "the compose file was edited mid-campaign")
    c.check(proc.returncode == 1 and "NOT PROVEN" in so and "could not be proven" in se,
            "an unprovable restore exits 1 and says so: %d\n%s\n%s" %
            (proc.returncode, so[-800:], se[-800:]))
    if os.path.exists(os.path.join(out, "final-state.json")):
        fs = cl.load(os.path.join(out, "final-state.json"))
        bad = [ch["name"] for ch in fs.get("checks", []) if not ch["ok"]]
        c.check(fs.get("restored") is False and bad and all("sha256" in b for b in bad),
                "final-state: restored false, only the file hash failed: %r" % bad)
        names = {ch["name"]: ch["ok"] for ch in fs.get("checks", [])}
        c.check(names.get("container_stopped") is True and names.get("nothing_answers") is True
                and "healthy" not in names,
                "nothing ran at the start: the restore stops it again: %r" % names)
        st = cl.load(os.path.join(out, "state", "start.json"))
        c.check(st.get("running") is False and st.get("health") == "" and
                st.get("last_health") == "unhealthy",
                "the starting state: not running, its stale health as last_health: %r" %
                {k: st.get(k) for k in ("running", "health", "last_health")})
    i = container(eng, compose)
    c.check(i.get("State", {}).get("Running") is False,
            "after the campaign the service is stopped, as it was: %r" % i.get("State"))
    eng.compose(compose, "stop", "-t", "5", "vlm", check=False)


def main():
    eng = dl.Engine()
    try:
        eng.start()
    except dl.Unavailable as e:
        eng.stop()
        dl.skip(NAME, str(e))
    c = Checker(NAME)
    print("dockerd %s up in %.1f s" % (eng.version, eng.started_s), flush=True)
    dirs = []
    try:
        d = cl.tmpdir("st-dkc-")
        dirs.append(d)
        t = time.monotonic()
        dl.sim_image(eng, os.path.join(d, "rootfs"), cl.SERVETUNE, cl.PROFILES, IMAGE)
        print("image assembled and imported in %.1f s" % (time.monotonic() - t), flush=True)
        for part in (engine_facts, campaign_proven, campaign_edited):
            t = time.monotonic()
            sub = cl.tmpdir("st-dk%s-" % part.__name__[:4])
            dirs.append(sub)
            part(c, eng, sub)
            print("%s: %.1f s" % (part.__name__, time.monotonic() - t), flush=True)
    finally:
        left = eng.stop()
        c.check(not left, "the engine left nothing behind: %r" % left)
        if not os.environ.get("ST_KEEP_TMP"):
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
        print("total %.1f s" % (time.monotonic() - T0), flush=True)
    c.close()


if __name__ == "__main__":
    main()
