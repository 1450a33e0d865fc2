"""``linview run``: apply a stream of update records with checkpoints that lose nothing.

Records: :mod:`linview.app.records` (and the README, ``linview run --help``).  Per
micro-batch: its records are checked (a bad record stops the run or, with ``on_error=
"skip"``, is dropped with a warning; nothing of a batch is half-applied), appended to the
write-ahead log (:mod:`linview.app.wal`, CRC32 per entry, one fsync per batch), applied as
one rank-k update per input (:mod:`.batches`), and the outputs written (:mod:`.stream_out`).
Every ``checkpoint_every`` batches, and at the end, the views are saved with the stream
position and the log is emptied.

A checkpoint directory holds ``state.npz`` (views + position: batch count, records
consumed, sliding-window slot, a hash chain over the consumed records, the program's and
the initial inputs' hashes) and ``wal.log``.  The state is written before the first batch
is logged, so a log without a state is refused, never replayed onto the initial inputs.
On resume the state is restored, logged batches past it are re-applied, the source's
first records are checked against the hash chain, and reading goes on after them.

Stopping (``docs/stopping.md``): logging, applying and publishing a batch, and writing a
checkpoint, are critical sections (:mod:`linview.app.signals`): a signal is deferred to
their end, so the state is saved at batch boundaries only.  A batch that fails midway
(an exception, a full disk) marks the views *dirty*: its log entry is taken back and
nothing is saved any more, so the next start restores the last checkpoint and replays
the log, exactly.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as sps

from linview import faults
from linview.app import input_files, signals, wal
from linview.app.batches import BatchBuilder
from linview.app.records import (
    Record,
    check,
    edge_tuple,
    parse_line,
    rank,
    read_records,
)
from linview.app.stream_out import Outputs
from linview.compiler.scaling import scale_views
from linview.errors import StateError, UpdateError

_WRITE_HINT = ("nothing of the batch in progress was saved; free space or make the folder "
               "writable, then run the same command again: it resumes from the checkpoint "
               "and its write-ahead log")

CHAIN_START = "0" * 16


def chain(h: str, raw: str) -> str:
    """The hash chain over consumed records: ``h' = sha256(h + raw)`` (16 hex digits)."""
    return hashlib.sha256((h + "\n" + raw).encode()).hexdigest()[:16]


def check_identity(extra: dict, digests: dict, source: str | None, ckpt: Path) -> None:
    """A resumed checkpoint's ``extra`` against the run's input files and update source."""
    if "inputs" not in extra:
        raise StateError(f"{ckpt / 'state.npz'} was not written by linview run",
                         hint="use --restart to start over")
    for name, d in digests.items():
        if name not in extra["inputs"]:
            raise StateError(f"--input {name} was not given when checkpoint {ckpt}"
                             " started", hint="use --restart to start over with it")
        if extra["inputs"][name] != d:
            raise StateError(f"--input {name} differs from the one checkpoint {ckpt} started "
                             "from", hint="give the same file, or use --restart to start "
                             "over from the new one")
    if source is not None and extra.get("source", source) != source:
        raise StateError(f"the update source {source} is not the one checkpoint {ckpt} "
                         f"started from ({extra['source']})", hint="give the same --updates, "
                         "or use --restart to start over from the new one")


