"""``linview run``: apply a stream of update records with checkpoints that lose nothing.

The record format is in :mod:`linview.app.records` (and the README, and ``linview run
--help``).  Protocol per micro-batch: its records are checked (a bad record stops the run
or, with ``on_error="skip"``, is dropped with a warning; either way nothing of a batch is
half-applied), appended to the write-ahead log (:mod:`linview.app.wal`, CRC32 per entry, one
fsync per batch), applied as one rank-k update per input, and the outputs are written
(:mod:`linview.app.stream_out`).  Every ``checkpoint_every`` batches, and at the end, the views
are saved with the stream position and the log is emptied.

A checkpoint directory holds ``state.npz`` (views + position: batch count, records
consumed, sliding-window slot, a hash chain over the consumed records, the program's and
the initial inputs' hashes) and ``wal.log``.  The state is written before the first batch
is logged, so a log without a state is refused, never replayed onto the initial inputs.
On resume the state is restored, logged batches past it are re-applied, the source's
first records are checked against the hash chain, and reading goes on after them.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from linview.app import input_files, wal
from linview.app.records import (
    BatchBuilder,
    Record,
    check,
    edge_tuple,
    parse_line,
    read_records,
)
from linview.app.stream_out import Outputs
from linview.compiler.scaling import scale_views
from linview.errors import StateError, UpdateError

#: fault injection for tests: die (without cleanup) after this many applied batches
_CRASH_AFTER = int(os.environ.get("LINVIEW_TEST_CRASH_AFTER", "0") or 0)
#: fault injection for tests: die after logging this batch, before applying it
_CRASH_LOGGED = int(os.environ.get("LINVIEW_TEST_CRASH_LOGGED", "0") or 0)
#: fault injection for tests: sleep this long after every batch (to kill -9 mid-stream)
_DELAY = float(os.environ.get("LINVIEW_TEST_BATCH_DELAY", "0") or 0)
CHAIN_START = "0" * 16


def chain(h: str, raw: str) -> str:
    """The hash chain over consumed records: ``h' = sha256(h + raw)`` (16 hex digits)."""
    return hashlib.sha256((h + "\n" + raw).encode()).hexdigest()[:16]


