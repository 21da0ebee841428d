#!/usr/bin/env python3
"""scripts/walls.py catches what it exists for: a planted upward call and a planted upward
#include fail it, so do a libc call a pure module may not make and a src/ directory the table
does not name, and the real tree passes. scripts/file-circles.py finds two files that call each
other (a circle), not one that only calls the other, and none in the real build.

Usage: test_walls.py BUILD_DIR CC   (Meson passes both; suite 'style')

The include check runs on a small synthetic src/ tree; the link check on the real build's
libraries plus one planted archive compiled here (counted as part of src/base or src/stats, as
if its file lived there); the table itself is refused with a circle or an upward edge.
Bounded: five compiles and fourteen checker runs, a few seconds.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WALLS = [sys.executable, os.path.join(ROOT, "scripts", "walls.py")]
failures = []


def walls(*args):
    p = subprocess.run(WALLS + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def expect(name, got, want_rc, want_text=()):
    rc, err = got
    ok = rc == want_rc and all(t in err for t in want_text)
    print(f"{'ok' if ok else 'FAIL'}: {name} (rc {rc})")
    if not ok:
        print(err, end="")
        failures.append(name)


def expect_rc(name, p, want_rc, want_text=()):
    expect(name, (p.returncode, p.stderr + p.stdout), want_rc, want_text)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def planted_archive(tmp, cc, name, code):
    c, o, a = (os.path.join(tmp, name + ext) for ext in (".c", ".o", ".a"))
    write(c, code)
    subprocess.run([cc, "-c", c, "-o", o], check=True, timeout=60)
    subprocess.run(["ar", "rc", a, o], check=True, timeout=60)
    return a


def main():
    build, cc = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="st-walls-") as tmp:
        src = os.path.join(tmp, "src")
        write(os.path.join(src, "base", "buf.h"), "int st_buf_x(void);\n")
        write(os.path.join(src, "campaign", "runner.h"), '#include "base/buf.h"\n')
        write(os.path.join(src, "stats", "hist.c"), '#include "base/buf.h"\n#include <math.h>\n')
        expect("synthetic tree, downward includes", walls("includes", "--src", src), 0)

        write(os.path.join(src, "base", "buf.c"), '#include "base/buf.h"\n'
              '#include "campaign/runner.h" /* planted */\n')
        expect("planted upward include", walls("includes", "--src", src), 1,
               ['src/base/buf.c:2: base (L0) includes "campaign/runner.h" of campaign (L3)'])
        table = os.path.join(tmp, "layers.txt")
        with open(os.path.join(ROOT, "scripts", "layers.txt"), encoding="utf-8") as f:
            write(table, f.read() + "except include src/base/buf.c campaign/runner.h planted\n")
        expect("the same include, listed as an exception",
               walls("includes", "--src", src, "--table", table), 0)
        os.remove(os.path.join(src, "base", "buf.c"))

        write(os.path.join(src, "stats", "hist.c"), "#include <curl/curl.h>\n")
        expect("planted libcurl include in a pure module", walls("includes", "--src", src), 1,
               ["src/stats/hist.c:1: pure module stats (L1) includes <curl/curl.h>"])

        write(os.path.join(src, "newroom", "x.c"), '#include "base/buf.h"\n')
        expect("a src/ directory the table does not name", walls("includes", "--src", src), 1,
               ["src/newroom/x.c: no line in scripts/layers.txt names its directory"])
        os.remove(os.path.join(src, "newroom", "x.c"))

        write(table, "base 0 quiet -\na 1 quiet base b\nb 1 quiet base a\n")
        expect("a circle on one floor in the table", walls("includes", "--table", table), 2,
               ["circle on floor 1: a -> b -> a"])
        write(table, "base 0 quiet -\na 1 quiet base c\nc 2 quiet base\n")
        expect("an upward edge in the table", walls("includes", "--table", table), 2,
               ["a (L1) may not use c (L2): upward"])

        expect("the real tree's includes", walls("includes"), 0)
        expect("the real build's libraries", walls("links", "--build", build), 0)

        up = planted_archive(tmp, cc, "up", "int st_runner_run(void);\nint st_planted(void);\n"
                             "int st_planted(void) { return st_runner_run(); }\n")
        expect("planted upward call", walls("links", "--build", build, "--add", "base=" + up), 1,
               ["base (L0) calls st_runner_run of campaign (L3)"])

        env = planted_archive(tmp, cc, "env", "#include <stdlib.h>\nchar *st_planted_env(void);\n"
                              'char *st_planted_env(void) { return getenv("X"); }\n')
        expect("planted getenv in a pure module",
               walls("links", "--build", build, "--add", "stats=" + env), 1,
               ["pure module stats (L1) calls getenv"])
        # Two files that call each other: a circle; cut one call and it is gone.
        ping = planted_archive(tmp, cc, "ping", "int st_pong(int);\nint st_ping(int);\n"
                               "int st_ping(int n) { return n ? st_pong(n - 1) : 0; }\n")
        pong = planted_archive(tmp, cc, "pong", "int st_ping(int);\nint st_pong(int);\n"
                               "int st_pong(int n) { return n ? st_ping(n - 1) : 1; }\n")
        circ = [os.path.join(ROOT, "scripts", "file-circles.py"), "--objs"]
        p = subprocess.run(circ + [ping[:-2] + ".o", pong[:-2] + ".o"], capture_output=True,
                           text=True, timeout=60)
        expect_rc("two files calling each other", p, 1, ["circle of 2 files"])
        leaf = planted_archive(tmp, cc, "pong", "int st_pong(int);\n"
                               "int st_pong(int n) { return n; }\n")
        p = subprocess.run(circ + [ping[:-2] + ".o", leaf[:-2] + ".o"], capture_output=True,
                           text=True, timeout=60)
        expect_rc("one calling the other only", p, 0)
        p = subprocess.run([os.path.join(ROOT, "scripts", "file-circles.py"), "--build", build],
                           capture_output=True, text=True, timeout=60)
        expect_rc("the real build's files", p, 0)
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
