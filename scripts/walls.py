#!/usr/bin/env python3
"""The walls between the floors of src/, checked (STYLE.md "Layout", docs/architecture.md).

The table is scripts/layers.txt: each src/ directory's floor, kind and the modules it may use.
Two checks read it; both print one line per breach and exit 1 on any, 2 on a usage or table
error, 0 when the walls hold.

  walls.py includes [--src DIR]
      every #include "dir/x.h" in src/**.[ch] names a module the including file's module may use
      (or its own); a pure module includes no <event2/...> or <curl/...>.
  walls.py links --build DIR [--add MODULE=ARCHIVE]...
      every undefined symbol of a project static library (found in DIR/meson-info/
      intro-targets.json) that another project library defines comes from a module the first
      may use; a pure module calls no clock, file, environment, libevent or libcurl function; no
      module below the CLI prints to stdout or exits. --add counts an extra archive as part of
      MODULE (tests/e2e/test_walls.py plants an upward call that way).

Meson runs both in the style suite, so `make test` fails on a planted upward call or include.
It is not a linker: a symbol nothing in the project defines is external and not checked.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "scripts", "layers.txt")
KINDS = ("pure", "quiet", "top")

# Pure modules (L1) take bytes, time and seeds from their callers.
PURE_BANNED = {
    "clock_gettime", "clock_getres", "gettimeofday", "time", "getenv", "secure_getenv",
    "fopen", "fopen64", "freopen", "open", "open64", "openat", "openat64", "opendir", "stat",
    "stat64", "access", "read", "write", "unlink", "rename", "mkdir", "fork", "execv", "execve",
    "execvp", "socket", "connect",
}
PURE_BANNED_PREFIXES = ("event_", "evhttp_", "evbuffer_", "bufferevent_", "curl_")
PURE_BANNED_INCLUDES = ("event2/", "curl/")
# Below cli/ nothing prints to the user or exits (STYLE.md "Errors").
QUIET_BANNED = {"printf", "vprintf", "puts", "putchar", "stdout", "exit", "perror"}


class TableError(Exception):
    pass


def load_table(path):
    """Returns (modules, exceptions): modules maps a name to (floor, kind, set of uses)."""
    mods, raw_uses, exc = {}, {}, set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            where = f"{path}:{n}"
            if line[0] == "except":
                if len(line) < 5 or line[1] not in ("include", "call", "extern"):
                    raise TableError(f"{where}: expected 'except include|call|extern A B reason'")
                a = line[2][4:] if line[1] == "include" and line[2].startswith("src/") else line[2]
                exc.add((line[1], a, line[3]))
                continue
            if len(line) < 4 or not line[1].isdigit() or line[2] not in KINDS:
                raise TableError(f"{where}: expected 'module floor kind uses...'")
            if line[0] in mods:
                raise TableError(f"{where}: {line[0]} listed twice")
            mods[line[0]] = (int(line[1]), line[2])
            raw_uses[line[0]] = [u for u in line[3:] if u != "-"]
    table = {}
    for m, (floor, kind) in mods.items():
        uses = set()
        for u in raw_uses[m]:
            if u == "lower":
                uses |= {o for o, (of, _) in mods.items() if of < floor}
            elif u not in mods:
                raise TableError(f"{path}: {m} may use {u}, which has no line")
            elif mods[u][0] > floor:
                raise TableError(f"{path}: {m} (L{floor}) may not use {u} (L{mods[u][0]}): upward")
            else:
                uses.add(u)
        table[m] = (floor, kind, uses)
    check_no_circle(table, path)
    return table, exc


def check_no_circle(table, path):
    """Same-floor edges must not form a circle (a circle would be one room in two folders)."""
    state = {}

    def visit(m, trail):
        state[m] = 1
        for u in sorted(table[m][2]):
            if table[u][0] != table[m][0]:
                continue
            if state.get(u) == 1:
                raise TableError(f"{path}: circle on floor {table[m][0]}: "
                                 + " -> ".join(trail + [m, u]))
            if not state.get(u):
                visit(u, trail + [m])
        state[m] = 2

    for m in sorted(table):
        if not state.get(m):
            visit(m, [])


def module_of(rel, table):
    """The module owning src-relative path rel (the longest listed directory prefix), or None."""
    parts = rel.split("/")[:-1]
    for i in range(len(parts), 0, -1):
        cand = "/".join(parts[:i])
        if cand in table:
            return cand
    return None


def allowed(table, frm, to):
    return frm == to or to in table[frm][2]


def label(table, m):
    return f"{m} (L{table[m][0]})"


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def check_includes(src, table, exc):
    breaches = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, src).replace(os.sep, "/")
        if rel_dir == ".":
            continue
        for fn in sorted(filenames):
            if not fn.endswith((".c", ".h")):
                continue
            rel = f"{rel_dir}/{fn}"
            m = module_of(rel, table)
            if m is None:
                breaches.append(f"src/{rel}: no line in scripts/layers.txt names its directory")
                continue
            with open(os.path.join(dirpath, fn), encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
                mt = INCLUDE.match(line)
                if not mt:
                    continue
                quote, hdr = mt.groups()
                if ("include", rel, hdr) in exc:
                    continue
                where = f"src/{rel}:{n}"
                if quote == "<":
                    if table[m][1] == "pure" and hdr.startswith(PURE_BANNED_INCLUDES):
                        breaches.append(f"{where}: pure module {label(table, m)} includes <{hdr}>")
                    continue
                # A quoted include resolves next to the file first, then under src/.
                local = os.path.normpath(os.path.join(rel_dir, hdr)).replace(os.sep, "/")
                if os.path.exists(os.path.join(src, local)) and not local.startswith(".."):
                    target = local
                else:
                    target = os.path.normpath(hdr).replace(os.sep, "/")
                to = module_of(target, table)
                if to is None:
                    if "/" in target:
                        breaches.append(f'{where}: "{hdr}" is in no module of scripts/layers.txt')
                    continue
                if not allowed(table, m, to):
                    breaches.append(f'{where}: {label(table, m)} includes "{hdr}" of '
                                    f"{label(table, to)}, which it may not use")
    return breaches


def nm_symbols(archive):
    """(defined, undefined) global symbol sets of a static library."""
    out = subprocess.run(["nm", "-g", "-P", archive], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2 or f[0].endswith(":"):
            continue  # an archive member's header line
        if f[1] in ("U", "w", "v"):
            undefined.add(f[0])
        else:
            defined.add(f[0])
    return defined, undefined - defined


def project_libraries(build, src_root):
    """[(module path under src/, archive)] from Meson's introspection of the build directory."""
    with open(os.path.join(build, "meson-info", "intro-targets.json"), encoding="utf-8") as f:
        targets = json.load(f)
    with open(os.path.join(build, "meson-info", "meson-info.json"), encoding="utf-8") as f:
        source = json.load(f)["directories"]["source"]
    libs = []
    for t in targets:
        if t.get("type") != "static library":
            continue
        d = os.path.relpath(os.path.dirname(t["defined_in"]), source).replace(os.sep, "/")
        if not d.startswith(src_root + "/"):
            continue  # tests', fuzzers' and benchmarks' helpers are not floors
        for fn in t["filename"]:
            libs.append((d[len(src_root) + 1:] + "/x", t["name"], fn))
    return libs


