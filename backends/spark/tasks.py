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
