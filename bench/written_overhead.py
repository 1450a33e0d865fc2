"""The work a NumPy module does around the program as written on each update, against
the same work of ``linview bench``'s baseline: the program itself is replaced by its
result (computed once), so that what is timed is the rest (the update's checks, the
input's update ``X += U Vᵀ`` with what restores it, the views' checks, the warnings
wrapper, the BLAS thread limits, the adaptive bookkeeping).

    python bench/written_overhead.py [--n 2000] [--program examples/pagerank.m]

Prints microseconds per update (the fastest and the median of 20 blocks of 100 rank-1
row updates) for AUTO switched to re-evaluation (``_run_written``) and for the baseline
(``views.reevaluate_update`` of the program compiled ``--model written --strategy
reeval``).  The program must take ``M`` (n×n) and ``r0`` (n×1) and a scalar ``d``, as
``examples/pagerank.m`` does.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import linview


def _timed(step, blocks: int = 20, per: int = 100) -> tuple[float, float]:
    for _ in range(50):
        step()
    ts = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(per):
            step()
        ts.append((time.perf_counter() - t0) / per)
    ts.sort()
    return ts[0], ts[len(ts) // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--program", default="examples/pagerank.m")
    a = ap.parse_args(argv)
    n, rng = a.n, np.random.default_rng(0)
    M = np.abs(rng.standard_normal((n, n)))
    M /= M.sum(0)
    given = {"M": M, "r0": np.ones((n, 1)) / n, "d": 0.85}
    U, V = np.zeros((n, 1)), rng.standard_normal((n, 1)) * 1e-9
    U[3, 0] = 1.0

    auto = linview.compile_file(a.program, dims={"n": n}).load(
        **{k: np.copy(v) for k, v in given.items()})
    auto.adaptation.mode["M"] = "reeval"  # as after a switch: the program as written
    result = auto._evaluate_written(auto.dims, {k: auto._view(k) for k in auto.INPUTS})
    auto._evaluate_written = lambda d, inputs: dict(result)

    base = linview.compile_file(a.program, dims={"n": n}, model="written",
                                strategy="reeval").load(**{k: np.copy(v) for k, v in given.items()})
    every = base._evaluate(base.dims, {k: base._view(k) for k in base.INPUTS})
    base._evaluate = lambda d, inputs: dict(every)

    for name, step in (("auto (as written)", lambda: auto.update("M", U, V)),
                       ("baseline (reeval)", lambda: base.reevaluate_update("M", U, V))):
        fast, median = _timed(step)
        print(f"{name:20s} {fast * 1e6:7.1f} us fastest, {median * 1e6:7.1f} us median "
              "per update around the program")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
