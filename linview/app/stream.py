"""``linview run``: apply a stream of updates with checkpoints that lose nothing.

Update records are JSON lines (or Parquet rows with the same fields)::

    {"input": "X", "u": [...], "v": [...]}              rank 1 (U, V also accepted, k×rows)
    {"input": "X", "row": 17, "delta": [...]}           row 17 changes by delta
    {"input": "X", "col": 3, "delta": [...]}            column 3 changes by delta
    {"input": "X", "cell": [i, j], "delta": 0.5}        one entry
    {"input": "X", "row": 17, "delta": [...], "batch": 9}
    {"input": "M", "edge": [from, to], "op": "insert"}   an edge of a stochastic input
                                                         (also "delete"; "base": 1 for
                                                         Octave's 1-based node ids)

Consecutive records with the same ``batch`` id and input form one micro-batch, applied as
one rank-k update.  Protocol per batch: the records are appended to a write-ahead log
(``DIR/wal.jsonl``, fsynced), then applied, then the outputs are written atomically
(``OUT/latest.npz`` and a line in ``OUT/log.jsonl``).  Every ``checkpoint_every`` batches
the views are saved atomically with the stream offset (``DIR/state.npz``) and the log is
truncated.  On restart, the state is restored, logged records past its offset are
re-applied, and the source is read on from the first record not yet logged: nothing is
lost or applied twice.  A malformed record is rejected with its line number and nothing
of its batch is applied.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from linview.errors import InputError, UpdateError
from linview.updates import apply_edge_batch, cell_update, column_update, merge, row_update

#: fault injection for tests: die (without cleanup) after this many applied records
_CRASH_AFTER = int(os.environ.get("LINVIEW_TEST_CRASH_AFTER", "0") or 0)


def _records(source: str) -> Iterator[dict]:
    if source == "-":
        files = [None]
    else:
        p = Path(source)
        if p.is_dir():
            files = sorted([*p.glob("*.jsonl"), *p.glob("*.parquet")])
        elif p.exists():
            files = [p]
        else:
            raise InputError(f"update source {source} does not exist")
    for f in files:
        if f is not None and f.suffix == ".parquet":
            import pyarrow.parquet as pq

            yield from pq.read_table(f).to_pylist()
            continue
        stream = sys.stdin if f is None else open(f)  # noqa: SIM115
        try:
            for line in stream:
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as e:
                        yield {"__error__": f"not JSON: {e}"}
        finally:
            if f is not None:
                stream.close()


def factors(rec: dict, shapes: dict[str, tuple[int, int]]):
    """``(input, U, V)`` of one record (see the module docstring)."""
    if "__error__" in rec:
        raise UpdateError(rec["__error__"])
    name = rec.get("input")
    if name not in shapes:
        raise UpdateError(f"unknown input {name!r}", hint="inputs: " + ", ".join(shapes))
    rows, cols = shapes[name]
    try:
        if "u" in rec or "U" in rec:
            U = np.asarray(rec.get("U", rec.get("u")), dtype=float)
            V = np.asarray(rec.get("V", rec.get("v")), dtype=float)
            if U.ndim == 2:  # given as k lists, one per rank-1 term
                U, V = U.T, V.T
            return name, U, V
        if "row" in rec:
            return (name, *row_update(int(rec["row"]), rec["delta"], rows))
        if "col" in rec:
            return (name, *column_update(int(rec["col"]), rec["delta"], cols))
        if "cell" in rec:
            i, j = rec["cell"]
            return (name, *cell_update(int(i), int(j), float(rec["delta"]), (rows, cols)))
    except (TypeError, ValueError, KeyError) as e:
        raise UpdateError(f"malformed update record: {e}") from None
    raise UpdateError("an update record needs u/v, row, col or cell")


def _batches(records: Iterator[dict], start: int) -> Iterator[tuple[int, list[dict]]]:
    """``(sequence number of the first record, records)`` per batch, from ``start``."""
    batch: list[dict] = []
    first = 0
    for seq, rec in enumerate(records):
        if seq < start:
            continue
        same = batch and "batch" in rec and rec.get("batch") == batch[-1].get("batch") \
            and rec.get("input") == batch[-1].get("input")
        if batch and not same:
            yield first, batch
            batch = []
        if not batch:
            first = seq
        batch.append(rec)
    if batch:
        yield first, batch


def _load_input(spec: str):
    name, eq, value = spec.partition("=")
    if not eq:
        raise InputError(f"bad --input '{spec}'", hint="write NAME=FILE.npy or NAME=NUMBER")
    p = Path(value)
    try:
        if p.suffix == ".npy":
            return name, np.load(p)
        if p.suffix == ".csv":
            return name, np.loadtxt(p, delimiter=",", ndmin=2)
        return name, float(value)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read input {name} from {value}: {e}") from None


def run_stream(prog, *, inputs: list[str], updates: str, checkpoint: str | None = None,
               out: str | None = None, checkpoint_every: int = 100,
               load_options: dict | None = None) -> dict:
    import linview

    ckpt = Path(checkpoint) if checkpoint else None
    state = ckpt / "state.npz" if ckpt else None
    wal = ckpt / "wal.jsonl" if ckpt else None
    if state is not None and state.exists():
        views = linview.restore(state, program=prog, **(load_options or {}))
        offset = int(views.saved_meta.get("extra", {}).get("offset", 0))
    else:
        views = prog.load(**dict(_load_input(s) for s in inputs), **(load_options or {}))
        offset = 0
    shapes = {n: views._views[n].shape for n in views.INPUTS}
    outdir = Path(out) if out else None
    if outdir:
        outdir.mkdir(parents=True, exist_ok=True)
    if ckpt:
        ckpt.mkdir(parents=True, exist_ok=True)
    stats = {"resumed_at": offset, "replayed": 0, "applied": 0, "batches": 0}

    def apply(first: int, batch: list[dict]) -> None:
        if "edge" in batch[0]:  # edge records of a stochastic input (linview.updates)
            apply_edge_batch(views, first, batch)
            _done(first, batch)
            return
        parsed = []
        for i, rec in enumerate(batch):
            try:
                parsed.append(factors(rec, shapes))
            except UpdateError as e:
                raise UpdateError(f"update record {first + i}: {e.message}", hint=e.hint) \
                    from None
        name = parsed[0][0]
        U, V = merge([(u, v) for _, u, v in parsed]) if len(parsed) > 1 else parsed[0][1:]
        views.update(name, U, V)
        _done(first, batch)

    def _done(first: int, batch: list[dict]) -> None:
        nonlocal offset
        offset = first + len(batch)
        stats["batches"] += 1
        if outdir:
            _write_outputs(views, outdir, offset)

    # 1. records logged before a crash but not in the checkpoint
    logged_until = offset
    if wal is not None and wal.exists():
        pending = []
        for line in wal.read_text().splitlines():
            entry = json.loads(line)
            if entry["seq"] >= offset:
                pending.append(entry)
        for first, batch in _group(pending):
            apply(first, batch)
            stats["replayed"] += len(batch)
        logged_until = max([offset] + [e["seq"] + 1 for e in pending])
    # 2. the source, from the first record not yet logged
    since_ckpt = 0
    log = open(wal, "a") if wal is not None else None  # noqa: SIM115
    try:
        for first, batch in _batches(_records(updates), logged_until):
            if log is not None:
                for i, rec in enumerate(batch):
                    log.write(json.dumps({"seq": first + i, "rec": rec}) + "\n")
                log.flush()
                os.fsync(log.fileno())
            apply(first, batch)
            stats["applied"] += len(batch)
            if _CRASH_AFTER and stats["applied"] >= _CRASH_AFTER:
                os._exit(86)  # fault injection for the crash-recovery test
            since_ckpt += 1
            if ckpt and since_ckpt >= checkpoint_every:
                views.save(state, extra={"offset": offset})
                log.truncate(0)
                since_ckpt = 0
    finally:
        if ckpt:
            views.save(state, extra={"offset": offset})
            if log is not None:
                log.truncate(0)
                log.close()
    stats["offset"] = offset
    stats["verify"] = views.verify()
    return stats


def _group(entries: list[dict]) -> Iterator[tuple[int, list[dict]]]:
    recs = [e["rec"] for e in entries]
    if not entries:
        return
    base = entries[0]["seq"]
    for first, batch in _batches(iter(recs), 0):
        yield base + first, batch


def _write_outputs(views, outdir: Path, offset: int) -> None:
    outs = views.outputs
    tmp = outdir / "latest.npz.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in outs.items()})
    os.replace(tmp, outdir / "latest.npz")
    with open(outdir / "log.jsonl", "a") as f:
        f.write(json.dumps({"offset": offset, "updates": views.updates,
                            "norms": {k: float(np.linalg.norm(v)) for k, v in outs.items()}})
                + "\n")
