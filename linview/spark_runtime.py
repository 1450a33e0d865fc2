"""Runtime support for generated Spark trigger modules.

The generated code is the NumPy backend's, expression for expression; it runs on Spark
because every large view is a :class:`~linview.spark_blocks.DistMatrix` (row blocks, column
blocks or both, as the module's ``PARTITIONING`` table says) whose operators are maps over
blocks.  Thin factors (n×k) and small cores stay on the driver.  The helpers below have the
names and meaning of :mod:`linview.runtime` and dispatch on DistMatrix vs ndarray; the
:class:`SparkTriggerModule` base class adds the session, input loading (arrays, ``.npy``,
Parquet), placement of views into blocks, and one Spark job per trigger to apply
``V += P Qᵀ`` to every distributed view (rolled back as a whole if Spark fails).

The trigger code runs on the driver; Spark tasks run only :mod:`linview.spark_tasks`, so the
executors need numpy, scipy and linview: :func:`ship` sends a zip of the installed package
(or pass it yourself: ``spark-submit --py-files linview.zip``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from linview import runtime
from linview import spark_tasks as tasks
from linview.errors import BackendError, InputError, LinviewError, NumericalError
from linview.runtime import IllConditioned, core_inv  # noqa: F401 - used by generated code
from linview.spark_blocks import DistMatrix, Transposed
from linview.spark_context import BlockContext, Transaction, active

_DIST = (DistMatrix, Transposed)
INSTALL_HINT = ("the Spark backend needs PySpark and a Java runtime (17 or 21): "
                "pip install 'linview[spark]' and e.g. apt-get install openjdk-17-jre-headless "
                "(or set JAVA_HOME)")
TASK_HINT = ("check that the Spark session is alive and that executors have numpy, scipy "
             "and linview (linview.spark_runtime.ship(sc) or spark-submit --py-files)")


# ------------------------------------------------------------------ helpers (as runtime's)
def add_outer(A, P, Q) -> None:
    """``A += P Qᵀ`` (a distributed A: a map over its blocks into the next RDD)."""
    if isinstance(A, DistMatrix):
        return A.add_outer(P, Q)
    if active() is not None:
        active().save_array(A)
    runtime.add_outer(A, P, Q)


def add_dense(A, D) -> None:
    """``A += D``."""
    if isinstance(A, DistMatrix):
        return A.add_dense(D)
    if active() is not None:
        active().save_array(A)
    runtime.add_dense(A, np.asarray(D))


def assign(A, value) -> None:
    """``A[...] = value`` keeping A's memory (driver) or layout (distributed)."""
    if isinstance(A, DistMatrix):
        return A.assign(value)
    if active() is not None:
        active().save_array(A)
    runtime.assign(A, np.asarray(value))


def dot(A, X):
    """``A @ X`` for an update factor X; one-hot factors read only the blocks they touch."""
    if isinstance(A, _DIST):
        return A.dot(np.asarray(X, dtype=np.float64))
    return runtime.dot(A, X)


def inv(A, what: str) -> np.ndarray:
    """The inverse of a view, computed on the driver (refused beyond its memory limit)."""
    if isinstance(A, _DIST):
        ctx = (A.base if isinstance(A, Transposed) else A).ctx
        ctx.check_collect(A.shape, f"cannot invert {what} on the Spark driver")
        A = A.to_numpy()
    return runtime.inv(A, what)


def check_finite(trigger: str, **arrays) -> None:
    """Phase-1 guard: refuse deltas that contain NaN or Inf."""
    for name, a in arrays.items():
        ok = a.all_finite() if isinstance(a, _DIST) else np.all(np.isfinite(a))
        if not ok:
            raise IllConditioned(f"update of {trigger}: delta {name} is not finite")


def max_abs(a) -> float:
    if isinstance(a, _DIST):
        return a.max_abs()
    a = np.asarray(a, dtype=float)
    return float(np.max(np.abs(a))) if a.size else 0.0


