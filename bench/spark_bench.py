"""Spark backend benchmarks (issue 5), on a local Spark session.

    python bench/spark_bench.py --json bench/results/spark.json          # full sizes
    python bench/spark_bench.py --n 1000 --ols-n 500 --stream-n 300 --stream-updates 100
    python bench/spark_bench.py --only product --mllib-blas java --json bench/results/spark.json

(a) ``D = A^16`` (exp model: A², A⁴, A⁸, A¹⁶ views) at n = 4000: Spark INCR per update vs
    Spark re-evaluation (update the input, then ``refresh()``); and one n×n product by the
    Spark backend's block multiply (row blocks × column blocks, NumPy in the tasks) vs
    ``pyspark.mllib.linalg.distributed.BlockMatrix.multiply`` on the same matrix;
(a') ``--only product``: the product alone, also with ``--mllib-blas java``: MLlib's
    speed depends on whether its JVM finds a native BLAS (GNU Octave's Debian packages
    bring OpenBLAS; a bare machine has none and MLlib uses its pure-JVM BLAS);
(b) OLS ``beta = (X'X) \\ (X'Y)`` with X of 2n×n, n = 2000: Spark INCR per update vs Spark
    re-evaluation vs the NumPy backend's INCR (the price of distribution);
(c) a stream of consecutive rank-1 updates (OLS, n = 1000): median per-update time of the
    first and the last 100, and the driver's memory (Python and JVM resident set), to
    show that lineage cuts keep time and memory flat.

Every time is a wall-clock time on this machine, reported as median / p10 / p90 over the
repetitions; ratios are taken in one run.  Spark runs in ``local[2]`` by default; the load
average at the start of each case is recorded (other processes skew these timings).
``--json F`` merges: cases in F that this run does not repeat are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from spark_report import table, write_markdown  # noqa: E402 - bench/ is on sys.path

import linview  # noqa: E402
from linview.backends.spark import runtime as srt  # noqa: E402
from linview.backends.spark.blocks import DistMatrix, matmul  # noqa: E402
from linview.backends.spark.context import BlockContext  # noqa: E402

POWER = "function D = pow16(A)\n  %#linview dims A(n,n)\n  D = A^16;\nend\n"
OLS = Path(HERE.parent, "examples", "ols.m")


def stats(ts) -> dict:
    ts = np.asarray(ts, dtype=float)
    return {"median": float(np.median(ts)), "p10": float(np.percentile(ts, 10)),
            "p90": float(np.percentile(ts, 90)), "n": int(ts.size)}


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process in MiB (from /proc; NaN where unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def jvm_pid(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return getattr(proc, "pid", None)


def machine(spark, master: str) -> dict:
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in
                   Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name"))
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
        mem_gib = round(int(mem) / 2**20, 1)
    except (OSError, StopIteration, IndexError):
        mem_gib = None
    return {"platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count(),
            "memory_gib": mem_gib, "python": platform.python_version(),
            "numpy": np.__version__, "spark": spark.version, "master": master,
            "load_average_at_start": os.getloadavg()}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rank1(rng, rows: int, cols: int, size: float):
    return rng.standard_normal(rows) * size, rng.standard_normal(cols) / np.sqrt(cols)


def reevaluate(views, name: str, u, v) -> None:
    """The re-evaluation strategy: change the input, then re-evaluate every view."""
    X = views._views[name]
    if isinstance(X, DistMatrix):
        X.add_outer(u[:, None], v[:, None])
    else:
        X += np.outer(u, v)
    views.refresh()


# ------------------------------------------------------------------ (a) A^16
def bench_power(spark, args, rng) -> dict:
    n = args.n
    prog = linview.compile(POWER, name="pow16", backend="spark", dims={"n": n})
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = 0.9 * Q  # spectral radius 0.9: A^16 stays O(1)
    t0 = time.perf_counter()
    views = prog.load(A=A, spark=spark, partitions=args.partitions,
                      distribute_min=args.distribute_min,
                      fold_rank=args.fold_rank, layout=args.layout)
    load = time.perf_counter() - t0
    layouts = {k: d.layout for k, d in views.distributed().items()}
    u, v = rank1(rng, n, n, 1e-3)
    views.update("A", u, v)  # warm-up
    incr = [timed(lambda: views.update("A", *rank1(rng, n, n, 1e-3)))
            for _ in range(args.updates)]
    err = views.verify()
    reeval = [timed(lambda: reevaluate(views, "A", *rank1(rng, n, n, 1e-3)))
              for _ in range(args.reevals)]
    # one n×n product: the backend's block multiply vs MLlib BlockMatrix.multiply
    Ad = views._views["A"]
    for r in (Ad.rows(), Ad.cols()):  # both operand layouts in place before timing
        r.count()
    ours = [timed(lambda: product_once(Ad)) for _ in range(args.reevals)]
    mllib = bench_mllib(spark, Ad, args.reevals)
    views.release()
    return {"n": n, "layouts": layouts, "load_s": load, "incr_update_s": stats(incr),
            "reeval_s": stats(reeval), "verify_error": err,
            "speedup_incr_vs_reeval": float(np.median(reeval) / np.median(incr)),
            "product_linview_s": stats(ours), "product_mllib_blockmatrix_s": stats(mllib),
            "product_mllib_over_linview": float(np.median(mllib) / np.median(ours)),
            "mllib_blas": mllib_blas(spark)}


def bench_mllib(spark, Ad: DistMatrix, reps: int) -> list[float]:
    """``BlockMatrix.multiply`` on the same matrix, in the same blocks (one block row of
    ours is cut into square blocks of the same size)."""
    from pyspark import StorageLevel
    from pyspark.mllib.linalg import Matrices
    from pyspark.mllib.linalg.distributed import BlockMatrix

    n = Ad.shape[0]
    splits = Ad.ctx.splits(n)
    bs = splits[1] - splits[0]

    def cut(kv):
        i, b = kv
        for j in range(0, n, bs):
            blk = b[:, j:j + bs]
            yield (i, j // bs), Matrices.dense(blk.shape[0], blk.shape[1],
                                               blk.ravel(order="F"))

    if any(b - a != bs for a, b in zip(splits[:-2], splits[1:-1], strict=True)):
        raise SystemExit("the MLlib comparison needs n divisible by the partitions")
    blocks = Ad.rows().flatMap(cut)
    bm = BlockMatrix(blocks, bs, bs, n, n).persist(StorageLevel.MEMORY_AND_DISK)
    jvm = bm._java_matrix_wrapper._java_model
    jvm.blocks().count()  # materialize the input on the JVM side

    def multiply():  # counted on the JVM: the product is not converted to Python
        jvm.multiply(jvm).blocks().count()

    out = [timed(multiply) for _ in range(reps)]
    jvm.blocks().unpersist(False)
    return out


def mllib_blas(spark) -> str:
    """The BLAS that MLlib's JVM side uses: ``JNIBLAS`` (a native BLAS such as OpenBLAS
    was found), or ``VectorBLAS`` / ``JavaBLAS`` (pure JVM)."""
    try:
        return str(spark.sparkContext._jvm.dev.ludovic.netlib.blas.BLAS.getInstance()
                   .getClass().getSimpleName())
    except Exception:  # noqa: BLE001 - older Spark without dev.ludovic.netlib
        return "unknown"


def bench_product(spark, args, rng) -> dict:
    """(a') one n×n product only: linview's block multiply vs MLlib's, and which BLAS the
    JVM found (run with ``--mllib-blas java`` to time MLlib without a native BLAS)."""
    n = args.n
    ctx = BlockContext(spark.sparkContext, args.partitions)
    Ad = DistMatrix.from_numpy(ctx, rng.standard_normal((n, n)), "both")
    for r in Ad.rdds():
        r.count()
    ours = [timed(lambda: product_once(Ad)) for _ in range(args.reevals)]
    ctx.driver_max_elements = 0  # one task per tile, tiles grouped by a shuffle
    tiles = [timed(lambda: product_once(Ad)) for _ in range(args.reevals)]
    mllib = bench_mllib(spark, Ad, args.reevals)
    ctx.sweep([])
    return {"n": n, "mllib_blas": mllib_blas(spark), "product_linview_s": stats(ours),
            "product_linview_tiles_s": stats(tiles),
            "product_mllib_blockmatrix_s": stats(mllib),
            "product_mllib_over_linview": float(np.median(mllib) / np.median(ours))}


def product_once(Ad: DistMatrix) -> None:
    C = matmul(Ad, Ad)
    C._rows.count()
    C._rows.unpersist()


# ------------------------------------------------------------------ (b) OLS
def ols_inputs(rng, n: int, m: int | None = None):
    m = m or 2 * n
    return rng.standard_normal((m, n)), rng.standard_normal((m, 1))


def bench_ols(spark, args, rng) -> dict:
    n = args.ols_n
    m = args.ols_rows or 2 * n
    X, Y = ols_inputs(rng, n, m)
    sprog = linview.compile_file(OLS, backend="spark", dims={"m": m, "n": n, "p": 1})
    nprog = linview.compile_file(OLS, backend="numpy", dims={"m": m, "n": n, "p": 1})
    views = sprog.load(X=X, Y=Y, spark=spark, partitions=args.partitions,
                      distribute_min=args.distribute_min,
                      fold_rank=args.fold_rank, layout=args.layout)
    local = nprog.load(X=X, Y=Y)
    ups = [rank1(rng, m, n, 0.1) for _ in range(args.updates + 1)]
    views.update("X", *ups[0])
    local.update("X", *ups[0])
    incr = [timed(lambda u=u: views.update("X", *u)) for u in ups[1:]]
    numpy_incr = [timed(lambda u=u: local.update("X", *u)) for u in ups[1:]]
    agree = float(np.max(np.abs(views["beta"] - local["beta"])) /
                  np.max(np.abs(local["beta"])))
    err = views.verify()
    reeval = [timed(lambda: reevaluate(views, "X", *rank1(rng, m, n, 0.1)))
              for _ in range(args.reevals)]
    layouts = {k: d.layout for k, d in views.distributed().items()}
    views.release()
    return {"m": m, "n": n, "layouts": layouts, "incr_update_s": stats(incr),
            "reeval_s": stats(reeval), "numpy_incr_update_s": stats(numpy_incr),
            "speedup_incr_vs_reeval": float(np.median(reeval) / np.median(incr)),
            "spark_over_numpy_incr": float(np.median(incr) / np.median(numpy_incr)),
            "verify_error": err, "spark_vs_numpy_error": agree}


# ------------------------------------------------------------------ (c) stream
def bench_stream(spark, args, rng) -> dict:
    n, count = args.stream_n, args.stream_updates
    X, Y = ols_inputs(rng, n)
    prog = linview.compile_file(OLS, backend="spark", dims={"m": 2 * n, "n": n, "p": 1})
    views = prog.load(X=X, Y=Y, spark=spark, partitions=args.partitions,
                      checkpoint_every=args.checkpoint_every,
                      distribute_min=args.distribute_min,
                      fold_rank=args.fold_rank, layout=args.layout)
    jvm = jvm_pid(spark)
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    times, rss, depth = [], [], []
    for i in range(count):
        u, v = rank1(rng, 2 * n, n, 0.05)
        times.append(timed(lambda u=u, v=v: views.update("X", u, v)))
        depth.append(max(views.lineage_depth().values(), default=0))  # not timed
        if i % 50 == 49 or i == count - 1:
            spark.sparkContext._jvm.java.lang.System.gc()
            heap = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
            rss.append({"after": i + 1, "python_mb": rss_mb(), "jvm_mb": rss_mb(jvm or 0),
                        "jvm_heap_after_gc_mb": heap, "persistent_rdds": persistent().size()})
    err = views.verify()
    views.release()
    k = min(100, count // 2)
    first, last = times[:k], times[-k:]
    windows = [float(np.median(times[i:i + 100])) for i in range(0, count, 100)]
    return {"m": 2 * n, "n": n, "updates": count, "checkpoint_every": args.checkpoint_every,
            "first_s": stats(first), "last_s": stats(last),
            "last_over_first": float(np.median(last) / np.median(first)),
            "median_per_100_s": windows, "rss": rss, "max_lineage_depth": max(depth),
            "verify_error": err}


# ------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4000, help="A^16 size (a)")
    ap.add_argument("--ols-n", type=int, default=2000, help="OLS features; X is 2n×n (b)")
    ap.add_argument("--ols-rows", type=int, default=None, help="OLS rows (default 2n)")
    ap.add_argument("--stream-n", type=int, default=1000, help="OLS features in (c)")
    ap.add_argument("--stream-updates", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=5, help="timed INCR updates in (a), (b)")
    ap.add_argument("--reevals", type=int, default=2, help="timed re-evaluations")
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--fold-rank", type=int, default=None,
                    help="fold pending low-rank terms into the blocks at this total rank "
                         "(default: the backend's; 0: at every update)")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--distribute-min", type=int, default=256,
                    help="distribute views with both dimensions at least this")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--only", default="power,ols,stream",
                    help="cases to run: power, product, ols, stream")
    ap.add_argument("--layout", default="hybrid", choices=("hybrid", "row", "col"),
                    help="blocks of every view: the access analysis (hybrid) or one layout")
    ap.add_argument("--mllib-blas", default="any", choices=("any", "java"),
                    help="java: hide native BLAS from the JVM (MLlib falls back to its "
                         "pure-JVM BLAS, as on a machine without libblas)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    conf = {"spark_driver_memory": args.driver_memory}
    if args.mllib_blas == "java":
        conf["spark_driver_extraJavaOptions"] = "-Ddev.ludovic.netlib.blas.nativeLib=none"
    spark = srt.local_session(args.master, **conf)
    rng = np.random.default_rng(0)
    res: dict = {"machine": machine(spark, args.master), "args": vars(args) | {
        "json": str(args.json) if args.json else None}}
    for case in args.only.split(","):
        fn = {"power": bench_power, "product": bench_product, "ols": bench_ols,
              "stream": bench_stream}[case]
        t0, load = time.perf_counter(), os.getloadavg()
        out = fn(spark, args, rng)
        out.update(wall_s=time.perf_counter() - t0, load_average_at_start=load,
                   layout=args.layout, fold_rank=args.fold_rank, args=res["args"])
        print(table({case: out}), flush=True)
        key = case if args.layout == "hybrid" else f"{case}_{args.layout}_layout"
        key += "_mllib_java_blas" if args.mllib_blas == "java" else ""
        res[key if args.fold_rank is None else f"{key}_fold{args.fold_rank}"] = out
    if args.json:  # cases already in the file and not run now are kept
        old = json.loads(args.json.read_text()) if args.json.exists() else {}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(old | res, indent=2, default=float) + "\n")
        if args.json.resolve() == (HERE / "results" / "spark.json").resolve():
            write_markdown(old | res, HERE / "README.md")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
