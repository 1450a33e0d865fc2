"""``linview run --backend spark``: a Structured Streaming query over a directory of update
files, each micro-batch applied exactly once to the Spark trigger module.

* **Source.**  Spark's file source in ``binaryFile`` format over ``--updates DIR``
  (``*.jsonl``, ``*.json``, ``*.parquet``), ``maxFilesPerTrigger = --max-batch`` (default
  1) for back-pressure.  Its schema is Spark's fixed one (``path``, ``modificationTime``,
  ``length``, ``content``); every file of a micro-batch is parsed on the driver by the same
  strict reader as the NumPy backend (:mod:`linview.app.records`), so a bad record is named by
  file and line and typed exactly as documented.  The driver reads the batch's files
  itself, at the paths Spark logged for the batch in the query's checkpoint
  (:mod:`linview.app.spark_files`), so no Spark job runs per batch; if the log is not as
  expected, one job collects the batch's DataFrame instead.  Spark takes new files in the
  order of their modification times (then names), within a micro-batch too; write a file
  elsewhere and move it into DIR, so that Spark never sees half of it.
* **Checkpoint writes** go through Hadoop's FileSystem API
  (:func:`use_fs_checkpoint_manager`): the default FileContext one forks ``readlink`` and
  ``chmod`` processes for most steps on a local disk.
* **Exactly once.**  The query's ``checkpointLocation`` is ``CK/query``; linview's state
  (``CK/state.npz``, ``CK/wal.log``, :mod:`linview.app.stream`) records the last applied
  ``batchId``.  A batch logged before a crash is re-applied from the log on restart; a
  batch that Spark replays after a crash (its id at or below the last applied) is skipped.
  Resuming checks the update source before Spark starts (:func:`check_before_start`).
* **Outputs** per batch as on NumPy (:mod:`linview.app.stream_out`), with Spark's batchId in
  the ``source_batch`` column.
* ``once=True`` (``--once``) processes the files there now (``availableNow``) and stops;
  otherwise the query runs until Ctrl-C (or SIGTERM, SIGHUP), which stops it after the
  running batch, saves, stops the JVM and exits 130 (143, 129) as on NumPy
  (``docs/stopping.md``).  The temporary folders (the zip shipped to executors, the log4j
  configuration) are removed on the way out.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from linview.app import signals
from linview.app.records import Record, read_text
from linview.app.spark_files import batch_files
from linview.app.stream_run import finish
from linview.backends.spark.session import get_session, remove_temp_dirs, spark_errors, temp_dir
from linview.errors import BackendError, InputError, LinviewError, StateError

LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
#: the driver's log4j2 configuration: the root logger at WARN (what Spark's shell check
#: expects, so it prints no banner), the console filtered at the chosen level
_LOG4J = """rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{{1}}: %m%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = {level}
logger.stream.name = org.apache.spark.sql.execution.streaming
logger.stream.level = {stream_level}
"""


def session(args):
    """The Spark session of ``linview run``: its JVM logs at ``--spark-log-level``
    (default ERROR, from the first line on: a log4j2 configuration given to the driver),
    linview shipped to its executors."""
    level = args.spark_log_level.upper()
    if level not in LEVELS:
        raise InputError(f"--spark-log-level {args.spark_log_level}: expected one of "
                         + ", ".join(LEVELS))
    try:
        from pyspark.sql import SparkSession

        from linview.backends.spark.session import driver_conf
    except ImportError:
        spark, _ = get_session(None, args.master)  # raises the install hint
        return spark
    conf = temp_dir("linview-log4j-") / "log4j2.properties"
    quiet = LEVELS.index(level) >= LEVELS.index("WARN")
    # linview reports a failed batch itself: the query's own report of it (with the
    # Python traceback inside) is kept out unless a more verbose level is asked for
    conf.write_text(_LOG4J.format(level=level if quiet else "ALL",
                                  stream_level="OFF" if level in ("ERROR", "FATAL", "OFF")
                                  else "ALL"))
    if level in ("ERROR", "FATAL", "OFF"):
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        b = SparkSession.builder
        if args.master:  # else spark-submit's master, or local[*]
            b = b.master(args.master)
        b = driver_conf(b.appName("linview run").config("spark.ui.enabled", "false"),
                        f"-Dlog4j2.configurationFile=file:{conf}")
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel(level)
    except Exception as e:  # noqa: BLE001 - Py4J and launcher errors
        raise BackendError(f"cannot start Spark ({args.master or 'local[*]'}): "
                           f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                           hint="the Spark backend needs PySpark and Java 17 or 21") from None
    spark, _ = get_session(spark)  # checks it answers and ships linview
    return spark


def driver_view_elements(args) -> int:
    """``--spark-driver-mib`` as the module's ``driver_view_elements`` (float64 entries)."""
    mib = getattr(args, "spark_driver_mib", 64)
    if mib is None or mib < 0:
        raise InputError(f"--spark-driver-mib {mib}: expected a size in MiB, 0 or more")
    return int(mib * 2**20) // 8


