"""The in-place kernels a generated NumPy trigger module calls (through its runtime,
imported as ``rt``): rank-k and dense updates of views through BLAS, products that read
only the touched columns of one-hot factors, fused products of one view, BLAS thread
limits, and input conversion.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
import scipy.linalg.blas as blas
import scipy.sparse as sps

from linview.backends.numpy.guards import real_dtype_problem
from linview.backends.numpy.threads import (  # noqa: F401 - the kernels' thread policy
    GEMV_MAX,
    THREAD_ENV,
    TRIGGER_THREADS,
    WIDE_MIN,
    WIDE_RANK,
    blas_limit,
    blas_threads,
    others_running,
    pass_threads,
    pools,
    trigger_limit,
    update_threads,
    user_threads,
    wide,
    wide_products,
)
from linview.errors import InputError


class Size(NamedTuple):
    """A compound size in a generated module's ``INPUTS``/``VIEWS``: its text (for messages)
    and its value as code over the bound sizes ``d``.  A bare size is just its name, a
    literal size an int."""

    text: str
    value: Callable[[Mapping[str, int]], int]


def size_text(size) -> str:
    return size.text if isinstance(size, Size) else str(size)


# ------------------------------------------------------------------ kernels
def add_outer(A: np.ndarray, P: np.ndarray, Q: np.ndarray) -> None:
    """``A += P Qᵀ`` in place through BLAS ``dgemm`` with beta = 1, allocating nothing of
    A's size.  (``dgemm`` also for rank 1: OpenBLAS's ``dger`` measured 40× slower here.)
    A one-hot ``P`` (or ``Q``), as a row (column) update has, touches only those rows
    (columns) of A."""
    if P.shape[1] == 0:
        return
    unit = unit_columns(P)
    if unit is not None:  # row changes, however many: only their rows, no product
        A[unit[0], :] += Q[:, unit[1]].T
        return
    rows = one_hot(P)
    if rows is not None:  # a row update touches only its rows: O(n·k), not a pass over A
        A[rows, :] += P[rows] @ Q.T
        return
    cols = one_hot(Q)
    if cols is not None:  # a column update touches only its columns
        A[:, cols] += P @ Q[cols].T
        return
    if A.flags.f_contiguous and A.dtype == np.float64 and A.size > 64:
        with update_threads(A, P.shape[1]):
            out = blas.dgemm(1.0, P, Q, beta=1.0, c=A, trans_b=True, overwrite_c=True)
        if out is A:
            return
        A[...] = out  # BLAS had to copy (not expected for Fortran float64)
        return
    A += P @ Q.T


def add_outer_keeping(A: np.ndarray, P: np.ndarray, Q: np.ndarray):
    """``A += P Qᵀ`` in place (as :func:`add_outer`), returning ``(where, old)`` such that
    ``A[where] = old`` restores A exactly: the touched rows (columns) of a row (column)
    update, read once and written once (a 2000×2000 Fortran matrix's row is 2000 strided
    reads: copying it, then ``+=`` on it, read it twice), else a copy of A."""
    unit = unit_columns(P)
    if unit is not None:
        old = A[unit[0], :]
        A[unit[0], :] = old + Q[:, unit[1]].T
        return (unit[0], slice(None)), old
    rows = one_hot(P)
    if rows is not None:
        old = A[rows, :]
        A[rows, :] = old + P[rows] @ Q.T
        return (rows, slice(None)), old
    cols = one_hot(Q)
    if cols is not None:
        old = A[:, cols]
        A[:, cols] = old + P @ Q[cols].T
        return (slice(None), cols), old
    old = A.copy(order="K")
    add_outer(A, P, Q)
    return (slice(None), slice(None)), old


def add_dense(A: np.ndarray, D: np.ndarray) -> None:
    """``A += D`` in place."""
    A += D


def assign(A: np.ndarray, value: np.ndarray) -> None:
    """``A[...] = value`` in place (keeps A's memory and Fortran order)."""
    A[...] = value


def owned(A: np.ndarray) -> np.ndarray:
    """A copy of ``A`` (a view used as a delta factor must not change when phase 2 updates
    the view in place)."""
    return np.array(A, order="F")


def one_hot(X: np.ndarray) -> np.ndarray | None:
    """The non-zero rows of an update factor when they are few (a row, column or cell
    update), else None."""
    if np.count_nonzero(X) * 4 > X.size:  # a dense factor: no row-by-row look needed
        return None
    rows = np.flatnonzero(X.any(axis=1))
    return rows if rows.size * 4 <= X.shape[0] else None


def unit_columns(P: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows, cols)`` when every column of ``P`` is a unit vector ``e_i`` and no two
    share a row (a micro-batch of row changes, one per row), else None.  Then
    ``A += P Qᵀ`` is ``A[rows] += Q[:, cols]ᵀ``: the same numbers as the product (each
    entry is one term times 1, the others times 0), without reading or writing the other
    rows of A, however many rows change."""
    k = P.shape[1]
    if P.ndim != 2 or not k or np.count_nonzero(P) != k:
        return None
    rows, cols = np.nonzero(P)
    if np.unique(cols).size != k or np.unique(rows).size != k or np.any(P[rows, cols] != 1.0):
        return None
    return rows, cols


def matmul(A, B: np.ndarray) -> np.ndarray:
    """``A @ B`` on the kernels' BLAS (SciPy's ``dgemv``/``dgemm``, the library of the
    in-place updates, so that a trigger's heavy calls share one thread pool; see
    :func:`blas_limit`), or, for a large view and a thin block inside a trigger that
    holds several threads, the one-pass kernel on them (:func:`pass_dot`).  ``A`` may be
    a transposed view (``X.T``): it is read in place
    with BLAS's transpose flag.  Anything but float64 matrices goes through NumPy."""
    trans = False
    if isinstance(A, np.ndarray) and A.ndim == 2 and not A.flags.f_contiguous \
            and A.flags.c_contiguous:
        A, trans = A.T, True
    if not (isinstance(A, np.ndarray) and A.ndim == 2 and A.flags.f_contiguous
            and A.dtype == np.float64 and isinstance(B, np.ndarray)
            and B.dtype == np.float64 and B.ndim in (1, 2) and A.size):
        return (A.T if trans else A) @ B
    if B.ndim == 1:
        return matmul(A.T if trans else A, B[:, None])[:, 0]
    if pass_threads() > 1 and A.size >= WIDE_MIN and B.shape[1] <= ONE_PASS_MAX:
        # a trigger holding several threads keeps BLAS on one (threads.trigger_limit)
        return pass_dot(A, *((None, B) if trans else (B, None)), threads=pass_threads())[
            int(trans)]
    if B.shape[1] == 1:
        return blas.dgemv(1.0, A, B[:, 0], trans=int(trans))[:, None]
    return blas.dgemm(1.0, A, np.asfortranarray(B), trans_a=int(trans))


