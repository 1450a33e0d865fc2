"""OLS on data too ill-conditioned for the normal equations (issue 25).

    python bench/ols_switch.py [--n 4000 --updates 1000] [--qr]

``examples/ols.m`` (``beta = (X' * X) \\ (X' * Y)``) on an n×n Gaussian X, whose Gram
matrix has a condition estimate over the default limit (about 2e10 at n = 4000): ``load()``
refuses ``inv(X'X)`` and keeps the least-squares problem by QR updates of X instead.  Y is
``X·beta`` (consistent), and each update changes one row of X and the matching entry of Y,
so the exact solution stays ``beta``.  After the updates the script prints the relative
error of linview's answer and of ``numpy.linalg.lstsq`` on the current data, both against
``beta``, their ratio, the load time and the median time per update (p10/p90).  ``--qr``
compiles with ``least_squares="qr"`` (for sizes whose data the normal equations accept).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--qr", action="store_true", help="QR updates whatever the condition")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.n
    X = rng.standard_normal((n, n))
    beta = rng.standard_normal((n, 1))
    Y = X @ beta
    prog = linview.compile_file(HERE.parent / "examples" / "ols.m",
                                least_squares="qr" if args.qr else "normal")
    t0 = time.perf_counter()
    views = prog.load(X=X, Y=Y)
    load_s = time.perf_counter() - t0
    print(f"n = {n}: loaded as {type(views).__name__} in {load_s:.1f} s")
    times = []
    for _ in range(args.updates):
        i = int(rng.integers(n))
        u = np.zeros((n, 1))
        u[i] = 1.0
        v = 0.1 * rng.standard_normal((n, 1))
        t0 = time.perf_counter()
        views.update("X", u, v)
        views.update("Y", u, v.T @ beta)
        times.append(time.perf_counter() - t0)
        X[i] += v[:, 0]
        Y[i] += float(v[:, 0] @ beta[:, 0])
    ours = np.linalg.norm(views["beta"] - beta) / np.linalg.norm(beta)
    theirs = np.linalg.norm(np.linalg.lstsq(X, Y, rcond=None)[0] - beta) / np.linalg.norm(beta)
    p10, p50, p90 = np.percentile(times, [10, 50, 90]) * 1e3
    print(f"after {args.updates} row updates: error {ours:.3g}, lstsq's {theirs:.3g}, "
          f"ratio {ours / theirs:.2f}")
    print(f"per update (X row and Y entry): median {p50:.1f} ms (p10 {p10:.1f}, p90 {p90:.1f})")


if __name__ == "__main__":
    main()
