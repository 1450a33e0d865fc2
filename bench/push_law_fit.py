"""Does a second variable besides ρ improve ``linview cost``'s work laws on held-out data?

    python bench/push_law_fit.py            # both 10⁶ tables held out in turn
    python bench/push_law_fit.py --json out.json

The laws of :func:`linview.solve.cost.push_counts` are functions of the reduction ρ (a
batch's residual against the target) and the graph's size.  At 10⁶ nodes two cells of the
same ρ, certified 1e-6 in batches of 10 and 1e-5 in batches of 100, made 8.65 and 6.40
dense rounds a batch (seed 12).  This script fits, on the recorded counts of every result
but one 10⁶ table (:data:`RECORDED`), the one-variable laws (their constants refitted on
that training set, so that both sides are fitted alike) and two-variable laws that multiply
a count by ``x^c`` or move push's head by ``c·log10 x``, for each candidate ``x``
(:data:`VARIABLES`): the batch size (the number of sources of the residual), the mass a
single change moves against the target (``ρ / batch``), the tolerance.  Then it prints,
per held-out cell, each law's error (recorded count over the law's) and the speedup each
law's counts give priced with the table's recorded rates beside the measured one.  Counts,
not times: the fit reads no clock.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from linview.compiler import calibrate
from linview.solve import cost

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pagerank_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
RECORDED = ["pagerank_laws_n20000_seed7.json", "pagerank_laws_n100000_seed7.json",
            "pagerank_laws_n100000_seed12.json", "pagerank_table_n100000_seed7_means.json",
            "pagerank_table_n100000_means.json", "pagerank_table_n1000000_seed12_means.json",
            "pagerank_table_n1000000_seed7_means.json"]
HELD_OUT = ["pagerank_table_n1000000_seed7_means.json",
            "pagerank_table_n1000000_seed12_means.json"]
#: the second variable's candidates, as functions of a cell (log10 of it enters the law)
VARIABLES = {
    "batch": lambda c: c["batch"],
    "per_change": lambda c: c["rho"] / c["batch"],
    "tolerance": lambda c: c["tolerance"],
    "support": lambda c: c["batch"] * (c["nnz"] / c["n"] + 1) / c["n"],
}
#: how the variable enters push's dense rounds: a factor ``x^c`` (scale), a head of
#: ``PUSH_HEAD + c·log10 x`` steps (head), a factor ``10^(c·L + c2·L²)`` with ``L = log10 x``
#: (peak: most dense rounds at one value of x, fewer either side)
FORMS = ("scale", "head", "peak")
#: cells whose mean dense rounds are below this are left out of the dense rounds' fit and
#: error (push makes 0 to 3 a batch there, mostly 0: the log of a mean of rare events)
DENSE_MIN = 0.5


def cells_of(name: str) -> list[dict]:
    """The recorded cells of a result with their ρ and mean counts (links in sweeps)."""
    res = json.loads((RESULTS / name).read_text())
    n, d = res["graph"]["nodes"], res["damping"]
    out = []
    for c in pagerank_table.law_cells(res):
        rho = cost.push_counts(n, c["nnz"], d, c["tolerance"], c["batch"])["reduction"]
        out.append({"file": name, "n": n, "s": d, "nnz": c["nnz"], "tolerance": c["tolerance"],
                    "batch": c["batch"], "rho": rho, "batches": len(c["dense_rounds"]),
                    "steps": float(np.mean(c["power_steps"])),
                    "dense": float(np.mean(c["dense_rounds"])),
                    "dense_se": float(np.std(c["dense_rounds"], ddof=1)
                                      / math.sqrt(len(c["dense_rounds"]))),
                    "links": float(np.mean(c["local_links"])) / c["nnz"]})
    return out


def steps_law(p, c, var=None) -> float:
    left, onset, rate, per_decade = p[:4]
    lam = max(rate - per_decade * math.log10(c["n"] / 1e5), math.log(1 / c["s"]))
    k = 1 + math.log1p((0.9 * c["rho"] / left) ** onset) / (onset * lam)
    return k * 10 ** (p[4] * math.log10(VARIABLES[var](c))) if var else k


def dense_law(p, c, steps: float, var=None, form: str = "scale") -> float:
    links, head = abs(p[0]), p[1]  # a rate of dense rounds per ρ is positive
    lx = math.log10(VARIABLES[var](c)) if var else 0.0
    if var and form == "head":
        head += p[2] * lx
    local, spread = links * c["rho"], max(steps - head, 1.0)
    w = local * spread / (local + spread)
    if var and form == "peak":
        return w * 10 ** (p[2] * lx + p[3] * lx * lx)
    return w * 10 ** (p[2] * lx) if var and form == "scale" else w


def links_law(p, c, var=None) -> float:
    w = min(abs(p[0]) * c["rho"], abs(p[1]))
    return w * 10 ** (p[2] * math.log10(VARIABLES[var](c))) if var else w


def _fit(residual, p0) -> np.ndarray:
    return least_squares(residual, p0, method="lm" if len(p0) > 1 else "trf").x


def fit(train: list[dict]) -> dict:
    """Every law's constants fitted by least squares of the log error on ``train``."""
    st0 = [cost.PI_LEFT, cost.PI_ONSET, cost.PI_RATE, cost.PI_RATE_PER_DECADE]
    dense_cells = [c for c in train if c["dense"] >= DENSE_MIN]
    link_cells = [c for c in train if c["links"] > 0]
    laws = {"steps": {}, "dense": {}, "links": {}}
    for var in (None, *VARIABLES):
        laws["steps"][var] = _fit(lambda p, v=var: [math.log(c["steps"] / steps_law(p, c, v))
                                                   for c in train], st0 + ([0.0] if var else []))
    steps = laws["steps"][None]
    for var in (None, *VARIABLES):
        for form in (FORMS if var else ("scale",)):
            p0 = [cost.PUSH_LINKS, cost.PUSH_HEAD] + [0.0] * (
                (2 if form == "peak" else 1) if var else 0)
            laws["dense"][(var, form) if var else None] = _fit(
                lambda p, v=var, f=form: [math.log(c["dense"] / dense_law(
                    p, c, steps_law(steps, c), v, f)) for c in dense_cells], p0)
        p0 = [cost.LOCAL_LINKS, cost.LOCAL_CAP] + ([0.0] if var else [])
        laws["links"][var] = _fit(lambda p, v=var: [math.log(c["links"] / links_law(p, c, v))
                                                   for c in link_cells], p0)
    return laws


