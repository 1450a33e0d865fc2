"""Scaling updates: inputs multiplied by constants, maintained by scaling views.

When inputs change by ``X ← s_X·X`` (a forgetting factor scales every observation row of a
regression's inputs by √λ), a view that is *homogeneous* in them changes by a constant
factor: ``XᵀX`` by ``s_X²``, ``inv(XᵀX)`` by ``s_X⁻²``, ``XᵀY`` by ``s_X·s_Y``, the OLS
estimate by ``s_X⁻¹·s_Y`` (1 when both scale alike).  :func:`degrees` derives every view's
degree in each input from the IR (products and elementwise products add degrees, inverses
negate them, sums and differences need equal degrees, constants have degree 0, zeros any
degree); :func:`scale_views` applies the factors in place, O(size) per view and nothing
for a factor of 1, where a dense delta ``(s-1)·X`` would cost a full-rank update.  A
program with a view that is not homogeneous in the scaled inputs (``X + eye(n)``) is
re-evaluated from the scaled inputs instead.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from linview.compiler.ir import Node, Op, Program

ANY = "any"  # the degree of a zero matrix: it agrees with every degree


def _add(a, b, sign=1):
    if a is None or b is None:
        return None
    if a == ANY or b == ANY:
        return b if a == ANY else a
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


def _same(ds):
    ds = [d for d in ds if d != ANY]
    if any(d is None for d in ds):
        return None
    if not ds:
        return ANY
    return ds[0] if all(d == ds[0] for d in ds) else None


def degrees(program: Program, scaled) -> dict[str, dict[str, Fraction] | None]:
    """Each input's and view's degree in the ``scaled`` inputs (``None``: not homogeneous)."""
    memo: dict[str, object] = {d.name: ({d.name: Fraction(1)} if d.name in scaled else {})
                               for d in program.inputs}

    def deg(n: Node):
        op, ch = n.op, n.children
        if op in (Op.INPUT, Op.VIEW):
            return memo[n.attr]
        if op in (Op.CONST, Op.EYE, Op.ONES):
            return {}
        if op == Op.ZEROS:
            return ANY
        if op in (Op.MUL, Op.EMUL, Op.SCALE):
            return _add(deg(ch[0]), deg(ch[1]))
        if op == Op.EDIV:
            return _add(deg(ch[0]), deg(ch[1]), -1)
        if op in (Op.NEG, Op.T, Op.SUM, Op.TRACE):
            return deg(ch[0])
        if op == Op.INV:
            d = deg(ch[0])
            return d if d in (None, ANY) else {k: -v for k, v in d.items()}
        if op in (Op.ADD, Op.SUB, Op.CONCAT):
            return _same([deg(c) for c in ch])
        return None  # factors and anything new: not known to be homogeneous

    for st in program.statements:
        memo[st.name] = deg(st.expr)
    return {k: ({} if v == ANY else v) for k, v in memo.items()}


def factors(program: Program, scale: dict[str, float]) -> dict[str, float] | None:
    """The factor of every input and view under ``scale`` (``None``: re-evaluate)."""
    out = {}
    for name, d in degrees(program, scale).items():
        if d is None:
            return None
        out[name] = float(np.prod([scale[k] ** float(p) for k, p in d.items()]))
    return out


def scale_views(views, program: Program, scale: dict[str, float]) -> None:
    """Apply ``X ← s_X·X`` for every ``X`` in ``scale`` to a views object (either backend)."""
    table = factors(program, scale)
    store = views._views
    if table is None:
        arrays = {n: np.asarray(views[n]) * scale.get(n, 1.0) for n in views.INPUTS}
        views._views = views._reevaluate(arrays)
        return
    for name, c in table.items():
        if c == 1.0 or name not in store:
            continue
        v = store[name]
        if isinstance(v, np.ndarray):
            v *= c
        else:  # a distributed matrix scales lazily
            store[name] = v.scaled(c)
