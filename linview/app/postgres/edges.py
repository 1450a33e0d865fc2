"""The *edges* layout: ``--edges M=TABLE(SRC,DST[,WEIGHT])``, one row per link
``SRC -> DST`` (1-based node ids; WEIGHT positive, else 1) of a stochastic input
(``%#linview stochastic M``), with the semantics of ``linview run``'s edge records: an
INSERT inserts the link, a DELETE deletes it, an UPDATE is a delete and an insert (a moved
link, a new weight); the column of ``SRC`` is renormalised.

An UPDATE or DELETE must carry the old link, so the table's replica identity must hold SRC
and DST: a primary key over them (the default identity), or ``REPLICA IDENTITY FULL``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from linview.app.postgres.pgoutput import UNCHANGED
from linview.app.postgres.tables import BadRow
from linview.errors import InputError

#: ``INPUT=[SCHEMA.]TABLE(COLUMNS)``, the spec of --edges and --entries
SPEC = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(?:([^.()]+)\.)?([^.()]+)\(([^()]*)\)\s*$")


@dataclass(frozen=True)
class EdgeInput:
    input: str
    schema: str
    table: str
    src: str
    dst: str
    weight: str | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def columns(self) -> list[str]:
        return [self.src, self.dst, *([self.weight] if self.weight else [])]


def parse_edges_spec(spec: str) -> EdgeInput:
    m = SPEC.match(spec)
    cols = [c.strip() for c in m.group(4).split(",")] if m else []
    if not m or len(cols) not in (2, 3) or not all(cols):
        raise InputError(f"bad --edges '{spec}'", hint="write --edges INPUT=TABLE(SRC,DST"
                         "[,WEIGHT]), e.g. --edges M=links(src,dst) (SCHEMA.TABLE(...) too)")
    return EdgeInput(m.group(1), m.group(2) or "public", m.group(3), *cols)


def weight(text) -> float:
    from linview.app.postgres.tables import parse_values

    (w,) = parse_values(text, 1)
    if w <= 0:
        raise BadRow(f"link weight {w:g} is not positive")
    return float(w)


def node(text, n: int | None, what: str = "node") -> int:
    """A 1-based index (a node id; a row or column of an entry) in 1..n (``n`` None: a
    size that may grow, :mod:`.grow`)."""
    if text is None or text is UNCHANGED:
        raise BadRow(f"no {what} (is it in the table's REPLICA IDENTITY?)")
    try:
        k = int(text)
    except ValueError:
        raise BadRow(f"non-integer {what} {text!r}") from None
    if k < 1 or (n is not None and k > n):
        raise BadRow(f"{what} {k} out of range 1..{n if n is not None else ''}")
    return k


def changes(ei: EdgeInput, ch, cols: dict[str, int], n: int, present: set) -> list[dict]:
    """One Insert/Update/Delete of the edges table as edge records (``present``, the links
    linview has, is updated)."""
    def link(row):
        a, b = row[cols[ei.src]], row[cols[ei.dst]]
        try:
            return node(a, n), node(b, n)
        except BadRow as e:
            raise BadRow(f"link {a} -> {b}: {e}") from None

    old = link(ch.old) if ch.old is not None else None
    new = link(ch.new) if ch.new is not None else None
    if ch.kind == "update" and old is None:
        old = new  # the key did not change: the link is the same, its weight may not be
    reweigh = ei.weight is not None and ch.kind == "update" \
        and ch.new[cols[ei.weight]] is not UNCHANGED
    out = []
    if old is not None and (old != new or reweigh):
        if old not in present:
            raise BadRow(f"delete of link {old[0]} -> {old[1]}, which linview does not have")
        present.discard(old)
        out.append({"input": ei.input, "edge": list(old), "op": "delete"})
    if new is not None and (old != new or reweigh):
        if new in present:
            raise BadRow(f"insert of link {new[0]} -> {new[1]}, which exists already")
        present.add(new)
        rec = {"input": ei.input, "edge": list(new), "op": "insert"}
        if ei.weight is not None:
            rec["weight"] = weight(ch.new[cols[ei.weight]])
        out.append(rec)
    return out


def check_identity(conn, ei, what: str = "link") -> None:
    """The replica identity must hold ``ei.columns[:2]`` (SRC and DST; I and J)."""
    with conn.cursor() as cur:
        cur.execute("SELECT c.relreplident, ARRAY(SELECT a.attname::text FROM pg_index i "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                    " WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) "
                    "OR (c.relreplident = 'i' AND i.indisreplident))) FROM pg_class c JOIN "
                    "pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = %s AND "
                    "c.relname = %s", (ei.schema, ei.table))
        ident, cols = cur.fetchone()
    conn.commit()
    a, b = ei.columns[:2]
    if ident != "f" and not {a, b} <= set(cols):
        raise InputError(f"table {ei.name}: an UPDATE or DELETE would not carry the old "
                         f"{what} ({a}, {b})", hint=f"make ({a}, {b}) its primary key, or "
                         f"ALTER TABLE {ei.name} REPLICA IDENTITY FULL")


def load(rows: list, ei: EdgeInput, n_given: int | None, where: str):
    """The links from COPY rows (src, dst[, weight]) as a ``StochasticMatrix`` (dangling
    nodes implicit), and the set of links."""
    from linview.solve.stochastic import StochasticMatrix

    try:
        pairs = [(int(r[0]), int(r[1])) for r in rows]
    except (TypeError, ValueError):
        raise InputError(f"table {ei.name} ({where}): a node id that is NULL or not an "
                         "integer") from None
    try:
        w = np.array([weight(r[2]) for r in rows]) if ei.weight else np.ones(len(rows))
    except BadRow as e:
        raise InputError(f"table {ei.name} ({where}): column {ei.weight}: {e}") from None
    n = n_given or max((max(p) for p in pairs), default=0)
    if n < 1:
        raise InputError(f"table {ei.name} is empty, so the size of input {ei.input} is "
                         "unknown", hint=f"give it: --shapes {ei.input}=NxN")
    present = set(pairs)
    if len(present) != len(pairs):
        raise InputError(f"table {ei.name} ({where}) holds a link twice",
                         hint=f"make ({ei.src}, {ei.dst}) its primary key")
    bad = [p for p in pairs if not (1 <= p[0] <= n and 1 <= p[1] <= n)]
    if bad:
        raise InputError(f"table {ei.name} ({where}): link {bad[0][0]} -> {bad[0][1]} has a "
                         f"node out of range 1..{n}", hint=f"--shapes {ei.input}=NxN")
    src = np.array([p[0] - 1 for p in pairs], dtype=np.int64)
    dst = np.array([p[1] - 1 for p in pairs], dtype=np.int64)
    M = StochasticMatrix(n, src, dst, w)
    M.links = (n, src, dst, w)  # what catalog.save_inputs writes
    return M, present
