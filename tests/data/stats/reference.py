#!/usr/bin/env python3
"""Reference values for tests/unit/test_stats_{dist,welch,gseq}.c, computed independently of the
C code: the t distribution by adaptive Simpson integration of its density (the C code uses the
incomplete beta function's continued fraction), its quantiles by bisection on that integral, the
normal's from math.erf, and group-sequential crossing probabilities by Monte Carlo over Brownian
paths (the C code integrates numerically). Pure Python 3, no third-party modules. Run it to
reprint every value the tests store:

    python3 tests/data/stats/reference.py

The Pocock constants the tests also store come from the literature: Pocock (1977), Biometrika
64:191-199, Table 1 / Jennison and Turnbull (2000), "Group Sequential Methods with Applications to
Clinical Trials", Table 2.1 (two-sided 0.05; one-sided 0.025 agrees to the digits printed).
"""
import math
import random


def t_pdf(x, df):
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(c - (df + 1) / 2 * math.log1p(x * x / df))


def simpson(f, a, b, eps, whole, depth):
    m = (a + b) / 2
    lm, rm = (a + m) / 2, (m + b) / 2
    fa, fb, fm, flm, frm = f(a), f(b), f(m), f(lm), f(rm)
    left = (m - a) / 6 * (fa + 4 * flm + fm)
    right = (b - m) / 6 * (fm + 4 * frm + fb)
    if depth <= 0 or abs(left + right - whole) <= 15 * eps:
        return left + right + (left + right - whole) / 15
    return simpson(f, a, m, eps / 2, left, depth - 1) + simpson(f, m, b, eps / 2, right, depth - 1)


def integrate(f, a, b, eps=1e-14):
    whole = (b - a) / 6 * (f(a) + 4 * f((a + b) / 2) + f(b))
    return simpson(f, a, b, eps, whole, 50)


def t_sf(x, df):
    """P(T > x), x >= 0: the tail integral after u = 1/t (t from x to inf -> u from 1/x to 0)."""
    if x < 0:
        return 1 - t_sf(-x, df)
    # Split at x + 1: a direct integral near x, the substituted one beyond.
    near = integrate(lambda t: t_pdf(t, df), x, x + 1)
    far = integrate(lambda u: t_pdf(1 / u, df) / (u * u) if u > 0 else 0.0, 0.0, 1 / (x + 1))
    return near + far


def t_isf(q, df):
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > q:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf(mid, df) > q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * hi:
            break
    return (lo + hi) / 2


def norm_sf(x):
    return 0.5 * math.erfc(x / math.sqrt(2))


def norm_isf(q):
    lo, hi = -40.0, 40.0
    for _ in range(300):
        mid = (lo + hi) / 2
        if norm_sf(mid) > q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def welch(a, b):
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    ma, mb = sum(la) / len(la), sum(lb) / len(lb)
    va = sum((v - ma) ** 2 for v in la) / (len(la) - 1)
    vb = sum((v - mb) ** 2 for v in lb) / (len(lb) - 1)
    ua, ub = va / len(la), vb / len(lb)
    se = math.sqrt(ua + ub)
    df = (ua + ub) ** 2 / (ua * ua / (len(la) - 1) + ub * ub / (len(lb) - 1))
    return ma - mb, se, df


def pocock_cross_mc(info, c, paths, seed):
    rng = random.Random(seed)
    hits = 0
    for _ in range(paths):
        s, prev = 0.0, 0.0
        for i in info:
            s += rng.gauss(0, math.sqrt(i - prev))
            prev = i
            if s / math.sqrt(i) >= c:
                hits += 1
                break
    return hits / paths


def main():
    print("t quantiles t_isf(q, df):")
    for q, df in [(0.025, 1), (0.025, 2), (0.025, 4), (0.025, 10), (0.05, 5), (0.005, 3),
                  (0.025, 4.5), (1e-6, 3.3), (0.2, 7)]:
        print(f"  q={q:g} df={df:g}: {t_isf(q, df):.12g}")
    print("t tails t_sf(x, df):")
    for x, df in [(2.0, 3), (0.5, 1), (10.0, 2.5), (3.7, 17.2)]:
        print(f"  x={x:g} df={df:g}: {t_sf(x, df):.12g}")
    print("normal quantiles norm_isf(q):")
    for q in [0.025, 0.005, 1e-10, 0.3]:
        print(f"  q={q:g}: {norm_isf(q):.12g}")
    a, b = [10.0, 11.0, 12.0], [9.0, 9.5, 10.0]
    d, se, df = welch(a, b)
    tt = d / se
    print(f"welch a={a} b={b}: d={d:.12g} se={se:.12g} df={df:.12g} t={tt:.12g}")
    print(f"  p_above(0)={t_sf(tt, df):.12g}  p_above(log 1.01)={t_sf((d - math.log(1.01)) / se, df):.12g}")
    h = t_isf(0.025, df) * se
    print(f"  95% interval for d: [{d - h:.12g}, {d + h:.12g}]")
    a2, b2 = [100.0, 103.0, 98.0, 101.0], [95.0, 97.0, 96.0]
    d, se, df = welch(a2, b2)
    print(f"welch a={a2} b={b2}: d={d:.12g} se={se:.12g} df={df:.12g}")
    print("pocock crossing by Monte Carlo (1e6 paths):")
    for info, c in [([1, 2, 3, 4, 5], 2.413), ([3, 4, 5, 6, 7, 8, 9, 10], 2.44)]:
        p = pocock_cross_mc(info, c, 1000000, 7)
        se_mc = math.sqrt(p * (1 - p) / 1e6)
        print(f"  looks {info} c={c}: {p:.5f} +- {se_mc:.5f}")


if __name__ == "__main__":
    main()
