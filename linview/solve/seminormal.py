"""Least squares kept by updates of a Cholesky factor and corrected seminormal equations
(issue 25): the ``cholesky`` solve view.

``X = (Fᵀ F) \\ (Fᵀ Y)`` is kept through the lower triangular L with ``L Lᵀ = Fᵀ F``
(``Lᵀ`` is the R of ``F = QR``, computed once by Householder QR at load, never from the
Gram matrix), not through ``inv(Fᵀ F)``, and without Q:

* ``F += u vᵀ`` changes ``FᵀF`` by ``v wᵀ + w vᵀ + c v vᵀ`` (``w = Fᵀu``, ``c = uᵀu``),
  which is ``p pᵀ - q qᵀ`` with ``p = (w + c v)/√c`` and ``q = w/√c``: one rank-1 update
  and one downdate of L (Givens and hyperbolic rotations, :func:`_update_downdate`, one
  pass over L in O(n²)); a row change reads only that row of F for ``w``;
* the solution is refined by the *corrected seminormal equations* (Björck): from the
  previous solution, ``r = Y - F X``, ``X += L⁻ᵀ L⁻¹ (Fᵀ r)``, repeated while the
  corrections shrink (usually once or twice; two products with F and two triangular
  solves each, O(mn)).  With L backward stable this reaches the accuracy of a QR solve
  (``cond(F)·eps``, as ``numpy.linalg.lstsq``) as long as ``cond(F)²·eps < 1``; each step
  shrinks the error by about ``cond(F)²·eps``.

A downdate that fails (the updated Gram matrix is not positive definite to working
precision) or corrections that stop shrinking recompute L from F by QR.  A factor singular
to working precision (smallest diagonal entry below ``eps·n`` times the largest, where
Octave too calls the normal equations singular) is refused with a hint to add a ridge term.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.linalg

from linview.errors import InputError, NumericalError

_EPS = float(np.finfo(float).eps)
#: at most this many refinement steps per change (each: two products with F, two solves)
MAX_STEPS = 4


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _update_downdate(L, p, q, b, solve):  # pragma: no cover - compiled by numba
    """``L Lᵀ + p pᵀ - q qᵀ`` in place (L lower, Fortran order: column k is contiguous);
    p and q are overwritten.  Column by column the update by p, then the downdate by q,
    fused in one loop over the column (the same result as two passes over L, in one).
    With ``solve``, b becomes ``L⁻¹ b`` for the new L in the same pass (forward
    substitution by columns).  False when the downdate finds a non-positive pivot (L is
    then partly changed)."""
    n = L.shape[0]
    for k in range(n):
        lkk = L[k, k]
        r1 = math.sqrt(lkk * lkk + p[k] * p[k])
        c1 = r1 / lkk
        s1 = p[k] / lkk
        t = r1 * r1 - q[k] * q[k]
        if not t > 0.0:
            return False
        r2 = math.sqrt(t)
        c2 = r2 / r1
        s2 = q[k] / r1
        L[k, k] = r2
        i1, i2 = 1.0 / c1, 1.0 / c2
        col, pp, qq = L[k + 1:, k], p[k + 1:], q[k + 1:]  # 1-D views: the loop vectorizes
        if solve:
            zk = b[k] / r2
            b[k] = zk
            bb = b[k + 1:]
            for i in range(col.shape[0]):
                lik = (col[i] + s1 * pp[i]) * i1
                pp[i] = c1 * pp[i] - s1 * lik
                lik2 = (lik - s2 * qq[i]) * i2
                qq[i] = c2 * qq[i] - s2 * lik2
                col[i] = lik2
                bb[i] -= zk * lik2
            continue
        for i in range(col.shape[0]):
            lik = (col[i] + s1 * pp[i]) * i1  # the update's rotation
            pp[i] = c1 * pp[i] - s1 * lik
            lik2 = (lik - s2 * qq[i]) * i2  # the downdate's hyperbolic rotation
            qq[i] = c2 * qq[i] - s2 * lik2
            col[i] = lik2
    return True


def add_low_rank(A: np.ndarray, U, V) -> np.ndarray:
    """``A += U Vᵀ`` in place: only the rows U touches when they are few (a row change),
    else one BLAS rank-1 update per column; never an m×n temporary."""
    U, V = _dense_2d(U), _dense_2d(V)
    rows = np.flatnonzero(np.any(U != 0, axis=1))
    if rows.size < 0.25 * A.shape[0]:
        A[rows] += U[rows] @ V.T
        return A
    for k in range(U.shape[1]):
        A = scipy.linalg.blas.dger(1.0, U[:, k], V[:, k], a=A, overwrite_a=True)
    return A


def _dense_2d(x) -> np.ndarray:
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=float)
    return x.reshape(-1, 1) if x.ndim < 2 else x


class CholeskySolver:
    """``X = (Fᵀ F) \\ (Fᵀ Y)`` kept by Cholesky updates and corrected seminormal equations
    (see the module docstring).  Backward stable like ``lstsq``: a near-singular F (two
    columns ε apart) gives the least-squares fit of a QR solve, where the inverse path
    loses ``cond(F)²·eps``.  The bound is ``‖Fᵀ(Y - F X)‖₂ / σ_min(R)²``."""

    method = "cholesky"

    def __init__(self, F, Y, tol: float):
        self.F = np.array(_dense_2d(F), dtype=float, order="F")
        self.Y = np.array(_dense_2d(Y), dtype=float, order="F")
        m, n = self.F.shape
        if m < n:
            raise InputError(f"cholesky mode needs at least as many rows as columns in F "
                             f"(got {m}x{n})", hint="use '%#linview solve krylov'")
        self.tol = float(tol)
        self.stats = {"factor_updates": 0, "refinement_steps": 0, "refactorizations": 0}
        self.X = np.zeros((n, self.Y.shape[1]), order="F")
        self._rate = 1.0  # the last observed shrink factor of the corrections
        self._factor()
        self._refine(fresh=True)

    # ------------------------------------------------------------------ the factor
    def _factor(self) -> None:
        """L from Householder QR of F (stable: never from the Gram matrix)."""
        if not np.all(np.isfinite(self.F)):
            raise NumericalError("the regression's matrix F has non-finite entries")
        R = scipy.linalg.qr(self.F, mode="r", check_finite=False)[0]
        n = self.F.shape[1]
        self.L = np.asfortranarray(R[:n, :n].T)
        self._check()

    def _check(self) -> None:
        d = np.abs(np.diag(self.L))
        if d.size and (d.min() <= d.max() * _EPS * d.size or not np.all(np.isfinite(d))):
            raise NumericalError("the regression's Gram matrix F'*F is singular to working "
                                 "precision (a column of F is a combination of the others)",
                                 hint="add a ridge term: (F'*F + lambda*eye(n)) \\ (F'*Y) "
                                 "with a small lambda > 0, or drop the dependent columns")

    def _cho(self, b: np.ndarray) -> np.ndarray:
        return scipy.linalg.cho_solve((self.L, True), b, check_finite=False)

    # ------------------------------------------------------------------ solving
    def _refine(self, fresh: bool = False, again: bool = True, first=None) -> None:
        """Corrected seminormal steps from the current X (from zero when ``fresh``;
        ``first``: the first step's correction, computed with the factor's update)."""
        if fresh:
            self.X[:] = self._cho(self.F.T @ self.Y)
        last = None
        for _ in range(MAX_STEPS):
            if first is not None:
                dx, first = first, None
            else:
                dx = self._cho(self.F.T @ (self.Y - self.F @ self.X))
            self.X += dx
            self.stats["refinement_steps"] += 1
            size, scale = float(np.abs(dx).max()), float(np.abs(self.X).max()) or 1.0
            if last is not None:
                self._rate = size / last if last > 0 else self._rate
                if self._rate > 0.5:  # no progress: at rounding level, or the factor drifted
                    if size <= 1e-8 * scale:
                        return
                    break
            if size == 0 or size * min(self._rate, 1.0) <= 8 * _EPS * scale:
                return  # the next correction would be below rounding
            last = size
        if again and self._rate > 1e-2:  # corrections shrink slowly: the factor drifted
            self.stats["refactorizations"] += 1
            self._factor()
            self._rate = 1.0
            self._refine(again=False)

    # ------------------------------------------------------------------ changes
    def change_matrix(self, U, V) -> None:
        """``F += U Vᵀ``: per column, one update and one downdate of L, then the rows of
        F (only the rows u touches)."""
        U, V = _dense_2d(U), _dense_2d(V)
        first, b = None, np.zeros(0)
        for k in range(U.shape[1]):
            u, v = U[:, k], np.ascontiguousarray(V[:, k], dtype=float)
            rows = np.flatnonzero(u)
            if rows.size == 0 or not np.any(v):
                continue
            ur = u[rows]
            w = self.F[rows].T @ ur if rows.size < 0.25 * u.size else self.F.T @ u
            c = float(ur @ ur)
            p, q = (w + c * v) / math.sqrt(c), w / math.sqrt(c)
            if rows.size < 0.25 * u.size:
                self.F[rows] += np.outer(ur, v)
            else:  # F += u vᵀ in place (no m×n temporary)
                self.F = scipy.linalg.blas.dger(1.0, u, v, a=self.F, overwrite_a=True)
            self.stats["factor_updates"] += 1
            solve = k == U.shape[1] - 1 and self.Y.shape[1] == 1  # the first step, fused
            if solve:  # the residual's normal equations with the new F: L⁻¹ in the pass
                b = (self.F.T @ (self.Y - self.F @ self.X))[:, 0].copy()
            if not _update_downdate(self.L, p, q, b, solve):  # not positive definite
                self.stats["refactorizations"] += 1
                self._factor()  # from F again
                solve = False
            if solve:
                first = scipy.linalg.solve_triangular(self.L, b, lower=True, trans="T",
                                                      check_finite=False)[:, None]
        self._check()
        self._refine(first=first)

    def change_rhs(self, U, V) -> None:
        """``Y += U Vᵀ``."""
        self.Y += _dense_2d(U) @ _dense_2d(V).T
        self._refine()

    # ------------------------------------------------------------------ checking
    def residual_bound(self) -> np.ndarray:
        return np.linalg.norm(self.F.T @ (self.Y - self.F @ self.X), axis=0)

    def error_bound(self) -> float:
        s = scipy.linalg.svdvals(self.L)
        smin = float(s.min()) if s.size else 0.0
        return float("inf") if smin == 0 else float(self.residual_bound().max() / smin ** 2)

    def refresh(self) -> None:
        self._factor()
        self._refine(fresh=True)

    def memory_bytes(self) -> int:
        return int(self.F.nbytes + self.Y.nbytes + self.L.nbytes + self.X.nbytes)
