"""The sink: result tables, the progress table and the rejects table in schema ``--sink``.

* ``SINK.OUTPUT(row int PRIMARY KEY, value float8[])``: one row per matrix row (1-based).
* ``SINK._linview_progress(slot text PRIMARY KEY, lsn pg_lsn, batches bigint, ...)``:
  the end LSN of the last transaction whose changes the results hold.
* ``SINK._linview_rejects(lsn pg_lsn PRIMARY KEY, xid, error, at)``: transactions that
  ``--on-error skip`` skipped.

The results and the progress row are written in ONE transaction, so a reader sees the
results of a committed prefix of the source's transactions and never a torn batch; only
rows that changed since the last write are rewritten: a few by ``DELETE`` and ``COPY``,
many (at least :data:`STAGED_FRACTION` of the table) by ``COPY`` into a temporary staging
table and one ``UPDATE ... FROM`` it, on result tables kept at ``fillfactor = 50`` so the
new row versions fit their pages (HOT: no index entries).  Plain MVCC either way: a reader
holding an older snapshot reads the old rows (a fresh table swapped in by ``RENAME`` would
look empty to it; ``bench/db_sink_bench.py``).  Names are quoted as identifiers and values
are bound parameters or COPY data (binary: the float8 bytes, exact).
"""

from __future__ import annotations

import io
import threading

import numpy as np

from linview import faults
from linview.app.postgres.pgoutput import format_lsn, parse_lsn
from linview.app.postgres.trace import NoTrace

PROGRESS = "_linview_progress"
REJECTS = "_linview_rejects"
STAGE = "_linview_stage"  # in pg_temp: this connection's own, emptied at each commit
#: the share of a table's rows that changed from which the rows go through the staging
#: table (measured: ``bench/db_sink_bench.py``; 10^5 rows, 1% to 100% changed)
STAGED_FRACTION = 0.01
FILLFACTOR = 50  # room in each page for a new version of its rows


def _ident(*names: str):
    from psycopg2 import sql

    return sql.SQL(".").join(sql.Identifier(n) for n in names)


FLOAT8_OID = 701


class Sink:
    """One connection to the result schema; ``write`` is the one transaction per batch."""

    def __init__(self, conn, schema: str, slot: str, trace=None):
        self.conn, self.schema, self.slot = conn, schema, slot
        self.trace = trace or NoTrace()  # the phases of a write (:mod:`.trace`)
        self.last: dict[str, np.ndarray] = {}  # what the tables hold (after a full write)
        self._stage_on = None  # the connection whose session has the staging table
        self._staged = False  # the staging table holds rows of this transaction

    def ensure(self, outputs: list[str]) -> None:
        from psycopg2 import sql

        s = self.schema
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(s)))
            for name in outputs:
                cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (row int PRIMARY KEY, "
                                    "value float8[] NOT NULL) WITH (fillfactor = {})")
                            .format(_ident(s, name), sql.Literal(FILLFACTOR)))
                cur.execute(sql.SQL("ALTER TABLE {} SET (fillfactor = {})")  # older sinks
                            .format(_ident(s, name), sql.Literal(FILLFACTOR)))
            cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (slot text PRIMARY KEY, "
                                "lsn pg_lsn NOT NULL, batches bigint NOT NULL, "
                                "updated timestamptz NOT NULL DEFAULT now())")
                        .format(_ident(s, PROGRESS)))
            cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (lsn pg_lsn PRIMARY KEY, "
                                "xid bigint, error text NOT NULL, "
                                "at timestamptz NOT NULL DEFAULT now())")
                        .format(_ident(s, REJECTS)))
        self.conn.commit()

    def progress(self) -> tuple[int, int] | None:
        """(lsn, batches) stored for this slot, or None."""
        from psycopg2 import sql

        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT lsn::text, batches FROM {} WHERE slot = %s")
                        .format(_ident(self.schema, PROGRESS)), (self.slot,))
            row = cur.fetchone()
        self.conn.commit()
        return None if row is None else (parse_lsn(row[0]), row[1])

    def reject(self, lsn: int, xid: int, error: str) -> None:
        """Record a skipped transaction (idempotent: a replay records it once)."""
        from psycopg2 import sql

        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("INSERT INTO {} (lsn, xid, error) VALUES (%s, %s, %s) "
                                "ON CONFLICT (lsn) DO NOTHING")
                        .format(_ident(self.schema, REJECTS)), (format_lsn(lsn), xid, error))
        self.conn.commit()

    def write(self, outputs: dict, lsn: int, batches: int, durable=None) -> None:
        """Every output's changed rows and the progress row, in one transaction, in few
        round trips: ``BEGIN`` and the statements before a ``COPY`` travel with it, the
        last statements and ``COMMIT`` together.  ``durable`` (the log's fsync) runs on a
        thread meanwhile, and ``COMMIT`` is sent only after it returned: nothing of the
        batch is visible, or acknowledged, before the log holds it on disk."""
        from psycopg2 import extensions, sql

        conn = self.conn
        if conn.status != extensions.STATUS_READY:
            conn.commit()
        conn.autocommit = True  # BEGIN and COMMIT go with the statements
        worker = _Background(durable) if durable is not None else None
        self._staged, self._pending = False, [sql.SQL("BEGIN")]
        try:
            with conn.cursor() as cur, self.trace.phase("statements"):
                for name, value in outputs.items():
                    self._write_one(cur, name, _matrix(value))
                self._pending.append(sql.SQL(
                    "INSERT INTO {} (slot, lsn, batches) VALUES ({}, {}, {}) ON CONFLICT "
                    "(slot) DO UPDATE SET lsn = EXCLUDED.lsn, batches = EXCLUDED.batches, "
                    "updated = now()").format(_ident(self.schema, PROGRESS),
                                              *map(sql.Literal, (self.slot, format_lsn(lsn),
                                                                 batches))))
                if worker is not None:
                    cur.execute(sql.SQL("; ").join(self._pending))
                    self._pending = []
            if worker is not None:
                with self.trace.phase("wait_fsync"):
                    worker.wait()  # the log on disk before the results may commit
            self._pending.append(sql.SQL("COMMIT"))
            with conn.cursor() as cur, self.trace.phase("commit"):
                cur.execute(sql.SQL("; ").join(self._pending))
        except BaseException:
            self.last.clear()  # unknown: the next write rewrites everything
            self._stage_on = None  # created in the rolled-back transaction, maybe
            if not conn.closed:
                try:
                    conn.cursor().execute("ROLLBACK")
                except Exception:  # noqa: BLE001 - a broken connection: the error below
                    pass
            raise
        finally:
            if worker is not None:
                worker.join()
            if not conn.closed:
                conn.autocommit = False
        self._stage_on = conn if self._staged else self._stage_on
        self._written = {k: _matrix(v).copy() for k, v in outputs.items()}
        self.last = self._written

    def _write_one(self, cur, name: str, M: np.ndarray) -> None:
        from psycopg2 import sql

        table = _ident(self.schema, name)
        old = self.last.get(name)
        if old is not None and old.shape != M.shape:
            old = None  # rows come or go: the table is written whole
        if old is None:
            rows = np.arange(M.shape[0])
        else:  # the rows whose bits changed (-0.0 after 0.0 too; a NaN that stays: not)
            rows = np.flatnonzero((_bits(old) != _bits(M)).any(axis=1))
            if not len(rows):
                return
        if old is not None and len(rows) >= STAGED_FRACTION * M.shape[0]:
            return self._update_staged(cur, table, copy_binary(rows, M))
        if old is None:  # the table may hold anything: every row is written again
            self._pending.append(sql.SQL("DELETE FROM {}").format(table))
        else:
            self._pending.append(sql.SQL("DELETE FROM {} WHERE row = ANY({})").format(
                table, sql.Literal([int(r) + 1 for r in rows])))
        self._copy(cur, table, copy_binary(rows, M))

    def _copy(self, cur, table, data: bytes) -> None:
        """The statements pending and a binary COPY into ``table``, in one round trip."""
        from psycopg2 import sql

        self._pending.append(sql.SQL("COPY {} (row, value) FROM STDIN WITH (FORMAT binary)")
                             .format(table))
        cur.copy_expert(sql.SQL("; ").join(self._pending), io.BytesIO(data))
        self._pending = []

    def _update_staged(self, cur, table, data: bytes) -> None:
        """Rows that exist, new values: COPY into the staging table, one UPDATE ... FROM
        it (2 to 3x faster than DELETE and COPY when most of 10^5 rows change)."""
        from psycopg2 import sql

        stage = _ident("pg_temp", STAGE)
        if self._staged:  # another output's rows, earlier in this transaction
            self._pending.append(sql.SQL("TRUNCATE {}").format(stage))
        elif self._stage_on is not self.conn:
            self._pending.append(sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (row int, value "
                                         "float8[]) ON COMMIT DELETE ROWS")
                                 .format(sql.Identifier(STAGE)))
        self._staged = True
        self._copy(cur, stage, data)
        faults.point("out.staged")
        self._pending.append(sql.SQL("UPDATE {} t SET value = s.value FROM {} s WHERE "
                                     "t.row = s.row").format(table, stage))


