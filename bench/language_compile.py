"""Compile and load times of the program corpus (``tests/programs/``), issue 14.

For every program, in one process: ``compile_file`` without data (parse, lower, and, when
the sizes allow, plan and generate), the first ``load()`` on its test inputs (which
specialises the program to the data's shapes where needed, with the specialisation cache
cleared), and a repeated ``load()`` with inputs of the same shapes (which reuses the
specialised module).  Reports median and p10-p90 over ``--reps`` runs, the ratio of the
repeated load to the first one, and the max relative difference between their outputs.

    python bench/language_compile.py [--reps 3] [--json bench/results/language.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import linview
from linview import specialize

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_programs import PROGRAMS, spec  # noqa: E402


def timed(fn, reps: int) -> tuple[list[float], object]:
    out, value = [], None
    for _ in range(reps):
        t = time.perf_counter()
        value = fn()
        out.append(time.perf_counter() - t)
    return out, value


def stats(xs: list[float]) -> dict:
    return {"median": float(np.median(xs)), "p10": float(np.percentile(xs, 10)),
            "p90": float(np.percentile(xs, 90))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    linview.compile("function y = f(A)\n y = A;\nend\n")  # imports and the parser, once
    rows = []
    for path in PROGRAMS:
        inputs, _ = spec(path)
        compile_times, prog = timed(lambda p=path: linview.compile_file(p), args.reps)

        def first(prog=prog, inputs=inputs):
            specialize._SPECIALISED.clear()
            return prog.load(**inputs)

        first_times, v1 = timed(first, args.reps)
        again_times, v2 = timed(lambda prog=prog, inputs=inputs: prog.load(**inputs),
                                args.reps)
        err = max(float(np.max(np.abs(v1[o] - v2[o]))) / max(1.0, float(np.max(np.abs(v1[o]))))
                  for o in v1.outputs)
        rows.append({"program": path.stem, "deferred": type(prog).__name__ != "CompiledProgram",
                     "compile": stats(compile_times), "first_load": stats(first_times),
                     "repeat_load": stats(again_times),
                     "ratio": float(np.median(again_times) / np.median(first_times)),
                     "error": err})
    ms = lambda s: f"{s['median'] * 1e3:.0f} ms ({s['p10'] * 1e3:.0f}–{s['p90'] * 1e3:.0f})"  # noqa: E731
    print("| program | deferred | compile without data | first load | repeated load | "
          "repeat ÷ first | error |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['program']} | {'yes' if r['deferred'] else ''} | {ms(r['compile'])} | "
              f"{ms(r['first_load'])} | {ms(r['repeat_load'])} | {r['ratio']:.2f} | "
              f"{r['error']:.0e} |")
    med = lambda key: float(np.median([r[key]["median"] for r in rows]))  # noqa: E731
    print(f"\nmedians over {len(rows)} programs: compile {med('compile') * 1e3:.0f} ms, "
          f"first load {med('first_load') * 1e3:.0f} ms, repeated load "
          f"{med('repeat_load') * 1e3:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