def file_records(path: str, content: bytes) -> list[Record]:
    """The records of one update file delivered by the binaryFile source."""
    name = path.removeprefix("file:")
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        from linview.app.records import canonical

        try:
            rows = pq.read_table(io.BytesIO(content)).to_pylist()
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types
            raise InputError(f"cannot read Parquet update file {name}: {e}") from None
        out = []
        for i, row in enumerate(rows, 1):
            data = {k: v for k, v in row.items() if v is not None}
            out.append(Record(data, f"{name}:row {i}", raw=canonical(data)))
        return out
    try:
        text = content.decode()
    except UnicodeDecodeError:
        return [Record(None, f"{name}:1", "not UTF-8 text")]
    return list(read_text(text, name))


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read update file {path}: {e.strerror or e}",
                         hint="leave update files in --updates until they are applied") \
            from None


#: Spark's checkpoint file manager on Hadoop's FileSystem API (its package moved in Spark 4):
#: the default one (FileContext) forks a ``readlink`` or ``chmod`` process for most of
#: its steps on a local disk, 15 per micro-batch, 60-100 ms of it on two cores
_FS_MANAGERS = ("org.apache.spark.sql.execution.streaming.checkpointing."
                "FileSystemBasedCheckpointFileManager",
                "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager")
_FS_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"


def use_fs_checkpoint_manager(spark) -> str | None:
    """Write the query's checkpoint through Hadoop's FileSystem API (unless the session
    names a manager already); the class used, or ``None``."""
    if spark.conf.get(_FS_MANAGER_KEY, None):
        return None
    for name in _FS_MANAGERS:
        try:
            spark.sparkContext._jvm.java.lang.Class.forName(name)
        except Exception:  # noqa: BLE001 - Py4J wraps ClassNotFoundException
            continue
        spark.conf.set(_FS_MANAGER_KEY, name)
        return name
    return None


def check_before_start(ck: Path, src: Path, warn) -> bool:
    """On resume, before Spark starts: the update source is the one the checkpoint started
    from, and its applied files still hold their records (:func:`check_applied`), read
    from the state's manifest and the write-ahead log alone, so that a wrong ``--updates``
    is refused at once, not after the JVM's start.  ``False`` where the checkpoint cannot
    be read so (no state yet, a damaged file, a log that does not follow the state): the
    run's own checks say why after Spark started, and check the source then."""
    from linview import statefile
    from linview.app import wal
    from linview.app.stream import check_identity

    doc = statefile.read_manifest(ck / "state.npz") if (ck / "state.npz").is_file() else None
    extra = (doc or {}).get("extra")
    keys = ("batch", "offset", "chain", "source_batch")
    if not isinstance(extra, dict) or "inputs" not in extra or any(k not in extra
                                                                   for k in keys):
        return False
    try:
        entries = wal.scan(ck / "wal.log").entries
    except StateError:
        return False
    check_identity(extra, {}, str(src.resolve()), ck)
    pos = {k: extra[k] for k in keys}
    expected = {pos["offset"]: pos["chain"]}
    for e in (e for e in entries if e["batch"] > pos["batch"]):  # replayed at the start
        if e["batch"] != pos["batch"] + 1:
            return False
        expected[e["first"] + e["count"]] = e["chain"]
        pos = {"batch": e["batch"], "offset": e["first"] + e["count"], "chain": e["chain"],
               "source_batch": max(e.get("source_batch", -1), pos["source_batch"])}
    check_applied(pos, expected, warn, ck / "query", src)
    return True


