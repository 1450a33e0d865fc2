"""Two targets of `auto`, measured in blocks with their spread, beside the floor of each
update (bench/README.md, "OLS and A^16 against their floors").

* **OLS**, X n×n (``examples/ols.m``, p = 1): AUTO per update of X, for row updates (one
  observation changes: ``U = c·e_i``) and for dense rank-1 updates, against NumPy as
  written, ``np.linalg.solve(X.T @ X, X.T @ Y)``.  Target: 300×.
* **A^16**: a program ``D = A^16`` alone, AUTO per row update of A, against
  ``np.linalg.matrix_power(A, 16)``.  Target: 50×.

Each baseline is timed on one BLAS thread and on all of them, the faster compared (both
shown).  The stream is cut into blocks; before each block of updates the baseline runs
once on each thread setting (so a change in the machine's speed falls on both), with a
pause between (BLAS workers park).  What is still pending after the stream
(``views.flush()``) is added and its time shared among the updates.

The floor of one update: the bytes it must read at this machine's pass rate (one ``dgemv``
over an n×n matrix on all threads, timed here), or the flops of its thin products at the
``dgemm`` rate of a rank-64 update (timed here), whichever is larger, plus the flops of
adding its pending low-rank terms to the views (a ``dgemm`` of the same rate):

* OLS, row update: reads inv(XᵀX) once (Xᵀ U is a row of X); folds rank 2 into it.
* OLS, dense update: reads X (Xᵀ U) and inv(XᵀX); folds rank 1 into X and 2 into the
  inverse.
* A^16, row update: reads A (Aᵀ V), A², A⁴, A⁸ once each with 1, 3, 7 and 15 dense columns
  (the factor's e_i columns are gathers); folds rank 2, 4, 8, 16 into A², A⁴, A⁸, A¹⁶.

``python bench/targets_ols_a16.py --n 4000 --updates 16 --json bench/results/targets_n4000.json``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.linalg.blas as blas
from threadpoolctl import threadpool_limits

import linview
from linview.app.bench import machine, random_inputs, row_updates

POW16 = """function D = pow16(A)
  %#linview dims A(n,n)
  D = A^16;
