"""The check at the end of ``linview run``: a cheap probe by default, the exact one on
demand (``--verify``), with its predicted time said before it starts.

* **Probe** (always): for a trigger module, every maintained inverse ``W = inv(A)`` is
  probed afresh with one random vector ``z``: ``‖W (A z) − z‖ / ‖z‖``, two matrix-vector
  products per inverse (O(n²), a small fraction of one O(n²k) update); for solve views, the
  largest certified error bound of a solve view, from the residuals they keep.  A program
  with neither has nothing to probe (``"by": "none"``).
* **Verify** (``--verify``): ``views.verify()``, every view against a re-evaluation from
  the inputs: for a trigger module about the time of the first evaluation at ``load()``;
  for solve views a sparse LU of each solve view's matrix, whose fill-in on a graph can
  make it nearly dense (22 s at 5,000 nodes, ``docs/stopping.md``; it grows as n³).
"""

from __future__ import annotations

import time

import numpy as np

#: SuperLU on ``I - d M`` of a random graph (10 links per node) ran at 1/24 and 1/21 of
#: the calibrated one-core dgemm rate at 3,000 and 5,000 nodes (``docs/stopping.md``)
SPARSE_LU_SLOWDOWN = 22.0


def _mul(M, x: np.ndarray) -> np.ndarray:
    """``M x`` for a view as a trigger reads it: an array, a view with pending low-rank
    terms, or a Spark ``DistMatrix`` (each has ``dot``)."""
    return np.asarray(M.dot(x), dtype=float)


def probe(views, seed: int = 0) -> dict:
    """``{"by", "error", "ok", "seconds"}`` of the cheap check (module docstring)."""
    t0 = time.perf_counter()
    by, err, ok = "none", None, None
    solvers = getattr(views, "solvers", None)
    if solvers:
        by = "error bound"
        err = max(float(views.error_bound(name)) for name in solvers)
    else:
        prober = getattr(views, "_prober", None)
        pairs = dict(getattr(prober, "arg_of", {}))
        rng = np.random.default_rng(seed)
        errs, allowed = [], []
        for W, A in pairs.items():
            Wm, Am = views._current(W), views._current(A)
            if Wm is None or Am is None:  # A is not kept: its last probe stands
                last = views.probes.get(W)
                if last is not None:
                    errs.append(last["residual"])
                    allowed.append(last["allowed"])
                continue
            z = rng.standard_normal((Wm.shape[0], 1))
            with np.errstate(over="ignore", invalid="ignore"):
                r = np.linalg.norm(_mul(Wm, _mul(Am, z)) - z) / np.linalg.norm(z)
            errs.append(float(r) if np.isfinite(r) else float("inf"))
            last = views.probes.get(W, {})
            allowed.append(max(last.get("allowed", 0.0), getattr(views, "probe_tolerance",
                                                                   1e-8) or 1e-8))
        if errs:
            by, err = "probe", max(errs)
            ok = all(e <= a for e, a in zip(errs, allowed, strict=True))
    return {"by": by, "error": err, "ok": ok, "seconds": time.perf_counter() - t0}


def predicted_verify_seconds(views, eval_seconds: float | None) -> float | None:
    """What ``views.verify()`` should take: the first evaluation's time for a trigger
    module (it re-evaluates the same program); for solve views, a dense LU's flops
    ``(2/3) n³`` per solve view at the machine's one-core rate (an upper bound: a sparse
    LU of a graph fills in, and it runs on one core)."""
    solvers = getattr(views, "solvers", None)
    if not solvers:
        return eval_seconds
    from linview.compiler.calibrate import rates

    flops = sum(2 / 3 * float(s.X.shape[0]) ** 3 for s in solvers.values())
    return flops * SPARSE_LU_SLOWDOWN / rates().gemm1_flops


def verify(views, eval_seconds: float | None, say) -> dict:
    """Run ``views.verify()`` after saying (``say``) its predicted time."""
    guess = predicted_verify_seconds(views, eval_seconds)
    say("--verify: checking every view against a re-evaluation from the inputs, "
        + (f"predicted {_duration(guess)}" if guess is not None else "time not predicted")
        + "; Ctrl-C stops it, the state is saved already")
    t0 = time.perf_counter()
    err = float(views.verify())
    return {"error": err, "seconds": time.perf_counter() - t0, "predicted_seconds": guess}


def _duration(s: float) -> str:
    if s < 60:
        return f"about {s:.2g} s"
    if s < 3600:
        return f"about {s / 60:.0f} min"
    return f"about {s / 3600:.1f} h"