class Stream:
    """The engine behind ``linview run`` on both backends: one views object, a checkpoint
    directory (optional), an output directory (optional) and the position in the source."""

    def __init__(self, prog, *, inputs: list[str], checkpoint=None, out=None,
                 checkpoint_every: int = 100, on_error: str = "stop", restart: bool = False,
                 load_options: dict | None = None, warn=None, source: str | None = None,
                 mmap_npy: bool = False):
        """Long on purpose: It checks a resumed checkpoint against the program, the inputs and the
        source in one place, before anything is applied.  ``source``: the identity of the
        update source, kept in the state and compared on resume (Spark: the directory,
        whose files its query checkpoint names by path).  ``mmap_npy``: ``.npy`` inputs are
        given to ``load()`` as memory maps (Spark: its executors read them)."""
        import linview

        self.prog = prog
        self.timings: list | None = None
        self.warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
        self.on_error, self.checkpoint_every = on_error, checkpoint_every
        self.ckpt = Path(checkpoint) if checkpoint else None
        self.state = self.ckpt / "state.npz" if self.ckpt else None
        self.wal_path = self.ckpt / "wal.log" if self.ckpt else None
        self.out = self._io(f"the outputs in {out}", Outputs, Path(out)) if out else None
        self.source = source
        self.dirty = False  # a batch failed midway: these views are never saved
        self.eval_seconds: float | None = None
        if restart:
            self._discard()
        given = dict(input_files.load(s, mmap_npy) for s in inputs)
        digests = {n: input_files.digest(v) for n, v in given.items()}
        opts = load_options or {}
        entries, self.pos = [], {"batch": 0, "offset": 0, "ring": 0, "chain": CHAIN_START,
                                 "source_batch": -1}
        if self.state is not None and self.state.exists():
            scan = wal.scan(self.wal_path)
            if scan.torn_at is not None:
                self.warn(f"discarded a torn last entry of {self.wal_path} at byte "
                          f"{scan.torn_at} (written when the run stopped; its records are "
                          "read again from the source)")
            try:
                self.views = linview.restore(self.state, program=prog, **opts)
            except StateError as e:
                if not e.message.startswith(("the saved state was written by program",
                                             "the saved state was written by a different")):
                    raise
                raise StateError(f"the program differs from the one checkpoint {self.ckpt} "
                                 f"started with ({e.message})", hint="run the same program, "
                                 "or use --restart to start over with this one") from None
            extra = dict(self.views.saved_meta.get("extra", {}))
            check_identity(extra, digests, source, self.ckpt)
            if getattr(self.views, "reuse_report", None) is not None:  # an edited program
                self.warn(f"the program changed since checkpoint {self.ckpt} was saved; "
                          f"views by key (docs/view_store.md): {self.views.reuse_report}")
            self.digests = extra["inputs"]
            self.eval_seconds = extra.get("eval_seconds")
            self.pos = {k: extra[k] for k in self.pos}
            entries = [e for e in scan.entries if e["batch"] > self.pos["batch"]]
            if entries and entries[0]["batch"] != self.pos["batch"] + 1:
                raise StateError(f"write-ahead log {self.wal_path} starts at batch "
                                 f"{entries[0]['batch']} but the state is at batch "
                                 f"{self.pos['batch']}", hint=wal._HINT)
            good = scan.good_bytes
        else:
            if self.wal_path is not None and self.wal_path.exists() \
                    and self.wal_path.stat().st_size:
                raise StateError(f"checkpoint {self.ckpt} has a write-ahead log but no "
                                 "state.npz: it cannot be resumed, and replaying the log "
                                 "onto the initial inputs would give wrong results",
                                 hint="restore state.npz, or run with --restart to start "
                                 "over from the initial inputs")
            t0 = time.perf_counter()
            self.views = prog.load(**given, **opts)
            self.eval_seconds = time.perf_counter() - t0
            if getattr(self.views, "reuse_report", None) is not None:  # --store
                self.warn(f"views by key from {opts['store']}: {self.views.reuse_report}")
            self.digests = digests
            good = 0
        self.shapes = {n: tuple(self.views._views[n].shape) for n in self.views.DYNAMIC}
        self.resumed_at = self.pos["offset"]
        self.stats = {"resumed_at": self.pos["offset"], "replayed": 0, "replayed_batches": 0,
                      "applied": 0, "skipped": 0, "batches": 0, "seconds": 0.0}
        #: what only one backend reports (Spark: batches skipped, read from its log, ...)
        self.backend_stats: dict = {}
        #: ``f(rank) -> bool`` (the PostgreSQL source): whether a batch re-evaluates every
        #: view once (``views.reevaluate_updates``), not the triggers; logged with the batch
        self.reevaluate_when = None
        if self.out is not None:
            self._io(f"the outputs in {out}", self.out.resume, self.pos["batch"])
        self.log = None
        self.since_save = 0
        if self.ckpt is not None:
            with signals.critical():
                self._io(f"the checkpoint folder {self.ckpt}", self.ckpt.mkdir, 0o777, True,
                         True)
                if not self.state.exists():
                    self._io(f"the checkpoint {self.state}", self._save)
                self.log = self._io(f"the write-ahead log {self.wal_path}", wal.Writer,
                                    self.wal_path, good)
        self.expected = {self.pos["offset"]: self.pos["chain"]}
        for e in entries:  # batches logged before a crash but not in the state
            self.expected[e["first"] + e["count"]] = e["chain"]
            recs = [parse_line(r, w) for r, w in zip(e["records"], e["where"], strict=True)]
            self._apply(recs, e["count"], e["chain"], e.get("source_batch", -1), replay=True,
                        reevaluate=e.get("reevaluate", False))

    def _discard(self) -> None:
        for p in (self.state, self.wal_path):
            if p is not None and p.exists():
                p.unlink()
        if self.out is not None:
            self.out.clear()

    def _save(self, path=None) -> None:  # path: elsewhere (postgres/saver.py)
        extra = {**self.pos, "inputs": self.digests, "eval_seconds": self.eval_seconds}
        if self.source is not None:
            extra["source"] = self.source
        self.views.save(path or self.state, extra=extra)

    @staticmethod
    def _io(what: str, fn, *args):
        """``fn(*args)``, which writes; an ``OSError`` there (a full disk, a read-only
        folder) becomes a :class:`StateError` naming ``what`` and the way on."""
        try:
            return fn(*args)
        except OSError as e:
            raise StateError(f"cannot write {what}: {e.strerror or e}",
                             hint=_WRITE_HINT) from None

    # -------------------------------------------------------------- batches
    def check(self, recs: list[Record]) -> list[tuple[Record, list]]:
        """The records' ops; a bad record raises (stop) or is dropped with a warning."""
        good = []
        for rec in recs:
            try:
                good.append((rec, check(rec, self.shapes)))
            except UpdateError as e:
                if self.on_error == "stop":
                    raise UpdateError(f"update record {e.message}", hint=(
                        e.hint + "\n" if e.hint else "") + "(nothing of its batch was "
                        "applied; --on-error skip drops bad records)") from None
                self.warn(f"skipped update record {e.message}")
                self.stats["skipped"] += 1
        return good

    def apply_batch(self, recs: list[Record], count: int | None = None,
                    source_batch: int = -1) -> None:
        """Check, log, apply and publish one micro-batch of source records."""
        count = len(recs) if count is None else count
        h = self.pos["chain"]
        for rec in recs:
            h = chain(h, rec.raw)
        t_check = time.perf_counter()
        checked = self.check(recs)  # once: the log holds only good records
        self._apply([rec for rec, _ in checked], count, h, source_batch, replay=False,
                    checked=checked, t_check=t_check)
        if self.ckpt and self.since_save >= self.checkpoint_every:
            self.checkpoint()

    def _apply(self, recs: list[Record], count: int, h: str, source_batch: int,
               replay: bool, checked: list | None = None, t_check: float | None = None,
               reevaluate: bool = False) -> None:
        """Log (unless a ``replay`` from the log), apply and publish records as one batch,
        a critical section (a signal waits for its end); ``checked`` are their ops when the
        caller checked them already (a replay checks them here)."""
        t_check = time.perf_counter() if t_check is None else t_check
        checked = self.check(recs) if checked is None else checked
        batch = self.pos["batch"] + 1
        logged = not replay and self.log is not None
        if not replay and self.reevaluate_when is not None:
            reevaluate = bool(self.reevaluate_when(rank(checked)))
        with signals.critical():
            try:
                if logged:
                    self._io(f"the write-ahead log {self.wal_path}", self.log.append, {
                        "batch": batch, "first": self.pos["offset"], "count": count,
                        "chain": h, "source_batch": source_batch,
                        "records": [r.raw for r in recs], "where": [r.where for r in recs],
                        **({"reevaluate": True} if reevaluate else {})})
                    faults.point("batch.logged", batch)
                t0 = time.perf_counter()
                ring = self._apply_ops(checked, reevaluate)
                t1 = time.perf_counter()
                offset = self.pos["offset"] + count
                if self.out is not None:
                    self._io(f"the outputs in {self.out.root}", self.out.write, self.views,
                             batch, offset, len(recs), source_batch)
            except BaseException:
                self._failed(logged)
                raise
            self.pos = {"batch": batch, "offset": offset, "ring": ring, "chain": h,
                        "source_batch": max(source_batch, self.pos["source_batch"])}
            self.since_save += 1
            st = self.stats
            st["replayed" if replay else "applied"] += len(checked)
            st["replayed_batches" if replay else "batches"] += 1
            st["seconds"] += t1 - t0
            if self.timings is not None:  # benchmarks: where the time of a batch goes
                self.timings.append({"records": len(recs), "check_log": t0 - t_check,
                                     "trigger": t1 - t0, "output": time.perf_counter() - t1})
            faults.point("batch.done", batch)

    def _failed(self, logged: bool) -> None:
        """A batch failed midway: its changes may be half-applied, and only a restart
        from the last checkpoint and the log is exact.  These views are never saved
        (``dirty``), and the batch's own log entry is taken back (its records are read
        from the source again; a batch the runtime refused is not replayed)."""
        self.dirty = True
        if logged:
            with contextlib.suppress(OSError):
                self.log.rollback()

    def _apply_ops(self, checked: list[tuple[Record, list]], reevaluate: bool = False) -> int:
        """Apply the ops of a batch in record order: the value changes between two other
        kinds of record as one rank-k update per input (``reevaluate``: the inputs changed,
        then every view re-evaluated once), consecutive edge records as one edge batch per
        input (``views.update_edges``), each scaling as a scaling of the views
        (:mod:`linview.compiler.scaling`)."""
        ring = self.pos["ring"]
        builder, edges = None, {}
        for rec, ops in [*checked, (None, None)]:
            kind = None if ops is None else ops[0].kind
            if kind not in (None, "scale", "edge"):
                self._apply_edges(edges)
                if builder is None:
                    builder = BatchBuilder(lambda n: _readable(self.views._views[n]),
                                           self.shapes, ring)
                builder.add(ops)
                continue
            if builder is not None:
                ring = builder.ring
                updates = builder.updates(rows=reevaluate)
                if reevaluate:  # (U, V) and row changes, then one re-evaluation
                    if any(updates):
                        self.views.reevaluate_updates(*updates)
                    updates = {}
                for name, (U, V) in updates.items():
                    self.views.update(name, U, V)
                    faults.point("batch.op")
                builder = None
            if kind == "edge":
                for op in ops:
                    edges.setdefault(op.input, []).append((edge_tuple(op), rec.where))
                continue
            self._apply_edges(edges)
            if ops is not None:
                scale_views(self.views, self.prog.program, {op.input: op.values for op in ops})
                faults.point("batch.op")
        return ring

    def _apply_edges(self, edges: dict) -> None:
        """Apply pending edge records (each input's as one batch, atomic, 1-based node ids
        as in the records); ``edges`` is emptied."""
        for name, pairs in edges.items():
            if not hasattr(self.views, "update_edges"):
                raise UpdateError(f"{pairs[0][1]}: edge records change the links of a "
                                  f"stochastic input, but {name} is not one",
                                  hint=f"declare '%#linview stochastic {name}' (a "
                                  "column-stochastic link matrix) in the program")
            recs = [(op, a + 1, b + 1, *w) for (op, a, b, *w), _ in pairs]
            self.views.update_edges(name, recs, base=1, labels=[w for _, w in pairs])
            faults.point("batch.op")
        edges.clear()

    def checkpoint(self) -> None:
        """Save the views at this batch boundary and empty the log (a critical section);
        nothing when the views are dirty."""
        if self.ckpt is None or self.dirty:
            return
        with signals.critical():
            try:
                self._io(f"the checkpoint {self.state}", self._save)
                self._io(f"the write-ahead log {self.wal_path}", self.log.truncate)
            except BaseException:
                self.dirty = True  # the log still holds every batch since the last save
                raise
            self.since_save = 0

    def close(self) -> dict:
        """Save (unless dirty, or saved at this batch already), close the log; the
        summary."""
        if self.log is not None:
            try:
                if self.since_save:
                    self.checkpoint()
            finally:
                self.log.close()
                self.log = None
        return self.summary()

    def summary(self) -> dict:
        """The same fields on both backends (``"spark"``: what only Spark reports)."""
        return {**self.stats, "offset": self.pos["offset"], "batch": self.pos["batch"],
                "spark": self.backend_stats or None}

    # -------------------------------------------------------------- the NumPy source
    def records_after_prefix(self, source: str) -> Iterator[Record]:
        """The source's records after those already consumed, once the consumed prefix is
        checked against the hash chain (else :class:`StateError` says where it differs)."""
        h, seq, last = CHAIN_START, 0, max(self.expected)
        if self.expected.get(0, CHAIN_START) != CHAIN_START:
            raise StateError("the checkpoint's hash chain does not start empty")
        for rec in read_records(source):
            if seq >= last:
                yield rec
                continue
            h = chain(h, rec.raw)
            seq += 1
            if seq in self.expected and self.expected[seq] != h:
                raise StateError(f"the update source {source} no longer holds the records "
                                 f"this checkpoint applied: the first {seq} records differ "
                                 f"(last checked: {rec.where})",
                                 hint="give the same source, or --restart to start over")
        if seq < last:
            raise StateError(f"the update source {source} ends after {seq} records, but this "
                             f"checkpoint applied {last}",
                             hint="give the same source, or --restart to start over")


