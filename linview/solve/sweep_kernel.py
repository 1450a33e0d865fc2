"""Push's dense round as one pass over the links, on several threads (numba).

A dense round of push (a push from every node at once, :mod:`.solvers`) computes the new
residual ``r = s·(M v)`` of the pushed residual v, its L1 norm (the certified bound) and
how many of its entries exceed the push threshold (whether the next round is local or
dense again).  In NumPy that is the product (SciPy's, one thread) and six passes over n
more; here it is one pass over the CSR rows:

* the rows split into blocks of :data:`ROWS`, the blocks over numba's threads; each row's
  sum is made by one thread, and the blocks' partial L1 norms and counts are added in
  block order, so the result is the same to the bit however many threads run it (a
  resumed run's numbers do not depend on the machine's load);
* a row's sum may be reassociated (``fastmath`` reassoc and contract, as SciPy's and
  BLAS's kernels may): a change of rounding of about 1e-16 of the ranks' mass, far below
  the 10% margin of push's target (``solvers.MARGIN``);
* M is a CSR snapshot plus a small CSR correction (the columns changed since the snapshot,
  :class:`~linview.solve.stochastic.StochasticMatrix`), both read in the same pass, and a
  constant ``add`` per row (the dangling columns' uniform share).

Measured on a 10⁶-node, 9.3·10⁶-link graph on 2 cores (``python bench/pagerank_kernel.py
--nodes 1000000``, medians): a step of SciPy power iteration took 42.3 ms, the NumPy dense
round 45.6 ms, this pass 36.8 ms on one thread and 18.3 ms on two (at 10⁵ nodes, the
iterate in cache: 1.44, 1.45, 1.70 and 1.03 ms).
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sps
from numba import prange

from linview.solve.seminormal_kernels import threads_for

#: rows per block of the pass (blocks are dealt to threads; the partial sums are per block)
ROWS = 8192


@numba.njit(parallel=True, cache=True, nogil=True, boundscheck=False,
            fastmath={"reassoc", "contract"})
def _sweep(indptr, indices, data, fptr, findices, fdata, v, s, add, theta, out,
           l1s, counts):  # pragma: no cover - compiled by numba
    n = indptr.shape[0] - 1
    fixed = findices.shape[0] > 0
    for b in prange(l1s.shape[0]):
        lo, hi = b * ROWS, min(n, (b + 1) * ROWS)
        l1, above = 0.0, 0
        for i in range(lo, hi):
            acc = add
            for k in range(indptr[i], indptr[i + 1]):
                acc += data[k] * v[indices[k]]
            if fixed:
                for k in range(fptr[i], fptr[i + 1]):
                    acc += fdata[k] * v[findices[k]]
            y = s * acc
            out[i] = y
            a = abs(y)
            l1 += a
            if a > theta:
                above += 1
        l1s[b] = l1
        counts[b] = above


def sweep(csr, fix, v: np.ndarray, s: float, add: float, theta: float, out: np.ndarray,
          threads: int) -> tuple[float, int]:
    """``out = s·(csr @ v + fix @ v + add)`` (``fix`` None or a CSR of the same shape) on
    ``threads`` threads; returns ``(‖out‖₁, number of |out_i| > theta)``.  ``out`` must
    not share memory with ``v``.  Up to :data:`ROWS` rows (one block, nothing for a second
    thread) SciPy's product and NumPy's passes do it: faster there (30 against 54 µs at
    2,000 nodes and 10 links a node, 129 against 157 µs at 8,000; 307 against 173 µs at
    16,000), and a process that only solves small systems never loads the kernel."""
    n = csr.shape[0]
    if n <= ROWS:
        np.copyto(out, csr @ v)
        if fix is not None and fix.nnz:
            out += fix @ v
        out += add
        out *= s
        a = np.abs(out)
        return float(a.sum()), int(np.count_nonzero(a > theta))
    if fix is None or not fix.nnz:  # no correction: an empty one, never read
        fix = sps.csr_matrix((np.zeros(0), np.zeros(0, csr.indices.dtype),
                              np.zeros(2, csr.indptr.dtype)), shape=(1, 1))
    blocks = max(1, -(-n // ROWS))
    l1s, counts = np.empty(blocks), np.empty(blocks, np.int64)
    numba.set_num_threads(threads_for(threads))
    _sweep(*_unsigned(csr), *_unsigned(fix), v, float(s), float(add), float(theta), out, l1s,
           counts)
    return float(l1s.sum()), int(counts.sum())


def _unsigned(A) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSR's row starts and column ids as unsigned integers of the same width (views, no
    copy: both are non-negative), and its values.  numba reads an element at a signed
    index with a test for negative indices (Python's wrap-around); at an unsigned one it
    does not, and the pass is 1.6x faster (1.32 against 2.12 ms at 10⁵ nodes on one thread,
    SciPy's product 1.28 ms)."""
    def u(a):
        return a.view(np.dtype(f"u{a.dtype.itemsize}"))
    return u(A.indptr), u(A.indices), A.data
