"""Update records: reading them strictly and turning a micro-batch into rank-k updates.

One record format for ``linview run`` on every backend (README "Streams of updates").
Indices are **1-based**, as in the Octave programs; an index must be a JSON integer (not
a float or a bool); values must be finite numbers of the right count::

    {"input": "X", "u": [...], "v": [...]}            X += u vᵀ  ("U"/"V": k lists, rank k)
    {"input": "X", "row": 17, "add": [...]}           row 17 += values  ("delta" = "add")
    {"input": "X", "row": 17, "set": [...]}           row 17 := values
    {"input": "X", "col": 3, "add" | "set": [...]}    a column
    {"input": "X", "cell": [i, j], "add" | "set": x}  one entry
    {"observe": {"X": [...], "Y": [...]}}             an observation into the next slot of
                                                      a ring over the rows (sliding window)
    {"observe": {"X": [...], "Y": [...]}, "row": i}   an observation into slot i
    {"remove": i}                                     zero row i of every dynamic input
    {"remove": i, "inputs": ["X", "Y"]}               ... of these inputs
    {"forget": 0.99}                                  forgetting factor λ: every earlier
                                                      observation's weight times λ (the
                                                      rows of every dynamic input, or of
                                                      "inputs", times √λ)
    {"scale": s, "inputs": ["A"]}                     A := s·A
    {"input": "M", "edge": [from, to], "op": "insert" | "delete"[, "weight": w]}
                                                      a link of a stochastic input (one
                                                      declared '%#linview stochastic M'):
                                                      entry M(to, from), out-degree
                                                      renormalised

A vector of values (``"add"``, ``"set"``, ``"delta"``, ``"u"``, ``"v"``) may also be written
``{"f8": BASE64}``: the base64 of its little-endian float64 bytes, exact and compact (what
the PostgreSQL source logs: :func:`pack`).

Any record may carry ``"batch": ID``: consecutive records with the same id form one
micro-batch.  Every change of a micro-batch to one input is one rank-k update; "set"
records read the value the earlier records of the batch left.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from linview.errors import InputError, UpdateError

KINDS = ("u/v factors, row, col, cell, edge, observe or remove")
_PLAIN = {float, int}
_KEYS = {"input", "u", "v", "U", "V", "row", "col", "cell", "add", "delta", "set",
         "observe", "remove", "inputs", "batch", "forget", "scale", "edge", "op", "weight"}


@dataclass
class Record:
    """One record as read: ``where`` is ``FILE:LINE`` (Parquet: ``FILE:row N``)."""

    data: object
    where: str
    error: str | None = None
    raw: str = ""


@dataclass(frozen=True)
class Op:
    """One change of one input: kind in factor / row / col / cell / edge, mode add or set
    (an edge: insert or delete, ``values`` its weight or None); ``index`` is 0-based here
    (converted from the record's 1-based index)."""

    input: str
    kind: str
    mode: str = "add"
    index: tuple = ()
    values: object = None
    factors: tuple = ()


# ------------------------------------------------------------------ reading
def source_files(source: str) -> list[Path | None]:
    """The files of an update source in order (``None`` for stdin)."""
    if source == "-":
        return [None]
    p = Path(source)
    if p.is_dir():
        return sorted([*p.glob("*.jsonl"), *p.glob("*.json"), *p.glob("*.parquet")])
    if p.is_file():
        return [p]
    raise InputError(f"update source {source} does not exist",
                     hint="give a .jsonl or .parquet file, a directory of them, or - for stdin")


def read_text(text: str, name: str, first_line: int = 1) -> Iterator[Record]:
    """The records of JSON-lines text (blank lines skipped)."""
    for no, line in enumerate(text.splitlines(), first_line):
        if line.strip():
            yield parse_line(line, f"{name}:{no}")


def parse_line(line: str, where: str) -> Record:
    raw = line.strip()
    try:
        return Record(json.loads(raw, parse_constant=_reject_constant), where, raw=raw)
    except (json.JSONDecodeError, ValueError) as e:
        return Record(None, where, f"not valid JSON: {e}", raw)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def read_records(source: str) -> Iterator[Record]:
    """Every record of a source: files in name order, lines in order."""
    for f in source_files(source):
        if f is None:
            for no, line in enumerate(sys.stdin, 1):
                if line.strip():
                    yield parse_line(line, f"<stdin>:{no}")
        elif f.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_table(f).to_pylist()
            except Exception as e:  # noqa: BLE001 - pyarrow raises several types
                raise InputError(f"cannot read Parquet update file {f}: {e}") from None
            for i, row in enumerate(rows, 1):
                data = {k: v for k, v in row.items() if v is not None}
                yield Record(data, f"{f}:row {i}", raw=canonical(data))
        else:
            with open(f) as fh:
                yield from read_text(fh.read(), str(f))


def canonical(data) -> str:
    """The record as canonical JSON (what the write-ahead log and prefix hash store)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------ checking
def _index(x, n: int, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise UpdateError(f"{what} must be an integer, not {json.dumps(x)}",
                          hint="indices are whole numbers, 1-based as in Octave")
    if not 1 <= x <= n:
        hint = "indices are 1-based as in Octave"
        if x == 0:
            hint += " (index 0 looks 0-based: add 1)"
        raise UpdateError(f"{what} {x} is out of range 1..{n}", hint=hint)
    return x - 1


def _number(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise UpdateError(f"{what} must be a number, not {json.dumps(x)}")
    try:
        x = float(x)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise UpdateError(f"{what} is {x}: values must be finite")
    return x


def pack(values) -> dict:
    """A vector as ``{"f8": BASE64}`` (its little-endian float64 bytes): what
    :func:`_vector` reads back bit for bit, without printing or parsing decimals."""
    return {"f8": base64.b64encode(np.asarray(values, dtype="<f8").tobytes()).decode()}


def _unpack(x: dict, what: str) -> list | np.ndarray:
    if set(x) != {"f8"} or not isinstance(x["f8"], str):
        raise UpdateError(f"{what} must be a list of numbers or {{\"f8\": BASE64}}, not "
                          f"{json.dumps(x)[:40]}")
    try:
        return np.frombuffer(base64.b64decode(x["f8"], validate=True), "<f8").astype(float)
    except (ValueError, binascii.Error):
        raise UpdateError(f"{what}: f8 is not the base64 of float64 values") from None


def _vector(x, n: int, what: str) -> np.ndarray:
    if isinstance(x, dict):
        a = _unpack(x, what)
        if len(a) != n:
            raise UpdateError(f"{what} has {len(a)} values, expected {n}")
        bad = np.flatnonzero(~np.isfinite(a))
        if len(bad):
            raise UpdateError(f"{what}[{bad[0] + 1}] is {a[bad[0]]}: values must be finite")
        return a
    if not isinstance(x, list):
        raise UpdateError(f"{what} must be a list of {n} numbers, not {json.dumps(x)[:40]}")
    if len(x) != n:
        raise UpdateError(f"{what} has {len(x)} values, expected {n}")
    if set(map(type, x)) <= _PLAIN:  # the fast path (bool is not int here)
        try:
            a = np.array(x, dtype=float)
        except OverflowError:
            a = np.array([np.inf])
        if np.isfinite(a).all():
            return a
    return np.array([_number(v, f"{what}[{i + 1}]") for i, v in enumerate(x)])


def _matrix(x, n: int, what: str) -> np.ndarray:
    if isinstance(x, list) and x and all(isinstance(r, list) for r in x):
        return np.column_stack([_vector(r, n, f"{what}[{i + 1}]") for i, r in enumerate(x)])
    return _vector(x, n, what).reshape(-1, 1)


def _one(rec: dict, keys: tuple[str, ...], what: str) -> tuple[str, object]:
    found = [k for k in keys if k in rec]
    if len(found) != 1:
        raise UpdateError(f"{what} needs exactly one of " + ", ".join(f"'{k}'" for k in keys)
                          + (f", got {', '.join(found)}" if found else ""))
    return found[0], rec[found[0]]


def check(rec: Record, shapes: dict[str, tuple[int, int]]) -> list[Op]:
    """The changes one record asks for, checked against the inputs' shapes (every error
    is an :class:`UpdateError` naming the record's file and line)."""
    try:
        return _check(rec, shapes)
    except UpdateError as e:
        raise UpdateError(f"{rec.where}: {e.message}", hint=e.hint) from None


def _check(rec: Record, shapes: dict[str, tuple[int, int]]) -> list[Op]:
    if rec.error:
        raise UpdateError(rec.error)
    d = rec.data
    if not isinstance(d, dict):
        raise UpdateError(f"an update record is a JSON object, not {type(d).__name__}",
                          hint="see 'linview run --help' for the record format")
    unknown = sorted(set(d) - _KEYS)
    if unknown:
        raise UpdateError(f"unknown field {unknown[0]!r}", hint="fields: " + ", ".join(
            sorted(_KEYS)))
    kinds = [k for k in ("input", "observe", "remove", "forget", "scale") if k in d]
    if len(kinds) != 1:
        raise UpdateError("a record is one change: it needs exactly one of 'input', "
                          "'observe', 'remove', 'forget' or 'scale'"
                          + (f", got {', '.join(kinds)}" if kinds else ""))
    if "observe" in d:
        return _observe(d, shapes)
    if "remove" in d:
        return _remove(d, shapes)
    if "forget" in d or "scale" in d:
        return _scale(d, shapes)
    name = d.get("input")
    if name not in shapes:
        raise UpdateError(f"unknown input {json.dumps(name)}",
                          hint="dynamic inputs: " + ", ".join(shapes))
    rows, cols = shapes[name]
    if any(k in d for k in ("u", "v", "U", "V")):
        _, u = _one(d, ("u", "U"), "a factor record")
        _, v = _one(d, ("v", "V"), "a factor record")
        U, V = _matrix(u, rows, "u"), _matrix(v, cols, "v")
        if U.shape[1] != V.shape[1]:
            raise UpdateError(f"u has {U.shape[1]} columns but v has {V.shape[1]}")
        return [Op(name, "factor", factors=(U, V))]
    if "edge" in d:
        return [_edge(d, name, rows, cols)]
    kind, idx = _one(d, ("row", "col", "cell"), f"a record for {name} (or {KINDS})")
    mode, val = _one(d, ("add", "delta", "set"), f"a {kind} record")
    mode = "set" if mode == "set" else "add"
    if kind == "row":
        return [Op(name, "row", mode, (_index(idx, rows, "row"),), _vector(val, cols, mode))]
    if kind == "col":
        return [Op(name, "col", mode, (_index(idx, cols, "col"),), _vector(val, rows, mode))]
    if not isinstance(idx, list) or len(idx) != 2:
        raise UpdateError(f"cell must be [row, col], not {json.dumps(idx)}")
    return [Op(name, "cell", mode, (_index(idx[0], rows, "row"), _index(idx[1], cols, "col")),
               _number(val, mode))]


def _edge(d: dict, name: str, rows: int, cols: int) -> Op:
    """``{"input": M, "edge": [from, to], "op": "insert" | "delete"[, "weight": w]}``."""
    extra = sorted(set(d) - {"input", "edge", "op", "weight", "batch"})
    if extra:
        raise UpdateError(f"an edge record has no field {extra[0]!r}",
                          hint='write {"input": "M", "edge": [from, to], "op": "insert"}')
    e, op = d["edge"], d.get("op")
    if not isinstance(e, list) or len(e) != 2:
        raise UpdateError(f"edge must be [from, to], not {json.dumps(e)}")
    if op not in ("insert", "delete"):
        raise UpdateError(f"an edge record needs \"op\": \"insert\" or \"delete\", not "
                          f"{json.dumps(op)}")
    src, dst = _index(e[0], cols, "edge source"), _index(e[1], rows, "edge target")
    w = None
    if "weight" in d:
        if op == "delete":
            raise UpdateError("a deleted edge has no weight")
        w = _number(d["weight"], "weight")
        if w <= 0:
            raise UpdateError(f"weight {w} must be positive")
    return Op(name, "edge", op, (src, dst), w)


def rank(checked: list[tuple[Record, list[Op]]]) -> int:
    """The rank-1 changes of a batch's value ops (a factor op: its columns)."""
    return sum(op.factors[0].shape[1] if op.kind == "factor" else 1
               for _, ops in checked for op in ops if op.kind not in ("edge", "scale"))


def edge_tuple(op: Op) -> tuple:
    """An edge op as ``views.update_edges`` takes it: ``(op, from, to[, weight])``, 0-based."""
    return (op.mode, *op.index, *(() if op.values is None else (op.values,)))


def _observe(d: dict, shapes) -> list[Op]:
    obs = d["observe"]
    if not isinstance(obs, dict) or not obs:
        raise UpdateError("observe must map input names to rows of values")
    rows = _same_rows(list(obs), shapes)
    slot = _index(d["row"], rows, "row") if "row" in d else None
    return [Op(n, "row", "set", (slot,), _vector(v, shapes[n][1], f"observe.{n}"))
            for n, v in obs.items()]


def _remove(d: dict, shapes) -> list[Op]:
    names = d.get("inputs", list(shapes))
    if not isinstance(names, list) or not names:
        raise UpdateError("inputs must be a list of input names")
    rows = _same_rows(names, shapes)
    i = _index(d["remove"], rows, "remove")
    return [Op(n, "row", "set", (i,), np.zeros(shapes[n][1])) for n in names]


def _scale(d: dict, shapes) -> list[Op]:
    names = d.get("inputs", list(shapes))
    if not isinstance(names, list) or not names or any(n not in shapes for n in names):
        raise UpdateError("inputs must be a list of input names",
                          hint="dynamic inputs: " + ", ".join(shapes))
    if "forget" in d:
        lam = _number(d["forget"], "forget")
        if not 0 < lam <= 1:
            raise UpdateError(f"forget {lam} is not a forgetting factor in (0, 1]")
        s = math.sqrt(lam)
    else:
        s = _number(d["scale"], "scale")
        if s == 0:
            raise UpdateError("scale 0 would erase the inputs; set them instead")
    return [Op(n, "scale", values=s) for n in names]


def _same_rows(names: list, shapes) -> int:
    for n in names:
        if n not in shapes:
            raise UpdateError(f"unknown input {json.dumps(n)}",
                              hint="dynamic inputs: " + ", ".join(shapes))
    rows = {shapes[n][0] for n in names}
    if len(rows) != 1:
        raise UpdateError("an observation spans inputs with the same number of rows; "
                          + ", ".join(f"{n} has {shapes[n][0]}" for n in names))
    return rows.pop()
