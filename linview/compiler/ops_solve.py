"""The op of solve views, ``solve(A, B)`` (``A \\ B`` kept with its residual by
:mod:`linview.solve`): its fields for :data:`.ops.OPS`, built there like
:mod:`.ops_octave`'s.  Its reference meaning is a direct solve; it has no delta rule (a
statement ``x := solve(A, B)`` is maintained by the solve-view runtime, not by a trigger).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sps
import scipy.sparse.linalg as spla

from linview.compiler.ir import Op, ShapeMismatch, same_dim
from linview.errors import NumericalError

ATOM = 9  # as in ops.py: printed as one token


def direct_solve(a, b, what: str = "the system") -> np.ndarray:
    """``a \\ b`` by a direct solve (sparse LU for sparse ``a``), refusing singular ``a``:
    the meaning of a solve view (the reference interpreter, verification)."""
    b = b.toarray() if sps.issparse(b) else np.asarray(b, dtype=float)
    try:
        if sps.issparse(a):
            x = spla.spsolve(sps.csc_matrix(a), b)
        else:
            x = scipy.linalg.solve(np.asarray(a.toarray() if sps.issparse(a) else a, float), b)
    except (ValueError, np.linalg.LinAlgError, RuntimeError) as e:
        raise NumericalError(f"cannot solve {what}: {e}") from None
    x = np.asarray(x, dtype=float).reshape(b.shape)
    if not np.all(np.isfinite(x)):
        raise NumericalError(f"cannot solve {what}: the matrix is singular")
    return x


def solve_shape(children, attr):
    """Shape rule of ``solve(A, B)``: A square, as many rows as B; the result is A.cols×B.cols."""
    a, b = children
    if not (same_dim(a.rows, a.cols) and same_dim(a.rows, b.rows)):
        raise ShapeMismatch("in 'A \\ B', A must be square with as many rows as B",
                            a.shape, b.shape)
    return (a.cols, b.cols)



ENTRIES = {
    Op.SOLVE: dict(
        shape=solve_shape, evaluate=lambda n, a, b: direct_solve(a, b), prec=ATOM, delta=None,
        text=lambda n, w: f"solve({w(0, 0)}, {w(1, 0)})",
        flops=lambda n, size: 2 * size(n.rows) ** 3 / 3 + 2 * size(n.rows) ** 2 * size(n.cols)),
}
