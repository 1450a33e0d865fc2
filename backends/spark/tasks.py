"""The functions Spark tasks run on matrix blocks ``(block index, Fortran float64 array)``.

They are plain module-level functions (pickled by reference, arguments bound with
``functools.partial``), so executors need ``linview`` importable: see
:func:`linview.backends.spark.runtime.ship`.  Nothing here imports pyspark.
"""

from __future__ import annotations

import operator

import numpy as np

from linview.backends.numpy import runtime

OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}


def val(x):
    return getattr(x, "value", x)  # a Broadcast or the array itself


def identity(k):
    return k


def w_products(xs, which, splits, axis, kv):
    """The products of one trigger level on one block: for each ``(i, op)`` in ``which``,
    ``op(A) @ xs[i]`` restricted to this block.  A row block (axis 0) gives its rows of
    ``A x`` and the partial ``A[I,:]ᵀ x[I]``; a column block its rows of ``Aᵀ x`` and the
    partial ``A[:,J] x[J]``.  Returns ``(block, {i: result})``."""
    i, b = kv
    xs = val(xs)
    lo, hi = splits[i], splits[i + 1]
    out = {}
    for j, op in which:
        m = b.T if op == "T" else b
        stacked = (op == "N") == (axis == 0)
        out[j] = runtime.dot(m, xs[j] if stacked else xs[j][lo:hi])
    return i, out


def w_touch(x, idx, splits, transpose, it):
    """One-hot ``dot``: only the columns ``idx`` of ``op(b)`` inside this block."""
    for i, b in it:
        lo, hi = splits[i], splits[i + 1]
        sel = idx[(idx >= lo) & (idx < hi)]
        if transpose:
            yield b[sel - lo, :].T @ x[sel]
        else:
            yield b[:, sel - lo] @ x[sel]


def w_outer(P, Q, splits, axis, kv):
    """``b += P[I] Qᵀ`` (row block, axis 0) or ``b += P Q[J]ᵀ`` (column block, axis 1)."""
    i, b = kv
    b = b if b.flags.writeable and b.flags.f_contiguous else np.asfortranarray(b).copy()
    lo, hi = splits[i], splits[i + 1]
    runtime.add_outer(b, P[lo:hi] if axis == 0 else P, Q if axis == 0 else Q[lo:hi])
    return i, b


def w_scale(s, kv):
    return kv[0], np.asfortranarray(s * kv[1])


def w_transpose(kv):
    return kv[0], np.asfortranarray(kv[1].T)


def w_zip(op, sa, sb, rev, pair):
    """``op(sa·a, sb·b)`` of two matching blocks (``op(sb·b, sa·a)`` when rev)."""
    (i, a), (_, b) = pair
    a, b = sa * a, sb * b
    return i, np.asfortranarray(OPS[op](b, a) if rev else OPS[op](a, b))


def w_tile(tl, tr, s, pair):
    """One tile ``C[I,J] = s · op(L)[I,:] op(R)[:,J]`` of a distributed product."""
    (i, L), (j, R) = pair
    return i, (j, s * ((L.T if tl else L) @ (R.T if tr else R)))


def w_row_block(tl, tr, s, pairs):
    """Row block I of a product from the pairs ``(L_I, R_J)`` of one task: its tiles side
    by side."""
    tiles, i = [], None
    for pair in pairs:
        i, tile = w_tile(tl, tr, s, pair)
        tiles.append(tile)
    if tiles:
        yield w_join(1, (i, tiles))


def w_join(axis, kv):
    """Assemble pieces ``(k, piece)`` of one block, ordered by k, along ``axis``."""
    i, parts = kv
    parts = [p for _, p in sorted(parts, key=operator.itemgetter(0))]
    return i, np.asfortranarray(np.concatenate(parts, axis=axis))


def w_split(splits, axis, kv):
    """Cut one block into the pieces of the other layout (axis 1: columns)."""
    i, b = kv
    for j in range(len(splits) - 1):
        lo, hi = splits[j], splits[j + 1]
        yield j, (i, b[:, lo:hi] if axis == 1 else b[lo:hi, :])


def w_reduce(tag, what, s, kv):
    """``(tag, all entries finite)``, ``(tag, max |s·b|)`` or ("sumsq") ``(tag, ‖s·b‖²_F)``
    of one block."""
    b = kv[1]
    if what == "finite":
        return tag, bool(np.all(np.isfinite(b)))
    if what == "sumsq":
        return tag, float(np.sum(np.square(b))) * s * s
    return tag, (float(np.max(np.abs(b))) * abs(s) if b.size else 0.0)


def w_sum(axis, kv):
    return kv[0], kv[1].sum(axis=axis, keepdims=True)


def w_trace(splits, rows, kv):
    i, b = kv
    lo = splits[i]
    k = np.arange(lo, min(splits[i + 1], b.shape[1] if rows else b.shape[0]))
    return float(b[k - lo, k].sum() if rows else b[k, k - lo].sum())


def w_total(kv):
    return float(kv[1].sum())




def w_parquet_key(splits, row):
    """A Parquet row ``(row index, values)`` keyed by the row block that holds it."""
    i = int(np.searchsorted(splits, row[0], side="right")) - 1
    return i, (int(row[0]), row[1])


