"""Cost of the randomized probe of maintained inverses, against the trigger it checks.

Two OLS modules (``examples/ols.m``) are loaded on the same random X (m×n) and Y (m×1),
one with the probe (the default) and one without (``probe=False``); every update of a
stream of random row updates of X goes to both, in alternating order, so both see the
same data and machine load.  Reported: median and p10–p90 of the update time each way, the
ratio of medians, the probe's own time per update (timed inside the module) and its share
of the update, and the error of every view against re-evaluation after the stream.

    python bench/probe_cost.py --n 4000 --updates 40 [--json bench/results/probe_cost.json]
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


def run(n: int, updates: int, seed: int = 0) -> dict:
    m = 2 * n
    rng = np.random.default_rng(seed)
    prog = linview.compile_file(ROOT / "examples" / "ols.m", dims={"m": m, "n": n, "p": 1},
                                least_squares="normal")  # the probe of inv(XᵀX)
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    modules = {True: prog.load(X=X, Y=Y), False: prog.load(X=X, Y=Y, probe=False)}
    del X, Y
    times: dict[bool, list[float]] = {True: [], False: []}
    probe_s = []
    for i in range(updates):
        u = np.zeros(m)
        u[rng.integers(m)] = 1.0
        v = 0.1 * rng.standard_normal(n)
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            views = modules[on]
            before = views.stats["probe_seconds"]
            t0 = time.perf_counter()
            views.update("X", u, v)
            times[on].append(time.perf_counter() - t0)
            if on:
                probe_s.append(views.stats["probe_seconds"] - before)
    views = modules[True]
    err = max(modules[True].verify(), modules[False].verify())

    def summary(t):
        t = np.asarray(t)
        return {"median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
                "p90_s": float(np.percentile(t, 90))}

    on, off = summary(times[True]), summary(times[False])
    return {"program": "ols", "dims": {"m": m, "n": n, "p": 1}, "updates": updates,
            "seed": seed, "machine": machine(), "probe_on": on, "probe_off": off,
            "ratio_on_over_off": on["median_s"] / off["median_s"],
            "probe_median_s": float(np.median(probe_s)),
            "probe_share": float(np.median(np.asarray(probe_s) / np.asarray(times[True]))),
            "probe_failures": views.stats["probe_failures"], "max_rel_error": float(err)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    r = run(args.n, args.updates, args.seed)
    ms = 1e3
    for key in ("probe_on", "probe_off"):
        s = r[key]
        print(f"{key:9s} median {s['median_s'] * ms:8.1f} ms  p10–p90 "
              f"{s['p10_s'] * ms:.1f}–{s['p90_s'] * ms:.1f} ms")
    print(f"ratio on/off {r['ratio_on_over_off']:.3f}; probe {r['probe_median_s'] * ms:.1f} ms "
          f"per update = {r['probe_share']:.1%} of the update; failures "
          f"{r['probe_failures']}; error vs re-evaluation {r['max_rel_error']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
