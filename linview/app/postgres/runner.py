"""``linview run --source postgresql://...``: the live view of a program over tables.

Per micro-batch (the transactions committed within the window, never split):

1. each transaction's changes are checked and turned into update records (:mod:`.tables`);
   a bad one stops the run, or with ``--on-error skip`` is recorded and skipped whole;
2. the records go through linview's own engine (:class:`~linview.app.stream.Stream`): logged
   (with ``--checkpoint``), applied as one rank-k update per input;
3. the outputs and the batch's end LSN are written in ONE transaction (:mod:`.sink`);
4. only then is the slot acknowledged.

On a restart with the same ``--checkpoint`` the views come back from it, transactions whose
end LSN is at most the one applied are skipped, and the results are rewritten: nothing lost,
nothing applied twice.  Without it every start is a fresh, consistent load (a new slot).
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from linview.app import wal
from linview.app.postgres import catalog, edges, grow, mapping, saver
from linview.app.postgres import choice as batch_choice
from linview.app.postgres import source as src
from linview.app.postgres.edges import EdgeInput
from linview.app.postgres.entries import EntryInput
from linview.app.postgres.keys import Keys
from linview.app.postgres.pgoutput import format_lsn
from linview.app.postgres.saver import Saver
from linview.app.postgres.schema import check_columns, check_schema
from linview.app.postgres.sink import Sink
from linview.app.postgres.tables import BINARY_TYPES, TableInput, collapse, rows_of
from linview.app.postgres.trace import tracer
from linview.app.records import Record, canonical
from linview.app.stream import Stream
from linview.errors import InputError, StateError, UpdateError

#: a quiet source still moves the slot on (an empty batch) this often, in seconds
IDLE_ADVANCE = 10.0
#: how long a lost connection is tried again (with backoff) before the run stops
RETRY_FOR = 300.0
#: the latencies kept for the stats (the last ones)
LATENCIES = 100_000
_NEVER = 10**15
#: pgoutput's binary mode (values in their types' send format) exists since PostgreSQL 14
BINARY_SINCE = 140000


class PostgresRun:
    """One run: the connection, the engine, the sink, the change stream."""

    def __init__(self, prog, *, dsn: str, tables: list[TableInput] = (),
                 edges: list[EdgeInput] = (), entries: list[EntryInput] = (), key: str = "id",
                 sink: str = "linview", params: list[str] = (), checkpoint=None,
                 checkpoint_every: int = 100, restart: bool = False, on_error: str = "stop",
                 window: float = 0.05, shapes: dict | None = None, warn=print,
                 batch_rows: int | None = None, reevaluate_above: int | None = None,
                 load_options: dict | None = None, trace=None,
                 behind_gap: float = src.BEHIND_GAP):
        """``load_options``: of ``load()`` (Spark: the session, ...); ``trace``: a file for
        each batch's phases (:mod:`.trace`); ``behind_gap``: ``--behind-gap-ms``, in s."""
        self.prog, self.key, self.on_error, self.window = prog, key, on_error, window
        self.warn, self.params, self.shapes_given = warn, list(params), dict(shapes or {})
        self.checkpoint_every, self.batch_rows = checkpoint_every, batch_rows
        self.reevaluate_above, self.load_options = reevaluate_above, load_options
        self.trace, self.saver, self.behind_gap = tracer(trace), Saver(self), behind_gap
        self._stop: list[int] = []  # a signal, or stop(): serve() ends after the batch
        self.latencies: list[float] = []  # COMMIT (the server's clock) to results committed
        self.grow_groups: dict[tuple, list[tuple]] = {}  # sizes that may grow (.grow)
        self.grown: dict[str, int | list] = {}
        self._commit_times: list[float] = []
        self.tables: dict[str, list[TableInput]] = {}
        for ti in tables:
            self.tables.setdefault(ti.name, []).append(ti)
        self.links: dict[str, EdgeInput] = {}
        self.cells: dict[str, EntryInput] = {}
        for ei in [*edges, *entries]:
            if ei.name in self.tables or ei.name in self.links or ei.name in self.cells:
                raise InputError(f"table {ei.name} is mapped twice", hint="one --edges or "
                                 "--entries per table, and not also --table")
            (self.links if isinstance(ei, EdgeInput) else self.cells)[ei.name] = ei
        self.table_of = {**{ti.input: ti.name for ti in tables},
                         **{ei.input: ei.name for ei in [*edges, *entries]}}
        self.conn = src.Connection(dsn)
        self.slot = catalog.slot_name(sink)
        self.sql = self.conn.sql()
        try:
            self._setup(sink, checkpoint, restart)
        except BaseException:
            self.sql.close()
            raise

    # -------------------------------------------------------------- start
    def _setup(self, sink: str, checkpoint, restart: bool) -> None:
        import psycopg2

        try:
            needs = {t: (tis[0].schema, tis[0].table, [self.key, *(ti.column for ti in tis)])
                     for t, tis in self.tables.items()}
            needs.update({t: (ei.schema, ei.table, ei.columns)
                          for t, ei in [*self.links.items(), *self.cells.items()]})
            self.catalog = catalog.columns(self.sql, needs)
            self.published = {t: (schema, table) for t, (schema, table, _) in needs.items()}
            for ei in self.links.values():
                edges.check_identity(self.sql, ei)
            for ei in self.cells.values():
                edges.check_identity(self.sql, ei, "entry")
            identity = json.dumps({"tables": {t: [[ti.input, ti.column] for ti in tis]
                                              for t, tis in self.tables.items()},
                                   "edges": {t: [ei.input, *ei.columns]
                                             for t, ei in self.links.items()},
                                   "entries": {t: [ei.input, *ei.columns]
                                               for t, ei in self.cells.items()},
                                   "key": self.key}, sort_keys=True)
            self._identity = identity
            self.ckpt = Path(checkpoint) if checkpoint else None
            resume = (self.ckpt is not None and (self.ckpt / "state.npz").exists()
                      and not restart)
            self.sink = Sink(self.sql, sink, self.slot, self.trace)
            if resume:
                self._resume(identity)
            if not resume or self.applied < 0:
                self._fresh(identity)
        except psycopg2.Error as e:
            raise self.conn.error(e) from None

    def _fresh(self, identity: str) -> None:
        """Drop the slot, create it again, load the inputs from its snapshot."""
        row = catalog.slot_state(self.sql, self.slot)
        if row is not None:
            if row[0]:
                raise InputError(f"replication slot {self.slot} is in use (another linview "
                                 "run on this sink?)", hint="stop it, or use another --sink")
            catalog.drop_slot(self.sql, self.slot)
        batch_choice.forget(self.ckpt)
        saver.clear(self.ckpt)
        catalog.ensure_publication(self.sql, self.slot, self.published)
        repl = self.conn.replication()
        try:
            point, snapshot = src.create_slot(repl, self.slot)
            arrays, keys = catalog.load(self.sql, self.tables, self.key, snapshot, point,
                                         self.shapes_given, self.links, self.cells)
        finally:
            repl.close()
        if self.ckpt is not None:
            self.ckpt.mkdir(parents=True, exist_ok=True)
            keys.save(self.ckpt, 0)
            (self.ckpt / "columns.json").write_text(json.dumps(self.catalog))
        self._load(arrays)
        self.stream.pos["source_batch"] = point
        self._start(keys)
        self.checkpoint_now()
        self.applied = point
        self.sink.ensure(list(self.views.outputs))
        self.sink.write(self.views.outputs, point, 0)
        self.visible = point

    def _load(self, arrays: dict) -> None:
        """A new engine over ``arrays``, saved where a resume reads them (without a
        checkpoint, in a temporary folder removed once they are loaded)."""
        tmp = None if self.ckpt else Path(tempfile.mkdtemp(prefix="linview-pg-"))
        folder = self.ckpt / "snapshot" if self.ckpt else tmp
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self.files = catalog.save_inputs(folder, arrays)
            self.stream = Stream(self.prog, inputs=self.files + self.params,
                                 checkpoint=self.ckpt, checkpoint_every=_NEVER, restart=True,
                                 warn=self.warn, source=self._identity,
                                 load_options=self.load_options)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def _resume(self, identity: str) -> None:
        check_columns(self.ckpt, self.catalog)  # a table altered while linview was stopped
        saver.merge_logs(self.ckpt)  # a log left by a checkpoint in the background
        folder = self.ckpt / "snapshot"
        self.files = [f"{p.stem}={p}" for p in sorted([*folder.glob("*.npy"),
                                                        *folder.glob("*.npz")])]
        self.stream = Stream(self.prog, inputs=self.files + self.params,
                             checkpoint=self.ckpt, checkpoint_every=_NEVER, warn=self.warn,
                             source=identity, load_options=self.load_options)
        self.applied = self.stream.pos["source_batch"]
        if self.applied < 0:
            return  # a first start that stopped before its first checkpoint: start over
        saved = self.stream.views.saved_meta.get("extra", {}).get("batch", 0)
        keys = Keys.resumed(self.ckpt, saved, wal.scan(self.ckpt / "wal.log").entries,
                            self.table_of)
        row = catalog.slot_state(self.sql, self.slot)
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
        catalog.ensure_publication(self.sql, self.slot, self.published)
        self._start(keys)
        self.sink.ensure(list(self.views.outputs))
        self.sink.write(self.views.outputs, self.applied, self.stream.pos["batch"])
        self.visible = self.applied

    def _start(self, keys: Keys) -> None:
        self.views = self.stream.views
        self.mapper, self.grow_groups = mapping.mapper(
            self.prog.program, self.views, self.tables, self.links, self.cells,
            self.table_of, self.key, keys)
        if self.batch_rows is None:  # a rank-k update pays while k is well below the width
            width = mapping.widest(self.mapper, self.tables, 4 * src.BATCH_ROWS)
            self.batch_rows = int(np.clip(width // 4, 16, src.BATCH_ROWS))
        for name, cols in self.catalog.items():
            self.mapper.set_columns(name, cols)
        batch_choice.pin(self.views)  # the runtime's switching would change the numbers
        if self.stream.log is not None:
            self.stream.log.deferred = True  # synced once per window, before the results
        per_row = max((len(tis) for tis in self.tables.values()), default=1)
        self.choice = batch_choice.BatchChoice(
            self.views, self.stream.eval_seconds, self.reevaluate_above, self.ckpt, per_row,
            getattr(self, "choice", None))
        self.stream.reevaluate_when, self.stream.timings = self.choice, []
        # values in binary (no text to parse) when every column read is of a type decoded
        read = {(t, c) for t, tis in self.tables.items() for c in [self.key, *(ti.column
                                                                          for ti in tis)]}
        self.binary = (not self.links and not self.cells
                       and self.sql.server_version >= BINARY_SINCE
                       and all(oid in BINARY_TYPES for t, cols in self.catalog.items()
                               for c, oid in cols if (t, c) in read))

    # -------------------------------------------------------------- the stream
    def serve(self, once: bool, progress=None) -> dict:
        """Apply transactions until ``once`` is satisfied (all committed before the start)
        or SIGINT/SIGTERM (taken at the end of a batch); return the stats.  A lost
        connection (PostgreSQL restarted) is opened again with backoff, for up to
        :data:`RETRY_FOR` seconds."""
        import psycopg2

        marker = None
        if once:
            marker = f"linview-once-{uuid.uuid4().hex}"
            src.emit_marker(self.sql, marker)
        stop = self._stop
        previous = {}
        if threading.current_thread() is threading.main_thread():  # taken at a batch's end
            previous = {sig: signal.signal(sig, lambda n, _f: stop.append(n))
                        for sig in (signal.SIGINT, signal.SIGTERM)}
        changes, failing_since, idle_since, done = None, None, time.monotonic(), False
        try:
            while not stop and not done:
                try:
                    if changes is None:
                        changes = self._open_stream()
                    with self.trace.phase("read"):
                        txs, done = changes.batch(self.window, 1.0, marker, lambda part,
                                                  c=changes: self.apply(part, c, False))
                    if txs or self.applied > self.visible:
                        self.apply(txs, changes)
                        idle_since = time.monotonic()
                    elif time.monotonic() - idle_since > IDLE_ADVANCE:
                        end = changes.server_end
                        if end > self.applied and changes.open is None \
                                and changes.held is None:  # a quiet source: move the slot on
                            with self.trace.phase("idle_advance"):
                                self._commit([], end, changes)
                        idle_since = time.monotonic()
                    failing_since = None
                except psycopg2.Error as e:
                    if not src.transient(e):
                        raise
                    if changes is not None:
                        changes.close()
                    changes, done = None, False
                    self.sink.last.clear()  # reconnect and rewrite the results
                    now = time.monotonic()
                    failing_since = failing_since or now
                    if now - failing_since > RETRY_FOR:
                        raise self.conn.error(e) from None
                    delay = min(0.25 * 2 ** int(min(now - failing_since, 60) // 2), 8.0)
                    self.warn(f"{self.conn.error(e).message}; connecting again in {delay:g}s")
                    time.sleep(delay)
                if progress is not None:
                    progress(self.stream)
        except BaseException as e:
            self.saver.kill()  # a checkpoint being written stopped
            raise (self.conn.error(e) if isinstance(e, psycopg2.Error) else e) from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if changes is not None:
                changes.close()
        return self.close()

    def stop(self) -> None:
        """Ask :meth:`serve` (running in another thread) to stop after the batch."""
        self._stop.append(0)

    def _open_stream(self):
        """(Re)connect: the results as the views hold them (a batch may have been applied
        but not written when the connection broke), then the slot from its position."""
        if not self.sink.last:
            if not self.sql.closed:
                self.sql.close()
            self.sql = self.conn.sql(wrap=False)
            self.sink.conn = self.sql
            self.sink.write(self.views.outputs, self.applied, self.stream.pos["batch"])
            self.visible = self.applied
        return src.ChangeStream(self.conn, self.slot, self.slot,
                                self.choice.cap(self.batch_rows), binary=self.binary,
                                behind_gap=self.behind_gap)

    def apply(self, txs: list, changes, publish: bool = True) -> None:
        """Check each transaction and apply them as one update; with ``publish`` (the
        window closed), write the results of everything applied and acknowledge.  Parts
        of a window applied while it is open (``publish=False``) are logged and applied
        as batches of their own, and become visible with the window's last part."""
        changed, end = [], self.applied
        self.mapper.keys.begin_batch()  # the keys before the batch, without a copy
        before = self.mapper.keys.before()
        for tx in txs:
            lsn = tx.commit.end_lsn
            if lsn <= self.applied:
                continue  # applied before a restart
            check_schema(tx, self.catalog)
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
            self._commit_times.append(tx.commit.commit_time)
            where = f"transaction at LSN {format_lsn(lsn)}"
            changed += [(d, where) for d in dicts]
            end = lsn
        if self.mapper.grow:  # inserts past an input's rows: larger inputs first
            self._grow(self.mapper.keys.before_copy())
        if end > self.applied:
            recs = collapse(changed, before, self.table_of,
                            lambda n, idx: rows_of(self.views._views[n], idx))
            with self.trace.phase("update" if publish else "part"):
                self._update([Record(d, w, raw=canonical(d)) for d, w in recs], end)
            changes.batch_rows = self.choice.cap(self.batch_rows)
        if publish and self.applied > self.visible:
            self._publish(changes)

    def _commit(self, recs: list, end: int, changes) -> None:
        self._update(recs, end)
        self._publish(changes)

    def _update(self, recs: list, end: int) -> None:
        self.stream.apply_batch(recs, source_batch=end)
        if self.stream.timings:  # what the batch's update cost: the next batch's choice
            self.choice.measured(self.stream.timings.pop()["trigger"])
        self.applied = end  # the views hold it; if the write fails, a reconnect writes it

    def _publish(self, changes) -> None:
        """The results of everything applied and its LSN, in one transaction; then the
        slot is acknowledged."""
        end = self.applied
        log = self.stream.log  # the window's parts logged: one fsync, during the write
        durable = self.trace.timed("fsync", log.sync) if log is not None \
            and log.unsynced else None
        with self.trace.phase("write"):
            self.sink.write(self.views.outputs, end, self.stream.pos["batch"], durable=durable)
        self.visible = end
        visible = time.time()
        self.trace.published(end, self._commit_times, visible)
        self.latencies += [visible - t for t in self._commit_times]
        self._commit_times = []
        del self.latencies[:-LATENCIES]
        with self.trace.phase("ack"):
            changes.acknowledge(end)
        self.stream.stats["lsn"] = format_lsn(end)
        with self.trace.phase("checkpoint"):  # begun, or one written meanwhile finished
            self.saver.published()

    def _grow(self, before: Keys) -> None:
        """Load the views again from their inputs with rows, columns or nodes added
        (:mod:`.grow`), before the batch; its checkpoint holds ``before``, the keys before
        the batch."""
        self.saver.wait()
        kinds = mapping.layouts(self.tables, self.links, self.cells)
        new = grow.sizes(self.mapper.grow, self.grow_groups, self.stream.shapes, kinds)
        vs = self.views._views  # links as they are now (a StochasticMatrix changes in place)
        arrays = {n: grow.padded(vs[n], new.get(n, vs[n].shape), n)
                  if n in new or kinds[n] == "edges" or grow.distributed(vs[n]) else vs[n]
                  for n in self.table_of}
        getattr(self.views, "release", lambda: None)()  # Spark: the old blocks unpersisted
        if self.ckpt is not None:  # a crash from here on finds no state: a fresh load
            (self.ckpt / "state.npz").unlink(missing_ok=True)
        pos, stats = dict(self.stream.pos), self.stream.stats
        if self.stream.log is not None:
            self.stream.log.close()
        self._load(arrays)
        self.stream.pos.update({k: pos[k] for k in ("batch", "offset", "source_batch")})
        self.stream.stats = stats
        self._start(self.mapper.keys)
        self.checkpoint_now(before)
        self.grown.update({n: list(v) if kinds[n] == "entries" else v[0]
                           for n, v in new.items()})

    def checkpoint_now(self, keys: Keys | None = None) -> None:  # the keys first: a
        if self.ckpt is None:  # crash between leaves both files
            return
        self.saver.wait()
        (keys or self.mapper.keys).save(self.ckpt, self.stream.pos["batch"])
        self.stream.checkpoint()
        saver.clear(self.ckpt)
        Keys.prune(self.ckpt, self.stream.pos["batch"])

    def close(self) -> dict:
        self.checkpoint_now()
        stats = self.stream.close()
        stats["lsn"] = format_lsn(self.applied)
        stats["reevaluated_batches"] = self.choice.reevaluated
        if self.choice.threshold is not None:
            stats["reevaluate_above"] = self.choice.threshold
        if self.grown:
            stats["grown"] = self.grown  # {input: rows, nodes or [rows, cols]} grown
        solvers = getattr(self.views, "solvers", None)
        if solvers:  # solve views: their certified bounds (sparse inputs may have none)
            stats["error_bound"] = {o: self.views.error_bound(o) for o in self.views.outputs
                                    if o in solvers}
        if self.latencies:
            ms = np.percentile(self.latencies, [50, 99]) * 1000
            stats["latency_ms"] = {"p50": round(ms[0], 2), "p99": round(ms[1], 2),
                                   "transactions": len(self.latencies)}
        if not self.sql.closed:
            self.sql.close()
        self.trace.close()
        return stats
