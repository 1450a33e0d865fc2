"""The ops of the wider Octave language (issue 14), as entries of the op table.

:data:`ENTRIES` maps each op to the fields of its :class:`linview.compiler.ops.OpDef`
(shape, evaluate, text/prec, flops, delta); ``ops.py`` builds the entries into ``OPS``.
This module does not import ``ops`` (that would be a cycle): a delta rule builds its terms
with :func:`dataclasses.replace` on the children's terms.  Most ops have no delta rule: a
statement using them on changing operands is re-evaluated inside the trigger, and a 1x1
one gets the dense difference ``new - old``.

==========  ============================================  ====================================
op          attr                                          delta
==========  ============================================  ====================================
``MAP``     ``(fn, param)``: abs sqrt exp log power not   re-evaluated
            tril triu (the triangles, not elementwise)
``EBIN``    max min lt le gt ge eq ne and or              re-evaluated
``REDUCE``  ``(max|min, d)`` along dimension d            re-evaluated
``NORM``    ``(p, vector)``: p in 1 2 fro inf             1x1: dense difference
``DIAG``    ``tomat`` (vector -> matrix), ``tovec``       ``tovec``: ``sum(P∘Q, 2)``;
                                                          ``tomat``: ``diag(P Qᵀ)`` (dense)
``KRON``    --                                            re-evaluated
``CHOL``    -- (upper R with RᵀR = A, as Octave)          re-evaluated
``PINV``    --                                            re-evaluated
``QR``      ``(Q|R, economy)``: one output of ``qr``       re-evaluated
``LU``      ``(L|U|P, permuted)``: one output of ``lu``;   re-evaluated
            permuted L is ``PᵀL`` (``[L, U] = lu(A)``)
``INDEX``   ``(rows, cols)``, each ``(start, stop)``      slices of the factors
            zero-based half-open, ``(start, stop,
            step)`` (literal), or None for all
``LOOP``    a :class:`LoopSpec`: a ``while`` loop          re-evaluated as a whole
==========  ============================================  ====================================

A ``LOOP`` node's children are the values the loop reads from outside (``@0``, ``@1``...
inside the loop) followed by the initial values of the variables it assigns (``@x``
inside the loop); one iteration maps the values at the loop head to the values at its
end, as expressions over those placeholders.  :mod:`linview.compiler.interp` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg
import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import ONE, Node, Op, ShapeMismatch, same_dim

ATOM = 9  # the op table's precedence of anything printed as one token
MAP_FUNCTIONS = ("abs", "sqrt", "exp", "log", "power", "not", "tril", "triu")
EBIN_FUNCTIONS = ("max", "min", "lt", "le", "gt", "ge", "eq", "ne", "and", "or")
#: comparison and logical operators of the source, as EBIN functions
OPERATORS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "~=": "ne",
             "&&": "and", "||": "or"}
SYMBOL = {v: k for k, v in OPERATORS.items()}


@dataclass(frozen=True)
class LoopSpec:
    """``while cond ... end``: ``outer`` placeholder names of the values read from
    outside, ``carried`` the assigned variables (placeholders ``@name``), ``cond`` and
    ``updates`` (one per carried variable) over the placeholders, ``result`` the
    variable this node yields, ``line`` the loop's line."""

    outer: tuple[str, ...]
    carried: tuple[str, ...]
    cond: Node
    updates: tuple[Node, ...]
    result: str
    line: int = 0

    @property
    def placeholders(self) -> tuple[str, ...]:
        return self.outer + tuple(f"@{v}" for v in self.carried)


def describe(n: Node) -> str:
    """A short name of the operation for messages: ``sqrt``, ``max``, ``chol``..."""
    if n.op is Op.MAP:
        return ".^" if n.attr[0] == "power" else n.attr[0]
    if n.op is Op.EBIN:
        return SYMBOL.get(n.attr, n.attr)
    if n.op is Op.REDUCE:
        return n.attr[0]
    if n.op is Op.LOOP:
        return "while"
    return n.op.value


def map_attr(n: Node, fn):
    """``n.attr`` with every size in it mapped by ``fn`` (sizes live in INDEX attrs)."""
    if n.op is not Op.INDEX:
        return n.attr
    return tuple(None if sl is None else tuple(fn(b) for b in sl) for sl in n.attr)


def fmt_slice(sl) -> str:
    if sl is None:
        return ":"
    lo, hi = sl[:2]
    lo1 = sp.expand(lo + 1)
    if len(sl) == 3:
        return f"{lo1}:{sl[2]}:{hi}"
    return str(lo1) if sp.expand(hi - lo) == 1 else f"{lo1}:{hi}"


