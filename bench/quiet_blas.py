"""A user's NumPy call right after a trigger, against the same call in isolation.

    python bench/quiet_blas.py [--program bench/thin/markov30.m --dims n=2000]
                               [--updates 30] [--threads auto|N] [--park on|off]

After each update the user's call (a 2000×2000 matrix-vector product and a 600×600
matrix product, NumPy's BLAS on every thread) is timed at once; then, after a pause of
0.3 s (every BLAS worker asleep), the same call again.  Prints the medians and their ratio
(<= 1.1 is the target: the trigger's BLAS workers do not slow the user's code).  ``--park
off`` leaves the kernels' workers as OpenBLAS does (they spin for about 0.1 s).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import linview
from linview.app.bench import random_inputs, row_updates
from linview.backends.numpy import threads


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default=os.path.join(os.path.dirname(__file__), "thin",
                                                      "markov30.m"))
    ap.add_argument("--dims", default="n=2000")
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--threads", default="auto")
    ap.add_argument("--park", default="on", choices=["on", "off"])
    args = ap.parse_args(argv)
    threads.PARK["on"] = args.park == "on"
    dims = {k: int(v) for k, v in (kv.split("=") for kv in args.dims.split(","))}
    prog = linview.compile_file(args.program, dims=dims)
    rng = np.random.default_rng(0)
    ins = random_inputs(prog, rng)
    blas = args.threads if args.threads == "auto" else int(args.threads)
    views = prog.load(**ins, blas_threads=blas)
    x = prog.program.dynamic[0]
    stream = row_updates(np.shape(ins[x]), args.updates, 1, rng, 0.1)
    B = rng.standard_normal((2000, 2000))
    v = rng.standard_normal(2000)
    C = rng.standard_normal((600, 600))
    calls = {"gemv 2000": lambda: B @ v, "gemm 600": lambda: C @ C}
    after: dict = {k: [] for k in calls}
    alone: dict = {k: [] for k in calls}
    for k, call in calls.items():
        for U, V in stream:
            views.update(x, U, V)
            t0 = time.perf_counter()
            call()
            after[k].append(time.perf_counter() - t0)
            time.sleep(0.3)
            t0 = time.perf_counter()
            call()
            alone[k].append(time.perf_counter() - t0)
    mode = views.adaptation.mode.get(x, "as compiled")
    print(f"{prog.name} {args.dims}, trigger threads {views._threads.get(x, 'unset')}, "
          f"mode {mode} (now on {views._trigger_threads(x) if x in views._threads else '-'}"
          f" threads), park {args.park}, load {os.getloadavg()[0]:.1f}")
    for k in calls:
        a, b = float(np.median(after[k])), float(np.median(alone[k]))
        print(f"  {k:<10} right after an update {a * 1e3:7.3f} ms, in isolation "
              f"{b * 1e3:7.3f} ms: {a / b:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
