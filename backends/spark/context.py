"""The Spark side of the block matrices: :class:`BlockContext` (block layout, persistence
registry, checkpoint policy, driver-memory limit) and :class:`Transaction` (the apply phase
of one trigger, committed in one Spark job or rolled back)."""

from __future__ import annotations

import functools
import threading

import numpy as np

from linview.backends.spark import tasks
from linview.backends.spark.jvm import jvm_died, jvm_exit
from linview.errors import BackendError

_LOCAL = threading.local()


# ------------------------------------------------------------------ transactions
class Transaction:
    """Phase 2 of one trigger: every ``add_outer``/``add_dense``/``assign`` swaps in new
    (lazy, persisted) RDDs; :meth:`commit` materializes them all in one Spark job and
    :meth:`rollback` restores the old RDDs (and the old contents of driver arrays)."""

    def __init__(self):
        self.holders: list[tuple[object, tuple]] = []  # (DistMatrix, old state)
        self.arrays: list[tuple[np.ndarray, tuple, np.ndarray]] = []

    def __enter__(self):
        _LOCAL.txn = self
        return self

    def __exit__(self, *exc):
        _LOCAL.txn = None

    def save_array(self, a: np.ndarray, rows=None) -> None:
        """Remember a driver array's contents before an in-place update of phase 2 (only
        ``rows`` of it when the update touches only those: a row update of a large
        input saves k rows, not a copy of the input)."""
        where = (...,) if rows is None else (rows, slice(None))
        self.arrays.append((a, where, a[where].copy(order="K")))

    def commit(self) -> None:
        new = {r.id(): (h, r) for h, old in self.holders
               for r, o in zip((h._rows, h._cols), old[:2], strict=True)
               if r is not None and r is not o}
        if new:
            ctx = next(iter(new.values()))[0].ctx
            try:
                ctx.sc.union([r for _, r in new.values()]).count()
            except BaseException:
                self.rollback()
                raise
            for h, _ in self.holders:
                h._rewrap()
        self.holders, self.arrays = [], []

    def rollback(self) -> None:
        for h, old in reversed(self.holders):
            h._rows, h._cols, h.updates, h.pending = old
        for a, where, saved in reversed(self.arrays):
            a[where] = saved
        self.holders, self.arrays = [], []


def active() -> Transaction | None:
    return getattr(_LOCAL, "txn", None)


