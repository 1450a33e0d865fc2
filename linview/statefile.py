"""State files: what ``views.save(path)`` writes and ``linview.restore(path)`` reads.

A state file is data, never code.  It is an ``.npz`` archive (NumPy's zip of ``.npy``
arrays, read with ``allow_pickle=False``) holding

* ``view:NAME`` for every input and view, float64;
* ``__manifest__``: one JSON document with ``format`` (``"linview-state"``),
  ``version`` (:data:`FORMAT_VERSION`), the linview version that wrote it, the program's
  ``.m`` source text, its name and file name, the compile options (``dims``, ``model``,
  ``strategy``, ``rank``, ``backend``), the source hash of the compiled program, the
  update count, the bound sizes, the caller's ``extra`` data, and the SHA-256 of every
  array's bytes;
* ``side:NAME``: small arrays kept beside the views (the probe vectors of maintained
  inverses, ``probe`` in the manifest), hashed in ``side_hashes``.

Restoring parses the manifest with :func:`json.loads`, checks every hash, and compiles
the stored ``.m`` source again with the stored options; the generated module is never
stored, so nothing in the file can run.  Every way of failing is a
:class:`~linview.errors.StateError` that says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import zipfile
import zlib

import numpy as np

from linview import faults
from linview.errors import StateError
from linview.version import __version__

FORMAT = "linview-state"
FORMAT_VERSION = 2
#: program and file names that may come back from a state file into generated code
_SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SAFE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _digest(a: np.ndarray) -> str:
    """An array's checksum as state files keep it: ``cm:`` and its :func:`content_digest`
    (the values column by column, read in place from a Fortran-ordered matrix, as views
    and inputs are kept), which is also what view keys call its content."""
    if a.ndim == 2 and a.dtype == np.float64:
        return "cm:" + content_digest(a)
    return _c_digest(a)


def _c_digest(a: np.ndarray) -> str:
    """The checksum of the C-order bytes (files written before ``cm:`` checksums)."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _matches(a: np.ndarray, digest) -> bool:
    return isinstance(digest, str) and a.dtype == np.float64 and digest == (
        _digest(a) if digest.startswith("cm:") else _c_digest(a))