def check_links(build, adds, table, exc):
    breaches = []
    libs = []  # (module, library name, archive)
    for rel, name, fn in project_libraries(build, "src"):
        m = module_of(rel, table)
        if m is None:
            breaches.append(f"{name}: src/{rel[:-2]} has no line in scripts/layers.txt")
            continue
        libs.append((m, name, fn))
    for a in adds:
        m, _, fn = a.partition("=")
        if m not in table or not fn:
            raise TableError(f"--add {a}: expected MODULE=ARCHIVE with a module of the table")
        libs.append((m, os.path.basename(fn), fn))
    syms = {fn: nm_symbols(fn) for _, _, fn in libs}
    provider = {}  # symbol -> set of modules defining it
    for m, _, fn in libs:
        for s in syms[fn][0]:
            provider.setdefault(s, set()).add(m)
    for s, ms in sorted(provider.items()):
        if len(ms) > 1:
            breaches.append(f"{s}: defined in several modules: {', '.join(sorted(ms))}")
    for m, name, fn in libs:
        floor, kind, _ = table[m]
        for s in sorted(syms[fn][1]):
            for to in sorted(provider.get(s, ())):
                if not allowed(table, m, to) and ("call", m, s) not in exc:
                    breaches.append(f"{name}: {label(table, m)} calls {s} of "
                                    f"{label(table, to)}, which it may not use")
            if s in provider or ("extern", m, s) in exc:
                continue
            if kind == "pure" and (s in PURE_BANNED or s.startswith(PURE_BANNED_PREFIXES)):
                breaches.append(f"{name}: pure module {label(table, m)} calls {s}")
            elif kind != "top" and s in QUIET_BANNED:
                breaches.append(f"{name}: {label(table, m)} calls {s}: only cli/ prints or exits")
    return breaches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("check", choices=("includes", "links"))
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--build")
    ap.add_argument("--add", action="append", default=[])
    ap.add_argument("--table", default=TABLE)
    a = ap.parse_args()
    try:
        table, exc = load_table(a.table)
        if a.check == "includes":
            breaches = check_includes(a.src, table, exc)
        else:
            if not a.build:
                raise TableError("links needs --build DIR")
            breaches = check_links(a.build, a.add, table, exc)
    except (TableError, OSError, subprocess.CalledProcessError, ValueError, KeyError) as e:
        print(f"walls: {e}", file=sys.stderr)
        return 2
    for b in breaches:
        print(f"walls: {b}", file=sys.stderr)
    if breaches:
        print(f"walls: {len(breaches)} breach(es) of scripts/layers.txt "
              "(docs/architecture.md says how to fix or list one)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
