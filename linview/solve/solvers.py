"""Solve views: ``X = A \\ B`` kept with its residual ``R = B - A·X`` instead of an inverse.

A low-rank change of A (``ΔA = P Qᵀ``) or of B changes the residual by ``-P (Qᵀ X)`` or
``ΔB``: a local update when the factors are sparse.  An iterative method then drives the
residual below a target that certifies the error bound the user asked for:

``push``    for ``A = I - s·M`` with M column-stochastic (:class:`~linview.solve.stochastic.
            StochasticMatrix`) and ``0 ≤ s < 1``, an M-matrix: residual-driven local push
            (Gauss–Southwell, frontier by frontier).  Since ``‖A⁻¹‖₁ ≤ 1/(1 - s)``, the
            L1 error of every column is certified: ``‖X - X*‖₁ ≤ ‖R‖₁ / (1 - s)``.
``krylov``  any nonsingular A (dense or scipy.sparse): GMRES on the correction
            ``A·δ = R``, warm-started from the current X.  The 2-norm error is bounded
            through a certified bound on ``A⁻¹`` (diagonal dominance at any n, or σ_min
            by a dense SVD): :mod:`linview.solve.bounds`; none is claimed otherwise
            (:class:`~linview.solve.krylov.KrylovSolver`).

``cholesky`` regression ``(Fᵀ F) \\ (Fᵀ Y)``: the triangular factor of ``F = Q R`` kept by
            rank-1 updates and downdates, corrected seminormal equations
            (:class:`linview.solve.seminormal.CholeskySolver`), stable for near-singular F.

``tol`` is the bound kept on the error of every column (L1 for push, 2-norm for krylov).
Dangling columns and the uniform part of a residual are kept as rank-1 terms (an offset
``g`` with true residual ``R + g·1``), so no step of push costs n.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import scipy.sparse as sps

from linview.compiler.ops_solve import direct_solve, solve_shape  # noqa: F401 - interface
from linview.errors import InputError, NumericalError
from linview.solve import blockpush
from linview.solve.seminormal import CholeskySolver  # noqa: F401 - the cholesky method
from linview.solve.stochastic import ColumnChange, StochasticMatrix

#: the residual target of push is this fraction of ``tol·(1 - s)`` (the rest is margin)
MARGIN = 0.9
#: a load's sweeps stop at this fraction of the target: the exact residual recomputed
#: after them differs from the swept one by rounding only (about 1e-16 of the ranks'
#: mass), and push (``drive``) takes whatever is left above the target
SWEEP_STOP = 0.9


def as_dense_2d(B) -> np.ndarray:
    B = B.toarray() if sps.issparse(B) else np.asarray(B, dtype=float)
    return B.reshape(-1, 1) if B.ndim == 1 else np.array(B, dtype=float)


def _coo(P) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rows, cols, values of the non-zeros of P (dense or sparse)."""
    if sps.issparse(P):
        c = P.tocoo()
        return c.row.astype(np.int64), c.col.astype(np.int64), c.data
    P = np.asarray(P, dtype=float)
    P = P.reshape(-1, 1) if P.ndim == 1 else P
    r, c = np.nonzero(P)
    return r, c, P[r, c]


