"""Where an AUTO update that re-runs the program as written spends its time, against
``linview bench``'s baseline running the same program, phase by phase
(``time.perf_counter_ns`` around each call, over many updates).

    python bench/written_phases.py [--program tests/programs/cg_steps.m]
                                   [--shapes A=2000x2000,b=2000x1] [--only NAME]
                                   [--blocks 30]
                                   [--block 4] [--pause 0.2] [--threads all|1]

``--only NAME`` takes the program and its sizes from ``bench/thin_iterate.py``'s table
(``--only markov_steps``: ``tests/programs/markov_steps.m`` with P 2000×2000).  Both
modules are loaded on the same random inputs (``linview bench``'s) and take turns in
blocks of ``--block`` consecutive rank-1 row updates, each block after ``--pause`` seconds
(``linview bench``'s protocol: 4 updates after 0.2 s; ``--pause 0``: back to back).
AUTO is put in its as-written mode (``reeval``) on ``--threads`` with adaptation off, so
that both run the same program on the same threads; a third module, ``auto direct``, is
AUTO's own module called the baseline's way (``_reevaluate_trigger``: the same data, every
view kept and checked, none of ``update``'s work around it; left out where a model
rewrote the program, whose re-evaluation is then not the program as written); a
fourth, ``by hand``, is what a user of NumPy as written runs: the row change
``X[i, :] += ...`` on a copy of the inputs and the program (``program`` there is
``_evaluate_written``, else ``_evaluate``, of AUTO's module called directly: no checks,
nothing restored, nothing kept).  Printed per module, for the first update of a block
(after the pause) and the others: the whole update, and its phases:

* ``input``: ``X += U Vᵀ`` keeping what restores it (``kernels.add_outer_keeping``);
* ``program``: the program's ``_evaluate``;
* ``checks``: the views kept and checked finite (``_kept_values``);
* ``trigger``: the trigger as a whole (the three above and the rest of it; AUTO's
  ``_run_written``, which keeps and checks the outputs only where every trigger re-runs
  the program, ``aswritten.py``);
* AUTO only: ``validate`` (the update's checks and copies), ``threads`` (the BLAS thread
  context, entered and left), ``observe`` (the adaptive window's bookkeeping) and
  ``around`` (the rest: the warnings wrapper, the probe's bookkeeping, the drift policy).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import linview
from linview.app.bench import random_inputs, row_updates
from linview.backends.numpy import phase2

ns = time.perf_counter_ns


class Clock:
    """Nanoseconds per named phase of the current update."""

    def __init__(self):
        self.now: dict[str, int] = {}

    def wrap(self, obj, attr: str, key: str) -> None:
        f = getattr(obj, attr)

        def timed(*a, **k):
            t0 = ns()
            try:
                return f(*a, **k)
            finally:
                self.now[key] = self.now.get(key, 0) + ns() - t0

        setattr(obj, attr, timed)

    def context(self, obj, attr: str, key: str) -> None:
        """``obj.attr(...)`` returns a context: its creation, entry and exit timed."""
        f, clock = getattr(obj, attr), self

        class Timed:
            def __init__(self, inner, spent):
                self.inner, self.spent = inner, spent

            def __enter__(self):
                t0 = ns()
                self.inner.__enter__()
                self.spent += ns() - t0

            def __exit__(self, *exc):
                t0 = ns()
                out = self.inner.__exit__(*exc)
                clock.now[key] = clock.now.get(key, 0) + self.spent + ns() - t0
                return out

        def make(*a, **k):
            t0 = ns()
            inner = f(*a, **k)
            return Timed(inner, ns() - t0)

        setattr(obj, attr, make)


def _named(name: str):
    """The file and shapes of ``name`` in bench/thin_iterate.py's table."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from thin_iterate import suites

    for progs in suites().values():
        if name in progs:
            path, sizes, _ = progs[name]
            if "shapes" not in sizes:
                raise SystemExit(f"{name}: sized by dims; give --program and --shapes")
            return str(path), tuple((k, r, c) for k, (r, c) in sizes["shapes"].items())
    raise SystemExit(f"{name}: not in bench/thin_iterate.py's table")


