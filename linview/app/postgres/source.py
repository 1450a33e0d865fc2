"""The source side: connections, the publication and the slot, the initial load from the
slot's snapshot, and the stream of committed transactions.

The client is psycopg2 (``psycopg2-binary``): its ``LogicalReplicationConnection`` speaks
the streaming replication protocol (psycopg 3 has none), so changes arrive as they commit
and the slot is acknowledged with ``send_feedback(flush_lsn=...)`` only after linview's
results are committed.  ``CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT`` gives the snapshot
of the slot's start; the inputs are read with COPY in a transaction that sets it, so no
change is missed or counted twice between the load and the first streamed transaction.
"""

from __future__ import annotations

import io
import math
import select
import time
from dataclasses import dataclass, field

from linview.app.postgres import pgoutput
from linview.errors import InputError


def connect_error(e: Exception, dsn_shown: str, password: str | None) -> InputError:
    """A psycopg2 error as an :class:`InputError`, the password scrubbed from its text."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if password:
        text = text.replace(password, "***")
    return InputError(f"PostgreSQL {dsn_shown}: {text}")


class Connection:
    """The DSN (shown without its password) and the two kinds of connection."""

    def __init__(self, dsn: str):
        import psycopg2.extensions

        try:
            params = psycopg2.extensions.parse_dsn(dsn)
        except psycopg2.ProgrammingError:
            raise InputError("--source is not a PostgreSQL connection string",
                             hint="write postgresql://USER@HOST:PORT/DB (a password comes "
                             "from PGPASSWORD or ~/.pgpass)") from None
        self.dsn, self.password = dsn, params.get("password")
        self.shown = "postgresql://{}@{}:{}/{}".format(
            params.get("user", ""), params.get("host", ""), params.get("port", "5432"),
            params.get("dbname", ""))

    def error(self, e: Exception) -> InputError:
        return connect_error(e, self.shown, self.password)

    def sql(self, wrap: bool = True):
        """A connection for queries (``wrap``: a failure is an :class:`InputError`)."""
        return self._connect(None, wrap)

    def replication(self, wrap: bool = True):
        """A replication connection (the streaming protocol, database mode)."""
        import psycopg2.extras

        return self._connect(psycopg2.extras.LogicalReplicationConnection, wrap)

    def _connect(self, factory, wrap: bool):
        import psycopg2

        try:
            return psycopg2.connect(self.dsn, connection_factory=factory)
        except psycopg2.Error as e:
            if not wrap:
                raise
            raise self.error(e) from None


@dataclass
class Transaction:
    """One committed transaction: its changes to mapped tables as (table, Change)."""

    begin: pgoutput.Begin
    commit: pgoutput.Commit | None = None
    changes: list = field(default_factory=list)
    truncated: list = field(default_factory=list)
    relations: list = field(default_factory=list)


#: at most this many row changes in a micro-batch (one transaction may have more: it is
#: never split); ``--batch-rows``
BATCH_ROWS = 256
#: a batch whose first transaction committed this many seconds (past the window) ago is
#: behind: it takes the transactions that keep coming, up to ``batch_rows`` row changes,
#: until none arrives for :data:`BEHIND_GAP` seconds (``--behind-gap-ms``; what was
#: already received is only what the socket holds, some 60 rows of 8 kB: batches that
#: small run the triggers at their cost per row, where a full one re-evaluates once);
#: once the last one read is recent, only what is already received (a paced writer
#: would otherwise fill the batch)
BEHIND = 0.2
BEHIND_GAP = 0.02


class ChangeStream:
    """The slot's transactions, whole and in commit order; ``marker`` ends ``--once``."""

    behind_gap = BEHIND_GAP

    def __init__(self, conn: Connection, slot: str, publication: str,
                 batch_rows: int = BATCH_ROWS, binary: bool = False,
                 behind_gap: float = BEHIND_GAP):
        """``binary``: values in their types' binary send format (pgoutput's ``binary``
        option, PostgreSQL 14 or later), which the caller decodes; ``behind_gap``: how
        long a batch behind waits for one more transaction (:data:`BEHIND_GAP`)."""
        self.conn, self.slot, self.publication = conn, slot, publication
        self.behind_gap = behind_gap
        self.batch_rows = batch_rows
        self.relations: dict[int, pgoutput.Relation] = {}
        self.repl = conn.replication(wrap=False)
        self.cur = self.repl.cursor()
        self.held: Transaction | None = None
        self.open: Transaction | None = None
        self.started = time.time()  # transactions committed before it are the backlog
        options = {"proto_version": "1", "publication_names": publication,
                   "messages": "true"}
        if binary:
            options["binary"] = "true"
        self.cur.start_replication(slot_name=slot, decode=False, options=options)

    def close(self) -> None:
        try:
            self.repl.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    def acknowledge(self, lsn: int) -> None:
        """The slot may drop the log up to ``lsn`` (results up to it are committed)."""
        self.cur.send_feedback(flush_lsn=lsn, force=True)

    @property
    def server_end(self) -> int:
        return getattr(self.cur, "wal_end", 0) or 0

    def _next(self, timeout: float) -> Transaction | str | None:
        """The next whole transaction, a marker prefix seen, or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.cur.read_message()
            if msg is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                select.select([self.cur], [], [], min(left, 1.0))
                continue
            rec = pgoutput.parse(msg.payload)
            if isinstance(rec, pgoutput.Begin):
                self.open = Transaction(rec)
            elif isinstance(rec, pgoutput.Relation):
                self.relations[rec.oid] = rec
                if self.open is not None:
                    self.open.relations.append(rec)
            elif isinstance(rec, pgoutput.Change):
                rel = self.relations[rec.oid]
                self.open.changes.append((f"{rel.schema}.{rel.table}", rec))
            elif isinstance(rec, pgoutput.Truncate):
                names = [f"{self.relations[o].schema}.{self.relations[o].table}"
                         for o in rec.oids if o in self.relations]
                self.open.truncated += names
            elif isinstance(rec, pgoutput.Commit):
                tx, self.open = self.open, None
                tx.commit = rec
                return tx
            elif isinstance(rec, pgoutput.Message) and rec.prefix.startswith("linview"):
                return rec.prefix

    def batch(self, window: float, first_timeout: float, marker: str | None = None,
              idle=None):
        """The transactions of one micro-batch, whole and in commit order.  Returns
        (transactions, marker reached).

        * The first one to arrive (waiting up to ``first_timeout``), and those committed
          in the same window of the commit-time grid (:func:`window_end`), read while
          they keep coming and until the window's end on linview's clock.
        * While the window is open and nothing is there to read, ``idle(transactions)``
          (when given) is handed the transactions received and not yet handed over, to be
          applied while waiting (their results are written when the window closes); only
          the rest is returned.
        * Catching up, more go in, up to ``batch_rows`` row changes: the backlog of
          transactions committed before this run started (read as they come, so these
          batches depend on the transactions only, and a resumed run forms the ones an
          uninterrupted run formed), and, when the first one committed more than
          :data:`BEHIND` seconds ago, those that keep arriving (within
          :attr:`behind_gap` of each other)."""
        txs: list[Transaction] = []
        if self.held is not None:
            txs.append(self.held)
            self.held = None
        t_first, rows, handed = time.monotonic(), sum(len(t.changes) for t in txs), 0
        while True:
            first = txs[0].commit.commit_time if txs else None
            end = window_end(first, window) if txs else None
            backlog = first is not None and first < self.started
            behind = first is not None and time.time() - first > window + BEHIND
            if not txs:
                got = self._next(first_timeout)
            elif backlog:
                got = self._next(max(window, 0.05))
            elif behind:  # waits for more while what it reads is behind too
                old = time.time() - txs[-1].commit.commit_time > window + BEHIND
                got = self._next(self.behind_gap if old else 0.0)
            else:
                got = self._next(0.0)
                if got is None and idle is not None and handed < len(txs):
                    idle(txs[handed:])  # nothing to read: apply what came, then wait
                    handed = len(txs)
                if got is None:  # until the window's end, on linview's clock (at most
                    # a window after the first one arrived, whatever the clocks' skew)
                    got = self._next(max(min(end - time.time(),
                                             window - (time.monotonic() - t_first)), 0.0))
            if got is None:
                return txs[handed:], False
            if isinstance(got, str):
                if got == marker:
                    return txs[handed:], True
                continue
            t = got.commit.commit_time
            if txs and (rows + len(got.changes) > self.batch_rows
                        or (backlog and t >= self.started)
                        or (not backlog and not behind and t >= end)):
                self.held = got
                return txs[handed:], False
            if not txs:
                t_first = time.monotonic()
            txs.append(got)
            rows += len(got.changes)


def window_end(first: float, window: float) -> float:
    """The end of the window that holds commit time ``first`` (seconds since the epoch):
    windows are aligned to a grid of ``window`` seconds, so a transaction waits for the
    window's end half a window on average, not a window minus its distance from the
    window's first transaction (the median of a window opened by its first commit)."""
    if window <= 0:
        return first
    return (math.floor(first / window) + 1) * window


