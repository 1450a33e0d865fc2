"""The parts of a reused load at n×n (default 4000): what bounds the ridge-after-OLS
speedup and what is left of a resumed load (``bench/README.md``, program edits).

Each part is timed alone, the median of ``--reps`` runs in one process: ``X'X`` (the
product ridge may take from a store), ``X'X + λI`` around it, the guarded inverse
(``rt.inv``: LU), a SHA-256 content digest of an n×n matrix, a copy into fresh memory,
a comparison of two, a finite check, a matrix-vector product, and a store entry's write
and read.

    python bench/store_parts.py [--n 4000] [--reps 3] [--json bench/results/store_parts.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from linview import statefile
from linview.app.bench import machine
from linview.backends.numpy import guards
from linview.backends.numpy import store as _store


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    n, rng = a.n, np.random.default_rng(0)
    X = np.asfortranarray(0.6 * np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n))
    out: dict = {"machine": machine(), "n": n, "reps": a.reps, "seconds": {}}

    def part(label: str, fn):
        ts, val = [], None
        for _ in range(a.reps):
            t0 = time.perf_counter()
            val = fn()
            ts.append(time.perf_counter() - t0)
        out["seconds"][label] = float(np.median(ts))
        print(f"  {label:<34} {np.median(ts) * 1e3:9.1f} ms")
        return val

    print(f"parts of a reused load, n = {n} (median of {a.reps}):")
    G = part("X'X", lambda: X.T @ X)
    A = part("X'X + 0.5 I", lambda: G + 0.5 * np.eye(n))
    W = part("inverse (rt.inv: LU)", lambda: guards.inv(A, "W"))
    part("content digest (SHA-256)", lambda: statefile.content_digest(X))
    part("copy into fresh memory", lambda: np.array(X, order="F"))
    Xc = np.array(X, order="F")
    part("compare two", lambda: np.array_equal(X, Xc))
    part("finite check", lambda: bool(np.all(np.isfinite(X))))
    part("matrix-vector product", lambda: X @ W[:, :1])
    with tempfile.TemporaryDirectory() as d:
        part("store entry write", lambda: _store.write_entries(
            Path(d) / str(time.perf_counter_ns()), {"ab" * 32: G}))
        _store.write_entries(Path(d), {"cd" * 32: G})
        part("store entry read (checked)", lambda: _store.read_entry(Path(d), "cd" * 32))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
