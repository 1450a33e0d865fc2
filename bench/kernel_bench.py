"""The thin products of one large view, three ways, on one BLAS thread.

For an n×n Fortran-ordered W and blocks of ``kn`` columns (``W·B``) and ``kt`` columns
(``Wᵀ·C``): linview's one-pass kernel (``backends/numpy/fused.py``), one ``dgemv`` per
column over 4 MB column panels while each panel is in cache (the kernel before it), and
NumPy's products (one thin ``dgemm`` per kind).  The memory floor is one matrix-vector
pass over W.  Each case is timed alternately in one process; reported: median and p10–p90.

    python bench/kernel_bench.py [--n 4000] [--reps 9] [--json bench/results/kernel.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.linalg.blas as blas
from threadpoolctl import threadpool_limits

from linview.app.bench import machine
from linview.backends.numpy import fused

CASES = [(0, 1), (0, 2), (0, 3), (2, 2), (0, 4), (3, 0), (4, 4), (8, 8)]
PANEL_BYTES = 4 << 20


def panel_gemv(A, BN, BT):
    """One ``dgemv`` per column over each 4 MB column panel of A while it is in cache."""
    rows, cols = A.shape
    outN = None if BN is None else np.zeros((rows, BN.shape[1]), order="F")
    outT = None if BT is None else np.empty((cols, BT.shape[1]), order="F")
    tcols = [] if BT is None else [np.ascontiguousarray(c) for c in BT.T]
    ncols = [] if BN is None else [np.ascontiguousarray(c) for c in BN.T]
    step = max(8, PANEL_BYTES // (8 * rows))
    for j in range(0, cols, step):
        panel = A[:, j:j + step]
        for c, t in enumerate(tcols):
            outT[j:j + step, c] = blas.dgemv(1.0, panel, t, trans=1)
        for c, v in enumerate(ncols):
            blas.dgemv(1.0, panel, v[j:j + step], beta=1.0, y=outN[:, c], overwrite_y=1)
    return outN, outT


def numpy_products(A, BN, BT):
    return (None if BN is None else A @ BN, None if BT is None else A.T @ BT)


def _stats(ts: list[float]) -> dict:
    return {"median_s": float(np.median(ts)), "p10_s": float(np.percentile(ts, 10)),
            "p90_s": float(np.percentile(ts, 90))}


def run(n: int, reps: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.standard_normal((n, n)))
    ways = {"one_pass": fused.pass_dot, "panel_gemv": panel_gemv, "numpy": numpy_products}
    out = {"n": n, "reps": reps, "machine": machine(), "cases": []}
    with threadpool_limits(1):
        v = rng.standard_normal(n)
        floor = []
        for _ in range(reps):
            t = time.perf_counter()
            blas.dgemv(1.0, A, v, trans=1)
            floor.append(time.perf_counter() - t)
        out["floor"] = _stats(floor)
        for kn, kt in CASES:
            BN = rng.standard_normal((n, kn)) if kn else None
            BT = rng.standard_normal((n, kt)) if kt else None
            want = numpy_products(A, BN, BT)
            times: dict[str, list[float]] = {w: [] for w in ways}
            for _ in range(reps):
                for name, f in ways.items():
                    t = time.perf_counter()
                    got = f(A, BN, BT)
                    times[name].append(time.perf_counter() - t)
                    for g, w in zip(got, want, strict=True):
                        assert (g is None) == (w is None)
                        if w is not None:
                            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-9)
            out["cases"].append({"kn": kn, "kt": kt,
                                 **{w: _stats(ts) for w, ts in times.items()}})
    return out


def table(res: dict) -> str:
    ms = 1e3
    f = res["floor"]
    lines = [f"n = {res['n']}, one BLAS thread; floor (one matrix-vector pass over W): "
             f"{ms * f['median_s']:.2f} ms ({ms * f['p10_s']:.2f}–{ms * f['p90_s']:.2f})", "",
             "| columns (W·B + Wᵀ·C) | one pass | ÷floor | dgemv per column, panels | "
             "NumPy (dgemm) |", "|---|---:|---:|---:|---:|"]
    for c in res["cases"]:
        cells = [f"{ms * c[w]['median_s']:.2f} ms ({ms * c[w]['p10_s']:.1f}–"
                 f"{ms * c[w]['p90_s']:.1f})" for w in ("one_pass", "panel_gemv", "numpy")]
        ratio = c["one_pass"]["median_s"] / f["median_s"]
        lines.append(f"| {c['kn']} + {c['kt']} | {cells[0]} | {ratio:.2f} | {cells[1]} | "
                     f"{cells[2]} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res = run(args.n, args.reps)
    print(table(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