def law_counts(laws: dict, c: dict, key=None) -> dict:
    """The counts of one law for cell ``c``: ``key`` None (ρ only) or ``(variable, form)``,
    the variable entering all three counts (the dense rounds' in ``form``)."""
    var = key[0] if key else None
    steps = steps_law(laws["steps"][var], c, var)
    # push's dense rounds follow the ρ-only step law (the step law of ``var`` is its own fit)
    base = steps_law(laws["steps"][None], c)
    return {"steps": steps,
            "dense": dense_law(laws["dense"][key], c, base, var, key[1] if key else "scale"),
            "links": links_law(laws["links"][var], c, var)}


def rms(xs: list[float]) -> float:
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else float("nan")


def evaluate(laws: dict, held: list[dict]) -> dict:
    """Root mean square of the log error (recorded over law) on the held-out cells, for
    each law of each count (the dense rounds' over cells of at least DENSE_MIN)."""
    out = {}
    for cnt, cells in (("steps", held), ("dense", [c for c in held if c["dense"] >= DENSE_MIN]),
                       ("links", [c for c in held if c["links"] > 0])):
        out[cnt] = {label(k): rms([math.log(c[cnt] / law_counts(laws, c, k)[cnt])
                                   for c in cells]) for k in laws["dense"]}
    # the dense rounds' error in standard errors of each cell's mean: about 1 a cell if the
    # law were exact and the rest the sample's
    sampled = [c for c in held if c["dense"] >= DENSE_MIN and c["dense_se"] > 0]
    out["dense_chi2"] = {label(k): sum((math.log(c["dense"] / law_counts(laws, c, k)["dense"])
                                        * c["dense"] / c["dense_se"]) ** 2 for c in sampled)
                         for k in laws["dense"]}
    out["dense_cells"] = len(sampled)
    return out


def label(key) -> str:
    if key is None:
        return "rho only"
    return f"{key[0]} ({key[1]})" if isinstance(key, tuple) else f"{key} (scale)"


def priced(name: str, counts: dict, cell: dict) -> float:
    """The speedup these counts give at the recorded rates of result ``name``."""
    res = json.loads((RESULTS / name).read_text())
    n, nnz = res["graph"]["nodes"], res["graph"]["edges"]
    rates = calibrate.Rates(**res["rates"])
    sweep_s = cost.sweep_bytes(n, nnz) / rates.stream1_bytes + cost.STEP_PASSES * rates.call_s
    power, push = cost.price(counts["steps"], counts["dense"], counts["links"] * cell["nnz"],
                             cell["batch"], sweep_s, cost.dense_round_seconds(n, nnz, rates))
    return power / push