def _chosen(prog) -> str:
    """What AUTO runs after its trials at load, per input: mode and BLAS threads."""
    rng = np.random.default_rng(0)
    views = prog.load(**random_inputs(prog, rng))
    a = views.adaptation
    out = []
    for x in sorted(a.inputs):
        t = a.threads_of(x, views._threads.get(x))
        trials = {m: f"{s * 1e3:.3g} ms" for m, s in a.trial_s[x].items()}
        out.append(f"{x}: {a.mode[x]} on {'all' if t is None else t} BLAS thread(s); "
                   f"trials at load {trials}; switches {views.stats['switches']}")
    return "AUTO after load: " + "; ".join(out or ["nothing adapts"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="tests/programs/cg_steps.m")
    ap.add_argument("--shapes", default="A=2000x2000,b=2000x1")
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--block", type=int, default=4)
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--threads", default="all", choices=["all", "1"])
    ap.add_argument("--only", help="a program of bench/thin_iterate.py's table, by name")
    a = ap.parse_args(argv)
    if a.only:
        a.program, shapes = _named(a.only)
    else:
        shapes = tuple((k, *map(int, v.split("x"))) for k, v in
                       (kv.split("=") for kv in a.shapes.split(",")))
    prog = linview.compile_file(a.program, shapes=shapes, least_squares="normal")
    print(_chosen(prog))
    rng = np.random.default_rng(0)
    inputs = random_inputs(prog, rng)
    x = prog.program.dynamic[0]
    stream = row_updates(np.shape(inputs[x]), a.blocks * a.block, 1, rng, 0.1)
    base = linview.compile_file(a.program, shapes=shapes, model="written",
                                strategy="reeval").load(**inputs)
    auto = prog.load(**inputs)
    direct = prog.load(**inputs)
    threads = None if a.threads == "all" else 1
    for m in (auto, direct):
        if x in m.adaptation.inputs:
            m.adaptation.mode[x] = "reeval"
            m.adaptation.written_threads[x] = threads
        m.adaptation.enabled = False
    from linview.app.bench import one_thread

    if threads == 1:
        run_base, run_direct = one_thread(base.reevaluate_update), \
            one_thread(direct._reevaluate_trigger)
    else:
        run_base, run_direct = base.reevaluate_update, direct._reevaluate_trigger

    clock = Clock()
    real = phase2.add_outer_keeping

    def input_update(*args):
        t0 = ns()
        try:
            return real(*args)
        finally:
            clock.now["input"] = clock.now.get("input", 0) + ns() - t0

    phase2.add_outer_keeping = input_update
    for m in (base, auto, direct):  # the program as written: its own function, if any
        clock.wrap(m, "_evaluate_written" if hasattr(m, "_evaluate_written") else "_evaluate",
                   "program")
        clock.wrap(m, "_kept_values", "checks")
    clock.wrap(auto, "_run_written", "trigger")
    clock.wrap(auto, "_validate_update", "validate")
    clock.wrap(auto, "_observe", "observe")
    clock.context(auto, "_blas", "threads")
    program = getattr(direct, "_evaluate_written", None) or direct._evaluate
    own = {k: np.array(v, order="F") for k, v in inputs.items()}

    def by_hand(x, U, V):  # a user's NumPy: the row change, then the program as written
        rows = np.flatnonzero(U.any(axis=1))
        own[x][rows, :] += U[rows] @ V.T
        program(direct.dims, own)

    if threads == 1:
        by_hand = one_thread(by_hand)
    runs = {"baseline": run_base, "auto": auto.update, "auto direct": run_direct,
            "by hand": by_hand}
    if hasattr(direct, "_evaluate_written"):  # its _reevaluate is the rewritten program
        del runs["auto direct"]
    rec: dict = {k: [] for k in runs}
    order = list(runs)
    for b in range(a.blocks):
        for s in order[b % len(order):] + order[:b % len(order)]:
            time.sleep(a.pause)
            for i in range(a.block):
                U, V = stream[b * a.block + i]
                clock.now = {}
                t0 = ns()
                runs[s](x, U, V)
                whole = ns() - t0
                rec[s].append((i, whole, clock.now))
    phase2.add_outer_keeping = real
    print(f"{a.program}, {a.threads} BLAS thread(s), blocks of {a.block} after {a.pause} s; "
          f"load average {os.getloadavg()[0]:.1f}; microseconds, median (p10)")
    keys = ("input", "program", "checks", "trigger", "validate", "threads", "observe")
    for s, rows in rec.items():
        for where in ("first", "others"):
            sel = [r for r in rows if (r[0] == 0) == (where == "first")]
            if not sel:
                continue
            cols = {"whole": [r[1] for r in sel]}
            for k in keys:
                if k in sel[0][2]:
                    cols[k] = [r[2][k] for r in sel]
            if s != "auto":
                cols["trigger"] = cols["whole"]
            else:
                cols["around"] = [r[1] - sum(r[2].get(k, 0) for k in
                                             ("trigger", "validate", "threads", "observe"))
                                  for r in sel]
            print(f"{s:12s} {where:6s} " + "  ".join(
                f"{k} {np.median(v) / 1e3:.0f} ({np.percentile(v, 10) / 1e3:.0f})"
                for k, v in cols.items()))
        whole = np.array([r[1] for r in rows]) / 1e3
        print(f"{s:12s} all    mean {whole.mean():.0f}  median {np.median(whole):.0f}  "
              f"p10 {np.percentile(whole, 10):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
