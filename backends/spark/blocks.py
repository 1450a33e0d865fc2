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
  blocks of A and the column blocks of B, tiles ``A[I,:] B[:,J]`` computed in the tasks
  and assembled into row blocks of the product (see :func:`matmul`);
* ``A ± B``, ``A .* B``: block by block (:mod:`linview.backends.spark.algebra`);
  ``A.add_outer(P, Q)``: ``A[I,:] += P[I] Qᵀ`` / ``A[:,J] += P Q[J]ᵀ`` as a map into the
  next persisted RDD, with the lineage cut every ``checkpoint_every`` such passes.  The
  terms first wait on the driver, ``A = B + Σ P Qᵀ`` (products add ``P (Qᵀ x)``), and are
  folded into the blocks in one pass when their total rank reaches the context's
  :meth:`~linview.backends.spark.context.BlockContext.fold_limit`: a write pass over a large matrix
  costs far more than the driver's thin corrections.

The functions Spark tasks run are in :mod:`linview.backends.spark.tasks`; the Spark plumbing
(persistence, checkpoints, transactions) in :mod:`linview.backends.spark.context`.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from linview.backends.numpy import runtime
from linview.backends.spark import tasks
from linview.backends.spark.algebra import BlockAlgebra, Operand, as2d, scalar_value
from linview.backends.spark.context import BlockContext, active, complete, lineage, relayout


# ------------------------------------------------------------------ matrices
def _base(x) -> tuple[DistMatrix, bool]:
    return (x.base, True) if isinstance(x, Transposed) else (x, False)


def matmul(a, b):
    """``op(L) @ op(R)`` of two distributed matrices: the cartesian product of the row blocks
    of ``op(L)`` and the column blocks of ``op(R)``, NumPy tile products in the tasks.

    When ``op(R)`` fits in one task (``ctx.gather_bytes``), its column blocks are
    gathered into one partition and the task of row block I computes all of
    ``C[I,:] = [L_I R_J]_J``: the product comes out in row blocks without a shuffle.  A
    larger ``op(R)`` gets one task per tile, the tiles grouped into row blocks by a
    shuffle.  A small product is collected on the driver."""
    (L, tl), (R, tr) = _base(a), _base(b)
    L.fold()
    R.fold()
    ctx, shape = L.ctx, (a.shape[0], b.shape[1])
    lrows = L.cols() if tl else L.rows()
    rcols = R.rows() if tr else R.cols()
    s = L.scale * R.scale
    if 8 * R.shape[0] * R.shape[1] <= ctx.gather_bytes:
        rows = lrows.cartesian(rcols.coalesce(1)).mapPartitions(
            functools.partial(tasks.w_row_block, tl, tr, s))
    else:
        tiles = lrows.cartesian(rcols).map(functools.partial(tasks.w_tile, tl, tr, s))
        nb = len(ctx.splits(shape[0])) - 1
        rows = tiles.groupByKey(nb, tasks.identity).map(functools.partial(tasks.w_join, 1))
    if ctx.small(shape):
        ctx.check_collect(shape, "cannot collect a product on the driver")
        got = sorted(rows.collect(), key=operator.itemgetter(0))
        return np.asfortranarray(np.vstack([blk for _, blk in got]))
    return DistMatrix(ctx, shape, rows=ctx.keep(rows, "local"))


