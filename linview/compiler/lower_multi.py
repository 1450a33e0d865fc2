"""Lowering of multiple assignment ``[a, b] = f(...)`` (issue 14): ``qr``, ``lu`` and
``size``.

* ``[Q, R] = qr(A)`` (full: Q m×m, R m×n), ``[Q, R] = qr(A, 0)`` or ``qr(A, 'econ')``
  (economy: Q m×k, R k×n with k = min(m, n));
* ``[L, U] = lu(A)`` (L is the row-permuted lower factor ``PᵀL``) and ``[L, U, P] = lu(A)``
  (``P A = L U``): square when compiled without data, any shape once specialised to it;
* ``[r, c] = size(A)``: two sizes, as ``size(A, 1)`` and ``size(A, 2)``.

Each output of ``qr``/``lu`` is a view of its own (``Q := qr(A).Q``, ``R := qr(A).R``, ops
``QR``/``LU`` of :mod:`linview.compiler.ops_octave`), over one view holding the argument.
There is no delta rule: inside a trigger that changes the argument the outputs are
re-evaluated, and the NumPy backend factors once for all the outputs.  Other functions
with several outputs are refused with the statement's location and what to write instead.
"""

from __future__ import annotations

import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.lower_language import NeedsData, literal, show
from linview.frontend import syntax

#: functions with several outputs: name -> (fewest, most outputs)
OUTPUTS = {"qr": (2, 2), "lu": (2, 3), "size": (2, 2)}

#: what to write instead, for functions whose extra outputs are not supported
_INSTEAD = {
    "max": "write m = max(x); the position of the maximum is not supported",
    "min": "write m = min(x); the position of the minimum is not supported",
    "sort": "sort() is not supported",
    "eig": "eig() is not supported; for a solve write A \\ b",
    "svd": "svd() is not supported; pinv(A) is (re-evaluated)",
    "chol": "write R = chol(A) (one output)",
}


def multi_assign(lw, st: syntax.MultiAssign) -> None:
    """``[a, b, ...] = f(args)``: one value (a view, or a size) per target."""
    for t in st.targets:
        if t in lw.loop_vars:
            raise lw.parse_error(f"cannot assign to loop variable '{t}'", st.pos)
    call = st.value
    if not isinstance(call, syntax.Call) or call.func in lw.env:
        raise lw.parse_error(f"the right side of '{st.target} = ...' must be a call of "
                             "qr, lu or size", getattr(call, "pos", st.pos),
                             "write e.g. '[Q, R] = qr(A)'")
    f, n = call.func, len(st.targets)
    if f not in OUTPUTS:
        raise lw.parse_error(f"{f}() with {n} outputs is not supported", call.pos,
                             _INSTEAD.get(f, "only qr, lu and size have several outputs "
                                          "here: [Q, R] = qr(A), [L, U, P] = lu(A), "
                                          "[r, c] = size(A)"))
    lo, hi = OUTPUTS[f]
    if not lo <= n <= hi:
        hint = {"qr": "write [Q, R] = qr(A); column pivoting ([Q, R, P]) is not supported",
                "lu": "write [L, U] = lu(A) or [L, U, P] = lu(A)",
                "size": "write [r, c] = size(A)"}[f]
        raise lw.parse_error(f"{f}() with {n} outputs is not supported", call.pos, hint)
    with lw.statement(st):
        values = {"qr": _qr, "lu": _lu, "size": _size}[f](lw, st, call)
        for t, value in zip(st.targets, values, strict=True):
            lw.bind(t, lw.next_name(t), value, st)


def _argument(lw, st: syntax.MultiAssign, call: syntax.Call, most: int) -> Node:
    if not 1 <= len(call.args) <= most:
        want = "1 argument" if most == 1 else f"1 to {most} arguments"
        raise lw.parse_error(f"{call.func}() takes {want}, got {len(call.args)}", call.pos)
    x = lw.expr(call.args[0], st.targets[0])
    if x.op in ir.LEAVES:
        return x
    # one view for the argument, so that every output factors the same matrix
    return lw.materialize(x, f"{call.func}_{st.targets[0]}")


def _qr(lw, st, call) -> list[Node]:
    x = _argument(lw, st, call, 2)
    economy = False
    if len(call.args) == 2:
        opt = call.args[1]
        if (isinstance(opt, syntax.Str) and opt.value == "econ") or literal(opt) == 0:
            economy = True
        else:
            raise lw.parse_error(f"qr(A, {show(opt)}) is not supported",
                                 getattr(opt, "pos", call.pos),
                                 "write qr(A) (full) or qr(A, 0) (economy size)")
    if economy:
        _decidable(lw, x, call)
    return [lw.build(Op.QR, x, pos=call.pos, attr=(part, economy)) for part in ("Q", "R")]


def _lu(lw, st, call) -> list[Node]:
    x = _argument(lw, st, call, 1)
    r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
    if not (r.is_Number and c.is_Number):
        lw.unify(x.rows, x.cols, call.pos, "lu() of a matrix with symbolic sizes needs a "
                 "square matrix", x.shape)
    permuted = len(st.targets) == 2
    parts = ("L", "U") if permuted else ("L", "U", "P")
    return [lw.build(Op.LU, x, pos=call.pos, attr=(part, permuted)) for part in parts]


def _size(lw, st, call) -> list[Node]:
    if len(call.args) != 1:
        raise lw.parse_error(f"[r, c] = size(A) takes 1 argument, got {len(call.args)}",
                             call.pos, "write [r, c] = size(A)")
    x = lw.expr(call.args[0], st.targets[0])
    return [ir.const(lw.uni.resolve(x.rows)), ir.const(lw.uni.resolve(x.cols))]


def _decidable(lw, x: Node, call: syntax.Call) -> None:
    """The economy factors' size ``min(m, n)`` must be known: equal or literal sizes,
    else the program is compiled for the data's shapes."""
    r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
    if sp.expand(r - c) == 0 or (r.is_Number and c.is_Number):
        return
    raise NeedsData(f"the economy '{show(call)}' of line {call.pos[0]} needs to know "
                    "which of its argument's sizes is smaller")
