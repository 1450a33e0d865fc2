"""A parser of PostgreSQL's logical replication protocol (the ``pgoutput`` plugin, version 1).

The messages a slot sends for the tables of a publication (PostgreSQL's documentation,
"Logical Replication Message Formats"): integers are big-endian, strings are NUL-terminated,
and a row (``TupleData``) is a count of columns followed by one of ``n`` (NULL), ``u`` (an
unchanged TOASTed value, not sent), ``t`` + length + the value as text, or (binary mode,
PostgreSQL 14 or later) ``b`` + length + the value in its type's binary send format (kept
as ``bytes``: ``tables.parse_values`` decodes the types linview reads), per column.

Only what linview needs is kept: ``Begin`` (the commit's LSN and time), ``Relation`` (a
table's id, name and columns), ``Insert``/``Update``/``Delete`` (the new row, and the old
key when it changed), ``Truncate`` and ``Commit`` (the LSN after the transaction); ``Origin``,
``Type`` and logical-decoding ``Message``s parse to their own small records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from linview.errors import InputError

#: PostgreSQL's epoch (2000-01-01) in Unix seconds: commit times are microseconds since it
PG_EPOCH = 946684800

#: a TOASTed value the update did not change: the old value stands
UNCHANGED = object()


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_time: float  # Unix seconds
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_time: float


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    is_key: bool


@dataclass(frozen=True)
class Relation:
    oid: int
    schema: str
    table: str
    replica_identity: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Change:
    """An Insert, Update or Delete: ``new`` the new row (None for a delete), ``old`` the old
    key or row when sent (an update that changed the key; every delete)."""

    kind: str  # "insert" | "update" | "delete"
    oid: int
    new: tuple | None
    old: tuple | None


@dataclass(frozen=True)
class Truncate:
    oids: tuple[int, ...]


@dataclass(frozen=True)
class Message:
    """A logical-decoding message (``pg_logical_emit_message``)."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(frozen=True)
class Other:
    tag: str


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        vals = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string(self) -> str:
        end = self.data.index(b"\0", self.at)
        s = self.data[self.at:end].decode()
        self.at = end + 1
        return s

    def raw(self, n: int) -> bytes:
        b = self.data[self.at:self.at + n]
        if len(b) != n:
            raise struct.error("short message")
        self.at += n
        return b

    def tuple_data(self) -> tuple:
        values = []
        for _ in range(self.take(">h")):
            kind = self.raw(1)
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(UNCHANGED)
            elif kind == b"t":
                values.append(self.raw(self.take(">i")).decode())
            elif kind == b"b":  # binary mode: the type's send format, decoded by the caller
                values.append(self.raw(self.take(">i")))
            else:
                raise struct.error(f"column kind {kind!r}")
        return tuple(values)


def _time(us: int) -> float:
    return PG_EPOCH + us / 1e6


def parse(data: bytes):
    """One pgoutput message -> one of the records above."""
    r = _Reader(bytes(data))
    try:
        tag = r.raw(1).decode()
        if tag == "B":
            lsn, t, xid = r.take(">QqI")
            return Begin(lsn, _time(t), xid)
        if tag == "C":
            _flags, lsn, end, t = r.take(">bQQq")
            return Commit(lsn, end, _time(t))
        if tag == "R":
            oid = r.take(">I")
            schema, table = r.string(), r.string()
            ident = r.raw(1).decode()
            cols = []
            for _ in range(r.take(">h")):
                flags = r.take(">b")
                name = r.string()
                type_oid, _typmod = r.take(">Ii")
                cols.append(Column(name, type_oid, bool(flags & 1)))
            return Relation(oid, schema, table, ident, tuple(cols))
        if tag == "I":
            oid = r.take(">I")
            r.raw(1)  # 'N'
            return Change("insert", oid, r.tuple_data(), None)
        if tag == "U":
            oid = r.take(">I")
            kind, old = r.raw(1), None
            if kind in (b"K", b"O"):
                old = r.tuple_data()
                kind = r.raw(1)
            return Change("update", oid, r.tuple_data(), old)
        if tag == "D":
            oid = r.take(">I")
            r.raw(1)  # 'K' or 'O'
            return Change("delete", oid, None, r.tuple_data())
        if tag == "T":
            n, _options = r.take(">ib")
            return Truncate(tuple(r.take(">I") for _ in range(n)))
        if tag == "M":
            flags, lsn = r.take(">bQ")
            prefix = r.string()
            return Message(bool(flags & 1), lsn, prefix, r.raw(r.take(">i")))
        return Other(tag)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise InputError(f"a replication message that linview cannot read ({e})",
                         hint="the slot must use the pgoutput plugin, protocol version 1"
                         ) from None


def format_lsn(lsn: int) -> str:
    """``0/16B3748``: PostgreSQL's way of writing a log position."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)
