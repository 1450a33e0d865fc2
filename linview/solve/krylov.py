"""The ``krylov`` method of solve views (:mod:`linview.solve.solvers` describes the
methods): ``X = A \\ B`` for any nonsingular A, dense or ``scipy.sparse``, kept with its
residual and driven back below the tolerance by GMRES on the correction, warm-started from
the current X; the 2-norm error bound is :class:`~linview.solve.bounds.Conditioning`'s."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps
import scipy.sparse.linalg as spla

from linview.errors import InputError
from linview.solve.bounds import Conditioning
from linview.solve.solvers import as_dense_2d


class KrylovSolver:
    """``X = A \\ B`` for a dense or sparse A, by warm-started GMRES on the residual; the
    error bound is :class:`~linview.solve.bounds.Conditioning`'s (certified where it says
    so, ``inf`` where not)."""

    method = "krylov"

    def __init__(self, A, B, tol: float, x0=None):
        self.sparse = sps.issparse(A)
        self.A = sps.csr_matrix(A, dtype=float) if self.sparse else np.array(A, dtype=float)
        n = self.A.shape[0]
        if self.A.shape != (n, n):
            raise InputError(f"a solve needs a square matrix, not {self.A.shape}")
        self.B = as_dense_2d(B)
        self.n, self.p = self.B.shape
        self.tol = float(tol)
        self.X = np.zeros_like(self.B)
        self.cond = Conditioning(self.A)
        self.R = self.B.copy()
        self.stats = {"iterations": 0, "direct": 0}
        if x0 is not None:  # warm start (a restored state)
            self.X[:] = as_dense_2d(x0)
            self.R = self.B - np.asarray(self.A @ self.X)
        self.drive()

    @property
    def certified(self) -> bool:
        return self.cond.certified

    def _matvec(self, x):
        return self.A @ x

    def residual_bound(self) -> np.ndarray:
        return np.linalg.norm(self.R, axis=0)

    def error_bound(self) -> float:
        """Certified bound on ``max_c ‖X[:, c] - X*[:, c]‖₂``; ``inf`` when A's
        conditioning is not certified (:mod:`linview.solve.bounds`)."""
        return float(self.cond.bound(self.R).max()) if self.p else 0.0

    def change_matrix(self, P, Q) -> None:
        """``A += P Qᵀ``: ``R -= P (Qᵀ X)``, then the bound of the new A."""
        Pm = sps.csr_matrix(P) if sps.issparse(P) else as_dense_2d(P)
        Qm = sps.csr_matrix(Q) if sps.issparse(Q) else as_dense_2d(Q)
        self.R -= np.asarray(Pm @ np.asarray(Qm.T @ self.X))
        if self.sparse:
            self.A = (self.A + sps.csr_matrix(Pm) @ sps.csr_matrix(Qm).T).tocsr()
        else:
            Pd = Pm.toarray() if sps.issparse(Pm) else Pm
            Qd = Qm.toarray() if sps.issparse(Qm) else Qm
            self.A += Pd @ Qd.T
        self.cond.change(self.A, Pm, Qm)
        self.drive()

    def change_rhs(self, P, Q) -> None:
        D = P @ (Q.T if not sps.issparse(Q) else Q.T)
        D = D.toarray() if sps.issparse(D) else np.asarray(D).reshape(self.n, self.p)
        self.B += D
        self.R += D
        self.drive()

    def drive(self) -> None:
        """GMRES on ``A δ = r`` until the bound of every column is below half the
        tolerance (the 2-norm reduction asked of GMRES is what the bound needs, with a
        factor 4 to spare); a direct solve when it stalls."""
        goal = 0.5 * self.tol
        for c in range(self.p):
            r = self.R[:, c]
            for _ in range(5):
                bound = float(self.cond.steering(r)[0])
                if bound <= goal:
                    break
                norm = np.linalg.norm(r)
                delta, _ = spla.gmres(self.A, r, rtol=0.25 * goal / bound, atol=0.0,
                                      restart=min(self.n, 50), maxiter=200)
                self.stats["iterations"] += 1
                self.X[:, c] += delta
                r = self.B[:, c] - self._matvec(self.X[:, c])
                if not np.linalg.norm(r) < norm:
                    break
            if float(self.cond.steering(r)[0]) > goal:  # Krylov stalled: a direct solve
                A = self.A.tocsc() if self.sparse else self.A
                x = spla.spsolve(A, self.B[:, c]) if self.sparse else \
                    np.linalg.solve(A, self.B[:, c])
                self.X[:, c] = x
                r = self.B[:, c] - self._matvec(x)
                self.stats["direct"] += 1
            self.R[:, c] = r

    def refresh(self) -> None:
        self.R = self.B - np.asarray(self.A @ self.X)
        self.drive()

    def memory_bytes(self) -> int:
        a = self.A.data.nbytes + self.A.indices.nbytes if self.sparse else self.A.nbytes
        return int(a + self.X.nbytes + self.R.nbytes + self.B.nbytes)
