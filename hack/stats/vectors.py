#!/usr/bin/env python3
"""Test vectors for evalmeter compare's statistics (stats/testdata/compare-vectors.json).

An implementation of docs/compare.md's formulas written apart from the Go package
stats, in exact arithmetic: rationals (fractions.Fraction) for every sum, mean,
binomial coefficient and probability, and 60-digit decimals for the square roots.
Each figure is rounded to a float64 only when it is written. `make stats-vectors`
regenerates the file; stats.TestVectors requires the Go figures to agree to 1e-9.

Only the standard library: run it with any python3 >= 3.8.
"""

import json
import math
import random
import sys
from decimal import Decimal, getcontext
from fractions import Fraction

getcontext().prec = 60

Z = Fraction("1.959964")
DETECTABLE = Fraction("2.8")


def dec(q):
    """A Fraction as a Decimal of 60 digits."""
    return Decimal(q.numerator) / Decimal(q.denominator)


def sqrt(q):
    """The square root of a non-negative Fraction, as a Decimal of 60 digits."""
    return dec(q).sqrt()


# --- The figures, one function each, as docs/compare.md gives them. ---------


def wilson(passed, n):
    if n == 0:
        return [0.0, 1.0]
    p = Fraction(passed, n)
    z2 = Z * Z
    d = 1 + z2 / n
    center = (p + z2 / (2 * n)) / d
    half = dec(Z) * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / dec(d)
    c = dec(center)
    return [float(max(Decimal(0), c - half)), float(min(Decimal(1), c + half))]


def mcnemar(b, c):
    n = b + c
    if n == 0:
        return 1.0
    s = sum(Fraction(math.comb(n, i), 2 ** n) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * s))


def pass_at_k(n, c, k):
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n, c, k):
    return Fraction(math.comb(c, k), math.comb(n, k))


def paired(d):
    """diff, se and the 95% interval of the differences d (Fractions)."""
    g = len(d)
    out = {"groups": g, "diff": None, "se": None, "ci_95": None}
    if g == 0:
        return out, None
    mean = sum(d, Fraction(0)) / g
    out["diff"] = float(mean)
    if g < 2:
        return out, None
    var = sum(((x - mean) ** 2 for x in d), Fraction(0)) / (g - 1)
    se = sqrt(var / g)
    m = dec(mean)
    out["se"] = float(se)
    out["ci_95"] = [float(m - dec(Z) * se), float(m + dec(Z) * se)]
    return out, (m, se)


def group_key(case):
    # A repeat group and a case's own id are different kinds of key.
    return ("group", case["group"]) if case["group"] else ("case", case["id"])


def tokens_of(case):
    if case["input_tokens"] is None and case["output_tokens"] is None:
        return None
    return (case["input_tokens"] or 0) + (case["output_tokens"] or 0)


def groups_of(run):
    """Group key -> list of cases, in order of first appearance."""
    groups = {}
    for c in run:
        groups.setdefault(group_key(c), []).append(c)
    return groups


def summary(run):
    n = len(run)
    passed = sum(1 for c in run if c["status"] == "pass")
    groups = groups_of(run)
    out = {
        "cases": n,
        "passed": passed,
        "pass_rate": float(Fraction(passed, n)) if n else 0.0,
        "wilson_95": wilson(passed, n),
        "groups": len(groups),
        "pass_at_k": [],
    }
    sizes = [len(g) for g in groups.values()]
    if sizes and max(sizes) >= 2:
        for k in range(1, min(sizes) + 1):
            at = hat = Fraction(0)
            for g in groups.values():
                gn = len(g)
                gc = sum(1 for c in g if c["status"] == "pass")
                at += pass_at_k(gn, gc, k)
                hat += pass_hat_k(gn, gc, k)
            out["pass_at_k"].append({"k": k, "pass_at_k": float(at / len(groups)), "pass_hat_k": float(hat / len(groups))})
    return out


def measure_mean(cases, get):
    vals = [get(c) for c in cases if get(c) is not None]
    if not vals:
        return None
    return sum((Fraction(v) for v in vals), Fraction(0)) / len(vals)


