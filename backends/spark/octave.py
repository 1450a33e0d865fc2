"""The wider Octave language on the Spark backend (``rt.elementwise``, ``rt.reduce``,
``rt.norm``, ``rt.diag``, ``rt.kron``, ``rt.chol``, ``rt.pinv``, ``rt.qr``, ``rt.lu`` in
generated modules; indexing is ``A[rows, cols]`` as on NumPy).

Each function takes driver arrays (then it is the NumPy backend's function) or
distributed matrices.  What reads a matrix block by block runs distributed: elementwise
functions and operators, ``max``/``min`` along a dimension, ``norm(A, 1 | inf | 'fro')``,
the diagonal of a matrix, indexing (:meth:`~.algebra.BlockAlgebra.select`).  The
factorizations (``chol``, ``qr``, ``lu``, ``pinv``), ``norm(A, 2)``, ``kron``, ``diag(v)``
and the inverses (``rt.inv``, ``rt.solve``, ``rt.core_inv``) run on the driver, their
operands collected first, refused beyond ``driver_max_elements`` (the Octave ops with a
:class:`DriverLimit` that says where); :data:`PLACES` says which is which (docs/spark.md).
:func:`errors` locates a refusal in the ``.m`` file for the module.
"""

from __future__ import annotations

import contextlib

import numpy as np

from linview.backends.numpy import guards, octave_rt, runtime
from linview.backends.numpy.kernels import Size
from linview.backends.spark import tasks
from linview.backends.spark.blocks import DistMatrix, Transposed
from linview.backends.spark.session import spark_errors
from linview.compiler.ir import Op
from linview.errors import BackendError, locate

_DIST = (DistMatrix, Transposed)

#: op -> where the Spark backend runs it on distributed operands: "distributed" (maps over
#: blocks, small results collected) or "driver" (operands collected, size-checked)
PLACES = {Op.MAP: "distributed", Op.EBIN: "distributed", Op.REDUCE: "distributed",
          Op.NORM: "distributed (norm(A, 2) of a matrix: driver)",
          Op.DIAG: "distributed (diag(v) of a vector: driver)", Op.INDEX: "distributed",
          Op.KRON: "driver",
          Op.CHOL: "driver", Op.PINV: "driver", Op.QR: "driver", Op.LU: "driver",
          Op.LOOP: "driver loop; each step's operations as above",
          Op.SOLVE: "driver (a solve view: its solver, A, B and X; backends/spark/solve_module.py)"}


class DriverLimit(BackendError):
    """An operand or result of an op that runs on the driver is above
    ``driver_max_elements``; ``at`` is ``(line, column)`` of the construct in its ``.m``
    file (the module adds the file and the caret)."""

    def __init__(self, message: str, at=None, hint: str | None = None, location=None):
        self.at = at
        super().__init__(message, location=location, hint=hint)


@contextlib.contextmanager
def errors(what: str, info: dict | None):
    """:func:`.session.spark_errors`, and a :class:`DriverLimit` located in the program's
    source (``info``: the module's ``PROGRAM_INFO``) with file:line:col and a caret."""
    try:
        with spark_errors(what):
            yield
    except DriverLimit as e:
        source = (info or {}).get("source")
        if e.at is None or e.location is not None or not source:
            raise
        where = locate(source, info.get("filename") or "program.m", *e.at)
        raise DriverLimit(e.message, hint=e.hint, location=where) from None


def _ctx(x):
    return (x.base if isinstance(x, Transposed) else x).ctx


def on_driver(x, what: str, at=None) -> np.ndarray:
    """``x`` as a driver array: a distributed one collected, refused above the limit."""
    if not isinstance(x, _DIST):
        return np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=np.float64)
    ctx = _ctx(x)
    if x.shape[0] * x.shape[1] > ctx.driver_max_elements:
        raise DriverLimit(
            f"{what} runs on the Spark driver: its {x.shape[0]}×{x.shape[1]} operand is above "
            f"the driver limit driver_max_elements = {ctx.driver_max_elements:,}", at=at,
            hint="raise it with load(..., driver_max_elements=N) if the driver has the "
                 "memory (8 bytes per element, a few copies for a factorization)")
    return x.to_numpy()


