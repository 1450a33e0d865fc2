"""Pending low-rank terms: a large view whose factored updates wait, ``value = base + P Qᵀ``.

Adding ``P Qᵀ`` to an n×n view in place is a read and a write of all of it however small
the rank (7 ms at n = 4000 for rank 2, as long as the pass over the view that the next
trigger's products make).  A view that a trigger only multiplies (``rt.fused_dot``,
``rt.dot``) and updates (``rt.add_outer``) can instead keep its updates as low-rank terms:
every product adds ``P (Qᵀ B)`` (O(n·r) per column), and the terms are added to the view
in one ``dgemm`` when their rank passes :data:`FOLD_RANK`: the flops are the same, but the
pass over the view is paid once per fold instead of once per update, and a wide ``dgemm``
runs at the machine's gemm rate on every idle core.  The generated
module decides which views qualify (the view is used in no other way in that trigger,
``self._lazy``) and the runtime which are large enough (:data:`MIN_ELEMENTS`); every other
read of a view (outputs, saving, verification, the other triggers) folds its terms first.

This is LINVIEW's own Spark strategy (pending terms folded at a rank budget, see
``backends/spark/context.py``) applied to NumPy views.

What an update then costs at its floor (``docs/auto.md``, "OLS and A^16 against their
floors"): the reads of the views it multiplies, and the fold's flops.  A trigger writes no
large view per update: the terms go into buffers of ``FOLD_RANK + k`` columns kept across
folds (no O(n·r) copy per update), a row update of a view is written to its row at once,
and the products of a row update's one-hot ``U`` (or of a column ``c·e_i`` inside a
stacked factor such as A^16's ``[U, A U + …]``) read one column of the view, not all of
it (``kernels.dot``, ``kernels.fused_dot``).  A view that no trigger reads (A^16's ``D``)
is still folded at ``FOLD_RANK``: the flops are the same at any rank, and its reader
would otherwise pay them all at once.
"""

from __future__ import annotations

import numpy as np

from linview.backends.numpy import kernels

#: terms are added to the view when their rank passes this (a rank-64 ``dgemm`` update of a
#: 4000×4000 view costs 2 GFlop, about 25-45 ms here; 32 rank-2 updates cost 220 ms)
FOLD_RANK = 64
#: views below this many elements are updated in place as before (they fit in cache)
MIN_ELEMENTS = kernels.WIDE_MIN


class Pending:
    """A view with low-rank terms not yet added: its value is ``base + P Qᵀ`` (``P``:
    rows×r, ``Q``: cols×r).  The terms live in Fortran-ordered buffers of
    ``FOLD_RANK + k`` columns, kept across folds: a new term is written into them, not
    stacked onto copies of the old ones (an O(n·r) copy per update)."""

    __slots__ = ("base", "_P", "_Q", "rank")

    def __init__(self, base: np.ndarray):
        self.base = base
        self._P, self._Q = _empty(base.shape[0]), _empty(base.shape[1])
        self.rank = 0

    @property
    def P(self) -> np.ndarray:  # noqa: N802 - the math's name
        return self._P[:, :self.rank]

    @property
    def Q(self) -> np.ndarray:  # noqa: N802
        return self._Q[:, :self.rank]

    def drop(self) -> None:
        """Forget the terms (an undone trigger's, see ``fallback.Snapshot``)."""
        self.rank = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.base.shape

    @property
    def T(self) -> Transposed:  # noqa: N802 - as NumPy's
        return Transposed(self)

    def __matmul__(self, B):
        out = kernels.matmul(self.base, B)
        return out + self.P @ (self.Q.T @ B) if self.rank else out

    def column(self, j: int) -> np.ndarray:
        """Column ``j`` of the value (n×1), reading one column of the base."""
        return self.base[:, j:j + 1] + self.P @ self.Q[j:j + 1].T

    def dot(self, X: np.ndarray) -> np.ndarray:
        """``value @ X``, reading only the touched columns of the base for a one-hot X."""
        out = kernels.dot(self.base, X)
        return out + self.P @ (self.Q.T @ X) if self.rank else out

    def fused_dot(self, blocks, ops: str) -> list[np.ndarray]:
        """:func:`kernels.fused_dot` of the value: one pass over the base, plus each block's
        share of the terms (``P (Qᵀ B)``, or ``Q (Pᵀ B)`` for a transposed product)."""
        out = kernels.fused_dot(self.base, *blocks, ops=ops)
        if self.rank:
            for o in set(ops):  # the blocks of one kind together: two products in all
                idx = [i for i, x in enumerate(ops) if x == o]
                left, right = (self.P, self.Q) if o == "N" else (self.Q, self.P)
                terms = left @ (right.T @ np.hstack([blocks[i] for i in idx]))
                at = 0
                for i in idx:
                    width = blocks[i].shape[1]
                    out[i] = out[i] + terms[:, at:at + width]
                    at += width
        return out

    def add(self, P: np.ndarray, Q: np.ndarray) -> None:
        """``value += P Qᵀ``: a row or column update (a one-hot factor) goes to the base at
        once (it touches only those rows or columns); other terms wait until their rank
        passes :data:`FOLD_RANK`."""
        k = P.shape[1]
        if k == 0:
            return
        if kernels.unit_columns(P) is not None or kernels.one_hot(P) is not None \
                or kernels.one_hot(Q) is not None:
            kernels.add_outer(self.base, P, Q)
            return
        r = self.rank
        if r + k > self._P.shape[1]:  # room for FOLD_RANK + k columns, once
            more = max(FOLD_RANK + k, r + k)
            self._P = _grown(self._P, r, more)
            self._Q = _grown(self._Q, r, more)
        self._P[:, r:r + k] = P
        self._Q[:, r:r + k] = Q
        self.rank = r + k
        if self.rank > FOLD_RANK:
            self.fold()

    def fold(self) -> None:
        """Add the terms to the base (one ``dgemm``, every idle core at this rank)."""
        if self.rank:
            kernels.add_outer(self.base, self.P, self.Q)  # column slices of F buffers: F
            self.rank = 0


