"""Design matrices of least-squares problems (issue 25).

A least-squares problem ``F \\ Y`` (or its normal equations) is kept by updates of F's
triangular factor when F is a *design*: an input, or a block row ``[ones(m,c) X ...]`` of
ones and distinct inputs (an intercept column is the common case).  An update
``X += U Vᵀ`` of one of its inputs is then ``F += U Wᵀ`` with W = V padded with zero rows
for the other blocks, a rank-k change of F like any other.  The lowering
(``lower_expr.gram_solve``), :mod:`linview.lstsq` and the solve views
(``linview/solve/views.py``) read designs through these functions.
"""

from __future__ import annotations

import numpy as np

from linview.compiler.ir import Node, Op


def design_of(f: Node) -> Node | None:
    """``f`` when it is a design (an input, or a ``CONCAT`` of one block row of ONES and
    distinct inputs with at least one input), else None."""
    if f.op is Op.INPUT:
        return f
    if f.op is not Op.CONCAT or len(f.attr) != 1:
        return None
    names = [c.attr for c in f.children if c.op is Op.INPUT]
    if not names or len(set(names)) != len(names) or any(
            c.op not in (Op.INPUT, Op.ONES) for c in f.children):
        return None
    return f


def gram_design(a: Node, b: Node) -> tuple[Node, str] | None:
    """``(F, Y)`` when ``a \\ b`` is ``(Fᵀ F) \\ (Fᵀ Y)`` with a design F (its expression)
    and an input Y, else None."""
    if a.op is Op.MUL and b.op is Op.MUL:
        ft, f = a.children
        g, y = b.children
        if ft.op is Op.T and ft.children[0] is f and g is ft and y.op is Op.INPUT \
                and design_of(f) is not None:
            return f, y.attr
    return None


def inputs_of(design: Node) -> tuple[str, ...]:
    return (design.attr,) if design.op is Op.INPUT else tuple(
        c.attr for c in design.children if c.op is Op.INPUT)


def design_value(design: Node, env: dict) -> np.ndarray:
    """The m×n matrix F of ``design`` from the inputs' values in ``env``."""
    if design.op is Op.INPUT:
        return env[design.attr]
    blocks = [_dense(env[c.attr]) for c in design.children if c.op is Op.INPUT]
    m = blocks[0].shape[0]
    it = iter(blocks)
    return np.hstack([next(it) if c.op is Op.INPUT else np.ones((m, int(c.cols)))
                      for c in design.children])


def design_change(design: Node, name: str, V: np.ndarray, widths: dict) -> np.ndarray:
    """W of ``F += U Wᵀ`` for the update ``name += U Vᵀ`` (V padded with zero rows for the
    other blocks; ``widths``: columns of each block's value)."""
    if design.op is Op.INPUT:
        return V
    parts = []
    for c in design.children:
        width = int(c.cols) if c.op is Op.ONES else widths[c.attr]
        parts.append(V if c.op is Op.INPUT and c.attr == name
                     else np.zeros((width, V.shape[1])))
    return np.vstack(parts)


def _dense(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x.reshape(-1, 1) if x.ndim < 2 else x