def score(cases):
    return Fraction(sum(1 for c in cases if c["status"] == "pass"), len(cases))


def verdict(exact, max_drop):
    """The verdict from the exact diff and se (None with G < 2)."""
    if exact is None:
        return "inconclusive"
    m, se = exact
    lo, hi = m - dec(Z) * se, m + dec(Z) * se
    x = dec(max_drop)
    if hi < 0 and m < -x:
        return "regression"
    if lo > 0:
        return "improvement"
    if lo < -x:
        return "inconclusive"
    return "no_change"


def expect(baseline, candidate, max_drop):
    bg, cg = groups_of(baseline), groups_of(candidate)
    both = [k for k in bg if k in cg]
    d = [score(cg[k]) - score(bg[k]) for k in both]
    pass_diff, exact = paired(d)
    b = c = single = 0
    for k in both:
        if len(bg[k]) == 1 and len(cg[k]) == 1:
            single += 1
            bp, cp = bg[k][0]["status"] == "pass", cg[k][0]["status"] == "pass"
            b += bp and not cp
            c += cp and not bp
    pass_diff["detectable_drop"] = float(dec(DETECTABLE) * exact[1]) if exact else None
    pass_diff["mcnemar_groups"] = single
    pass_diff["mcnemar_p"] = mcnemar(b, c)
    pass_diff["flips"] = {"pass_to_fail": b, "fail_to_pass": c}

    def measure(get):
        diffs = []
        for k in both:
            bm, cm = measure_mean(bg[k], get), measure_mean(cg[k], get)
            if bm is not None and cm is not None:
                diffs.append(cm - bm)
        return paired(diffs)[0]

    bids, cids = {c["id"] for c in baseline}, {c["id"] for c in candidate}
    return {
        "baseline": summary(baseline),
        "candidate": summary(candidate),
        "paired": pass_diff,
        "latency_ms": measure(lambda c: Fraction(c["latency_ms"])),
        "tokens": measure(tokens_of),
        "cost": measure(lambda c: None if c["cost"] is None else Fraction(c["cost"])),
        "unmatched": {"baseline_only": len(bids - cids), "candidate_only": len(cids - bids)},
        "verdict": verdict(exact, Fraction(max_drop)),
    }


# --- Scenarios. --------------------------------------------------------------


def case(id, status, group="", latency=100, inp=None, out=None, cost=None):
    return {"id": id, "group": group, "status": status, "latency_ms": latency,
            "input_tokens": inp, "output_tokens": out, "cost": cost}


def run(statuses, prefix="c", **kw):
    return [case("%s%d" % (prefix, i), s, **kw) for i, s in enumerate(statuses)]


def rates(n, fails, rng=None):
    s = ["pass"] * (n - fails) + ["fail"] * fails
    if rng:
        rng.shuffle(s)
    return s


