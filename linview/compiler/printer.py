"""Math notation for IR nodes, as in the thesis' listings: ``U_B := [U, A U + U (Vᵀ U)]``.

Products are juxtaposition, ``ᵀ`` is the transpose, ``s·E`` a scaling; parentheses only
where precedence needs them.
"""

from __future__ import annotations

import sympy as sp

from linview.compiler.ir import Node, Op

_PREC = {Op.ADD: 1, Op.SUB: 1, Op.NEG: 2, Op.SCALE: 3, Op.MUL: 3, Op.EMUL: 3, Op.EDIV: 3}
_ATOM = 9


def _dim(e) -> str:
    return str(sp.sympify(e)).replace("**", "^")


def _prec(n: Node) -> int:
    return _PREC.get(n.op, _ATOM)


def _wrap(n: Node, level: int) -> str:
    s = fmt(n)
    return f"({s})" if _prec(n) < level else s


def fmt(n: Node) -> str:
    """``n`` in math notation."""
    op, ch = n.op, n.children
    if op in (Op.INPUT, Op.VIEW, Op.FACTOR):
        return str(n.attr)
    if op is Op.CONST:
        v = sp.sympify(n.attr)
        return str(float(v)) if v.is_Float else _dim(v)
    if op is Op.EYE:
        return f"I_{_dim(n.rows)}" if n.rows == n.cols else f"eye({_dim(n.rows)},{_dim(n.cols)})"
    if op in (Op.ZEROS, Op.ONES):
        return f"{op.value}({_dim(n.rows)},{_dim(n.cols)})"
    if op is Op.ADD:
        return f"{fmt(ch[0])} + {_wrap(ch[1], 2)}"
    if op is Op.SUB:
        return f"{fmt(ch[0])} - {_wrap(ch[1], 2)}"
    if op is Op.NEG:
        return f"-{_wrap(ch[0], 3)}"
    if op is Op.MUL:
        return f"{_wrap(ch[0], 3)} {_wrap(ch[1], 4)}"
    if op is Op.SCALE:
        return f"{_wrap(ch[0], _ATOM)}·{_wrap(ch[1], 4)}"
    if op is Op.EMUL:
        return f"{_wrap(ch[0], 3)} .* {_wrap(ch[1], 4)}"
    if op is Op.EDIV:
        return f"{_wrap(ch[0], 3)} ./ {_wrap(ch[1], 4)}"
    if op is Op.T:
        return f"{_wrap(ch[0], _ATOM)}ᵀ"
    if op is Op.INV:
        return f"inv({fmt(ch[0])})"
    if op is Op.SOLVE:
        return f"solve({fmt(ch[0])}, {fmt(ch[1])})"
    if op is Op.SUM:
        return f"sum({fmt(ch[0])}, {n.attr})"
    if op is Op.TRACE:
        return f"trace({fmt(ch[0])})"
    if op is Op.CONCAT:
        rows, i = [], 0
        for k in n.attr:
            rows.append(", ".join(fmt(c) for c in ch[i:i + k]))
            i += k
        return "[" + "; ".join(rows) + "]"
    raise ValueError(op)


def fmt_shape(n: Node) -> str:
    return f"{_dim(n.rows)}×{_dim(n.cols)}"