def check_applied(pos: dict, expected: dict, warn, query_dir: Path, src: Path) -> None:
    """On resume: the files of the micro-batches already applied (``0 ..
    source_batch`` of the stream position ``pos``, after its log's replay), at the paths
    Spark's checkpoint lists for them, still hold the records the state's hash chain
    covers (``expected``: the chain at the record counts the state and the log name), as
    :meth:`Stream.records_after_prefix` checks a NumPy source; a :class:`StateError`
    names the missing file or the micro-batches that differ.  Where Spark no longer keeps
    a batch's offsets (it keeps the last ``spark.sql.streaming.minBatchesToRetain``,
    default 100) the records cannot be checked, and a warning says so."""
    from linview.app.stream import CHAIN_START, chain

    last = pos["source_batch"]
    if last < 0:
        return
    hint = "give the same --updates, or use --restart to start over"
    if not (query_dir / "offsets").is_dir():
        raise StateError(f"checkpoint {query_dir.parent} holds a state at Spark batch {last} "
                         f"but no Spark query checkpoint {query_dir}",
                         hint="run with --restart to start over")
    h, seq = CHAIN_START, 0
    for b in range(last + 1):
        files = batch_files(query_dir, b)
        if files is None:
            warn(f"Spark's checkpoint {query_dir} no longer lists the files of "
                        f"micro-batch {b}: the records already applied were not checked "
                        f"against {src}")
            return
        for _, path in files:
            if not Path(path).is_file():
                raise StateError(f"the update source {src} no longer holds {path}, applied "
                                 f"in micro-batch {b}", hint=hint)
            for rec in file_records(path, _read(path)):
                h = chain(h, rec.raw)
                seq += 1
        if expected.get(seq, h) != h or seq > pos["offset"]:
            break
    if (seq, h) != (pos["offset"], pos["chain"]):
        raise StateError(f"the update source {src} no longer holds the records this "
                         f"checkpoint applied: the files of micro-batches 0..{b} differ",
                         hint=hint)


def run_structured(prog, args, load_options: dict, status) -> dict:
    """The run on Spark, from the session's start to its stop: the JVM is stopped and the
    temporary folders removed on every way out (a signal too)."""
    src = Path(args.updates)
    if not src.is_dir():
        raise InputError(f"--updates {args.updates}: the Spark backend reads a directory of "
                         "update files with Structured Streaming",
                         hint="put the .jsonl or .parquet files in a directory, or use "
                         "--backend numpy for a single file or stdin")
    checked = bool(args.checkpoint) and not args.restart and check_before_start(
        Path(args.checkpoint), src, status.warn)
    forget = signals.on_exit_now(remove_temp_dirs)
    spark, given = None, active_session()
    try:
        spark = session(args)
        with signals.handled():  # PySpark's context put its own SIGINT handler in place
            return _run(spark, prog, args, load_options, status, src, checked)
    finally:
        if spark is not None and spark is not given:  # a session of the caller's stays
            with contextlib.suppress(Exception):
                spark.stop()  # the JVM stops cleanly (it exits with this process)
            remove_temp_dirs()
        forget()