def scenarios():
    rng = random.Random(20261124)
    out = []

    def add(name, baseline, candidate, max_drop="0.02"):
        if candidate is None:  # the same run again
            candidate = [dict(c) for c in baseline]
        out.append({"name": name, "max_drop": float(Fraction(max_drop)), "baseline": baseline, "candidate": candidate,
                    "expect": expect(baseline, candidate, Fraction(max_drop))})

    def repeated(groups, size, fails_per_group, prefix, **kw):
        cases = []
        for g in range(groups):
            for a in range(size):
                status = "fail" if a < fails_per_group[g] else "pass"
                cases.append(case("%s%d.%d" % (prefix, g, a), status, group="task%d" % g, **kw))
        return cases

    same = run(rates(80, 13, rng))
    add("all identical", same, [dict(c) for c in same])
    add("all passing, identical (Wilson at 1)", run(["pass"] * 40), run(["pass"] * 40))
    add("all failing, identical (Wilson at 0)", run(["fail"] * 25), run(["fail"] * 25))
    add("all flipped from pass to fail (rates 1 and 0)", run(["pass"] * 30), run(["fail"] * 30))
    add("all flipped from fail to pass", run(["fail"] * 12), run(["pass"] * 12))
    mixed = rates(50, 20, rng)
    flipped = ["fail" if s == "pass" else "pass" for s in mixed]
    add("every case flipped both ways", run(mixed), run(flipped))
    # b + c = 0 while the rates move: only errors and timeouts change, which do not pass either way.
    base = run(rates(30, 6))
    cand = [dict(c) for c in base]
    for i, c in enumerate(cand[-6:]):
        c["status"] = "error" if i < 3 else "timeout"
    add("b + c = 0 (fail becomes error or timeout)", base, cand)
    add("b + c = 0 while groups of 3 move", run(rates(20, 4)) + repeated(10, 3, [0] * 10, "rep"),
        run(rates(20, 4)) + repeated(10, 3, [1, 2, 0, 1, 3, 0, 0, 1, 2, 1], "rep"))
    add("5 flips pass to fail on 80 cases", run(["pass"] * 70 + ["fail"] * 10), run(["fail"] * 5 + ["pass"] * 65 + ["fail"] * 10))
    # Cases 0-2 pass then fail, case 3 fails then passes.
    add("3 flips and 1 back on 80 cases", run(["pass"] * 3 + ["fail"] + ["pass"] * 64 + ["fail"] * 12),
        run(["fail"] * 3 + ["pass"] * 65 + ["fail"] * 12))
    add("regression on 400 cases", run(rates(400, 40, rng)), run(rates(400, 120, rng)))
    add("improvement on 300 cases", run(["fail"] * 90 + ["pass"] * 210), run(["fail"] * 30 + ["pass"] * 270))
    add("no change on 2000 cases", run(["pass"] * 1900 + ["fail"] * 100), run(["pass"] * 1899 + ["fail"] * 100 + ["pass"]))
    add("real drop within a 10-point tolerance", run(["pass"] * 400), run(["fail"] * 20 + ["pass"] * 380), "0.10")
    add("a tolerance of 0", run(["pass"] * 100), run(["pass"] * 99 + ["fail"]), "0")

    bf = [rng.randrange(0, 6) for _ in range(20)]
    cf = [min(5, max(0, x + rng.choice([-1, 0, 0, 1, 2]))) for x in bf]
    add("groups of 5, 20 tasks", repeated(20, 5, bf, "b"), repeated(20, 5, cf, "b"))
    add("groups of 5 against groups of 3 (pass@k to 5 and to 3)", repeated(12, 5, [i % 6 for i in range(12)], "r"),
        repeated(12, 3, [i % 4 for i in range(12)], "r"))
    mixed_sizes = []
    for g, size in enumerate([1, 2, 3, 4, 5, 2, 3]):
        for a in range(size):
            mixed_sizes.append(case("m%d.%d" % (g, a), "pass" if (g + a) % 3 else "fail", group="g%d" % g))
    cand_sizes = [dict(c, status="pass") for c in mixed_sizes]
    add("groups of 1 to 5 (McNemar on the single ones only)", mixed_sizes, cand_sizes)
    ungrouped_and_grouped = run(["pass", "fail", "pass", "pass"], prefix="u") + repeated(3, 2, [0, 1, 2], "v")
    add("cases without a group beside groups of 2", ungrouped_and_grouped,
        run(["fail", "fail", "pass", "pass"], prefix="u") + repeated(3, 2, [1, 1, 0], "v"))

    # Exactly on the tolerance: 9 of 150 tasks lose one attempt in 3, a drop of exactly
    # 2 points, whose sum a float64 rounds below -0.02. Not a regression (diff is not
    # below -X), and the interval reaches below -X: inconclusive.
    add("a drop of exactly the tolerance", repeated(150, 3, [0] * 150, "tie"),
        repeated(150, 3, [1] * 9 + [0] * 141, "tie"))
    add("an interval of width 0 exactly at -X", run(["pass"] * 50), run(["fail"] * 50), "1")
    # A case id that is also another case's repeat group.
    add("a case id equal to a repeat group", [case("t1", "pass"), case("a", "pass", group="t1"), case("b", "fail", group="t1")],
        [case("t1", "fail"), case("a", "pass", group="t1"), case("b", "pass", group="t1")])
    add("the same case id in another group in each run", [case("x%d" % i, "pass", group="g%d" % (i % 3)) for i in range(9)],
        [case("x%d" % i, "pass" if i % 4 else "fail", group="h%d" % (i % 3)) for i in range(9)])
    add("500 groups and no flip (se = 0)", run(rates(500, 37, rng)), None)

    # Unmatched cases.
    add("unmatched cases on both sides", run(rates(40, 8, rng)), run(rates(30, 4, rng)) + run(["pass", "fail", "pass"], prefix="new"))
    add("no case in common", run(["pass"] * 10, prefix="a"), run(["fail"] * 10, prefix="b"))
    add("a group in both runs with other case ids", repeated(4, 3, [0, 1, 2, 3], "x"), repeated(4, 3, [1, 1, 2, 2], "y"))

    # G = 1, G = 0 and se = 0.
    add("G = 1 (se undefined)", [case("only", "pass")], [case("only", "fail")])
    add("G = 1 with repeats", repeated(1, 5, [1], "one"), repeated(1, 5, [4], "one"))
    add("se = 0: every group one attempt in five worse", repeated(10, 5, [1] * 10, "s"), repeated(10, 5, [2] * 10, "s"))
    add("se = 0: every case flipped to fail", run(["pass"] * 8), run(["fail"] * 8))
    add("empty candidate", run(["pass", "fail"]), [])

    # Latency, tokens and cost beside the pass rate.
    lat_b = [case("t%d" % i, "pass", latency=100 + 7 * i, inp=1000 + i, out=200, cost=0.001 * (10 + i)) for i in range(25)]
    lat_c = [dict(c, latency_ms=c["latency_ms"] * 1.25 + 3, output_tokens=260, cost=None if i % 5 == 0 else 0.0013 * (20 + i))
             for i, c in enumerate(lat_b)]
    add("latency, tokens and cost (cost missing on some candidate cases)", lat_b, lat_c)
    only_in = [case("o%d" % i, "pass", latency=50.5 + i, inp=10) for i in range(6)]
    only_out = [case("o%d" % i, "fail" if i == 2 else "pass", latency=40.25 + 2 * i, out=30, cost=0.0) for i in range(6)]
    add("input tokens against output tokens; a cost of 0 counts", only_in, only_out)
    add("no tokens or cost in the baseline", run(["pass"] * 6, latency=10), [case("c%d" % i, "pass", latency=12, inp=5, out=5, cost=0.5) for i in range(6)])

    # Random mixtures, for breadth.
    for r in range(6):
        n = rng.randrange(5, 120)
        statuses = ["pass", "pass", "pass", "fail", "error", "timeout"]
        base, cand = [], []
        for i in range(n):
            group = "" if rng.random() < 0.5 else "g%d" % rng.randrange(0, max(1, n // 3))
            bc = case("id%d" % i, rng.choice(statuses), group=group, latency=rng.randrange(0, 5000) / 4,
                      inp=rng.choice([None, rng.randrange(0, 9000)]), out=rng.choice([None, rng.randrange(0, 900)]),
                      cost=rng.choice([None, rng.randrange(0, 10000) / 1000]))
            if rng.random() < 0.9:
                base.append(bc)
            if rng.random() < 0.9:
                cand.append(dict(bc, status=rng.choice(statuses + [bc["status"]] * 6), latency_ms=rng.randrange(0, 5000) / 4))
        add("random mixture %d" % (r + 1), base, cand, rng.choice(["0.02", "0.05", "0"]))
    return out


def main():
    doc = {
        "generator": "hack/stats/vectors.py: exact rationals, 60-digit square roots; see docs/compare.md",
        "z": float(Z),
        "vectors": scenarios(),
    }
    # One line per vector, and a case's absent fields left out, to keep the file small.
    for v in doc["vectors"]:
        for c in v["baseline"] + v["candidate"]:
            for k in [k for k, x in c.items() if x is None or x == ""]:
                del c[k]
    lines = [json.dumps(v, separators=(",", ":")) for v in doc["vectors"]]
    sys.stdout.write('{"generator":%s,"z":%s,"vectors":[\n%s\n]}\n' % (
        json.dumps(doc["generator"]), json.dumps(doc["z"]), ",\n".join(lines)))


if __name__ == "__main__":
    main()
