"""A real Docker Engine of the test's own (issue 14), for the compose backend's e2e tests.

Debian's dockerd (docker.io 20.10) started as root with no firewall rules, no IP forwarding and
no bridge (`--iptables=false --ip-forward=false --bridge=none`: the default mode rewrites the
host's firewall and makes a bridge on a private range), its data root, exec root, socket and
pid file in the test's own folder and its containers under a cgroup parent of its own; compose
files use `network_mode: host`. Images are built offline: `docker import` of a root filesystem
the test assembles (the servetune binary and the libraries `ldd` lists, a static busybox, the
profiles, a start script). Engine.stop() removes every container, stops the daemon by its PID
and removes what it leaves (the `netns/default` mount under the exec root, the cgroup parent),
then says what is still there (nothing, or the test fails). Python 3 standard library only.

The docker CLI is /usr/bin/docker by its full path (another client may come first on PATH) and
the Compose CLI Debian 12's docker-compose 1.29 (v1: containers named PROJECT_SERVICE_1).
Engine.start() raises Unavailable, and the test exits 77 (meson's skip), only when the daemon
cannot start here: not root, no dockerd, or it exits or does not answer within its deadline.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

DOCKERD = "/usr/sbin/dockerd"
DOCKER = "/usr/bin/docker"
COMPOSE = "/usr/bin/docker-compose"
BUSYBOX = "/bin/busybox"
SKIP = 77  # meson: the test was skipped
SIM_IMAGE = "servetune/sim-e2e:1"

SERVE = r"""#!/bin/sh
# The image's entry: vLLM-style flags to `servetune sim` (the flags fake-docker maps too).
set -f
port=8000 alloc=0 sets=""
while [ $# -gt 0 ]; do
  flag=$1; shift; vals=""
  while [ $# -gt 0 ]; do
    case "$1" in -[0-9]*) ;; -*) break ;; esac
    vals="$vals${vals:+,}$1"; shift
  done
  case "$flag" in
    --port) port=$vals ;;
    --alloc-mb) alloc=$vals ;;
    --num-speculative-tokens) sets="$sets --set engine.spec_steps=$vals" ;;
    --cuda-graph-sizes) sets="$sets --set engine.graph_sizes=[$vals]" ;;
    --max-num-batched-tokens) sets="$sets --set engine.max_batched_tokens=$vals" ;;
    *) echo "serve: ignoring $flag $vals" >&2 ;;
  esac
done
if [ "$alloc" -gt 0 ]; then
  echo "serve: allocating $alloc MiB of host memory before the server starts" >&2
  exec dd if=/dev/zero of=/dev/null bs=${alloc}M count=1
fi
exec /bin/servetune sim --profile /profiles/seed000-vl-mtp.yaml --listen 127.0.0.1:$port \
  --speed "${SIM_SPEED:-100}" $sets
"""


class Unavailable(Exception):
    """The engine cannot run here; the message says why."""


def skip(name, why):
    """Prints the reason and exits with meson's skip status."""
    print("%s: SKIP: a Docker Engine cannot start here: %s" % (name, why), flush=True)
    sys.exit(SKIP)


def _mounts_under(root):
    """Mount points under root, deepest (latest) first, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                out.append(point)
    return out[::-1]


def _procs_with(text):
    """PIDs (not ours) whose command line names text."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def _cgroups(parent):
    """Every cgroup folder of parent, in each v1 hierarchy (and v2's), children first."""
    found = []
    base = "/sys/fs/cgroup"
    roots = [base] if os.path.isdir(base) else []
    if roots:
        roots += [os.path.join(base, h) for h in sorted(os.listdir(base))
                  if os.path.isdir(os.path.join(base, h))]
    for r in roots:
        top = os.path.join(r, parent)
        if not os.path.isdir(top):
            continue
        for d, _, _ in os.walk(top, topdown=False):
            found.append(d)
    return found