class Transposed:
    """``Pending.T``: the transposed value, for the products a trigger reads it by."""

    __slots__ = ("of",)

    def __init__(self, of: Pending):
        self.of = of

    @property
    def shape(self) -> tuple[int, int]:
        return self.of.base.shape[::-1]

    @property
    def T(self) -> Pending:  # noqa: N802
        return self.of

    def __matmul__(self, B):
        of = self.of
        out = kernels.matmul(of.base.T, B)
        return out + of.Q @ (of.P.T @ B) if of.rank else out

    def dot(self, X: np.ndarray) -> np.ndarray:
        of = self.of
        out = kernels.dot(of.base.T, X)
        return out + of.Q @ (of.P.T @ X) if of.rank else out

    def fused_dot(self, blocks, ops: str) -> list[np.ndarray]:
        return self.of.fused_dot(blocks, ops.translate(_FLIP))


_FLIP = str.maketrans("NT", "TN")
_LAZY = (Pending, Transposed)


def _empty(rows: int) -> np.ndarray:
    return np.zeros((rows, 0), order="F")


def _grown(buf: np.ndarray, used: int, cols: int) -> np.ndarray:
    """A Fortran buffer of ``cols`` columns holding ``buf``'s first ``used``."""
    out = np.empty((buf.shape[0], cols), order="F")
    out[:, :used] = buf[:, :used]
    return out


class PendingViews:
    """The views of a NumPy trigger module (the runtime's ``TriggerModule``) with their
    pending terms: ``_store`` holds every view's array, ``_pending`` the :class:`Pending`
    of those that have one."""

    #: views the program as written left behind (``aswritten.py`` sets it, and catches up)
    _behind: frozenset = frozenset()

    @property
    def _views(self) -> dict[str, np.ndarray]:
        """Every view and input as an array (pending low-rank terms added first; views
        the program as written left behind re-evaluated first, see ``aswritten.py``)."""
        if self._behind:
            self._catch_up()
        self.flush()
        return self._store

    @_views.setter
    def _views(self, views: dict[str, np.ndarray]) -> None:
        self._store = views
        self._pending: dict[str, Pending] = {}

    def flush(self) -> None:
        """Add every pending low-rank term to its view now (:mod:`.lowrank`; reading,
        saving and verifying views do it anyway)."""
        for p in self._pending.values():
            p.fold()

    def _lazy(self, name: str):
        """A view for a trigger that only multiplies and updates it (generated code): a
        large one keeps its updates as low-rank terms (:class:`.Pending`)."""
        p = self._pending.get(name)
        if p is None:
            base = self._store[name]
            if base.size < MIN_ELEMENTS:
                return base
            p = self._pending[name] = Pending(base)
        return p

    def _view(self, name: str) -> np.ndarray:
        """A view as an array, its pending terms added first (generated code)."""
        if name in self._behind:
            self._catch_up()
        p = self._pending.get(name)
        if p is not None:
            p.fold()
        return self._store[name]

    def _current(self, name: str):
        """A view as the running trigger reads it (pending terms not added), or None."""
        p = self._pending.get(name)
        return p if p is not None else self._store.get(name)


# ------------------------------------------------------------------ what triggers call (rt)
def fused_dot(A, *blocks: np.ndarray, ops: str | None = None) -> list[np.ndarray]:
    """:func:`kernels.fused_dot`, also of a view with pending terms."""
    ops = ops or "N" * len(blocks)
    if isinstance(A, _LAZY):
        return A.fused_dot(blocks, ops)
    return kernels.fused_dot(A, *blocks, ops=ops)


def dot(A, X: np.ndarray) -> np.ndarray:
    """:func:`kernels.dot`, also of a view with pending terms."""
    return A.dot(X) if isinstance(A, _LAZY) else kernels.dot(A, X)


def add_outer(A, P: np.ndarray, Q: np.ndarray) -> None:
    """:func:`kernels.add_outer`; a view with pending terms takes ``P Qᵀ`` as one more."""
    if isinstance(A, Pending):
        A.add(P, Q)
    else:
        kernels.add_outer(A, P, Q)
