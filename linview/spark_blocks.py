"""Distributed block matrices for the Spark backend.

A :class:`DistMatrix` ``A`` (m×n) is kept in *row blocks* ``A[I, :]``, *column blocks*
``A[:, J]``, or both (LINVIEW's hybrid partitioning).  Each layout is an RDD of
``(block index, Fortran float64 ndarray)`` with exactly one block per partition, block ``i``
in partition ``i``, so two matrices of one shape zip block by block without a shuffle.
Block boundaries depend only on the dimension (:meth:`BlockContext.splits`).

Operators make the NumPy backend's generated expressions run unchanged:

* ``A @ x`` (x a driver ndarray, n×r): row blocks ``A[I,:] x`` collected and stacked, or
  with column blocks only ``Σ_J A[:,J] x[J]``;  ``A.T @ x``: column blocks ``A[:,J]ᵀ x``;
  ``x @ A = (Aᵀ xᵀ)ᵀ``;  scalars ``s·A`` stay lazy (a factor applied to the r-column result);
* ``A @ B`` of two distributed matrices (re-evaluation): the cartesian product of the row
  blocks of A and the column blocks of B, one tile ``A[I,:] B[:,J]`` per task, assembled
  into row blocks of the product;
* ``A ± B``, ``A .* B``: block by block; ``A.add_outer(P, Q)``: ``A[I,:] += P[I] Qᵀ`` /
  ``A[:,J] += P Q[J]ᵀ`` as a map into the next persisted RDD, with the lineage cut every
  ``checkpoint_every`` updates.

The functions Spark tasks run are in :mod:`linview.spark_tasks`; the Spark plumbing
(persistence, checkpoints, transactions) in :mod:`linview.spark_context`.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from linview import spark_tasks as tasks
from linview.spark_context import BlockContext, active, lineage, relayout


# ------------------------------------------------------------------ matrices
def _scalar(x) -> float | None:
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, np.ndarray) and x.size == 1:
        return float(x.reshape(-1)[0])
    return None


def _collect_tree(x):
    if isinstance(x, (DistMatrix, Transposed)):
        return x.to_numpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_collect_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _collect_tree(v) for k, v in x.items()}
    return x


class _Operand:
    """What DistMatrix and its transpose share: NumPy defers every operator to them
    (``__array_ufunc__ = None``), and NumPy functions see a collected copy (size-checked),
    except ``np.trace`` which is computed block by block."""

    __array_ufunc__ = None
    __array_priority__ = 1000
    ndim = 2
    dtype = np.dtype(np.float64)

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    def __array__(self, dtype=None, copy=None):
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.trace and len(args) == 1 and not kwargs:
            return self.trace()
        return func(*_collect_tree(args), **_collect_tree(kwargs))


def _base(x) -> tuple[DistMatrix, bool]:
    return (x.base, True) if isinstance(x, Transposed) else (x, False)


def _as2d(x) -> tuple[np.ndarray, bool]:
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=np.float64)
    return (x.reshape(-1, 1), True) if x.ndim == 1 else (x, False)


def matmul(a, b):
    """``op(L) @ op(R)`` of two distributed matrices: cartesian product of the row blocks of
    ``op(L)`` and the column blocks of ``op(R)``, one NumPy tile product per task; the tiles
    are assembled into row blocks (or collected when the product is small)."""
    (L, tl), (R, tr) = _base(a), _base(b)
    ctx, shape = L.ctx, (a.shape[0], b.shape[1])
    lrows = L.cols() if tl else L.rows()
    rcols = R.rows() if tr else R.cols()
    tiles = lrows.cartesian(rcols).map(functools.partial(tasks.w_tile, tl, tr, L.scale * R.scale))
    if ctx.small(shape):
        ctx.check_collect(shape, "cannot collect a product on the driver")
        got: dict[int, list] = {}
        for i, jt in tiles.collect():
            got.setdefault(i, []).append(jt)
        return np.asfortranarray(np.vstack([tasks.w_join(1, (i, got[i]))[1] for i in sorted(got)]))
    nb = len(ctx.splits(shape[0])) - 1
    rows = tiles.groupByKey(nb, tasks.identity).map(functools.partial(tasks.w_join, 1))
    return DistMatrix(ctx, shape, rows=ctx.keep(rows))


class DistMatrix(_Operand):
    """An m×n float64 matrix in row blocks, column blocks or both, times a lazy scalar."""

    def __init__(self, ctx: BlockContext, shape, rows=None, cols=None, scale: float = 1.0,
                 updates: int = 0):
        self.ctx = ctx
        self.shape = (int(shape[0]), int(shape[1]))
        self._rows, self._cols = rows, cols
        self.scale = float(scale)
        self.updates = updates  # updates since the lineage was last cut

    def __repr__(self) -> str:
        return (f"DistMatrix({self.shape[0]}×{self.shape[1]}, {self.layout} blocks"
                + (f", scale {self.scale:g}" if self.scale != 1 else "") + ")")

    @classmethod
    def from_numpy(cls, ctx: BlockContext, a: np.ndarray, layout: str = "row") -> DistMatrix:
        a = np.asarray(a, dtype=np.float64)
        rows = ctx.keep(ctx.parallelize(a, 0), cut=True) if layout != "col" else None
        cols = ctx.keep(ctx.parallelize(a, 1), cut=True) if layout != "row" else None
        return cls(ctx, a.shape, rows, cols)

    @property
    def layout(self) -> str:
        return {(True, True): "both", (True, False): "row", (False, True): "col"}[
            (self._rows is not None, self._cols is not None)]

    def rdds(self) -> list:
        return [r for r in (self._rows, self._cols) if r is not None]

    def rows(self):
        """Row blocks, made from column blocks by a shuffle if this matrix has none."""
        if self._rows is None:
            self._rows = self.ctx.keep(relayout(self._cols, 1, self.ctx, self.shape))
        return self._rows

    def cols(self):
        if self._cols is None:
            self._cols = self.ctx.keep(relayout(self._rows, 0, self.ctx, self.shape))
        return self._cols

    @property
    def T(self) -> Transposed:
        return Transposed(self)

    def scaled(self, s: float) -> DistMatrix:
        return DistMatrix(self.ctx, self.shape, self._rows, self._cols, self.scale * s)

    def lineage_depth(self) -> int:
        """The longest lineage (in RDDs) of this matrix's layouts: bounded by
        ``checkpoint_every`` plus a small constant however many updates were applied."""
        return max(lineage(r) for r in self.rdds())

    # -------------------------------------------------------------- products with x
    def _apply(self, x: np.ndarray, transpose: bool) -> np.ndarray:
        """``s · op(A) @ x`` for a driver array x: stacked per-block products when the
        layout matches (row blocks for A, column blocks for Aᵀ), else a sum over blocks."""
        stack_rdd = self._cols if transpose else self._rows
        stack = stack_rdd is not None
        rdd = stack_rdd if stack else (self._rows if transpose else self._cols)
        splits = self.ctx.splits(self.shape[0] if transpose else self.shape[1])
        big = x.nbytes > self.ctx.broadcast_bytes
        arg = self.ctx.sc.broadcast(x) if big else x
        try:
            got = rdd.map(functools.partial(tasks.w_apply, arg, splits, transpose, stack)).collect()
        finally:
            if big:
                arg.unpersist()
        got.sort(key=operator.itemgetter(0))
        out = np.vstack([b for _, b in got]) if stack else sum(b for _, b in got)
        return out * self.scale if self.scale != 1 else out

    def __matmul__(self, x):
        if isinstance(x, (DistMatrix, Transposed)):
            return matmul(self, x)
        x, vec = _as2d(x)
        out = self._apply(x, False)
        return out.ravel() if vec else out

    def __rmatmul__(self, x):
        x, vec = _as2d(x)
        out = self._apply((x.ravel()[:, None] if vec else x.T), True).T
        return out.ravel() if vec else out

    def dot(self, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``op(A) @ x`` reading only the blocks that hold the columns of ``op(A)`` at the
        non-zero rows of x, when those are few (row, column or cell updates)."""
        nz = np.flatnonzero(x.any(axis=1))
        rdd = self._rows if transpose else self._cols
        if nz.size * 4 > x.shape[0] or rdd is None:
            return self._apply(x, transpose)
        m = self.shape[1] if transpose else self.shape[0]
        if nz.size == 0:
            return np.zeros((m, x.shape[1]))
        splits = self.ctx.splits(self.shape[0] if transpose else self.shape[1])
        parts = sorted({int(np.searchsorted(splits, k, side="right")) - 1 for k in nz})
        got = self.ctx.sc.runJob(rdd, functools.partial(tasks.w_touch, x, nz, splits, transpose),
                                 parts)
        return sum(got) * self.scale

    # -------------------------------------------------------------- elementwise
    def _pair(self, other, axis: int):
        """``other`` as blocks of this matrix's layout ``axis`` (0: rows) and its scale."""
        if isinstance(other, Transposed):
            other = other.materialize()
        if isinstance(other, DistMatrix):
            return (other.rows() if axis == 0 else other.cols()), other.scale
        other, _ = _as2d(other)
        if other.shape != self.shape:
            raise ValueError(f"shapes {self.shape} and {other.shape} do not match")
        return self.ctx.parallelize(other, axis), 1.0

    def _binop(self, other, op: str, rev: bool = False):
        s = _scalar(other)
        if s is not None and op == "mul":
            return self.scaled(s)
        if s is not None and op == "div" and not rev:
            return self.scaled(1.0 / s)
        if s is not None:
            other = np.full(self.shape, s)
        has_rows = self._rows is not None and (
            not isinstance(other, DistMatrix) or other._rows is not None or self._cols is None)
        axis = 0 if has_rows else 1
        mine = self._rows if axis == 0 else self._cols
        theirs, so = self._pair(other, axis)
        out = mine.zip(theirs).map(functools.partial(tasks.w_zip, op, self.scale, so, rev))
        out = self.ctx.keep(out)
        return DistMatrix(self.ctx, self.shape, *((out, None) if axis == 0 else (None, out)))

    def __add__(self, o):
        return self._binop(o, "add")

    def __radd__(self, o):
        return self._binop(o, "add", True)

    def __sub__(self, o):
        return self._binop(o, "sub")

    def __rsub__(self, o):
        return self._binop(o, "sub", True)

    def __mul__(self, o):
        return self._binop(o, "mul")

    def __rmul__(self, o):
        return self._binop(o, "mul", True)

    def __truediv__(self, o):
        return self._binop(o, "div")

    def __rtruediv__(self, o):
        return self._binop(o, "div", True)

    def __neg__(self):
        return self.scaled(-1.0)

    # -------------------------------------------------------------- reductions
    def _blocks(self):
        return (self._rows, 0) if self._rows is not None else (self._cols, 1)

    def sum(self, axis=None, keepdims=False):
        """Column sums (axis 0), row sums (axis 1) or the total, on the driver."""
        rdd, blk_axis = self._blocks()
        if axis is None:
            return float(sum(rdd.map(tasks.w_total).collect())) * self.scale
        got = sorted(rdd.map(functools.partial(tasks.w_sum, axis)).collect(),
                     key=operator.itemgetter(0))
        parts = [b for _, b in got]
        out = np.concatenate(parts, axis=blk_axis) if axis != blk_axis else sum(parts)
        out = out * self.scale
        return out if keepdims else out.ravel()

    def trace(self) -> float:
        rdd, blk_axis = self._blocks()
        splits = self.ctx.splits(self.shape[blk_axis])
        return sum(rdd.map(functools.partial(tasks.w_trace, splits, blk_axis == 0)).collect()) \
            * self.scale

    def max_abs(self) -> float:
        return max(self._blocks()[0].map(functools.partial(tasks.w_reduce, "max")).collect()) \
            * abs(self.scale)

    def all_finite(self) -> bool:
        return bool(np.isfinite(self.scale)) and all(
            self._blocks()[0].map(functools.partial(tasks.w_reduce, "finite")).collect())

    def to_numpy(self) -> np.ndarray:
        """The whole matrix on the driver (refused above ``driver_max_elements``)."""
        self.ctx.check_collect(self.shape, "cannot collect a distributed view on the driver")
        rdd, axis = self._blocks()
        got = sorted(rdd.collect(), key=operator.itemgetter(0))
        out = np.concatenate([b for _, b in got], axis=axis)
        return np.asfortranarray(out * self.scale if self.scale != 1 else out)

    # -------------------------------------------------------------- updates
    def placed(self, layout: str) -> DistMatrix:
        """A new holder with exactly the blocks ``layout`` asks for ("row", "col",
        "both"), the scalar applied, persisted, lineage cut at the next job."""
        s = self.scale
        rdds = [(self.rows() if layout != "col" else None),
                (self.cols() if layout != "row" else None)]
        if s != 1:
            rdds = [r.map(functools.partial(tasks.w_scale, s)) if r is not None else None
                    for r in rdds]
        rdds = [self.ctx.keep(r, cut=True) if r is not None else None for r in rdds]
        return DistMatrix(self.ctx, self.shape, *rdds)

    def _outer_rdds(self, P, Q):
        P = np.asarray(P, dtype=np.float64) / self.scale
        Q = np.asarray(Q, dtype=np.float64)
        out = []
        for axis, rdd in ((0, self._rows), (1, self._cols)):
            fn = functools.partial(tasks.w_outer, P, Q, self.ctx.splits(self.shape[axis]), axis)
            out.append(rdd.map(fn, preservesPartitioning=True) if rdd is not None else None)
        return out

    def _swap(self, new) -> None:
        """Install the next RDDs; inside a trigger's transaction they are materialized at
        commit, outside one right away (and the old RDDs unpersisted)."""
        old = (self._rows, self._cols, self.updates)
        self.updates += 1
        cut = self.updates >= self.ctx.checkpoint_every
        if cut:
            self.updates = 0
        self._rows, self._cols = [self.ctx.keep(r, cut) if r is not None else None
                                  for r in new]
        txn = active()
        if txn is not None:
            txn.holders.append((self, old))
            return
        self.ctx.sc.union(self.rdds()).count()
        self._rewrap()
        for r in old[:2]:
            if r is not None and self.ctx.cached.pop(r.id(), None) is not None:
                r.unpersist(blocking=False)

    def _rewrap(self) -> None:
        """Drop the Python-side chain of PipelinedRDD parents (the JVM lineage is cut by
        the checkpoints; this keeps the driver's Python objects bounded too)."""
        from pyspark import RDD

        for attr in ("_rows", "_cols"):
            r = getattr(self, attr)
            if r is not None and hasattr(r, "prev"):
                w = RDD(r._jrdd, r.ctx, r._jrdd_deserializer)
                w.is_cached = True
                setattr(self, attr, w)
                if r.id() in self.ctx.cached:
                    self.ctx.cached[r.id()] = w

    def add_outer(self, P, Q) -> None:
        """``A += P Qᵀ``: row block ``I`` gets ``P[I] Qᵀ``, column block ``J`` gets
        ``P Q[J]ᵀ`` (BLAS dgemm, beta = 1, inside the task)."""
        if np.shape(P)[1]:
            self._swap(self._outer_rdds(P, Q))

    def plus_outer(self, P, Q) -> DistMatrix:
        """A new matrix ``A + P Qᵀ`` (A unchanged)."""
        rows, cols = (self.ctx.keep(r) if r is not None else None
                      for r in self._outer_rdds(P, Q))
        return DistMatrix(self.ctx, self.shape, rows, cols, self.scale)

    def add_dense(self, D) -> None:
        """``A += D`` block by block (D a driver array or a distributed matrix)."""
        new = []
        for axis, rdd in ((0, self._rows), (1, self._cols)):
            if rdd is None:
                new.append(None)
                continue
            theirs, so = self._pair(D, axis)
            fn = functools.partial(tasks.w_zip, "add", 1.0, so / self.scale, False)
            new.append(rdd.zip(theirs).map(fn))
        self._swap(new)

    def assign(self, value) -> None:
        """``A[...] = value`` keeping A's layout."""
        if not isinstance(value, (DistMatrix, Transposed)):
            value = DistMatrix(self.ctx, self.shape, *[
                self.ctx.parallelize(_as2d(value)[0], ax) if r is not None else None
                for ax, r in ((0, self._rows), (1, self._cols))])
        elif isinstance(value, Transposed):
            value = value.materialize()
        v = value.placed(self.layout)
        self.scale = 1.0
        self._swap([v._rows, v._cols])


