"""Runtime support for generated Spark trigger modules.

The generated code is the NumPy backend's, expression for expression; it runs on Spark
because every large view is a :class:`~.blocks.DistMatrix` (row blocks, column blocks or
both, as the module's ``PARTITIONING`` table says) whose operators are maps over blocks.
Thin factors (n×k) and small cores stay on the driver.  The helpers below have the names
and meaning of the NumPy runtime's (:mod:`..numpy.runtime`) and dispatch on DistMatrix vs
ndarray; the :class:`SparkTriggerModule` base class adds the session, input loading (arrays,
``.npy``, Parquet), placement of views into blocks, and one Spark job per trigger to apply
``V += P Qᵀ`` to every distributed view (rolled back as a whole if Spark fails); its
re-evaluation on the cluster, and the switch to it when measured maintenance is slower,
are in :mod:`.reevaluation`.

The trigger code runs on the driver; Spark tasks run only :mod:`.tasks`, so the
executors need numpy, scipy and linview: :func:`ship` sends a zip of the installed package
(or pass it yourself: ``spark-submit --py-files linview.zip``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sps

from linview.backends.numpy import fallback, numeric, probe, runtime
from linview.backends.numpy.runtime import IllConditioned, Size  # noqa: F401 - used by generated code
from linview.backends.spark import reuse as spark_reuse
from linview.backends.spark.blocks import DistMatrix, Transposed
from linview.backends.spark.context import BlockContext, Transaction, active
from linview.backends.spark.octave import (  # noqa: F401 - rt.norm, rt.chol... of generated code
    DriverLimit,
    chol,
    core_inv,
    diag,
    elementwise,
    errors,
    inv,
    kron,
    lu,
    norm,
    pinv,
    qr,
    reduce,
    solve,
    view_shapes,
)
from linview.backends.spark.reevaluation import ClusterRuns
from linview.backends.spark.session import (  # noqa: F401 - part of this module's interface
    SESSION_CONF,
    STOPPED_HINT,
    get_session,
    local_session,
    package_zip,
    read_npy,
    read_parquet,
    session_stopped,
    ship,
    spark_errors,
    write_parquet,
)
from linview.errors import BackendError, InputError

_DIST = (DistMatrix, Transposed)


# ------------------------------------------------------------------ helpers (as runtime's)
def add_outer(A, P, Q) -> None:
    """``A += P Qᵀ`` (a distributed A: a map over its blocks into the next RDD)."""
    if isinstance(A, DistMatrix):
        return A.add_outer(P, Q)
    if active() is not None:
        active().save_array(A, runtime.one_hot(P))
    runtime.add_outer(A, P, Q)


def owned(A):
    """A snapshot of ``A`` that later updates of ``A`` do not change (a distributed one
    shares its immutable blocks and pending terms: no data moves)."""
    if isinstance(A, DistMatrix):
        return A.scaled(1.0)
    if isinstance(A, Transposed):
        return Transposed(A.base.scaled(1.0))
    return runtime.owned(A)


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


def fused_dot(A, *blocks: np.ndarray, ops: str | None = None) -> list[np.ndarray]:
    """``[op1(A) @ B1, op2(A) @ B2, ...]`` in one pass over A (one Spark job for a
    distributed A; see :meth:`DistMatrix.fused`)."""
    ops = ops or "N" * len(blocks)
    if isinstance(A, DistMatrix):
        used = [i for i, b in enumerate(blocks) if b.shape[1]]  # a probe's empty rider
        res = A.fused([blocks[i] for i in used], "".join(ops[i] for i in used))
        out = [np.zeros((A.shape[1 if o == "T" else 0], 0)) for o in ops]
        for i, r in zip(used, res, strict=True):
            out[i] = r
        return out
    return runtime.fused_dot(A, *blocks, ops=ops)


def check_deltas(trigger: str, deltas: dict) -> None:
    """Phase-1 guard (:func:`..numpy.runtime.check_deltas`); distributed parts are checked
    block by block."""
    local = {}
    for view, parts in deltas.items():
        if any(isinstance(a, _DIST) for a in parts):
            if not all(a.all_finite() for a in parts if isinstance(a, _DIST)):
                raise IllConditioned(f"update of {trigger}: the delta of {view} is not finite")
            parts = tuple(a for a in parts if not isinstance(a, _DIST))
        local[view] = parts
    runtime.check_deltas(trigger, local)


def max_abs(a) -> float:
    if isinstance(a, _DIST):
        return a.max_abs()
    if sps.issparse(a):  # a sparse value of a module with solve views
        return float(abs(a).max()) if a.nnz else 0.0
    a = np.asarray(a, dtype=float)
    return float(np.max(np.abs(a))) if a.size else 0.0


# ------------------------------------------------------------------ base class
class SparkTriggerModule(ClusterRuns, runtime.TriggerModule):
    """:class:`..numpy.runtime.TriggerModule` with views in Spark.  Generated subclasses add
    ``PARTITIONING = {view: "row" | "col" | "both"}`` from the access analysis.

    Options (``OPTIONS``; an input of the same name takes precedence, as on NumPy):

    * ``spark``: a SparkSession or SparkContext; default: start ``master`` or ``local[*]``;
    * ``partitions``: blocks per dimension (default: blocks of the largest view within
      :func:`.context.block_bytes`, at least the default parallelism);
    * ``checkpoint_every``: passes over a view's blocks between lineage cuts (default 50);
      ``checkpoint_dir``: every lineage cut a reliable checkpoint there;
    * ``distribute_min``: views with both dimensions at least this are distributed (256);
    * ``driver_view_elements``: views of at most this many entries stay on the driver
      whatever their dimensions (default 0; ``linview run`` keeps views up to 64 MiB
      there: a trigger on them costs milliseconds, a Spark job a hundred);
    * ``driver_max_elements``: the largest matrix collected, inverted or factorized on
      the driver (default: what a third of the driver's JVM heap beyond Spark's 300 MB
      holds, :func:`.context.driver_limit`: 31 M entries for a 1 GB driver);
    * ``fold_rank``: low-rank terms ``P Qᵀ`` wait on the driver (every product adds
      ``P (Qᵀ x)``) until their total rank reaches it, then fold into the blocks in one
      pass; default: what fits in 64 MiB of the driver, at most 256; 0: fold every update;
    * ``layout``: "hybrid" (default: each view in the blocks ``PARTITIONING`` names) or
      "row" / "col" (every view in that one layout: half the memory of a hybrid view and
      one write per fold).

    Inputs: arrays, numbers, ``.npy`` paths, or Parquet paths (see :func:`read_parquet`).
    """

    PARTITIONING: Mapping[str, str] = {}

    OPTIONS = {**runtime.TriggerModule.OPTIONS, "spark": None, "master": None,
               "partitions": None, "checkpoint_every": 50, "checkpoint_dir": None,
               "distribute_min": 256, "driver_max_elements": None, "fold_rank": None,
               "driver_view_elements": 0,
               "layout": "hybrid"}

    @numeric.quiet("the inputs' values", numeric.given_inputs)
    def __init__(self, /, _state=None, **kwargs):
        with self._errors(f"loading {self.PROGRAM}"):
            super().__init__(_state=_state, **kwargs)
            if _state is not None:
                views = {n: self._place(n, v) for n, v in self._views.items()}
                self._materialize(views)
                self._views = views
            self._sweep()

    def _configure(self, opts: dict) -> None:
        super()._configure(opts)
        if opts["layout"] not in ("hybrid", "row", "col"):
            raise InputError(f"layout={opts['layout']!r}: expected 'hybrid', 'row' or 'col'")
        self._layout = opts["layout"]
        self.spark, sc = get_session(opts["spark"], opts["master"])
        self._ctx = BlockContext(sc, opts["partitions"], opts["checkpoint_every"],
                                 opts["checkpoint_dir"], opts["driver_max_elements"],
                                 opts["distribute_min"], fold_rank=opts["fold_rank"],
                                 driver_view_elements=opts["driver_view_elements"])

    def _errors(self, what: str):
        """Spark failures as BackendErrors; driver limits located in the .m file."""
        return errors(what, getattr(self, "PROGRAM_INFO", None))

    # -------------------------------------------------------------- placement
    def _validate_inputs(self, inputs, keep=()):  # placed in blocks: a copy anyway
        if set(inputs) != set(self.INPUTS):
            return super()._validate_inputs(inputs)  # raises the NumPy backend's InputError
        arrays = {n: self._load_input(n, inputs[n]) for n in self.INPUTS}
        self.dims = self._bind_dims(arrays)
        if not any(isinstance(a, DistMatrix) for a in arrays.values()):  # else: their blocks
            self._ctx.size_for([a.shape for a in arrays.values() if np.ndim(a) == 2]
                               + view_shapes(self.VIEWS, self.dims))
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
        if (isinstance(x, np.memmap) and x.ndim == 2 and x.dtype.kind in "fiu"
                and not self._ctx.small(x.shape)):  # a .npy path, or a file `run` mapped
            return x  # read by the executors (session.read_npy), never copied here
        return runtime.as_matrix(x, f"input {name}")

    def _place(self, name: str, val, input: bool = False):
        """A view's value as the module keeps it: a Fortran float64 ndarray when it is
        small, else a DistMatrix in the blocks ``PARTITIONING`` (or ``layout``) asks for."""
        ctx = self._ctx
        layout = self.PARTITIONING.get(name, "row") if self._layout == "hybrid" else self._layout
        if isinstance(val, Transposed):
            val = val.materialize()
        if isinstance(val, np.memmap) and val.ndim == 2 and not ctx.small(val.shape):
            val = read_npy(ctx, val)  # a .npy input: the executors read it
        if isinstance(val, DistMatrix):
            if ctx.small(val.shape):
                return val.to_numpy()
            if input and val.scale == 1 and val.layout == layout:
                return val
            return val.placed(layout)
        a = np.array(val, dtype=np.float64, order="F")
        return a if ctx.small(a.shape) else DistMatrix.from_numpy(ctx, a, layout)

    def _load_reusing(self, arrays, offer):  # views by key, placed in blocks (.reuse)
        return spark_reuse.evaluate(self, arrays, offer)

    def _sweep(self) -> None:
        self._ctx.sweep(getattr(self, "_views", {}).values())

    # -------------------------------------------------------------- reading
    def _alive(self, what: str) -> None:
        """A :class:`BackendError` when this module's Spark session has been stopped."""
        if session_stopped(self._ctx.sc):
            raise BackendError(f"{what}: the Spark session behind these views was stopped",
                               hint=STOPPED_HINT)

    def __getitem__(self, name: str) -> np.ndarray:
        v = self._views.get(self.OUTPUTS.get(name, name))
        if isinstance(v, DistMatrix):
            self._alive(f"reading {name}")
            with self._errors(f"reading {name}"):
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
    @numeric.quiet("the update's values")
    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ``: phase 1 computes every delta from the old views (maps whose
        n×k results are collected) and probes every maintained inverse (matrix-vector
        products: O(n²) work in Spark tasks, n×1 results on the driver); phase 2 swaps in
        the next RDD of every distributed view and materializes them all in one job,
        rolled back as a whole if Spark fails.  A refused trigger falls back as on NumPy
        (:mod:`..numpy.fallback`): a failed probe re-evaluates the inverse's chain only."""
        U, V = self._validate_update(name, U, V)
        self._alive(f"update of {name}")
        t0 = time.perf_counter()
        if self.updates % probe.RENEW_EVERY == 0:
            self._prober.reset(keep=frozenset(self.TRANSIENT))  # fresh vectors now and then
        with self._errors(f"update of {name}"):
            txn, why = Transaction(), None
            try:
                with txn:
                    try:
                        with self._blas(name):  # as on NumPy
                            self._spark_trigger(name, U, V)  # or switched (.reevaluation)
                    except IllConditioned as e:
                        txn.rollback()
                        why = e
                    except BaseException:
                        txn.rollback()
                        raise
                if why is not None:
                    fallback.recover(self, name, U, V, why)
                else:
                    txn.commit()
                    self._prober.commit()
            finally:
                self._sweep()
        self._observe(name, time.perf_counter() - t0)  # stats["trigger_seconds"] too
        self.updates += 1
        self.stats["updates"] += 1
        self._drift_policy()

    def _undo_log(self, name: str) -> Transaction:
        """A partial refresh's undo log: the trigger's transaction (:mod:`.context`)."""
        return Transaction()

    def _lazy(self, name: str):
        """Distributed views keep their own pending terms (``fold_rank``): the view."""
        return self._store[name]

    _view = _lazy

    def refresh(self) -> None:
        """Re-evaluate every view from the current inputs (distributed products)."""
        self._alive("refresh")
        with self._errors("refresh"):
            super().refresh()
            self._sweep()

    def verify(self, detail: bool = False):
        """Max relative error of every view against re-evaluation.  Distributed views are
        compared block by block, all of them in one Spark job; only maxima reach the
        driver."""
        self._alive("verify")
        with self._errors("verify"):
            fresh = self._evaluate(self.dims, {n: self._views[n] for n in self.INPUTS})
            top: dict[tuple[str, str], float] = {}
            jobs = []
            for name, ref in fresh.items():
                if name in self.TRANSIENT:
                    continue
                for key, m in (("diff", self._views[name] - ref), ("ref", ref)):
                    if isinstance(m, _DIST):
                        jobs.append(m.reduce_rdd((name, key), "max"))
                    else:
                        top[name, key] = max_abs(m)
            for tag, val in (self._ctx.sc.union(jobs).collect() if jobs else []):
                top[tag] = max(top.get(tag, 0.0), val)
            self._sweep()
        errs = {n: top[n, "diff"] / max(top[n, "ref"], 1e-300) for n in fresh
                if n not in self.TRANSIENT}
        self._checked(errs)
        return errs if detail else max(errs.values(), default=0.0)

    def save(self, path, extra: dict | None = None) -> None:
        """Collect every view and write the NumPy backend's ``.npz`` format (restore with
        ``linview.restore(path, program=prog, spark=session)``)."""
        self._alive("save")
        views = self._views
        with self._errors("save"):
            self._views = {k: v.to_numpy() if isinstance(v, DistMatrix) else v
                           for k, v in views.items()}
        try:
            super().save(path, extra=extra)
        finally:
            self._views = views