def _readable(v):
    """Rows, columns and entries of a view for "set" records: a NumPy array as it is; a
    ``scipy.sparse`` input as dense pieces; a distributed matrix through one product with
    a one-hot vector (one Spark job)."""
    if isinstance(v, np.ndarray):
        return v
    return _SparseReader(v) if sps.issparse(v) else _OneHotReader(v)


class _SparseReader:
    def __init__(self, A):
        self.A = A.tocsr()

    def __getitem__(self, key):
        out = self.A[key]
        return out.toarray().ravel() if sps.issparse(out) else out


class _OneHotReader:
    def __init__(self, A):
        self.A = A

    def __getitem__(self, key):
        i, j = key
        m, n = self.A.shape
        if isinstance(i, int):
            e = np.zeros((m, 1))
            e[i] = 1.0
            row = np.asarray(self.A.dot(e, transpose=True)).ravel()
            return row if not isinstance(j, int) else row[j]
        e = np.zeros((n, 1))
        e[j] = 1.0
        return np.asarray(self.A.dot(e)).ravel()


def batches(records: Iterator[Record], max_batch: int) -> Iterator[list[Record]]:
    """Micro-batches: consecutive records with the same ``"batch"`` id, else up to
    ``max_batch`` consecutive records without one."""
    batch: list[Record] = []
    key = None
    for rec in records:
        k = rec.data.get("batch", None) if isinstance(rec.data, dict) else None
        if batch and (k != key or (k is None and len(batch) >= max_batch)):
            yield batch
            batch = []
        key = k
        batch.append(rec)
    if batch:
        yield batch
