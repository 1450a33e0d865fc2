"""``linview run`` throughput and micro-batch latency (issue 13), NumPy vs Spark Structured
Streaming, on the same stream of OLS row updates.

    python bench/stream_bench.py --json bench/results/stream.json --md bench/results/stream.md
    python bench/stream_bench.py --m 400 --n 100 --batches 4 --sizes 1,16   # quick

OLS ``beta = (X'X) \\ (X'Y)`` with X of m×n (default 4000×1000) and Y m×1.  For every
batch size k (default 1, 16, 256) the stream is ``--batches`` micro-batches of k records
``{"input": "X", "row": i, "add": [...]}`` (random rows), one file per micro-batch.

Both run with the BLAS settings of ``linview run`` (``run_cli.BLAS_ENV``).

* NumPy: the stream engine of ``linview run`` (:class:`linview.app.stream.Stream`) in this
  process, with a checkpoint directory (write-ahead log, one fsync per batch) and an
  output directory (Parquet results table + latest.npz + log line per batch).
* Spark: ``linview run --backend spark --once`` in this process (``local[2]``): a
  Structured Streaming query over the directory of files, ``maxFilesPerTrigger = 1``,
  every micro-batch applied in ``foreachBatch`` to the Spark trigger module.

Reported per backend and batch size: sustained updates/s (records over the wall time of
all batches), the latency of one micro-batch (p50 / p99 over the batches; on Spark from
the end of one ``foreachBatch`` to the end of the next, which includes the query's
trigger overhead, since all files are there when the query starts), and where the time
goes: query overhead (Spark: its micro-batch, reading and parsing the batch's files; also
Spark's own ``durationMs`` medians per micro-batch), checking and logging
the records, the trigger (``views.update``), writing the outputs.  The max relative
error of the final views against re-evaluation is reported beside the times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from linview.app.run_cli import quiet_blas_workers  # noqa: E402

quiet_blas_workers()  # as `linview run` does, before NumPy loads OpenBLAS

import numpy as np  # noqa: E402

import linview  # noqa: E402
from linview.app.records import read_text  # noqa: E402
from linview.app.stream import Stream, batches  # noqa: E402

OLS = Path(HERE.parent, "examples", "ols.m")


def pct(ts, q) -> float:
    return float(np.percentile(np.asarray(ts, dtype=float), q)) if len(ts) else float("nan")


def write_stream(d: Path, rng, m: int, n: int, k: int, count: int) -> None:
    d.mkdir(parents=True)
    for b in range(count):
        rows = rng.integers(1, m + 1, size=k)
        text = "".join(json.dumps({"input": "X", "row": int(r),
                                   "add": np.round(0.01 * rng.standard_normal(n), 6).tolist()})
                       + "\n" for r in rows)
        p = d / f"b{b:05d}.jsonl"
        p.write_text(text)
        os.utime(p, (1e9 + b, 1e9 + b))


def summarize(timings: list[dict], walls: list[float], total: float, k: int) -> dict:
    keys = [x for x in ("query", "collect", "check_log", "trigger", "output")
            if any(x in t for t in timings)]
    return {"batch_size": k, "batches": len(walls), "updates_per_s": k * len(walls) / total,
            "latency_p50_s": pct(walls, 50), "latency_p99_s": pct(walls, 99),
            "breakdown_median_s": {x: pct([t.get(x, 0.0) for t in timings], 50) for x in keys}}


def bench_numpy(X, Y, k: int, files: Path, work: Path) -> dict:
    prog = linview.compile_file(OLS, backend="numpy")
    s = Stream(prog, inputs=[], checkpoint=work / "ck", out=work / "out",
               load_options={"X": X, "Y": Y})
    s.timings = []
    walls = []
    t_all = time.perf_counter()
    for f in sorted(files.iterdir()):
        t0 = time.perf_counter()
        for batch in batches(read_text(f.read_text(), str(f)), 1 << 30):
            s.apply_batch(batch)
        walls.append(time.perf_counter() - t0)
    total = time.perf_counter() - t_all
    s.close()
    # the first batch's wall time includes importing the output writers; leave it out
    # (as on Spark, where it includes starting the query)
    out = summarize(s.timings[1:], walls[1:], total - walls[0], k)
    out["max_rel_error"] = s.views.verify()
    return out


def _listener(progress: list):
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            progress.append(dict(event.progress.durationMs))

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return Listener()


def bench_spark(X, Y, k: int, files: Path, work: Path, spark_args) -> dict:
    import linview.app.spark_stream as ss
    import linview.app.stream as st
    from linview.app.run_cli import Status

    prog = linview.compile_file(OLS, backend="spark")
    np.save(work / "X.npy", X)
    np.save(work / "Y.npy", Y)
    marks: list[float] = []
    created: list = []
    orig_init = st.Stream.__init__

    def init(self, *a, **kw):  # keep the engine to read its timings afterwards
        orig_init(self, *a, **kw)
        self.timings = []
        created.append(self)
        marks.append(time.perf_counter())

    args = SimpleNamespace(updates=str(files), master=spark_args.master, once=True,
                           spark_driver_mib=spark_args.spark_driver_mib,
                           checkpoint=str(work / "ck"), out=str(work / "out"), restart=False,
                           input=[f"X={work / 'X.npy'}", f"Y={work / 'Y.npy'}"],
                           checkpoint_every=100, on_error="stop", max_batch=1,
                           spark_log_level="ERROR")
    orig_apply = st.Stream.apply_batch

    def apply_batch(self, *a, **kw):
        orig_apply(self, *a, **kw)
        marks.append(time.perf_counter())

    progress: list[dict] = []
    orig_session = ss.session

    def session(a):  # Spark's own timing of every micro-batch (durationMs)
        spark = orig_session(a)
        spark.streams.addListener(_listener(progress))
        return spark

    st.Stream.__init__, st.Stream.apply_batch, ss.session = init, apply_batch, session
    try:
        ss.run_structured(prog, args, {"partitions": spark_args.partitions},
                          Status(quiet=True))
    finally:
        st.Stream.__init__, st.Stream.apply_batch = orig_init, orig_apply
        ss.session = orig_session
    s = created[0]
    walls = list(np.diff(marks))
    for t, w in zip(s.timings, walls, strict=True):
        t["query"] = w - t["check_log"] - t["trigger"] - t["output"]
    # the first batch's wall time includes starting the query; leave it out
    out = summarize(s.timings[1:], walls[1:], marks[-1] - marks[1], k)
    out["collect_total_s"] = s.backend_stats.get("collect_seconds", 0.0)
    out["read_from_log"] = s.backend_stats.get("batches_read_from_log", 0)
    time.sleep(0.5)  # the listener's last events
    keys = sorted({k for d in progress[1:] for k in d})
    out["spark_duration_ms_median"] = {k: pct([d.get(k, 0) for d in progress[1:]], 50)
                                       for k in keys}
    out["max_rel_error"] = s.views.verify()
    s.views.release()
    return out


def render(result: dict) -> str:
    """The results as a Markdown table (``--md``)."""
    la = result["machine"]["load_average_at_start"]
    lines = [f"# `linview run`: NumPy vs Spark Structured Streaming (OLS, X {result['m']}×"
             f"{result['n']})", "",
             "Generated by `python bench/stream_bench.py --json bench/results/stream.json "
             "--md bench/results/stream.md`.",
             f"Machine: {result['machine']['cores']} cores, Python "
             f"{result['machine']['python']}; load average at the start {la[0]:.1f}, "
             f"{la[1]:.1f}, {la[2]:.1f} (1, 5, 15 min)"
             + (", at the end {:.1f}, {:.1f}, {:.1f}".format(*result["machine"][
                 "load_average_at_end"]) if "load_average_at_end" in result["machine"] else "")
             + ": other processes skew these times.  Spark keeps views up to "
             f"{result.get('spark_driver_mib', 0):g} MiB on the driver (--spark-driver-mib).",
             "Latency: one micro-batch, p50 / p99 over the batches (Spark: from the end of one "
             "foreachBatch to the end of the next); the first batch (imports, the query's "
             "start) is left out on both backends.  Breakdown: medians per batch; query = "
             "Spark's micro-batch overhead and reading and parsing the batch's files.  "
             "Spark/NumPy: the ratio of updates/s in this run.", "",
             "| backend | batch | updates/s | Spark/NumPy | latency p50 / p99 | query | "
             "check+log | trigger | output | error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base = {r["batch_size"]: r["updates_per_s"] for r in result["numpy"]}
    for backend in ("numpy", "spark"):
        for r in result[backend]:
            b = r["breakdown_median_s"]
            ratio = r["updates_per_s"] / base[r["batch_size"]] if backend == "spark" else 1.0
            lines.append(
                f"| {backend} | {r['batch_size']} | {r['updates_per_s']:.1f} | {ratio:.2f}× | "
                f"{r['latency_p50_s'] * 1e3:.0f} / {r['latency_p99_s'] * 1e3:.0f} ms | "
                + " | ".join(f"{b[x] * 1e3:.0f} ms" if x in b else "–"
                             for x in ("query", "check_log", "trigger", "output"))
                + f" | {r['max_rel_error']:.0e} |")
    spark = [r for r in result["spark"] if r.get("spark_duration_ms_median")]
    if spark:
        keys = ["triggerExecution", "latestOffset", "walCommit", "getBatch",
                "queryPlanning", "addBatch", "commitOffsets"]
        lines += ["", "Spark's own timing of a micro-batch (`StreamingQueryProgress.durationMs`, "
                  "medians, ms; addBatch is the foreachBatch call: reading the files, "
                  "check+log, trigger, output):", "",
                  "| batch | " + " | ".join(keys) + " |",
                  "|---:|" + "---:|" * len(keys)]
        for r in spark:
            d = r["spark_duration_ms_median"]
            lines.append(f"| {r['batch_size']} | "
                         + " | ".join(f"{d.get(k, 0):.0f}" for k in keys) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=4000)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--sizes", default="1,16,256")
    ap.add_argument("--batches", type=int, default=12, help="micro-batches per size")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--spark-driver-mib", type=float, default=64,
                    help="linview run's --spark-driver-mib (0: distribute every view)")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None, help="also write the table as Markdown")
    ap.add_argument("--render", default=None, metavar="JSON",
                    help="only render the Markdown of an earlier --json")
    args = ap.parse_args()
    if args.render:
        result = json.loads(Path(args.render).read_text())
        text = render(result)
        Path(args.md).write_text(text) if args.md else print(text)
        return
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((args.m, args.n)), rng.standard_normal((args.m, 1))
    result = {"machine": {"platform": platform.platform(), "cores": os.cpu_count(),
                          "python": platform.python_version(),
                          "load_average_at_start": os.getloadavg()},
              "m": args.m, "n": args.n, "spark_driver_mib": args.spark_driver_mib,
              "numpy": [], "spark": []}
    for k in [int(x) for x in args.sizes.split(",")]:
        root = Path(tempfile.mkdtemp(prefix="linview-stream-bench-"))
        try:
            write_stream(root / "files", rng, args.m, args.n, k, args.batches)
            (root / "np").mkdir()
            r = bench_numpy(X.copy(), Y.copy(), k, root / "files", root / "np")
            result["numpy"].append(r)
            print(json.dumps({"numpy": r}), flush=True)
            if not args.skip_spark:
                (root / "spark").mkdir()
                r = bench_spark(X, Y, k, root / "files", root / "spark", args)
                result["spark"].append(r)
                print(json.dumps({"spark": r}), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(render(result))


if __name__ == "__main__":
    main()
