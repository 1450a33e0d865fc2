"""``linview run --source postgresql://...``: the live view of a program over tables.

Per micro-batch (the transactions committed within the window, never split):

1. each transaction's changes are checked and turned into update records
   (:mod:`.tables`); a bad one stops the run, or with ``--on-error skip`` is recorded in
   the rejects table and skipped whole;
2. the records go through linview's own engine (:class:`~linview.app.stream.Stream`):
   logged to the checkpoint's write-ahead log (with ``--checkpoint``), applied as one
   rank-k update per input;
3. the outputs and the batch's end LSN are written in ONE transaction (:mod:`.sink`);
4. only then is the slot acknowledged.

On a restart with the same ``--checkpoint`` the views come back from it, transactions whose
end LSN is at most the one applied are skipped, and the results are rewritten: nothing
lost, nothing applied twice.  Without ``--checkpoint`` every start is a fresh, consistent
load (the slot is dropped and created again).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from linview.app import wal
from linview.app.postgres import source as src
from linview.app.postgres.pgoutput import format_lsn
from linview.app.postgres.sink import Sink
from linview.app.postgres.tables import BadRow, Keys, Mapper, TableInput, parse_key, parse_values
from linview.app.records import parse_line
from linview.app.stream import Stream
from linview.errors import InputError, StateError, UpdateError

#: a quiet source still moves the slot on (an empty batch) this often, in seconds
IDLE_ADVANCE = 10.0
_NEVER = 10**15
_RESTART = ("linview's copy of the inputs no longer matches the table: run again with "
            "--restart to load the tables afresh")


class SchemaChanged(InputError):
    """ALTER TABLE or TRUNCATE on a mapped table: the run stops."""


def slot_name(sink: str) -> str:
    """The slot's (and the publication's) name: ``linview_`` + the sink schema, folded to
    what a slot name may hold (lower-case letters, digits, ``_``)."""
    base = re.sub(r"[^a-z0-9_]", "_", sink.lower())[:40]
    return f"linview_{base}"


class PostgresRun:
    """One run: the connection, the engine, the sink, the change stream."""

    def __init__(self, prog, *, dsn: str, tables: list[TableInput], key: str = "id",
                 sink: str = "linview", params: list[str] = (), checkpoint=None,
                 checkpoint_every: int = 100, restart: bool = False, on_error: str = "stop",
                 window: float = 0.05, shapes: dict | None = None, warn=print):
        self.prog, self.key, self.on_error, self.window = prog, key, on_error, window
        self.warn, self.params, self.shapes_given = warn, list(params), dict(shapes or {})
        self.checkpoint_every = checkpoint_every
        self.tables: dict[str, list[TableInput]] = {}
        for ti in tables:
            self.tables.setdefault(ti.name, []).append(ti)
        self.conn = src.Connection(dsn)
        self.slot = slot_name(sink)
        self.sql = self.conn.sql()
        try:
            self._setup(sink, checkpoint, restart)
        except BaseException:
            self.sql.close()
            raise

    # -------------------------------------------------------------- catalog
    def _catalog(self) -> dict[str, list[tuple[str, str]]]:
        """Each mapped table's columns (name, type), checked against the mapping."""
        out = {}
        with self.sql.cursor() as cur:
            for name, tis in self.tables.items():
                schema, table = tis[0].schema, tis[0].table
                cur.execute("SELECT a.attname, a.atttypid::int "
                            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
                            "%s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
                            "ORDER BY a.attnum", (schema, table))
                cols = cur.fetchall()
                if not cols:
                    raise InputError(f"table {name} does not exist (or has no columns)",
                                     hint="--table INPUT=SCHEMA.TABLE.COLUMN names it")
                have = {c for c, _ in cols}
                for col in [self.key, *(ti.column for ti in tis)]:
                    if col not in have:
                        raise InputError(f"table {name} has no column {col!r}",
                                         hint=f"its columns: {', '.join(sorted(have))}")
                out[name] = cols
        self.sql.commit()
        return out

    def _publication(self) -> None:
        from psycopg2 import sql

        names = sql.SQL(", ").join(sql.SQL("{}.{}").format(
            sql.Identifier(t[0].schema), sql.Identifier(t[0].table))
            for t in self.tables.values())
        with self.sql.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (self.slot,))
            verb = "ALTER PUBLICATION {} SET TABLE " if cur.fetchone() else \
                "CREATE PUBLICATION {} FOR TABLE "
            cur.execute(sql.SQL(verb).format(sql.Identifier(self.slot)) + names)
        self.sql.commit()

    def _slot_state(self):
        with self.sql.cursor() as cur:
            cur.execute("SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots "
                        "WHERE slot_name = %s", (self.slot,))
            row = cur.fetchone()
        self.sql.commit()
        return row

    # -------------------------------------------------------------- start
    def _setup(self, sink: str, checkpoint, restart: bool) -> None:
        import psycopg2

        try:
            self.catalog = self._catalog()
            identity = json.dumps({"tables": {t: [[ti.input, ti.column] for ti in tis]
                                              for t, tis in self.tables.items()},
                                   "key": self.key}, sort_keys=True)
            self.ckpt = Path(checkpoint) if checkpoint else None
            resume = (self.ckpt is not None and (self.ckpt / "state.npz").exists()
                      and not restart)
            self.sink = Sink(self.sql, sink, self.slot)
            if resume:
                self._resume(identity)
            if not resume or self.applied < 0:
                self._fresh(identity)
        except psycopg2.Error as e:
            raise self.conn.error(e) from None

    def _fresh(self, identity: str) -> None:
        """Drop the slot, create it again, load the inputs from its snapshot."""
        row = self._slot_state()
        if row is not None:
            if row[0]:
                raise InputError(f"replication slot {self.slot} is in use (another linview "
                                 "run on this sink?)", hint="stop it, or use another --sink")
            with self.sql.cursor() as cur:
                cur.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
            self.sql.commit()
        self._publication()
        repl = self.conn.replication()
        try:
            point, snapshot = src.create_slot(repl, self.slot)
            arrays, keys = self._load(snapshot, point)
        finally:
            repl.close()
        folder = self.ckpt / "snapshot" if self.ckpt else Path(tempfile.mkdtemp(
            prefix="linview-pg-"))
        folder.mkdir(parents=True, exist_ok=True)
        self.files = []
        for name, a in arrays.items():
            np.save(folder / f"{name}.npy", a)
            self.files.append(f"{name}={folder / f'{name}.npy'}")
        if self.ckpt is not None:
            (self.ckpt / "keys-0.json").write_text(keys.to_json())
            (self.ckpt / "columns.json").write_text(json.dumps(self.catalog))
        self.stream = Stream(self.prog, inputs=self.files + self.params,
                             checkpoint=self.ckpt, checkpoint_every=_NEVER, restart=True,
                             warn=self.warn, source=identity)
        self.stream.pos["source_batch"] = point
        self._start(keys)
        self._checkpoint()
        self.applied = point
        self.sink.ensure(list(self.views.outputs))
        self.sink.write(self.views.outputs, point, 0)

    def _resume(self, identity: str) -> None:
        cf = self.ckpt / "columns.json"
        if cf.exists():  # a table altered while linview was stopped
            was = {t: [tuple(c) for c in cols] for t, cols in json.loads(cf.read_text()).items()}
            for name, cols in self.catalog.items():
                now = [tuple(c) for c in cols]
                if was.get(name, now) != now:
                    raise SchemaChanged(f"ALTER TABLE {name} since checkpoint {self.ckpt}: "
                                        f"its columns (name, type id) were {_cols(was[name])}"
                                        f" and are now {_cols(now)}", hint=_RESTART)
        folder = self.ckpt / "snapshot"
        self.files = [f"{p.stem}={p}" for p in sorted(folder.glob("*.npy"))]
        self.stream = Stream(self.prog, inputs=self.files + self.params,
                             checkpoint=self.ckpt, checkpoint_every=_NEVER, warn=self.warn,
                             source=identity)
        self.applied = self.stream.pos["source_batch"]
        if self.applied < 0:
            return  # a first start that stopped before its first checkpoint: start over
        saved = self.stream.views.saved_meta.get("extra", {}).get("batch", 0)
        kf = self.ckpt / f"keys-{saved}.json"
        if not kf.exists():
            raise StateError(f"checkpoint {self.ckpt} lacks {kf.name}",
                             hint="use --restart to start over from the tables")
        keys = Keys.from_json(kf.read_text())
        for e in wal.scan(self.ckpt / "wal.log").entries:
            if e["batch"] > saved:
                keys.replay([json.loads(r) for r in e["records"]], self.tables)
        row = self._slot_state()
        if row is None:
            raise StateError(f"replication slot {self.slot} no longer exists, so the changes "
                             f"since checkpoint {self.ckpt} are gone",
                             hint="use --restart to load the tables again")
        stored = self.sink.progress()
        if stored is not None and stored[0] > self.applied:
            raise StateError(f"the results in {self.sink.schema} are at LSN "
                             f"{format_lsn(stored[0])}, past checkpoint {self.ckpt} (at "
                             f"{format_lsn(self.applied)}): an older checkpoint?",
                             hint="use --restart to load the tables again")
        self._publication()
        self._start(keys)
        self.sink.ensure(list(self.views.outputs))
        self.sink.write(self.views.outputs, self.applied, self.stream.pos["batch"])

    def _start(self, keys: Keys) -> None:
        self.views = self.stream.views
        dynamic = set(getattr(self.views, "DYNAMIC", ()))
        for tis in self.tables.values():
            for ti in tis:
                if dynamic and ti.input not in dynamic:
                    raise InputError(f"input {ti.input} reads table {ti.name}, but the program "
                                     "does not declare it dynamic", hint="add '%#linview "
                                     f"dynamic {ti.input}' to the program")
        shapes = {ti.input: tuple(self.views._views[ti.input].shape)
                  for tis in self.tables.values() for ti in tis}
        self.mapper = Mapper(self.tables, shapes, self.key, keys)
        for name, cols in self.catalog.items():
            self.mapper.set_columns(name, [c for c, _ in cols])

    def _load(self, snapshot: str, point: int):
        """The inputs from the slot's snapshot (COPY), and the keys present."""
        arrays, present = {}, {}
        cur = self.sql.cursor()
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
        for name, tis in self.tables.items():
            cols = [self.key, *(ti.column for ti in tis)]
            rows = src.copy_table(cur, tis[0].schema, tis[0].table, cols)
            parsed = []
            for row in rows:
                try:
                    k = parse_key(row[0])
                    vals = [parse_values(v, None) for v in row[1:]]
                except BadRow as e:
                    raise UpdateError(f"table {name}, key {row[0]}, snapshot at LSN "
                                      f"{format_lsn(point)}: {e}") from None
                parsed.append((k, vals))
            present[name] = {k for k, _ in parsed}
            for j, ti in enumerate(tis):
                arrays[ti.input] = self._matrix(ti, [(k, v[j]) for k, v in parsed], point)
        self.sql.commit()
        return arrays, Keys(present)

    def _matrix(self, ti: TableInput, rows: list, point: int) -> np.ndarray:
        given = self.shapes_given.get(ti.input)
        widths = {len(v) for _, v in rows}
        if given is None and not rows:
            raise InputError(f"table {ti.name} is empty, so the size of input {ti.input} is "
                             "unknown", hint=f"give it: --shapes {ti.input}=ROWSxCOLS")
        n = given[0] if given else max(k for k, _ in rows)
        p = given[1] if given else next(iter(widths))
        A = np.zeros((n, p))
        for k, v in rows:
            where = f"table {ti.name}, key {k}, snapshot at LSN {format_lsn(point)}"
            if not 1 <= k <= n:
                raise UpdateError(f"{where}: key out of range: input {ti.input} has rows "
                                  f"1..{n}")
            if len(v) != p:
                raise UpdateError(f"{where}: column {ti.column}: {len(v)} values where the "
                                  f"input has {p} columns")
            A[k - 1] = v
        return A

    # -------------------------------------------------------------- the stream
    def serve(self, once: bool, progress=None) -> dict:
        """Apply transactions until ``once`` is satisfied (all committed before the start)
        or the process is stopped; return the stats."""
        changes = src.ChangeStream(self.conn, self.slot, self.slot)
        marker = None
        if once:
            marker = f"linview-once-{uuid.uuid4().hex}"
            src.emit_marker(self.sql, marker)
        idle_since = time.monotonic()
        try:
            while True:
                txs, done = changes.batch(self.window, 1.0, marker)
                if txs:
                    self.apply(txs, changes)
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > IDLE_ADVANCE:
                    end = changes.server_end
                    if end > self.applied and changes.open is None and changes.held is None:
                        self._commit([], end, changes)  # a quiet source: move the slot on
                    idle_since = time.monotonic()
                if progress is not None:
                    progress(self.stream)
                if done:
                    break
        finally:
            changes.close()
        return self.close()

    def apply(self, txs: list, changes) -> None:
        """One micro-batch: check each transaction, apply, write, acknowledge."""
        recs, end = [], self.applied
        for tx in txs:
            lsn = tx.commit.end_lsn
            if lsn <= self.applied:
                continue  # applied before a restart
            self._check_schema(tx)
            try:
                dicts = self.mapper.transaction(tx.changes, lsn)
            except UpdateError as e:
                if self.on_error == "stop":
                    raise UpdateError(e.message, hint="nothing of this transaction was "
                                      "applied; --on-error skip records such transactions "
                                      f"in {self.sink.schema}._linview_rejects and goes on"
                                      ) from None
                self.sink.reject(lsn, tx.begin.xid, e.message)
                self.warn(f"skipped {e.message}")
                self.stream.stats["skipped"] += 1
                end = lsn
                continue
            self.mapper.commit()
            where = f"transaction at LSN {format_lsn(lsn)}"
            recs += [parse_line(json.dumps(d), where) for d in dicts]
            end = lsn
        if end > self.applied:
            self._commit(recs, end, changes)

    def _commit(self, recs: list, end: int, changes) -> None:
        self.stream.apply_batch(recs, source_batch=end)
        self.sink.write(self.views.outputs, end, self.stream.pos["batch"])
        changes.acknowledge(end)
        self.applied = end
        self.stream.stats["lsn"] = format_lsn(end)
        if self.ckpt is not None and self.stream.since_save >= self.checkpoint_every:
            self._checkpoint()

    def _check_schema(self, tx) -> None:
        for name in tx.truncated:
            if name in self.tables:
                raise SchemaChanged(f"TRUNCATE of table {name} (transaction at LSN "
                                    f"{format_lsn(tx.commit.end_lsn)}): linview's inputs no "
                                    "longer match it", hint=_RESTART)
        for rel in tx.relations:
            name = f"{rel.schema}.{rel.table}"
            if name not in self.tables:
                continue
            now = [(c.name, c.type_oid) for c in rel.columns]
            was = [tuple(c) for c in self.catalog[name]]
            if now != was:
                raise SchemaChanged(f"ALTER TABLE {name} (transaction at LSN "
                                    f"{format_lsn(tx.commit.end_lsn)}): its columns (name, "
                                    f"type id) were {_cols(was)} and are now {_cols(now)}",
                                    hint=_RESTART)

    def _checkpoint(self) -> None:  # the keys first: a crash between leaves both files
        if self.ckpt is None:
            return
        batch = self.stream.pos["batch"]
        tmp = self.ckpt / f"keys-{batch}.json.tmp"
        tmp.write_text(self.mapper.keys.to_json())
        tmp.replace(self.ckpt / f"keys-{batch}.json")
        self.stream.checkpoint()
        for f in self.ckpt.glob("keys-*.json"):
            if f.name != f"keys-{batch}.json":
                f.unlink()

    def close(self) -> dict:
        if self.ckpt is not None:
            self._checkpoint()
        stats = self.stream.close()
        stats["lsn"] = format_lsn(self.applied)
        self.sql.close()
        return stats


def _cols(cols) -> str:
    return ", ".join(f"{n} ({t})" for n, t in cols)