class Engine:
    """One dockerd in a folder of its own (short: a unix socket path has at most 107 bytes)."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="st-dk-", dir="/tmp")
        self.sock = os.path.join(self.root, "docker.sock")
        self.pidfile = os.path.join(self.root, "docker.pid")
        self.cgroup = "st-e2e-%d" % os.getpid()
        self.proc = None
        self.log_path = os.path.join(self.root, "dockerd.log")
        self.started_s = None

    def env(self, base=None):
        """The environment for docker and compose calls: this engine's socket, /usr/bin first."""
        e = dict(base if base is not None else os.environ)
        e["DOCKER_HOST"] = "unix://" + self.sock
        e["PATH"] = "/usr/bin:/bin:" + e.get("PATH", "")
        e.pop("DOCKER_CONTEXT", None)
        e["DOCKER_CONFIG"] = os.path.join(self.root, "config")  # no user config, no credentials
        return e

    def start(self, timeout=30.0):
        if os.geteuid() != 0:
            raise Unavailable("not root (dockerd needs root)")
        for exe in (DOCKERD, DOCKER, COMPOSE, BUSYBOX):
            if not os.access(exe, os.X_OK):
                raise Unavailable("%s is missing (Debian: docker.io, docker-compose, "
                                  "busybox-static)" % exe)
        t0 = time.monotonic()
        config = os.path.join(self.root, "daemon.json")
        with open(config, "w") as f:
            f.write("{}\n")  # not the host's /etc/docker/daemon.json
        argv = [DOCKERD, "--config-file", config,
                "--iptables=false", "--ip-forward=false", "--bridge=none",
                "--data-root", os.path.join(self.root, "data"),
                "--exec-root", os.path.join(self.root, "exec"),
                "-H", "unix://" + self.sock, "--pidfile", self.pidfile,
                "--cgroup-parent", "/" + self.cgroup]
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()
        end = t0 + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise Unavailable("dockerd exited %d: %s" % (self.proc.returncode,
                                                             self.log_tail()))
            r = self.docker("version", "--format", "{{.Server.Version}}", timeout=10, check=False)
            if r.returncode == 0 and r.stdout.strip():
                self.version = r.stdout.strip()
                self.started_s = time.monotonic() - t0
                return self
            time.sleep(0.1)
        self.stop()
        raise Unavailable("dockerd did not answer within %.0f s: %s" % (timeout, self.log_tail()))

    def log_tail(self, n=5):
        try:
            with open(self.log_path, errors="replace") as f:
                return " | ".join(l.strip() for l in f.readlines()[-n:])
        except OSError:
            return ""

    def docker(self, *args, timeout=60, check=True, **kw):
        r = subprocess.run([DOCKER] + [str(a) for a in args], env=self.env(), capture_output=True,
                           text=True, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError("docker %s: exit %d: %s" % (" ".join(map(str, args)),
                                                          r.returncode, r.stderr.strip()))
        return r

    def compose(self, file, *args, timeout=120, check=True):
        r = subprocess.run([COMPOSE, "-f", file] + [str(a) for a in args], env=self.env(),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("docker-compose %s: exit %d: %s" % (" ".join(map(str, args)),
                                                                  r.returncode, r.stderr.strip()))
        return r

    def inspect(self, cid):
        return json.loads(self.docker("inspect", cid).stdout)[0]

    def import_image(self, rootfs, tag):
        """docker import of the folder rootfs as tag; returns the image id."""
        tar = os.path.join(self.root, "rootfs.tar")
        with tarfile.open(tar, "w") as t:
            for name in sorted(os.listdir(rootfs)):
                t.add(os.path.join(rootfs, name), arcname=name)
        r = self.docker("import", tar, tag, timeout=120)
        os.unlink(tar)
        return r.stdout.strip()

    def stop(self):
        """Removes every container, stops the daemon by PID (SIGTERM, SIGKILL after 20 s), kills
        what of it is left, unmounts and removes its cgroups. Returns what could not be removed
        (empty: nothing left behind)."""
        if self.proc and self.proc.poll() is None:
            r = self.docker("ps", "-a", "-q", timeout=30, check=False)
            ids = r.stdout.split() if r.returncode == 0 else []
            if ids:
                self.docker("rm", "-f", *ids, timeout=60, check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # containerd and its shims name the exec root in their command lines.
        for _ in range(50):
            pids = _procs_with(self.root)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for point in _mounts_under(self.root):
            if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True)
        for d in _cgroups(self.cgroup):
            try:
                os.rmdir(d)
            except OSError:
                pass
        left = ["process %d" % p for p in _procs_with(self.root)]
        left += ["mount %s" % m for m in _mounts_under(self.root)]
        left += ["cgroup %s" % d for d in _cgroups(self.cgroup)]
        if not left:
            shutil.rmtree(self.root, ignore_errors=True)
        return left


def rootfs(dest, servetune, profiles, files=None):
    """Assembles an image's root filesystem in dest: /bin/servetune and every library `ldd`
    lists (at its own path, the loader included), /bin/busybox with links for the applets the
    tests use, /profiles/*.yaml, and files ({path in the image: (text, mode)})."""
    def put(src, path):
        target = os.path.join(dest, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target)

    put(servetune, "/bin/servetune")
    out = subprocess.run(["ldd", servetune], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        words = line.split()
        lib = words[2] if len(words) >= 3 and words[1] == "=>" else words[0]
        if lib.startswith("/"):
            put(os.path.realpath(lib), lib)
    put(BUSYBOX, "/bin/busybox")
    for applet in ("sh", "dd", "sleep", "wget", "cat", "true", "kill", "ps"):
        os.symlink("busybox", os.path.join(dest, "bin", applet))
    for name in sorted(os.listdir(profiles)):
        if name.endswith(".yaml"):
            put(os.path.join(profiles, name), "/profiles/" + name)
    for d in ("etc", "tmp", "proc", "sys", "dev"):
        os.makedirs(os.path.join(dest, d), exist_ok=True)
    for path, (text, mode) in (files or {}).items():
        target = os.path.join(dest, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(text)
        os.chmod(target, mode)
    return dest


def sim_image(eng, dest, servetune, profiles, tag=SIM_IMAGE):
    """The simulator's image: rootfs() with SERVE as /bin/serve (the entry), imported as tag."""
    root = rootfs(dest, os.path.realpath(servetune), profiles, {"/bin/serve": (SERVE, 0o755)})
    return eng.import_image(root, tag)


def main(argv):
    """dockerlib.py exec PROGRAM [ARGS]: runs PROGRAM against an engine of its own with the
    simulator's image, ST_DOCKER (the CLI), DOCKER_HOST and ST_DOCKER_IMAGE set; stops the engine
    and fails when it left anything. Exits with PROGRAM's status, 77 when no engine can start."""
    if len(argv) < 2 or argv[0] != "exec":
        sys.stderr.write("usage: dockerlib.py exec PROGRAM [ARGS]\n")
        return 2
    name = os.path.basename(argv[1])
    eng = Engine()
    try:
        eng.start()
    except Unavailable as e:
        eng.stop()
        skip(name, str(e))
    rc = 1
    try:
        t = time.monotonic()
        work = tempfile.mkdtemp(prefix="st-dkimg-")
        sim_image(eng, os.path.join(work, "rootfs"), os.environ.get("SERVETUNE", "servetune"),
                  os.environ.get("ST_PROFILES") or os.path.join(
                      os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles"))
        shutil.rmtree(work, ignore_errors=True)
        print("dockerd %s up in %.1f s, image in %.1f s" % (eng.version, eng.started_s,
                                                            time.monotonic() - t), flush=True)
        env = eng.env()
        env["ST_DOCKER"] = DOCKER
        env["ST_DOCKER_IMAGE"] = SIM_IMAGE
        rc = subprocess.run(argv[1:], env=env, timeout=280).returncode
    finally:
        left = eng.stop()
        if left:
            print("%s: the engine left %r" % (name, left), flush=True)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
