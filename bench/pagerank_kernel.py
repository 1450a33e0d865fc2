"""Push's dense round against a step of SciPy power iteration, on one graph: where the
dense round's speed comes from (one pass instead of a product and six more, and the
machine's cores).

    python bench/pagerank_kernel.py --nodes 1000000

times, on a Chung–Lu graph (as ``bench/pagerank_graph.py``), best and median of
``--repeat``:

* ``scipy_step``: one step of :func:`pagerank_graph.power_iteration` (SciPy's CSR product,
  one thread, and its passes over the iterate);
* ``numpy_round``: a dense round as push made it before :mod:`linview.solve.sweep_kernel`
  (SciPy's product, then the scaling, the L1 sum and the count above a threshold);
* ``kernel_1`` and ``kernel_<cores>``: the one-pass kernel on one thread and on every core;

and ``linview cost``'s price of a dense round (:func:`linview.solve.cost.
dense_round_seconds`, the machine's calibrated rates) beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from pagerank_graph import chung_lu

from linview.compiler import calibrate
from linview.solve import cost, sweep_kernel
from linview.solve.stochastic import StochasticMatrix


def timed(f, repeat: int) -> dict:
    f()  # compile, warm the caches
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return {"best_s": min(ts), "median_s": float(np.median(ts)),
            "p90_s": float(np.percentile(ts, 90))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=int, default=10)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n, d = args.nodes, 0.85
    M = StochasticMatrix(n, *chung_lu(n, args.degree * n, rng))
    S, dang = M.sparse_part().tocsr(), np.flatnonzero(M.dangling)
    v = rng.random(n) / n
    out, theta = np.empty(n), 1e-9

    def scipy_step():
        y = d * (S @ v) + (d * v[dang].sum() / n + (1 - d) / n)
        return np.abs(y - v).sum()

    def numpy_round():
        r = d * (S @ v + v[dang].sum() / n)
        return np.abs(r).sum(), np.flatnonzero(np.abs(r) > theta).size

    cores = os.cpu_count() or 1
    res = {"nodes": n, "links": int(M.nnz), "cores": cores,
           "scipy_step": timed(scipy_step, args.repeat),
           "numpy_round": timed(numpy_round, args.repeat)}
    for t in sorted({1, cores}):
        res[f"kernel_{t}"] = timed(lambda t=t: M.sweep(v, d, theta, out, t), args.repeat)
    rates = calibrate.rates()
    res["priced_s"] = cost.dense_round_seconds(n, int(M.nnz), rates)
    res["priced_kernel_s"] = cost.kernel_seconds(n, int(M.nnz), rates)
    res["rows_per_block"] = sweep_kernel.ROWS
    for k, r in res.items():
        if isinstance(r, dict):
            print(f"{k:12s} best {r['best_s'] * 1e3:7.2f} ms, median {r['median_s'] * 1e3:7.2f}"
                  f" ms, p90 {r['p90_s'] * 1e3:7.2f} ms")
    print(f"priced: the kernel on every core {res['priced_kernel_s'] * 1e3:.2f} ms, a dense "
          f"round (the kernel and {cost.DENSE_PASSES} passes) {res['priced_s'] * 1e3:.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