def emit_marker(sql_conn, prefix: str) -> None:
    """A logical-decoding message after every transaction committed so far (``--once``)."""
    with sql_conn.cursor() as cur:
        cur.execute("SELECT pg_logical_emit_message(false, %s, '')", (prefix,))
    sql_conn.commit()


def create_slot(repl, slot: str) -> tuple[int, str]:
    """Create the slot; its consistent point and the name of its exported snapshot (valid
    until the replication connection runs another command)."""
    cur = repl.cursor()
    cur.execute(f"CREATE_REPLICATION_SLOT {slot} LOGICAL pgoutput EXPORT_SNAPSHOT")
    _name, point, snapshot, _plugin = cur.fetchone()
    return pgoutput.parse_lsn(point), snapshot


def copy_table(cur, schema: str, table: str, columns: list[str]) -> list[list[str | None]]:
    """The columns of every row, as text (COPY's text format; None for NULL)."""
    from psycopg2 import sql

    query = sql.SQL("COPY (SELECT {} FROM {}.{}) TO STDOUT").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns), sql.Identifier(schema),
        sql.Identifier(table))
    buf = io.StringIO()
    cur.copy_expert(query, buf)
    rows = []
    for line in buf.getvalue().splitlines():
        rows.append([None if f == "\\N" else f for f in line.split("\t")])
    return rows


def transient(e) -> bool:
    """A lost connection, a server shutting down or starting, a slot still held by the
    walsender of a connection that just died: worth connecting again."""
    code = getattr(e, "pgcode", None)
    return code is None or code.startswith(("08", "57P")) or code == "55006"
