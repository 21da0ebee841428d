"""A whole campaign against a Docker Compose deployment, driven through the fake docker CLI
(tests/support/fake-docker: no Docker engine here; docs/campaign-compose.md). The deployment runs
with restart policy unless-stopped; during the campaign each arm's container runs with restart
"no" and an override file, never an edited compose file; at the end the original service is
back, healthy, with unless-stopped, OOMKilled false and the files' hashes unchanged, proven in
final-state.json. A compose file edited during the campaign makes the restore unprovable: the
run says so and exits 1."""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import Checker  # noqa: E402
import camplib as cl  # noqa: E402

c = Checker("campaign_compose")
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "fake-docker")
PROFILE = os.path.join(cl.PROFILES, "seed000-vl-mtp.yaml")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


COMPOSE = """services:
  vlm:
    image: servetune/sim
    restart: unless-stopped
    command: ["serve", "/models/vl", "--num-speculative-tokens", "2",
              "--cuda-graph-sizes", "1", "3", "--max-num-batched-tokens", "2048", "--port", "8000"]
    env_file: vlm.env
    environment:
      SIM_PROFILE: %s
      SIM_PORT: "%d"
      SIM_SPEED: "100"
"""

PLAN = """name: compose
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
fixed:
  model_revision: 918b78a
arms:
  - name: mtp1
    set: {num_speculative_tokens: 1, cuda_graph_sizes: [1, 2]}
    multi_variable: true
stages:
  full_min_output_tokens: 0
  full_min_soak_s: 0
  screening:
    - {id: dec, kind: bench, output_tokens: 1024, categories: [code], repeats: 3}
  full:
    - {id: dec, kind: bench, output_tokens: 1024, categories: [code], repeats: 3}
rules:
  metrics:
    - {metric: dec.decode_tps@code}
"""


def deploy(d, port):
    cl.write(d, "docker-compose.yml", COMPOSE % (PROFILE, port))
    cl.write(d, "vlm.env", "HF_TOKEN=not-a-real-token\n")
    plan = cl.write(d, "plan.yaml", PLAN % (port, port))
    state = os.path.join(d, "docker-state")
    os.makedirs(state)
    env = dict(os.environ, FAKE_DOCKER_STATE=state, SERVETUNE=os.path.realpath(cl.SERVETUNE))
    compose = ["-f", os.path.join(d, "docker-compose.yml")]
    # The deployment as it runs before the campaign (like seed 000's).
    r = subprocess.run([FAKE, "compose"] + compose + ["up", "-d", "--force-recreate", "vlm"],
                       env=env, capture_output=True, text=True, timeout=60)
    c.check(r.returncode == 0, "the deployment comes up: %r" % r.stderr)
    return plan, env, compose


def inspect(env, compose):
    cid = subprocess.run([FAKE, "compose"] + compose + ["ps", "-a", "-q", "vlm"], env=env,
                         capture_output=True, text=True, timeout=30).stdout.strip()
    out = subprocess.run([FAKE, "inspect", cid], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    return json.loads(out)[0] if out.strip() else {}


def teardown(env, compose):
    subprocess.run([FAKE, "compose"] + compose + ["stop", "-t", "5", "vlm"], env=env,
                   capture_output=True, timeout=60)


# 1. A campaign: mtp1 rejected (slower), the deployment restored and proven.
d = cl.tmpdir()
port = free_port()
plan, env, compose = deploy(d, port)
out = os.path.join(d, "audit")
try:
    p = cl.campaign("run", plan, "--out", out, "--docker", FAKE, "--nvidia-smi", "", env=env,
                    timeout=600)
    c.check(p.returncode == 0, "compose campaign: exit 0: %d\n%s\n%s" %
            (p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
    if os.path.exists(os.path.join(out, "summary.json")):
        s = cl.summary(out)
        m1 = cl.arm(s, "mtp1")
        c.check(s["complete"] and s["chosen"] == "baseline" and s["restored"],
                "complete, baseline kept, restored: %r" % {k: s[k] for k in ("complete", "chosen", "restored")})
        c.check(m1["verdict"] == "reject" and any("decode_tps" in r for r in m1["reasons"]),
                "mtp1 rejected as slower: %r" % m1["reasons"])
        ov = os.path.join(out, "arms", "mtp1", "compose.override.yml")
        text = open(ov).read() if os.path.exists(ov) else ""
        c.check('"--num-speculative-tokens", "1"' in text and 'restart: "no"' in text,
                "the arm ran from an override file with restart no: %r" % text[:400])
        fs = cl.load(os.path.join(out, "final-state.json"))
        names = {ch["name"]: ch["ok"] for ch in fs.get("checks", [])}
        c.check(fs.get("restored") is True and names and all(names.values()),
                "final-state: every check held: %r" % names)
        c.check(any("restart" in n for n in names) and any("sha256" in n or "hash" in n
                                                           for n in names),
                "final-state checks the restart policy and the file hashes: %r" % list(names))
        st = open(os.path.join(out, "state", "start.json")).read()
        c.check("unless-stopped" in st and "docker-compose.yml" in st,
                "the starting state has the restart policy and the compose file")
        c.check("not-a-real-token" not in open(os.path.join(out, "journal.jsonl")).read(),
                "the env file's content is not in the journal")
        cl.check_archive(c, out, "compose")
    i = inspect(env, compose)
    c.check(i.get("HostConfig", {}).get("RestartPolicy", {}).get("Name") == "unless-stopped"
            and i.get("State", {}).get("Running") is True and not i["State"].get("OOMKilled"),
            "after the campaign the service runs with unless-stopped: %r" % i.get("State"))
    cmd = i.get("Config", {}).get("Cmd") or []
    c.check("--num-speculative-tokens" in cmd and cmd[cmd.index("--num-speculative-tokens") + 1]
            == "2", "the restored service runs the baseline's command: %r" % cmd)
finally:
    teardown(env, compose)

# 2. The compose file edited while the campaign runs: the restore cannot be proven, exit 1.
d = cl.tmpdir()
port = free_port()
plan, env, compose = deploy(d, port)
out = os.path.join(d, "audit")
try:
    proc = subprocess.Popen([cl.SERVETUNE, "campaign", "run", plan, "--out", out, "--docker",
                             FAKE, "--nvidia-smi", ""], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    jpath = os.path.join(out, "journal.jsonl")
    edited = False
    end = time.monotonic() + 120
    while time.monotonic() < end and proc.poll() is None:
        if os.path.exists(jpath) and '"unit":"screening/mtp1/up"' in open(jpath).read():
            with open(os.path.join(d, "docker-compose.yml"), "a") as f:
                f.write("# edited by hand during the campaign\n")
            edited = True
            break
        time.sleep(0.05)
    so, se = proc.communicate(timeout=300)
    c.check(edited, "the compose file was edited mid-campaign")
    c.check(proc.returncode == 1 and "NOT PROVEN" in so and "could not be proven" in se,
            "an unprovable restore exits 1 and says so: %d\n%s\n%s" % (proc.returncode, so[-800:],
                                                                      se[-800:]))
    if os.path.exists(os.path.join(out, "final-state.json")):
        fs = cl.load(os.path.join(out, "final-state.json"))
        bad = [ch["name"] for ch in fs.get("checks", []) if not ch["ok"]]
        c.check(fs.get("restored") is False and bad and all("sha256" in b or "hash" in b
                                                            for b in bad),
                "final-state: restored false, only the file hash failed: %r" % bad)
        c.check(cl.summary(out)["restored"] is False, "summary.json restored false")
finally:
    teardown(env, compose)
c.close()
