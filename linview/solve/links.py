"""A plain ``scipy.sparse`` M seen as links by the push solver.

PageRank's ``(I - s·M) \\ b`` with M given as an ordinary sparse matrix (no pragma: a
dangling node is a zero column, as users build M with SciPy) is an M-matrix system when
M is non-negative with column sums at most 1: then ``‖(I - s·M)⁻¹‖₁ ≤ 1/(1 - s)`` and
push's L1 bound ``‖R‖₁ / (1 - s)`` is certified, exactly as for a ``stochastic`` input.
:func:`substochastic` checks that (O(nnz)); :class:`SparseLinks` gives push what it reads
of a :class:`~linview.solve.stochastic.StochasticMatrix` (``n``, ``gather``, ``matvec``,
``length``), with no uniform dangling columns: a zero column's mass leaves the system.

An update of such an input rebuilds the links from the new matrix (O(nnz), as the CSR sum
of the update does anyway) and is checked again; the ``stochastic`` pragma keeps links in
a dynamic CSC where an edge change costs its column.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview.solve.sweep_kernel import sweep

#: slack on column sums: a column of k entries ``1/k`` sums to 1 within about ``k·eps``
#: (the rounding of 1/k and of the sum), so a column may exceed 1 by ``SUM_SLACK + 2·k·eps``
#: (4.4e-11 for a node with 10⁵ out-links).  Such a column makes ``‖(I - s·M)⁻¹‖₁`` at most
#: ``1/(1 - s·(1 + ε))`` instead of ``1/(1 - s)``: a relative change of ``s·ε/(1 - s)``,
#: some 10⁻¹⁰, which the residual target's 10% margin (``solvers.MARGIN``) covers.
SUM_SLACK = 1e-12


def substochastic(M) -> bool:
    """Whether sparse M is square, non-negative and has column sums at most 1 (within
    the rounding of its entries, :data:`SUM_SLACK`)."""
    if not sps.issparse(M) or M.shape[0] != M.shape[1]:
        return False
    if M.nnz and M.data.min() < 0:
        return False
    if not M.nnz:
        return True
    sums = np.asarray(M.sum(axis=0)).ravel()
    counts = (np.diff(M.indptr) if M.format == "csc" else
              np.bincount(M.tocoo().col if M.format != "csr" else M.indices,
                          minlength=M.shape[1]))
    slack = SUM_SLACK + 2 * np.finfo(float).eps * counts
    return bool(np.all(sums <= 1 + slack))


class SparseLinks:
    """Columns of a non-negative, column-substochastic sparse M for push (module doc)."""

    uniform_dangling = False  # a zero column is lost mass, not a uniform column

    def __init__(self, M):
        self.csr = sps.csr_matrix(M, dtype=float)  # the input's own CSR (row-wise products)
        self.csc = self.csr.tocsc()
        self.n = self.csc.shape[0]
        self.shape = self.csc.shape
        self.start = self.csc.indptr[:-1]  # a view: no copy of n positions
        self.length = np.diff(self.csc.indptr)  # the index type (int32 below 2³¹ links)

    @property
    def nnz(self) -> int:
        return int(self.csc.nnz)

    def gather(self, cols: np.ndarray, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of ``M[:, cols] @ diag(coef)`` as one flat list of entries."""
        ln = self.length[cols]
        total = int(ln.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        offs = np.cumsum(ln) - ln
        pos = np.arange(total) + np.repeat(self.start[cols] - offs, ln)
        return self.csc.indices[pos].astype(np.int64), \
            self.csc.data[pos] * np.repeat(coef, ln)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.csr @ np.asarray(x, dtype=float)

    def sweep(self, v: np.ndarray, s: float, theta: float, out: np.ndarray,
              threads: int) -> tuple[float, int]:
        """``out = s·(M @ v)`` in one pass (:func:`.sweep_kernel.sweep`)."""
        return sweep(self.csr, None, v, s, 0.0, theta, out, threads)

    def memory_bytes(self) -> int:
        return int(sum(a.nbytes for a in (self.csc.data, self.csc.indices, self.csc.indptr)))
