"""Soaks: long update streams under the default policy stay within 1e-8 of re-evaluation.

Two programs, each fed 10,000 updates that replace one random row of the changing input
with a fresh random row (``u = e_i``, ``v = new row - old row``), so the inputs stay in
one distribution while every view is maintained the whole time:

* ``examples/ols.m`` with X of m×n (a maintained inverse, checked by the probe);
* ``C = A^8`` (repeated squaring with the default model; no inverse) with A of n×n, rows
  drawn as 0.6 e_i + 0.3 g/√n so that A^8 stays bounded.

Every ``--check-every`` updates the views are compared with re-evaluation (``verify``,
not part of the policy: it changes nothing).  Reported per program: the largest error
seen, the final error, the updates that fell back to re-evaluation (a refused Woodbury
core or a failed probe), the probe failures, refreshes, and the update time (median and
p10–p90).

    python bench/soak.py [--updates 10000] [--json bench/results/soak.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import linview
from linview.app.bench import machine

ROOT = Path(__file__).resolve().parent.parent
POWER8 = "function C = power8(A)\n  %#linview dims A(n,n)\n  C = A^8;\nend\n"


def soak(name: str, prog, inputs: dict, x: str, new_row, updates: int, check_every: int,
         seed: int) -> dict:
    rng = np.random.default_rng(seed)
    views = prog.load(**inputs)
    rows = views[x].shape[0]
    errors, times = [], []
    for i in range(1, updates + 1):
        r = int(rng.integers(rows))
        u = np.zeros(rows)
        u[r] = 1.0
        v = new_row(rng, r) - views._views[x][r]
        t0 = time.perf_counter()
        views.update(x, u, v)
        times.append(time.perf_counter() - t0)
        if i % check_every == 0 or i == updates:
            errors.append(views.verify())
    t = np.asarray(times)
    s = views.stats
    return {"program": name, "dims": {k: int(v) for k, v in views.dims.items()},
            "updates": updates, "seed": seed, "max_rel_error": float(max(errors)),
            "final_rel_error": float(errors[-1]), "checks": len(errors),
            "fallbacks": s["fallbacks"], "probe_failures": s["probe_failures"],
            "refreshes": s["refreshes"], "median_s": float(np.median(t)),
            "p10_s": float(np.percentile(t, 10)), "p90_s": float(np.percentile(t, 90)),
            "probe_share": s["probe_seconds"] / float(t.sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=10_000)
    ap.add_argument("--check-every", type=int, default=1000)
    ap.add_argument("--m", type=int, default=400)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    m, n = args.m, args.n
    rng = np.random.default_rng(args.seed)
    ols = linview.compile_file(ROOT / "examples" / "ols.m", dims={"m": m, "n": n, "p": 1})
    powers = linview.compile(POWER8, name="power8", dims={"n": n})
    A = 0.6 * np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n)

    def power_row(g, r):
        row = 0.3 * g.standard_normal(n) / np.sqrt(n)
        row[r] += 0.6
        return row

    runs = [
        ("ols", ols, {"X": rng.standard_normal((m, n)), "Y": rng.standard_normal((m, 1))},
         "X", lambda g, r: g.standard_normal(n)),
        ("A^8", powers, {"A": A}, "A", power_row),
    ]
    results = []
    for name, prog, inputs, x, new_row in runs:
        r = soak(name, prog, inputs, x, new_row, args.updates, args.check_every, args.seed)
        results.append(r)
        dims = ", ".join(f"{k}={v}" for k, v in r["dims"].items())
        print(f"{r['program']} ({dims}): {r['updates']} updates, max error "
              f"{r['max_rel_error']:.1e} over {r['checks']} checks, final "
              f"{r['final_rel_error']:.1e}; fallbacks {r['fallbacks']}, probe failures "
              f"{r['probe_failures']}, refreshes {r['refreshes']}; update median "
              f"{r['median_s'] * 1e3:.2f} ms (p10–p90 {r['p10_s'] * 1e3:.2f}–"
              f"{r['p90_s'] * 1e3:.2f} ms), probe {r['probe_share']:.1%} of it", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "results": results},
                                              indent=1))


if __name__ == "__main__":
    main()
