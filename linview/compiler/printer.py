"""Math notation for IR nodes, as in the thesis' listings: ``U_B := [U, A U + U (Vᵀ U)]``.

Products are juxtaposition, ``ᵀ`` is the transpose, ``s·E`` a scaling; parentheses only
where precedence needs them.
"""

from __future__ import annotations

import sympy as sp

from linview.compiler.ir import Node, Op
from linview.compiler.ops import ATOM, OPS


def _dim(e) -> str:
    return str(sp.sympify(e)).replace("**", "^")


def _prec(n: Node) -> int:
    return OPS[n.op].prec if n.op in OPS else ATOM


def fmt(n: Node) -> str:
    """``n`` in math notation (each op's ``text`` entry in :data:`.ops.OPS`)."""
    op = n.op
    if op in (Op.INPUT, Op.VIEW, Op.FACTOR):
        return str(n.attr)
    if op is Op.CONST:
        v = sp.sympify(n.attr)
        return str(float(v)) if v.is_Float else _dim(v)
    if op is Op.EYE:
        return f"I_{_dim(n.rows)}" if n.rows == n.cols else f"eye({_dim(n.rows)},{_dim(n.cols)})"
    if op in (Op.ZEROS, Op.ONES):
        return f"{op.value}({_dim(n.rows)},{_dim(n.cols)})"

    def wrap(i: int, level: int) -> str:
        c = n.children[i]
        s = fmt(c)
        return f"({s})" if _prec(c) < level else s

    return OPS[op].text(n, wrap)


def fmt_shape(n: Node) -> str:
    return f"{_dim(n.rows)}×{_dim(n.cols)}"