end
"""
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
PAUSE_S = 0.2


def _stats(ts) -> dict:
    t = np.asarray(ts)
    return {"median_s": float(np.median(t)), "mean_s": float(t.mean()),
            "p10_s": float(np.percentile(t, 10)), "p90_s": float(np.percentile(t, 90)),
            "runs": len(ts)}


def rates(n: int, reps: int = 7) -> dict:
    """This machine now: one ``dgemv`` pass over an n×n matrix, and the rate of a rank-64
    ``dgemm`` update of it (a fold of pending terms), each the faster of all threads and
    one."""
    A = np.asfortranarray(np.random.default_rng(1).standard_normal((n, n)))
    x = np.ones(n)
    P = np.asfortranarray(np.random.default_rng(2).standard_normal((n, 64)) * 1e-30)

    def best(fn):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts))

    def fold():
        blas.dgemm(1.0, P, P, beta=1.0, c=A, trans_b=True, overwrite_c=True)

    out = {"pass_all_s": best(lambda: blas.dgemv(1.0, A, x)), "fold_all_s": best(fold)}
    with threadpool_limits(1):
        out["pass1_s"] = best(lambda: blas.dgemv(1.0, A, x))
        out["fold1_s"] = best(fold)
    # the floor takes the faster setting of each (a busy machine slows all threads)
    out["pass_s"] = min(out["pass_all_s"], out["pass1_s"])
    out["gemm_flops"] = 2 * n * n * 64 / min(out["fold_all_s"], out["fold1_s"])
    out["pass_bytes_per_s"] = 8 * n * n / out["pass_s"]
    return out


def floor(r: dict, n: int, passes: int, pass_columns: int, fold_rank: int) -> dict:
    """The floor of one update (see the module docstring): ``passes`` reads of an n×n
    view, ``pass_columns`` dense columns multiplied in them, ``fold_rank`` columns of
    pending terms added to views in all."""
    read_s = passes * r["pass_s"]
    flops_s = 2 * n * n * pass_columns / r["gemm_flops"]
    fold_s = 2 * n * n * fold_rank / r["gemm_flops"]
    return {"bytes": 8 * n * n * passes, "read_s": read_s, "pass_flops_s": flops_s,
            "fold_s": fold_s, "floor_s": max(read_s, flops_s) + fold_s}


def measure(views, x: str, stream, baseline, blocks: int) -> dict:
    """AUTO on ``stream`` (updates of ``x``) in ``blocks`` blocks, the baseline once on
    each thread setting before each block."""
    auto, one, every = [], [], []
    size = -(-len(stream) // blocks)
    for b, first in enumerate(range(0, len(stream), size)):
        order = (one, every) if b % 2 == 0 else (every, one)
        for ts in order:
            time.sleep(PAUSE_S)
            with threadpool_limits(1 if ts is one else None):
                t0 = time.perf_counter()
                baseline()
                ts.append(time.perf_counter() - t0)
        time.sleep(PAUSE_S)
        for U, V in stream[first:first + size]:
            t0 = time.perf_counter()
            views.update(x, U, V)
            auto.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    views.flush()
    share = (time.perf_counter() - t0) / len(auto)
    auto = [t + share for t in auto]
    base = {"one_thread": _stats(one), "all_threads": _stats(every)}
    fast = min(base.values(), key=lambda s: s["median_s"])
    return {"auto": _stats(auto), "baseline": base, "baseline_s": fast["median_s"],
            "speedup": fast["median_s"] / float(np.mean(auto)),
            "flush_s": share * len(auto), "switches": views.stats.get("switches", [])}


def ols(n: int, updates: int, blocks: int, r: dict, dense: bool) -> dict:
    prog = linview.compile_file(os.path.join(EXAMPLES, "ols.m"),  # the Woodbury trigger
                                dims={"m": n, "n": n, "p": 1}, least_squares="normal")
    rng = np.random.default_rng(26)
    inputs = random_inputs(prog, rng)
    stream = row_updates((n, n), updates, 1, rng, 0.1)
    if dense:  # the same V, U a dense column
        stream = [(rng.standard_normal((n, 1)) / np.sqrt(n), V) for _, V in stream]
    views = prog.load(**inputs)
    X, Y = views["X"], views["Y"]  # the module's own inputs, updated in place

    def as_written():
        return np.linalg.solve(X.T @ X, X.T @ Y)

    res = measure(views, "X", stream, as_written, blocks)
    want = np.linalg.solve(views["X"].T @ views["X"], views["X"].T @ views["Y"])
    res["max_rel_error"] = float(np.abs(views["beta"] - want).max() / np.abs(want).max())
    # row: one read of the inverse, 3 columns (V, Xᵀu, the probe's), rank 2 folded;
    # dense: X and the inverse, rank 1 and 2 folded
    res["floor"] = floor(r, n, 2 if dense else 1, 4 if dense else 3, 3 if dense else 2)
    res["threads"] = dict(views._threads)
    return res


def pow16(n: int, updates: int, blocks: int, r: dict) -> dict:
    prog = linview.compile(POW16, name="pow16", dims={"n": n})
    rng = np.random.default_rng(16)
    inputs = random_inputs(prog, rng)
    stream = row_updates((n, n), updates, 1, rng, 0.1)
    views = prog.load(**inputs)
    A = views["A"]

    res = measure(views, "A", stream, lambda: np.linalg.matrix_power(A, 16), blocks)
    want = np.linalg.matrix_power(views["A"], 16)
    res["max_rel_error"] = float(np.abs(views["D"] - want).max() / np.abs(want).max())
    res["floor"] = floor(r, n, 4, 1 + 3 + 7 + 15, 2 + 4 + 8 + 16)
    res["threads"] = dict(views._threads)
    return res


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def table(res: dict) -> list[str]:
    lines = ["| update | baseline (1 thread / all) | AUTO median (p10–p90), mean | speedup "
             "| target | AUTO time for it | floor: read + fold | ÷floor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, target in (("ols_row", 300), ("ols_dense", 300), ("pow16_row", 50)):
        if name not in res:
            continue
        r = res[name]
        b, a, f = r["baseline"], r["auto"], r["floor"]
        lines.append(
            f"| {name} | {_ms(b['one_thread']['median_s'])} / "
            f"{_ms(b['all_threads']['median_s'])} | {_ms(a['median_s'])} "
            f"({_ms(a['p10_s'])}–{_ms(a['p90_s'])}), {_ms(a['mean_s'])} | "
            f"{r['speedup']:.0f}× | {target}× | {_ms(r['baseline_s'] / target)} | "
            f"{_ms(f['floor_s'])}: {_ms(max(f['read_s'], f['pass_flops_s']))} + "
            f"{_ms(f['fold_s'])} | {a['mean_s'] / f['floor_s']:.1f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--updates", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--only", choices=("ols", "pow16"), default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    r = rates(a.n)
    print(f"pass over {a.n}²: {_ms(r['pass_all_s'])} on all threads, {_ms(r['pass1_s'])} "
          f"on one ({r['pass_bytes_per_s'] / 1e9:.0f} GB/s); rank-64 update "
          f"{r['gemm_flops'] / 1e9:.0f} GFlop/s", flush=True)
    res = {"n": a.n, "updates": a.updates, "blocks": a.blocks, "machine": machine(),
           "rates": r, "load_avg_start": os.getloadavg()}
    if a.only in (None, "ols"):
        res["ols_row"] = ols(a.n, a.updates, a.blocks, r, dense=False)
        res["ols_dense"] = ols(a.n, a.updates, a.blocks, r, dense=True)
    if a.only in (None, "pow16"):
        res["pow16_row"] = pow16(a.n, a.updates, a.blocks, r)
    res["load_avg_end"] = os.getloadavg()
    print("\n".join(table(res)))
    print(f"load average {res['load_avg_start'][0]:.1f} -> {res['load_avg_end'][0]:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
