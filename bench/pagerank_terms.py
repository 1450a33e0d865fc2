"""Which term of ``linview cost``'s prediction is off in a recorded ``--table`` result: the
work counts against the laws, or the seconds per unit of work against the calibrated rates.

    python bench/pagerank_graph.py --check-laws \
        bench/results/pagerank_table_n1000000_seed12_means.json

prints the laws' rows (``pagerank_table.law_row``) and then, from the per-batch samples
and the rates recorded with the run (:func:`terms`):

* a step of power iteration as it ran (its cell's total time over its total steps) against
  the step ``linview cost`` prices (:func:`linview.solve.cost.sweep_bytes` at the recorded
  streaming rate);
* a least-squares fit, over every batch of the table, of push's time less its per-batch and
  per-change seconds as ``links·t_link + dense_rounds·D·step``: the seconds of a local
  round's link and a dense round in steps of its cell, then over the dense round
  ``linview cost`` prices (:func:`linview.solve.cost.dense_round_seconds`; the band allows
  :data:`~linview.solve.cost.DENSE_SPREAD`);
* per cell the measured ratio of means beside three predictions: the model's (laws and
  prices), the recorded counts priced by the model (only the laws replaced: what is left
  is the prices' error), and the recorded counts priced with the measured step and the
  fitted dense round (what is left is what the model does not describe at all).
"""

from __future__ import annotations

import numpy as np

from linview.compiler import calibrate
from linview.solve import cost


def terms(res: dict) -> dict:
    """The seconds terms of a ``--table`` result (see the module docstring)."""
    n, nnz, d = res["graph"]["nodes"], res["graph"]["edges"], res["damping"]
    p = res.get("seed_columns") or 1
    rates = calibrate.Rates(**res["rates"])
    sweep_s = cost.sweep_bytes(n, nnz, p) / rates.stream1_bytes + cost.STEP_PASSES * rates.call_s
    dense_s = cost.dense_round_seconds(n, nnz, rates)
    rows, ys, cells = [], [], []
    for c in res["cells"]:
        s = c["samples"]
        b, steps = c["batch"], np.asarray(s["power_steps"], float)
        step = float(np.sum(s["power_s"]) / steps.sum())
        dense = np.asarray(s["sweeps"], float)
        links = np.asarray(s["edges"], float) - dense * c["nnz"]
        push = np.asarray(s["linview_s"], float) - cost.PUSH_FIXED_S - b * cost.PUSH_CHANGE_S
        rows += [[li, w * step] for li, w in zip(links, dense, strict=True)]
        ys += list(push)
        cells.append({"tolerance": c["tolerance"], "batch": b, "step_s": step,
                      "steps": steps.mean(), "dense": dense.mean(), "links": links.mean(),
                      "measured": float(np.sum(s["power_s"]) / np.sum(s["linview_s"]))})
    (link_s, dense_steps), *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    step_mean = float(np.mean([c["step_s"] for c in cells]))
    for c in cells:
        model = cost.predict_push(n, nnz, d, c["tolerance"], c["batch"], sweep_s, dense_s)
        counts = cost.price(c["steps"], c["dense"], c["links"], c["batch"], sweep_s, dense_s)
        ran = cost.price(c["steps"], c["dense"], c["links"], c["batch"], c["step_s"],
                         dense_steps * c["step_s"])
        c.update(model=model["predicted_speedup"], counts_priced=counts[0] / counts[1],
                 counts_and_seconds=ran[0] / ran[1], reduction=model["reduction"])
    return {"nodes": n, "step_priced_s": sweep_s, "dense_priced_s": dense_s,
            "link_s": float(link_s), "dense_steps": float(dense_steps),
            "dense_ratio": float(dense_steps * step_mean / dense_s), "cells": cells}


def terms_text(res: dict) -> str:
    t = terms(res)
    steps = [c["step_s"] for c in t["cells"]]
    lines = [f"a step of power iteration: {min(steps) * 1e3:.3g}-{max(steps) * 1e3:.3g} ms as "
             f"it ran, {t['step_priced_s'] * 1e3:.3g} ms priced (recorded rates); fitted over "
             f"the batches: a local round's link {t['link_s'] * 1e9:.0f} ns, a dense round "
             f"{t['dense_steps']:.2f} steps = {t['dense_ratio']:.2f} times the "
             f"{t['dense_priced_s'] * 1e3:.3g} ms priced (model: "
             f"{cost.LOCAL_LINK_S * 1e9:.0f} ns a link, dense rounds within "
             f"{cost.DENSE_SPREAD[0]}-{cost.DENSE_SPREAD[1]} times the price)"]
    for c in t["cells"]:
        lines.append(f"tol {c['tolerance']:g} batch {c['batch']:3d} (rho {c['reduction']:7.3g}):"
                     f" measured {c['measured']:6.2f}x; predicted {c['model']:6.2f}x, recorded"
                     f" counts priced {c['counts_priced']:6.2f}x, recorded counts and seconds "
                     f"{c['counts_and_seconds']:6.2f}x")
    return "\n".join(lines)
