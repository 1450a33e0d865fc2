"""Spark sessions, errors, shipping linview to executors, and matrix I/O through Spark.

* :func:`get_session` takes the caller's SparkSession/SparkContext (checked to be alive)
  or starts ``local[*]``; a missing PySpark or Java, or a dead session, is a
  :class:`~linview.errors.BackendError` that says what to install, never a Py4J traceback;
* :func:`spark_errors` turns Py4J/PySpark failures during work into the same error, with
  the one line that matters (e.g. the Python exception a task raised);
* :func:`ship` sends a zip of the linview package to the executors (``sc.addPyFile``);
* :func:`temp_dir`: the temporary folders linview makes for Spark (the zip it ships, the
  driver's log4j configuration), removed when the process exits (on a signal too: the
  CLI calls :func:`remove_temp_dirs` before an immediate exit);
* :func:`read_parquet` / :func:`write_parquet`: a matrix as Parquet rows ``(row, values)``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from linview.backends.numpy import runtime
from linview.backends.spark import tasks
from linview.backends.spark.blocks import DistMatrix
from linview.backends.spark.context import BlockContext
from linview.backends.spark.jvm import (
    EXECUTOR_JVM_OPTIONS,
    JVM_OPTIONS,
    MEMORY,
    connection_lost,
    jvm_died,
    jvm_exit,
)
from linview.errors import BackendError, InputError, LinviewError

INSTALL_HINT = ("the Spark backend needs PySpark and a Java runtime (17 or 21): "
                "pip install 'linview[spark]' and e.g. apt-get install openjdk-17-jre-headless "
                "(or set JAVA_HOME)")
#: settings of the sessions linview starts: Unix domain sockets between the JVM and the
#: Python workers cut the per-task overhead several-fold (Spark 4.1+; ignored before)
SESSION_CONF = {"spark.ui.showConsoleProgress": "false",
                "spark.python.unix.domain.socket.enabled": "true"}
def driver_conf(builder, extra_java_options: str = ""):
    """``builder`` with :data:`SESSION_CONF`, :data:`JVM_OPTIONS` after the driver's
    other Java options ``extra_java_options``, and the executors' :data:`EXECUTOR_JVM_OPTIONS`
    (a later ``config`` of ``spark.executor.extraJavaOptions`` replaces them)."""
    for k, v in SESSION_CONF.items():
        builder = builder.config(k, v)
    builder = builder.config("spark.executor.extraJavaOptions", EXECUTOR_JVM_OPTIONS)
    opts = f"{extra_java_options} {JVM_OPTIONS}".strip()
    return builder.config("spark.driver.extraJavaOptions", opts)


STOPPED_HINT = ("views kept in Spark need their session: keep it running while they are "
                "used, or save() them before stopping it and linview.restore(path, "
                "program=prog, spark=new_session) afterwards")
TASK_HINT = ("check that the Spark session is alive and that executors have numpy, scipy "
             "and linview (linview.backends.spark.runtime.ship(sc) or spark-submit --py-files)")


def _short(e: BaseException) -> str:
    """One line out of a Py4J/Spark error: the Python exception a task raised, else the
    first Java exception line (``org.apache.spark.SparkException: Job aborted...``), else
    the first line."""
    lines = [ln.strip().lstrip(": ").strip() for ln in str(e).splitlines() if ln.strip()]
    lines = [ln for ln in lines if ln and not ln.startswith(("Traceback", "File \"", "at "))]
    py = [ln for ln in lines if re.match(r"^[A-Za-z_]\w*(Error|Exception): ", ln)
          and not ln.startswith("Py4JJavaError")]
    java = [ln for ln in lines if re.match(r"^[\w.$]+(Error|Exception)\b", ln)]
    text = (py or java or lines or [type(e).__name__])[-1 if py else 0]
    return text if len(text) <= 300 else text[:297] + "..."


def _is_spark_error(e: BaseException) -> bool:
    mod = type(e).__module__ or ""
    return mod.startswith(("py4j", "pyspark")) or isinstance(e, ConnectionError)


@contextlib.contextmanager
def spark_errors(what: str):
    """Turn Py4J/PySpark failures into a :class:`BackendError` saying what failed."""
    try:
        yield
    except LinviewError:
        raise
    except Exception as e:
        died = jvm_exit(wait=10.0 if connection_lost(e) else 0.0)
        if died is not None:
            raise jvm_died(what, died) from None
        if session_stopped():
            raise BackendError(f"{what}: the Spark session was stopped", hint=STOPPED_HINT) \
                from None
        if not _is_spark_error(e):
            raise
        cause = _short(e)
        raise BackendError(f"{what}: Spark failed: {cause}", hint=_hint(cause)) from None


def _hint(cause: str) -> str | None:
    """What to do about a Spark failure, when its cause line says (else nothing: the cause
    line is the message)."""
    if re.search(r"No module named|ModuleNotFoundError|ImportError", cause):
        return TASK_HINT
    if "spark.rpc.message.maxSize" in cause:
        return ("a task or result is above spark.rpc.message.maxSize: use more partitions "
                "(load(..., partitions=N)) or raise it (--conf spark.rpc.message.maxSize=MB)")
    if "OutOfMemory" in cause or "Java heap space" in cause:
        return ("raise --driver-memory / --executor-memory, or use more partitions "
                "(smaller blocks); see docs/spark.md, 'Sizing'")
    return None


def session_stopped(sc=None) -> bool:
    """Whether ``sc`` (default: the active SparkContext) has been stopped."""
    if sc is None:
        try:
            from pyspark import SparkContext
        except ImportError:
            return False
        sc = SparkContext._active_spark_context
        if sc is None:
            return True
    return getattr(sc, "_jsc", None) is None


#: loggers of the RDDs linview unpersists: each warns "RDD N was locally checkpointed, its
#: lineage has been truncated" when a locally checkpointed RDD is unpersisted, as designed
QUIET_LOGGERS = ("org.apache.spark.rdd", "org.apache.spark.api.python")


def quiet(sc) -> None:
    """Set :data:`QUIET_LOGGERS` to ERROR in the driver's log4j2, and a session at Spark's
    default INFO level (spark-submit) to WARN: one line per job and stage otherwise."""
    with contextlib.suppress(Exception):  # not log4j2 (Spark < 3.3): leave it
        log4j = sc._jvm.org.apache.logging.log4j
        level = log4j.LogManager.getRootLogger().getLevel()
        if level.isLessSpecificThan(log4j.Level.INFO):  # INFO, DEBUG, TRACE, ALL
            sc.setLogLevel("WARN")
        for name in QUIET_LOGGERS:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.ERROR)


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and Path(home, "bin", "java").exists()))


def get_session(spark=None, master: str | None = None):
    """``(session or context, SparkContext)``: the caller's, checked to be alive, or a new
    ``local[*]`` (or ``master``) session; either way linview is shipped to its executors
    (once per SparkContext)."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise BackendError("PySpark is not installed", hint=INSTALL_HINT) from None
    if spark is not None:
        sc = getattr(spark, "sparkContext", spark)
        if not isinstance(sc, SparkContext):
            raise BackendError(f"spark= must be a pyspark.sql.SparkSession or SparkContext, "
                               f"not {type(spark).__name__}")
        if getattr(sc, "_jsc", None) is None:
            raise BackendError("the Spark session given with spark= has been stopped",
                               hint="pass a live session, or none to start local[*]")
        try:
            ship(sc)  # also a round trip to the JVM: is the session alive?
            quiet(sc)
        except Exception as e:
            cause = _short(e)
            raise BackendError(f"the Spark session does not answer: {cause}",
                               hint=_hint(cause)) from None
        return spark, sc
    if not _java_available():
        raise BackendError("cannot start Spark: no Java runtime found (java on PATH or "
                           "JAVA_HOME)", hint=INSTALL_HINT)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        b = driver_conf(SparkSession.builder.master(master or "local[*]").appName("linview"))
        spark = b.getOrCreate()
        sc = spark.sparkContext
        sc.setLogLevel("ERROR")  # a session linview starts logs errors only
        ship(sc)
        quiet(sc)
    except Exception as e:
        raise BackendError(f"cannot start Spark ({master or 'local[*]'}): {_short(e)}",
                           hint=INSTALL_HINT) from None
    return spark, sc


