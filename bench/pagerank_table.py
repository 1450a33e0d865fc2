"""``python bench/pagerank_graph.py --table`` and ``--markdown``: per-batch speedup of
linview's push over warm SciPy power iteration, certified L1 tolerance × micro-batch size,
with what ``linview cost --tolerance T --batch b`` predicts beside each cell.

    python bench/pagerank_graph.py --table --nodes 100000 --changes 100 --seed 7
    python bench/pagerank_graph.py --markdown bench/results/pagerank_table_n100000.json

The statistic is the **ratio of means**: power iteration's total time over the cell's
batches divided by linview's (a user who maintains pays the total over the changes, not
the typical change), with a paired bootstrap interval of that ratio (:func:`ratio_of_means`).
A cell whose interval contains 1× has no measured side ("even, within the spread"); the
prediction's side is its point's, a "close call" where its band holds 1×; the sides are
compared in every cell the measurement decides (docs/solve_views.md, "What "pays"
means").
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
from pagerank_graph import HERE, chung_lu, power_iteration, stats

import linview
from linview.compiler import calibrate
from linview.solve.stochastic import StochasticMatrix

#: bootstrap resamples of a cell's batches, and the interval's coverage
RESAMPLES = 4000
COVERAGE = 0.95


def edge_batch(M: StochasticMatrix, size: int, targets, rng) -> list[tuple]:
    """``size`` distinct edge changes on the current graph: deletions of a random existing
    out-link, insertions towards in-degree-proportional targets."""
    batch, seen = [], set()
    while len(batch) < size:
        j = int(rng.integers(M.n))
        rows, _, _ = M.column(j)
        if rows.size and rng.random() < 0.5:
            rec = ("delete", j, int(rows[rng.integers(rows.size)]))
        else:
            i = int(targets[rng.integers(targets.size)])
            if i == j or i in set(rows.tolist()):
                continue
            rec = ("insert", j, i)
        if rec[1:] not in seen:
            seen.add(rec[1:])
            batch.append(rec)
    return batch


def ratio_of_means(power, push, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """``sum(power) / sum(push)`` over a cell's batches, and the percentile interval of a
    paired bootstrap (batches resampled with replacement, each batch's two times kept
    together: they ran on the same graph).  With few batches the interval is narrower than
    the truth (a bootstrap of 3 batches sees 3 values): ``batches`` says how many."""
    a, b = np.asarray(power, float), np.asarray(push, float)
    idx = np.random.default_rng(seed).integers(a.size, size=(resamples, a.size))
    boot = a[idx].sum(axis=1) / b[idx].sum(axis=1)
    tail = (1 - COVERAGE) / 2 * 100
    return {"ratio": float(a.sum() / b.sum()), "low": float(np.percentile(boot, tail)),
            "high": float(np.percentile(boot, 100 - tail)), "batches": int(a.size)}


def measured_side(low: float, high: float) -> str:
    """The side of 1× an interval of the speedup decides, if any."""
    return "pays" if low > 1 else ("does not pay" if high < 1 else "even, within the spread")


def table_cell(views, M: StochasticMatrix, d: float, tol: float, size: int, batches: int,
               targets, rng, seeds=None) -> dict:
    """``batches`` micro-batches of ``size`` edge changes: linview and warm power iteration
    (same certified stop, warm from its previous vector) timed per batch; then the L1 and
    L∞ error against a reference solved to a residual of 1e-13, and the top-100 ranking
    (of every column, for personalised PageRank with ``seeds`` = (1-d)·S).  Every batch's
    times and work counts are kept (``samples``) so that the table can be recomputed."""
    lin, warm, its, bounds = [], [], [], []
    work = {k: [] for k in ("edges", "rounds", "pushes", "sweeps")}  # push's, per batch
    out = "R" if seeds is not None else "r"
    x_pi = np.array(views[out]) if seeds is not None else np.array(views[out]).ravel()
    counts = views.solver(out).stats
    for _ in range(batches):
        batch = edge_batch(M, size, targets, rng)
        before = dict(counts)
        t = time.perf_counter()
        views.update_edges("M", batch)
        lin.append(time.perf_counter() - t)
        for k, v in work.items():
            v.append(counts[k] - before[k])
        bounds.append(views.error_bound(out))
        S, dang = M.sparse_part().tocsr(), M.dangling  # the graph as a peer holds it
        t = time.perf_counter()
        x_pi, k = power_iteration(S, dang, d, x_pi, tol * (1 - d), teleport=seeds)
        warm.append(time.perf_counter() - t)
        its.append(k)
    ref, _ = power_iteration(M.sparse_part().tocsr(), M.dangling, d, x_pi, 1e-13 * (1 - d),
                             teleport=seeds)
    x = np.array(views[out]).reshape(ref.shape)
    x, ref = x.reshape(x.shape[0], -1), ref.reshape(ref.shape[0], -1)
    tops = [(np.argsort(-x[:, c], kind="stable")[:100], np.argsort(-ref[:, c], kind="stable")
             [:100]) for c in range(x.shape[1])]
    speed = ratio_of_means(warm, lin)
    return {"tolerance": tol, "batch": size, "batches": batches, "columns": x.shape[1],
            "linview_per_batch": stats(lin), "warm_power_per_batch": stats(warm),
            "warm_power_iterations": stats(its),
            "push_work": {k: stats(v) for k, v in work.items()}, "nnz": int(M.nnz),
            "samples": {"linview_s": lin, "power_s": warm, "power_steps": its, **work},
            "speedup_per_change": speed["ratio"], "speedup_interval": speed,
            "speedup_of_medians": float(np.median(warm) / np.median(lin)),
            "bound_max": float(max(bounds)), "bound_held": bool(max(bounds) <= tol),
            "l1_error": float(np.abs(x - ref).sum(axis=0).max()),  # worst column
            "linf_error": float(np.abs(x - ref).max()),
            "top100_equal": all(np.array_equal(a, b) for a, b in tops),
            "top100_same_set": all(set(a) == set(b) for a, b in tops)}


def table(args) -> dict:
    """Per-batch speedup over warm power iteration, certified L1 tolerance × micro-batch
    size (a fresh load per tolerance; the batch sizes follow one another on its graph).
    The calibrated rates of the moment are recorded with it: ``--markdown`` prices the
    prediction with them."""
    rng = np.random.default_rng(args.seed)
    n, d = args.nodes, args.damping
    src, dst = chung_lu(n, args.degree * n, rng)
    example = "pagerank_personalised.m" if args.seeds else "pagerank_solve.m"
    prog = linview.compile_file(HERE.parent / "examples" / example)
    rates = calibrate.rates().as_dict()
    seeds = None
    if args.seeds:  # column c: uniform over 4 random seed nodes
        S = np.zeros((n, args.seeds))
        for c in range(args.seeds):
            S[rng.choice(n, size=4, replace=False), c] = 0.25
        seeds = (1 - d) * S
    cells = []
    for tol in args.tolerances:
        M = StochasticMatrix(n, src, dst)
        t0 = time.perf_counter()
        views = prog.load(M=M, d=d, tolerance=tol, **({"S": S} if args.seeds else {}))
        load_s = time.perf_counter() - t0
        for size in args.batches:
            count = max(args.min_batches, args.changes // size)
            cell = table_cell(views, M, d, tol, size, count, dst, rng, seeds)
            cell["load_seconds"] = load_s
            cells.append(cell)
            lv, pw = cell["linview_per_batch"]["mean"], cell["warm_power_per_batch"]["mean"]
            iv = cell["speedup_interval"]
            print(f"tol {tol:g} batch {size:3d}: linview {lv * 1e3:8.2f} ms, warm power "
                  f"{pw * 1e3:8.2f} ms per batch (means) -> {iv['ratio']:6.2f}x "
                  f"[{iv['low']:.2f}, {iv['high']:.2f}]; bound max {cell['bound_max']:.1e}, "
                  f"L1 {cell['l1_error']:.1e}, Linf {cell['linf_error']:.1e}, top-100 "
                  f"{'equal' if cell['top100_equal'] else 'differs'}", flush=True)
    return {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "load_average": os.getloadavg()},
            "rates": rates, "rates_status": calibrate.status(),
            "graph": {"nodes": n, "edges": int(src.size), "seed": args.seed,
                      "generator": "Chung-Lu (2.1 out, 2.3 in)"},
            "damping": d, "seed_columns": args.seeds, "cells": cells}


def cell_speedup(c: dict) -> dict:
    """The ratio of means of a recorded cell and its interval; a result recorded before
    the samples were kept has the means only (no interval: ``low``/``high`` None)."""
    if "samples" in c:
        return ratio_of_means(c["samples"]["power_s"], c["samples"]["linview_s"])
    stat = "mean" if "mean" in c["linview_per_batch"] else "median"  # the oldest: medians
    ratio = c["warm_power_per_batch"][stat] / c["linview_per_batch"][stat]
    return {"ratio": ratio, "low": None, "high": None, "batches": c["batches"], "stat": stat}


def plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


class Tally:
    """How the prediction's side (its point's) compares with the measured side, over a
    table's cells.  A cell measured even within its spread has no side to agree with: it
    is counted apart (``even``), never as agreeing.  Cells recorded before the samples were
    kept have no interval; their point's side is compared, counted apart (``*_point``).
    The band's own count: cells where the band lies wholly on the measured side."""

    def __init__(self):
        self.n = dict.fromkeys(("agree", "disagree", "even", "agree_point",
                                "disagree_point", "even_point", "band_decides",
                                "band_agrees"), 0)

    def count(self, measured: str, pred: dict, recorded_spread: bool = True) -> str:
        """Count one cell; the mark the table prints beside its prediction."""
        tail = "" if recorded_spread else "_point"
        if measured.startswith("even"):
            self.n["even" + tail] += 1
            return ""
        key = "agree" if measured == pred["verdict"] else "disagree"
        self.n[key + tail] += 1
        if recorded_spread and not pred["close_call"]:
            self.n["band_decides"] += 1
            self.n["band_agrees"] += key == "agree"
        return ", agrees" if key == "agree" else ", **disagrees**"

    def lines(self) -> list[str]:
        n = self.n
        out = []
        if decided := n["agree"] + n["disagree"]:
            out.append(f"The prediction's side agrees with the measured side in {n['agree']} "
                       f"of the {decided} cells where the measurement decides a side "
                       f"({plural(n['even'], 'cell')} measured even within the spread).")
            out.append(f"Its band lies wholly on one side in {n['band_decides']} of those "
                       f"{decided} cells (close calls in the rest), and on the measured side "
                       f"in {n['band_agrees']} of them.")
        elif n["even"]:
            out.append(f"No cell decides a side ({plural(n['even'], 'cell')} measured even "
                       f"within the spread).")
        if decided := n["agree_point"] + n["disagree_point"]:
            out.append(f"No spread recorded (a result from before the samples were kept): "
                       f"the prediction's side agrees with the measured point's side in "
                       f"{n['agree_point']} of {decided} cells ({n['even_point']} exactly "
                       f"even).")
        return out


