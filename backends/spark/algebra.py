"""Elementwise algebra and reductions of distributed block matrices, shared by
:class:`~linview.backends.spark.blocks.DistMatrix` (as the mixin :class:`BlockAlgebra`) and its
transpose: NumPy interoperability, ``±``, ``.*``, ``./`` block by block (two matrices of one
shape zip partition by partition, no shuffle), scalars kept lazy, and sums, traces, maxima
computed per block with only the reduced values reaching the driver."""

from __future__ import annotations

import functools
import operator

import numpy as np

from linview.backends.spark import tasks


def scalar_value(x) -> float | None:
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, np.ndarray) and x.size == 1:
        return float(x.reshape(-1)[0])
    return None


def _collect_tree(x):
    if isinstance(x, Operand):
        return x.to_numpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_collect_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _collect_tree(v) for k, v in x.items()}
    return x


class Operand:
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

    def distributed(self):
        """This operand as a DistMatrix (a transposed one is materialized)."""
        raise NotImplementedError

    def __array_function__(self, func, types, args, kwargs):
        if func is np.trace and len(args) == 1 and not kwargs:
            return self.trace()
        return func(*_collect_tree(args), **_collect_tree(kwargs))


def as2d(x) -> tuple[np.ndarray, bool]:
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=np.float64)
    return (x.reshape(-1, 1), True) if x.ndim == 1 else (x, False)


def _binary(op: str, rev: bool = False):
    def method(self, other):
        return self._binop(other, op, rev)

    method.__name__ = f"__{'r' if rev else ''}{op}__"
    return method


class BlockAlgebra:
    """Elementwise operators and reductions of a DistMatrix (needs ``ctx``, ``shape``,
    ``scale``, ``_rows``/``_cols``, ``rows()``/``cols()``, ``fold()`` and ``scaled()``)."""

    def _pair(self, other, axis: int):
        """``other`` as blocks of this matrix's layout ``axis`` (0: rows) and its scale."""
        if isinstance(other, Operand):  # a DistMatrix or a transposed one
            other = other.distributed()
            other.fold()
            return (other.rows() if axis == 0 else other.cols()), other.scale
        other, _ = as2d(other)
        if other.shape != self.shape:
            raise ValueError(f"shapes {self.shape} and {other.shape} do not match")
        return self.ctx.parallelize(other, axis), 1.0

    def _binop(self, other, op: str, rev: bool = False):
        s = scalar_value(other)
        if s is None or not (op == "mul" or (op == "div" and not rev)):
            self.fold()
        if s is not None and op == "mul":
            return self.scaled(s)
        if s is not None and op == "div" and not rev:
            return self.scaled(1.0 / s)
        if s is not None:
            other = np.full(self.shape, s)
        has_rows = self._rows is not None and (
            not isinstance(other, BlockAlgebra) or other._rows is not None
            or self._cols is None)
        axis = 0 if has_rows else 1
        mine = self._rows if axis == 0 else self._cols
        theirs, so = self._pair(other, axis)
        out = mine.zip(theirs).map(functools.partial(tasks.w_zip, op, self.scale, so, rev))
        out = self.ctx.keep(out, "local")
        return type(self)(self.ctx, self.shape, *((out, None) if axis == 0 else (None, out)))

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", True)

    def __neg__(self):
        return self.scaled(-1.0)

    # -------------------------------------------------------------- reductions
    def _blocks(self):
        self.fold()
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

    def reduce_rdd(self, tag, what: str):
        """``(tag, value)`` per block: "max" (of |entries|), "sumsq" (of squares) or "finite"
        (all finite)."""
        return self._blocks()[0].map(functools.partial(tasks.w_reduce, tag, what, self.scale))

    def max_abs(self) -> float:
        return max(v for _, v in self.reduce_rdd(None, "max").collect())

    def norm(self) -> float:
        """The Frobenius norm (pending low-rank terms folded first)."""
        return float(np.sqrt(sum(v for _, v in self.reduce_rdd(None, "sumsq").collect())))

    def all_finite(self) -> bool:
        return bool(np.isfinite(self.scale)) and all(
            v for _, v in self.reduce_rdd(None, "finite").collect())
