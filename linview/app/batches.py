"""A micro-batch's ops as one rank-k update per input (:class:`BatchBuilder`), the
factors written once into arrays of their final size (:func:`stacked`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from linview.app.records import Op


@dataclass
class BatchBuilder:
    """Accumulates the ops of one micro-batch into ``{input: (U, V)}``.  ``current(name)``
    gives an input's value before the batch; set records read it plus the pending terms.
    ``ring`` is the next sliding-window slot (0-based), carried across batches."""

    current: object
    shapes: dict
    ring: int = 0
    terms: dict = field(default_factory=dict)

    def add(self, ops: list[Op]) -> None:
        ring = self.ring
        for op in ops:
            if op.kind == "row" and op.index == (None,):
                op = Op(op.input, "row", "set", (ring % self.shapes[op.input][0],), op.values)
                self.ring = ring + 1
            self._add(op)

    def _pending(self, name: str, i=None, j=None):
        """Row i, column j or entry (i, j) of ``name`` with the batch's terms so far."""
        X = self.current(name)
        rows = slice(None) if i is None else i
        cols = slice(None) if j is None else j
        value = np.array(X[rows, cols], dtype=float)
        for U, V in self.terms.get(name, []):
            value = value + _column(U, self.shapes[name][0])[rows] @ V[cols].T
        return value

    def _add(self, op: Op) -> None:
        rows, cols = self.shapes[op.input]
        if op.kind == "factor":
            U, V = op.factors
        elif op.kind == "row":
            (i,) = op.index
            delta = op.values - self._pending(op.input, i=i) if op.mode == "set" else op.values
            U, V = int(i), delta.reshape(-1, 1)  # U = e_i, written out by updates()
        elif op.kind == "col":
            (j,) = op.index
            delta = op.values - self._pending(op.input, j=j) if op.mode == "set" else op.values
            U, V = delta.reshape(-1, 1), np.zeros((cols, 1))
            V[j, 0] = 1.0
        else:
            i, j = op.index
            delta = op.values - float(self._pending(op.input, i=i, j=j)) \
                if op.mode == "set" else op.values
            U, V = np.zeros((rows, 1)), np.zeros((cols, 1))
            U[i, 0], V[j, 0] = delta, 1.0
        self.terms.setdefault(op.input, []).append((U, V))

    def updates(self, rows: bool = False):
        """``{input: (U, V)}``: one rank-k update per input, zero terms dropped (a set to
        the value already there changes nothing).  With ``rows``, ``(updates, rows)``:
        an input whose terms are all row changes of distinct rows is in ``rows`` instead,
        as ``(i, D)`` with ``X[i] += D`` (0-based rows, D: k×cols), the same numbers as
        ``X += U Vᵀ`` without a dense m×k U (a re-evaluated batch of many rows)."""
        out, by_rows = {}, {}
        for name, terms in self.terms.items():
            keep = [(U, V) for U, V in terms
                    if (not isinstance(U, np.ndarray) or np.any(U)) and np.any(V)]
            at = [U for U, _ in keep if not isinstance(U, np.ndarray)]
            if keep and rows and len(at) == len(keep) == len(set(at)):
                D = np.concatenate([np.asarray(V, dtype=float).T for _, V in keep], axis=0)
                by_rows[name] = (np.array(at, dtype=np.intp), D)
            elif keep:
                out[name] = stacked(keep, self.shapes[name][0])
        return (out, by_rows) if rows else out


def _column(U, rows: int) -> np.ndarray:
    """A term's U: a row term holds its index ``i`` for the unit column e_i."""
    if isinstance(U, np.ndarray):
        return U
    e = np.zeros((rows, 1))
    e[U, 0] = 1.0
    return e


def stacked(terms: list, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``[U1 U2 ...], [V1 V2 ...]``, the arrays ``np.hstack`` gives (float64, C order),
    written once into arrays allocated at their size: a row term's unit column as its one
    1, the Vs (columns) as the rows of their transpose."""
    widths = [1 if not isinstance(U, np.ndarray) else U.shape[1] for U, _ in terms]
    at = np.cumsum([0, *widths])
    U = np.zeros((rows, int(at[-1])))
    units = [(u, c) for (u, _), c in zip(terms, at[:-1], strict=False)
             if not isinstance(u, np.ndarray)]
    if units:
        U[[u for u, _ in units], [c for _, c in units]] = 1.0
    for (u, _), c, w in zip(terms, at[:-1], widths, strict=False):
        if isinstance(u, np.ndarray):
            U[:, c:c + w] = u
    Vt = np.concatenate([np.asarray(v, dtype=float).T for _, v in terms], axis=0)
    return U, np.ascontiguousarray(Vt.T)
