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


def weight_of(d: Node) -> str | None:
    """The input w when ``d`` is ``diag(w)`` of an input w (the weights of weighted least
    squares, ``W = diag(w)`` as users write it), else None."""
    if d.op is Op.DIAG and d.attr == "tomat" and d.children[0].op is Op.INPUT:
        return d.children[0].attr
    return None


def weight_node(ft: Node, gt: Node, views: dict) -> Node | None:
    """``diag(w)`` (w an input) when ``ft`` and ``gt`` are both ``Fᵀ·W`` with W that
    diagonal matrix (inline, or a view ``W = diag(w)`` of ``views``, as users write
    weighted least squares: ``(X'*W*X) \\ (X'*W*y)``), else None."""
    if not (ft.op is Op.MUL and gt is ft and ft.children[0].op is Op.T):
        return None
    d = ft.children[1]
    d = views.get(d.attr, d) if d.op is Op.VIEW else d
    return d if weight_of(d) is not None else None


def show(design: Node) -> str:
    """A design in Octave's words: ``[ones(m,1) X]``."""
    parts = [c.attr if c.op is Op.INPUT else f"ones({c.rows},{c.cols})" for c in design.children]
    return "[" + " ".join(parts) + "]"


def gram_weights(a: Node, b: Node, views: dict | None = None) -> str | None:
    """The weights' input w when ``a \\ b`` is ``(Fᵀ D F) \\ (Fᵀ D Y)``, ``D = diag(w)``,
    with a design F and an input Y (:func:`gram_design` gives F and Y), else None."""
    found = _weighted(a, b, views or {})
    return None if found is None else found[2]


def _weighted(a: Node, b: Node, views: dict) -> tuple[Node, str, str] | None:
    """``(F, Y, w)`` of ``(Fᵀ D) F`` and ``(Fᵀ D) Y`` as lowered, or of ``Fᵀ (D F)`` and
    ``Fᵀ (D Y)`` after the passes (``D F`` and ``D Y`` then views of ``views``)."""
    if a.op is not Op.MUL or b.op is not Op.MUL:
        return None
    (l, f), (g, y) = a.children, b.children
    if l.op is Op.MUL and g is l:  # as lowered
        ft, d = l.children
    elif l.op is Op.T and g is l:  # after the passes: D F and D Y, views or inline
        df, dy = (views.get(n.attr, n) if n.op is Op.VIEW else n for n in (f, y))
        if not (df.op is Op.MUL and dy.op is Op.MUL and df.children[0] is dy.children[0]):
            return None
        ft, (d, f), y = l, df.children, dy.children[1]
    else:
        return None
    if ft.op is Op.T and ft.children[0] is f and y.op is Op.INPUT \
            and design_of(f) is not None and weight_of(d):
        return f, y.attr, weight_of(d)
    return None


def gram_design(a: Node, b: Node, views: dict | None = None) -> tuple[Node, str] | None:
    """``(F, Y)`` when ``a \\ b`` is ``(Fᵀ F) \\ (Fᵀ Y)`` with a design F (its expression)
    and an input Y, or ``(Fᵀ D F) \\ (Fᵀ D Y)`` with ``D = diag(w)`` of an input w
    (weighted: :func:`gram_weights`; ``views``: the program's views by name), else None."""
    if (found := _weighted(a, b, views or {})) is not None:
        return found[0], found[1]
    if a.op is Op.MUL and b.op is Op.MUL:
        ft, f = a.children
        g, y = b.children
        if ft.op is Op.T and ft.children[0] is f and g is ft and y.op is Op.INPUT \
                and design_of(f) is not None:
            return f, y.attr
    return None


def sqrt_weighted(a: Node, b: Node, views: dict) -> tuple[Node, Node, Node] | None:
    """``(F, Y, w)`` when ``a \\ b`` is ``(sqrt(w).*F) \\ (sqrt(w).*Y)`` (w an input column,
    ``sqrt(w)`` inline or a view, broadcast over F's columns; F a design, Y an input): the
    weighted least squares ``(Fᵀ diag(w) F) \\ (Fᵀ diag(w) Y)``, as Octave users write it
    when they mean QR of the weighted data; else None."""
    def scaled(x: Node) -> tuple[Node, Node] | None:  # s .* x: (s's input w, x)
        if x.op is not Op.EMUL:
            return None
        s, x = x.children
        if s.op is Op.MUL and s.children[1].op is Op.ONES:  # sqrt(w) * ones(1, c)
            s = s.children[0]
        s = views.get(s.attr, s) if s.op is Op.VIEW else s
        if s.op is Op.MAP and s.attr == ("sqrt", None) and s.children[0].op is Op.INPUT \
                and s.children[0].cols == 1:
            return s.children[0], x
        return None
    fa, fb = scaled(a), scaled(b)
    if fa is None or fb is None or fa[0] is not fb[0] or fb[1].op is not Op.INPUT:
        return None
    f = fa[1]
    design = views.get(f.attr, f) if f.op is Op.VIEW else f
    return (f, fb[1], fa[0]) if design_of(design) is not None else None


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
