"""Lowering of the statistics and helper functions that real Octave scripts use most
(issue 25): ``cov``, ``var``, ``std``, ``repmat`` and ``factorial``.

Every one lowers to ops that already exist, so nothing new is needed downstream (delta
rules, backends):

* ``cov(X)`` is ``Xcᵀ Xc / (m - 1)`` with ``Xc = X - 1·mean(X)`` (a view of its own): the
  product of a centred matrix with itself, which is *maintained* (ΔXc is the centred
  update ``(I - 11ᵀ/m) U Vᵀ``, rank k).  A row vector is taken as one variable, as in Octave.
* ``var(X)`` is ``sum(Xc .* Xc) / (m - 1)`` along Octave's first non-singleton dimension
  (column-wise for a matrix, the whole vector for a vector); ``std`` its square root.
  These are elementwise, so re-evaluated inside a trigger (O(mn) per update).
* ``var(X, 1)``, ``std(X, 1)``, ``cov(X, 1)`` normalise by m instead of m - 1;
  ``var(X, w, d)`` (w = 0, 1 or ``[]``) works along dimension d.
* ``repmat(A, r, c)``: a row repeated down (``ones(r,1)·a``), a column repeated across
  (``a·ones(1,c)``) or a 1x1 (``s·ones(r,c)``) are products with ones, maintained; other
  matrices are block matrices of copies when r and c are literals, else ``kron(ones(r,c), A)``.
* ``factorial(k)`` of a literal or of a loop variable (a constant: series like
  ``T/factorial(k)``).
"""

from __future__ import annotations

import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.lower_language import assume_not_one, first_dim, literal, vector_kind
from linview.frontend import syntax

#: name -> (fewest, most arguments)
FUNCTIONS = {"cov": (1, 2), "var": (1, 3), "std": (1, 3), "repmat": (3, 3),
             "factorial": (1, 1)}


def call(lw, e: syntax.Call, hint: str) -> Node:
    f, args = e.func, e.args
    lo, hi = FUNCTIONS[f]
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise lw.parse_error(f"{f}() takes {want} arguments, got {len(args)}", e.pos)
    if f == "factorial":
        return _factorial(lw, e)
    x = lw.expr(args[0], hint)
    if f == "repmat":
        return _repmat(lw, x, lw.size_arg(args[1]), lw.size_arg(args[2]), e.pos)
    if f == "cov":
        return _cov(lw, x, _normalisation(lw, e, 1), hint, e.pos)
    w = _normalisation(lw, e, 1)
    if len(args) == 3:
        d = lw.literal_int(args[2], f"the dimension argument of {f}()")
        if d not in (1, 2):
            raise lw.parse_error(f"{f}(x, w, d) needs d = 1 or 2", args[2].pos)
    else:
        d = first_dim(lw, x, f"{f}()", e.pos)
    v = _variance(lw, x, d, w, hint, e.pos)
    if f == "std":
        return v if _is_zero(v) else lw.build(Op.MAP, v, pos=e.pos, attr=("sqrt", None))
    return v


def _normalisation(lw, e: syntax.Call, i: int) -> int:
    """The ``opt``/``w`` argument: 0 (divide by m - 1, the default) or 1 (by m)."""
    if len(e.args) <= i:
        return 0
    a = e.args[i]
    if isinstance(a, syntax.Matrix) and not a.rows:
        return 0
    v = literal(a)
    if v in (0, 1):
        return int(v)
    if e.func == "cov":
        raise lw.parse_error("cov(x, y) of two data sets is not supported", a.pos,
                             "write cov([x, y]) for the covariance matrix of both, or "
                             "cov(x, 1) to normalise by the number of observations")
    raise lw.parse_error(f"the second argument of {e.func}() must be 0, 1 or []", a.pos,
                         "weight vectors are not supported")


def _is_zero(n: Node) -> bool:
    return n.op is Op.ZEROS or (n.op is Op.CONST and n.attr == 0)


def _centered(lw, x: Node, hint: str, pos) -> Node:
    """``X - ones(m, 1) * mean(X)`` as a view of its own."""
    m = lw.uni.resolve(x.rows)
    mean = ir.scale(ir.const(1 / m), lw.build(Op.SUM, x, pos=pos, attr=1))
    centered = lw.build(Op.SUB, x, lw.fresh(ir.matmul(ir.ones(m, 1), lw.fresh(mean))),
                        pos=pos)
    return lw.materialize(centered, f"{hint}_centered")


def _divide(lw, total: Node, m, w: int) -> Node:
    return lw.fresh(ir.scale(ir.const(1 / (sp.sympify(m) - 1 + w)), total))


def _variance(lw, x: Node, d: int, w: int, hint: str, pos) -> Node:
    """Octave's ``var(x, w, d)``: along dimension d, normalised by m - 1 (w = 0) or m."""
    if d == 2:
        return ir.transpose(_variance(lw, ir.transpose(x), 1, w, hint, pos))
    m = lw.uni.resolve(x.rows)
    if m == 1:
        return ir.zeros(1, x.cols) if x.cols != 1 else ir.const(0)
    assume_not_one(lw, m, "var()", pos)
    xc = _centered(lw, x, hint, pos)
    total = lw.build(Op.SUM, lw.build(Op.EMUL, xc, xc, pos=pos), pos=pos, attr=1)
    return _divide(lw, total, m, w)


def _cov(lw, x: Node, w: int, hint: str, pos) -> Node:
    kind = vector_kind(lw, x, "cov()", pos)
    if kind == "scalar":
        return ir.const(0)
    if kind == "row":
        x = ir.transpose(x)
    m = lw.uni.resolve(x.rows)
    xc = _centered(lw, x, hint, pos)
    return _divide(lw, lw.build(Op.MUL, ir.transpose(xc), xc, pos=pos), m, w)


def _repmat(lw, a: Node, r, c, pos) -> Node:
    if r == 1 and c == 1:
        return a
    if a.is_scalar:
        return lw.fresh(ir.scale(a, ir.ones(r, c)))
    if lw.uni.resolve(a.rows) == 1 and c == 1:
        return lw.build(Op.MUL, ir.ones(r, 1), a, pos=pos)
    if lw.uni.resolve(a.cols) == 1 and r == 1:
        return lw.build(Op.MUL, a, ir.ones(1, c), pos=pos)
    if sp.sympify(r).is_Integer and sp.sympify(c).is_Integer and int(r) * int(c) <= 64:
        copies = [a] * (int(r) * int(c))
        return lw.build(Op.CONCAT, *copies, pos=pos, attr=(int(c),) * int(r))
    return lw.build(Op.KRON, ir.ones(r, c), a, pos=pos)


def _factorial(lw, e: syntax.Call) -> Node:
    v = lw.expr(e.args[0], "factorial")
    if v.op is Op.CONST:
        k = sp.sympify(lw.uni.resolve(v.attr))
        if k.is_Integer and k >= 0:
            return ir.const(sp.factorial(k))
    raise lw.parse_error("factorial() takes a non-negative integer known before the data: "
                         "a literal, a loop variable or a size", e.pos,
                         "write e.g. 'T = T * A / k' inside 'for k = 1:K'")
