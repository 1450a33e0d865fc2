"""Initial inputs of ``linview run`` from files: ``--input NAME=FILE[:KEY]`` or ``NAME=NUMBER``.

Accepted: ``.npy``; ``.npz`` and ``.mat`` (``FILE:KEY`` picks an array; without a key, the
array named like the input, else the only array; a sparse matrix, as ``scipy.sparse.save_npz``
or a ``.mat`` file holds it, stays sparse); Parquet (columns ``row`` and ``values``,
the layout :func:`linview.backends.spark.session.write_parquet` writes, rows 0..m-1 once each);
``.csv`` (comma-separated numbers, one matrix row per line); or a number.  An ``.npz`` with
the arrays ``links_n``, ``links_src``, ``links_dst`` and ``links_weight`` (0-based links of
a stochastic input, as ``linview run --source`` saves an edges table) is a
:class:`~linview.solve.stochastic.StochasticMatrix`: dangling nodes stay implicit and link
weights stay as given.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import scipy.sparse as sps

from linview.errors import InputError

SUFFIXES = (".npy", ".npz", ".mat", ".parquet", ".csv")
#: the arrays of an ``.npz`` that holds the links of a stochastic input
LINKS = ("links_n", "links_src", "links_dst", "links_weight")
_HINT = ("write NAME=FILE with FILE .npy, .npz[:KEY], .mat[:KEY], .parquet or .csv, "
         "or NAME=NUMBER")


def parse_spec(spec: str) -> tuple[str, str]:
    name, eq, value = spec.partition("=")
    if not eq or not name.strip().isidentifier() or not value:
        raise InputError(f"bad --input '{spec}'", hint=_HINT)
    return name.strip(), value


def load(spec: str, mmap_npy: bool = False):
    """``(name, value)`` of one ``--input`` argument.  ``mmap_npy``: a ``.npy`` file is
    opened as a read-only memory map, not read (the Spark backend's executors read its
    blocks themselves: ``session.read_npy``)."""
    name, value = parse_spec(spec)
    try:
        return name, float(value)
    except ValueError:
        pass
    path, _, key = value.partition(":") if not Path(value).exists() else (value, "", "")
    p = Path(path)
    if p.suffix not in SUFFIXES:
        raise InputError(f"input {name}: cannot read {value}: unsupported file type "
                         f"'{p.suffix or 'none'}'", hint=_HINT)
    if not p.exists():
        raise InputError(f"input {name}: {p} does not exist")
    try:
        return name, _read(p, key, name, mmap_npy)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - numpy/scipy/pyarrow raise many types
        raise InputError(f"input {name}: cannot read {value}: {e}") from None


def _read(p: Path, key: str, name: str, mmap_npy: bool = False):
    if p.suffix == ".npy":
        return np.load(p, mmap_mode="r" if mmap_npy else None, allow_pickle=False)
    if p.suffix == ".csv":
        return np.loadtxt(p, delimiter=",", ndmin=2)
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            if not key and set(z.files) == set(LINKS):
                from linview.solve.stochastic import StochasticMatrix

                return StochasticMatrix(int(z["links_n"]), z["links_src"], z["links_dst"],
                                        z["links_weight"])
            if not key and {"format", "indptr", "indices", "data", "shape"} <= set(z.files):
                return sps.load_npz(p).tocsc().astype(float)  # scipy.sparse.save_npz's layout
            return z[_pick(list(z.files), key, name, p)]
    if p.suffix == ".mat":
        import scipy.io

        d = {k: v for k, v in scipy.io.loadmat(p).items() if not k.startswith("__")}
        v = d[_pick(list(d), key, name, p)]
        return v.tocsc().astype(float) if sps.issparse(v) else np.asarray(v, dtype=float)
    import pyarrow.parquet as pq

    t = pq.read_table(p)
    if not {"row", "values"} <= set(t.column_names):
        raise InputError(f"input {name}: Parquet {p} needs columns 'row' and 'values', has "
                         + ", ".join(t.column_names))
    rows = t.column("row").to_numpy()
    values = t.column("values").to_pylist()
    if sorted(rows.tolist()) != list(range(len(rows))) or len({len(v) for v in values}) > 1:
        raise InputError(f"input {name}: Parquet {p} must hold rows 0..m-1 exactly once, "
                         "each with the same number of values")
    out = np.empty((len(rows), len(values[0]) if values else 0))
    out[rows] = np.array(values, dtype=float)
    return out


def _pick(keys: list[str], key: str, name: str, p: Path) -> str:
    if key:
        if key not in keys:
            raise InputError(f"input {name}: {p} has no array {key!r}",
                             hint="arrays: " + ", ".join(keys))
        return key
    if name in keys:
        return name
    if len(keys) == 1:
        return keys[0]
    raise InputError(f"input {name}: {p} holds several arrays; pick one with {p}:KEY",
                     hint="arrays: " + ", ".join(keys))


def digest(value) -> str:
    """SHA-256 of an input's value (shape and float64 bytes; a sparse matrix's canonical
    CSC arrays; the links of a stochastic matrix), for checkpoint identity."""
    if hasattr(value, "sparse_part"):  # a StochasticMatrix: its normalised links
        value = value.sparse_part()
    if sps.issparse(value):
        c = sps.csc_matrix(value, dtype=np.float64)
        c.sum_duplicates()
        c.sort_indices()
        h = hashlib.sha256(repr(("csc", c.shape)).encode())
        for a in (c.indptr, c.indices, c.data):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]
    if isinstance(value, np.memmap) and value.ndim >= 1:  # a .npy file left on disk
        h = hashlib.sha256(repr(value.shape).encode())
        step = max(1, DIGEST_CHUNK // max(1, value[0].size * 8))
        for i in range(0, value.shape[0], step):  # the same bytes, a chunk of rows at once
            h.update(np.ascontiguousarray(value[i:i + step], dtype=np.float64).tobytes())
        return h.hexdigest()[:16]
    a = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
    h = hashlib.sha256(repr(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()[:16]


#: bytes of a memory-mapped input that :func:`digest` reads at once
DIGEST_CHUNK = 64 << 20
