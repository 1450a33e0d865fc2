"""The write-ahead log of ``linview run``: one checksummed entry per micro-batch.

Each entry is one line ``LLLLLLLL CCCCCCCC PAYLOAD`` + newline: the payload's length in
bytes and its CRC32, both 8 hex digits, then the payload, canonical JSON
``{"batch": B, "first": S, "count": C, "records": [...], "where": [...]}`` (batch number,
sequence number of the batch's first source record, records consumed, the applied records
as their source text and where each came from; ``"reevaluate": true`` when the batch
re-evaluated every view instead of running the triggers, so that a replay does the same).
An entry is written with one ``write`` and
fsynced before its batch is applied: one fsync per micro-batch.

Reading it back (resume):

* an entry cut short at the end of the file (a crash mid-write: fewer bytes than its
  header announces and no newline after its start, since the newline is written last)
  is *torn*: it is discarded with a warning naming
  its byte offset, and the file is truncated there.  Its batch was never applied, and the
  source still holds its records, so nothing is lost;
* any other damage (a bad header, a checksum mismatch, a batch or sequence number out of
  order) is *corruption*: :class:`~linview.errors.StateError` names the byte offset and
  the resume stops.  Nothing is applied from a log that cannot be trusted.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from linview import faults
from linview.errors import StateError

_HEADER = re.compile(rb"([0-9a-f]{8}) ([0-9a-f]{8}) ")
HEADER_BYTES = 18


def encode(payload: dict) -> bytes:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return b"%08x %08x " % (len(body), zlib.crc32(body)) + body + b"\n"


@dataclass
class Scan:
    """What :func:`scan` found: the good entries, where they end, and a torn tail."""

    entries: list[dict]
    good_bytes: int
    torn_at: int | None = None


def scan(path: Path) -> Scan:
    """Read and check every entry (see the module docstring)."""
    data = path.read_bytes() if path.exists() else b""
    entries: list[dict] = []
    pos = 0
    while pos < len(data):
        m = _HEADER.match(data, pos, pos + HEADER_BYTES)
        if m is None:
            if b"\n" not in data[pos:]:  # a header cut short by a crash
                return Scan(entries, pos, pos)
            raise StateError(f"write-ahead log {path} is corrupt at byte {pos}: bad entry "
                             "header", hint=_HINT)
        length, crc = int(m.group(1), 16), int(m.group(2), 16)
        start, end = pos + HEADER_BYTES, pos + HEADER_BYTES + length
        if end + 1 > len(data):
            if b"\n" in data[pos:]:  # a torn write never reaches its final newline
                raise StateError(f"write-ahead log {path} is corrupt at byte {pos}: the "
                                 "entry's length runs past its end", hint=_HINT)
            return Scan(entries, pos, pos)
        body = data[start:end]
        if data[end:end + 1] != b"\n" or zlib.crc32(body) != crc:
            raise StateError(f"write-ahead log {path} is corrupt at byte {pos}: checksum "
                             "mismatch", hint=_HINT)
        try:
            entry = json.loads(body)
        except ValueError:
            raise StateError(f"write-ahead log {path} is corrupt at byte {pos}: not JSON",
                             hint=_HINT) from None
        if entries and (entry.get("batch") != entries[-1]["batch"] + 1
                        or entry.get("first") != entries[-1]["first"] + entries[-1]["count"]):
            raise StateError(f"write-ahead log {path} is corrupt at byte {pos}: batch or "
                             "sequence number out of order", hint=_HINT)
        entry["offset"] = pos
        entries.append(entry)
        pos = end + 1
    return Scan(entries, pos)


_HINT = ("the checkpoint cannot be trusted; run again with --restart to start over from "
         "the initial inputs")


class Writer:
    """Appends entries to the log; ``truncate()`` empties it after a checkpoint, and
    ``rollback()`` takes back the last entry of a batch that failed."""

    def __init__(self, path: Path, good_bytes: int):
        self.path = path
        # unbuffered: a write that failed leaves nothing behind to be flushed later
        self.f = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        if self.f.tell() != good_bytes:
            self.f.truncate(good_bytes)
            os.fsync(self.f.fileno())
        self.before_last = good_bytes
        #: set by a caller that syncs itself (:meth:`sync`) before anything depends on
        #: the entries being on disk (the PostgreSQL source: before it acknowledges)
        self.deferred = False
        self.unsynced = False

    def append(self, payload: dict) -> None:
        data = encode(payload)
        self.before_last = self.f.tell()
        faults.point("wal.write")
        view = memoryview(data)
        while view:
            view = view[self.f.write(view):]
        faults.point("wal.sync")
        if self.deferred:
            self.unsynced = True
        else:
            os.fsync(self.f.fileno())

    def sync(self) -> None:
        """The entries appended with :attr:`deferred` set, on disk."""
        if self.unsynced:
            os.fsync(self.f.fileno())
            self.unsynced = False

    def rollback(self) -> None:
        """Cut the log back to before the last append (its batch failed: the source
        still holds its records, which are read again on the next start)."""
        self.f.truncate(self.before_last)
        self.f.seek(self.before_last)
        os.fsync(self.f.fileno())

    def truncate(self) -> None:
        faults.point("wal.truncate")
        self.f.truncate(0)
        self.f.seek(0)
        self.before_last = 0
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()