def dot(A, X: np.ndarray) -> np.ndarray:
    """``A @ X`` for an update factor ``X``: when ``X`` has few non-zero rows (a row, column
    or cell update is one-hot) only those columns of ``A`` are read: O(n·nnz) not O(n²)."""
    rows = one_hot(X)
    if rows is not None:
        return A[:, rows] @ X[rows]
    return matmul(A, X)


#: the products of one large view at one trigger level with at most this many distinct
#: factor columns in all (``A·B`` and ``Aᵀ·C`` together) run as one pass over the view
#: (:func:`.fused.pass_dot`; ``bench/kernel_bench.py``, n = 4000, one thread: 3 columns
#: 4.6 ms, 2+2 5.5, 4+4 9.0, 8+8 12.6 ms, against 8.4, 9.7, 15.6 and 28 ms for one
#: ``dgemv`` per column over cached panels, and 15 to 27 ms for thin ``dgemm`` calls)
ONE_PASS_MAX = 16


def fused_dot(A, *blocks: np.ndarray, ops: str | None = None) -> list[np.ndarray]:
    """``[op1(A) @ B1, op2(A) @ B2, ...]`` with ``ops[i]`` "N" (A) or "T" (Aᵀ): the products
    of one view at one trigger level, computed together.  One-hot blocks read only their
    columns of A (see :func:`dot`).  The other blocks of each kind are reduced to their
    distinct columns (:func:`distinct_columns`), and then, for a large view, two to
    :data:`ONE_PASS_MAX` columns in all run as one pass over A (:func:`pass_dot`, split
    over the threads the trigger holds, :func:`.threads.pass_threads`), more as one
    ``dgemm`` per kind (:func:`wide`); a single column is one matrix-vector product, and
    small views take one product per kind."""
    ops = ops or "N" * len(blocks)
    out: list = [None] * len(blocks)
    kinds: dict[str, list[int]] = {}
    for i, (B, o) in enumerate(zip(blocks, ops, strict=True)):
        if one_hot(B) is not None:
            out[i] = dot(A.T if o == "T" else A, B)
        else:
            kinds.setdefault(o, []).append(i)
    large = _one_pass_ok(A)
    basis = {o: distinct_columns([blocks[i] for i in idx], dependent=large)
             for o, idx in kinds.items()}
    # columns with one non-zero (the e_i of a row update inside [U, A U + …]) are gathers
    hot = {o: _single_entries(b) if large else None for o, (b, _) in basis.items()}
    dense = {o: b if hot[o] is None else b[:, hot[o][0]] for o, (b, _) in basis.items()}
    dense = {o: b for o, b in dense.items() if b.shape[1]}
    width = sum(b.shape[1] for b in dense.values())
    if large and 1 < width <= ONE_PASS_MAX:
        both = pass_dot(A, *(dense.get(o) for o in "NT"), threads=pass_threads())
        res = dict(zip("NT", both, strict=True))
    else:
        res = {o: _thin_dot(A.T if o == "T" else A, b) for o, b in dense.items()}
    for o, h in hot.items():
        if h is not None:
            res[o] = _with_gathers(A.T if o == "T" else A, basis[o][0], res.get(o), *h)
    for o, idx in kinds.items():
        full = basis[o][1](res[o])
        cuts = np.cumsum([blocks[i].shape[1] for i in idx])[:-1]
        for i, part in zip(idx, np.hsplit(full, cuts), strict=True):
            out[i] = part
    return out