def elementwise(fn: str, a, b=None, exponent=None):
    """Octave's elementwise function ``fn(a)`` (``power``: ``a .^ exponent``) or operator
    ``fn(a, b)`` (``max``, ``min``, comparisons, ``and``, ``or``)."""
    if b is None:
        if isinstance(a, _DIST):
            return a.distributed().elementwise(fn, exponent)
        return tasks.elementwise(fn, np.asarray(a, dtype=np.float64), exponent)
    if isinstance(a, _DIST):
        return a.distributed().pairwise(fn, b)
    if isinstance(b, _DIST):
        return b.distributed().pairwise(fn, a, rev=True)
    return tasks.pairwise(fn, np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def reduce(fn: str, a, axis: int) -> np.ndarray:
    """``max(A, [], dim)`` / ``min(A, [], dim)`` (``axis`` = dim - 1), kept 2-D."""
    if isinstance(a, _DIST):
        return a.distributed().extreme(fn, axis)
    return (np.max if fn == "max" else np.min)(np.asarray(a), axis=axis, keepdims=True)


def norm(a, p: str, vector: bool, at=None) -> np.ndarray:
    """``norm(A, p)`` as a 1x1 array: 'fro', 1 and inf block by block, 2 on the driver."""
    if not isinstance(a, _DIST) or vector or p == "2":
        return octave_rt.norm(on_driver(a, f"norm(·, {p})", at), p, vector)
    m = a.distributed()
    if p == "fro":
        return np.full((1, 1), m.norm())
    sums = m.elementwise("abs").sum(axis=0 if p == "1" else 1)
    return np.full((1, 1), float(np.max(sums)))


def diag(a, how: str) -> np.ndarray:
    """The diagonal of a matrix as a column (block by block), or ``diag(v)`` (the vector
    is on the driver: so is the matrix, which the module distributes when it is large)."""
    if how != "tomat" and isinstance(a, _DIST):
        return a.distributed().diagonal()
    return octave_rt.diag(on_driver(a, "diag(v)"), how)


def kron(a, b, at=None) -> np.ndarray:
    """``kron(A, B)`` on the driver (its result is checked against the limit too)."""
    dist = [x for x in (a, b) if isinstance(x, _DIST)]
    if dist:
        ctx = _ctx(dist[0])
        entries = a.shape[0] * a.shape[1] * b.shape[0] * b.shape[1]
        if entries > ctx.driver_max_elements:
            raise DriverLimit(f"kron runs on the Spark driver: its result of {entries:,} "
                              f"entries is above driver_max_elements = "
                              f"{ctx.driver_max_elements:,}", at=at)
    return np.kron(on_driver(a, "kron", at), on_driver(b, "kron", at))


def chol(a, what: str, at=None) -> np.ndarray:
    return octave_rt.chol(on_driver(a, f"chol() in {what}", at), what)


def pinv(a, at=None) -> np.ndarray:
    return octave_rt.pinv(on_driver(a, "pinv()", at))


def qr(a, economy: bool, at=None):
    return octave_rt.qr(on_driver(a, "qr()", at), economy)


def lu(a, permuted: bool, at=None):
    return octave_rt.lu(on_driver(a, "lu()", at), permuted)


def core_inv(a, what: str) -> np.ndarray:
    """A trigger's small core inverse (:func:`..numpy.guards.core_inv`); a core that is a
    distributed view (small views kept in blocks) is collected first."""
    return guards.core_inv(on_driver(a, f"the inverse in {what}"), what)


def inv(A, what: str, limit: float | None = None) -> np.ndarray:
    """The inverse of a view, computed on the driver (refused beyond its memory limit)."""
    if isinstance(A, _DIST):
        ctx = _ctx(A)
        ctx.check_collect(A.shape, f"cannot invert {what} on the Spark driver")
        A = A.to_numpy()
    return runtime.inv(A, what, limit)


def solve(A, B, what: str) -> np.ndarray:
    """``inv(A) B`` on the driver without forming the inverse (:func:`runtime.solve`)."""
    if isinstance(A, _DIST):
        ctx = _ctx(A)
        ctx.check_collect(A.shape, f"cannot solve with {what} on the Spark driver")
        A = A.to_numpy()
    if isinstance(B, _DIST):
        B = B.to_numpy()
    return runtime.solve(A, B, what)


def view_shapes(views, dims) -> list[tuple[int, int]]:
    """The shapes of a module's ``VIEWS`` under ``dims`` (those it can tell)."""
    out = []
    for shape in views.values():
        try:
            out.append(tuple(s.value(dims) if isinstance(s, Size) else
                             dims[s] if isinstance(s, str) else int(s) for s in shape))
        except (KeyError, TypeError, ValueError):
            pass
    return out
