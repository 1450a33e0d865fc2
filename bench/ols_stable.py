"""Stable mode against the inverse path: accuracy in the near-singular scenario and speed.

    python bench/ols_stable.py [--m 4000 --n 400 --updates 30]
    python bench/ols_stable.py --target 4000 [--target-updates 1000] [--updates 30]
    python bench/ols_stable.py --kernels 4000

``--kernels N`` times each pass of the stable form at N×N (``seminormal_kernels.py`` on
1 and 2 threads, and the BLAS/LAPACK calls they replaced).  ``--target N`` runs issue 25's
targets instead: (1) OLS (``examples/ols.m``, as written)
on an N×N Gaussian X, Y = X·beta: ``load()`` refuses the normal equations (condition
estimate of XᵀX about 2e10 at N = 4000) and keeps the problem by updates of the Cholesky
factor; ``--target-updates`` updates of one row of X and the matching entry of Y follow,
then the relative error of beta against the exact one, for linview and for
``numpy.linalg.lstsq`` on the current data; (2) the time per row update of X of the stable
form (``least_squares="qr"``) against the Woodbury trigger (``examples/ols.m``) on
well-conditioned data (X = randn + 2·sqrt(N)·I), both in this process, ``--updates`` each,
interleaved (each change applied to one, then the other: background load hits both).

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


def row_change(r, m: int, n: int):
    u = np.zeros((m, 1))
    u[r.integers(m)] = 1.0
    return u, 0.1 * r.standard_normal((n, 1))


def target(n: int, updates: int, speed_updates: int) -> dict:
    rng = np.random.default_rng(25)
    X = rng.standard_normal((n, n))
    beta = rng.standard_normal((n, 1))
    Y = X @ beta
    t = time.perf_counter()
    views = linview.compile_file(HERE.parent / "examples" / "ols.m").load(X=X, Y=Y)
    out = {"n": n, "load_s": time.perf_counter() - t, "form": type(views).__name__,
           "why": getattr(views, "least_squares", "")}
    print(f"n = {n}: loaded in {out['load_s']:.1f} s as {out['form']}: {out['why']}",
          flush=True)
    ts = []
    for k in range(updates):
        u, v = row_change(rng, n, n)
        t = time.perf_counter()
        views.update("X", u, v)
        views.update("Y", u, v.T @ beta)
        ts.append(time.perf_counter() - t)
        X += u @ v.T
        Y += u @ (v.T @ beta)
        if (k + 1) % 100 == 0:
            print(f"  {k + 1} updates, median {np.median(ts) * 1e3:.0f} ms", flush=True)
    ours = float(np.linalg.norm(views["beta"] - beta) / np.linalg.norm(beta))
    lstsq = float(np.linalg.norm(np.linalg.lstsq(X, Y, rcond=None)[0] - beta)
                  / np.linalg.norm(beta))
    stats = next(iter(getattr(views, "solvers", {}).values()), None)
    out.update(updates=updates, error=ours, lstsq_error=lstsq, ratio=ours / lstsq,
               update_median_s=float(np.median(ts)) if ts else None,
               solver_stats=dict(stats.stats) if stats is not None else None)
    print(f"after {updates} updates: error {ours:.2e}, lstsq {lstsq:.2e} (ratio "
          f"{ours / lstsq:.2f}); X+Y update median {np.median(ts) * 1e3:.0f} ms", flush=True)
    del views, X, Y
    W = np.random.default_rng(7).standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n)
    Yw = np.random.default_rng(8).standard_normal((n, 1))
    loaded = {}
    for name, form in (("stable", "qr"), ("woodbury", "normal")):
        prog = linview.compile_file(HERE.parent / "examples" / "ols.m", least_squares=form)
        loaded[name] = prog.load(X=W, Y=Yw)
    r2, ts = np.random.default_rng(1), {name: [] for name in loaded}
    for _ in range(speed_updates):  # interleaved: a burst of other work hits both alike
        u, v = row_change(r2, n, n)
        for name, views in loaded.items():
            t = time.perf_counter()
            views.update("X", u, v)
            ts[name].append(time.perf_counter() - t)
    for name, views in loaded.items():
        t = np.array(ts[name])
        out[name] = {"form": type(views).__name__, "median": float(np.median(t)),
                     "p10": float(np.percentile(t, 10)), "p90": float(np.percentile(t, 90))}
        print(f"well-conditioned, {name} ({out[name]['form']}): "
              f"{out[name]['median'] * 1e3:.1f} ms per row update of X (p10 "
              f"{out[name]['p10'] * 1e3:.1f}, p90 {out[name]['p90'] * 1e3:.1f})", flush=True)
    out["paired_ratio_median"] = float(np.median(np.array(ts["stable"])
                                                 / np.array(ts["woodbury"])))
    print(f"median of the paired ratios (same change, one after the other): "
          f"{out['paired_ratio_median']:.2f}")
    del loaded
    out["speed_ratio"] = out["stable"]["median"] / out["woodbury"]["median"]
    print(f"ratio stable/woodbury: {out['speed_ratio']:.2f}")
    return out


def kernels(n: int) -> dict:
    """Each pass of the stable form at n×n, min and median of 7 calls: the one-pass kernels
    on 1 and 2 threads against what they replaced (BLAS's two passes for ``Fᵀ(Y - F X)``,
    LAPACK's ``dtrsv`` for the backward solve)."""
    import numba
    import scipy.linalg

    from linview.solve import seminormal_kernels as K

    rng = np.random.default_rng(7)
    F = rng.standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n)
    L = np.asfortranarray(np.linalg.cholesky(F.T @ F))
    Y, Xt, z = rng.standard_normal((n, 1)), rng.standard_normal((1, n)), np.ones(n)
    Ff = np.asfortranarray(F)

    def timed(f):
        f()
        ts = []
        for _ in range(7):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return {"min_ms": min(ts) * 1e3, "median_ms": float(np.median(ts)) * 1e3}

    def ud(t):
        return lambda: K.update_downdate(L, 1e-3 * np.ones(n), 1e-3 * np.ones(n), np.ones(n),
                                         True, t)

    out = {"blas_two_passes": timed(lambda: Ff.T @ (Y - Ff @ Xt.T)),
           "dtrsv": timed(lambda: scipy.linalg.solve_triangular(L, z, lower=True, trans="T",
                                                                check_finite=False))}
    for t in (1, 2):
        numba.set_num_threads(K.threads_for(t))
        out[f"residual_gradient_{t}"] = timed(
            lambda t=t: K.residual_gradient(F, Y, Xt, t, np.zeros(0)))
        out[f"update_downdate_{t}"] = timed(ud(t))
        out[f"solve_lower_t_{t}"] = timed(lambda: K.solve_lower_t(L, z.copy()))
    for k, v in out.items():
        print(f"{k:22} {v['min_ms']:7.2f} ms (median {v['median_ms']:.2f})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4000)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--target", type=int, default=0, help="issue 25's targets at N×N")
    ap.add_argument("--target-updates", type=int, default=1000)
    ap.add_argument("--kernels", type=int, default=0, help="time each pass at N×N")
    args = ap.parse_args(argv)
    if args.kernels:
        kernels(args.kernels)
        return 0
    if args.target:
        res = target(args.target, args.target_updates, args.updates)
        out = HERE / "results" / f"ols_target_n{args.target}.json"
        out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"written {out}")
        return 0
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
