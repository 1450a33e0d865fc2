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

#: slack on column sums (rounding of 1/deg sums)
SUM_SLACK = 1e-12


def substochastic(M) -> bool:
    """Whether sparse M is square, non-negative and has column sums at most 1."""
    if not sps.issparse(M) or M.shape[0] != M.shape[1]:
        return False
    if M.nnz and M.data.min() < 0:
        return False
    return not M.nnz or float(np.asarray(M.sum(axis=0)).max()) <= 1 + SUM_SLACK


class SparseLinks:
    """Columns of a non-negative, column-substochastic sparse M for push (module doc)."""

    uniform_dangling = False  # a zero column is lost mass, not a uniform column

    def __init__(self, M):
        self.csr = sps.csr_matrix(M, dtype=float)  # the input's own CSR (row-wise products)
        self.csc = self.csr.tocsc()
        self.n = self.csc.shape[0]
        self.shape = self.csc.shape
        self.start = self.csc.indptr[:-1].astype(np.int64)
        self.length = np.diff(self.csc.indptr).astype(np.int64)

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

    def memory_bytes(self) -> int:
        return int(sum(a.nbytes for a in (self.csc.data, self.csc.indices, self.csc.indptr)))