def _single_entries(B: np.ndarray):
    """``(others, hot)``: the columns of ``B`` with exactly one non-zero entry (``hot``) and
    the rest, or None when none has one."""
    ones = np.count_nonzero(B, axis=0) == 1
    if not ones.any():
        return None
    return np.flatnonzero(~ones), np.flatnonzero(ones)


def _with_gathers(A, B: np.ndarray, res: np.ndarray | None, others, hot) -> np.ndarray:
    """``A @ B`` from ``res = A @ B[:, others]`` and, for each column of ``hot`` (one
    non-zero ``c`` in row ``i``), ``c·A[:, i]``: a column of A (a strided row of a
    Fortran view's transpose), not a pass over it."""
    out = np.empty((A.shape[0], B.shape[1]), order="F")
    if others.size:
        out[:, others] = res
    rows = np.argmax(B[:, hot] != 0, axis=0)
    out[:, hot] = A[:, rows] * B[rows, hot]
    return out


def _one_pass_ok(A) -> bool:
    return (isinstance(A, np.ndarray) and A.ndim == 2 and A.flags.f_contiguous
            and A.dtype == np.float64 and A.size >= WIDE_MIN)


def pass_dot(A: np.ndarray, BN: np.ndarray | None, BT: np.ndarray | None,
             threads: int = 1):
    """``(A @ BN, Aᵀ @ BT)`` (None for a missing block) in one pass over the Fortran-ordered
    float64 ``A`` on ``threads`` threads (:mod:`.fused`, compiled by numba: imported with
    the first large view)."""
    from linview.backends.numpy.fused import pass_dot as one_pass

    return one_pass(A, BN, BT, threads)


def warm(arrays) -> None:
    """Compile (or load from numba's cache) the one-pass kernel when some array is large
    enough to use it: at load, so that no update pays for it."""
    if any(_one_pass_ok(a) for a in arrays):
        import linview.backends.numpy.fused  # noqa: F401 - compiled on import


def _thin_dot(A, B: np.ndarray) -> np.ndarray:
    """``A @ B`` for a block ``B`` of few columns: one matrix-vector product per column up
    to :data:`GEMV_MAX` columns (no packing pass over A), else one ``dgemm`` (:func:`wide`)."""
    if B.shape[1] <= GEMV_MAX:
        return np.column_stack([matmul(A, B[:, j]) for j in range(B.shape[1])])
    with wide(A):
        return matmul(A, B)


#: columns up to which :func:`distinct_columns` also looks for linear dependence
DEPENDENT_MAX = 16
#: a combination that adds up more than this many times the column's own norm would lose
#: more than four bits to cancellation in the product: the column is computed itself
CANCEL_MAX = 16


