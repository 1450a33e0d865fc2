"""The in-place kernels a generated NumPy trigger module calls (through its runtime,
imported as ``rt``): rank-k and dense updates of views through BLAS, products that read
only the touched columns of one-hot factors, fused products of one view, BLAS thread
limits, and input conversion.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
import scipy.linalg.blas as blas
import scipy.sparse as sps

from linview.backends.numpy.guards import real_dtype_problem
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
    rows = one_hot(P)
    if rows is not None:  # a row update touches only its rows: O(n·k), not a pass over A
        A[rows, :] += P[rows] @ Q.T
        return
    cols = one_hot(Q)
    if cols is not None:  # a column update touches only its columns
        A[:, cols] += P @ Q[cols].T
        return
    if A.flags.f_contiguous and A.dtype == np.float64 and A.size > 64:
        with _update_threads(A, P.shape[1]):
            out = blas.dgemm(1.0, P, Q, beta=1.0, c=A, trans_b=True, overwrite_c=True)
        if out is A:
            return
        A[...] = out  # BLAS had to copy (not expected for Fortran float64)
        return
    A += P @ Q.T


#: environment variables through which a user sets BLAS threads; any of them set means the
#: triggers leave BLAS threads alone (the user's explicit setting wins)
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "BLIS_NUM_THREADS")
#: BLAS threads of a maintaining trigger: its products are thin (gemv-like) and memory
#: bound, where threads only add synchronisation (and spin on a loaded machine)
TRIGGER_THREADS = 1
_CONTROLLER = None


def user_threads() -> bool:
    """True when the user set BLAS threads through the environment."""
    return any(os.environ.get(v) for v in THREAD_ENV)


def blas_limit(threads: int | None):
    """A context limiting BLAS (threadpoolctl) to ``threads``; ``None`` changes nothing."""
    global _CONTROLLER
    if threads is None:
        return contextlib.nullcontext()
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=threads, user_api="blas")


#: a product of a view of at least this many elements with a block of factors, or a
#: rank-k update of one (k >= WIDE_RANK), may use every core (see :func:`wide`)
WIDE_MIN = 1 << 20
WIDE_RANK = 8
#: a view times a block of at most this many columns runs as one matrix-vector product per
#: column: a thin ``dgemm`` first packs the whole view, which costs about three passes
#: over its memory (measured with OpenBLAS, n = 4000: gemv 5 ms a column, gemm 18-21 ms
#: for 2 to 8 columns on one thread, 13-15 ms on two)
GEMV_MAX = 2
_WIDE = {"allowed": True}


@contextlib.contextmanager
def wide_products(allowed: bool):
    """While active, :func:`wide` may raise the BLAS threads of a trigger's large products
    (the runtime turns it off when the user chose the threads)."""
    before = _WIDE["allowed"]
    _WIDE["allowed"] = allowed
    try:
        yield
    finally:
        _WIDE["allowed"] = before


def others_running() -> int:
    """Threads of other processes running on the machine now: the kernel's count of
    runnable threads (``/proc/loadavg``) less this process's own (BLAS workers still
    spinning after a parallel call are ours, not other work); elsewhere the one-minute
    load average less one (it lags by a minute)."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        mine = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    mine += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue  # a thread that just ended
        return max(0, total - max(mine, 1))
    except (OSError, ValueError, IndexError):
        return max(0, round(os.getloadavg()[0]) - 1)


def wide(A: np.ndarray, enough_columns: bool = True):
    """Every core for one large, compute-heavy BLAS call of a trigger (a trigger otherwise
    runs on :data:`TRIGGER_THREADS`): when ``A`` has at least :data:`WIDE_MIN` elements,
    the block is wide enough and no other work runs on the machine's other cores
    (:func:`others_running`); else nothing changes."""
    cores = os.cpu_count() or 1
    if not (_WIDE["allowed"] and enough_columns and cores > 1 and A.size >= WIDE_MIN):
        return contextlib.nullcontext()
    now = time.monotonic()
    if now - _WIDE.get("at", -1.0) > 0.05:  # about 0.1 ms to look: at most every 50 ms
        _WIDE["at"], _WIDE["others"] = now, others_running()
    if _WIDE["others"] > cores - 2:
        return contextlib.nullcontext()
    return blas_limit(cores)


def _update_threads(A: np.ndarray, k: int):
    """The BLAS threads of an in-place rank-k update of a large view: every idle core for
    k >= WIDE_RANK (:func:`wide`), one thread below, whatever the trigger runs on: a thin
    ``dgemm`` update on two threads measured 2.6x slower than on one (n = 4000, k = 1:
    24 ms against 9 ms), and markov's trigger (rank 2 and 4 updates of 2000×2000 views)
    took 32-48 ms on two threads against 21 ms on one."""
    if A.size < WIDE_MIN or not _WIDE["allowed"]:  # small, or the user chose the threads
        return contextlib.nullcontext()
    return wide(A) if k >= WIDE_RANK else blas_limit(1)


