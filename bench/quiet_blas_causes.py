"""Why a NumPy call right after an update is slower than "in isolation": one experiment per
hypothesis, each a prelude run before the same call, timed in alternating blocks.

    python bench/quiet_blas_causes.py [--program bench/thin/markov30.m --dims n=2000]
                                      [--calls 24] [--rounds 4] [--call gemv|gemm]
                                      [--size N] [--threads 2,1] [--preludes a,b,...]
                                      [--park on|off] [--mode maintain|threads|...]
    python bench/quiet_blas_causes.py --worker-spin

The call is ``bench/quiet_blas.py``'s 2000×2000 matrix-vector product (``--call gemm``:
its 600×600 matrix product; ``--size``: another order), on NumPy's BLAS with all threads
(``threads 2``) and, in blocks of their own, with one (``threads 1``: no worker to wake or
to share a core with).  A matrix larger than the caches (``--size 10000``: 800 MB) cannot
be warm back to back: if the operands' caching is the cause, its ratios are about 1.
The preludes, each as long as the median update (measured first):

* ``none``: the call back to back, as ``quiet_blas.py`` measures "in isolation";
* ``update``: one update of the trigger module (``quiet_blas.py``'s "right after");
* ``spin``: a busy wait in Python (``quiet_blas.py``'s control: no BLAS, no memory);
  ``spin4``: one of 4 ms (any length in ms);
* ``sweep``: a read of a 256 MB array, no BLAS (evicts the call's operands from the caches);
* ``reuse``: the call on another array of the same size (B evicted by a BLAS call of its
  own kind, NumPy's workers hot);
* ``touch``: the busy wait, then the call's matrix read once by NumPy (``B.sum()``, no
  BLAS: its operands brought back into the caches, as far as a read does);
* ``warm``: the busy wait, then 0.2 ms of small BLAS products on other data (64×64: the
  core's vector units and frequency warm, the call's operands not);
* ``sleep``: the process sleeps (the other cores free; OpenBLAS's workers go to sleep after
  about 0.1 s of waiting, so a long enough sleep makes the call wake them);
* ``X+wake``: prelude ``X``, then one 256×256 product on NumPy's BLAS (which OpenBLAS
  runs on every thread: its workers awake when the call starts).

``--worker-spin`` prints instead how long NumPy's BLAS workers stay busy after a product on
every thread (``/proc/self/task``, sampled every 2 ms), and after one followed by a limit
to one thread (what a trigger's thread limit does to NumPy's pool).

Each line prints the call's median, p10-p90, its ratio to ``none`` on the same threads, and
how many threads of the process besides the main one (BLAS workers of either library, the
one-pass kernel's) were runnable just before the call (state R in ``/proc/self/task``;
median and mean over the calls).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import linview
from linview.app.bench import random_inputs, row_updates


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _running_threads() -> int:
    """Threads of this process in state R, less the one reading (the main thread)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                n += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:
            continue
    return max(0, n - 1)