def distinct_columns(blocks: list[np.ndarray], dependent: bool = True):
    """``(B, expand)``: the columns of ``[B1, B2, ...]`` that a product needs, and the
    function that turns ``X @ B`` into ``X @ [B1, B2, ...]``.  A trigger's stacked factors
    repeat columns (OLS: ``[V, Xᵀ U + …] [Xᵀ U, V] [V]`` holds V three times; at rank 256
    a third of its largest product): duplicates are found by a fingerprint (one product
    with a fixed vector), confirmed by exact comparison, and computed once.  Up to
    :data:`DEPENDENT_MAX` columns (``dependent``: for a large view, where a column costs a
    pass over it), a column that is a combination of the columns kept
    before it to rounding (``Xᵀu + V·s`` beside ``Xᵀu`` and ``V``) is computed as that
    combination of their products: exact algebra, an error within a few times the
    product's own rounding (the test: residual ≤ 8·eps·(Σ|cᵢ|‖bᵢ‖ + ‖b‖), and no more
    cancellation than Σ|cᵢ|‖bᵢ‖ ≤ :data:`CANCEL_MAX`·‖b‖)."""
    Bt = np.vstack([b.T for b in blocks])  # columns as rows: gathers of rows are cheap
    c = Bt.shape[0]
    keep, rep = np.arange(c), np.arange(c)
    if c >= 4:
        w = np.random.default_rng(c).standard_normal(Bt.shape[1])
        _, first, inverse = np.unique(Bt @ w, return_index=True, return_inverse=True)
        if first.size < c:
            rep = first[inverse.ravel()]
            dup = np.flatnonzero(rep != np.arange(c))
            same = np.all(Bt[rep[dup]] == Bt[dup], axis=1)
            rep[dup[~same]] = dup[~same]  # a fingerprint collision keeps its own column
            keep = np.unique(rep)
    coef = None
    if dependent and 1 < keep.size <= DEPENDENT_MAX:
        keep, coef = _independent(Bt, keep)
    B = Bt[keep].T
    if coef is None:
        if keep.size == c:
            return B, lambda res: res
        index = np.searchsorted(keep, rep)
        return B, lambda res: res[:, index]
    mix = coef[:, rep]  # every column as a combination of the kept ones
    return B, lambda res: res @ mix


def _independent(Bt: np.ndarray, cand: np.ndarray):
    """``(kept, coef)``: the rows of ``Bt`` (columns of B) among ``cand`` that are not a
    combination of earlier kept ones, and ``coef`` (kept × all rows) with ``Bt[j] =
    coef[:, j] @ Bt[kept]`` for every candidate j; ``coef`` None when nothing depends.
    One QR factorisation of the candidates (``C = Q R``) reduces each least-squares
    problem to R's few rows (``min ‖R[:, K] x − R[:, j]‖``); a combination is taken only
    if it reproduces the column itself to rounding (the residual test of
    :func:`distinct_columns`, computed from the columns, not from Q)."""
    eps = np.finfo(float).eps
    C = Bt[cand]
    norms = np.sqrt(np.einsum("ij,ij->i", C, C))
    if not np.all(np.isfinite(norms)):
        return cand, None  # a non-finite column: no combination is exact
    R = np.linalg.qr(C.T, mode="r")
    kept: list[int] = []  # positions in cand
    combos: dict[int, np.ndarray] = {}
    for j in range(len(cand)):
        if kept:
            x = np.linalg.lstsq(R[:j + 1, kept], R[:j + 1, j], rcond=None)[0]
            full = np.zeros(j)
            full[kept] = x
            miss = C[j] - full @ C[:j]
            mass = np.abs(x) @ norms[kept]  # what the combination adds up
            if np.all(np.isfinite(x)) and mass <= CANCEL_MAX * norms[j] and \
                    np.sqrt(miss @ miss) <= 8 * eps * (mass + norms[j]):
                combos[int(cand[j])] = x
                continue
        kept.append(j)
    if not combos:
        return cand, None
    kept = [int(cand[j]) for j in kept]
    coef = np.zeros((len(kept), Bt.shape[0]))
    coef[np.arange(len(kept)), kept] = 1.0
    for j, x in combos.items():
        coef[:x.size, j] = x  # x combines the columns kept before j (kept only grows)
    return np.asarray(kept), coef


def as_matrix(x, what: str, rows=None, cols=None, copy: bool = True) -> np.ndarray:
    """A 2-D Fortran float64 copy of ``x`` (1-D arrays are columns, numbers are 1x1);
    ``copy=False``: ``x`` itself when it is one already (an array the caller owns)."""
    if sps.issparse(x):
        x = x.toarray()
    why = real_dtype_problem(x)
    if why:
        raise InputError(f"{what} is not a real numeric array: {why}")
    try:
        a = np.array(x, dtype=np.float64, order="F", copy=copy or None)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what} is not a numeric array: {e}") from None
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a.reshape(-1, 1, order="F")
    elif a.ndim != 2:
        raise InputError(f"{what} must be a matrix (2-D), got {a.ndim} dimensions")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what} contains NaN or Inf")
    return np.asfortranarray(a)


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------ base class
