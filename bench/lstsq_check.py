"""What the rule of ``least_squares="auto"`` costs during updates (issue 25): one check of
:mod:`linview.lstsq_switch` (κ by power iterations on the views in place) against a row
update of the normal form it watches.

    python bench/lstsq_check.py [--shape 4000x1000] [--updates 40]

``examples/ols.m``'s program on a Gaussian X (well conditioned: the normal form is kept),
``--updates`` row updates timed (median of all but the first five), then three checks
(the fastest).  Prints both, the check in row updates, and its share of the update time
at one check every ``lstsq_switch.CHECK_EVERY`` updates.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import linview
from linview import lstsq_switch

OLS = "function beta = ols(X, Y)\n  %#linview dynamic X Y\n  beta = (X' * X) \\ (X' * Y);\nend\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4000x1000")
    ap.add_argument("--updates", type=int, default=40)
    args = ap.parse_args()
    m, n = (int(s) for s in args.shape.split("x"))
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    views = linview.compile(OLS, name="ols").load(X=X, Y=Y)
    times = []
    for i in range(args.updates):
        u = np.zeros(m)
        u[i % m] = 1.0
        t = time.perf_counter()
        views.update("X", u, 0.01 * rng.standard_normal(n))
        times.append(time.perf_counter() - t)
    update = float(np.median(times[5:]))
    check = []
    for _ in range(3):
        t = time.perf_counter()
        lstsq_switch.check(views)
        check.append(time.perf_counter() - t)
    c = min(check)
    every = lstsq_switch.CHECK_EVERY
    print(f"{m}x{n}: row update {update * 1e3:.2f} ms (median), check {c * 1e3:.1f} ms = "
          f"{c / update:.1f} updates; one check per {every} updates: "
          f"{c / (every * update) * 100:.1f}% of the update time")


if __name__ == "__main__":
    main()