def _thread_cpu() -> dict:
    """{thread id: (state, CPU ticks)} of this process's threads but the main one."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        if tid == str(os.getpid()):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (st[0], int(st[11]) + int(st[12]))
    return out


def worker_spin(limit_to_one: bool, watch_s: float = 0.3) -> float:
    """Seconds NumPy's BLAS workers stay busy (runnable, or gaining CPU time) after a
    2000×2000 product on every thread, sampled every 2 ms; ``limit_to_one``: NumPy's pool
    set to one thread right after the product (as a trigger's thread limit does)."""
    from linview.backends.numpy import threads

    kernels, numpys = threads.pools()
    libs = (numpys or kernels).lib_controllers
    B, v = np.ones((2000, 2000)), np.ones(2000)
    time.sleep(0.5)
    before = [lib.num_threads for lib in libs]
    B @ v
    if limit_to_one:
        for lib in libs:
            lib.set_num_threads(1)
    t0 = time.perf_counter()
    last, busy = _thread_cpu(), 0.0
    while time.perf_counter() - t0 < watch_s:
        time.sleep(0.002)
        now = _thread_cpu()
        if any(st == "R" or cpu > last.get(t, (st, cpu))[1] for t, (st, cpu) in now.items()):
            busy = time.perf_counter() - t0
        last = now
    for lib, n in zip(libs, before, strict=True):
        lib.set_num_threads(n)
    return busy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default=os.path.join(os.path.dirname(__file__), "thin",
                                                      "markov30.m"))
    ap.add_argument("--dims", default="n=2000")
    ap.add_argument("--calls", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--call", default="gemv", choices=["gemv", "gemm"])
    ap.add_argument("--size", type=int, default=0,
                    help="the call's matrix order (default: 2000 for gemv, 600 for gemm)")
    ap.add_argument("--threads", default="2,1", help="BLAS threads of the calls, in turn")
    ap.add_argument("--park", default="on", choices=["on", "off"],
                    help="park the BLAS workers a trigger woke when it ends (threads.PARK)")
    ap.add_argument("--mode", help="run the trigger in this mode, not switching "
                    "(maintain, threads, reeval, reeval_threads: docs/auto.md)")
    ap.add_argument("--worker-spin", action="store_true",
                    help="only measure how long BLAS workers stay busy after a call")
    ap.add_argument("--preludes", default="none,update,spin,touch,warm,sweep,reuse,sleep")
    args = ap.parse_args(argv)
    if args.worker_spin:
        for one in (False, True, False, True):
            print(f"NumPy's BLAS workers busy for {worker_spin(one) * 1e3:.0f} ms after a "
                  f"call on every thread{', then a limit to one thread' if one else ''}; "
                  f"load {os.getloadavg()[0]:.1f}")
        return 0
    from threadpoolctl import threadpool_limits

    from linview.backends.numpy import threads

    threads.PARK["on"] = args.park == "on"

    dims = {k: int(v) for k, v in (kv.split("=") for kv in args.dims.split(","))}
    prog = linview.compile_file(args.program, dims=dims)
    rng = np.random.default_rng(0)
    ins = random_inputs(prog, rng)
    views = prog.load(**ins)
    x = prog.program.dynamic[0]
    if args.mode:
        views.adaptation.enabled = False
        views.adaptation.mode[x] = args.mode
    stream = row_updates(np.shape(ins[x]), args.calls * args.rounds * 2 + 8, 1, rng, 0.1)
    feed = iter(stream)
    took = []
    for _ in range(8):
        U, V = next(feed)
        t0 = time.perf_counter()
        views.update(x, U, V)
        took.append(time.perf_counter() - t0)
    T = float(np.median(took))
    if args.call == "gemv":
        n = args.size or 2000
        B, v = rng.standard_normal((n, n)), rng.standard_normal(n)
        B2 = rng.standard_normal((n, n))
        call, other, touch = (lambda: B @ v), (lambda: B2 @ v), B.sum
    else:
        n = args.size or 600
        C, C2 = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        call, other, touch = (lambda: C @ C), (lambda: C2 @ C2), C.sum
    small = rng.standard_normal((64, 64))
    big = np.ones(32 << 20)  # 256 MB

    W = rng.standard_normal((256, 256))

    def prelude(kind):
        if kind.endswith("+wake"):  # then one product OpenBLAS runs on every thread
            prelude(kind[:-len("+wake")])
            W @ W
            return
        if kind == "update":
            views.update(x, *next(feed))
        elif kind == "spin":
            _spin(T)
        elif kind.startswith("spin"):  # spin4: a busy wait of 4 ms
            _spin(float(kind[4:]) / 1e3)
        elif kind == "sweep":
            big.sum()
        elif kind == "reuse":
            end = time.perf_counter() + T
            while time.perf_counter() < end:
                other()
        elif kind == "touch":
            _spin(T)
            touch()
        elif kind == "warm":
            _spin(T)
            end = time.perf_counter() + 2e-4
            while time.perf_counter() < end:
                small @ small
        elif kind == "sleep":
            time.sleep(max(T, 0.2))

    kinds = args.preludes.split(",")
    tlist = [int(t) for t in args.threads.split(",")]
    res = {(k, t): ([], []) for k in kinds for t in tlist}
    for r in range(args.rounds):
        for t in tlist:
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for kind in order:
                lim = threadpool_limits(t, user_api="blas") if t < (os.cpu_count() or 1) \
                    else None
                try:
                    call()
                    for _ in range(args.calls // args.rounds):
                        prelude(kind)
                        run = _running_threads()
                        t0 = time.perf_counter()
                        call()
                        res[kind, t][0].append(time.perf_counter() - t0)
                        res[kind, t][1].append(run)
                finally:
                    if lim is not None:
                        lim.restore_original_limits()
    print(f"{prog.name} {args.dims}: update median {T * 1e3:.2f} ms, mode "
          f"{views.adaptation.mode.get(x, 'as compiled')} on {views._trigger_threads(x)} threads"
          f", park {args.park}; call {args.call} of "
          f"order {n}; load "
          f"{os.getloadavg()[0]:.1f}")
    for t in tlist:
        base = float(np.median(res["none", t][0])) if ("none", t) in res else None
        for kind in kinds:
            ts, rs = (np.array(a) for a in res[kind, t])
            med = float(np.median(ts))
            ratio = f"{med / base:.2f}x" if base else "-"
            print(f"  threads {t} {kind:<7} {med * 1e3:7.3f} ms ({np.percentile(ts, 10) * 1e3:.3f}"
                  f"-{np.percentile(ts, 90) * 1e3:.3f})  {ratio:>6}  workers running "
                  f"{np.median(rs):.0f} (mean {rs.mean():.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
