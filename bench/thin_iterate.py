"""The thin-iterate programs of ``bench/thin/`` (30 Markov steps, 5 gradient-descent
steps, 20 PageRank steps, 8 steps of ``T = A*T + B`` with one column; n = 2000): AUTO
against the best as-written NumPy, each timed in blocks of its own (``linview bench``'s
protocol; the as-written program on every BLAS thread and on one, the faster compared).

    python bench/thin_iterate.py [--updates 20] [--json out.json] [--only markov30,...]

Writes one line per program: as-written on all threads and on one, AUTO, and
AUTO's ratio to the faster baseline (>= 1 means AUTO is as fast or faster), then AUTO's
switches (at load and while running: ``docs/auto.md``), and how the rates came about.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

import linview  # noqa: E402
from linview.app.bench import run_bench  # noqa: E402

PROGRAMS = {"markov30": {"n": 2000}, "gradient_descent5": {"m": 4000, "n": 2000},
            "pagerank20": {"n": 2000}, "general_form8": {"n": 2000}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--only", default=",".join(PROGRAMS))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {}
    print(f"{'program':<20} {'written, all':>13} {'written, 1':>11} {'auto':>9} "
          f"{'auto/best':>9}  threads  load")
    for name in args.only.split(","):
        prog = linview.compile_file(HERE / "thin" / f"{name}.m", dims=PROGRAMS[name])
        r = run_bench(prog, updates=args.updates, strategies=("reeval", "auto"),
                      progress=False)
        both, auto = r["baseline_threads"], r["strategies"]["auto"]
        best = min(both["all_threads_s"], both["one_thread_s"])
        ratio = best / auto["mean_s"]
        out[name] = {"dims": PROGRAMS[name], **both, "auto_s": auto["mean_s"],
                     "ratio": ratio, "auto_threads": auto["blas_threads"],
                     "whole_trigger": auto["whole_trigger"], "load": os.getloadavg()[0],
                     "switches": auto.get("switches", []),
                     "calibration": r["machine"]["calibration"],
                     "rates": r["machine"]["rates"]}
        print(f"{name:<20} {both['all_threads_s'] * 1e3:10.2f} ms {both['one_thread_s'] * 1e3:8.2f}"
              f" ms {auto['mean_s'] * 1e3:6.2f} ms {ratio:8.2f}x  {auto['blas_threads']!s:>7}"
              f"  {os.getloadavg()[0]:.1f}  ({auto['whole_trigger']})")
        for s in auto.get("switches", []):
            when = "at load" if s.get("at") == "load" else f"after update {s['update'] + 1}"
            print(f"    {when}: {s['from']} -> {s['to']} ({s['because']})")
    from linview.compiler.calibrate import status

    print("calibration:", ", ".join(f"{k} {v}" for k, v in status().items()))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
