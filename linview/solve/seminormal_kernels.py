"""The passes over memory of :mod:`.seminormal`, each one pass, on several threads (numba).

Per row change of an m×n F at m = n = 4000, the stable least-squares form moves, at least,
F once (128 MB: the residual ``r = Y - F X`` and ``g = Fᵀ r`` of a refinement step), the
lower triangle of L read and written once (64 + 64 MB: the update and downdate) and read
once more (64 MB: the backward triangular solve, which runs from the last column to the
first, against the update's order).  Each kernel here is that one pass:

* :func:`residual_gradient`: ``g = Fᵀ (Y - F X)`` over F's rows (F in C order): each row
  is read from memory once, for its residual and, still in cache, for its share of g;
  one block of rows per thread, one partial g each, summed (where BLAS takes two passes,
  ``F X`` then ``Fᵀ r``);
* :func:`update_downdate`: ``L Lᵀ + p pᵀ - q qᵀ`` in place, with ``b := L⁻¹ b`` for the
  new L in the same pass, by blocks of :data:`BLOCK` columns: the rotations of a block
  are found in its diagonal block (one thread), then applied to the rows below it, one
  block of rows per thread (each row's arithmetic is the one-thread kernel's, so the
  result is the same to the bit);
* :func:`solve_lower_t`: ``Lᵀ x = z`` from the last block of columns to the first: the
  rows below a block contribute by one dot product per column (the columns split over the
  threads), then the block's own triangle.

Threads are numba's (``numba.set_num_threads`` before a call, :func:`threads_for`).  Sums
may be reassociated (``fastmath`` reassoc and contract, as BLAS's blocked kernels do),
except in the update and downdate, whose rotations are the one-thread kernel's.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

_FLAGS = {"reassoc", "contract"}
#: columns per block of the update's and the backward solve's passes (a block of rows of
#: this width, per thread, stays in L2 while its rotations run)
BLOCK = 64


def threads_for(want: int) -> int:
    """``want`` threads, within numba's pool (at least one)."""
    return max(1, min(int(want), numba.config.NUMBA_NUM_THREADS))


@numba.njit(fastmath=_FLAGS, cache=True, nogil=True, boundscheck=False)
def _rows(F, Y, x, c, a, e, g, w):  # pragma: no cover - compiled by numba
    """``g += F[a:e]ᵀ diag(w[a:e]) (Y[a:e, c] - F[a:e] x)`` (no weights when w is empty),
    four rows at a time: their residuals in one pass over x, then their share of g in one
    pass over g (the rows, 4·n·8 bytes, are read again from cache)."""
    weighted = w.shape[0] > 0
    n = F.shape[1]
    i = a
    while i + 4 <= e:
        r0, r1, r2, r3 = F[i], F[i + 1], F[i + 2], F[i + 3]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(n):
            xj = x[j]
            s0 += r0[j] * xj
            s1 += r1[j] * xj
            s2 += r2[j] * xj
            s3 += r3[j] * xj
        s0, s1 = Y[i, c] - s0, Y[i + 1, c] - s1
        s2, s3 = Y[i + 2, c] - s2, Y[i + 3, c] - s3
        if weighted:
            s0, s1, s2, s3 = s0 * w[i], s1 * w[i + 1], s2 * w[i + 2], s3 * w[i + 3]
        for j in range(n):
            g[j] += r0[j] * s0 + r1[j] * s1 + r2[j] * s2 + r3[j] * s3
        i += 4
    while i < e:
        row = F[i]
        s = 0.0
        for j in range(n):
            s += row[j] * x[j]
        s = Y[i, c] - s
        if weighted:
            s *= w[i]
        for j in range(n):
            g[j] += row[j] * s
        i += 1


@numba.njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def residual_gradient(F, Y, Xt, parts, w):  # pragma: no cover - compiled by numba
    """``Fᵀ diag(w) (Y - F X)`` (n×p) for F (m×n, C order), Y (m×p), ``Xt = Xᵀ`` (p×n, C
    order) and weights w (m; empty: none), in ``parts`` blocks of rows, one pass over F per
    column of Y."""
    m, n = F.shape
    p = Y.shape[1]
    G = np.zeros((parts, p, n))
    step = (m + parts - 1) // parts
    for t in prange(parts):
        for c in range(p):
            _rows(F, Y, Xt[c], c, t * step, min(m, (t + 1) * step), G[t, c], w)
    out = np.zeros((n, p))
    for t in range(parts):
        for c in range(p):
            for j in range(n):
                out[j, c] += G[t, c, j]
    return out


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _rotate(col, pp, qq, bb, c1, s1, i1, c2, s2, i2, zk, solve):  # pragma: no cover
    """One column's update rotation and downdate rotation on a stretch of its rows (and
    of p, q; with ``solve``, the forward substitution of b).  Two loops, so that each
    vectorizes."""
    if solve:
        for i in range(col.shape[0]):
            lik = (col[i] + s1 * pp[i]) * i1
            pp[i] = c1 * pp[i] - s1 * lik
            lik2 = (lik - s2 * qq[i]) * i2
            qq[i] = c2 * qq[i] - s2 * lik2
            col[i] = lik2
            bb[i] -= zk * lik2
        return
    for i in range(col.shape[0]):
        lik = (col[i] + s1 * pp[i]) * i1  # the update's rotation
        pp[i] = c1 * pp[i] - s1 * lik
        lik2 = (lik - s2 * qq[i]) * i2  # the downdate's hyperbolic rotation
        qq[i] = c2 * qq[i] - s2 * lik2
        col[i] = lik2


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _rotate4(L, a, e, k, pp, qq, bb, rot, j, solve):  # pragma: no cover - compiled
    """Columns k to k+3's rotations (``rot[:, j:j+4]``) on rows a to e: p, q and b are
    read and written once for the four columns (they dominate the loads otherwise)."""
    l0, l1, l2, l3 = L[a:e, k], L[a:e, k + 1], L[a:e, k + 2], L[a:e, k + 3]
    c10, s10, i10, c20, s20, i20, z0 = rot[:, j]  # scalars in registers: rot may alias L
    c11, s11, i11, c21, s21, i21, z1 = rot[:, j + 1]
    c12, s12, i12, c22, s22, i22, z2 = rot[:, j + 2]
    c13, s13, i13, c23, s23, i23, z3 = rot[:, j + 3]
    for i in range(e - a):
        p, q = pp[i], qq[i]
        x = (l0[i] + s10 * p) * i10
        p = c10 * p - s10 * x
        y0 = (x - s20 * q) * i20
        q = c20 * q - s20 * y0
        x = (l1[i] + s11 * p) * i11
        p = c11 * p - s11 * x
        y1 = (x - s21 * q) * i21
        q = c21 * q - s21 * y1
        x = (l2[i] + s12 * p) * i12
        p = c12 * p - s12 * x
        y2 = (x - s22 * q) * i22
        q = c22 * q - s22 * y2
        x = (l3[i] + s13 * p) * i13
        p = c13 * p - s13 * x
        y3 = (x - s23 * q) * i23
        q = c23 * q - s23 * y3
        l0[i], l1[i], l2[i], l3[i] = y0, y1, y2, y3
        pp[i], qq[i] = p, q
        if solve:
            bb[i] -= z0 * y0 + z1 * y1 + z2 * y2 + z3 * y3