def local_session(master: str = "local[2]", **conf):
    """A small local session for tests, demos and benchmarks (UI off, few shuffle
    partitions, workers on this Python); ``conf`` keys use ``_`` for ``.``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (SparkSession.builder.master(master).appName("linview")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4"))
    b = driver_conf(b, conf.pop("spark_driver_extraJavaOptions", ""))
    for k, v in conf.items():
        b = b.config(k.replace("_", "."), str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship(spark.sparkContext)
    return spark


_SHIPPED: set[str] = set()
_TEMP_DIRS: list[str] = []


def temp_dir(prefix: str) -> Path:
    """A new temporary folder, removed when the process exits (:func:`remove_temp_dirs`;
    the zip shipped to executors is served from there while the session runs)."""
    path = tempfile.mkdtemp(prefix=prefix)
    if not _TEMP_DIRS:
        atexit.register(remove_temp_dirs)
    _TEMP_DIRS.append(path)
    return Path(path)


def remove_temp_dirs() -> None:
    """Remove every folder :func:`temp_dir` made (the next session ships a new zip)."""
    package_zip.cache_clear()
    while _TEMP_DIRS:
        shutil.rmtree(_TEMP_DIRS.pop(), ignore_errors=True)


@functools.lru_cache(maxsize=1)
def package_zip(path: str | None = None) -> str:
    """A zip of the imported linview package, with ``linview/backends`` and
    ``linview/grammar`` wherever they come from (wheel, editable install or source tree).
    Without ``path`` it is a temporary file, removed when the process exits (what a
    session ships); with ``path`` (``package_zip("linview.zip")``, for ``spark-submit
    --py-files``) it is written there and kept."""
    import linview
    import linview.backends
    import linview.grammar

    archive = zip_origin(Path(linview.__file__))
    if archive is not None:  # imported from a zip (spark-submit --py-files): that zip
        return str(archive)
    roots = [("linview", Path(linview.__file__).parent),
             ("linview/backends", Path(list(linview.backends.__path__)[0])),
             ("linview/grammar", Path(list(linview.grammar.__path__)[0]))]
    path = Path(path) if path else temp_dir("linview-ship-") / "linview.zip"
    names: set[str] = set()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, folder in roots:
            for f in sorted(folder.rglob("*")):
                name = f"{arc}/{f.relative_to(folder).as_posix()}"
                if (f.is_file() and f.suffix in (".py", ".lark") and name not in names
                        and "__pycache__" not in f.parts):
                    z.write(f, name)
                    names.add(name)
    return str(path)


def zip_origin(path: Path) -> Path | None:
    """The zip file a module at ``path`` was imported from, or None."""
    for parent in path.parents:
        if parent.is_file():
            return parent if zipfile.is_zipfile(parent) else None
    return None


def shipped_already(sc) -> bool:
    """Whether the job ships a ``linview.zip`` itself (``spark-submit --py-files``, or an
    earlier ``addPyFile``): Spark refuses a second file of that name."""
    files = [f for f in sc.getConf().get("spark.submit.pyFiles", "").split(",") if f]
    with contextlib.suppress(Exception):
        files += list(sc.listFiles)
    return any(f.rstrip("/").rsplit("/", 1)[-1] == "linview.zip" for f in files)


def ship(sc) -> str | None:
    """``sc.addPyFile`` a zip of linview, once per SparkContext, so that executors can run
    the block functions (the generated module itself only runs on the driver); nothing
    when the job ships a ``linview.zip`` already."""
    key = sc.applicationId
    MEMORY["driver"] = sc.getConf().get("spark.driver.memory", "1g")
    if key in _SHIPPED:
        return None
    if shipped_already(sc):
        _SHIPPED.add(key)
        return None
    path = package_zip()
    sc.addPyFile(path)
    _SHIPPED.add(key)
    return path


def read_parquet(ctx: BlockContext, spark, path, what: str) -> DistMatrix:
    """A matrix from Parquet with columns ``row`` (long, 0..m-1, each once) and ``values``
    (array<double>, n each), read by Spark into row blocks."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = spark if isinstance(spark, SparkSession) else SparkSession(ctx.sc)
    df = spark.read.parquet(str(path))
    if not {"row", "values"} <= set(df.columns):
        raise InputError(f"{what}: Parquet {path} needs columns 'row' and 'values', "
                         f"has {', '.join(df.columns)}")
    st = df.agg(F.count(F.lit(1)), F.countDistinct("row"), F.min("row"), F.max("row"),
                F.min(F.size("values")), F.max(F.size("values"))).first()
    count, distinct, lo, hi, w0, w1 = st
    if not count or count != distinct or lo != 0 or hi != count - 1 or w0 != w1 or w0 < 1:
        raise InputError(f"{what}: Parquet {path} must hold rows 0..m-1 exactly once, each "
                         "with the same number of values")
    splits = ctx.splits(count)
    rdd = (df.select("row", "values").rdd.map(functools.partial(tasks.w_parquet_key, splits))
           .groupByKey(len(splits) - 1, tasks.identity).map(tasks.w_parquet_block))
    return DistMatrix(ctx, (count, w0), rows=ctx.keep(rdd, "local"))


