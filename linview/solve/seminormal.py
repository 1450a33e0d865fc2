"""Least squares kept by updates of a Cholesky factor and corrected seminormal equations
(issue 25): the ``cholesky`` solve view.

``X = (Fᵀ F) \\ (Fᵀ Y)`` is kept through the lower triangular L with ``L Lᵀ = Fᵀ F``
(``Lᵀ`` is the R of ``F = QR``, computed once by Householder QR at load, never from the
Gram matrix), not through ``inv(Fᵀ F)``, and without Q:

* ``F += u vᵀ`` changes ``FᵀF`` by ``v wᵀ + w vᵀ + c v vᵀ`` (``w = Fᵀu``, ``c = uᵀu``),
  which is ``p pᵀ - q qᵀ`` with ``p = (w + c v)/√c`` and ``q = w/√c``: one rank-1 update
  and one downdate of L (Givens and hyperbolic rotations,
  :func:`.seminormal_kernels.update_downdate`, one pass over L in O(n²)); a row change
  reads only that row of F for ``w``;
* the solution is refined by the *corrected seminormal equations* (Björck): from the
  previous solution, ``r = Y - F X``, ``X += L⁻ᵀ L⁻¹ (Fᵀ r)``, repeated while the
  corrections shrink (usually once or twice; two products with F and two triangular
  solves each, O(mn)).  With L backward stable this reaches the accuracy of a QR solve
  (``cond(F)·eps``, as ``numpy.linalg.lstsq``) as long as ``cond(F)²·eps < 1``; each step
  shrinks the error by about ``cond(F)²·eps``.

A downdate that fails (the updated Gram matrix is not positive definite to working
precision) or cancels more than half the digits of a pivot (:data:`KEPT_MIN`), or
corrections that stop shrinking, recompute L from F by QR.

The passes over F and L run on several threads (:mod:`.seminormal_kernels`): per row
change one pass over F (the residual and ``Fᵀ r`` of the first step, fused), one over L
(update, downdate and the forward solve) and one more over L (the backward solve); a
further step (another pass over F and two over L) only when the correction of the first is
predicted to matter (:meth:`CholeskySolver._enough`).  A factor singular
to working precision (smallest diagonal entry below ``eps·n`` times the largest, where
Octave too calls the normal equations singular) is refused with a hint to add a ridge term.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numba
import numpy as np
import scipy.linalg

from linview.errors import InputError, NumericalError, StateError
from linview.solve.seminormal_kernels import (
    residual_gradient,
    solve_lower_t,
    threads_for,
    update_downdate,
)

_EPS = float(np.finfo(float).eps)
#: at most this many refinement steps per change (each: one pass over F, two solves)
MAX_STEPS = 4
#: a second (or later) correction of at most this relative size is taken as the floor of
#: the refinement (rounding in the residual); a step is not taken when the correction it
#: would make is predicted within 8 times that floor, and never past this size (a first
#: correction after a change is often just over 8·eps of X times the contraction, and a
#: second step, a whole pass over F and L, then changes X by noise)
NOISE_MAX = 64 * _EPS
#: a downdate that keeps less than this share of some pivot (``1 - (q_k/r_k)²``) has lost
#: half the digits of the factor to cancellation: L is computed again from F (a column
#: driven near another; the refinement's contraction alone did not always show it)
KEPT_MIN = math.sqrt(_EPS)


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


def _patch(target: np.ndarray, rows, values, part: str) -> None:
    """``target[rows] = values`` for a saved state's rows of F or Y, checked."""
    if rows is None and values is None:
        return
    m, c = target.shape
    ok = isinstance(rows, np.ndarray) and isinstance(values, np.ndarray) and \
        rows.ndim == 1 and values.shape == (rows.size, c) and np.all(np.isfinite(values))
    idx = rows.astype(np.int64) if ok else None
    if not ok or not np.array_equal(idx, rows) or np.any(idx < 0) or np.any(idx >= m):
        raise StateError(f"the saved rows of {part} of least squares do not fit its data "
                         f"({m}×{c})")
    target[idx] = values


