#!/usr/bin/env python3
"""No assignment inside conditions (STYLE.md "Errors"): the one rule of that section clang-tidy 14
(Debian 12) cannot check, since bugprone-assignment-in-if-condition came with clang-tidy 15.

Usage: cond-assign.py FILE...   prints FILE:LINE for each `if (...)` condition holding =, +=,
                                  |=, ... (at any depth); exit 1 on any.

Scope: `if` only. `while ((p = next(it)) != NULL)` stays allowed (the iterator idiom of
libfyaml and getopt loops), and so do ++ and -- (`if (--ref == 0)`): neither hides a status
code. A lexer, not a parser: comments, string and character literals are skipped. An exception
carries /* lint-ok: reason */ on the condition's first line.
"""
import re
import sys

TOKEN = re.compile(r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<kw>\bif\b)
  | (?P<op><<=|>>=|[-+*/%&|^]=|==|!=|<=|>=|\+\+|--|=)
  | (?P<paren>[()])
  | (?P<other>[^\s()"'/=<>!+*%&|^-]+|\s+|.)
""", re.S | re.X)
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


def check(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = text.split("\n")
    hits = []
    toks = []  # (kind, text, line)
    line = 1
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind not in ("comment", "other") or not m.group().isspace():
            if kind != "comment":
                toks.append((kind, m.group(), line))
        line += m.group().count("\n")
    i = 0
    while i < len(toks):
        kind, tok, ln = toks[i]
        if kind == "kw" and i + 1 < len(toks) and toks[i + 1][1] == "(":
            depth, j = 0, i + 1
            while j < len(toks):
                t = toks[j][1]
                if t == "(":
                    depth += 1
                elif t == ")":
                    depth -= 1
                    if depth == 0:
                        break
                elif toks[j][0] == "op" and t in ASSIGN:
                    if "lint-ok:" not in lines[ln - 1]:
                        hits.append(f"{path}:{ln}: assignment inside the {tok} condition "
                                    f"('{t}'): assign first, then test")
                    break
                j += 1
        i += 1
    return hits


def main():
    hits = []
    for path in sys.argv[1:]:
        hits += check(path)
    for h in hits:
        print(h, file=sys.stderr)
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