def active_session():
    """The Spark session already running in this process (a caller's), if any."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def _run(spark, prog, args, load_options: dict, status, src: Path, checked: bool) -> dict:
    """Long on purpose: The query's setup and its foreachBatch closure share the run's state, so
    they stay in one function.  ``checked``: the source was checked before Spark started."""
    from linview.app.stream import Stream

    tmp = None
    if args.checkpoint:
        ck = Path(args.checkpoint)
    else:
        tmp = ck = temp_dir("linview-run-")
    query_dir = ck / "query"
    if args.restart:
        shutil.rmtree(query_dir, ignore_errors=True)
    elif query_dir.exists() and not (ck / "state.npz").exists():
        raise LinviewError(f"checkpoint {ck} holds a Spark query checkpoint but no "
                           "state.npz", hint="run with --restart to start over")
    stream = Stream(prog, inputs=args.input, checkpoint=ck, out=args.out,
                    checkpoint_every=args.checkpoint_every, on_error=args.on_error,
                    restart=args.restart, load_options={
                        "driver_view_elements": driver_view_elements(args),
                        **load_options, "spark": spark,
                        # lineage cuts that survive an executor: files beside the state
                        **({"checkpoint_dir": str(ck / "rdd")} if args.checkpoint else {})},
                    warn=status.warn, source=str(src.resolve()),
                    mmap_npy=True)  # .npy inputs: read by the executors, block by block
    if not checked:
        check_applied(stream.pos, stream.expected, stream.warn, query_dir, src)
    extra = stream.backend_stats  # the summary's "spark"
    extra.update(replayed_batches_skipped=0, batches_read_from_log=0, collect_seconds=0.0)
    failure: list[BaseException] = []
    closed: list[bool] = []

    lock = threading.Lock()  # a batch in foreachBatch finishes before the stream closes

    def apply(df, batch_id: int) -> None:
        with lock:
            apply_locked(df, batch_id)

    def apply_locked(df, batch_id: int) -> None:
        if failure or closed:
            return
        if batch_id <= stream.pos["source_batch"]:
            extra["replayed_batches_skipped"] += 1  # applied before a crash
            return
        try:
            t0 = time.time()
            files = batch_files(query_dir, batch_id)
            if files is not None:  # the files Spark logged for the batch: read here
                extra["batches_read_from_log"] += 1
                recs = [rec for _, path in files for rec in file_records(path, _read(path))]
                newest = max((ms for ms, _ in files), default=None)
            else:  # the checkpoint does not say: one Spark job collects them
                rows = sorted(df.select("modificationTime", "path", "content").collect(),
                              key=lambda r: (r.modificationTime, r.path))
                recs = [rec for r in rows for rec in file_records(r.path, bytes(r.content))]
                newest = max((r.modificationTime.timestamp() * 1e3 for r in rows),
                             default=None)
            extra["collect_seconds"] += time.time() - t0
            stream.apply_batch(recs, source_batch=batch_id)
            if newest is not None:  # lag: from the newest file of the batch arriving
                extra["lag_s"] = max(time.time() - newest / 1e3, 0.0)
            status.update(stream, extra.get("lag_s"))
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
            failure.append(e)
            raise

    stats = None
    try:
        with signals.critical():  # a signal stops the query after its batch, below
            try:
                with spark_errors("the update stream"):
                    query = start_query(spark, args, src, query_dir, apply)
                    try:
                        while query.isActive and not failure and signals.pending() is None:
                            query.awaitTermination(0.5)
                            status.update(stream, stream.backend_stats.get("lag_s"))
                        if signals.pending() is not None:
                            query.stop()  # after the batch in progress (the lock)
                    except Exception:
                        if not failure:
                            raise
                    if failure:
                        query.stop()
                        raise failure[0]
            except LinviewError:
                raise
            except Exception as e:  # a failure in a task or in the query itself
                raise BackendError(f"the update stream failed: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}") from None
            finally:
                with lock:
                    closed.append(True)
                    stream.close()  # saves at this batch boundary (unless dirty)
    except signals.Interrupted:
        pass
    stats = finish(stream, getattr(args, "verify", False), status.note)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


def start_query(spark, args, src: Path, query_dir: Path, apply):
    """The Structured Streaming query of ``linview run`` (module docstring), started."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("path", T.StringType()),
                           T.StructField("modificationTime", T.TimestampType()),
                           T.StructField("length", T.LongType()),
                           T.StructField("content", T.BinaryType())])
    use_fs_checkpoint_manager(spark)
    reader = (spark.readStream.format("binaryFile").schema(schema)
              .option("pathGlobFilter", "*.{jsonl,json,parquet}")
              .option("maxFilesPerTrigger", args.max_batch or 1))
    writer = (reader.load(str(src)).writeStream.foreachBatch(apply)
              .option("checkpointLocation", str(query_dir)))
    writer = writer.trigger(availableNow=True) if args.once else writer
    return writer.start()