class _Background(threading.Thread):
    """``fn()`` on a thread; :meth:`wait` joins it and raises what it raised."""

    def __init__(self, fn):
        super().__init__(name="linview-log-sync", daemon=True)
        self.fn, self.error = fn, None
        self.start()

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as e:  # noqa: BLE001 - raised again by wait()
            self.error = e

    def wait(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


def copy_binary(rows: np.ndarray, M: np.ndarray) -> bytes:
    """COPY's binary format for ``(row int, value float8[])``: rows ``rows`` (0-based) of
    ``M`` as 1-based row numbers and their values, built by NumPy (no text: the float8
    values travel as their 8 bytes, exactly, and the server parses no numbers)."""
    c = M.shape[1]
    tup = np.dtype([("fields", ">i2"), ("row_len", ">i4"), ("row", ">i4"),
                    ("value_len", ">i4"), ("ndim", ">i4"), ("has_null", ">i4"),
                    ("oid", ">i4"), ("dim", ">i4"), ("lower", ">i4"),
                    ("values", [("len", ">i4"), ("x", ">f8")], (c,))])
    out = np.zeros(len(rows), dtype=tup)
    out["fields"], out["row_len"], out["row"] = 2, 4, rows + 1
    out["value_len"], out["ndim"], out["oid"] = 20 + 12 * c, 1, FLOAT8_OID
    out["dim"], out["lower"] = c, 1
    out["values"]["len"], out["values"]["x"] = 8, M[rows]
    header = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
    return header + out.tobytes() + b"\xff\xff"  # the trailer: -1 fields


def _bits(M: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(M, dtype=np.float64).view(np.uint64)


def _matrix(value) -> np.ndarray:
    if hasattr(value, "toarray"):
        value = value.toarray()
    return np.atleast_2d(np.asarray(value, dtype=float))


def read_results(conn, schema: str, name: str) -> np.ndarray:
    """A result table as a matrix (rows in order): what tests and users read back."""
    from psycopg2 import sql

    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT value FROM {} ORDER BY row").format(_ident(schema, name)))
        rows = [r[0] for r in cur.fetchall()]
    return np.array(rows, dtype=float).reshape(len(rows), -1) if rows else np.zeros((0, 0))