def measured(name: str) -> dict:
    """Per cell of a ``--table`` result: the ratio of means and the side its bootstrap
    interval decides (:func:`pagerank_table.ratio_of_means`, as ``--markdown`` counts)."""
    res = json.loads((RESULTS / name).read_text())
    out = {}
    for c in res["cells"]:
        r = pagerank_table.ratio_of_means(c["samples"]["power_s"], c["samples"]["linview_s"])
        out[(c["tolerance"], c["batch"])] = (r["ratio"],
                                              pagerank_table.measured_side(r["low"], r["high"]))
    return out


def held_out(name: str, cells: list[dict]) -> dict:
    """Fit on every recorded cell but ``name``'s; the errors on ``name``'s cells (and, for
    a ``--table`` result, the speedups priced at its recorded rates)."""
    train = [c for c in cells if c["file"] != name]
    held = [c for c in cells if c["file"] == name]
    laws = fit(train)
    timed = "samples" in json.loads((RESULTS / name).read_text())["cells"][0]
    ran = measured(name) if timed else {}
    per_cell = []
    for c in held:
        row = {"tolerance": c["tolerance"], "batch": c["batch"], "rho": c["rho"],
               "recorded": {k: c[k] for k in ("steps", "dense", "dense_se", "links")},
               "laws": {label(key): law_counts(laws, c, key) for key in laws["dense"]}}
        if timed:
            row["measured"], row["side"] = ran[(c["tolerance"], c["batch"])]
            row.update(
                       recorded_priced=priced(name, c, c))
            for k in row["laws"].values():
                k["priced"] = priced(name, k, c)
        per_cell.append(row)
    error = evaluate(laws, held)
    if timed:
        for key, cut in (("priced", 0.0), ("priced_rho_1", 1.0)):
            error[key] = {k: rms([math.log(c["laws"][k]["priced"] / c["recorded_priced"])
                                  for c in per_cell if c["rho"] >= cut])
                          for k in per_cell[0]["laws"]}
        decided = [c for c in per_cell if c["side"] != "even, within the spread"]
        error["sides"] = {k: f"{sum(side_of(c['laws'][k]['priced']) == c['side'] for c in decided)}"
                             f"/{len(decided)}" for k in per_cell[0]["laws"]}
    return {"held_out": name, "trained_on": sorted({c["file"] for c in train}),
            "constants": {cnt: {label(k): [float(x) for x in v] for k, v in d.items()}
                          for cnt, d in laws.items()},
            "error": error, "cells": per_cell}


def side_of(speedup: float) -> str:
    return "pays" if speedup > 1 else "does not pay"


def report(r: dict) -> list[str]:
    lines = [f"held out {r['held_out']} (fitted on the {len(r['trained_on'])} others)",
             "  root mean square of log(recorded / law) on the held-out cells; priced: of the "
             "laws' speedup over the recorded counts' (both at the table's rates); sides: "
             "cells whose measured interval decides a side, and the laws' point agrees"]
    lines.append(f"    dense rounds' chi-square over {r['error']['dense_cells']} cells (the error "
                 "in standard errors of the cell's mean, squared and summed): " + ", ".join(
                     f"{k} {v:.1f}" for k, v in r["error"]["dense_chi2"].items()))
    for cnt in ("steps", "dense", "links", "priced", "priced_rho_1", "sides"):
        if cnt not in r["error"]:
            continue
        lines.append(f"    {cnt}: " + ", ".join(
            f"{k} {v}" if cnt == "sides" else f"{k} {v:.3f}" for k, v in r["error"][cnt].items()))
    names = list(r["cells"][0]["laws"])
    if "measured" not in r["cells"][0]:
        return lines
    lines.append("  per cell: recorded dense rounds / each law's (in the order above), then the "
                 "measured speedup, the recorded counts priced, each law's priced")
    for c in r["cells"]:
        dense = " ".join(f"{c['recorded']['dense'] / c['laws'][k]['dense']:.2f}" for k in names)
        sp = " ".join(f"{c['laws'][k]['priced']:.2f}" for k in names)
        lines.append(f"    {c['tolerance']:g} x{c['batch']:<3d} rho {c['rho']:7.3f} dense "
                     f"{c['recorded']['dense']:5.2f} [{dense}]  measured {c['measured']:.2f}x"
                     f" counts {c['recorded_priced']:.2f}x [{sp}]")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the fits and errors here")
    ap.add_argument("--all", action="store_true",
                    help="hold out each recorded result in turn, not only the 10⁶ tables")
    args = ap.parse_args(argv)
    cells = [c for name in RECORDED for c in cells_of(name)]
    results = [held_out(name, cells) for name in (RECORDED if args.all else HELD_OUT)]
    for r in results:
        print("\n".join(report(r)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