def _all_match(arrays: dict[str, np.ndarray], hashes: dict) -> str | None:
    """The first array whose checksum does not match, or None; large arrays are hashed
    on two threads (hashlib releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    names = sorted(arrays, key=lambda k: -arrays[k].size)
    with ThreadPoolExecutor(2) as pool:
        ok = list(pool.map(lambda k: _matches(arrays[k], hashes[k]), names))
    return next((k for k, good in zip(names, ok, strict=True) if not good), None)


def content_of(doc: dict, name: str) -> str | None:
    """The :func:`content_digest` of view or input ``name`` of a state file ``read``
    returned ``doc`` for, when its checksum is one (files written since ``cm:``)."""
    h = (doc.get("hashes") or {}).get(f"view:{name}")
    return h[3:] if isinstance(h, str) and h.startswith("cm:") else None


def sparse_digest(x, kind: str = "sparse") -> str:
    """SHA-256 of a scipy.sparse matrix's shape and values through its canonical CSR arrays
    (duplicates summed, explicit zeros dropped, column ids sorted), never densified: equal
    matrices have one digest however they were built.  ``kind`` tells the storage apart
    (a stochastic input's links against a plain sparse matrix of the same values)."""
    c = x.tocsr(copy=True)
    c.sum_duplicates()
    c.eliminate_zeros()
    c.sort_indices()
    h = hashlib.sha256(f"{kind}{tuple(int(s) for s in c.shape)}".encode())
    for a in (c.indptr.astype(np.int64), c.indices.astype(np.int64),
              c.data.astype(np.float64)):
        h.update(memoryview(np.ascontiguousarray(a)))
    return h.hexdigest()


def content_digest(a: np.ndarray) -> str:
    """SHA-256 of a matrix's shape and values (column-major), read in place when the
    array is Fortran-ordered: what view keys (:mod:`linview.compiler.keys`) call an
    input's or a view's content."""
    a = np.asarray(a, dtype=np.float64)
    h = hashlib.sha256(f"f8{a.shape}".encode())
    if a.ndim == 2 and not a.flags.f_contiguous:  # columns a few MB at a time: no copy of
        step = max(1, (1 << 21) // max(1, 8 * a.shape[0]))  # the whole (C-ordered input)
        for j in range(0, a.shape[1], step):
            h.update(memoryview(np.asfortranarray(a[:, j:j + step]).T))
        return h.hexdigest()
    a = np.asfortranarray(a)
    h.update(memoryview(a.T if a.ndim == 2 else a.reshape(-1)))
    return h.hexdigest()


def write(path, views: dict[str, np.ndarray], manifest: dict,
          side: dict[str, np.ndarray] | None = None) -> None:
    """Write ``views`` and ``manifest`` (plus format fields and hashes) to ``path``
    atomically: a temporary file, fsynced, renamed over ``path``.  ``side``: small arrays
    kept beside the views (probe vectors, :func:`read_side`), hashed apart
    (``side_hashes``) so that a reader that does not know them ignores them."""

    arrays = {f"view:{k}": np.asarray(v, dtype=np.float64) for k, v in views.items()}
    extra = {f"side:{k}": np.asarray(v, dtype=np.float64) for k, v in (side or {}).items()}
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "linview": __version__,
           **manifest, "hashes": {k: _digest(a) for k, a in arrays.items()}}
    if extra:
        doc["side_hashes"] = {k: _digest(a) for k, a in extra.items()}
        arrays.update(extra)
    try:
        text = json.dumps(doc)
    except (TypeError, ValueError) as e:
        raise StateError(f"cannot save {path}: extra= must hold JSON values ({e})") from None
    buf = io.BytesIO()
    np.savez(buf, __manifest__=np.array(text), **arrays)
    write_atomic(path, buf.getvalue())


def write_atomic(path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temporary file and a rename, so that a
    crash leaves the old file or the new one, never a torn one."""
    tmp = f"{path}.tmp"
    try:
        faults.point("save.write")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        faults.point("save.rename")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a failed save leaves the old file alone
            os.unlink(tmp)
        raise


def read(path) -> tuple[dict, dict[str, np.ndarray]]:
    """``(manifest, {view name: array})`` from a state file, every array checked against
    its hash; a :class:`StateError` naming the reason for anything else."""
    try:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        if not zipfile.is_zipfile(path):
            raise StateError(f"cannot read saved state {path}: the file is truncated or "
                             "corrupt (not a zip archive of arrays)")
        with np.load(path, allow_pickle=False) as z:
            files = set(z.files)
            if "__manifest__" not in files:
                if "__meta__" in files and "'kind': 'solve'" in str(z["__meta__"]):
                    raise StateError(
                        f"{path} holds solve views in the format linview used before they "
                        "became part of the generated module; it cannot be restored",
                        hint="load the inputs again (solve views are solved warm from "
                        "scratch) and save with this version")
                if "__meta__" in files:
                    raise StateError(
                        f"{path} was written by an older linview (state format 1, which "
                        "stored generated code); it cannot be restored safely",
                        hint="load the inputs again and save with this version")
                raise StateError(f"{path} is not a linview state file (no manifest)")
            try:
                manifest = str(z["__manifest__"])
            except Exception as e:  # noqa: BLE001 - a flipped byte in its header: any error
                raise ValueError(f"the manifest's header is corrupt ({e})") from None
            doc = json.loads(manifest)
            arrays = _members(path, z, [k for k in z.files if k.startswith("view:")])
    except StateError:
        raise
    except FileNotFoundError:
        raise StateError(f"saved state {path} does not exist") from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error,
            UnicodeDecodeError) as e:
        raise StateError(f"cannot read saved state {path}: the file is truncated or "
                         f"corrupt ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StateError(f"{path} is not a linview state file (unknown format)")
    if doc.get("version") != FORMAT_VERSION:
        raise StateError(f"{path} has state format {doc.get('version')!r}; this linview "
                         f"reads format {FORMAT_VERSION}",
                         hint=f"it was written by linview {doc.get('linview')}; restore it "
                         "with that version")
    hashes = doc.get("hashes")
    if not isinstance(hashes, dict) or set(hashes) != set(arrays):
        raise StateError(f"{path} is corrupt: its arrays do not match its manifest")
    bad = _all_match(arrays, hashes)
    if bad is not None:
        raise StateError(f"{path} is corrupt: array {bad[5:]} does not match its checksum")
    _check_fields(path, doc)
    return doc, {k[5:]: a for k, a in arrays.items()}


def read_manifest(path) -> dict | None:
    """The manifest of a state file alone (no array read, no checksum checked: a quick
    look, e.g. at the stream position ``linview run`` kept in ``extra``); ``None`` where
    it cannot be read as one (:func:`read` then says why)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            doc = json.loads(str(z["__manifest__"]))
    except Exception:  # noqa: BLE001 - a missing, truncated or corrupt file: any error
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def read_side(path, doc: dict) -> dict[str, np.ndarray]:
    """The side arrays of a state file ``read`` returned ``doc`` for, each checked against
    its hash (none when the file has none); a :class:`StateError` when one does not
    match."""
    hashes = doc.get("side_hashes") or {}
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise StateError(f"{path} is corrupt: its manifest is malformed")
    if not hashes:
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in hashes if k.startswith("side:")}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise StateError(f"cannot read saved state {path}: the file is truncated or "
                         f"corrupt ({type(e).__name__}: {e})") from None
    for k, a in arrays.items():
        if set(arrays) != set(hashes) or not _matches(a, hashes[k]):
            raise StateError(f"{path} is corrupt: array {k} does not match its checksum")
    return {k[5:]: a for k, a in arrays.items()}


def _members(path, z, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the open archive ``z``.  A stored (uncompressed) float64
    member, as :func:`write` makes them, is read straight from the file into an array of
    its own (one copy, no intermediate buffers); any other through NumPy.  Checksums are
    checked by the caller."""
    from numpy.lib import format as npy

    headers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for k in names:
            info = zf.getinfo(f"{k}.npy")
            f.seek(info.header_offset)
            local = f.read(30)
            if info.compress_type != zipfile.ZIP_STORED or local[:4] != b"PK\x03\x04":
                out[k] = z[k]
                continue
            f.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little")
                   + int.from_bytes(local[28:30], "little"))
            version = npy.read_magic(f)
            if version not in headers:
                out[k] = z[k]
                continue
            try:
                shape, fortran, dtype = headers[version](f)
            except Exception as e:  # noqa: BLE001 - a flipped byte: any parse error
                raise ValueError(f"the header of array {k[5:]} is corrupt ({e})") from None
            if dtype != np.float64 or len(shape) != 2:
                out[k] = z[k]
                continue
            a = np.empty(shape, dtype=np.float64, order="F" if fortran else "C")
            buf = memoryview(a.T if fortran else a).cast("B")
            if a.size and f.readinto(buf) != a.nbytes:
                raise EOFError(f"array {k[5:]} is cut short")
            out[k] = a
    return out


def _check_fields(path, doc: dict) -> None:
    """The manifest fields that reach the compiler have the types and forms it expects
    (a module compiled ahead of time stores no program: then none of them)."""
    program = all(k not in doc for k in ("source", "name", "filename", "options")) or (
        isinstance(doc.get("source"), str)
        and isinstance(doc.get("name"), str) and _SAFE_NAME.fullmatch(doc["name"])
        and isinstance(doc.get("filename"), str) and _SAFE_FILE.fullmatch(doc["filename"])
        and isinstance(doc.get("options"), dict))
    ok = (program
          and isinstance(doc.get("updates"), int)
          and isinstance(doc.get("dims"), dict)
          and all(isinstance(v, int) for v in doc["dims"].values())
          and all(isinstance(k, str) and isinstance(v, str)
                  for k, v in (doc.get("keys") or {}).items()))
    if not ok:
        raise StateError(f"{path} is corrupt: its manifest is malformed")


__all__ = ["write", "read", "read_manifest", "read_side", "content_digest", "content_of",
           "FORMAT_VERSION"]
