"""Which least-squares form ``load()`` should keep: the normal equations' error against
``lstsq``'s, and the stable form's time per update against Woodbury's (issue 25).

    python bench/ols_forms.py [--sizes 300,600,1000] [--tall 4000x1000] [--updates 20]

For each case, ``examples/ols.m`` (or ``beta = [ones(m,1) X] \\ y`` for the intercept
case) is loaded with ``least_squares="normal"`` (the Woodbury trigger) and ``"qr"`` (the
stable form); ``--updates`` row updates of X follow (one row replaced: ``X += e_i vᵀ``),
then ``--updates`` dense rank-1 updates (``X += u vᵀ``, u and v Gaussian, scaled to 1e-2
of X's entries), each timed (median).  The relative error of each form's beta, and of
``numpy.linalg.lstsq`` on the current data, is measured against a reference: the
corrected seminormal equations refined with residuals in ``np.longdouble`` (80-bit on
x86: about 3 more digits than float64), from lstsq's answer.  Printed with the
condition estimate and the predicted ratio that ``load()``'s rule reads
(``views.least_squares``, with ``least_squares="auto"``: the form it chose).

Cases: (a) square Gaussian X, Y = X·beta (consistent); (b) the tall Gaussian X of
``bench/db_bench.py`` with a random Y (large residual); (c) an intercept design over
correlated columns (each column a shared factor plus 1e-2 noise), y = Z·beta + 1e-3 noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402

INTERCEPT = """function beta = fit(X, y)
  %#linview dynamic X y
  m = length(y);
  Z = [ones(m, 1) X];
  beta = (Z' * Z) \\ (Z' * y);
end
"""


def reference(F: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The least-squares solution of F, Y to about ``cond(F)·1e-19``: corrected seminormal
    steps from lstsq's answer, residuals and ``Fᵀ r`` in long double."""
    R = np.linalg.qr(F, mode="r")
    x = np.linalg.lstsq(F, Y, rcond=None)[0].astype(np.longdouble)
    Fl, Yl = F.astype(np.longdouble), Y.astype(np.longdouble)
    for _ in range(6):
        g = (Fl.T @ (Yl - Fl @ x)).astype(float)
        z = np.linalg.solve(R.T, g)
        x = x + np.linalg.solve(R, z).astype(np.longdouble)
    return x.astype(float)


def rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def design(case: str, rng):
    if case.startswith("square"):
        n = int(case.split("-")[1])
        X = rng.standard_normal((n, n))
        return X, X @ rng.standard_normal((n, 1)), None
    if case.startswith("tall"):
        m, n = (int(s) for s in case.split("-")[1].split("x"))
        return rng.standard_normal((m, n)), rng.standard_normal((m, 1)), None
    m, n = (int(s) for s in case.split("-")[1].split("x"))
    X = rng.standard_normal((m, 1)) + 1e-2 * rng.standard_normal((m, n))
    Z = np.hstack([np.ones((m, 1)), X])
    return X, Z @ rng.standard_normal((n + 1, 1)) + 1e-3 * rng.standard_normal((m, 1)), Z


def run_case(case: str, updates: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X, Y, Z = design(case, rng)
    m, n = X.shape
    text = INTERCEPT if Z is not None else (HERE.parent / "examples" / "ols.m").read_text()
    ynames = ("y" if Z is not None else "Y")
    out: dict = {"case": case}
    auto = linview.compile(text, "fit" if Z is not None else "ols").load(**{"X": X, ynames: Y})
    out["auto_reason"] = str(getattr(auto, "least_squares", ""))
    del auto
    views = {form: linview.compile(text, "fit" if Z is not None else "ols",
                                   least_squares=form).load(**{"X": X, ynames: Y},
                                                            condition_limit=1e16)
             for form in ("normal", "qr")}
    times = {f"{form}_{kind}": [] for form in views for kind in ("row", "dense")}
    for kind in ("row", "dense"):
        for _ in range(updates):
            if kind == "row":
                u = np.zeros((m, 1))
                u[rng.integers(m), 0] = 1.0
                v = rng.standard_normal((n, 1))
            else:
                u, v = 1e-1 * rng.standard_normal((m, 1)), 1e-1 * rng.standard_normal((n, 1))
            for form, vw in views.items():  # interleaved: background load hits both
                t = time.perf_counter()
                vw.update("X", u, v)
                times[f"{form}_{kind}"].append(time.perf_counter() - t)
            X += u @ v.T
    F = np.hstack([np.ones((m, 1)), X]) if Z is not None else X
    ref = reference(F, Y)
    out["lstsq_error"] = rel(np.linalg.lstsq(F, Y, rcond=None)[0], ref)
    for form, vw in views.items():
        out[f"{form}_error"] = rel(vw["beta"], ref)
        stats = next(iter(getattr(vw, "solvers", {}).values()), None)
        if stats is not None:
            out[f"{form}_stats"] = dict(stats.stats)
    out["cond_F"] = float(np.linalg.cond(F))
    out.update({k: statistics.median(v) * 1e3 for k, v in times.items()})
    print(json.dumps(out), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="300,600,1000")
    ap.add_argument("--tall", default="4000x1000")
    ap.add_argument("--intercept", default="2000x200")
    ap.add_argument("--updates", type=int, default=20)
    args = ap.parse_args(argv)
    cases = [f"square-{n}" for n in args.sizes.split(",") if n] + \
        ([f"tall-{args.tall}"] if args.tall else []) + \
        ([f"intercept-{args.intercept}"] if args.intercept else [])
    results = [run_case(c, args.updates) for c in cases]
    (HERE / "results" / "ols_forms.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