class CholeskySolver:
    """``X = (Fᵀ F) \\ (Fᵀ Y)`` kept by Cholesky updates and corrected seminormal equations
    (see the module docstring).  Backward stable like ``lstsq``: a near-singular F (two
    columns ε apart) gives the least-squares fit of a QR solve, where the inverse path
    loses ``cond(F)²·eps``.  The bound is ``‖Fᵀ(Y - F X)‖₂ / σ_min(R)²``."""

    method = "cholesky"

    def __init__(self, F, Y, tol: float, threads: Callable[[], int] | None = None,
                 weights=None, saved: dict | None = None):
        # F in C order: a row change is contiguous, and so is the residual's pass by rows
        self.F = np.array(_dense_2d(F), dtype=float, order="C")
        self.Y = np.array(_dense_2d(Y), dtype=float, order="F")
        m, n = self.F.shape
        if m < n:
            raise InputError(f"cholesky mode needs at least as many rows as columns in F "
                             f"(got {m}x{n})", hint="use '%#linview solve krylov'")
        self.tol = float(tol)
        #: the weights d of ``(Fᵀ D F) \\ (Fᵀ D Y)``, ``D = diag(d)`` (empty: none); L is
        #: then the factor of ``√d∘F``
        self.d = np.zeros(0) if weights is None else np.array(
            np.asarray(weights, dtype=float).reshape(-1), dtype=float)
        if self.d.size and (self.d.size != m or not np.all(self.d >= 0)):
            raise NumericalError("the weights of a weighted least-squares problem must be "
                                 f"{m} non-negative numbers for the stable form",
                                 hint="W = diag(w) with w >= 0")
        self.stats = {"factor_updates": 0, "refinement_steps": 0, "refactorizations": 0}
        self._threads = threads or (lambda: os.cpu_count() or 1)
        #: the relative size of a correction that made no progress (at rounding level): a
        #: step whose predicted correction is below it would change X by noise only
        self._noise = 0.0
        self.X = np.zeros((n, self.Y.shape[1]), order="F")
        self._rate = 1.0  # the last observed shrink factor of the corrections
        if saved is None:
            self._factor()
            self._refine(fresh=True)
        else:  # a saved state (:meth:`state`): as it was, neither factored nor refined
            self._resume(saved)
        # the update's kernel compiled (or read from numba's cache) now, not at the first
        # update: a 2×2 factor (1×1 would be typed C-ordered), the types of the real call
        update_downdate(np.eye(2, order="F"), np.zeros(2), np.zeros(2), np.zeros(2), True, 1)

    # ------------------------------------------------------------------ saved state
    #: the scalars of :meth:`state`, in order
    SCALARS = ("noise", "rate", "factor_updates", "refinement_steps", "refactorizations")

    def state(self) -> dict[str, np.ndarray]:
        """Everything the next change reads besides F, Y and the weights: the factor L,
        the solution X and the refinement's scalars (the floor and the contraction seen,
        then the counts of :attr:`stats`).  A solver built with ``saved=`` this state, F, Y
        and weights equal to the bit continues as this one would: same bits."""
        return {"L": self.L, "X": self.X, "scalars": np.array(
            [self._noise, self._rate, *(self.stats[k] for k in self.SCALARS[2:])],
            dtype=float)}

    def _resume(self, saved: dict) -> None:
        """The state of :meth:`state`, checked: shapes, finite values, a lower triangular
        L with a non-zero diagonal (a mismatched or damaged state is a StateError)."""
        n, p = self.F.shape[1], self.Y.shape[1]
        want = {"L": (n, n), "X": (n, p), "scalars": (len(self.SCALARS),)}
        for key, shape in want.items():
            a = saved.get(key)
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != np.float64 \
                    or not np.all(np.isfinite(a)):
                got = getattr(a, "shape", None)
                raise StateError(f"the saved factor state of least squares does not fit its "
                                 f"data ({key}: expected {shape}, found {got}, finite)")
        for part, target in (("F", self.F), ("Y", self.Y)):
            _patch(target, saved.get(f"{part}i"), saved.get(part), part)
        if self.d.size or "d" in saved:  # weights: as many as F's rows, non-negative
            d = saved.get("d")
            if not isinstance(d, np.ndarray) or d.shape != (self.F.shape[0],) or \
                    not np.all(d >= 0) or not np.all(np.isfinite(d)):
                raise StateError("the saved weights of least squares do not fit its data")
            self.d = np.array(d, dtype=float)
        L = saved["L"]
        if any(np.any(L[:j, j]) for j in range(1, n)) or not np.all(np.diag(L) != 0):
            raise StateError("the saved factor of least squares is not a triangular factor "
                             "(lower triangular with a non-zero diagonal)")
        self.L = np.array(L, order="F")
        self.X[:] = saved["X"]
        s = saved["scalars"]
        self._noise, self._rate = float(s[0]), float(s[1])
        self.stats.update({k: int(v) for k, v in zip(self.SCALARS[2:], s[2:], strict=True)})

    # ------------------------------------------------------------------ the factor
    def _factor(self) -> None:
        """L from Householder QR of F (stable: never from the Gram matrix)."""
        if not np.all(np.isfinite(self.F)):
            raise NumericalError("the regression's matrix F has non-finite entries")
        F = self.F if not self.d.size else np.sqrt(self.d)[:, None] * self.F
        R = scipy.linalg.qr(F, mode="r", check_finite=False)[0]
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
        """``(L Lᵀ)⁻¹ b``: the forward solve by LAPACK, the backward one by blocks on
        several threads (:func:`.seminormal_kernels.solve_lower_t`)."""
        z = scipy.linalg.solve_triangular(self.L, b, lower=True, check_finite=False)
        z = np.asfortranarray(z.reshape(b.shape))
        return self._back(z)

    def _back(self, z: np.ndarray) -> np.ndarray:
        """``L⁻ᵀ z`` in place, column by column."""
        self._set_threads()
        for c in range(z.shape[1]):
            col = np.ascontiguousarray(z[:, c])
            z[:, c] = solve_lower_t(self.L, col)
        return z

    def _set_threads(self) -> int:
        t = threads_for(self._threads())
        numba.set_num_threads(t)
        return t

    def _gradient(self) -> np.ndarray:
        """``Fᵀ (Y - F X)`` in one pass over F (:func:`.seminormal_kernels.residual_gradient`)."""
        self._set_threads()  # the row blocks are as many as numba's pool, however many
        # threads run them, so that the sums (and a resumed run's bits) do not depend on load
        return residual_gradient(self.F, self.Y, np.ascontiguousarray(self.X.T),
                                 numba.config.NUMBA_NUM_THREADS, self.d)

    # ------------------------------------------------------------------ solving
    def _refine(self, fresh: bool = False, again: bool = True, first=None) -> None:
        """Corrected seminormal steps from the current X (from zero when ``fresh``;
        ``first``: the first step's correction, computed with the factor's update)."""
        if fresh:
            Y = self.Y if not self.d.size else self.d[:, None] * self.Y
            self.X[:] = self._cho(self.F.T @ Y)  # (once, at load: BLAS)
        last = None
        for _ in range(MAX_STEPS):
            if first is not None:
                dx, first = first, None
            else:
                dx = self._cho(self._gradient())
            self.X += dx
            self.stats["refinement_steps"] += 1
            size, scale = float(np.abs(dx).max()), float(np.abs(self.X).max()) or 1.0
            if last is not None:
                self._rate = size / last if last > 0 else self._rate
                if size <= NOISE_MAX * scale:  # a correction at rounding level: the floor
                    self._noise = size / scale
                if self._rate > 0.5:  # no progress: at rounding level, or the factor drifted
                    if size <= 1e-8 * scale:
                        return
                    break
            if size == 0 or size * min(self._rate, 1.0) <= self._enough() * scale:
                return  # the next correction would be below rounding, or near the floor
            last = size
        if again and self._rate > 1e-2:  # corrections shrink slowly: the factor drifted
            self.stats["refactorizations"] += 1
            self._factor()
            self._rate = 1.0
            self._refine(again=False)

    def _enough(self) -> float:
        """The relative correction below which another step is not worth its pass: 8·eps,
        or up to 8 times the floor seen (:data:`NOISE_MAX` at most).  The contraction
        measured is itself an upper bound (its second correction is mostly rounding), so
        the predicted correction overstates what a step would change."""
        return max(8 * _EPS, min(8 * self._noise, NOISE_MAX))

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
            du = ur if not self.d.size else self.d[rows] * ur  # D u on its rows
            w = self.F[rows].T @ du if rows.size < 0.25 * u.size else \
                self.F.T @ (u if not self.d.size else self.d * u)
            c = float(ur @ du)
            sc = math.sqrt(c)
            p, q = ((w + c * v) / sc, w / sc) if c > 0 else (None, None)  # zero weight
            if rows.size < 0.25 * u.size:
                self.F[rows] += np.outer(ur, v)
            else:  # F += u vᵀ in place (no m×n temporary; Fᵀ is Fortran-ordered)
                self.F = scipy.linalg.blas.dger(1.0, v, u, a=self.F.T, overwrite_a=True).T
            if p is None:  # rows of zero weight: FᵀDF does not change
                continue
            self.stats["factor_updates"] += 1
            solve = k == U.shape[1] - 1 and self.Y.shape[1] == 1  # the first step, fused
            if solve:  # the residual's normal equations with the new F: L⁻¹ in the pass
                b = self._gradient()[:, 0].copy()
            parts = self._set_threads()
            kept = update_downdate(self.L, p, q, b, solve, parts)
            if kept < KEPT_MIN:  # not positive definite, or half the factor's digits lost
                self.stats["refactorizations"] += 1
                self._factor()  # from F again
                solve = False
            if solve:
                first = solve_lower_t(self.L, b)[:, None]
        self._check()
        self._refine(first=first)

    def change_weights(self, delta) -> None:
        """``d += delta`` (a change of the weights): ``Fᵀ D F`` changes by
        ``Σ δ_i F_iᵀ F_i`` over the rows that changed, one update (δ > 0) or downdate
        (δ < 0) of L per row."""
        delta = np.asarray(delta, dtype=float).reshape(-1)
        new = self.d + delta
        if not np.all(new >= 0):
            raise NumericalError("a weight of the weighted least-squares problem became "
                                 "negative", hint="weights must stay non-negative")
        zero = np.zeros(self.F.shape[1])
        for i in np.flatnonzero(delta):
            row = self.F[i] * math.sqrt(abs(delta[i]))
            p, q = (row.copy(), zero.copy()) if delta[i] > 0 else (zero.copy(), row.copy())
            self.stats["factor_updates"] += 1
            if update_downdate(self.L, p, q, np.zeros(0), False, self._set_threads()) \
                    < KEPT_MIN:
                self.d = new
                self.stats["refactorizations"] += 1
                self._factor()
                break
        self.d = new
        self._check()
        self._refine()

    def change_rhs(self, U, V) -> None:
        """``Y += U Vᵀ``."""
        self.Y += _dense_2d(U) @ _dense_2d(V).T
        self._refine()

    # ------------------------------------------------------------------ checking
    def residual_bound(self) -> np.ndarray:
        return np.linalg.norm(self._gradient(), axis=0)

    def error_bound(self) -> float:
        s = scipy.linalg.svdvals(self.L)
        smin = float(s.min()) if s.size else 0.0
        return float("inf") if smin == 0 else float(self.residual_bound().max() / smin ** 2)

    def refresh(self) -> None:
        self._factor()
        self._refine(fresh=True)

    def memory_bytes(self) -> int:
        return int(self.F.nbytes + self.Y.nbytes + self.L.nbytes + self.X.nbytes)