class DistMatrix(Operand, BlockAlgebra):
    """An m×n float64 matrix in row blocks, column blocks or both, times a lazy scalar."""

    def __init__(self, ctx: BlockContext, shape, rows=None, cols=None, scale: float = 1.0,
                 updates: int = 0):
        self.ctx = ctx
        self.shape = (int(shape[0]), int(shape[1]))
        self._rows, self._cols = rows, cols
        self.scale = float(scale)
        #: passes since the lineage was last cut (one whose functions carry more than the
        #: context's share of driver data counts as several: :meth:`fold`)
        self.updates = updates
        #: low-rank terms not yet folded into the blocks: value = s·(B + Σ P Qᵀ)
        self.pending: tuple[tuple[np.ndarray, np.ndarray], ...] = ()

    def distributed(self) -> DistMatrix:
        return self

    def __repr__(self) -> str:
        return (f"DistMatrix({self.shape[0]}×{self.shape[1]}, {self.layout} blocks"
                + (f", scale {self.scale:g}" if self.scale != 1 else "") + ")")

    @classmethod
    def from_numpy(cls, ctx: BlockContext, a: np.ndarray, layout: str = "row") -> DistMatrix:
        a = np.asarray(a, dtype=np.float64)
        rows = ctx.keep(ctx.parallelize(a, 0), "local") if layout != "col" else None
        cols = ctx.keep(ctx.parallelize(a, 1), "local") if layout != "row" else None
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
            self._rows = self.ctx.keep(relayout(self._cols, 1, self.ctx, self.shape), "local")
        return self._rows

    def cols(self):
        if self._cols is None:
            self._cols = self.ctx.keep(relayout(self._rows, 0, self.ctx, self.shape), "local")
        return self._cols

    @property
    def T(self) -> Transposed:
        return Transposed(self)

    def scaled(self, s: float) -> DistMatrix:
        out = DistMatrix(self.ctx, self.shape, self._rows, self._cols, self.scale * s)
        out.pending = self.pending
        return out

    def _correction(self, x: np.ndarray, transpose: bool):
        """``op(Σ P Qᵀ) @ x`` of the pending terms, on the driver (None when none)."""
        if not self.pending:
            return None
        P = np.hstack([p for p, _ in self.pending])
        Q = np.hstack([q for _, q in self.pending])
        return Q @ (P.T @ x) if transpose else P @ (Q.T @ x)

    def _with(self, out: np.ndarray, x: np.ndarray, transpose: bool) -> np.ndarray:
        corr = self._correction(x, transpose)
        out = out if corr is None else out + corr
        return out * self.scale if self.scale != 1 else out

    def lineage_depth(self) -> int:
        """The longest lineage (in RDDs) of this matrix's layouts: bounded by
        ``checkpoint_every`` plus a small constant however many updates were applied."""
        return max(lineage(r) for r in self.rdds())

    # -------------------------------------------------------------- products with x
    def _apply(self, x: np.ndarray, transpose: bool) -> np.ndarray:
        """``s · op(A) @ x`` for a driver array x."""
        return self.fused([x], "T" if transpose else "N")[0]

    def fused(self, blocks, ops: str) -> list[np.ndarray]:
        """``[s · op_i(A) @ B_i]`` (``ops[i]`` "N" or "T") in one Spark job reading every block
        of one layout once: every product of this view at one trigger level.  Row blocks
        give their rows of ``A B`` and the partial products ``A[I,:]ᵀ B[I]`` (summed on the
        driver: n×r per block), column blocks the other way round; with both layouts the
        job reads the one that stacks more result columns.  When every factor is one-hot
        (row, column or cell updates), :meth:`dot` reads only the blocks they touch."""
        touch = {"N": self._cols, "T": self._rows}  # the blocks dot reads
        dense = [i for i, b in enumerate(blocks) if runtime.one_hot(b) is None]
        if not dense and all(touch[o] is not None for o in ops):
            return [self.dot(b, o == "T") for b, o in zip(blocks, ops, strict=True)]
        if self._rows is not None and self._cols is not None:
            width = {o: sum(blocks[i].shape[1] for i in dense if ops[i] == o) for o in "NT"}
            axis = 0 if width["N"] >= width["T"] else 1
        else:
            axis = 0 if self._rows is not None else 1
        xs = [np.asarray(b, dtype=np.float64) for b in blocks]
        big = sum(x.nbytes for x in xs) > self.ctx.broadcast_bytes
        arg = self.ctx.sc.broadcast(xs) if big else xs
        fn = functools.partial(tasks.w_products, arg, list(enumerate(ops)),
                               self.ctx.splits(self.shape[axis]), axis)
        try:
            got = complete((self._rows if axis == 0 else self._cols).map(fn).collect(),
                           len(self.ctx.splits(self.shape[axis])) - 1, "a product")
        finally:
            if big:
                arg.unpersist()
        got.sort(key=operator.itemgetter(0))
        out = []
        for i, o in enumerate(ops):
            pieces = [r[i] for _, r in got]
            stacked = (o == "N") == (axis == 0)
            res = np.vstack(pieces) if stacked else functools.reduce(np.add, pieces)
            out.append(self._with(res, xs[i], o == "T"))
        return out

    def __matmul__(self, x):
        if isinstance(x, (DistMatrix, Transposed)):
            return matmul(self, x)
        x, vec = as2d(x)
        out = self._apply(x, False)
        return out.ravel() if vec else out

    def __rmatmul__(self, x):
        x, vec = as2d(x)
        out = self._apply((x.ravel()[:, None] if vec else x.T), True).T
        return out.ravel() if vec else out

    def dot(self, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``op(A) @ x`` reading only the blocks that hold the columns of ``op(A)`` at the
        non-zero rows of x, when those are few (row, column or cell updates)."""
        nz = runtime.one_hot(x)
        rdd = self._rows if transpose else self._cols
        if nz is None or rdd is None:
            return self._apply(x, transpose)
        m = self.shape[1] if transpose else self.shape[0]
        if nz.size == 0:
            return self._with(np.zeros((m, x.shape[1])), x, transpose)
        splits = self.ctx.splits(self.shape[0] if transpose else self.shape[1])
        parts = sorted({int(np.searchsorted(splits, k, side="right")) - 1 for k in nz})
        got = self.ctx.sc.runJob(rdd, functools.partial(tasks.w_touch, x, nz, splits, transpose),
                                 parts)
        return self._with(sum(got), x, transpose)

    def to_numpy(self) -> np.ndarray:
        """The whole matrix on the driver (refused above ``driver_max_elements``)."""
        self.ctx.check_collect(self.shape, "cannot collect a distributed view on the driver")
        rdd, axis = (self._rows, 0) if self._rows is not None else (self._cols, 1)
        got = complete(sorted(rdd.collect(), key=operator.itemgetter(0)),
                       len(self.ctx.splits(self.shape[axis])) - 1, "collecting a matrix")
        out = np.concatenate([b for _, b in got], axis=axis)
        for P, Q in self.pending:
            out += P @ Q.T
        return np.asfortranarray(out * self.scale if self.scale != 1 else out)

    # -------------------------------------------------------------- updates
    def placed(self, layout: str) -> DistMatrix:
        """A new holder with exactly the blocks ``layout`` asks for ("row", "col",
        "both"), the scalar applied, persisted, lineage cut at the next job."""
        self.fold()
        s = self.scale
        rdds = [(self.rows() if layout != "col" else None),
                (self.cols() if layout != "row" else None)]
        if s != 1:
            rdds = [r.map(functools.partial(tasks.w_scale, s)) if r is not None else None
                    for r in rdds]
        rdds = [self.ctx.keep(r, "local") if r is not None else None for r in rdds]
        return DistMatrix(self.ctx, self.shape, *rdds)

    def _outer_rdds(self, P, Q):
        """The next blocks ``B + P Qᵀ`` (lazy maps; P, Q already in B's scale)."""
        out = []
        for axis, rdd in ((0, self._rows), (1, self._cols)):
            fn = functools.partial(tasks.w_outer, P, Q, self.ctx.splits(self.shape[axis]), axis)
            out.append(rdd.map(fn, preservesPartitioning=True) if rdd is not None else None)
        return out

    def _state(self) -> tuple:
        return self._rows, self._cols, self.updates, self.pending

    def _swap(self, new, old=None, weight: int = 1) -> None:
        """Install the next RDDs (``weight`` passes towards the next lineage cut); inside a
        trigger's transaction they are materialized at commit, outside one right away."""
        old = old or self._state()
        self.updates += weight
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
        self._rewrap()  # the old RDDs may be shared: BlockContext.sweep unpersists them

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
        """``A += P Qᵀ``: the term waits on the driver with the others (products add
        ``P (Qᵀ x)``) until their total rank reaches the fold limit; then all of them are
        folded in one pass: row block ``I`` gets ``P[I] Qᵀ``, column block ``J`` gets
        ``P Q[J]ᵀ`` (BLAS dgemm, beta = 1, inside the task)."""
        if not np.shape(P)[1]:
            return
        old = self._state()
        term = (np.asarray(P, dtype=np.float64) / self.scale, np.asarray(Q, dtype=np.float64))
        self.pending = self.pending + (term,)
        if self.pending_rank() >= self.ctx.fold_limit(self.shape):
            self.fold(old)
        elif active() is not None:
            active().holders.append((self, old))

    def pending_rank(self) -> int:
        return sum(p.shape[1] for p, _ in self.pending)

    def fold(self, old=None) -> None:
        """Fold the pending terms into the blocks (one map pass over every layout)."""
        if self.pending:
            old = old or self._state()
            P = np.hstack([p for p, _ in self.pending])
            Q = np.hstack([q for _, q in self.pending])
            self.pending = ()
            new = self._outer_rdds(P, Q)
            # every map's function carries P and Q, and the driver's JVM keeps them for as
            # long as the lineage reaches back to it: passes carrying much count as several
            carried = (P.nbytes + Q.nbytes) * sum(r is not None for r in new)
            self._swap(new, old, max(1, -(-carried // self.ctx.pass_bytes)))

    def plus_outer(self, P, Q) -> DistMatrix:
        """A new matrix ``A + P Qᵀ`` sharing A's blocks (A unchanged)."""
        out = self.scaled(1.0)
        out.pending = self.pending + ((np.asarray(P, dtype=np.float64) / self.scale,
                                       np.asarray(Q, dtype=np.float64)),)
        out.updates = self.updates
        return out

    def add_dense(self, D) -> None:
        """``A += D`` block by block (D a driver array or a distributed matrix)."""
        self.fold()
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
                self.ctx.parallelize(as2d(value)[0], ax) if r is not None else None
                for ax, r in ((0, self._rows), (1, self._cols))])
        elif isinstance(value, Transposed):
            value = value.materialize()
        v = value.placed(self.layout)
        old = self._state()
        self.scale, self.pending = 1.0, ()
        self._swap([v._rows, v._cols], old)


class Transposed(Operand):
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
        x, vec = as2d(x)
        out = self.base._apply(x, True)
        return out.ravel() if vec else out

    def __rmatmul__(self, x):
        x, vec = as2d(x)
        out = self.base._apply((x.ravel()[:, None] if vec else x.T), False).T
        return out.ravel() if vec else out

    def dot(self, x: np.ndarray) -> np.ndarray:
        return self.base.dot(x, transpose=True)

    def distributed(self) -> DistMatrix:
        return self.materialize()

    def materialize(self) -> DistMatrix:
        """Aᵀ as its own DistMatrix (each block transposed; no shuffle)."""
        b, ctx = self.base, self.base.ctx
        b.fold()
        rows = ctx.keep(b._cols.map(tasks.w_transpose), "local") if b._cols is not None else None
        cols = ctx.keep(b._rows.map(tasks.w_transpose), "local") if b._rows is not None else None
        return DistMatrix(ctx, self.shape, rows, cols, b.scale)

    def __mul__(self, o):
        s = scalar_value(o)
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

    def reduce_rdd(self, tag, what: str):
        return self.base.reduce_rdd(tag, what)

    def max_abs(self) -> float:
        return self.base.max_abs()

    def all_finite(self) -> bool:
        return self.base.all_finite()

    def to_numpy(self) -> np.ndarray:
        return np.asfortranarray(self.base.to_numpy().T)
