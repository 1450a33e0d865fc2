"""A column-stochastic matrix kept as a changing link structure (graphs under edge streams).

``M[:, j] = W[:, j] / w_j`` with link weights ``W`` (1 per edge unless given) and
``w_j = Σ_i W[i, j]``; a column without links (a *dangling* node) is the uniform column
``1/n``.  The uniform columns are never stored: ``M = S + (1/n)·1·δᵀ`` with ``S`` the
sparse normalised links and ``δ`` the dangling indicator, so a graph with 10⁶ nodes costs
its edges, not n².

Storage is a *dynamic CSC*: column ``j`` occupies ``length[j]`` of ``cap[j]`` slots from
``start[j]`` in one row-index array and one weight array.  An edge insertion into a full
column moves the column to the end of the arrays with twice the room (amortised O(1));
a deletion swaps the last entry in.  So an edge change costs the touched column's entries,
never n or the number of edges.

Every change is validated first and applied as a whole: :meth:`change_edges` and
:meth:`apply_lowrank` raise :class:`~linview.errors.UpdateError` (naming the record) and
change nothing when a record is bad.  Both return the :class:`ColumnChange` list that solve
views use to update their residual locally.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from linview.errors import InputError, UpdateError
from linview.solve.sweep_kernel import sweep

#: tolerance on column sums when a matrix is checked for being column-stochastic
STOCHASTIC_TOL = 1e-9


@dataclass(frozen=True)
class ColumnChange:
    """Column ``j`` of M before and after: normalised sparse parts and dangling flags."""

    j: int
    old_rows: np.ndarray
    old_vals: np.ndarray
    old_dangling: bool
    new_rows: np.ndarray
    new_vals: np.ndarray
    new_dangling: bool


class StochasticMatrix:
    """An n×n column-stochastic matrix as links (see the module docstring)."""

    uniform_dangling = True  # a column without links is 1/n everywhere

    def __init__(self, n: int, src, dst, weights=None, slack: int = 2):
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise InputError("edge lists 'src' and 'dst' must have the same length")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise InputError(f"edge endpoints must lie in 0..{n - 1}")
        w = np.ones(src.size) if weights is None else np.asarray(weights, float).ravel()
        if w.shape != src.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise InputError("edge weights must be finite and positive, one per edge")
        self.n = int(n)
        key = src * n + dst
        order = np.argsort(key, kind="stable")
        key, w = key[order], w[order]
        uniq, first = np.unique(key, return_index=True)
        w = np.add.reduceat(w, first) if key.size else w
        src, dst = uniq // n, uniq % n
        counts = np.bincount(src, minlength=n).astype(np.int64)
        self.cap = counts + slack
        self.start = np.zeros(n, dtype=np.int64)
        np.cumsum(self.cap[:-1], out=self.start[1:])
        self.length = counts.copy()
        size = int(self.cap.sum())
        self.rows = np.zeros(max(size, 1), dtype=np.int32)
        self.wts = np.zeros(max(size, 1))
        pos = self.start[src] + (np.arange(src.size) - np.repeat(np.cumsum(counts) - counts,
                                                                  counts))
        self.rows[pos] = dst
        self.wts[pos] = w
        self.end = size
        self.colsum = np.bincount(src, weights=w, minlength=n).astype(float)
        self._csc = None
        self._fix: list = []
        self._fixm = None
        self._dangling = None  # the dangling nodes' ids (None: to find again)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_matrix(cls, M) -> StochasticMatrix:
        """From a column-stochastic matrix (dense or scipy.sparse).  A column equal to
        ``1/n`` everywhere is a dangling node; other columns keep their proportions, with
        weights scaled to a mean of 1 per link (so an inserted edge weighs like the others)."""
        M = sps.csc_matrix(M, dtype=float)
        n = M.shape[0]
        if M.shape != (n, n):
            raise InputError(f"a stochastic matrix must be square, not {M.shape[0]}x"
                             f"{M.shape[1]}")
        M.sum_duplicates()
        if not np.all(np.isfinite(M.data)) or np.any(M.data < 0):
            raise InputError("a stochastic matrix needs finite, non-negative entries")
        sums = np.asarray(M.sum(axis=0)).ravel()
        bad = np.flatnonzero(np.abs(sums - 1) > STOCHASTIC_TOL * max(1, n))
        if bad.size:
            j = int(bad[0])
            raise InputError(f"column {j} of the stochastic matrix sums to {sums[j]:.6g}, "
                             "not 1", hint="every column of M must sum to 1; dangling nodes "
                             "are uniform columns (or build M with linview.updates."
                             "link_matrix(src, dst, n))")
        nnz = np.diff(M.indptr)
        cols = np.repeat(np.arange(n), nnz)
        dangling = (nnz == n) & np.array([
            n > 1 and np.ptp(M.data[M.indptr[j]:M.indptr[j + 1]]) <= 1e-15
            if nnz[j] == n else False for j in range(n)]) if np.any(nnz == n) else \
            np.zeros(n, dtype=bool)
        keep = ~dangling[cols] & (M.data > 0)
        scale = nnz[cols].astype(float)
        return cls(n, cols[keep], M.indices[keep], (M.data * scale)[keep])

    # ------------------------------------------------------------------ reading
    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def nnz(self) -> int:
        return int(self.length.sum())

    @property
    def dangling(self) -> np.ndarray:
        return self.length == 0

    def column(self, j: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(rows, values, dangling)`` of column j's sparse part (normalised)."""
        s, ln = self.start[j], self.length[j]
        if ln == 0:
            return np.zeros(0, np.int64), np.zeros(0), True
        return self.rows[s:s + ln].astype(np.int64), self.wts[s:s + ln] / self.colsum[j], False

    def gather(self, cols: np.ndarray, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of ``S[:, cols] @ diag(coef)`` (the sparse part), as one flat list
        of entries: the work of a push from ``cols``."""
        ln = self.length[cols]
        total = int(ln.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        offs = np.cumsum(ln) - ln
        pos = np.arange(total) + np.repeat(self.start[cols] - offs, ln)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_col = np.where(ln > 0, coef / self.colsum[cols], 0.0)
        return self.rows[pos], self.wts[pos] * np.repeat(per_col, ln)

    def sparse_part(self) -> sps.csc_matrix:
        """``S`` (normalised links, dangling columns empty) as a scipy CSC matrix."""
        cols = np.arange(self.n)
        rows, vals = self.gather(cols, np.ones(self.n))
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(self.length, out=indptr[1:])
        return sps.csc_matrix((vals, rows, indptr), shape=(self.n, self.n))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``M @ x`` for x of n or n×p, with the dangling columns as a rank-1 term.

        Uses a CSC snapshot taken at the last compaction plus a small correction matrix of
        the columns changed since (compacted when it holds more than 1/64 of the links), so
        edge changes between products do not cost a rebuild."""
        x = np.asarray(x, dtype=float)
        csr, fix = self._products()
        out = csr @ x
        if fix is not None:
            out += fix @ x
        out += self._dangling_share(x)
        return out

    def sweep(self, v: np.ndarray, s: float, theta: float, out: np.ndarray,
              threads: int) -> tuple[float, int]:
        """``out = s·(M @ v)`` for one column v in one pass on ``threads`` threads; returns
        ``‖out‖₁`` and how many entries exceed ``theta`` (:func:`.sweep_kernel.sweep`)."""
        csr, fix = self._products()
        return sweep(csr, fix, v, s, self._dangling_share(v), theta, out, threads)

    def _dangling_share(self, x: np.ndarray):
        """What the dangling columns give every row of ``M @ x``: ``δᵀx / n`` (the ids
        kept until a column changes)."""
        if self._dangling is None:
            self._dangling = np.flatnonzero(self.length == 0)
        return x[self._dangling].sum(axis=0) / self.n

    def _products(self):
        """The CSR snapshot and the correction of the columns changed since (None when
        none changed), as :meth:`matvec` uses them."""
        if self._csc is None:
            self._csc = self.sparse_part().tocsr()  # row-wise products are faster
            self._fix, self._fixm = [], None
        if self._fix and self._fixm is None:
            r = np.concatenate([f[0] for f in self._fix])
            c = np.concatenate([f[1] for f in self._fix])
            v = np.concatenate([f[2] for f in self._fix])
            self._fixm = sps.csr_matrix((v, (r, c)), shape=self.shape)
        return self._csc, (self._fixm if self._fix else None)

    __matmul__ = matvec

    def tocsc(self) -> sps.csc_matrix:
        """The whole of M, dangling columns densified (for tests and small graphs)."""
        S = self.sparse_part().tolil()
        for j in np.flatnonzero(self.dangling):
            S[:, j] = np.full((self.n, 1), 1.0 / self.n)
        return S.tocsc()

    def toarray(self) -> np.ndarray:
        return self.tocsc().toarray()

    def __array__(self, dtype=None, copy=None):
        out = self.toarray()
        return out if dtype is None else out.astype(dtype)

    def memory_bytes(self) -> int:
        return int(self.rows.nbytes + self.wts.nbytes + self.start.nbytes + self.length.nbytes
                   + self.cap.nbytes + self.colsum.nbytes)

    # ------------------------------------------------------------------ changing
    def edge_weight(self, src: int, dst: int) -> float | None:
        """The weight of edge ``src → dst`` (0-based), or None when there is none."""
        s, ln = self.start[src], self.length[src]
        at = np.flatnonzero(self.rows[s:s + ln] == dst)
        return float(self.wts[s + at[0]]) if at.size else None

    def change_edges(self, records: Iterable, base: int = 0, what: str = "M",
                     labels: list[str] | None = None) -> list[ColumnChange]:
        """Apply a batch of edge records atomically and return the changed columns.

        A record is ``(op, src, dst)`` or ``(op, src, dst, weight)`` with op ``"insert"`` or
        ``"delete"``; the edge ``src → dst`` is entry ``M[dst, src]``.  Indices start at
        ``base`` (0 or 1).  A bad record raises :class:`UpdateError` with its position (or
        its label in ``labels``, e.g. the file and line it came from) and nothing changes.
        """
        n = self.n

        def where(pos: int) -> str:
            return labels[pos] if labels else f"edge record {pos}"

        cols: dict[int, dict[int, float]] = {}
        for pos, rec in enumerate(records):
            try:
                op, a, b, *rest = rec
            except (TypeError, ValueError):
                raise UpdateError(f"{where(pos)}: expected (op, from, to[, weight]), got "
                                  f"{rec!r}; nothing was changed") from None
            if op not in ("insert", "delete"):
                raise UpdateError(f"{where(pos)}: unknown op {op!r} (use 'insert' or "
                                  "'delete'); nothing was changed")
            try:
                j, i = int(a) - base, int(b) - base
                if int(a) != a or int(b) != b:
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise UpdateError(f"{where(pos)}: node ids must be integers, got "
                                  f"{a!r} -> {b!r}; nothing was changed") from None
            if not (0 <= j < n and 0 <= i < n):
                raise UpdateError(f"{where(pos)}: edge {a} -> {b} is out of range "
                                  f"{base}..{n - 1 + base} of {what}; nothing was changed")
            w = float(rest[0]) if rest else 1.0
            if not np.isfinite(w) or w <= 0:
                raise UpdateError(f"{where(pos)}: weight {rest[0]!r} must be finite and "
                                  "positive; nothing was changed")
            col = cols.get(j)
            if col is None:
                r, v, _ = self.column(j)
                col = cols[j] = dict(zip(r.tolist(), (v * self.colsum[j]).tolist(),
                                         strict=True))
            if op == "insert":
                if i in col:
                    raise UpdateError(f"{where(pos)}: edge {a} -> {b} is already in "
                                      f"{what}; nothing was changed")
                col[i] = w
            else:
                if i not in col:
                    raise UpdateError(f"{where(pos)}: edge {a} -> {b} is not in {what}; "
                                      "nothing was changed")
                del col[i]
        return self._commit(cols)

    def apply_lowrank(self, U, V, what: str = "M") -> list[ColumnChange]:
        """``M += U Vᵀ`` (dense or scipy.sparse factors), keeping M column-stochastic:
        each touched column must still sum to 1 with non-negative entries (a uniform
        column becomes a dangling node).  Costs the touched columns (n each for columns
        that are or become uniform).  Atomic like :meth:`change_edges`."""
        Vs = sps.csr_matrix(V)
        Us = sps.csc_matrix(U)
        touched = np.unique(Vs.nonzero()[0])
        cols: dict[int, dict[int, float]] = {}
        for j in touched.tolist():
            delta = Us @ Vs[j].T  # n×1 sparse
            r, v, dang = self.column(j)
            if dang:
                new = np.full(self.n, 1.0 / self.n)
            else:
                new = np.zeros(self.n)
                new[r] = v
            d = delta.tocoo()
            np.add.at(new, d.row, d.data)
            new[np.abs(new) < 1e-15] = 0.0
            s = new.sum()
            if np.any(new < 0) or abs(s - 1) > STOCHASTIC_TOL * max(1, self.n):
                raise UpdateError(f"update of {what}: column {j} would "
                                  + ("have a negative entry" if np.any(new < 0)
                                     else f"sum to {s:.6g}")
                                  + f", but {what} is declared stochastic; nothing was changed",
                                  hint="use linview.updates.edge_records(...) for edge "
                                  "changes, which renormalise out-degrees")
            if self.n > 1 and np.ptp(new) <= 1e-15:
                cols[j] = {}
            else:
                nz = np.flatnonzero(new)
                cols[j] = dict(zip(nz.tolist(), (new[nz] * nz.size).tolist(), strict=True))
        return self._commit(cols)

    def _commit(self, cols: dict[int, dict[int, float]]) -> list[ColumnChange]:
        changes = []
        for j, col in cols.items():
            old_r, old_v, old_d = self.column(j)
            rows = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
            wts = np.fromiter(col.values(), dtype=float, count=len(col))
            self._write_column(j, rows, wts)
            new_r, new_v, new_d = self.column(j)
            changes.append(ColumnChange(j, old_r, old_v, old_d, new_r, new_v, new_d))
        if changes and self._csc is not None:
            self._fixm = None
            for ch in changes:
                self._fix.append((np.concatenate([ch.new_rows, ch.old_rows]),
                                  np.full(ch.new_rows.size + ch.old_rows.size, ch.j),
                                  np.concatenate([ch.new_vals, -ch.old_vals])))
            if sum(f[0].size for f in self._fix) > max(self.nnz // 64, 1024):
                self._csc = None
        return changes

    def _write_column(self, j: int, rows: np.ndarray, wts: np.ndarray) -> None:
        k = rows.size
        if k > self.cap[j]:
            cap = max(2 * k, 4)
            if self.end + cap > self.rows.size:
                grow = max(self.rows.size, self.end + cap)
                self.rows = np.concatenate([self.rows, np.zeros(grow, np.int32)])
                self.wts = np.concatenate([self.wts, np.zeros(grow)])
            self.start[j], self.cap[j] = self.end, cap
            self.end += cap
        s = self.start[j]
        self.rows[s:s + k] = rows
        self.wts[s:s + k] = wts
        self.length[j] = k
        self._dangling = None
        self.colsum[j] = float(wts.sum()) if k else 0.0