class Stream:
    """The engine behind ``linview run`` on both backends: one views object, a checkpoint
    directory (optional), an output directory (optional) and the position in the source."""

    def __init__(self, prog, *, inputs: list[str], checkpoint=None, out=None,
                 checkpoint_every: int = 100, on_error: str = "stop", restart: bool = False,
                 load_options: dict | None = None, warn=None, source: str | None = None):
        """Long on purpose: It checks a resumed checkpoint against the program, the inputs and the
        source in one place, before anything is applied.  ``source``: the identity of the
        update source, kept in the state and compared on resume (Spark: the directory,
        whose files its query checkpoint names by path)."""
        import linview

        self.prog = prog
        self.timings: list | None = None
        self.warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
        self.on_error, self.checkpoint_every = on_error, checkpoint_every
        self.ckpt = Path(checkpoint) if checkpoint else None
        self.state = self.ckpt / "state.npz" if self.ckpt else None
        self.wal_path = self.ckpt / "wal.log" if self.ckpt else None
        self.out = Outputs(Path(out)) if out else None
        self.source = source
        if restart:
            self._discard()
        given = dict(input_files.load(s) for s in inputs)
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
            self._check_identity(extra, digests, source)
            self.digests = extra["inputs"]
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
            self.views = prog.load(**given, **opts)
            self.digests = digests
            good = 0
        self.shapes = {n: tuple(self.views._views[n].shape) for n in self.views.DYNAMIC}
        self.resumed_at = self.pos["offset"]
        self.stats = {"resumed_at": self.pos["offset"], "replayed": 0, "applied": 0,
                      "skipped": 0, "batches": 0}
        if self.out is not None:
            self.out.resume(self.pos["batch"])
        self.log = None
        if self.ckpt is not None:
            self.ckpt.mkdir(parents=True, exist_ok=True)
            if not self.state.exists():
                self._save()
            self.log = wal.Writer(self.wal_path, good)
        self.expected = {self.pos["offset"]: self.pos["chain"]}
        for e in entries:  # batches logged before a crash but not in the state
            self.expected[e["first"] + e["count"]] = e["chain"]
            recs = [parse_line(r, w) for r, w in zip(e["records"], e["where"], strict=True)]
            self._apply(recs, e["count"], e["chain"], e.get("source_batch", -1), log=False)
            self.stats["replayed"] += len(recs)
        self.since_save = len(entries)

    # -------------------------------------------------------------- identity
    def _check_identity(self, extra: dict, digests: dict, source: str | None) -> None:
        if "inputs" not in extra:
            raise StateError(f"{self.state} was not written by linview run",
                             hint="use --restart to start over")
        for name, d in digests.items():
            if name not in extra["inputs"]:
                raise StateError(f"--input {name} was not given when checkpoint {self.ckpt}"
                                 " started", hint="use --restart to start over with it")
            if extra["inputs"][name] != d:
                raise StateError(f"--input {name} differs from the one checkpoint "
                                 f"{self.ckpt} started from", hint="give the same file, "
                                 "or use --restart to start over from the new one")
        if source is not None and extra.get("source", source) != source:
            raise StateError(f"the update source {source} is not the one checkpoint "
                             f"{self.ckpt} started from ({extra['source']})",
                             hint="give the same --updates, or use --restart to start over "
                             "from the new one")

    def _discard(self) -> None:
        for p in (self.state, self.wal_path):
            if p is not None and p.exists():
                p.unlink()
        if self.out is not None:
            self.out.clear()

    def _save(self) -> None:
        extra = {**self.pos, "inputs": self.digests}
        if self.source is not None:
            extra["source"] = self.source
        self.views.save(self.state, extra=extra)

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
        self._apply([rec for rec, _ in checked], count, h, source_batch, log=True,
                    checked=checked, t_check=t_check)
        self.stats["applied"] += len(checked)
        if _CRASH_AFTER and self.pos["batch"] >= _CRASH_AFTER:
            os._exit(86)  # fault injection for the crash-recovery tests
        if _DELAY:
            time.sleep(_DELAY)
        self.since_save += 1
        if self.ckpt and self.since_save >= self.checkpoint_every:
            self.checkpoint()

    def _apply(self, recs: list[Record], count: int, h: str, source_batch: int,
               log: bool, checked: list | None = None, t_check: float | None = None) -> None:
        """Log (``log``) and apply records; ``checked`` are their ops when the caller
        checked them already (a replay from the log checks them here)."""
        t_check = time.perf_counter() if t_check is None else t_check
        checked = self.check(recs) if checked is None else checked
        batch = self.pos["batch"] + 1
        if log and self.log is not None:
            self.log.append({"batch": batch, "first": self.pos["offset"],
                             "count": count, "chain": h, "source_batch": source_batch,
                             "records": [r.raw for r in recs], "where": [r.where for r in recs]})
            if _CRASH_LOGGED and batch >= _CRASH_LOGGED:
                os._exit(87)  # fault injection: the batch is logged, not applied
        t0 = time.perf_counter()
        undo: list = []
        try:
            ring = self._apply_ops(checked, undo)
        except BaseException:
            for step in reversed(undo):  # nothing of a batch is half-applied
                step()
            raise
        self.pos = {"batch": batch, "offset": self.pos["offset"] + count, "ring": ring,
                    "chain": h, "source_batch": max(source_batch, self.pos["source_batch"])}
        self.stats["batches"] += 1
        t1 = time.perf_counter()
        self.stats["seconds"] = self.stats.get("seconds", 0.0) + t1 - t0
        if self.out is not None:
            self.out.write(self.views, batch, self.pos["offset"], len(recs), source_batch)
        if self.timings is not None:  # benchmarks: where the time of a batch goes
            self.timings.append({"records": len(recs), "check_log": t0 - t_check,
                                 "trigger": t1 - t0, "output": time.perf_counter() - t1})

    def _apply_ops(self, checked: list[tuple[Record, list]], undo: list) -> int:
        """Apply the ops of a batch in record order: the value changes between two other
        kinds of record as one rank-k update per input, consecutive edge records as one
        edge batch per input (``views.update_edges``), each scaling as a scaling of the
        views (:mod:`linview.compiler.scaling`)."""
        ring = self.pos["ring"]
        builder, edges = None, {}
        for rec, ops in [*checked, (None, None)]:
            kind = None if ops is None else ops[0].kind
            if kind not in (None, "scale", "edge"):
                self._apply_edges(edges, undo)
                if builder is None:
                    builder = BatchBuilder(lambda n: _readable(self.views._views[n]),
                                           self.shapes, ring)
                builder.add(ops)
                continue
            if builder is not None:
                ring = builder.ring
                for name, (U, V) in builder.updates().items():
                    self.views.update(name, U, V)
                    undo.append(lambda name=name, U=U, V=V: self.views.update(name, -U, V))
                builder = None
            if kind == "edge":
                for op in ops:
                    edges.setdefault(op.input, []).append((edge_tuple(op), rec.where))
                continue
            self._apply_edges(edges, undo)
            if ops is not None:
                factors = {op.input: op.values for op in ops}
                scale_views(self.views, self.prog.program, factors)
                undo.append(lambda f=factors: scale_views(
                    self.views, self.prog.program, {k: 1 / v for k, v in f.items()}))
        return ring

    def _apply_edges(self, edges: dict, undo: list) -> None:
        """Apply pending edge records (each input's as one batch, atomic, 1-based node ids
        as in the records); undo is the reverse batch (a deleted edge comes back with its
        weight); ``edges`` is emptied."""
        for name, pairs in edges.items():
            if not hasattr(self.views, "update_edges"):
                raise UpdateError(f"{pairs[0][1]}: edge records change the links of a "
                                  f"stochastic input, but {name} is not one",
                                  hint=f"declare '%#linview stochastic {name}' (a "
                                  "column-stochastic link matrix) in the program")
            recs = [(op, a + 1, b + 1, *w) for (op, a, b, *w), _ in pairs]
            weights = self.views.edge_weights(name, recs, base=1)
            self.views.update_edges(name, recs, base=1, labels=[w for _, w in pairs])
            back = [("delete", a, b) if op == "insert" else ("insert", a, b, w)
                    for (op, a, b, *_), w in zip(reversed(recs), reversed(weights),
                                                 strict=True)]
            undo.append(lambda name=name, back=back: self.views.update_edges(name, back,
                                                                             base=1))
        edges.clear()

    def checkpoint(self) -> None:
        if self.ckpt is None:
            return
        self._save()
        self.log.truncate()
        self.since_save = 0

    def close(self) -> dict:
        if self.ckpt is not None:
            self.checkpoint()
            self.log.close()
        return {**self.stats, "offset": self.pos["offset"], "batch": self.pos["batch"]}

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
    distributed matrix through one product with a one-hot vector (one Spark job)."""
    return v if isinstance(v, np.ndarray) else _OneHotReader(v)


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


def run_stream(prog, *, inputs: list[str], updates: str, checkpoint: str | None = None,
               out: str | None = None, checkpoint_every: int = 100, max_batch: int = 1,
               on_error: str = "stop", restart: bool = False, progress=None, warn=None,
               load_options: dict | None = None) -> dict:
    """Apply the records of ``updates`` (a file, a directory or ``-``); return stats."""
    s = Stream(prog, inputs=inputs, checkpoint=checkpoint, out=out, on_error=on_error,
               checkpoint_every=checkpoint_every, restart=restart, load_options=load_options,
               warn=warn)
    try:
        for batch in batches(s.records_after_prefix(updates), max_batch):
            s.apply_batch(batch)
            if progress is not None:
                progress(s)
    finally:
        stats = s.close()
    stats["verify"] = s.views.verify()
    return stats
