"""What linview asks the database before streaming: the mapped tables' columns, the
publication and the slot, and the initial load of the inputs from the slot's snapshot.

Names are bound parameters (catalog queries) or quoted identifiers (``psycopg2.sql``).
"""

from __future__ import annotations

import re

import numpy as np

from linview.app.postgres import edges, entries
from linview.app.postgres.keys import Keys
from linview.app.postgres.pgoutput import format_lsn
from linview.app.postgres.source import copy_table
from linview.app.postgres.tables import BadRow, TableInput, parse_key, parse_values
from linview.errors import InputError, UpdateError


def columns(conn, needs: dict[str, tuple[str, str, list[str]]]) -> dict[str, list]:
    """Each mapped table's columns [(name, type oid)]; ``needs``: table -> (schema, table,
    the columns the mapping reads)."""
    out = {}
    with conn.cursor() as cur:
        for name, (schema, table, wanted) in needs.items():
            cur.execute("SELECT a.attname, a.atttypid::int FROM pg_attribute a "
                        "JOIN pg_class c ON c.oid = a.attrelid "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                        "AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
                        "ORDER BY a.attnum", (schema, table))
            cols = [list(c) for c in cur.fetchall()]
            if not cols:
                raise InputError(f"table {name} does not exist (or has no columns)",
                                 hint="--table INPUT=SCHEMA.TABLE.COLUMN names it")
            have = {c for c, _ in cols}
            for col in wanted:
                if col not in have:
                    raise InputError(f"table {name} has no column {col!r}",
                                     hint=f"its columns: {', '.join(sorted(have))}")
            out[name] = cols
    conn.commit()
    return out


def ensure_publication(conn, name: str, tables: dict[str, tuple[str, str]]) -> None:
    """The publication ``name`` of exactly the mapped tables: created, or set when it
    holds others (one that an administrator made beforehand is left as it is)."""
    from psycopg2 import sql

    names = sql.SQL(", ").join(sql.SQL("{}.{}").format(
        sql.Identifier(schema), sql.Identifier(table)) for schema, table in tables.values())
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        exists = cur.fetchone() is not None
        cur.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables "
                    "WHERE pubname = %s", (name,))
        if not exists or {r for (r,) in cur.fetchall()} != set(tables):
            verb = "ALTER PUBLICATION {} SET TABLE " if exists else \
                "CREATE PUBLICATION {} FOR TABLE "
            cur.execute(sql.SQL(verb).format(sql.Identifier(name)) + names)
    conn.commit()


def slot_name(sink: str) -> str:
    """The slot's (and the publication's) name: ``linview_`` + the sink schema, folded to
    what a slot name may hold (lower-case letters, digits, ``_``)."""
    base = re.sub(r"[^a-z0-9_]", "_", sink.lower())[:40]
    return f"linview_{base}"


def slot_state(conn, slot: str):
    """(active, confirmed flush LSN) of the slot, or None."""
    with conn.cursor() as cur:
        cur.execute("SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name = %s", (slot,))
        row = cur.fetchone()
    conn.commit()
    return row


def drop_slot(conn, slot: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    conn.commit()


def load(conn, tables: dict[str, list[TableInput]], key: str, snapshot: str | None,
         point: int, shapes: dict, links: dict | None = None, cells: dict | None = None
         ) -> tuple[dict[str, np.ndarray], Keys]:
    """The inputs as of the slot's exported snapshot (COPY; None: one snapshot of now),
    and the keys (links, entries) present; ``links``, ``cells``: the edges and entries
    layouts' tables."""
    arrays, present = {}, {}
    cur = conn.cursor()
    cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    if snapshot is not None:
        cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
    for name, tis in tables.items():
        rows = copy_table(cur, tis[0].schema, tis[0].table, [key, *(t.column for t in tis)])
        parsed = []
        for row in rows:
            try:
                parsed.append((parse_key(row[0]), [parse_values(v, None) for v in row[1:]]))
            except BadRow as e:
                raise UpdateError(f"table {name}, key {row[0]}, snapshot at LSN "
                                  f"{format_lsn(point)}: {e}") from None
        present[name] = {k for k, _ in parsed}
        for j, ti in enumerate(tis):
            arrays[ti.input] = _matrix(ti, [(k, v[j]) for k, v in parsed], point,
                                       shapes.get(ti.input))
    for name, ei in (links or {}).items():
        rows = copy_table(cur, ei.schema, ei.table, ei.columns)
        given = shapes.get(ei.input)
        arrays[ei.input], present[name] = edges.load(
            rows, ei, given[0] if given else None, f"snapshot at LSN {format_lsn(point)}")
    for name, ci in (cells or {}).items():
        rows = copy_table(cur, ci.schema, ci.table, ci.columns)
        arrays[ci.input], present[name] = entries.load(
            rows, ci, shapes.get(ci.input), f"snapshot at LSN {format_lsn(point)}")
    conn.commit()
    return arrays, Keys(present)


def _matrix(ti: TableInput, rows: list, point: int, given) -> np.ndarray:
    """An input from its rows (key, values); its size is ``given`` (``--shapes``) or the
    largest key by the first row's width; rows without a key are zero."""
    if given is None and not rows:
        raise InputError(f"table {ti.name} is empty, so the size of input {ti.input} is "
                         "unknown", hint=f"give it: --shapes {ti.input}=ROWSxCOLS")
    n = given[0] if given else max(k for k, _ in rows)
    p = given[1] if given else len(rows[0][1])
    A = np.zeros((n, p))
    for k, v in rows:
        where = f"table {ti.name}, key {k}, snapshot at LSN {format_lsn(point)}"
        if not 1 <= k <= n:
            raise UpdateError(f"{where}: key out of range: input {ti.input} has rows 1..{n}",
                              hint=f"reserve rows for new keys: --shapes {ti.input}=ROWSxCOLS")
        if len(v) != p:
            raise UpdateError(f"{where}: column {ti.column}: {len(v)} values where the "
                              f"input has {p} columns")
        A[k - 1] = v
    return A


def save_inputs(folder, arrays: dict) -> list[str]:
    """The loaded inputs as files ``linview run`` reads (``.npy``; sparse: ``.npz``);
    their ``NAME=FILE`` specs."""
    import scipy.sparse as sps

    files = []
    for name, a in arrays.items():
        path = folder / f"{name}.{'npy' if isinstance(a, np.ndarray) else 'npz'}"
        if hasattr(a, "links"):  # a StochasticMatrix from an edges table: its links
            n, src, dst, w = a.links
            np.savez(path, links_n=n, links_src=src, links_dst=dst, links_weight=w)
        elif sps.issparse(a):
            sps.save_npz(path, a)
        else:
            np.save(path, a)
        files.append(f"{name}={path}")
    return files
