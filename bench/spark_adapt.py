"""Correction while running on Spark: a trigger module that switches from maintenance to
re-evaluation on the cluster when it measures maintenance slower, against the same module
pinned to each strategy, on the same updates, in one run.

    python bench/spark_adapt.py [--program P.m --dims n=300 --input A --strategy incr]
                                [--updates 40] [--rounds 2] [--master local[2]] [--json F]

Three modules are loaded from the same inputs and given the same row updates of one
input, each in a block of its own:

* ``maintain``: the triggers as compiled, never switching;
* ``reeval``: every update re-evaluates every view on the cluster, never switching;
* ``auto``: the adaptation on (``docs/auto.md``): it starts as compiled, and its switches
  are listed.

``--strategy incr`` compiles the triggers to maintain whatever the cost model says (the
prior made wrong on purpose: what the correction is for).  The default program, ``A^16``
at n = 300 on ``local[2]``, is one where the Spark cost model already chooses
re-evaluation for such a small n; forced to maintain, its trigger runs more Spark jobs
than a re-evaluation does.  Each time is the wall-clock time of one ``update`` call; the
blocks alternate over ``--rounds`` rounds (the first mode rotating) and the table gives
the median of every update and its p10-p90.  ``auto / best`` is auto's total time over the
faster pinned module's (its first window runs as compiled before it can know better).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

import linview
from linview.app.bench import random_inputs, row_updates
from linview.backends.spark import runtime as srt

POWER = "function D = pow16(A)\n  %#linview dims A(n,n)\n  D = A^16;\nend\n"
MODES = ("maintain", "reeval", "auto")


def run_block(prog, inputs, x, updates, mode, spark, opts) -> dict:
    views = prog.load(**inputs, spark=spark, **opts)
    a = views.adaptation
    a.enabled = mode == "auto"
    if mode == "reeval":
        a.mode[x] = "reeval"
    times = []
    for U, V in updates:
        t0 = time.perf_counter()
        views.update(x, U, V)
        times.append(time.perf_counter() - t0)
    out = {"times_s": times, "reeval_at_load_s": a.reeval_s,
           "switches": [{k: s[k] for k in ("update", "from", "to", "because")}
                        for s in views.stats.get("switches", [])]}
    views.release()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", help="a .m file (default: D = A^16)")
    ap.add_argument("--dims", default="n=300")
    ap.add_argument("--input", default="A", help="the input updated")
    ap.add_argument("--strategy", default="incr")
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--rank", type=int, default=1, help="rows changed per update")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ.pop("LINVIEW_ADAPT", None)
    dims = {k: int(v) for k, v in (p.split("=") for p in args.dims.split(","))}
    src = Path(args.program).read_text() if args.program else POWER
    name = Path(args.program).stem if args.program else "pow16"
    prog = linview.compile(src, name=name, dims=dims, backend="spark",
                           strategy=args.strategy)
    rng = np.random.default_rng(0)
    inputs = random_inputs(prog, rng)
    shape = np.shape(inputs[args.input])
    updates = row_updates(shape, args.updates, args.rank, rng, 0.01)
    spark = srt.local_session(args.master)
    opts = {"distribute_min": 2, "partitions": 2}
    try:
        run_block(prog, inputs, args.input, updates[:4], "maintain", spark, opts)  # warm-up
        got = {m: [] for m in MODES}
        for r in range(args.rounds):
            for m in MODES[r % 3:] + MODES[:r % 3]:
                got[m].append(run_block(prog, inputs, args.input, updates, m, spark, opts))
    finally:
        spark.stop()
    rows = {}
    for m in MODES:
        ts = np.concatenate([b["times_s"] for b in got[m]])
        rows[m] = {"median_ms": 1e3 * float(np.median(ts)),
                   "p10_ms": 1e3 * float(np.percentile(ts, 10)),
                   "p90_ms": 1e3 * float(np.percentile(ts, 90)),
                   "total_s": float(np.mean([sum(b["times_s"]) for b in got[m]])),
                   "reeval_at_load_ms": 1e3 * float(np.median(
                       [b["reeval_at_load_s"] for b in got[m]])),
                   "switches": [b["switches"] for b in got[m]]}
    best = min(rows["maintain"]["total_s"], rows["reeval"]["total_s"])
    print(f"{name} {args.dims}, rank-{args.rank} updates of {args.input} ({args.updates} "
          f"per block, {args.rounds} rounds), {args.master}, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'mode':<9} {'median ms':>10} {'p10-p90 ms':>16} {'total s':>9}")
    for m in MODES:
        r = rows[m]
        print(f"{m:<9} {r['median_ms']:>10.1f} {r['p10_ms']:>7.1f}-{r['p90_ms']:<8.1f} "
              f"{r['total_s']:>9.2f}")
    print(f"re-evaluation measured at load: {rows['auto']['reeval_at_load_ms']:.1f} ms; "
          f"auto / best pinned: {rows['auto']['total_s'] / best:.2f}x (total time)")
    for i, sw in enumerate(rows["auto"]["switches"]):
        for s in sw:
            print(f"  round {i + 1}: after update {s['update'] + 1}: {s['from']} -> "
                  f"{s['to']} ({s['because']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "modes": rows},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