def blas_threads() -> int | None:
    """BLAS threads in effect now (the largest over the loaded BLAS libraries)."""
    from threadpoolctl import threadpool_info

    counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None


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
    rows = np.flatnonzero(X.any(axis=1))
    return rows if rows.size * 4 <= X.shape[0] else None


def dot(A, X: np.ndarray) -> np.ndarray:
    """``A @ X`` for an update factor ``X``: when ``X`` has few non-zero rows (a row, column
    or cell update is one-hot) only those columns of ``A`` are read: O(n·nnz) not O(n²)."""
    rows = one_hot(X)
    if rows is not None:
        return A[:, rows] @ X[rows]
    return A @ X


def fused_dot(A, *blocks: np.ndarray, ops: str | None = None) -> list[np.ndarray]:
    """``[op1(A) @ B1, op2(A) @ B2, ...]`` with ``ops[i]`` "N" (A) or "T" (Aᵀ): the products
    of one view at one trigger level.  Blocks of each kind are stacked into one gemm
    (``A [B1, B3]``, ``Aᵀ [B2]``), which reads A once per kind instead of once per
    product: for thin factors a product is bound by memory, not flops.  One-hot blocks
    read only their columns of A (see :func:`dot`); blocks of at most :data:`GEMV_MAX`
    columns in all run as matrix-vector products, wider ones as one ``dgemm``
    (:func:`wide`)."""
    ops = ops or "N" * len(blocks)
    out: list = [None] * len(blocks)
    kinds: dict[str, list[int]] = {}
    for i, (B, o) in enumerate(zip(blocks, ops, strict=True)):
        if one_hot(B) is not None:
            out[i] = dot(A.T if o == "T" else A, B)
        else:
            kinds.setdefault(o, []).append(i)
    for o, idx in kinds.items():
        res = _dot_distinct(A.T if o == "T" else A, [blocks[i] for i in idx])
        cuts = np.cumsum([blocks[i].shape[1] for i in idx])[:-1]
        for i, part in zip(idx, np.hsplit(res, cuts), strict=True):
            out[i] = part
    return out


def _thin_dot(A, B: np.ndarray) -> np.ndarray:
    """``A @ B`` for a block ``B`` of few columns: one matrix-vector product per column up
    to :data:`GEMV_MAX` columns (no packing pass over A), else one ``dgemm`` (:func:`wide`)."""
    if B.shape[1] <= GEMV_MAX:
        return np.column_stack([A @ B[:, j] for j in range(B.shape[1])])
    with wide(A):
        return A @ B


def _dot_distinct(A, blocks: list[np.ndarray]) -> np.ndarray:
    """``A @ [B1, B2, ...]`` computing each distinct column once: a trigger's stacked
    factors repeat columns (OLS: ``[V, Xᵀ U + …] [Xᵀ U, V] [V]`` holds V three times),
    at rank 256 a third of the trigger's largest product.  Duplicates are found by a
    fingerprint (one product with a fixed vector) and confirmed by exact comparison.
    The columns are stacked as the rows of ``Bᵀ`` (one copy; gathers of rows are cheap)."""
    Bt = np.vstack([b.T for b in blocks])
    c = Bt.shape[0]
    if c < 4:
        return _thin_dot(A, Bt.T)
    w = np.random.default_rng(c).standard_normal(Bt.shape[1])
    _, first, inverse = np.unique(Bt @ w, return_index=True, return_inverse=True)
    if first.size == c:
        return _thin_dot(A, Bt.T)
    rep = first[inverse.ravel()]
    dup = np.flatnonzero(rep != np.arange(c))
    same = np.all(Bt[rep[dup]] == Bt[dup], axis=1)
    rep[dup[~same]] = dup[~same]  # a fingerprint collision keeps its own column
    keep = np.unique(rep)
    if keep.size == c:
        return _thin_dot(A, Bt.T)
    return _thin_dot(A, Bt[keep].T)[:, np.searchsorted(keep, rep)]


def as_matrix(x, what: str, rows=None, cols=None) -> np.ndarray:
    """A 2-D Fortran float64 copy of ``x`` (1-D arrays are columns, numbers are 1x1)."""
    if sps.issparse(x):
        x = x.toarray()
    why = real_dtype_problem(x)
    if why:
        raise InputError(f"{what} is not a real numeric array: {why}")
    try:
        a = np.array(x, dtype=np.float64, order="F", copy=True)
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