# ------------------------------------------------------------------ session
def _short(e: BaseException) -> str:
    """One line out of a Py4J/Spark error: the Python exception a task raised, else the
    first Java exception line, else the first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    py = [ln for ln in lines if re.match(r"^[A-Za-z_]\w*(Error|Exception): ", ln)]
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
        if not _is_spark_error(e):
            raise
        raise BackendError(f"{what}: Spark failed: {_short(e)}", hint=TASK_HINT) from None


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and Path(home, "bin", "java").exists()))


def get_session(spark=None, master: str | None = None):
    """``(session or context, SparkContext)``: the caller's, checked to be alive, or a new
    ``local[*]`` (or ``master``) session with linview shipped to its executors."""
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
            sc.defaultParallelism  # noqa: B018 - a round trip to the JVM
        except Exception as e:
            raise BackendError(f"the Spark session does not answer: {_short(e)}",
                               hint=INSTALL_HINT) from None
        return spark, sc
    if not _java_available():
        raise BackendError("cannot start Spark: no Java runtime found (java on PATH or "
                           "JAVA_HOME)", hint=INSTALL_HINT)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        spark = (SparkSession.builder.master(master or "local[*]").appName("linview")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        sc = spark.sparkContext
        ship(sc)
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
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4"))
    for k, v in conf.items():
        b = b.config(k.replace("_", "."), str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship(spark.sparkContext)
    return spark


_SHIPPED: set[str] = set()


@functools.lru_cache(maxsize=1)
def package_zip() -> str:
    """A zip of the imported linview package, with ``linview/backends`` and
    ``linview/grammar`` wherever they come from (wheel, editable install or source tree)."""
    import linview
    import linview.backends
    import linview.grammar

    roots = [("linview", Path(linview.__file__).parent),
             ("linview/backends", Path(list(linview.backends.__path__)[0])),
             ("linview/grammar", Path(list(linview.grammar.__path__)[0]))]
    path = Path(tempfile.mkdtemp(prefix="linview-ship-")) / "linview.zip"
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


def ship(sc) -> str | None:
    """``sc.addPyFile`` a zip of linview, once per SparkContext, so that executors can run
    the block functions (the generated module itself only runs on the driver)."""
    key = sc.applicationId
    if key in _SHIPPED:
        return None
    path = package_zip()
    sc.addPyFile(path)
    _SHIPPED.add(key)
    return path


# ------------------------------------------------------------------ inputs
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
    return DistMatrix(ctx, (count, w0), rows=ctx.keep(rdd, cut=True))


def write_parquet(a, path) -> None:
    """Write a matrix as Parquet in the layout :func:`read_parquet` reads (needs pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = runtime.as_matrix(a, "matrix")
    m, n = a.shape
    values = pa.ListArray.from_arrays(pa.array(np.arange(0, m * n + 1, n, dtype=np.int32)),
                                      pa.array(np.ascontiguousarray(a).ravel()))
    pq.write_table(pa.table({"row": pa.array(np.arange(m, dtype=np.int64)),
                             "values": values}), str(path))


# ------------------------------------------------------------------ base class
class SparkTriggerModule(runtime.TriggerModule):
    """:class:`linview.runtime.TriggerModule` with views in Spark.  Generated subclasses add
    ``PARTITIONING = {view: "row" | "col" | "both"}`` from the access analysis.

    Options: ``spark`` (a SparkSession or SparkContext; default: start ``master`` or
    ``local[*]``), ``partitions`` (blocks per dimension, default the default parallelism),
    ``checkpoint_every`` (updates between lineage cuts, default 50), ``checkpoint_dir``
    (reliable checkpoints there instead of local ones), ``distribute_min`` (views with both
    dimensions at least this are distributed, default 256), ``driver_max_elements`` (the
    largest matrix collected or inverted on the driver).  Inputs: arrays, numbers, ``.npy``
    paths, or Parquet paths (see :func:`read_parquet`).
    """

    PARTITIONING: Mapping[str, str] = {}

    def __init__(self, *, spark=None, master: str | None = None, partitions: int | None = None,
                 checkpoint_every: int = 50, checkpoint_dir=None, distribute_min: int = 256,
                 driver_max_elements: int = 1 << 27, refresh_every: int | None = None,
                 check_every: int | None = None, tolerance: float = 1e-6, _state=None,
                 **inputs):
        self.spark, sc = get_session(spark, master)
        with spark_errors(f"loading {self.PROGRAM}"):
            self._ctx = BlockContext(sc, partitions, checkpoint_every, checkpoint_dir,
                                     driver_max_elements, distribute_min)
            super().__init__(refresh_every=refresh_every, check_every=check_every,
                             tolerance=tolerance, _state=_state, **inputs)
            if _state is not None:
                views = {n: self._place(n, v) for n, v in self._views.items()}
                self._materialize(views)
                self._views = views
            self._sweep()

    # -------------------------------------------------------------- placement
    def _validate_inputs(self, inputs):
        if set(inputs) != set(self.INPUTS):
            return super()._validate_inputs(inputs)  # raises the NumPy backend's InputError
        arrays = {n: self._load_input(n, inputs[n]) for n in self.INPUTS}
        self.dims = self._bind_dims(arrays)
        return arrays

    def _load_input(self, name: str, x):
        if isinstance(x, DistMatrix):
            return x
        if isinstance(x, (str, os.PathLike)):
            p = Path(x)
            if p.suffix == ".npy":
                try:
                    x = np.load(p, mmap_mode="r", allow_pickle=False)
                except (OSError, ValueError) as e:
                    raise InputError(f"input {name}: cannot read {p}: {e}") from None
            elif p.suffix == ".parquet" or p.is_dir():
                return read_parquet(self._ctx, self.spark, p, f"input {name}")
            else:
                raise InputError(f"input {name}: {p} is not a .npy file or Parquet",
                                 hint="inputs: arrays, numbers, .npy or Parquet paths")
        return runtime.as_matrix(x, f"input {name}")

    def _place(self, name: str, val, input: bool = False):
        """A view's value as the module keeps it: a Fortran float64 ndarray when it is
        small, else a DistMatrix in the blocks ``PARTITIONING`` asks for."""
        ctx, layout = self._ctx, self.PARTITIONING.get(name, "row")
        if isinstance(val, Transposed):
            val = val.materialize()
        if isinstance(val, DistMatrix):
            if ctx.small(val.shape):
                return val.to_numpy()
            if input and val.scale == 1 and val.layout == layout:
                return val
            return val.placed(layout)
        a = np.array(val, dtype=np.float64, order="F")
        return a if ctx.small(a.shape) else DistMatrix.from_numpy(ctx, a, layout)

    def _materialize(self, views: dict) -> None:
        """Compute and cache every distributed view in one Spark job that also checks that
        all entries are finite (the NumPy backend's check after evaluation)."""
        bad = [n for n, v in views.items() if isinstance(v, np.ndarray)
               and not np.all(np.isfinite(v))]
        dist = [(n, v) for n, v in views.items() if isinstance(v, DistMatrix)]
        if dist:
            jobs = [r.map(functools.partial(tasks.w_tag, n)) for n, v in dist for r in v.rdds()]
            bad += sorted({n for n, ok in self._ctx.sc.union(jobs).collect() if not ok})
            for _, v in dist:
                v._rewrap()
        if bad:
            name = bad[0]
            if name in self.INPUTS:
                raise InputError(f"input {name} contains NaN or Inf")
            raise NumericalError(f"{self.PROGRAM}: view {name} is not finite after "
                                 "evaluation", hint="check the inputs' conditioning")

    def _sweep(self) -> None:
        self._ctx.sweep(getattr(self, "_views", {}).values())

    def _reevaluate(self, arrays):
        try:
            placed = {n: self._place(n, a, input=True) for n, a in arrays.items()}
            computed = self._evaluate(self.dims, placed)
            views = dict(placed)
            views.update({n: self._place(n, v) for n, v in computed.items()})
            self._materialize(views)
        except BaseException:
            self._sweep()  # drop what this attempt cached; the old views stay
            raise
        return views

    # -------------------------------------------------------------- reading
    def __getitem__(self, name: str) -> np.ndarray:
        v = self._views.get(self.OUTPUTS.get(name, name))
        if isinstance(v, DistMatrix):
            with spark_errors(f"reading {name}"):
                out = v.to_numpy()
            out.flags.writeable = False
            return out
        return super().__getitem__(name)

    def distributed(self) -> dict[str, DistMatrix]:
        """The views (and inputs) kept as distributed block matrices."""
        return {n: v for n, v in self._views.items() if isinstance(v, DistMatrix)}

    def lineage_depth(self) -> dict[str, int]:
        """RDD lineage length of every distributed view (bounded by the checkpoints)."""
        return {n: v.lineage_depth() for n, v in self.distributed().items()}

    def release(self) -> None:
        """Unpersist every RDD this module cached (the object is unusable afterwards)."""
        self._ctx.sweep([])

    # -------------------------------------------------------------- updating
    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ``: phase 1 computes every delta from the old views (maps whose
        n×k results are collected); phase 2 swaps in the next RDD of every distributed view
        and materializes them all in one job, rolled back as a whole if Spark fails."""
        U, V = self._validate_update(name, U, V)
        t0 = time.perf_counter()
        with spark_errors(f"update of {name}"):
            txn, fallback = Transaction(), False
            with txn:
                try:
                    getattr(self, f"on_update_{name}")(U, V)
                except IllConditioned:
                    txn.rollback()
                    fallback = True
                except BaseException:
                    txn.rollback()
                    raise
            if fallback:
                self._fallback(name, U, V)
            else:
                txn.commit()
            self._sweep()
        self.stats["trigger_seconds"] += time.perf_counter() - t0
        self.updates += 1
        self.stats["updates"] += 1
        self._drift_policy()

    def _fallback(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        arrays = {n: self._views[n] for n in self.INPUTS}
        X = arrays[name]
        arrays[name] = X.plus_outer(U, V) if isinstance(X, DistMatrix) else X + U @ V.T
        self._views = self._reevaluate(arrays)
        self.stats["fallbacks"] += 1

    def refresh(self) -> None:
        """Re-evaluate every view from the current inputs (distributed products)."""
        with spark_errors("refresh"):
            super().refresh()
            self._sweep()

    def verify(self, detail: bool = False):
        """Max relative error of every view against re-evaluation (block by block for
        distributed views; only scalars reach the driver)."""
        with spark_errors("verify"):
            fresh = self._evaluate(self.dims, {n: self._views[n] for n in self.INPUTS})
            errs = {}
            for name, ref in fresh.items():
                scale = max(max_abs(ref), 1e-300)
                errs[name] = max_abs(self._views[name] - ref) / scale
            self._sweep()
        return errs if detail else max(errs.values(), default=0.0)

    def save(self, path) -> None:
        """Collect every view and write the NumPy backend's ``.npz`` format (restore with
        ``linview.restore(path, program=prog, spark=session)``)."""
        views = self._views
        with spark_errors("save"):
            self._views = {k: v.to_numpy() if isinstance(v, DistMatrix) else v
                           for k, v in views.items()}
        try:
            super().save(path)
        finally:
            self._views = views
