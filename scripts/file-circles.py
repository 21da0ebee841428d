#!/usr/bin/env python3
"""File-level import circles (issue 13: "no import circle between files").

A file uses another when its object calls a function or reads a variable the other defines (nm:
an undefined symbol of one object that the other defines). Any strongly connected group of two or
more files is a circle: each calls, directly or not, into the others, so neither can be read or
tested without the rest. Reads every object of the build's src/ libraries (or the objects given
with --objs) and prints each circle with its edges. Exit 0 without a circle, 1 with one, 2 on bad
use.

    scripts/file-circles.py --build BUILD_DIR
    scripts/file-circles.py --objs a.o b.o ...
"""
import collections
import glob
import os
import subprocess
import sys


def graph(objs):
    defs, uses = {}, collections.defaultdict(set)
    for o in objs:
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBR":
                defs[p[2]] = o
            elif len(p) == 2 and p[0] == "U":
                uses[o].add(p[1])
    g = collections.defaultdict(set)
    for a, syms in uses.items():
        for s in syms:
            b = defs.get(s)
            if b and b != a:
                g[a].add(b)
    return g


def circles(g):
    """Tarjan's strongly connected components of more than one node, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in list(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def name(o):
    # build/src/target/libst_target.a.p/arm.c.o -> src/target/arm.c
    d = os.path.dirname(os.path.dirname(o))
    rel = d.split(os.sep + "src" + os.sep, 1)
    base = os.path.basename(o)[:-2] if o.endswith(".o") else os.path.basename(o)
    return ("src/" + rel[1] + "/" if len(rel) == 2 else "") + base


def main(argv):
    if len(argv) >= 2 and argv[0] == "--build":
        objs = sorted(glob.glob(os.path.join(argv[1], "src", "**", "*.o"), recursive=True) +
                      glob.glob(os.path.join(argv[1], "servetune.p", "*.o")))
    elif len(argv) >= 1 and argv[0] == "--objs":
        objs = argv[1:]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if not objs:
        print("file-circles: no objects found", file=sys.stderr)
        return 2
    g = graph(objs)
    found = circles(g)
    for comp in found:
        print("file-circles: circle of %d files: %s" % (len(comp), " ".join(name(o) for o in comp)),
              file=sys.stderr)
        for a in comp:
            print("    %s -> %s" % (name(a), " ".join(name(b) for b in sorted(g[a]) if b in comp)),
                  file=sys.stderr)
    print("file-circles: %d objects, %d circle(s)" % (len(objs), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