# ------------------------------------------------------------------ context
class BlockContext:
    """The SparkContext plus the block layout, the driver-memory limit, the checkpoint
    policy and the registry of persisted RDDs (unpersisted by :meth:`sweep`)."""

    def __init__(self, sc, partitions: int | None = None, checkpoint_every: int = 50,
                 checkpoint_dir: str | None = None, driver_max_elements: int | None = None,
                 distribute_min: int = 256, broadcast_bytes: int = 4 << 20,
                 fold_rank: int | None = None, driver_view_elements: int = 0):
        from pyspark import StorageLevel

        self.sc = sc
        self.auto_partitions = partitions is None
        self.partitions = max(1, int(partitions or sc.defaultParallelism))
        self.block_bytes = block_bytes(sc.getConf())
        self.checkpoint_every = max(1, int(checkpoint_every))
        #: driver data a pass's functions may carry and count as one pass towards the next
        #: lineage cut: a 32nd of the driver's heap over the passes between cuts (the JVM
        #: keeps the functions of every pass the lineage reaches: updates of rank 120 of
        #: A^16 at n = 300 filled a 1 GB driver within about 45, checkpoint_every = 50)
        self.pass_bytes = max(1, driver_heap(sc) // 32 // self.checkpoint_every)
        self.reliable = checkpoint_dir is not None
        if self.reliable:
            sc.setCheckpointDir(str(checkpoint_dir))
        self.driver_max_elements = int(driver_limit(sc) if driver_max_elements is None
                                       else driver_max_elements)
        self.distribute_min = int(distribute_min)
        self.driver_view_elements = max(0, int(driver_view_elements))
        self.broadcast_bytes = broadcast_bytes
        self.fold_rank = None if fold_rank is None else max(0, int(fold_rank))
        self.level = StorageLevel.MEMORY_AND_DISK
        self.cached: dict[int, object] = {}
        self._cut: set[int] = set()

    def size_for(self, shapes) -> None:
        """Without ``partitions=``: enough blocks per dimension that a block of the largest
        matrix (of ``shapes``) stays within :attr:`block_bytes` (at least the default
        parallelism)."""
        if self.auto_partitions and shapes:
            largest = max(8 * r * c for r, c in shapes)
            self.partitions = max(self.sc.defaultParallelism, -(-largest // self.block_bytes))

    @property
    def gather_bytes(self) -> int:
        """The largest right operand of a product gathered whole into each task."""
        return 2 * self.block_bytes

    def splits(self, n: int) -> tuple[int, ...]:
        """Block boundaries of a dimension of size n: ``min(partitions, n)`` blocks."""
        nb = max(1, min(self.partitions, n))
        return tuple(int(x) for x in np.linspace(0, n, nb + 1).round())

    #: pending low-rank terms of one view kept on the driver (bytes of P and Q), by default
    PENDING_BYTES = 64 << 20

    def fold_limit(self, shape) -> int:
        """The total rank of pending terms ``Σ P Qᵀ`` at which a view's terms are folded
        into its blocks: ``fold_rank`` if given, else as many as fit in ``PENDING_BYTES``
        (at most 256; the driver adds ``P (Qᵀ x)`` to every product, 4·n·rank·r flops)."""
        if self.fold_rank is not None:
            return self.fold_rank
        return max(1, min(256, self.PENDING_BYTES // (8 * (shape[0] + shape[1]))))

    def small(self, shape) -> bool:
        if len(shape) < 2:  # a number
            return True
        return (min(shape) < self.distribute_min or tuple(shape) == (1, 1)
                or shape[0] * shape[1] <= self.driver_view_elements)

    def keep(self, rdd, cut: bool | str = False):
        """Persist ``rdd``; ``cut`` marks it to have its lineage cut by the first job that
        computes it (:meth:`cut`: reliable with ``checkpoint_dir``, else local): ``"local"``
        for every matrix an operation makes, so that no view keeps the re-evaluation's
        lineage, ``True`` every ``checkpoint_every`` folds of a view."""
        rdd.persist(self.level)
        if cut and rdd.id() not in self._cut:
            self.cut(rdd)
            self._cut.add(rdd.id())
        self.cached[rdd.id()] = rdd
        return rdd

    def cut(self, rdd) -> None:
        """Mark ``rdd``'s lineage to be cut by the first job that computes it: by a
        reliable checkpoint (files in ``checkpoint_dir``, which survive the loss of an
        executor) when the context has a directory, else by a local one (blocks in the
        executors' caches)."""
        rdd.checkpoint() if self.reliable else rdd.localCheckpoint()

    def sweep(self, live) -> None:
        """Unpersist every registered RDD that no matrix in ``live`` holds."""
        ids = {r.id() for d in live if hasattr(d, "rdds") for r in d.rdds()}
        for k in [k for k in self.cached if k not in ids]:
            self.cached.pop(k).unpersist(blocking=False)
            self._cut.discard(k)

    def check_collect(self, shape, what: str) -> None:
        if shape[0] * shape[1] > self.driver_max_elements:
            raise BackendError(
                f"{what}: {shape[0]}×{shape[1]} = {shape[0] * shape[1]:,} elements is above "
                f"the driver limit driver_max_elements = {self.driver_max_elements:,}",
                hint=f"the driver's JVM heap is {driver_heap(self.sc) >> 20} MiB: give it "
                     "3-4x the matrix's bytes (--driver-memory, spark.driver.memory) and "
                     "raise the limit with load(..., driver_max_elements=N)")

    def parallelize(self, a: np.ndarray, axis: int):
        """Row (axis 0) or column (axis 1) blocks of a driver array, one per partition and
        task.  A large array goes one block at a time (each cached on the executors and
        cut from the driver's copy before the next), so that neither the driver's JVM nor
        a task ever holds more than one block of it."""
        s = self.splits(a.shape[axis])

        def block(i):
            return i, np.asfortranarray(a[s[i]:s[i + 1]] if axis == 0 else a[:, s[i]:s[i + 1]])

        if a.nbytes <= 2 * self.block_bytes:
            return self.sc.parallelize([block(i) for i in range(len(s) - 1)], len(s) - 1)
        pieces = []
        for i in range(len(s) - 1):
            piece = self.sc.parallelize([block(i)], 1).persist(self.level)
            self.cut(piece)
            piece.count()
            self.cached[piece.id()] = piece  # swept once the caller's matrix is computed
            pieces.append(piece)
        return self.sc.union(pieces)


def complete(got: list, n: int, what: str) -> list:
    """``got`` (blocks collected from the driver's JVM) if all ``n`` arrived: a JVM that
    dies while serving them closes the stream early, which PySpark reads as its end."""
    if len(got) != n:
        status = jvm_exit(wait=10.0)
        if status is not None:
            raise jvm_died(what, status)
        raise BackendError(f"{what}: {len(got)} of {n} blocks came back from Spark")
    return got


def relayout(rdd, src_axis: int, ctx: BlockContext, shape):
    """Row blocks → column blocks (src_axis 0) or back: a shuffle of the whole matrix."""
    dst = 1 - src_axis
    s = ctx.splits(shape[dst])
    pieces = rdd.flatMap(functools.partial(tasks.w_split, s, 1 if dst == 1 else 0))
    join = functools.partial(tasks.w_join, src_axis)
    return pieces.groupByKey(len(s) - 1, tasks.identity).map(join)


def lineage(rdd) -> int:
    """Number of RDDs in the lineage of ``rdd`` (lines of ``toDebugString``, cache-info
    lines excluded)."""
    text = rdd.toDebugString()
    text = text.decode() if isinstance(text, bytes) else str(text)
    return sum(1 for ln in text.splitlines() if "RDD[" in ln)




def _bytes(text: str, unit: str = "m") -> int:
    """Bytes of a Spark memory setting (``"2g"``, ``"512m"``; a bare number in ``unit``)."""
    text = str(text).strip().lower().removesuffix("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if text and text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(float(text) * scale[unit])


#: what Spark keeps of the driver's heap for itself (``RESERVED_SYSTEM_MEMORY_BYTES``)
SPARK_RESERVED = 300 << 20


def driver_heap(sc) -> int:
    """The driver JVM's heap in bytes (``Runtime.maxMemory``; else ``spark.driver.memory``)."""
    try:
        return int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception:  # noqa: BLE001 - no JVM view (a stub context): the setting
        return _bytes(sc.getConf().get("spark.driver.memory", "1g"))


def driver_limit(sc) -> int:
    """The default ``driver_max_elements``: a matrix collected on the driver passes through
    its JVM heap (the blocks as task results) before NumPy gets it, so it is bounded by a
    third of the heap beyond Spark's reserve: 31 M entries (about 5,600²) for a 1 GB driver,
    265 M for 8 GB.  Above that the collect would end in the JVM's OutOfMemoryError."""
    return max(1 << 16, (driver_heap(sc) - SPARK_RESERVED) // 3 // 8)


def block_bytes(conf) -> int:
    """The bytes of one block: an eighth of what an executor's heap keeps outside Spark's
    unified memory, ``(heap − 300 MB) × (1 − spark.memory.fraction)`` (the driver's heap
    in local mode).  That is where a task's passing copies of blocks live, uncounted by
    Spark (an operand read for the Python worker, the result coming back, its serialized
    form while it is cached: a handful of blocks at once), while cached blocks fill the
    unified memory.  Within 4–64 MiB and half of ``spark.rpc.message.maxSize`` (a NumPy
    input's block travels in one task)."""
    local = conf.get("spark.master", "").startswith("local")
    memory = _bytes(conf.get("spark.driver.memory" if local else "spark.executor.memory",
                             "1g"))
    fraction = float(conf.get("spark.memory.fraction", "0.6"))
    outside = max(0, memory - SPARK_RESERVED) * (1 - fraction)
    rpc = _bytes(conf.get("spark.rpc.message.maxSize", "128"))
    return int(max(4 << 20, min(64 << 20, outside // 8, rpc // 2)))
