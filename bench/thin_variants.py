"""One program of ``bench/thin_iterate.py``'s table under three variants of ``linview
bench``'s protocol, taking turns run by run, to find what separates AUTO from the
baseline there and not in ``bench/written_phases.py``:

* ``as_is``: the protocol as it is (the baseline on all threads, on one, and AUTO, in
  rotating blocks of 4 updates after 0.2 s pauses);
* ``no_one``: without the one-thread baseline's blocks in the rotation;
* ``no_observe``: AUTO's windows off after load (``Adaptation.observe`` does nothing: no
  per-update bookkeeping, no switch while running; the trials at load still choose).

    python bench/thin_variants.py markov_steps [--repeat 3]

Prints per variant the ratio of the baseline to AUTO (means; >= 1: AUTO as fast or faster;
the baseline is the faster of all threads and one where both ran, else all threads),
median and each run, and both p10s in ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from thin_iterate import compile_one, suites  # noqa: E402

import linview.app.bench as bench  # noqa: E402
from linview.backends.numpy import adaptive  # noqa: E402

VARIANTS = ("as_is", "no_one", "no_observe")


def run(name: str, variant: str) -> tuple[float, float, float]:
    """(baseline / AUTO, baseline p10 ms, AUTO p10 ms) of one run."""
    table = {k: v for s in suites().values() for k, v in s.items()}
    path, sizes, updates = table[name]
    with_one, observe = bench.with_one_thread_baseline, adaptive.Adaptation.observe
    try:
        if variant == "no_one":
            bench.with_one_thread_baseline = list
        if variant == "no_observe":
            adaptive.Adaptation.observe = lambda self, x, seconds: None
        r = bench.run_bench(compile_one(path, sizes), updates=updates,
                            strategies=("reeval", "auto"), progress=False)
    finally:
        bench.with_one_thread_baseline, adaptive.Adaptation.observe = with_one, observe
    base, auto = r["strategies"]["reeval"], r["strategies"]["auto"]
    return base["mean_s"] / auto["mean_s"], base["p10_s"] * 1e3, auto["p10_s"] * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    out: dict = {v: [] for v in VARIANTS}
    for _ in range(a.repeat):
        for v in VARIANTS:
            out[v].append(run(a.name, v))
    for v, rows in out.items():
        print(f"{v:<11} baseline / auto: median {statistics.median(r[0] for r in rows):.3f} "
              f"(each {', '.join(f'{r[0]:.2f}' for r in rows)}); p10 baseline / auto ms: "
              + ", ".join(f"{r[1]:.2f} / {r[2]:.2f}" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
