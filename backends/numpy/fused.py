"""One pass over a large view for all of its thin products: ``A @ BN`` and ``Aᵀ @ BT``
with a few columns each, reading every element of ``A`` from memory once.

BLAS has no such call.  ``dgemm`` with a thin right-hand side packs ``A`` first (about
three passes over its memory: 14.7 ms for ``Wᵀ·[b₁ b₂ b₃]`` at n = 4000 on one thread, where
one matrix-vector pass takes 3.8 ms), and one ``dgemv`` per column reads ``A`` once per
column, from memory or, panel by panel, from cache (8.4 ms for three columns).  This kernel
takes four columns of the Fortran-ordered ``A`` at a time (4·rows·8 bytes, in L2) and
multiplies them by up to three columns of ``BT`` in registers, and adds them, scaled, into
``A @ BN``: three columns cost 4.6 ms, little more than the pass itself
(``bench/kernel_bench.py``, table in ``bench/README.md``).
It is compiled once by numba (cached on disk beside this file, or in ``NUMBA_CACHE_DIR``).

Floating point: sums may be reassociated (``fastmath`` reassoc and contract only), as
BLAS's blocked kernels do; NaN and infinity propagate as in any product.
"""

from __future__ import annotations

import os

import numba
import numpy as np

_FLAGS = {"reassoc", "contract"}
_SIG = "void(f8[:, ::1], f8[:, ::1], f8[:, ::1], f8[:, ::1], f8[:, ::1])"


@numba.njit(_SIG, fastmath=_FLAGS, cache=True, nogil=True, boundscheck=False)
def _pass(At, BN, BT, outNt, outT):  # pragma: no cover - compiled; tests run the result
    """``outT = Aᵀ·BT'`` and ``outNt = (A·BN')ᵀ`` for ``At = Aᵀ`` (C order: row j is column
    j of A), ``BT`` (kT × rows) and ``BN`` (kN × cols) holding their columns as rows."""
    cols, rows = At.shape
    kT = BT.shape[0]
    kN = BN.shape[0]
    outNt[:, :] = 0.0
    full = cols - cols % 4
    for j in range(0, full, 4):
        a0 = At[j]
        a1 = At[j + 1]
        a2 = At[j + 2]
        a3 = At[j + 3]
        c = 0
        while c + 3 <= kT:  # three columns of BT against four of A: 12 sums in registers
            x0 = BT[c]
            x1 = BT[c + 1]
            x2 = BT[c + 2]
            s00 = s10 = s20 = s30 = s01 = s11 = s21 = s31 = s02 = s12 = s22 = s32 = 0.0
            for i in range(rows):
                u = x0[i]
                w = x1[i]
                y = x2[i]
                p0 = a0[i]
                p1 = a1[i]
                p2 = a2[i]
                p3 = a3[i]
                s00 += p0 * u
                s10 += p1 * u
                s20 += p2 * u
                s30 += p3 * u
                s01 += p0 * w
                s11 += p1 * w
                s21 += p2 * w
                s31 += p3 * w
                s02 += p0 * y
                s12 += p1 * y
                s22 += p2 * y
                s32 += p3 * y
            outT[j, c], outT[j + 1, c], outT[j + 2, c], outT[j + 3, c] = s00, s10, s20, s30
            outT[j, c + 1], outT[j + 1, c + 1] = s01, s11
            outT[j + 2, c + 1], outT[j + 3, c + 1] = s21, s31
            outT[j, c + 2], outT[j + 1, c + 2] = s02, s12
            outT[j + 2, c + 2], outT[j + 3, c + 2] = s22, s32
            c += 3
        while c < kT:  # the one or two columns left
            x0 = BT[c]
            s0 = s1 = s2 = s3 = 0.0
            for i in range(rows):
                u = x0[i]
                s0 += a0[i] * u
                s1 += a1[i] * u
                s2 += a2[i] * u
                s3 += a3[i] * u
            outT[j, c], outT[j + 1, c], outT[j + 2, c], outT[j + 3, c] = s0, s1, s2, s3
            c += 1
        for c in range(kN):
            o = outNt[c]
            b0 = BN[c, j]
            b1 = BN[c, j + 1]
            b2 = BN[c, j + 2]
            b3 = BN[c, j + 3]
            for i in range(rows):
                o[i] += a0[i] * b0 + a1[i] * b1 + a2[i] * b2 + a3[i] * b3
    for j in range(full, cols):  # the last cols % 4 columns of A
        a = At[j]
        for c in range(kT):
            x = BT[c]
            s = 0.0
            for i in range(rows):
                s += a[i] * x[i]
            outT[j, c] = s
        for c in range(kN):
            o = outNt[c]
            b = BN[c, j]
            for i in range(rows):
                o[i] += a[i] * b


def pass_dot(A: np.ndarray, BN: np.ndarray | None, BT: np.ndarray | None,
             threads: int = 1):
    """``(A @ BN, Aᵀ @ BT)`` (None for a missing block) in one pass over the
    Fortran-ordered float64 ``A``; with ``threads`` > 1 the columns of ``A`` are split into
    that many contiguous ranges, each passed by its own thread (the kernel releases the
    GIL): ``Aᵀ @ BT`` is written range by range, and the ranges' shares of ``A @ BN`` are
    summed at the end."""
    rows, cols = A.shape
    bn = np.zeros((0, cols)) if BN is None else np.ascontiguousarray(BN.T, dtype=np.float64)
    bt = np.zeros((0, rows)) if BT is None else np.ascontiguousarray(BT.T, dtype=np.float64)
    outT = np.empty((cols, bt.shape[0]))
    cuts = _ranges(cols, threads)
    if len(cuts) == 1:
        outNt = np.empty((bn.shape[0], rows))
        _pass(A.T, bn, bt, outNt, outT)
    else:
        parts = [np.empty((bn.shape[0], rows)) for _ in cuts]
        jobs = [_workers(len(cuts)).submit(_pass, A.T[j0:j1], np.ascontiguousarray(bn[:, j0:j1]),
                                           bt, part, outT[j0:j1])
                for (j0, j1), part in zip(cuts, parts, strict=True)]
        for job in jobs:
            job.result()
        outNt = parts[0]
        for part in parts[1:]:
            outNt += part
    return (None if BN is None else outNt.T, None if BT is None else outT)


#: a thread's range of columns is at least this many (a smaller pass is not worth a thread)
MIN_RANGE = 64
_POOL: list = []
# a forked child has none of the pool's threads: it makes its own
os.register_at_fork(after_in_child=_POOL.clear)


def _ranges(cols: int, threads: int) -> list[tuple[int, int]]:
    """``threads`` contiguous column ranges of about equal length, each a multiple of four
    columns but the last (the kernel takes four columns at a time)."""
    threads = max(1, min(int(threads), cols // MIN_RANGE))
    step = -(-cols // threads)
    step += -step % 4
    return [(j, min(j + step, cols)) for j in range(0, cols, step)]


def _workers(count: int):
    """The threads that run :func:`_pass` on column ranges (made once, as many as cores)."""
    from concurrent.futures import ThreadPoolExecutor

    if not _POOL or _POOL[1] < count:
        size = max(count, os.cpu_count() or 1)
        _POOL[:] = [ThreadPoolExecutor(size, thread_name_prefix="linview-pass"), size]
    return _POOL[0]