class Transposed(_Operand):
    """``Aᵀ`` of a DistMatrix, without moving data: its row blocks are A's column blocks."""

    def __init__(self, base: DistMatrix):
        self.base = base

    @property
    def shape(self) -> tuple[int, int]:
        return self.base.shape[1], self.base.shape[0]

    @property
    def T(self) -> DistMatrix:
        return self.base

    def __repr__(self) -> str:
        return f"{self.base!r}.T"

    def __matmul__(self, x):
        if isinstance(x, (DistMatrix, Transposed)):
            return matmul(self, x)
        x, vec = _as2d(x)
        out = self.base._apply(x, True)
        return out.ravel() if vec else out

    def __rmatmul__(self, x):
        x, vec = _as2d(x)
        out = self.base._apply((x.ravel()[:, None] if vec else x.T), False).T
        return out.ravel() if vec else out

    def dot(self, x: np.ndarray) -> np.ndarray:
        return self.base.dot(x, transpose=True)

    def materialize(self) -> DistMatrix:
        """Aᵀ as its own DistMatrix (each block transposed; no shuffle)."""
        b, ctx = self.base, self.base.ctx
        rows = ctx.keep(b._cols.map(tasks.w_transpose)) if b._cols is not None else None
        cols = ctx.keep(b._rows.map(tasks.w_transpose)) if b._rows is not None else None
        return DistMatrix(ctx, self.shape, rows, cols, b.scale)

    def __mul__(self, o):
        s = _scalar(o)
        return Transposed(self.base.scaled(s)) if s is not None else self.materialize() * o

    __rmul__ = __mul__

    def __neg__(self):
        return Transposed(self.base.scaled(-1.0))

    def __add__(self, o):
        return self.materialize() + o

    def __radd__(self, o):
        return o + self.materialize()

    def __sub__(self, o):
        return self.materialize() - o

    def __rsub__(self, o):
        return o - self.materialize()

    def __truediv__(self, o):
        return self.materialize() / o

    def sum(self, axis=None, keepdims=False):
        if axis is None:
            return self.base.sum()
        out = self.base.sum(1 - axis, keepdims=True).T
        return out if keepdims else out.ravel()

    def trace(self) -> float:
        return self.base.trace()

    def max_abs(self) -> float:
        return self.base.max_abs()

    def all_finite(self) -> bool:
        return self.base.all_finite()

    def to_numpy(self) -> np.ndarray:
        return np.asfortranarray(self.base.to_numpy().T)