def markdown(res: dict) -> str:
    """The table of a ``--table`` result as Markdown: per cell the mean times, the ratio
    of means with its bootstrap interval and measured side, and what ``linview cost
    --tolerance T --batch b`` predicts (its band and side; priced with the rates recorded
    with the run where it has them, else this machine's), then how many sides agree."""
    from linview.solve.cost import solve_cost_report

    n, p = res["graph"]["nodes"], res.get("seed_columns") or 0
    example = "pagerank_personalised.m" if p else "pagerank_solve.m"
    dims = {"n": n, "nnz_M": res["graph"]["edges"], **({"p": p} if p else {})}
    prog = linview.compile_file(HERE.parent / "examples" / example, dims=dims)
    rates = calibrate.Rates(**res["rates"]) if "rates" in res else None
    sizes = sorted({c["batch"] for c in res["cells"]})
    lines = ["| tolerance | " + " | ".join(f"batch {b}" for b in sizes) + " |",
             "|---" * (len(sizes) + 1) + "|"]
    tally = Tally()
    for tol in sorted({c["tolerance"] for c in res["cells"]}, reverse=True):
        row = [f"{tol:g}"]
        for b in sizes:
            c = next((c for c in res["cells"] if (c["tolerance"], c["batch"]) == (tol, b)), 0)
            if not c:
                row.append("not run")
                continue
            pred = solve_cost_report(prog, tol, b, res["damping"], rates=rates)[
                "views"][0]["prediction"]
            sp = cell_speedup(c)
            spread = ""
            if sp["low"] is None:  # recorded before the samples: the point's side only
                point = measured_side(sp["ratio"], sp["ratio"])
                side = f"no spread recorded, {sp['stat']}s' side: {point}"
            else:
                side = point = measured_side(sp["low"], sp["high"])
                spread = f" [{sp['low']:.2f}–{sp['high']:.2f}]"
            mark = tally.count(point, pred, recorded_spread=sp["low"] is not None)
            lo, hi = pred["band"]
            stat = sp.get("stat", "mean")
            row.append(f"{c['linview_per_batch'][stat] * 1e3:.3g} vs "
                       f"{c['warm_power_per_batch'][stat] * 1e3:.3g} ms: "
                       f"**{sp['ratio']:.2f}×**{spread} ({side}; predicted "
                       f"{pred['predicted_speedup']:.2f}× [{lo:.2f}–{hi:.2f}], "
                       f"{pred['verdict']}{', close call' if pred['close_call'] else ''}"
                       f"{mark}); L1 {c['l1_error']:.1e}, L∞ {c['linf_error']:.1e}, top-100 "
                       f"{'same' if c['top100_equal'] else 'differs'}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *tally.lines()]
    return "\n".join(lines)


# ------------------------------------------------------------ the laws (--laws)
def laws(args) -> dict:
    """The work counts the solver records against ``linview cost``'s laws: per tolerance
    and batch size a fresh load, then ``--min-batches`` batches, each followed by warm power
    iteration; per batch power iteration's steps, push's dense rounds (``stats["sweeps"]``)
    and the links its local rounds read.  No times: counts do not follow the load."""
    rng = np.random.default_rng(args.seed)
    n, d = args.nodes, args.damping
    src, dst = chung_lu(n, args.degree * n, rng)
    prog = linview.compile_file(HERE.parent / "examples" / "pagerank_solve.m")
    cells = []
    for tol in args.tolerances:
        for size in args.batches:
            M = StochasticMatrix(n, src, dst)
            views = prog.load(M=M, d=d, tolerance=tol)
            counts, x = views.solver("r").stats, np.array(views["r"]).ravel()
            steps, sweeps, links = [], [], []
            for _ in range(args.min_batches):
                before = dict(counts)
                views.update_edges("M", edge_batch(M, size, dst, rng))
                sweeps.append(counts["sweeps"] - before["sweeps"])
                links.append(counts["edges"] - before["edges"] - sweeps[-1] * M.nnz)
                x, k = power_iteration(M.sparse_part().tocsr(), M.dangling, d, x, tol * (1 - d))
                steps.append(k)
            cells.append({"tolerance": tol, "batch": size, "nnz": int(M.nnz),
                          "power_steps": steps, "dense_rounds": sweeps, "local_links": links})
            print(law_row(n, d, cells[-1]), flush=True)
    return {"graph": {"nodes": n, "edges": int(src.size), "seed": args.seed,
                      "generator": "Chung-Lu (2.1 out, 2.3 in)"}, "damping": d, "cells": cells}


def law_error(n: int, d: float, cell: dict, sweep_s: float, dense_s: float) -> dict:
    """The laws' counts for a recorded cell beside the recorded means, and ``priced``: the
    speedup the laws' counts give over the one the recorded counts give (both priced by
    :func:`linview.solve.cost.price` with a step of ``sweep_s`` and a dense round of
    ``dense_s``): the factor by which the laws alone move the prediction."""
    from linview.solve.cost import price, push_counts

    b, nnz = cell["batch"], cell["nnz"]
    law = push_counts(n, nnz, d, cell["tolerance"], b)
    got = {k: float(np.mean(cell[k])) for k in ("power_steps", "dense_rounds", "local_links")}
    a = price(law["steps"], law["sweeps"], law["links"], b, sweep_s, dense_s)
    m = price(got["power_steps"], got["dense_rounds"], got["local_links"], b, sweep_s, dense_s)
    return {"reduction": law["reduction"], "law": law, "recorded": got,
            "priced": (a[0] / a[1]) / (m[0] / m[1])}


def law_cells(res: dict) -> list[dict]:
    """The cells of a ``--laws`` result, or of a ``--table`` result as ``--laws`` records
    them (from its per-batch samples: dense rounds, local links, power-iteration steps)."""
    out = []
    for c in res["cells"]:
        if "samples" not in c:
            out.append(c)
            continue
        s = c["samples"]
        out.append({"tolerance": c["tolerance"], "batch": c["batch"], "nnz": c["nnz"],
                    "power_steps": s["power_steps"], "dense_rounds": s["sweeps"],
                    "local_links": [e - w * c["nnz"] for e, w in zip(s["edges"], s["sweeps"],
                                                                      strict=True)]})
    return out


def law_row(n: int, d: float, cell: dict, sweep_s: float | None = None) -> str:
    from linview.solve.cost import dense_round_seconds, sweep_bytes

    rates = calibrate.rates()
    sweep_s = sweep_s or sweep_bytes(n, cell["nnz"]) / rates.stream1_bytes
    e = law_error(n, d, cell, sweep_s, dense_round_seconds(n, cell["nnz"], rates))
    law, got = e["law"], e["recorded"]
    return (f"n {n} tol {cell['tolerance']:g} batch {cell['batch']:3d} (rho {e['reduction']:7.3g},"
            f" {len(cell['power_steps'])} batches): power steps {got['power_steps']:5.2f} law "
            f"{law['steps']:5.2f}; dense rounds {got['dense_rounds']:5.2f} law "
            f"{law['sweeps']:5.2f}; local links/nnz {got['local_links'] / cell['nnz']:.4f} law "
            f"{law['links'] / cell['nnz']:.4f}; priced {e['priced']:.2f}x")
