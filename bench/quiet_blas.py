"""A user's NumPy call right after a trigger, against the same call in isolation.

    python bench/quiet_blas.py [--program bench/thin/markov30.m --dims n=2000]
                               [--updates 24] [--threads auto|N] [--park on|off]
                               [--call-threads N] [--mode measured|reeval]

The user's calls: a 2000×2000 matrix-vector product and a 600×600 matrix product, on
NumPy's BLAS with every thread (``--call-threads 1``: on one, so that no BLAS worker
can be waiting or spinning).  Each is timed in two pacings, each in blocks:

* ``back to back``: ``update; call`` over and over (an application that does nothing
  else), against ``call`` over and over (the same call back to back: its own BLAS
  workers warm, and its operands still in the caches from the call before);
* ``paced``: the same with a pause of 0.3 s before each (every worker asleep when the
  update starts), against ``pause; call``.

Three more blocks each, the fair baselines of "in isolation":

* the control: the same call after a busy wait in Python as long as the updates took (the
  same time since the call before, no BLAS, no memory touched).  Its ratio to the call
  back to back is what any other work of that length costs the call: measured with
  ``bench/quiet_blas_causes.py``, it is the call's operands falling out of the caches
  while the machine's other work runs (the same on one BLAS thread, where no worker
  exists), not BLAS workers;
* ``evicted``: the call after a read of 256 MB without BLAS (its operands surely out of
  the caches; nothing left spinning);
* ``by hand``: the call after the same row change and the program as written run by hand
  in NumPy on a copy of the inputs (the module's ``_evaluate_written``, or ``_evaluate``
  where the compiled program is the one written, called directly, on NumPy's own
  threads: no checks, no thread limits, nothing parked), what a user of NumPy as written
  runs before the call: the same BLAS calls and the same bytes as an update that re-runs
  the program as written, without linview.

The update's own share is ``after / control``; ``after / by hand`` is linview's share
beyond what the program itself leaves in the caches (for an update that re-runs the
program as written).  The blocks alternate (:data:`ROUNDS`
rounds, the first kind rotating), so a change in the machine's load falls on all.
Prints the medians, their p10-p90 and the ratios (<= 1.1 is the target: the trigger does
not slow the user's code).  ``--park off`` leaves the workers a trigger woke as OpenBLAS
does (they spin for about 0.1 s after a parallel call).
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
from linview.backends.numpy import threads

ROUNDS = 4
PAUSE_S = 0.3


def _spin(seconds: float) -> None:
    """Keep one core busy in Python (no BLAS) for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _blocks(views, x, stream, call, pause: float, big: np.ndarray,
            by_hand) -> dict[str, list]:
    """The call's seconds right after each update, back to back, after a busy wait in
    Python as long as the updates took (the control: the same time before the call, no
    BLAS, no memory), after a read of ``big`` (evicted) and after ``by_hand(U, V)`` (the
    program as written, by hand), in alternating blocks (each a run of consecutive updates
    or calls)."""
    out: dict[str, list] = {"after": [], "alone": [], "control": [], "evicted": [],
                            "by hand": []}
    took: list[float] = []
    size = -(-len(stream) // ROUNDS)
    kinds = list(out)
    for r, first in enumerate(range(0, len(stream), size)):
        chunk = stream[first:first + size]
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            call()  # the block starts as the one before left the workers: once untimed
            for U, V in chunk:
                if pause:
                    time.sleep(pause)
                if kind == "after":
                    t0 = time.perf_counter()
                    views.update(x, U, V)
                    took.append(time.perf_counter() - t0)
                elif kind == "control":
                    _spin(float(np.median(took)) if took else 0.02)
                elif kind == "evicted":
                    big.sum()
                elif kind == "by hand":
                    by_hand(U, V)
                t0 = time.perf_counter()
                call()
                out[kind].append(time.perf_counter() - t0)
    return out


def _ms(r: dict) -> str:
    return (f"{r['median_s'] * 1e3:7.3f} ms ({r['p10_s'] * 1e3:.3f}-"
            f"{r['p90_s'] * 1e3:.3f})")


def _stats(ts: list) -> dict:
    t = np.array(ts)
    return {"median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
            "p90_s": float(np.percentile(t, 90))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default=os.path.join(os.path.dirname(__file__), "thin",
                                                      "markov30.m"))
    ap.add_argument("--dims", default="n=2000")
    ap.add_argument("--updates", type=int, default=24)
    ap.add_argument("--threads", default="auto")
    ap.add_argument("--park", default="on", choices=["on", "off"])
    ap.add_argument("--call-threads", type=int, default=0,
                    help="BLAS threads of NumPy's library for the calls (default: all)")
    ap.add_argument("--mode", choices=["measured", "reeval"], default="measured",
                    help="reeval: the trigger re-runs the program as written on every "
                         "thread, adaptation off (default: as the trials at load chose)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    threads.PARK["on"] = args.park == "on"
    if args.call_threads:  # NumPy's pool (the kernels' where one library serves both)
        kernels, numpys = threads.pools()
        for lib in (numpys or kernels).lib_controllers:
            lib.set_num_threads(args.call_threads)
    dims = {k: int(v) for k, v in (kv.split("=") for kv in args.dims.split(","))}
    prog = linview.compile_file(args.program, dims=dims)
    rng = np.random.default_rng(0)
    ins = random_inputs(prog, rng)
    blas = args.threads if args.threads == "auto" else int(args.threads)
    views = prog.load(**ins, blas_threads=blas)
    x = prog.program.dynamic[0]
    if args.mode == "reeval" and x in views.adaptation.inputs:
        views.adaptation.mode[x] = "reeval"
        views.adaptation.written_threads[x] = None
        views.adaptation.enabled = False
    stream = row_updates(np.shape(ins[x]), args.updates, 1, rng, 0.1)
    B = rng.standard_normal((2000, 2000))
    v = rng.standard_normal(2000)
    C = rng.standard_normal((600, 600))
    calls = {"gemv 2000": lambda: B @ v, "gemm 600": lambda: C @ C}
    big = np.ones(32 << 20)  # 256 MB, read by the evicted blocks
    program = getattr(views, "_evaluate_written", None) or views._evaluate
    own = {k: np.array(a, order="F") for k, a in views.inputs.items()}

    def by_hand(U, V):  # the row change and the program as written, in NumPy
        rows = np.flatnonzero(U.any(axis=1))
        own[x][rows, :] += U[rows] @ V.T
        program(views.dims, own)

    out = {}
    for pacing, pause in (("back to back", 0.0), ("paced", PAUSE_S)):
        for k, call in calls.items():
            runs = _blocks(views, x, stream, call, pause, big, by_hand)
            got = {k: _stats(v) for k, v in runs.items()}
            med = {k: r["median_s"] for k, r in got.items()}
            out[f"{k}, {pacing}"] = {**got, "ratio": med["after"] / med["alone"],
                                     "control_ratio": med["control"] / med["alone"],
                                     "evicted_ratio": med["evicted"] / med["alone"],
                                     "fair_ratio": med["after"] / med["control"],
                                     "by_hand_ratio": med["by hand"] / med["alone"],
                                     "after_by_hand_ratio": med["after"] / med["by hand"]}
    mode = views.adaptation.mode.get(x, "as compiled")
    print(f"{prog.name} {args.dims}, trigger threads {views._threads.get(x, 'unset')}, "
          f"mode {mode} (now on {views._trigger_threads(x) if x in views._threads else '-'}"
          f" threads), park {args.park}, calls on {args.call_threads or 'all'} threads, "
          f"load {os.getloadavg()[0]:.1f}")
    for k, r in out.items():
        print(f"  {k:<24} right after an update {_ms(r['after'])}; back to back "
              f"{_ms(r['alone'])}: {r['ratio']:.2f}x\n  {'':<24} after a busy wait as long "
              f"(no BLAS) {_ms(r['control'])}: {r['control_ratio']:.2f}x; after a read of "
              f"256 MB {_ms(r['evicted'])}: {r['evicted_ratio']:.2f}x\n  {'':<24} right "
              f"after an update / after the busy wait (the update's own share): "
              f"{r['fair_ratio']:.2f}x\n  {'':<24} after the program as written by hand "
              f"{_ms(r['by hand'])}: {r['by_hand_ratio']:.2f}x; right after an update / "
              f"after it by hand (linview's share): {r['after_by_hand_ratio']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"program": prog.name, "dims": dims,
                                               "threads": args.threads, "park": args.park,
                                               "call_threads": args.call_threads or "all",
                                               "mode": mode, "calls": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
