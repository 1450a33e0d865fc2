"""Which program input reads which table, and a committed transaction as update records.

The *rows* layout (``--table X=obs.x``): the key column (``--key``, default ``id``) is the
1-based matrix row; the column holds the row's values, a one-dimensional array (``float8[]``)
or one number (a one-column input).  Several inputs may read columns of one table.

A transaction's changes become the records of :mod:`linview.app.records` (``"row": k,
"set": values`` for an insert or an update, ``"remove": k`` for a delete) that
:class:`~linview.app.stream.Stream` logs and applies, one rank-k update per input.  Old
values come from linview's own copy of the inputs (the views), so PostgreSQL's default
REPLICA IDENTITY (the primary key) suffices.  :class:`Keys` remembers which rows exist, so
that a delete or update of a row linview does not have is an error, not a silent change.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from linview.app.postgres.keys import Keys, Staged
from linview.app.postgres.pgoutput import UNCHANGED, format_lsn
from linview.app.records import pack
from linview.errors import InputError, UpdateError

#: an array or number column's text: what COPY and pgoutput send
_NULL = "\\N"


@dataclass(frozen=True)
class TableInput:
    """``--table INPUT=SCHEMA.TABLE.COLUMN`` (``TABLE.COLUMN``: schema public)."""

    input: str
    schema: str
    table: str
    column: str

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


def parse_table_spec(spec: str) -> TableInput:
    name, eq, where = spec.partition("=")
    parts = where.split(".")
    if not eq or not name.strip().isidentifier() or len(parts) not in (2, 3) \
            or not all(parts):
        raise InputError(f"bad --table '{spec}'", hint="write --table INPUT=TABLE.COLUMN or "
                         "INPUT=SCHEMA.TABLE.COLUMN, e.g. --table X=obs.x (table obs, column x)")
    if len(parts) == 2:
        parts = ["public", *parts]
    return TableInput(name.strip(), *parts)


class BadRow(Exception):
    """A row that cannot become an update: ``what`` says why (the caller adds where)."""


#: the types whose binary send format linview decodes (pgoutput's binary mode): type oid
#: -> the big-endian NumPy type of the value (an array type: of its elements).  Not real
#: (float4): its text is a short decimal, which the initial load (COPY, text) reads as
#: another float64 than the binary value's, and the load and the stream must agree.
INT_TYPES = {21: ">i2", 23: ">i4", 20: ">i8"}
FLOAT_TYPES = {701: ">f8"}
ARRAY_TYPES = {1022: ">f8"}
BINARY_TYPES = {**INT_TYPES, **FLOAT_TYPES, **ARRAY_TYPES}


def parse_values(text, width: int | None, oid: int | None = None) -> np.ndarray:
    """A column's text (``{1,2.5}`` or ``2.5``), or its binary send format (``bytes`` of
    type ``oid``), as finite floats; ``width``: the count expected (None: any, the first
    row's)."""
    if text is None or text == _NULL:
        raise BadRow("NULL value")
    if text is UNCHANGED:
        raise BadRow("an unchanged TOASTed value without a row to take it from")
    if isinstance(text, bytes):
        return _binary_values(text, oid, width)
    s = text.strip()
    if s.startswith("{"):
        if not s.endswith("}") or "{" in s[1:]:
            raise BadRow(f"not a one-dimensional array: {_short(s)}")
        items = [x.strip() for x in s[1:-1].split(",")] if s[1:-1].strip() else []
    else:
        items = [s]
    try:  # the common case at NumPy's speed; the loop below says what is wrong
        fast = np.array(items, dtype=float)
        if np.isfinite(fast).all() and (width is None or len(fast) == width):
            return fast
    except ValueError:
        pass
    out = []
    for x in items:
        if x.upper() == "NULL":
            raise BadRow("NULL element in the array")
        try:
            v = float(x)
        except ValueError:
            raise BadRow(f"non-numeric value {_short(x)!r}") from None
        if not math.isfinite(v):
            raise BadRow(f"non-finite value {x}")
        out.append(v)
    if width is not None and len(out) != width:
        raise BadRow(f"{len(out)} values where the input has {width} columns")
    return np.array(out)


def _binary_values(data: bytes, oid: int | None, width: int | None) -> np.ndarray:
    """``parse_values`` of a value in its type's binary send format: a number, or a
    one-dimensional array (``array_send``: dimensions, a has-NULL flag, the element type,
    (length, lower bound) per dimension, then (byte count, value) per element)."""
    try:
        if oid in ARRAY_TYPES:
            ndim, has_null, _elem = struct.unpack_from(">iiI", data)
            if ndim > 1:
                raise BadRow(f"not a one-dimensional array ({ndim} dimensions)")
            if has_null:
                raise BadRow("NULL element in the array")
            item = np.dtype([("len", ">i4"), ("v", ARRAY_TYPES[oid])])
            n = struct.unpack_from(">i", data, 12)[0] if ndim else 0
            recs = np.frombuffer(data, item, count=n, offset=20 if ndim else 12)
            if len(data) != (20 if ndim else 12) + n * item.itemsize \
                    or (recs["len"] != item["v"].itemsize).any():
                raise BadRow("a malformed array value")
            a = recs["v"].astype(float)
        elif oid in FLOAT_TYPES or oid in INT_TYPES:
            a = np.frombuffer(data, BINARY_TYPES[oid], count=1).astype(float)
        else:
            raise BadRow(f"a binary value of type oid {oid}, which linview does not read")
    except (struct.error, ValueError):
        raise BadRow("a malformed binary value") from None
    bad = ~np.isfinite(a)
    if bad.any():
        v = a[bad][0]
        raise BadRow(f"non-finite value {'NaN' if v != v else ('-' if v < 0 else '') + 'Infinity'}")
    if width is not None and len(a) != width:
        raise BadRow(f"{len(a)} values where the input has {width} columns")
    return a


def _short(s: str) -> str:
    return s if len(s) <= 40 else s[:37] + "..."


def parse_key(text, oid: int | None = None) -> int:
    if text is None or text is UNCHANGED:
        raise BadRow("no key value (is the key column part of the table's REPLICA "
                     "IDENTITY, e.g. its primary key?)")
    if isinstance(text, bytes):  # binary mode: an integer key (BINARY_TYPES)
        if oid not in INT_TYPES or len(text) != np.dtype(INT_TYPES[oid]).itemsize:
            raise BadRow(f"a binary key of type oid {oid}, which linview does not read")
        return int.from_bytes(text, "big", signed=True)
    try:
        k = int(text)
    except ValueError:
        raise BadRow(f"non-integer key {_short(str(text))!r}") from None
    return k


class Mapper:
    """Turns one transaction's changes into records, or raises :class:`UpdateError` naming
    the table, the key and the LSN (nothing of the transaction is kept)."""

    def __init__(self, tables: dict[str, list[TableInput]], shapes: dict[str, tuple],
                 key: str, keys: Keys, handlers: dict | None = None):
        """``handlers``: other layouts' tables -> ``f(change, columns, present)`` that
        returns the change's records (the edges layout)."""
        self.tables, self.shapes, self.key, self.keys = tables, shapes, key, keys
        self.handlers = handlers or {}
        #: the (input, axis) that may grow past their size (:mod:`.grow`), and the sizes
        #: that accepted transactions need: {(input, axis): largest key or index}
        self.growable: set[tuple[str, int]] = set()
        self.grow: dict[tuple[str, int], int] = {}
        self.columns: dict[str, dict[str, int]] = {}  # table -> column -> position
        self.types: dict[str, dict[str, int]] = {}  # table -> column -> type oid

    def set_columns(self, table: str, cols: list) -> None:
        """``cols``: the table's columns as (name, type oid), in order."""
        self.columns[table] = {n: i for i, (n, _) in enumerate(cols)}
        self.types[table] = dict((n, oid) for n, oid in cols)

    def row_values(self, table: str, row: tuple, where) -> dict[str, list[float] | None]:
        """Each input's values in a row (None: an unchanged TOASTed column)."""
        out = {}
        for ti in self.tables[table]:
            text = row[self.columns[table][ti.column]]
            if text is UNCHANGED:
                out[ti.input] = None
                continue
            try:
                out[ti.input] = parse_values(text, self.shapes[ti.input][1],
                                             self.types[table][ti.column])
            except BadRow as e:
                raise BadRow(f"column {ti.column}: {e}") from None
        return out

    def transaction(self, changes: list[tuple[str, object]], lsn: int) -> list[dict]:
        """``changes``: (table, pgoutput Change) in order -> records (dicts)."""
        present = {t: Staged(k, self.keys.journal.setdefault(t, {}))
                   for t, k in self.keys.present.items()}
        records: list[dict] = []
        self._grow = dict(self.grow)
        for table, ch in changes:
            key = None
            try:
                cols = self.columns[table]
                if table in self.handlers:
                    recs = self.handlers[table](ch, cols, present[table])
                    for d in recs:  # edges and entries past a size that may grow
                        for axis, k in enumerate(d.get("edge") or d.get("cell") or ()):
                            self._need(d["input"], (0, 1) if "edge" in d else (axis,), k)
                    records += recs
                    continue
                oid = self.types[table][self.key]
                old_key = parse_key(ch.old[cols[self.key]], oid) if ch.old is not None \
                    else None
                key = parse_key(ch.new[cols[self.key]], oid) if ch.new is not None else old_key
                if ch.kind == "delete" or (old_key is not None and old_key != key):
                    k = old_key
                    if k not in present[table]:
                        raise BadRow("delete of a row that linview does not have")
                    present[table].discard(k)
                    inputs = [ti.input for ti in self.tables[table]]
                    records.append({"remove": k, "inputs": inputs})
                    if ch.kind == "delete":
                        continue
                self._check_range(table, key)
                values = self.row_values(table, ch.new, None)
                if ch.kind == "insert" or old_key not in (None, key):
                    if key in present[table]:
                        raise BadRow("insert of a row that exists already")
                    if any(v is None for v in values.values()):
                        raise BadRow("an unchanged TOASTed value in a new row")
                elif key not in present[table]:
                    raise BadRow("update of a row that linview does not have")
                present[table].add(key)
                records += [{"input": n, "row": key, "set": v}
                            for n, v in values.items() if v is not None]
            except BadRow as e:
                at = "" if key is None else f", key {key}"
                raise UpdateError(f"table {table}{at}, transaction at LSN "
                                  f"{format_lsn(lsn)}: {e}") from None
        self.pending = present
        return records

    def commit(self) -> None:
        """The last :meth:`transaction` was accepted: its rows become linview's copy."""
        for staged in self.pending.values():
            staged.apply()
        self.pending = {}
        self.grow = self._grow

    def _check_range(self, table: str, key: int) -> None:
        for ti in self.tables[table]:
            rows = self.shapes[ti.input][0]
            if key > rows and (ti.input, 0) in self.growable:
                self._need(ti.input, (0,), key)
            elif not 1 <= key <= rows:
                raise BadRow(f"key out of range: input {ti.input} has rows 1..{rows}")

    def _need(self, name: str, axes: tuple, k: int) -> None:
        """Index ``k`` (1-based) along ``axes`` of ``name``: past a size that may grow, the
        size it needs (the handlers checked the sizes that may not)."""
        for a in axes:
            if k > self.shapes[name][a] and (name, a) in self.growable:
                self._grow[(name, a)] = max(k, self._grow.get((name, a), 0))


def collapse(changes: list[tuple[dict, str]], present: dict[str, set],
             input_table: dict[str, str], rows_of) -> list[tuple[dict, str]]:
    """A micro-batch's records, one per (input, row) or (input, entry): the last value in
    the batch as ``"add": new - old`` (``rows_of(input, indices)``: those 0-based rows of
    the input before the batch, read at once, so the batch costs time linear in its rows
    and one read of a distributed input), ``"remove"`` (a row) or ``"set": 0`` (an entry)
    for one that existed before the batch and not after it.  ``present``: the rows and
    entries before the batch; ``changes``: (record, where) in commit order."""
    final: dict[tuple, tuple] = {}
    others = []  # edge records, in order
    for d, where in changes:
        if "edge" in d:
            others.append((d, where))
        elif "remove" in d:
            for name in d["inputs"]:
                final[(name, d["remove"])] = (None, where)
        elif "cell" in d:
            final[(d["input"], tuple(d["cell"]))] = (d.get("value"), where)
        else:
            final[(d["input"], d["row"])] = (d["set"], where)
    wanted: dict[str, set] = {}  # the old rows the "add" records need
    for (name, at), (values, _) in final.items():
        if values is not None:
            wanted.setdefault(name, set()).add((at[0] if isinstance(at, tuple) else at) - 1)
    old = {}
    for name, idx in wanted.items():
        idx = sorted(idx)
        old.update({(name, i): r for i, r in zip(idx, rows_of(name, idx), strict=True)})
    out = []
    for (name, at), (values, where) in final.items():
        cell = isinstance(at, tuple)
        if values is None:
            if at in present[input_table[name]]:
                out.append(({"input": name, "cell": list(at), "set": 0.0} if cell
                            else {"remove": at, "inputs": [name]}, where))
            continue
        if cell:
            v = values - float(old[name, at[0] - 1][at[1] - 1])
            out.append(({"input": name, "cell": list(at), "add": v}, where))
            continue
        out.append(({"input": name, "row": at, "add": pack(values - old[name, at - 1])}, where))
    return out + others


def rows_of(view, idx: list[int]) -> np.ndarray:
    """Rows ``idx`` (0-based) of an input as a dense (len(idx), cols) array: a NumPy array
    indexed, a ``scipy.sparse`` one sliced, a distributed one (Spark) multiplied by one-hot
    columns in one job that reads only the blocks holding those rows."""
    if isinstance(view, np.ndarray):
        return view[idx]
    if hasattr(view, "tocsr"):
        return view.tocsr()[idx].toarray()
    E = np.zeros((view.shape[0], len(idx)))
    E[idx, np.arange(len(idx))] = 1.0
    return np.asarray(view.dot(E, transpose=True)).T
