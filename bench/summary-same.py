#!/usr/bin/env python3
"""Compares campaign summaries (summary.json) with the first one: every field but sim_speed (the
pacing asked for, a setting, not a figure) must be equal, bit for bit. Prints one line per
summary and exits 1 when any differs. Usage: summary-same.py REF.json OTHER.json..."""
import json
import sys

SKIP = {"sim_speed"}


def diffs(a, b, path=""):
    if type(a) is not type(b):
        return [path]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k in SKIP:
                continue
            if k not in a or k not in b:
                out.append(path + "/" + k)
            else:
                out += diffs(a[k], b[k], path + "/" + k)
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [path + " (length)"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diffs(x, y, "%s[%d]" % (path, i))
        return out
    return [] if a == b else [path]


ref = json.load(open(sys.argv[1]))
bad = 0
for p in sys.argv[2:]:
    d = diffs(ref, json.load(open(p)))
    print("%s: %s" % (p, "identical" if not d else "%d differences: %s" % (len(d), d[:5])))
    bad += bool(d)
n = sum(1 for m in ref["metrics"])
print("summary-same: %d summaries vs %s (%d metric rows, chosen %s): %s" %
      (len(sys.argv) - 2, sys.argv[1], n, ref["chosen"], "all identical" if not bad else
       "%d differ" % bad))
sys.exit(1 if bad else 0)
