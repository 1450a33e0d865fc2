"""Do a batch's b residual frontiers, overlapping on a small graph, explain the batch-size
effect in push's dense rounds?

    python bench/push_union_fit.py            # each recorded table held out in turn
    python bench/push_union_fit.py --json out.json

A batch of b edge changes starts b residual frontiers.  If each reaches ``f`` nodes, their
expected union in n nodes is ``u = n·(1 - (1 - f/n)^b)``: additive (``b·f``) on a large
graph, less on a small one, where they overlap.  Push takes a dense round when its frontier
passes n/32, so a union smaller than ``b·f`` would delay the dense switch.  This script puts
the overlap ``O = u / (b·f)`` (1 when additive, towards ``1/(b·f/n)`` when saturated) into
the dense-round law of :func:`linview.solve.cost.push_counts` in three ways:

* ``rho``: the local term ``PUSH_LINKS·ρ`` becomes ``PUSH_LINKS·ρ·O`` (the residual that
  spreads apart is what counts);
* ``exp``: the ρ-only law times ``O^c``, ``c`` fitted, of either sign;
* ``share``: the ρ-only law times ``(32·u/n)^c``, the union against push's dense switch
  (n/32), ``c`` fitted, of either sign;

with ``f = 10^φ·x^a`` nodes, ``x`` a change's share of the reduction (``ρ/b``, suffix
``per change``) or the batch's ``ρ`` (``batch``), ``φ`` and ``a`` fitted.  As
``bench/push_law_fit.py`` does: fitted on the recorded counts of every result but one
(power iteration's steps and the local links keep the ρ-only laws, refitted alike), then
on the one held out, each law's error and, for a ``--table`` result, the speedup its counts
give at the table's recorded rates beside the measured side; fitted on all, the ratio of
dense rounds of b against 10·b changes a batch at one ρ, recorded and by each law.  Counts,
not times: the fit reads no clock (about 5 s).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent))
import push_law_fit as plf  # noqa: E402

#: the recorded ``--table`` results with per-batch samples (a side measured per cell)
TABLES = [f for f in plf.RECORDED if "table" in f]
#: the cell that ``linview cost`` misses: seed 12, 10⁶ nodes, 1e-6 in batches of 10
MISS = ("pagerank_table_n1000000_seed12_means.json", 1e-6, 10)
#: the union laws: name -> (frontier size from ``x``, how the overlap enters)
LAWS = {f"{how}, {of}": (of, how) for of in ("per change", "batch")
        for how in ("rho", "exp", "share")}
#: starting points of the fit (φ, a): the union law has local minima where p saturates
STARTS = [(phi, a) for phi in (0.0, 2.0, 4.0, 6.0) for a in (0.5, 1.0, 2.0)]


def overlap(b: int, p: float) -> float:
    """``u / (b·f)`` for b frontiers each covering a share ``p`` of the nodes:
    ``(1 - (1 - p)^b) / (b·p)``; 1 for ``p → 0``, ``1/(b·p)`` at ``p = 1``."""
    p = min(max(p, 1e-300), 1.0)
    union = -math.expm1(b * math.log1p(-p)) if p < 1 else 1.0
    return union / (b * p)


def frontier_share(c: dict, phi: float, a: float, of: str) -> float:
    """A frontier's share of the graph's nodes, ``10^φ·x^a / n``."""
    x = c["rho"] / c["batch"] if of == "per change" else c["rho"]
    return 10 ** phi * x ** a / c["n"]


def union_dense(p, c: dict, steps: float, law: str) -> float:
    """Dense rounds a batch under the union law ``law``; ``p = (links, head, φ, a[, c])``."""
    of, how = LAWS[law]
    share = frontier_share(c, p[2], p[3], of)
    o = overlap(c["batch"], share)
    local, spread = abs(p[0]) * c["rho"], max(steps - p[1], 1.0)
    if how == "rho":
        local *= o
    w = local * spread / (local + spread)
    if how == "share":  # u/n = O·b·f/n
        return w * (32 * o * c["batch"] * min(share, 1.0)) ** p[4]
    return w * o ** p[4] if how == "exp" else w


def fit_union(train: list[dict], steps_p, law: str) -> np.ndarray:
    """The union law's constants by least squares of the log error (over the cells of at
    least ``DENSE_MIN`` dense rounds), best of several starts."""
    cells = [c for c in train if c["dense"] >= plf.DENSE_MIN]
    k = {id(c): plf.steps_law(steps_p, c) for c in cells}

    def residual(p):
        return [math.log(c["dense"] / max(union_dense(p, c, k[id(c)], law), 1e-12))
                for c in cells]

    best = None
    for phi, a in STARTS:
        p0 = [1.8, 1.5, phi, a] + ([0.0] if LAWS[law][1] != "rho" else [])
        lo = [0.0, -5.0, -3.0, -3.0] + ([-10.0] if len(p0) == 5 else [])
        hi = [100.0, 10.0, 8.0, 4.0] + ([10.0] if len(p0) == 5 else [])
        r = least_squares(residual, p0, bounds=(lo, hi))
        if best is None or r.cost < best.cost:
            best = r
    return best.x


def held_out(name: str, cells: list[dict]) -> dict:
    """Fit on every recorded result but ``name`` (``name`` None: on all, in sample); per
    cell of the held-out ``--table`` results, each law's dense rounds and priced speedup."""
    train = [c for c in cells if c["file"] != name]
    laws = plf.fit(train)
    steps_p = laws["steps"][None]
    union = {law: fit_union(train, steps_p, law) for law in LAWS}
    files = [name] if name else TABLES
    out = {"held_out": name or "none (fitted on all)",
           "constants": {"rho only": [float(x) for x in laws["dense"][None]],
                         **{k: [float(x) for x in v] for k, v in union.items()}},
           "cells": []}
    for f in files:
        if f not in TABLES:
            continue
        ran = plf.measured(f)
        for c in (c for c in cells if c["file"] == f):
            base = plf.law_counts(laws, c)
            row = {"file": f, "tolerance": c["tolerance"], "batch": c["batch"],
                   "rho": c["rho"], "dense": c["dense"], "dense_se": c["dense_se"],
                   "measured": ran[(c["tolerance"], c["batch"])][0],
                   "side": ran[(c["tolerance"], c["batch"])][1],
                   "laws": {"rho only": {"dense": base["dense"],
                                         "priced": plf.priced(f, base, c)}}}
            k = plf.steps_law(steps_p, c)
            for law, p in union.items():
                counts = dict(base, dense=union_dense(p, c, k, law))
                row["laws"][law] = {"dense": counts["dense"],
                                    "overlap": overlap(c["batch"], frontier_share(
                                        c, p[2], p[3], LAWS[law][0])),
                                    "priced": plf.priced(f, counts, c)}
            out["cells"].append(row)
    out["summary"] = summary(out["cells"])
    if name is None:
        out["pairs"] = pairs(cells, laws, union)
    return out