def read_npy(ctx: BlockContext, a: np.memmap) -> DistMatrix:
    """A ``.npy`` input (``a``: the driver's memory map of it, for its shape and order)
    read by the executors: one task per block maps the file and takes its rows (its
    columns for a Fortran-ordered file), so the data never passes through the driver.
    The file must be at the same path on every host (a shared filesystem)."""
    axis = 1 if a.flags.f_contiguous and not a.flags.c_contiguous else 0
    splits = ctx.splits(a.shape[axis])
    fn = functools.partial(tasks.w_npy_block, str(a.filename), a.shape, splits, axis)
    rdd = ctx.sc.parallelize(range(len(splits) - 1), len(splits) - 1).map(fn)
    blocks = ctx.keep(rdd, "local")
    return DistMatrix(ctx, a.shape, rows=blocks if axis == 0 else None,
                      cols=blocks if axis == 1 else None)


#: bytes of one Parquet row group that write_parquet writes (a reader holds one at a time)
ROW_GROUP_BYTES = 16 << 20


def write_parquet(a, path) -> None:
    """Write a matrix as Parquet in the layout :func:`read_parquet` reads (needs pyarrow),
    in row groups of at most :data:`ROW_GROUP_BYTES`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = runtime.as_matrix(a, "matrix")
    m, n = a.shape
    values = pa.ListArray.from_arrays(pa.array(np.arange(0, m * n + 1, n, dtype=np.int32)),
                                      pa.array(np.ascontiguousarray(a).ravel()))
    pq.write_table(pa.table({"row": pa.array(np.arange(m, dtype=np.int64)),
                             "values": values}), str(path),
                   row_group_size=max(1, ROW_GROUP_BYTES // (8 * n)))
