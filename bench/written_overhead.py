"""The work a NumPy module does around the program as written on each update, against
the same work of ``linview bench``'s baseline: the program itself is replaced by its
result (computed once), so that what is timed is the rest (the update's checks, the
input's update ``X += U Vᵀ`` with what restores it, the views' checks, the warnings
wrapper, the BLAS thread limits, the adaptive bookkeeping).

    python bench/written_overhead.py [--n 2000] [--program examples/pagerank.m]
    python bench/written_overhead.py --program tests/programs/cg_steps.m \
                                     --shapes A=2000x2000,b=2000x1

Prints microseconds per update (the fastest and the median of 20 blocks of 100 rank-1
row updates) for AUTO switched to re-evaluation (``_run_written``) and for the baseline
(``views.reevaluate_update`` of the program compiled ``--model written --strategy
reeval``).  Without ``--shapes`` the program must take ``M`` (n×n) and ``r0`` (n×1) and
a scalar ``d``, as ``examples/pagerank.m`` does; with it, any program, on random inputs of
those shapes (``linview bench``'s), its first dynamic input updated.  A program compiled
as written (no iterative model: ``cg_steps.m``) has no ``_evaluate_written``; there both
modules re-run ``_evaluate``, replaced alike.
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
    ap.add_argument("--shapes", help="the inputs' shapes, e.g. A=2000x2000,b=2000x1")
    a = ap.parse_args(argv)
    n, rng = a.n, np.random.default_rng(0)
    if a.shapes:
        from linview.app.bench import random_inputs

        shapes = tuple((k, *map(int, v.split("x"))) for k, v in
                       (kv.split("=") for kv in a.shapes.split(",")))
        opts = {"shapes": shapes}
        given = random_inputs(linview.compile_file(a.program, **opts), rng)
    else:
        M = np.abs(rng.standard_normal((n, n)))
        M /= M.sum(0)
        opts = {"dims": {"n": n}}
        given = {"M": M, "r0": np.ones((n, 1)) / n, "d": 0.85}

    auto = linview.compile_file(a.program, **opts).load(
        **{k: np.copy(v) for k, v in given.items()})
    x = type(auto).DYNAMIC[0]
    rows = np.shape(given[x])
    U, V = np.zeros((rows[0], 1)), rng.standard_normal((rows[1], 1)) * 1e-9
    U[3, 0] = 1.0
    auto.adaptation.mode[x] = "reeval"  # as after a switch: the program as written
    print(f"AUTO's re-evaluation on {auto._trigger_threads(x) or 'all'} BLAS threads")
    method = "_evaluate_written" if hasattr(auto, "_evaluate_written") else "_evaluate"
    result = getattr(auto, method)(auto.dims, {k: auto._view(k) for k in auto.INPUTS})
    setattr(auto, method, lambda d, inputs: dict(result))

    base = linview.compile_file(a.program, **opts, model="written",
                                strategy="reeval").load(**{k: np.copy(v) for k, v in given.items()})
    every = base._evaluate(base.dims, {k: base._view(k) for k in base.INPUTS})
    base._evaluate = lambda d, inputs: dict(every)

    for name, step in (("auto (as written)", lambda: auto.update(x, U, V)),
                       ("baseline (reeval)", lambda: base.reevaluate_update(x, U, V))):
        fast, median = _timed(step)
        print(f"{name:20s} {fast * 1e6:7.1f} us fastest, {median * 1e6:7.1f} us median "
              "per update around the program")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