def _f(a) -> np.ndarray:
    return np.asarray(a.toarray() if hasattr(a, "toarray") else a, dtype=float)


def _entries(n: Node, size) -> object:
    return size(n.rows) * size(n.cols)


def _child_entries(n: Node, size) -> object:
    return _entries(n.children[0], size)


# ------------------------------------------------------------------ elementwise functions
def _map_eval(n, a):
    fn, param = n.attr
    a = _f(a)
    if fn == "power":
        return np.power(a, float(param))
    if fn == "not":
        return (a == 0).astype(float)
    return {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
            "tril": np.tril, "triu": np.triu}[fn](a)


def _map_text(n, w):
    fn, param = n.attr
    if fn == "power":
        return f"{w(0, ATOM)} .^ {param}"
    if fn == "not":
        return f"!{w(0, ATOM)}"
    return f"{fn}({w(0, 0)})"


MAP = dict(shape=lambda children, attr: children[0].shape, evaluate=_map_eval,
           text=_map_text, prec=ATOM, flops=_entries)


def _broadcast(children, attr):
    a, b = children
    if a.is_scalar:
        return b.shape
    if b.is_scalar or (same_dim(a.rows, b.rows) and same_dim(a.cols, b.cols)):
        return a.shape
    raise ShapeMismatch("operands must have the same size (or one must be 1x1)",
                        a.shape, b.shape)


