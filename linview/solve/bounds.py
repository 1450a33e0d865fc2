"""Error bounds of the Krylov solver: what the residual ``R = B - A·X`` certifies.

The error of a column is ``e = A⁻¹ r``, so a bound needs a bound on ``A⁻¹``.  Three are
used, whichever apply, and the tightest is taken:

* **column diagonal dominance** (any n, O(nnz)): with
  ``α_col = min_j (|a_jj| - Σ_{i≠j} |a_ij|) > 0``, ``‖A⁻¹‖₁ ≤ 1/α_col`` (Varah's bound on
  the columns), so ``‖e‖₂ ≤ ‖e‖₁ ≤ ‖r‖₁ / α_col``.  ``I - s·M`` with M column-(sub)stochastic
  and non-negative has ``α_col ≥ 1 - s``: PageRank's matrix, given as plain ``scipy.sparse``;
* **row and column dominance together** (any n): ``σ_min(A) ≥ √(α_row·α_col)`` since
  ``‖A⁻¹‖₂² ≤ ‖A⁻¹‖₁‖A⁻¹‖_∞``, so ``‖e‖₂ ≤ ‖r‖₂ / √(α_row·α_col)``;
* **the smallest singular value** by a dense SVD, for a dense A or a sparse one with
  n ≤ :data:`DENSE_SVD_MAX` (``‖e‖₂ ≤ ‖r‖₂ / σ``; lowered by ``‖P‖_F ‖Q‖_F`` after each
  change ``A += P Qᵀ`` (Weyl) and recomputed when it has fallen to half).

A sparse A larger than that without dominance has **no certified bound**: an ARPACK
estimate of σ_min (a Ritz value, which may lie above the true σ_min) only sets the
residual target, and ``error_bound`` is ``inf`` (``certified`` is False).  The dominance
margins are exact sums over A's entries, recomputed after every change (the sparse A is
rebuilt then anyway); they hold up to the rounding of those sums, which is far below
the factor-2 margin the solver keeps between its target and the tolerance.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sps
import scipy.sparse.linalg as spla

from linview.errors import NumericalError

#: a sparse A up to this size gets its σ_min by a dense SVD (n² memory) when no dominance
#: bound applies; beyond it there is no certified bound
DENSE_SVD_MAX = 3000
SVD = "smallest singular value (dense SVD)"


def dominance(A) -> tuple[float, float]:
    """``(α_col, α_row)``: the smallest diagonal-dominance margin of A's columns and rows
    (``|a_jj|`` minus the other entries' absolute sum; negative when not dominant)."""
    absA = abs(A) if sps.issparse(A) else np.abs(A)
    diag = np.abs(A.diagonal())
    col = np.asarray(absA.sum(axis=0)).ravel()
    row = np.asarray(absA.sum(axis=1)).ravel()
    return float(np.min(2 * diag - col)), float(np.min(2 * diag - row))


class Conditioning:
    """The certified bound on ``‖A⁻¹ r‖₂`` of :class:`~linview.solve.solvers.KrylovSolver`
    (see the module docstring); ``certified`` says whether there is one."""

    def __init__(self, A):
        self.stats = {"sigma_recomputed": 0}
        self.setup(A)

    def setup(self, A) -> None:
        n = A.shape[0]
        self.sparse = sps.issparse(A)
        self.alpha_col, self.alpha_row = dominance(A) if n else (1.0, 1.0)
        self.sigma = self.sigma0 = 0.0
        self.how = ""
        if self.alpha_col > 0 and self.alpha_row > 0:
            self.sigma = float(np.sqrt(self.alpha_col * self.alpha_row))
        if self.sparse and self.alpha_col > 0:
            self.how = "column diagonal dominance"
        elif not self.sparse or n <= DENSE_SVD_MAX:
            dense = A.toarray() if self.sparse else A
            s = scipy.linalg.svdvals(dense)
            self.sigma = float(s.min()) if s.size else 0.0
            self.how = SVD
        elif self.sigma > 0:
            self.how = "row and column diagonal dominance"
        self.certified = bool(self.how)
        if self.how == SVD and self.sigma <= 0:
            raise NumericalError("the solve's matrix is singular",
                                 hint="the system has no unique solution")
        self.estimate = self.sigma if self.sigma > 0 else (
            max(self.alpha_col, 0.0) or self._arpack(A))
        self.sigma0 = self.estimate

    @staticmethod
    def _arpack(A) -> float:
        """An ARPACK estimate of σ_min: sets the residual target only, certifies nothing."""
        try:
            v = spla.svds(A, k=1, which="SM", return_singular_vectors=False)
            return float(v[0])
        except Exception as e:  # noqa: BLE001 - ARPACK failures vary
            raise NumericalError(f"cannot estimate the conditioning of the solve: {e}",
                                 hint="give a dense A or a smaller system") from None

    def bound(self, R: np.ndarray) -> np.ndarray:
        """Certified bound on ``‖A⁻¹ R[:, c]‖₂`` per column (``inf`` when uncertified)."""
        R = R.reshape(R.shape[0], -1)
        out = np.full(R.shape[1], np.inf)
        if not self.certified:
            return out
        if self.alpha_col > 0 and self.sparse:
            out = np.minimum(out, np.abs(R).sum(axis=0) / self.alpha_col)
        if self.sigma > 0:
            out = np.minimum(out, np.linalg.norm(R, axis=0) / self.sigma)
        return out

    def steering(self, R: np.ndarray) -> np.ndarray:
        """What the solver drives below half the tolerance: the certified bound, or the
        estimate's ``‖r‖₂ / σ_est`` where there is none."""
        if self.certified:
            return self.bound(R)
        return np.linalg.norm(R.reshape(R.shape[0], -1), axis=0) / self.estimate

    def change(self, A, P, Q) -> None:
        """A is now ``A + P Qᵀ``: dominance margins recomputed (O(nnz), exact); a singular
        value or an estimate lowered by ``‖P‖_F ‖Q‖_F`` (Weyl), recomputed at half."""
        if self.sparse and "dominance" in self.how:
            self.setup(A)
            return
        norm = sps.linalg.norm if sps.issparse(P) else np.linalg.norm
        normq = sps.linalg.norm if sps.issparse(Q) else np.linalg.norm
        drop = float(norm(P)) * float(normq(Q))
        self.sigma -= drop
        self.estimate -= drop
        if self.estimate < self.sigma0 / 2:
            self.setup(A)
            self.stats["sigma_recomputed"] += 1
        if self.how == SVD and self.sigma <= 0:
            raise NumericalError("the solve's matrix became singular",
                                 hint="the system has no unique solution after this update")

    def describe(self) -> str:
        return self.how or "none certified (a sparse A over n = " \
            f"{DENSE_SVD_MAX} without diagonal dominance)"
