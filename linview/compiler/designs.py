"""Design matrices of least-squares problems (issue 25).

A least-squares problem ``F \\ Y`` (or its normal equations) is kept by updates of F's
triangular factor when F is a *design*: an input, or a block row ``[ones(m,c) X ...]`` of
ones and distinct inputs (an intercept column is the common case).  An update
``X += U Vᵀ`` of one of its inputs is then ``F += U Wᵀ`` with W = V padded with zero rows
for the other blocks, a rank-k change of F like any other.  The lowering
(``lower_expr.gram_solve``), :mod:`linview.lstsq` and the solve views
(``backends/numpy/solve_view.py``) read designs through these functions.
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


def design_blocks(design: Node) -> tuple:
    """F's blocks in order: an input's name, or the number of columns of a block of ones
    (``('X',)`` for an input F, ``(1, 'X')`` for ``[ones(m,1) X]``)."""
    return (design.attr,) if design.op is Op.INPUT else tuple(
        c.attr if c.op is Op.INPUT else int(c.cols) for c in design.children)


def layout_change(layout: tuple, name: str, V: np.ndarray) -> np.ndarray:
    """W of ``F += U Wᵀ`` for the update ``name += U Vᵀ``: V padded with zero rows for F's
    other blocks.  ``layout``: F's blocks with their widths, the number of columns of a block
    of ones or ``(input, columns)`` (what a generated module passes a solve view)."""
    if len(layout) == 1:
        return V
    return np.vstack([V if not isinstance(b, int) and b[0] == name else
                      np.zeros((b if isinstance(b, int) else b[1], V.shape[1]))
                      for b in layout])
