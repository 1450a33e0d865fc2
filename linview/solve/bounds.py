"""Error bounds of the Krylov solver: what the residual ``R = B - A·X`` certifies.

The error of a column is ``e = A⁻¹ r``, so a bound needs a bound on ``A⁻¹``.  Tried in
this order (docs/solve_views.md, "The Krylov bound"):

* **column diagonal dominance** (any n, O(nnz)): with
  ``α_col = min_j (|a_jj| - Σ_{i≠j} |a_ij|) > 0``, ``‖A⁻¹‖₁ ≤ 1/α_col`` (Varah's bound on
  the columns), so ``‖e‖₂ ≤ ‖e‖₁ ≤ ‖r‖₁ / α_col``;
* **row and column dominance together**: ``σ_min(A) ≥ √(α_row·α_col)``;
* **an inertia count** (sparse, any n): :func:`inertia_bound`, a sparse LDLᵀ of
  ``AᵀA - τ²I`` at τ half an ARPACK estimate, with a rounding allowance;
* **the smallest singular value** by a dense SVD, for a dense A or a sparse one with
  n ≤ :data:`DENSE_SVD_MAX`.

σ-based bounds are lowered by ``‖P‖_F ‖Q‖_F`` after each change ``A += P Qᵀ`` (Weyl) and
recomputed when halved; dominance margins are recomputed (O(nnz)).  When none applies,
``error_bound`` is ``inf`` (``certified`` False) and the estimate only steers GMRES.
The estimate of σ_min (:meth:`Conditioning._arpack`) is Lanczos on ``A⁻ᵀA⁻¹`` through a
sparse LU of A; it lies at or above σ_min, which is why it is halved before the inertia
count proves it.
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
INERTIA = "inertia of AᵀA - τ²I (sparse LDLᵀ)"
#: the rounding allowance of :func:`inertia_bound` is this many times the backward error
SAFETY = 4.0


def inertia_bound(A, estimate: float) -> float:
    """A certified lower bound on σ_min of sparse A, or 0.  For τ = estimate/2 (then /4),
    the symmetric ``K = AᵀA - τ²I`` is factored ``P K Pᵀ = L D Lᵀ`` (SuperLU with diagonal
    pivots and the same row and column order, so the pivots are D); by Sylvester's law
    K's inertia is D's, so D > 0 proves ``λ_min(AᵀA) ≥ τ²`` up to rounding.  The rounding
    allowance is :data:`SAFETY` times the standard backward-error bounds, of forming AᵀA
    (``γ_m ‖A‖_F²``) and of the factorisation (``γ_k trace(|L| |D| |Lᵀ|)``, which bounds
    ``‖|L||D||Lᵀ|‖₂``; ``γ_k = k·eps/(1 - k·eps)``, k the longest column of L):
    the result is ``√(τ² - allowance)``."""
    n = A.shape[0]
    if not estimate > 0 or not np.isfinite(estimate) or n == 0:
        return 0.0
    A = sps.csc_matrix(A)
    G = (A.T @ A).tocsc()
    fro2 = float(np.sum(A.data ** 2))
    eps = np.finfo(float).eps
    for tau in (estimate / 2, estimate / 4):
        K = (G - tau * tau * sps.identity(n, format="csc")).tocsc()
        try:
            lu = spla.splu(K, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                           options={"SymmetricMode": True})
        except RuntimeError:  # exactly singular: τ is an eigenvalue's root, or below
            continue
        if not np.array_equal(lu.perm_r, lu.perm_c):
            return 0.0  # a pivot off the diagonal: D is not K's inertia
        d = lu.U.diagonal()
        if not np.all(d > 0):
            continue
        L = lu.L.tocsc()
        k = int(np.diff(L.indptr).max()) if L.nnz else 1
        gk, gm = k * eps / (1 - k * eps), A.shape[0] * eps / (1 - A.shape[0] * eps)
        trace = float(np.asarray(L.multiply(L).sum(axis=0)).ravel() @ np.abs(d))
        allowance = SAFETY * (gk * trace + gm * fro2 + eps * tau * tau)
        if tau * tau > allowance:
            return float(np.sqrt(tau * tau - allowance))
    return 0.0


def dominance(A) -> tuple[float, float]:
    """``(α_col, α_row)``: the smallest diagonal-dominance margin of A's columns and rows
    (``|a_jj|`` minus the other entries' absolute sum; negative when not dominant)."""
    absA = abs(A) if sps.issparse(A) else np.abs(A)
    diag = np.abs(A.diagonal())
    col = np.asarray(absA.sum(axis=0)).ravel()
    row = np.asarray(absA.sum(axis=1)).ravel()
    return float(np.min(2 * diag - col)), float(np.min(2 * diag - row))


class Conditioning:
    """The certified bound on ``‖A⁻¹ r‖₂`` of :class:`~linview.solve.krylov.KrylovSolver`
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
        elif self.sparse and self.sigma > 0:
            self.how = "row and column diagonal dominance"
        elif self.sparse and (tau := inertia_bound(A, self._arpack(A))) > 0:
            self.sigma, self.how = tau, INERTIA
        elif not self.sparse or n <= DENSE_SVD_MAX:
            dense = A.toarray() if self.sparse else A
            s = scipy.linalg.svdvals(dense)
            self.sigma = float(s.min()) if s.size else 0.0
            self.how = SVD
        self.certified = bool(self.how)
        if self.how == SVD and self.sigma <= 0:
            raise NumericalError("the solve's matrix is singular",
                                 hint="the system has no unique solution")
        self.estimate = self.sigma if self.sigma > 0 else (
            max(self.alpha_col, 0.0) or self._arpack(A))
        self.sigma0 = self.estimate

    @staticmethod
    def _arpack(A) -> float:
        """An estimate of σ_min from above (it sets τ of the inertia count and steers GMRES;
        it certifies nothing): the largest eigenvalue ``1/σ_min²`` of ``A⁻ᵀ A⁻¹`` by
        Lanczos (ARPACK ``eigsh``) on a sparse LU of A, whose Ritz value converges fast
        from below; ``svds(which="SM")`` without it does not converge on many sparse
        matrices of a few thousand rows.  ``svds`` is the fallback when the LU fails for
        want of memory or exactness."""
        n = A.shape[0]
        if n <= 2:
            s = scipy.linalg.svdvals(A.toarray() if sps.issparse(A) else A)
            return float(s.min()) if s.size else 0.0
        try:
            lu = spla.splu(sps.csc_matrix(A))
        except RuntimeError:  # exactly singular
            raise NumericalError("the solve's matrix is singular",
                                 hint="the system has no unique solution") from None
        except MemoryError:
            lu = None
        try:
            if lu is not None:
                op = spla.LinearOperator((n, n), dtype=float,
                                         matvec=lambda x: lu.solve(lu.solve(x), trans="T"))
                lam = float(spla.eigsh(op, k=1, which="LM", tol=1e-6,
                                       return_eigenvectors=False)[0])
                return 1.0 / np.sqrt(lam) if lam > 0 else 0.0
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
        if self.how in (SVD, INERTIA) and self.sigma <= 0:
            raise NumericalError("the solve's matrix became singular",
                                 hint="the system has no unique solution after this update")

    def describe(self) -> str:
        return self.how or "none certified (a sparse A over n = " \
            f"{DENSE_SVD_MAX} without diagonal dominance)"
