"""Helpers that turn what users have into factored updates ``ΔX = U Vᵀ``.

Each returns ``(U, V)`` with ``U: rows×k`` and ``V: cols×k``, ready for
``views.update(name, U, V)``.  Row, column and cell changes have one-hot factors, which the
generated triggers recognise and serve in O(n) per touched row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from linview.errors import UpdateError


def _onehot(n: int, idx: Sequence[int]) -> np.ndarray:
    idx = list(idx)
    if any(not 0 <= i < n for i in idx):
        raise UpdateError(f"index out of range 0..{n - 1}: {idx}")
    E = np.zeros((n, len(idx)))
    E[idx, np.arange(len(idx))] = 1.0
    return E


def row_update(i: int, delta, rows: int):
    """Row ``i`` of an ``rows``-row matrix changes by ``delta``: ``(e_i, delta)``."""
    return _onehot(rows, [i]), np.asarray(delta, dtype=float).reshape(-1, 1)


def rows_update(idx: Sequence[int], deltas, rows: int):
    """Several rows at once (one rank-k update): ``deltas`` is k×cols."""
    D = np.atleast_2d(np.asarray(deltas, dtype=float))
    if D.shape[0] != len(idx):
        raise UpdateError(f"{len(idx)} row indices but {D.shape[0]} delta rows")
    return _onehot(rows, idx), D.T.copy()


def row_change(old_row, new_row, i: int, rows: int):
    """Row ``i`` replaced: old → new."""
    return row_update(i, np.asarray(new_row, float) - np.asarray(old_row, float), rows)


def column_update(j: int, delta, cols: int):
    """Column ``j`` changes by ``delta``: ``(delta, e_j)``."""
    return np.asarray(delta, dtype=float).reshape(-1, 1), _onehot(cols, [j])


def column_change(old_col, new_col, j: int, cols: int):
    """Column ``j`` replaced: old → new (e.g. a page's out-links in a stochastic matrix)."""
    return column_update(j, np.asarray(new_col, float) - np.asarray(old_col, float), cols)


def cell_update(i: int, j: int, delta: float, shape: tuple[int, int]):
    """One entry changes: ``(delta e_i, e_j)``."""
    return delta * _onehot(shape[0], [i]), _onehot(shape[1], [j])


def stochastic_column(links: Sequence[int], n: int) -> np.ndarray:
    """The column of a column-stochastic link matrix for a page linking to ``links``
    (uniform over them; uniform over all pages for a dangling page)."""
    col = np.zeros(n)
    if len(links):
        col[list(links)] = 1.0 / len(links)
    else:
        col[:] = 1.0 / n
    return col


def edge_update(old_links: Sequence[int], new_links: Sequence[int], j: int, n: int):
    """Page ``j``'s out-links change (edges inserted or deleted): a rank-1 column change
    of the column-stochastic matrix."""
    return column_change(stochastic_column(old_links, n), stochastic_column(new_links, n), j, n)


def observation_update(i: int, old_x, new_x, old_y, new_y, rows: int) -> dict:
    """OLS with inputs preallocated to a capacity of ``rows`` observations (unused rows are
    zero): append (old = 0), remove (new = 0) or correct observation ``i``.  Returns
    ``{"X": (U, V), "Y": (U, V)}``: apply both."""
    return {"X": row_change(old_x, new_x, i, rows), "Y": row_change(old_y, new_y, i, rows)}


def merge(updates: Sequence[tuple[np.ndarray, np.ndarray]]):
    """A micro-batch of updates to the same input as one rank-k update."""
    if not updates:
        raise UpdateError("an empty batch")
    return (np.hstack([np.atleast_2d(np.asarray(u, float).T).T for u, _ in updates]),
            np.hstack([np.atleast_2d(np.asarray(v, float).T).T for _, v in updates]))


def apply(views, name: str, update) -> None:
    """``views.update(name, *update)``; a dict from :func:`observation_update` applies each."""
    if isinstance(update, dict):
        for k, (U, V) in update.items():
            views.update(k, U, V)
    else:
        views.update(name, *update)


# ------------------------------------------------------------------ edge streams
def link_matrix(src, dst, n: int, weights=None):
    """The column-stochastic link matrix of a directed graph (edge ``src[e] → dst[e]`` is
    entry ``M[dst, src]``, columns renormalised by out-degree, a node without out-links a
    uniform column), kept sparse as a :class:`linview.solve.stochastic.StochasticMatrix`."""
    from linview.solve.stochastic import StochasticMatrix

    return StochasticMatrix(n, src, dst, weights)


def edge_records(records, base: int = 0) -> list[tuple]:
    """Edge records as users send them, ``{"edge": [from, to], "op": "insert"|"delete"
    [, "weight": w]}`` (or tuples ``(op, from, to[, w])``), as 0-based tuples for
    ``views.update_edges(name, ...)``.  ``base`` is the index of the first node (0 as in
    NumPy, 1 as in Octave).  A malformed record raises :class:`UpdateError` with its
    position.  A micro-batch of records is one residual update of each solve view."""
    out = []
    for pos, rec in enumerate(records):
        if isinstance(rec, dict):
            edge, op = rec.get("edge"), rec.get("op", "insert")
            if not isinstance(edge, (list, tuple)) or len(edge) != 2:
                raise UpdateError(f"edge record {pos}: 'edge' must be [from, to], got "
                                  f"{edge!r}")
            rec = (op, edge[0], edge[1]) + ((rec["weight"],) if "weight" in rec else ())
        try:
            op, a, b, *rest = rec
            a_i, b_i = int(a), int(b)
            if a_i != a or b_i != b:
                raise ValueError
        except (TypeError, ValueError):
            raise UpdateError(f"edge record {pos}: expected (op, from, to) with integer node "
                              f"ids, got {rec!r}") from None
        if min(a_i, b_i) < base:
            raise UpdateError(f"edge record {pos}: node ids start at {base}, got "
                              f"{a_i} -> {b_i}")
        out.append((op, a_i - base, b_i - base, *rest))
    return out


def apply_edge_batch(views, first: int, batch: list[dict]) -> None:
    """For a stream runner (``linview run`` has no ``edge`` record kind yet): a micro-batch
    of edge records ``{"input": "M", "edge": [from, to],
    "op": "insert"|"delete"[, "weight": w][, "base": 0|1]}`` applied as one residual
    update (``views.update_edges``).  Node ids are 0-based unless the record says
    ``"base": 1``.  A bad record raises :class:`UpdateError` naming its position in the
    stream, and nothing of the batch is applied."""
    name = batch[0].get("input")
    base = int(batch[0].get("base", 0))
    if not hasattr(views, "update_edges"):
        raise UpdateError(f"update record {first}: edge records need a program with a "
                          f"solve view over a stochastic input ('%#linview stochastic "
                          f"{name}')")
    for i, rec in enumerate(batch):
        if rec.get("input") != name or "edge" not in rec or int(rec.get("base", 0)) != base:
            raise UpdateError(f"update record {first + i}: a batch of edge records must "
                              "name one input and one index base")
    try:
        records = edge_records(batch, base=base)
        views.update_edges(name, records, base=0)
    except UpdateError as e:
        import re

        m = re.match(r"edge record (\d+): (.*)", e.message, re.S)
        msg = f"update record {first + int(m.group(1))}: {m.group(2)}" if m else e.message
        raise UpdateError(msg, hint=e.hint) from None
