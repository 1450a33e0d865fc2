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

    def __getitem__(self, key):
        """``A[rows, cols]`` with slices (Octave's ``A(1:20, :)``): block by block."""
        return self.distributed().select(key)

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

    # -------------------------------------------------------------- the wider language
    def _one_layout(self):
        """``(rdd, axis, boundaries)`` of one layout of this matrix, pending terms folded."""
        rdd, axis = self._blocks()
        return rdd, axis, self.ctx.splits(self.shape[axis])

    def _like(self, rdd, axis: int, shape=None):
        out = self.ctx.keep(rdd, "local")
        return type(self)(self.ctx, shape or self.shape, *((out, None) if axis == 0
                                                           else (None, out)))

    def elementwise(self, fn: str, param=None):
        """Octave's elementwise function ``fn`` (``abs``, ``.^``, ``tril``...) block by
        block."""
        rdd, axis, splits = self._one_layout()
        return self._like(rdd.map(functools.partial(tasks.w_map, fn, param, self.scale,
                                                    splits, axis)), axis)

    def pairwise(self, fn: str, other, rev: bool = False):
        """``fn(self, other)`` elementwise (``max``, ``<``, ``&``...): ``other`` a number,
        a matching driver array or distributed matrix (zipped block by block)."""
        s = scalar_value(other)
        rdd, axis, _ = self._one_layout()
        if s is not None:
            fn_ = functools.partial(tasks.w_pair_scalar, fn, self.scale, s, rev)
            return self._like(rdd.map(fn_), axis)
        theirs, so = self._pair(other, axis)
        fn_ = functools.partial(tasks.w_pair, fn, self.scale, so, rev)
        return self._like(rdd.zip(theirs).map(fn_), axis)

    def extreme(self, fn: str, axis: int) -> np.ndarray:
        """``max``/``min`` along ``axis`` (0: of each column), on the driver."""
        rdd, blk_axis, _ = self._one_layout()
        got = sorted(rdd.map(functools.partial(tasks.w_extreme, fn, axis, self.scale))
                     .collect(), key=operator.itemgetter(0))
        parts = [b for _, b in got]
        if axis == blk_axis:
            return functools.reduce(np.maximum if fn == "max" else np.minimum, parts)
        return np.concatenate(parts, axis=blk_axis)

    def diagonal(self) -> np.ndarray:
        """The diagonal as a column, on the driver (each block sends its entries)."""
        rdd, axis, splits = self._one_layout()
        got = sorted(rdd.map(functools.partial(tasks.w_diagonal, splits, axis)).collect(),
                     key=operator.itemgetter(0))
        return (np.concatenate([v for _, v in got]) * self.scale).reshape(-1, 1)

    def select(self, key):
        """``A[rows, cols]`` for slices: each block sends the pieces of the result it
        holds; a small result is assembled on the driver, a large one in blocks."""
        if not (isinstance(key, tuple) and len(key) == 2
                and all(isinstance(k, slice) for k in key)):
            raise TypeError(f"distributed matrices take two slices, not {key!r}")
        sel = tuple(k.indices(n) for k, n in zip(key, self.shape, strict=True))
        shape = tuple(len(range(*x)) for x in sel)
        rdd, axis, splits = self._one_layout()
        small = self.ctx.small(shape)
        target = (0, shape[axis]) if small else self.ctx.splits(shape[axis])
        pieces = rdd.flatMap(functools.partial(tasks.w_index, sel, splits, axis, target))
        if small:
            got = sorted((v for _, v in pieces.collect()), key=operator.itemgetter(0))
            out = np.concatenate([p for _, p in got], axis=axis) * self.scale
            return np.asfortranarray(out)
        blocks = pieces.groupByKey(len(target) - 1, tasks.identity).map(
            functools.partial(tasks.w_join, axis))
        return self._like(blocks, axis, shape).scaled(self.scale)