@numba.njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def update_downdate(L, p, q, b, solve, parts):  # pragma: no cover - compiled by numba
    """``L Lᵀ + p pᵀ - q qᵀ`` in place (L lower, Fortran order); p and q are overwritten.
    With ``solve``, b becomes ``L⁻¹ b`` for the new L in the same pass.  Returns the
    smallest ``1 - (q_k / r_k)²`` over the pivots (how much of each pivot the downdate
    kept: near 0, its cancellation lost that many digits of the factor), or -1.0 when the
    downdate finds a non-positive pivot (L is then partly changed)."""
    n = L.shape[0]
    kept = 1.0
    rot = np.empty((7, BLOCK))  # per column of a block: c1, s1, 1/c1, c2, s2, 1/c2, z
    for k0 in range(0, n, BLOCK):
        k1 = min(n, k0 + BLOCK)
        for k in range(k0, k1):  # the block's rotations, from its diagonal block
            lkk = L[k, k]
            r1 = math.sqrt(lkk * lkk + p[k] * p[k])
            t = r1 * r1 - q[k] * q[k]
            if not t > 0.0:
                return -1.0
            kept = min(kept, t / (r1 * r1))
            r2 = math.sqrt(t)
            c1, s1, c2, s2 = r1 / lkk, p[k] / lkk, r2 / r1, q[k] / r1
            L[k, k] = r2
            zk = 0.0
            if solve:
                zk = b[k] / r2
                b[k] = zk
            j = k - k0
            rot[0, j], rot[1, j], rot[2, j] = c1, s1, 1.0 / c1
            rot[3, j], rot[4, j], rot[5, j], rot[6, j] = c2, s2, 1.0 / c2, zk
            _rotate(L[k + 1:k1, k], p[k + 1:k1], q[k + 1:k1], b[k + 1:k1] if solve else b,
                    c1, s1, 1.0 / c1, c2, s2, 1.0 / c2, zk, solve)
        rows = n - k1
        if rows <= 0:
            continue
        step = (rows + parts - 1) // parts
        for t in prange(parts):  # the rows below the block, one stretch per thread
            a = k1 + t * step
            e = min(n, a + step)
            if a >= e:
                continue
            k = k0
            while k + 4 <= k1:
                _rotate4(L, a, e, k, p[a:e], q[a:e], b[a:e] if solve else b, rot, k - k0,
                         solve)
                k += 4
            while k < k1:
                j = k - k0
                _rotate(L[a:e, k], p[a:e], q[a:e], b[a:e] if solve else b,
                        rot[0, j], rot[1, j], rot[2, j], rot[3, j], rot[4, j], rot[5, j],
                        rot[6, j], solve)
                k += 1
    return kept


@numba.njit(parallel=True, fastmath=_FLAGS, cache=True, nogil=True, boundscheck=False)
def solve_lower_t(L, z):  # pragma: no cover - compiled by numba
    """``z := L⁻ᵀ z`` in place (L lower, Fortran order: ``Lᵀ`` upper, its rows are L's
    contiguous columns), backward by blocks of :data:`BLOCK` columns."""
    n = L.shape[0]
    k1 = n
    while k1 > 0:
        k0 = max(0, k1 - BLOCK)
        if k1 < n:
            tail = z[k1:]
            for k in prange(k0, k1):  # what the solved rows below contribute
                col = L[k1:, k]
                s = 0.0
                for i in range(col.shape[0]):
                    s += col[i] * tail[i]
                z[k] -= s
        for k in range(k1 - 1, k0 - 1, -1):  # the block's own triangle
            s = 0.0
            for i in range(k + 1, k1):
                s += L[i, k] * z[i]
            z[k] = (z[k] - s) / L[k, k]
        k1 = k0
    return z
