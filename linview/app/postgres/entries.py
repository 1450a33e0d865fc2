"""The *entries* layout: ``--entries A=TABLE(I,J,VALUE)``, one row per entry ``A(I, J)``
(1-based) of an input, sparse or not; an entry without a row is zero.  An INSERT or UPDATE
sets the entry, a DELETE makes it zero, an UPDATE that moves it is both.  Like the edges
layout, the table's replica identity must hold I and J (a primary key over them, or
``REPLICA IDENTITY FULL``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from linview.app.postgres.edges import SPEC, node
from linview.app.postgres.tables import BadRow, parse_values
from linview.errors import InputError


@dataclass(frozen=True)
class EntryInput:
    input: str
    schema: str
    table: str
    i: str
    j: str
    value: str

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def columns(self) -> list[str]:
        return [self.i, self.j, self.value]


def parse_entries_spec(spec: str) -> EntryInput:
    m = SPEC.match(spec)
    cols = [c.strip() for c in m.group(4).split(",")] if m else []
    if not m or len(cols) != 3 or not all(cols):
        raise InputError(f"bad --entries '{spec}'", hint="write --entries INPUT=TABLE(I,J,"
                         "VALUE), e.g. --entries A=cells(i,j,v) (SCHEMA.TABLE(...) also works)")
    return EntryInput(m.group(1), m.group(2) or "public", m.group(3), *cols)


def changes(ei: EntryInput, ch, cols: dict[str, int], shape, present: set) -> list[dict]:
    """One Insert/Update/Delete of the entries table as entry records (``"value"``: the
    new value, None for a deleted entry; :func:`.tables.collapse` makes them updates)."""
    def at(row):
        i, j = row[cols[ei.i]], row[cols[ei.j]]
        try:
            return node(i, shape[0], "row"), node(j, shape[1], "column")
        except BadRow as e:
            raise BadRow(f"entry ({i}, {j}): {e}") from None

    old = at(ch.old) if ch.old is not None else None
    new = at(ch.new) if ch.new is not None else None
    if ch.kind == "update" and old is None:
        old = new
    out = []
    if old is not None and old != new:
        if old not in present:
            raise BadRow(f"delete of entry ({old[0]}, {old[1]}), which linview does not have")
        present.discard(old)
        out.append({"input": ei.input, "cell": list(old), "value": None})
    if new is not None:
        if ch.kind == "insert" or old != new:
            if new in present:
                raise BadRow(f"insert of entry ({new[0]}, {new[1]}), which exists already")
        elif new not in present:
            raise BadRow(f"update of entry ({new[0]}, {new[1]}), which linview does not have")
        try:
            (v,) = parse_values(ch.new[cols[ei.value]], 1)
        except BadRow as e:
            raise BadRow(f"entry ({new[0]}, {new[1]}), column {ei.value}: {e}") from None
        present.add(new)
        out.append({"input": ei.input, "cell": list(new), "value": float(v)})
    return out


def load(rows: list, ei: EntryInput, given, where: str):
    """The input (scipy.sparse, CSC) from COPY rows (i, j, value), and the entries."""
    cells = {}
    for i, j, v in rows:
        try:
            ij = (int(i), int(j))
            (cells[ij],) = parse_values(v, 1)
        except (TypeError, ValueError):
            raise InputError(f"table {ei.name} ({where}): an index that is NULL or not an "
                             "integer") from None
        except BadRow as e:
            raise InputError(f"table {ei.name}, entry ({i}, {j}) ({where}): {e}") from None
    if given is None and not cells:
        raise InputError(f"table {ei.name} is empty, so the size of input {ei.input} is "
                         "unknown", hint=f"give it: --shapes {ei.input}=ROWSxCOLS")
    m, n = given or (max(i for i, _ in cells), max(j for _, j in cells))
    bad = [ij for ij in cells if not (1 <= ij[0] <= m and 1 <= ij[1] <= n)]
    if bad:
        raise InputError(f"table {ei.name} ({where}): entry {bad[0]} out of range "
                         f"{m}x{n}", hint=f"--shapes {ei.input}=ROWSxCOLS")
    keys = list(cells)
    A = sps.csc_matrix((np.array([cells[k] for k in keys]),
                        ([k[0] - 1 for k in keys], [k[1] - 1 for k in keys])), shape=(m, n))
    return A, set(keys)