_EBIN = {"max": np.maximum, "min": np.minimum, "lt": np.less, "le": np.less_equal,
         "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}


def _ebin_eval(n, a, b):
    a, b = _f(a), _f(b)
    if n.attr == "and":
        return np.logical_and(a != 0, b != 0).astype(float)
    if n.attr == "or":
        return np.logical_or(a != 0, b != 0).astype(float)
    return np.asarray(_EBIN[n.attr](a, b), dtype=float)


def _ebin_text(n, w):
    if n.attr in SYMBOL:
        return f"({w(0, 0)} {SYMBOL[n.attr]} {w(1, 0)})"
    return f"{n.attr}({w(0, 0)}, {w(1, 0)})"


EBIN = dict(shape=_broadcast, evaluate=_ebin_eval, text=_ebin_text, prec=ATOM,
            flops=_entries)


# ------------------------------------------------------------------ reductions and norms
REDUCE = dict(
    shape=lambda children, attr: ((ONE, children[0].cols) if attr[1] == 1
                                  else (children[0].rows, ONE)),
    evaluate=lambda n, a: (np.max if n.attr[0] == "max" else np.min)(
        _f(a), axis=n.attr[1] - 1, keepdims=True),
    text=lambda n, w: f"{n.attr[0]}({w(0, 0)}, [], {n.attr[1]})", prec=ATOM,
    flops=_child_entries)


def norm(a, p: str, vector: bool) -> np.ndarray:
    """``norm(a, p)`` as Octave computes it (a vector's 'fro' norm is its 2-norm)."""
    a = _f(a)
    order = {"1": 1, "2": 2, "fro": "fro", "inf": np.inf}[p]
    if vector:
        return np.full((1, 1), np.linalg.norm(a.ravel(), 2 if order == "fro" else order))
    return np.full((1, 1), np.linalg.norm(a, order))


NORM = dict(shape=lambda children, attr: (ONE, ONE),
            evaluate=lambda n, a: norm(a, *n.attr),
            text=lambda n, w: f"norm({w(0, 0)}, {n.attr[0]})", prec=ATOM,
            flops=_child_entries)


# ------------------------------------------------------------------ diag, kron, chol, pinv
def _diag_shape(children, attr):
    a = children[0]
    if attr == "tomat":
        n = a.rows if a.cols == 1 else a.cols
        return (n, n)
    if not same_dim(a.rows, a.cols):
        if a.rows.is_Number and a.cols.is_Number:
            return (sp.Min(a.rows, a.cols), ONE)
        raise ShapeMismatch("diag() of a matrix needs a square matrix here", a.shape)
    return (a.rows, ONE)


def _diag_eval(n, a):
    a = _f(a)
    return np.diag(a.ravel()) if n.attr == "tomat" else np.diag(a).reshape(-1, 1).copy()


def _diag_delta(n, d, new):
    """``diag(P Qᵀ)`` of a matrix is the row sums of ``P ∘ Q`` (its first rows when not
    square); of a vector, the diagonal matrix of ``P Qᵀ`` (dense, full rank)."""
    out = []
    if n.attr == "tovec":
        m = n.rows
        for t in d[0]:
            P, Q = t.P, t.Q
            if not (same_dim(P.rows, m) and same_dim(Q.rows, m)):
                P = P if same_dim(P.rows, m) else ir.node(Op.INDEX, P, attr=((0, m), None))
                Q = Q if same_dim(Q.rows, m) else ir.node(Op.INDEX, Q, attr=((0, m), None))
            out.append(replace(t, P=ir.node(Op.SUM, ir.node(Op.EMUL, P, Q), attr=2),
                               Q=ir.const(1)))
        return out
    for t in d[0]:
        col = ir.matmul(t.P, ir.transpose(t.Q))
        out.append(replace(t, P=ir.node(Op.DIAG, col, attr="tomat"), Q=ir.eye(n.cols)))
    return out


DIAG = dict(shape=_diag_shape, evaluate=_diag_eval, text=lambda n, w: f"diag({w(0, 0)})",
            prec=ATOM, flops=_entries, delta=_diag_delta)

KRON = dict(
    shape=lambda children, attr: (sp.expand(children[0].rows * children[1].rows),
                                  sp.expand(children[0].cols * children[1].cols)),
    evaluate=lambda n, a, b: np.kron(_f(a), _f(b)),
    text=lambda n, w: f"kron({w(0, 0)}, {w(1, 0)})", prec=ATOM, flops=_entries)


def _square(children, attr):
    a = children[0]
    if not same_dim(a.rows, a.cols):
        raise ShapeMismatch("the matrix must be square", a.shape)
    return a.shape


def chol(a) -> np.ndarray:
    """Octave's ``chol``: the upper triangular R with ``Rᵀ R = A``."""
    return scipy.linalg.cholesky(_f(a), lower=False)


def pinv(a) -> np.ndarray:
    """Octave's ``pinv``: singular values below ``max(size) · σ_max · eps`` are dropped."""
    a = _f(a)
    return np.linalg.pinv(a, rcond=max(a.shape) * np.finfo(float).eps)


CHOL = dict(shape=_square, evaluate=lambda n, a: chol(a), text=lambda n, w: f"chol({w(0, 0)})",
            prec=ATOM, flops=lambda n, size: size(n.rows) ** 3 / 3)
PINV = dict(shape=lambda children, attr: (children[0].cols, children[0].rows),
            evaluate=lambda n, a: pinv(a), text=lambda n, w: f"pinv({w(0, 0)})", prec=ATOM,
            flops=lambda n, size: 10 * size(n.rows) * size(n.cols) * size(n.rows))


# ------------------------------------------------------------------ qr, lu
#: the outputs of each factorization, in Octave's order: (op, form) -> part names
PARTS = {(Op.QR, False): ("Q", "R"), (Op.QR, True): ("Q", "R"),
         (Op.LU, True): ("L", "U"), (Op.LU, False): ("L", "U", "P")}


def qr(a, economy: bool) -> tuple[np.ndarray, np.ndarray]:
    """Octave's ``[Q, R] = qr(A)`` (``qr(A, 0)``: economy size): LAPACK's Householder QR,
    as Octave computes it, so the signs agree."""
    q, r = scipy.linalg.qr(_f(a), mode="economic" if economy else "full")
    return q, r


def lu(a, permuted: bool) -> tuple[np.ndarray, ...]:
    """Octave's ``[L, U] = lu(A)`` (``permuted``: L is ``Pᵀ L``) or ``[L, U, P] = lu(A)``
    with ``P A = L U``: LAPACK's partial pivoting, as Octave."""
    if permuted:
        pl, u = scipy.linalg.lu(_f(a), permute_l=True)
        return pl, u
    p, l, u = scipy.linalg.lu(_f(a))
    return l, u, p.T.copy()


def _inner(a):
    """``min(rows, cols)`` of a factorization's operand."""
    if same_dim(a.rows, a.cols):
        return a.rows
    if a.rows.is_Number and a.cols.is_Number:
        return sp.Min(a.rows, a.cols)
    raise ShapeMismatch("the size of the factors depends on which of rows and columns is "
                        "smaller", a.shape)


def _qr_shape(children, attr):
    a = children[0]
    part, economy = attr
    k = _inner(a) if economy else a.rows
    return (a.rows, k) if part == "Q" else (k, a.cols)


def _lu_shape(children, attr):
    a = children[0]
    part = attr[0]
    if part == "P":
        return (a.rows, a.rows)
    return (a.rows, _inner(a)) if part == "L" else (_inner(a), a.cols)


def _factor_text(n, w):
    part, form = n.attr
    if n.op is Op.QR:
        return f"qr({w(0, 0)}{', 0' if form else ''}).{part}"
    return f"lu({w(0, 0)}).{'PᵀL' if form and part == 'L' else part}"


def _factor_eval(n, a):
    part, form = n.attr
    got = (qr if n.op is Op.QR else lu)(a, form)
    return got[PARTS[(n.op, form)].index(part)]


def _factor_flops(n, size):
    a = n.children[0]
    m, c = size(a.rows), size(a.cols)
    try:
        k = min(m, c)
    except TypeError:  # symbolic sizes
        k = sp.Min(m, c)
    return 2 * m * c * k if n.op is Op.QR else 2 * m * c * k / 3


QR = dict(shape=_qr_shape, evaluate=_factor_eval, text=_factor_text, prec=ATOM,
          flops=_factor_flops)
LU = dict(QR, shape=_lu_shape)


# ------------------------------------------------------------------ indexing reads
def _index_shape(children, attr):
    a = children[0]
    dims = []
    for sl, full in zip(attr, a.shape, strict=True):
        if sl is None:
            dims.append(full)
            continue
        lo, hi = sl[:2]
        size = sp.expand(hi - lo)
        if len(sl) == 3:  # every step-th: literal bounds
            size = sp.Integer(len(range(int(lo), int(hi), int(sl[2]))))
        if (sp.sympify(lo).is_negative or (size.is_Number and size <= 0)
                or sp.expand(full - hi).is_negative):
            raise ShapeMismatch(f"index {fmt_slice(sl)} is out of bounds", a.shape)
        dims.append(size)
    return tuple(dims)


def _index_eval(n, a):
    """Slice bounds may be sizes: they are bound from the operand's actual shape."""
    a = _f(a)
    child = n.children[0]
    known: dict = {}
    for want, got in zip(child.shape, a.shape, strict=True):
        want = sp.sympify(want)
        free = sorted(want.free_symbols, key=str)
        if len(free) == 1:
            sol = sp.solve(sp.Eq(want, got), free[0])
            if len(sol) == 1:
                known[free[0]] = sol[0]
    cut = [slice(None) if sl is None else
           slice(*(int(sp.sympify(b).subs(known)) for b in sl)) for sl in n.attr]
    return a[cut[0], cut[1]]


def _index_delta(n, d, new):
    """A slice of ``P Qᵀ`` is ``P[rows, :] Q[cols, :]ᵀ``: slices of the factors."""
    rows, cols = n.attr
    out = []
    for t in d[0]:
        P = t.P if rows is None else ir.node(Op.INDEX, t.P, attr=(rows, None))
        Q = t.Q if cols is None else ir.node(Op.INDEX, t.Q, attr=(cols, None))
        out.append(replace(t, P=P, Q=Q))
    return out


INDEX = dict(shape=_index_shape, evaluate=_index_eval,
             text=lambda n, w: f"{w(0, ATOM)}({fmt_slice(n.attr[0])}, "
                               f"{fmt_slice(n.attr[1])})",
             prec=ATOM, flops=lambda n, size: 0, delta=_index_delta,
             transpose=lambda n, t: ir.node(Op.INDEX, t(n.children[0]),
                                            attr=(n.attr[1], n.attr[0])))


# ------------------------------------------------------------------ while loops
def _loop_text(n, w):
    args = ", ".join(f"{p}={w(i, 0)}" for i, p in enumerate(n.attr.placeholders))
    return f"while_line{n.attr.line}({args}).{n.attr.result}"


def _loop_eval(n, *values):
    raise NotImplementedError("while loops are run by interp.eval_node")


LOOP = dict(shape=lambda children, attr: attr.updates[attr.carried.index(attr.result)].shape,
            evaluate=_loop_eval, text=_loop_text, prec=ATOM,
            flops=lambda n, size: 100 * sum(_entries(c, size) for c in n.children))


#: op -> the fields of its :class:`linview.compiler.ops.OpDef`
ENTRIES = {Op.MAP: MAP, Op.EBIN: EBIN, Op.REDUCE: REDUCE, Op.NORM: NORM, Op.DIAG: DIAG,
           Op.KRON: KRON, Op.CHOL: CHOL, Op.PINV: PINV, Op.QR: QR, Op.LU: LU, Op.INDEX: INDEX,
           Op.LOOP: LOOP}
