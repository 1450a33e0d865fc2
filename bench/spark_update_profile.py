"""Where a Spark update's time goes (issue 24): per-update time of the Spark backend with
its views distributed, against the NumPy backend's on the same machine in the same run,
with the Spark jobs, stages and tasks of each update and Spark's per-job floor.

    python bench/spark_update_profile.py \\
        --json bench/results/spark_profile.json
    python bench/spark_update_profile.py --cluster \\
        --json bench/results/spark_profile_cluster.json

Cases: OLS ``beta = (X'X) \\ (X'Y)`` with X 4000×1000 (Y 4000×1), and ``D = A^16`` (exp
model: views A², A⁴, A⁸, A¹⁶) at n = 4000; rank-1 dense updates, views distributed
(``distribute_min`` 256) in ``local[2]`` (``--driver-memory``, default 8g).  The floor:
the median time of an empty job (``parallelize([0], 1).count()``) and of a job that maps
a cached two-block RDD and collects a number per block (what a product of a view with a
thin factor costs before any data is read).  Time in jobs is the wall time inside
PySpark's ``collect``/``runJob``/``count`` during the updates; the rest is the driver
(Python, NumPy on thin factors, building the jobs).  Task run time (summed over tasks,
from Spark's status store: the JVM task including its Python worker, which reads the
cached blocks from the JVM and unpickles them) against job time shows what the
scheduling costs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402
from linview.backends.spark import runtime as srt  # noqa: E402

POWER = "function D = pow16(A)\n  %#linview dims A(n,n)\n  D = A^16;\nend\n"
OLS = HERE.parent / "examples" / "ols.m"


class JobClock:
    """Wall time spent inside PySpark's job-running calls, and the jobs, stages and tasks
    the status tracker saw, between :meth:`start` and :meth:`stop`."""

    CALLS = (("pyspark.rdd", "RDD", "collect"), ("pyspark.rdd", "RDD", "count"),
             ("pyspark.context", "SparkContext", "runJob"))

    def __init__(self, sc):
        import importlib

        self.sc, self.seconds, self.depth = sc, 0.0, 0
        self.saved = []
        for mod, cls, name in self.CALLS:
            owner = getattr(importlib.import_module(mod), cls)
            fn = getattr(owner, name)
            self.saved.append((owner, name, fn))
            setattr(owner, name, self._wrap(fn))

    def _wrap(self, fn):
        def timed(*a, **kw):
            self.depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.seconds += time.perf_counter() - t0
        return timed

    def jobs(self) -> set[int]:
        return set(self.sc.statusTracker().getJobIdsForGroup(None))

    def start(self) -> None:
        self.seconds, self.before = 0.0, self.jobs()

    def stop(self) -> dict:
        new = sorted(self.jobs() - self.before)
        t = self.sc.statusTracker()
        stages = [s for j in new for s in (t.getJobInfo(j).stageIds if t.getJobInfo(j) else [])]
        out = {"jobs": len(new), "stages": len(stages), "tasks": 0, "job_seconds": self.seconds,
               "task_run_seconds": 0.0, "task_deserialize_seconds": 0.0,
               "result_bytes": 0}
        store = self.sc._jsc.sc().statusStore()  # kept with the UI off too
        for s in stages:
            try:
                sd = store.lastStageAttempt(s)
            except Exception:  # noqa: BLE001 - dropped from the store
                continue
            out["tasks"] += sd.numTasks()
            out["task_run_seconds"] += sd.executorRunTime() / 1e3
            out["task_deserialize_seconds"] += sd.executorDeserializeTime() / 1e3
            out["result_bytes"] += sd.resultSize()
        return out

    def close(self) -> None:
        for owner, name, fn in self.saved:
            setattr(owner, name, fn)


def med(xs) -> float:
    return float(np.median(xs))


def floor(sc, reps: int) -> dict:
    empty = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sc.parallelize([0], 1).count()
        empty.append(time.perf_counter() - t0)
    cached = sc.parallelize([(0, np.zeros((2, 2))), (1, np.zeros((2, 2)))], 2).cache()
    cached.count()
    mapped = []
    for _ in range(reps):
        t0 = time.perf_counter()
        cached.map(lambda kv: kv[0]).collect()
        mapped.append(time.perf_counter() - t0)
    cached.unpersist()
    return {"empty_job_s": med(empty), "two_task_map_collect_s": med(mapped)}


def per_update(views, local, name, ups, clock) -> dict:
    spark_t, numpy_t, counts = [], [], []
    for u, v in ups:
        clock.start()
        t0 = time.perf_counter()
        views.update(name, u, v)
        spark_t.append(time.perf_counter() - t0)
        counts.append(clock.stop())
        t0 = time.perf_counter()
        local.update(name, u, v)
        numpy_t.append(time.perf_counter() - t0)
    out = {k: med([c[k] for c in counts]) for k in counts[0]}
    out.update(spark_update_s=med(spark_t), numpy_update_s=med(numpy_t),
               spark_over_numpy=med(spark_t) / med(numpy_t), updates=len(ups))
    out["driver_seconds"] = out["spark_update_s"] - out["job_seconds"]
    return out


def case_ols(spark, clock, rng, args) -> dict:
    m, n = args.ols_rows, args.ols_cols
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    dims = {"m": m, "n": n, "p": 1}
    views = linview.compile_file(OLS, backend="spark", dims=dims).load(X=X, Y=Y, spark=spark)
    local = linview.compile_file(OLS, backend="numpy", dims=dims).load(X=X, Y=Y)
    ups = [(rng.standard_normal((m, 1)) * 0.1, rng.standard_normal((n, 1)) / np.sqrt(n))
           for _ in range(args.updates + 1)]
    per_update(views, local, "X", ups[:1], clock)  # warm-up
    out = per_update(views, local, "X", ups[1:], clock)
    out["distributed"] = {k: v.layout for k, v in views.distributed().items()}
    out["error_vs_numpy"] = float(np.max(np.abs(views["beta"] - local["beta"]))
                                  / np.max(np.abs(local["beta"])))
    views.release()
    return out


def case_power(spark, clock, rng, args) -> dict:
    n = args.n
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = 0.9 * Q
    views = linview.compile(POWER, name="pow16", backend="spark").load(A=A, spark=spark)
    local = linview.compile(POWER, name="pow16", backend="numpy").load(A=A)
    ups = [(rng.standard_normal((n, 1)) * 1e-3, rng.standard_normal((n, 1)) / np.sqrt(n))
           for _ in range(args.updates + 1)]
    per_update(views, local, "A", ups[:1], clock)
    out = per_update(views, local, "A", ups[1:], clock)
    out["distributed"] = {k: v.layout for k, v in views.distributed().items()}
    D = local["D"]
    out["error_vs_numpy"] = float(np.max(np.abs(views["D"] - D)) / np.max(np.abs(D)))
    views.release()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ols-rows", type=int, default=4000)
    ap.add_argument("--ols-cols", type=int, default=1000)
    ap.add_argument("--n", type=int, default=4000, help="A^16 size")
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--only", default="ols,power")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--cluster", action="store_true",
                    help="on a standalone cluster on loopback (two workers of 1 core, 2 GB; "
                         "linview.app.spark_cluster) instead of --master")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.cluster:
        from linview.app.spark_cluster import LoopbackCluster, cluster_env

        os.environ.update(cluster_env())
        with LoopbackCluster(workers=2, cores=1, memory="2g") as cluster:
            args.master = cluster.url
            return run(args, spark_executor_memory="1800m")
    return run(args)


def run(args, **conf) -> int:
    spark = srt.local_session(args.master, spark_driver_memory=args.driver_memory, **conf)
    sc = spark.sparkContext
    rng = np.random.default_rng(0)
    res = {"master": "standalone cluster on loopback, 2 workers of 1 core, 2 GB"
           if args.cluster else args.master, "driver_memory": args.driver_memory,
           "load_average_at_start": os.getloadavg(), "floor": floor(sc, 20)}
    print(json.dumps(res["floor"]), flush=True)
    clock = JobClock(sc)
    for case in args.only.split(","):
        res[case] = {"ols": case_ols, "power": case_power}[case](spark, clock, rng, args)
        print(case, json.dumps(res[case]), flush=True)
    clock.close()
    res["load_average_at_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