def pairs(cells: list[dict], laws: dict, union: dict) -> list[dict]:
    """Cells of one ρ and one result, b changes a batch against 10·b at ten times the
    tolerance: the recorded dense rounds' ratio (with its standard error) and each law's."""
    out = []
    steps_p = laws["steps"][None]
    for c in cells:
        big = [d for d in cells if d["file"] == c["file"] and d["batch"] == 10 * c["batch"]
               and math.isclose(d["tolerance"], 10 * c["tolerance"])]
        if not big or min(c["dense"], big[0]["dense"]) < plf.DENSE_MIN:
            continue
        d = big[0]
        ratio = c["dense"] / d["dense"]
        se = ratio * math.hypot(c["dense_se"] / c["dense"], d["dense_se"] / d["dense"])
        row = {"file": c["file"], "n": c["n"], "rho": c["rho"], "batches": (c["batch"],
               d["batch"]), "recorded": ratio, "se": se,
               "rho only": plf.law_counts(laws, c)["dense"] / plf.law_counts(laws, d)["dense"]}
        for law, p in union.items():
            row[law] = (union_dense(p, c, plf.steps_law(steps_p, c), law)
                        / union_dense(p, d, plf.steps_law(steps_p, d), law))
        out.append(row)
    return out


def summary(rows: list[dict]) -> dict:
    """Per law: decided cells whose side the law's point names, the miss's prediction, and
    the dense rounds' root mean square log error (cells of at least DENSE_MIN)."""
    decided = [r for r in rows if r["side"] != "even, within the spread"]
    dense = [r for r in rows if r["dense"] >= plf.DENSE_MIN]
    out = {}
    for law in (rows[0]["laws"] if rows else ()):
        miss = [r for r in rows if (r["file"], r["tolerance"], r["batch"]) == MISS]
        out[law] = {
            "agree": sum(plf.side_of(r["laws"][law]["priced"]) == r["side"] for r in decided),
            "decided": len(decided),
            "wrong": [f"{r['file']} {r['tolerance']:g} x{r['batch']}" for r in decided
                      if plf.side_of(r["laws"][law]["priced"]) != r["side"]],
            "miss_predicted": miss[0]["laws"][law]["priced"] if miss else None,
            "dense_rms": plf.rms([math.log(r["dense"] / r["laws"][law]["dense"])
                                  for r in dense])}
    return out


def report(r: dict) -> list[str]:
    lines = [f"held out: {r['held_out']}"]
    for law, k in r["constants"].items():
        lines.append(f"  {law:18s} constants " + " ".join(f"{x:.3g}" for x in k))
    for law, s in r["summary"].items():
        miss = "" if s["miss_predicted"] is None else f", the miss {s['miss_predicted']:.2f}x"
        lines.append(f"  {law:18s} sides {s['agree']}/{s['decided']}{miss}, dense rms "
                     f"{s['dense_rms']:.3f}; wrong: {', '.join(s['wrong']) or '-'}")
    if "pairs" in r:
        lines.append("  the same rho, b against 10b changes a batch: recorded dense rounds' "
                     "ratio (+- its standard error), then each law's (in the order above)")
        for p in r["pairs"]:
            laws = " ".join(f"{v:.2f}" for k, v in p.items() if k in r["constants"])
            lines.append(f"    {p['file'][9:-5]:30s} rho {p['rho']:7.2f} x{p['batches'][0]:<3d}/"
                         f"x{p['batches'][1]:<3d} {p['recorded']:.2f} +- {p['se']:.2f} [{laws}]")
    lines.append("  per cell (rho >= 1): recorded dense rounds; each law's (overlap); "
                 "measured speedup; each law's priced")
    for c in r["cells"]:
        if c["rho"] < 1:
            continue
        laws = c["laws"]
        dense = " ".join(f"{v['dense']:.2f}" + (f"({v['overlap']:.2f})" if "overlap" in v
                                                 else "") for v in laws.values())
        sp = " ".join(f"{v['priced']:.2f}" for v in laws.values())
        lines.append(f"    {c['file'][14:-5]:26s} {c['tolerance']:g} x{c['batch']:<3d} rho "
                     f"{c['rho']:7.2f} dense {c['dense']:5.2f} [{dense}] measured "
                     f"{c['measured']:.2f}x ({c['side']}) [{sp}]")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the fits and per-cell predictions here")
    args = ap.parse_args(argv)
    cells = [c for name in plf.RECORDED for c in plf.cells_of(name)]
    results = [held_out(name, cells) for name in (*TABLES, None)]
    for r in results:
        print("\n".join(report(r)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