class PushSolver:
    """``X = (I - s·M) \\ B`` by residual push (see the module docstring)."""

    method = "push"
    #: several columns pushed at once (:mod:`.blockpush`), or column by column (the
    #: default: measured faster, docs/solve_views.md "Certified bounds")
    block = False

    def __init__(self, M: StochasticMatrix, s: float, B, tol: float, x0=None,
                 threads: Callable[[], int] | None = None):
        if not 0 <= s < 1:
            raise InputError(f"push needs 0 <= s < 1 in (I - s*M), got s = {s}",
                             hint="use '%#linview solve krylov' for other matrices")
        self.M, self.s, self.tol = M, float(s), float(tol)
        # threads of a dense round's pass (:mod:`.sweep_kernel`), asked for each round
        self._threads = threads or (lambda: os.cpu_count() or 1)
        self._spare: np.ndarray | None = None  # a dense round's copy of the residual
        B = as_dense_2d(B)
        self.n, self.p = B.shape
        self.B = np.asfortranarray(B)
        self.X = np.zeros_like(self.B, order="F")
        self.R = np.array(B, order="F")
        self.g = np.zeros(self.p)  # uniform residual offset per column
        self.S = np.abs(self.R).sum(axis=0)  # ‖R[:, c]‖₁, kept incrementally
        self.theta = np.full(self.p, self.target / 64)
        # per column, the nodes whose residual may exceed theta; None after a dense round
        # that left more than n/32 of them (the next round is dense again)
        self.cand: list[np.ndarray | None] = [np.zeros(0, np.int64)] * self.p
        self.cand_all = np.zeros(0, np.int64)  # candidates of all columns (p > 1)
        # work done: nodes pushed, push rounds, whole-graph sweeps, rescans of R for a
        # lower threshold, and links read (a sweep reads all of M's)
        self.stats = {"pushes": 0, "rounds": 0, "sweeps": 0, "rescans": 0, "edges": 0}
        self._pos: np.ndarray | None = None  # scratch of _distinct
        if x0 is None:
            self._sweep_all()
            self.drive()  # what rounding of the exact residual left above the target
        else:  # warm start (a restored state): exact residual, then push
            self.X[:] = as_dense_2d(x0)
            self.refresh()

    # ------------------------------------------------------------------ bound
    @property
    def target(self) -> float:
        """The residual L1 norm that certifies ``tol``, with a margin of :data:`MARGIN` for
        the rounding of the residual kept incrementally (about 1e-15 on ranks summing to
        1, far below any tolerance a user asks for)."""
        return MARGIN * self.tol * (1 - self.s)

    def residual_bound(self) -> np.ndarray:
        return self.S + self.n * np.abs(self.g)

    def error_bound(self) -> float:
        """Certified bound on ``max_c ‖X[:, c] - X*[:, c]‖₁``."""
        return float(self.residual_bound().max() / (1 - self.s))

    # ------------------------------------------------------------------ changes
    def change_columns(self, changes: list[ColumnChange]) -> None:
        """M's columns changed (already applied to M): ``R += s·(new - old)·x_j``; all
        columns at once when there are several (:mod:`.blockpush`)."""
        if self.p > 1 and self.block:
            blockpush.change_columns(self, changes)
            return
        s = self.s
        for c in range(self.p):
            x = self.X[:, c]
            rows, vals, g = [], [], 0.0
            for ch in changes:
                xj = x[ch.j]
                if xj == 0:
                    continue
                rows += [ch.new_rows, ch.old_rows]
                vals += [s * xj * ch.new_vals, -s * xj * ch.old_vals]
                g += s * xj * (float(ch.new_dangling) - float(ch.old_dangling)) / self.n
            self.g[c] += g
            if rows:
                self._add_residual(c, np.concatenate(rows), np.concatenate(vals))
        self.drive()

    def change_matrix(self, P, Q, links) -> None:
        """``A += P Qᵀ`` of a plain sparse M (``links``, :mod:`.links`, is the new M):
        ``R -= P (Qᵀ X)``, local for sparse P."""
        self.M = links
        Qx = np.asarray(Q.T @ self.X) if sps.issparse(Q) else as_dense_2d(Q).T @ self.X
        r, k, v = _coo(P)
        for c in range(self.p):
            self._add_residual(c, r, -v * Qx[k, c])
        self.drive()

    def change_rhs(self, P, Q) -> None:
        """``B += P Qᵀ`` (dense or sparse factors)."""
        r, k, v = _coo(P)
        Qd = as_dense_2d(Q)
        for c in range(self.p):
            vals = v * Qd[c, k]
            np.add.at(self.B[:, c], r, vals)
            self._add_residual(c, r, vals)
        self.drive()

    def _add_residual(self, c: int, rows: np.ndarray, vals: np.ndarray) -> None:
        R = self.R[:, c]
        touched = self._distinct(rows)
        before = np.abs(R[touched]).sum()
        np.add.at(R, rows, vals)
        self.S[c] += np.abs(R[touched]).sum() - before
        cand = self.cand[c]
        if cand is None:  # a drive stopped after a dense round (an exception in it)
            cand = np.flatnonzero(np.abs(R) > self.theta[c])
        self.cand[c] = self._distinct(np.concatenate([cand, touched]))

    # ------------------------------------------------------------------ iteration
    def drive(self) -> None:
        """Push until every column's residual certifies the tolerance (all columns at once
        when there are several: :mod:`.blockpush`)."""
        if self.p > 1 and self.block:
            blockpush.drive(self)
            return
        for c in range(self.p):
            guard = 0
            while self.residual_bound()[c] > self.target:
                guard += 1
                if guard > 10_000:
                    raise NumericalError("push did not converge", hint="is s < 1?")
                if self.n * abs(self.g[c]) > self.target / 4:
                    self._flush_uniform(c)
                    continue
                R = self.R[:, c]
                cand = self.cand[c]
                if cand is None:
                    self._dense_round(c)
                    continue
                F = cand[np.abs(R[cand]) > self.theta[c]] if cand.size else cand
                if F.size > self.n // 32:
                    self._dense_round(c)
                    continue
                if F.size == 0:
                    self.theta[c] /= 8
                    self.S[c] = np.abs(R).sum()  # exact again (drift)
                    self.cand[c] = np.flatnonzero(np.abs(R) > self.theta[c])
                    self.stats["rescans"] += 1
                    continue
                self._push(c, F)
            self.cand[c] = np.zeros(0, np.int64)
            self.theta[c] = min(2 * self.theta[c], self.target / 64)

    def _dense_round(self, c: int) -> None:
        """A push from every node at once (one pass over the links, :meth:`_sweep`), for
        wide frontiers."""
        if self._spare is None:
            self._spare = np.empty(self.n)
        v = np.add(self.R[:, c], self.g[c], out=self._spare)
        self.g[c] = 0.0
        self.X[:, c] += v
        self.S[c], above = self._sweep(v, self.theta[c], self.R[:, c])
        self.cand[c] = (None if above > self.n // 32 else
                        np.flatnonzero(np.abs(self.R[:, c]) > self.theta[c]))
        self.stats["sweeps"] += 1
        self.stats["pushes"] += self.n
        self.stats["edges"] += self.M.nnz

    def _push(self, c: int, F: np.ndarray) -> None:
        R = self.R[:, c]
        v = R[F].copy()
        rows, vals = self.M.gather(F, self.s * v)
        dang = (self.M.length[F] == 0) & self.M.uniform_dangling
        touched = self._distinct(np.concatenate([F, rows]))
        before = np.abs(R[touched]).sum()
        self.X[F, c] += v
        R[F] = 0.0
        np.add.at(R, rows, vals)
        if dang.any():
            self.g[c] += self.s * v[dang].sum() / self.n
        self.S[c] += np.abs(R[touched]).sum() - before
        self.cand[c] = self._distinct(rows)
        self.stats["pushes"] += F.size
        self.stats["edges"] += rows.size
        self.stats["rounds"] += 1

    def _distinct(self, a: np.ndarray) -> np.ndarray:
        """The distinct node ids of ``a`` (in no particular order), in O(len(a)) through a
        scratch array of n positions: each id keeps the position of its last occurrence."""
        if a.size < 64:
            return np.unique(a)
        if self._pos is None:
            self._pos = np.empty(self.n, np.int64)
        idx = np.arange(a.size)
        self._pos[a] = idx
        return a[self._pos[a] == idx]

    def _sweep(self, v: np.ndarray, theta: float, out: np.ndarray) -> tuple[float, int]:
        """``out = s·(M v)`` in one pass over the links on the threads :attr:`_threads`
        gives (:mod:`.sweep_kernel`): ``(‖out‖₁, entries of out above theta)``."""
        return self.M.sweep(v, self.s, theta, out, self._threads())

    def _flush_uniform(self, c: int) -> None:
        self.R[:, c] += self.g[c]
        self.g[c] = 0.0
        self.S[c] = np.abs(self.R[:, c]).sum()
        self.cand[c] = np.flatnonzero(np.abs(self.R[:, c]) > self.theta[c])

    def _sweep_all(self, c: int | None = None) -> None:
        """Jacobi sweeps over the whole graph (a push from every node at once) until the
        target is met, then the residual is recomputed exactly from B, M and X."""
        if c is None and self.p > 1 and self.block:
            self._sweep_block()
            return
        cols = range(self.p) if c is None else [c]
        for c in cols:
            r = self.R[:, c] + self.g[c]
            self.g[c] = 0.0
            x = self.X[:, c]
            l1 = np.abs(r).sum()
            spare = np.empty(self.n)  # a sweep holds two vectors of n (r and spare)
            for _ in range(10_000):
                if l1 <= SWEEP_STOP * self.target:
                    break
                x += r
                l1, _ = self._sweep(r, np.inf, spare)
                r, spare = spare, r
                self.stats["sweeps"] += 1
                self.stats["edges"] += self.M.nnz
            del r, spare
            y = self.M.matvec(x)  # the exact residual B - x + s·M x, one temporary
            y *= self.s
            y += self.B[:, c]
            y -= x
            self.R[:, c] = y
            del y
            self.S[c] = np.abs(self.R[:, c]).sum()
            self.cand[c] = np.flatnonzero(np.abs(self.R[:, c]) > self.theta[c])

    def _sweep_block(self) -> None:
        """:meth:`_sweep_all` of every column at once (one sparse product per sweep)."""
        r = self.R + self.g
        self.g[:] = 0.0
        for _ in range(10_000):
            act = np.flatnonzero(np.abs(r).sum(axis=0) > SWEEP_STOP * self.target)
            if not act.size:
                break
            self.X[:, act] += r[:, act]
            r[:, act] = self.s * self.M.matvec(r[:, act])
            self.stats["sweeps"] += act.size
            self.stats["edges"] += self.M.nnz * act.size
        self.R[:] = self.B - self.X + self.s * self.M.matvec(self.X)
        self.S = np.abs(self.R).sum(axis=0)
        self.cand_all = np.flatnonzero((np.abs(self.R) > self.theta).any(axis=1))

    def refresh(self) -> None:
        """Recompute the residual exactly and drive it below the target again."""
        for c in range(self.p):
            self.g[c] = 0.0
            self.R[:, c] = self.B[:, c] - self.X[:, c] + self.s * self.M.matvec(self.X[:, c])
            self.S[c] = np.abs(self.R[:, c]).sum()
            self.cand[c] = np.flatnonzero(np.abs(self.R[:, c]) > self.theta[c])
        self.drive()

    def memory_bytes(self) -> int:
        links = 0 if self.M.uniform_dangling else self.M.memory_bytes()  # a CSC copy
        spare = 0 if self._spare is None else self._spare.nbytes
        return int(self.X.nbytes + self.R.nbytes + self.B.nbytes + spare + links)
