"""Stable mode against the inverse path: accuracy in the near-singular scenario and speed.

    python bench/ols_stable.py [--m 4000 --n 400 --updates 30]

Accuracy: X is 40×10, column 1 is driven towards column 0 (ε = 1e-9, 1e-5, 1e-1), then
separated again and replaced by a fresh random column; after each change the relative
error of beta against a 50-digit solve (mpmath) is printed for ``examples/ols_stable.m``
(``%#linview solve cholesky``), ``examples/ols.m`` (Woodbury on inv(X'X)) and NumPy's
``lstsq`` (re-solved); when the inverse path refuses a change (its condition check), it is
loaded again from the data at the next step.  Speed: random row changes of an m×n X,
median time per update of both programs in the same run, with p10/p90.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import mpmath
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402


def exact(X, Y):
    with mpmath.workdps(50):
        Xm = mpmath.matrix(X.tolist())
        b = mpmath.lu_solve(Xm.T * Xm, Xm.T * mpmath.matrix(Y.tolist()))
        return np.array([float(v) for v in b]).reshape(-1, 1)


def accuracy(rng) -> list[dict]:
    m, n = 40, 10
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    stable = linview.compile_file(HERE.parent / "examples" / "ols_stable.m").load(X=X, Y=Y)
    ols = linview.compile_file(HERE.parent / "examples" / "ols.m")
    inverse = ols.load(X=X, Y=Y)
    w = rng.standard_normal(m)
    w /= np.linalg.norm(w)
    steps = [(f"eps={e:g}", X[:, 0] + e * w) for e in (1e-9, 1e-5, 1e-1)]
    steps += [("separated", X[:, 0] + 0.5 * rng.standard_normal(m)),
              ("fresh column", rng.standard_normal(m))]
    rows = []
    for label, new in steps:
        u, v = new - X[:, 1], np.eye(n)[:, 1]
        stable.update("X", u, v)
        inv_beta = None
        try:
            if inverse is None:  # refused before: loaded again from the data, as a user would
                inverse = ols.load(X=np.where(np.arange(n) == 1, new[:, None], X), Y=Y)
            else:
                inverse.update("X", u, v)
            inv_beta = np.array(inverse["beta"])
        except linview.LinviewError as e:
            inverse = None
            print(f"  {label}: inverse path refused: {e.message}")
        X[:, 1] = new
        ref = exact(X, Y)

        def rel(b, ref=ref):
            return None if b is None else float(np.linalg.norm(b - ref) / np.linalg.norm(ref))

        rows.append({"step": label, "cond": float(np.linalg.cond(X)),
                     "cholesky": rel(stable["beta"]), "inverse": rel(inv_beta),
                     "lstsq": rel(np.linalg.lstsq(X, Y, rcond=None)[0])})
    return rows


def speed(rng, m: int, n: int, updates: int) -> dict:
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    out = {}
    for name in ("ols_stable", "ols"):
        views = linview.compile_file(HERE.parent / "examples" / f"{name}.m",
                                     dims={"m": m, "n": n, "p": 1}).load(X=X, Y=Y)
        r2 = np.random.default_rng(1)
        ts = []
        for _ in range(updates):
            u = np.zeros(m)
            u[r2.integers(m)] = 1.0
            v = 0.1 * r2.standard_normal(n)
            t = time.perf_counter()
            views.update("X", u, v)
            ts.append(time.perf_counter() - t)
        ts = np.array(ts)
        out[name] = {"median": float(np.median(ts)), "p10": float(np.percentile(ts, 10)),
                     "p90": float(np.percentile(ts, 90))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4000)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--updates", type=int, default=30)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(11)
    acc = accuracy(rng)
    print(f"{'step':14} {'cond(X)':>9} {'cholesky':>10} {'inverse':>10} {'lstsq':>10}")
    for r in acc:
        cells = [f"{r[k]:10.1e}" if r[k] is not None else f"{'refused':>10}"
                 for k in ("cholesky", "inverse", "lstsq")]
        print(f"{r['step']:14} {r['cond']:9.1e} " + " ".join(cells))
    sp = speed(rng, args.m, args.n, args.updates)
    for k, s in sp.items():
        print(f"{k}: {s['median'] * 1e3:.2f} ms per row update (p10 {s['p10'] * 1e3:.2f}, "
              f"p90 {s['p90'] * 1e3:.2f}) at X {args.m}x{args.n}")
    print(f"ratio stable/inverse: {sp['ols_stable']['median'] / sp['ols']['median']:.2f}")
    out = HERE / "results" / "ols_stable.json"
    out.write_text(json.dumps({"accuracy": acc, "speed": sp, "m": args.m, "n": args.n},
                              indent=2) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
