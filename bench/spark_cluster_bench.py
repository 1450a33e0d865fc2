"""Large views on the standalone cluster (issue 24): load time, per-update time and
re-evaluation time of a program whose input is a ``.npy`` file the executors read.

    python bench/spark_cluster_bench.py --case pow16 --n 4000 --updates 3 \\
        --json bench/results/spark_cluster_pow16.json
    timeout 900 python bench/spark_cluster_bench.py --case square --n 12000 --updates 3 \\
        --reevals 0 --json bench/results/spark_cluster_n12000.json

The cluster: a master and two workers of 1 core and 2 GB on loopback
(:class:`linview.app.spark_cluster.LoopbackCluster`), executors of ``--executor-memory``
(default 2g), the driver at Spark's default memory (1 GB) unless ``--driver-memory``.
``load()`` runs with default settings (partitions, layout, memory fractions: none given).
Cases: ``pow16`` (``D = A^16``: views A², A⁴, A⁸, A¹⁶) and ``square`` (``B = A*A``: the
input A and the view B, 1.15 GB each at n = 12000).  ``A.npy`` is written a slab of rows
at a time through a memory map (never whole in memory), with spectral radius about 1/2.
Per update: a random rank-1 ``A += u vᵀ``.  After the updates, ``verify()`` evaluates the
program from the current inputs and compares every view block by block (its time is one
re-evaluation plus one comparison job).  Re-evaluation: the input changed the same way,
then ``refresh()`` (every view from the inputs, distributed products).  Every phase's time
is printed as it ends, so a run stopped by ``timeout`` still says how far it got; the
executors' logs stay in the work folder (``--work``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402
from linview.app.spark_cluster import LoopbackCluster, cluster_env  # noqa: E402
from linview.backends.spark import runtime as srt  # noqa: E402
from linview.backends.spark.blocks import DistMatrix  # noqa: E402

PROGRAMS = {
    "pow16": "function D = pow16(A)\n  %#linview dims A(n,n)\n  D = A^16;\nend\n",
    "square": "function B = square(A)\n  %#linview dims A(n,n)\n  B = A * A;\nend\n",
}


def write_input(path: Path, n: int, seed: int, slab_bytes: int = 64 << 20) -> None:
    """An n×n ``.npy`` of N(0, 1/(4n)) entries (spectral radius about 1/2), written a slab
    of rows at a time through a memory map."""
    a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, n))
    step = max(1, slab_bytes // (8 * n))
    for i in range(0, n, step):
        rng = np.random.default_rng([seed, i])
        a[i:i + step] = rng.standard_normal((min(step, n - i), n)) / (2 * np.sqrt(n))
    a.flush()
    del a


def say(res: dict, key: str, value) -> None:
    res[key] = value
    print(json.dumps({key: value}), flush=True)


def rank1(rng, n: int):
    return (rng.standard_normal((n, 1)) * 1e-3 / np.sqrt(n),
            rng.standard_normal((n, 1)) / np.sqrt(n))


def progress(sc, stop: threading.Event, every: float = 30.0) -> None:
    """Every ``every`` seconds, the active stages' tasks done (Spark's status tracker): where
    a run stopped by ``timeout`` was, and how fast its tasks went."""
    t0 = time.perf_counter()
    while not stop.wait(every):
        st = sc.statusTracker()
        stages = [st.getStageInfo(i) for i in st.getActiveStageIds()]
        print(json.dumps({"at_s": round(time.perf_counter() - t0), "stages": [
            {"stage": s.stageId, "name": s.name[:40], "done": s.numCompletedTasks,
             "running": s.numActiveTasks, "tasks": s.numTasks} for s in stages if s]}),
              flush=True)


def run_case(spark, args, path: Path, res: dict) -> None:
    prog = linview.compile(PROGRAMS[args.case], name=args.case, backend="spark")
    t0 = time.perf_counter()
    views = prog.load(A=str(path), spark=spark)  # default settings
    say(res, "load_s", time.perf_counter() - t0)
    ctx = views._ctx
    say(res, "sizing", {"partitions": ctx.partitions, "block_bytes": ctx.block_bytes,
                        "layouts": {k: d.layout for k, d in views.distributed().items()}})
    rng = np.random.default_rng(1)
    times = []
    for _ in range(args.updates):
        u, v = rank1(rng, args.n)
        t0 = time.perf_counter()
        views.update("A", u, v)
        times.append(time.perf_counter() - t0)
        print(json.dumps({"update_s": times[-1]}), flush=True)
    say(res, "update_s", times)
    if args.verify:
        t0 = time.perf_counter()
        say(res, "verify_error", views.verify())
        say(res, "verify_s", time.perf_counter() - t0)
    reevals = []
    for _ in range(args.reevals):
        u, v = rank1(rng, args.n)
        t0 = time.perf_counter()
        A = views._views["A"]
        A.add_outer(u, v) if isinstance(A, DistMatrix) else A.__iadd__(u @ v.T)
        views.refresh()
        reevals.append(time.perf_counter() - t0)
        print(json.dumps({"reeval_s": reevals[-1]}), flush=True)
    say(res, "reeval_s", reevals)
    views.release()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=sorted(PROGRAMS), default="pow16")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--reevals", type=int, default=1)
    ap.add_argument("--executor-memory", default="2g")
    ap.add_argument("--driver-memory", default=None, help="default: Spark's (1g)")
    ap.add_argument("--executor-java-options", default=None,
                    help="spark.executor.extraJavaOptions (default: linview's own)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-verify", dest="verify", action="store_false",
                    help="skip verify() after the updates (it costs a re-evaluation)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="linview-cluster-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    res = {"case": args.case, "n": args.n, "executor_memory": args.executor_memory,
           "driver_memory": args.driver_memory or "1g (default)",
           "cluster": "standalone on loopback: 2 workers of 1 core, 2 GB",
           "load_average_at_start": os.getloadavg()}
    t0 = time.perf_counter()
    write_input(work / "A.npy", args.n, seed=0)
    say(res, "write_input_s", time.perf_counter() - t0)
    os.environ.update(cluster_env())
    (work / "cluster").mkdir(exist_ok=True)
    conf = {"spark_executor_memory": args.executor_memory}
    if args.driver_memory:
        conf["spark_driver_memory"] = args.driver_memory
    if args.executor_java_options:
        conf["spark_executor_extraJavaOptions"] = args.executor_java_options
    try:
        with LoopbackCluster(workers=2, cores=1, memory="2g", logs=work / "cluster") as c:
            spark = srt.local_session(c.url, **conf)
            stop = threading.Event()
            threading.Thread(target=progress, args=(spark.sparkContext, stop),
                             daemon=True).start()
            try:
                run_case(spark, args, work / "A.npy", res)
            finally:
                stop.set()
                spark.stop()
    finally:
        res["load_average_at_end"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps(res, indent=1) + "\n")
        (work / "A.npy").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