def w_parquet_block(kv):
    """Row block ``i`` from its rows ``(row index, values)``, ordered by row index."""
    i, items = kv
    items = sorted(items, key=operator.itemgetter(0))
    vals = [[np.nan if v is None else v for v in vs] for _, vs in items]
    return i, np.asfortranarray(np.array(vals, dtype=np.float64))


def w_npy_block(path: str, shape, splits, axis: int, i: int):
    """Block ``i`` (rows ``splits[i]:splits[i+1]``, or columns with ``axis`` 1) of the
    ``.npy`` file at ``path``, read by this executor through a memory map."""
    a = np.load(path, mmap_mode="r", allow_pickle=False)
    if a.shape != tuple(shape):
        raise ValueError(f"{path} is {'×'.join(map(str, a.shape))} on this executor but "
                         f"{'×'.join(map(str, shape))} on the driver: executors read .npy "
                         "inputs themselves, from a filesystem every host sees")
    part = a[splits[i]:splits[i + 1]] if axis == 0 else a[:, splits[i]:splits[i + 1]]
    return i, np.asfortranarray(part, dtype=np.float64)


# ------------------------------------------------------------------ the wider language
_MAPS = {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log}
_PAIRS = {"max": np.maximum, "min": np.minimum, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}


def elementwise(fn: str, a: np.ndarray, param=None, offset: int = 0) -> np.ndarray:
    """Octave's elementwise function ``fn`` of an array (``power``: ``a .^ param``;
    ``tril``/``triu`` of a block whose diagonal is ``offset`` columns to the right)."""
    if fn == "power":
        return np.power(a, float(param))
    if fn == "not":
        return (a == 0).astype(float)
    if fn in ("tril", "triu"):
        return (np.tril if fn == "tril" else np.triu)(a, offset)
    return _MAPS[fn](a)


def pairwise(fn: str, a, b) -> np.ndarray:
    """Octave's elementwise ``max``/``min``, comparison or logical operator (1 or 0)."""
    if fn in ("and", "or"):
        return (np.logical_and if fn == "and" else np.logical_or)(a != 0, b != 0).astype(float)
    out = _PAIRS[fn](a, b)
    return np.asarray(out, dtype=float)


def w_map(fn, param, s, splits, axis, kv):
    """``fn(s·b)`` of one block (a row block's diagonal starts ``lo`` columns right)."""
    i, b = kv
    lo = splits[i]
    return i, np.asfortranarray(elementwise(fn, s * b, param, lo if axis == 0 else -lo))


def w_pair(fn, sa, sb, rev, pair):
    """``fn(sa·a, sb·b)`` of two matching blocks (``fn(sb·b, sa·a)`` when rev)."""
    (i, a), (_, b) = pair
    x, y = sa * a, sb * b
    return i, np.asfortranarray(pairwise(fn, y, x) if rev else pairwise(fn, x, y))


def w_pair_scalar(fn, sa, y, rev, kv):
    """``fn(sa·a, y)`` of one block and a number (``fn(y, sa·a)`` when rev)."""
    i, a = kv
    x = sa * a
    return i, np.asfortranarray(pairwise(fn, y, x) if rev else pairwise(fn, x, y))


def w_extreme(fn, axis, s, kv):
    """``max``/``min`` of ``s·b`` along ``axis`` (kept as a row or column)."""
    i, b = kv
    return i, (np.max if fn == "max" else np.min)(s * b, axis=axis, keepdims=True)


def w_diagonal(splits, axis, kv):
    """The diagonal entries one block holds: ``(first index, values)``."""
    i, b = kv
    lo = splits[i]
    k = np.arange(lo, min(splits[i + 1], b.shape[1] if axis == 0 else b.shape[0]))
    return lo, (b[k - lo, k] if axis == 0 else b[k, k - lo]).copy()


def w_diag_block(n, kv):
    """Row block ``i`` of ``diag(v)`` from its piece of v (starting at row ``lo``)."""
    i, (lo, v) = kv
    b = np.zeros((v.size, n), order="F")
    b[np.arange(v.size), lo + np.arange(v.size)] = v
    return i, b


def w_index(sel, splits, axis, target, kv):
    """The pieces of ``A(rows, cols)`` one block holds, keyed by the result's block along
    the blocked ``axis`` (boundaries ``target``): ``(block, (first position, piece))``.
    ``sel`` holds ``(start, stop, step)`` of the rows and of the columns."""
    i, b = kv
    lo, hi = splits[i], splits[i + 1]
    idx = np.arange(*sel[axis])
    mine = np.nonzero((idx >= lo) & (idx < hi))[0]  # positions of the result in this block
    if not mine.size:
        return
    other = np.arange(*sel[1 - axis])
    piece = b[np.ix_(idx[mine] - lo, other)] if axis == 0 else b[np.ix_(other, idx[mine] - lo)]
    for t in range(len(target) - 1):
        m = (mine >= target[t]) & (mine < target[t + 1])
        if m.any():
            yield t, (int(mine[m][0]), piece[m, :] if axis == 0 else piece[:, m])
