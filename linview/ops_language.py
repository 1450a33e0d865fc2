"""The IR operations of the wider Octave language (issue 14), one block per op.

Each op has, side by side: its shape rule, its delta rule (most are *not maintainable*:
a statement using them on changing operands is re-evaluated inside the trigger, and a
1x1 one gets the dense difference ``new - old``), its reference evaluation, its math
notation, its NumPy rendering and its flop count.  The compiler's tables pick them up
with one line each (``ir.SHAPE_RULES``, ``delta.RULES``, ``interp.EVAL``, ``printer.fmt``,
the NumPy backend's ``_render`` and ``cost.count``), so that the whole op moves into the
op-definition table in one piece.

==========  ============================================  ====================================
op          attr                                          delta
==========  ============================================  ====================================
``MAP``     ``(fn, param)``: abs sqrt exp log power not   re-evaluated
            tril triu (the triangles, not elementwise)
``EBIN``    max min lt le gt ge eq ne and or              re-evaluated
``REDUCE``  ``(max|min, d)`` along dimension d            re-evaluated
``NORM``    ``(p, vector)``: p in 1 2 fro inf             1x1: dense difference
``DIAG``    ``tomat`` (vector -> matrix), ``tovec``       ``tovec``: ``sum(P∘Q, 2)``
``KRON``    --                                            re-evaluated
``CHOL``    -- (upper R with RᵀR = A, as Octave)          re-evaluated
``PINV``    --                                            re-evaluated
``INDEX``   ``(rows, cols)``, each ``(start, stop)``      slices of the factors
            zero-based half-open, or None for all
``LOOP``    a :class:`LoopSpec`: a ``while`` loop          re-evaluated as a whole
==========  ============================================  ====================================

A ``LOOP`` node's children are the values the loop reads from outside (``@0``, ``@1``...
inside the loop) followed by the initial values of the variables it assigns (``@x``
inside the loop); one iteration maps the values at the loop head to the values at its
end, as expressions over those placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import ONE, Node, Op, ShapeMismatch, same_dim


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

MAP_FUNCTIONS = ("abs", "sqrt", "exp", "log", "power", "not", "tril", "triu")
EBIN_FUNCTIONS = ("max", "min", "lt", "le", "gt", "ge", "eq", "ne", "and", "or")
#: comparison and logical operators of the source, as EBIN functions
OPERATORS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "~=": "ne",
             "&&": "and", "||": "or"}
_SYMBOL = {v: k for k, v in OPERATORS.items()}


# ------------------------------------------------------------------ shape rules
def _same_shape(children, attr, shape):
    return children[0].shape


def _broadcast(children, attr, shape):
    a, b = children
    if a.is_scalar:
        return b.shape
    if b.is_scalar or (same_dim(a.rows, b.rows) and same_dim(a.cols, b.cols)):
        return a.shape
    raise ShapeMismatch("operands must have the same size (or one must be 1x1)",
                        a.shape, b.shape)


def _reduce(children, attr, shape):
    a = children[0]
    return (ONE, a.cols) if attr[1] == 1 else (a.rows, ONE)


def _norm(children, attr, shape):
    return (ONE, ONE)


def _diag(children, attr, shape):
    a = children[0]
    if attr == "tomat":
        n = a.rows if a.cols == 1 else a.cols
        return (n, n)
    if not same_dim(a.rows, a.cols):
        if a.rows.is_Number and a.cols.is_Number:
            return (sp.Min(a.rows, a.cols), ONE)
        raise ShapeMismatch("diag() of a matrix needs a square matrix here", a.shape)
    return (a.rows, ONE)


def _kron(children, attr, shape):
    a, b = children
    return (sp.expand(a.rows * b.rows), sp.expand(a.cols * b.cols))


def _square(children, attr, shape):
    a = children[0]
    if not same_dim(a.rows, a.cols):
        raise ShapeMismatch("the matrix must be square", a.shape)
    return a.shape


def _pinv(children, attr, shape):
    a = children[0]
    return (a.cols, a.rows)


def _index(children, attr, shape):
    a = children[0]
    dims = []
    for sl, full in zip(attr, a.shape, strict=True):
        if sl is None:
            dims.append(full)
            continue
        lo, hi = sl
        size = sp.expand(hi - lo)
        if (sp.sympify(lo).is_negative or (size.is_Number and size <= 0)
                or sp.expand(full - hi).is_negative):
            raise ShapeMismatch(f"index {_fmt_slice(sl)} is out of bounds", a.shape)
        dims.append(size)
    return tuple(dims)


def _loop(children, attr, shape):
    return attr.updates[attr.carried.index(attr.result)].shape


SHAPES = {
    Op.LOOP: _loop, Op.MAP: _same_shape, Op.EBIN: _broadcast, Op.REDUCE: _reduce, Op.NORM: _norm,
    Op.DIAG: _diag, Op.KRON: _kron, Op.CHOL: _square, Op.PINV: _pinv, Op.INDEX: _index,
}


def map_attr(n: Node, fn):
    """``n.attr`` with every size in it mapped by ``fn`` (sizes live in INDEX attrs)."""
    if n.op is not Op.INDEX:
        return n.attr
    return tuple(None if sl is None else (fn(sl[0]), fn(sl[1])) for sl in n.attr)


# ------------------------------------------------------------------ delta rules
def _not_maintainable(n, d, new):
    from linview.compiler.delta import NotMaintainable

    raise NotMaintainable(f"'{describe(n)}' of changing matrices has no low-rank delta")


def _index_delta(n, d, new):
    """A slice of ``P Qᵀ`` is ``P[rows, :] Q[cols, :]ᵀ``: slices of the factors."""
    from linview.compiler.delta import Term

    rows, cols = n.attr
    out = []
    for t in d[0]:
        P = t.P if rows is None else ir.node(Op.INDEX, t.P, attr=(rows, None))
        Q = t.Q if cols is None else ir.node(Op.INDEX, t.Q, attr=(cols, None))
        out.append(Term(P, Q))
    return out


def _diag_delta(n, d, new):
    """``diag(P Qᵀ)`` of a square matrix is the row sums of ``P ∘ Q`` (a dense column)."""
    from linview.compiler.delta import Term

    if n.attr != "tomat" and same_dim(n.children[0].rows, n.children[0].cols):
        return [Term(ir.node(Op.SUM, ir.node(Op.EMUL, t.P, t.Q), attr=2), ir.const(1))
                for t in d[0]]
    return _not_maintainable(n, d, new)


ir.SHAPE_RULES.update(SHAPES)

DELTA = {op: _not_maintainable for op in SHAPES}
DELTA[Op.INDEX] = _index_delta
DELTA[Op.DIAG] = _diag_delta


# ------------------------------------------------------------------ reference evaluation
def _map(fn: str, param, a):
    a = np.asarray(a, dtype=float)
    if fn == "power":
        return np.power(a, float(param))
    if fn == "not":
        return (a == 0).astype(float)
    return {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
            "tril": np.tril, "triu": np.triu}[fn](a)


_EBIN = {"max": np.maximum, "min": np.minimum, "lt": np.less, "le": np.less_equal,
         "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}


def ebin(fn: str, a, b):
    if fn == "and":
        return np.logical_and(a != 0, b != 0).astype(float)
    if fn == "or":
        return np.logical_or(a != 0, b != 0).astype(float)
    return np.asarray(_EBIN[fn](a, b), dtype=float)


def norm(a, p: str, vector: bool) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    order = {"1": 1, "2": 2, "fro": "fro", "inf": np.inf}[p]
    if vector:
        order = 2 if order == "fro" else order
        return np.full((1, 1), np.linalg.norm(a.ravel(), order))
    return np.full((1, 1), np.linalg.norm(a, order))


def diag(a, how: str) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if how == "tomat":
        return np.diag(a.ravel())
    return np.diag(a).reshape(-1, 1).copy()


def chol(a) -> np.ndarray:
    """Octave's ``chol``: the upper triangular R with ``Rᵀ R = A``."""
    return scipy.linalg.cholesky(np.asarray(a, dtype=float), lower=False)


def pinv(a) -> np.ndarray:
    """Octave's ``pinv``: singular values below ``max(size) · σ_max · eps`` are dropped."""
    a = np.asarray(a, dtype=float)
    return np.linalg.pinv(a, rcond=max(a.shape) * np.finfo(float).eps)


def _slices(attr, bindings):
    from linview.compiler.interp import size_value

    return tuple(slice(None) if sl is None else
                 slice(size_value(sl[0], bindings), size_value(sl[1], bindings))
                 for sl in attr)


def evaluator(bindings):
    """``{op: fn(node, *values)}`` for :data:`linview.compiler.interp.EVAL`."""
    def index(n, a):
        r, c = _slices(n.attr, bindings)
        return np.asarray(a, dtype=float)[r, c]

    def loop(n, *values):
        from linview.compiler.interp import eval_node

        spec: LoopSpec = n.attr
        env = dict(zip(spec.placeholders, values, strict=True))
        while np.all(eval_node(spec.cond, env, bindings) != 0):
            new = [eval_node(u, env, bindings) for u in spec.updates]
            env.update({f"@{v}": x for v, x in zip(spec.carried, new, strict=True)})
        return env[f"@{spec.result}"]

    return {
        Op.MAP: lambda n, a: _map(n.attr[0], n.attr[1], a),
        Op.EBIN: lambda n, a, b: ebin(n.attr, a, b),
        Op.REDUCE: lambda n, a: (np.max if n.attr[0] == "max" else np.min)(
            np.asarray(a, dtype=float), axis=n.attr[1] - 1, keepdims=True),
        Op.NORM: lambda n, a: norm(a, *n.attr),
        Op.DIAG: lambda n, a: diag(a, n.attr),
        Op.KRON: lambda n, a, b: np.kron(a, b),
        Op.CHOL: lambda n, a: chol(a),
        Op.PINV: lambda n, a: pinv(a),
        Op.INDEX: index,
        Op.LOOP: loop,
    }


# ------------------------------------------------------------------ notation
def _fmt_slice(sl) -> str:
    if sl is None:
        return ":"
    lo, hi = sl
    lo1 = sp.expand(lo + 1)
    return str(lo1) if sp.expand(hi - lo) == 1 else f"{lo1}:{hi}"


def describe(n: Node) -> str:
    """A short name of the operation for messages: ``sqrt``, ``max``, ``chol``..."""
    if n.op is Op.MAP:
        return ".^" if n.attr[0] == "power" else n.attr[0]
    if n.op is Op.EBIN:
        return _SYMBOL.get(n.attr, n.attr)
    if n.op is Op.REDUCE:
        return n.attr[0]
    return n.op.value


def fmt(n: Node, show) -> str:
    """Math notation; ``show`` formats a child."""
    ch = n.children
    if n.op is Op.MAP:
        if n.attr[0] == "power":
            return f"{show(ch[0])} .^ {n.attr[1]}"
        if n.attr[0] == "not":
            return f"!{show(ch[0])}"
        return f"{n.attr[0]}({show(ch[0])})"
    if n.op is Op.EBIN:
        if n.attr in _SYMBOL:
            return f"({show(ch[0])} {_SYMBOL[n.attr]} {show(ch[1])})"
        return f"{n.attr}({show(ch[0])}, {show(ch[1])})"
    if n.op is Op.REDUCE:
        return f"{n.attr[0]}({show(ch[0])}, [], {n.attr[1]})"
    if n.op is Op.NORM:
        return f"norm({show(ch[0])}, {n.attr[0]})"
    if n.op is Op.DIAG:
        return f"diag({show(ch[0])})"
    if n.op is Op.KRON:
        return f"kron({show(ch[0])}, {show(ch[1])})"
    if n.op is Op.INDEX:
        return f"{show(ch[0])}({_fmt_slice(n.attr[0])}, {_fmt_slice(n.attr[1])})"
    if n.op is Op.LOOP:
        args = ", ".join(f"{p}={show(c)}" for p, c in zip(n.attr.placeholders, ch,
                                                          strict=True))
        return f"while_line{n.attr.line}({args}).{n.attr.result}"
    return f"{n.op.value}({show(ch[0])})"


# ------------------------------------------------------------------ NumPy rendering
_NP_MAP = {"abs": "np.abs", "sqrt": "np.sqrt", "exp": "np.exp", "log": "np.log",
           "tril": "np.tril", "triu": "np.triu"}
_NP_EBIN = {"max": "np.maximum", "min": "np.minimum", "lt": "np.less",
            "le": "np.less_equal", "gt": "np.greater", "ge": "np.greater_equal",
            "eq": "np.equal", "ne": "np.not_equal"}


def numpy_code(n: Node, code, size_code, label: str, ex=None) -> str:
    """One NumPy expression for ``n``; ``code`` renders a child as an atom.  A ``LOOP``
    emits its loop as statements through ``ex`` (the backend's expression printer) and
    is then the name of its result."""
    ch = n.children
    if n.op is Op.LOOP:
        return _numpy_loop(n, code, ex)
    if n.op is Op.MAP:
        fn, param = n.attr
        if fn == "power":
            return f"np.power({code(ch[0])}, {float(param)!r})"
        if fn == "not":
            return f"({code(ch[0])} == 0).astype(float)"
        return f"{_NP_MAP[fn]}({code(ch[0])})"
    if n.op is Op.EBIN:
        a, b = code(ch[0]), code(ch[1])
        if n.attr in ("and", "or"):
            return f"np.logical_{n.attr}({a} != 0, {b} != 0).astype(float)"
        if n.attr in ("max", "min"):
            return f"{_NP_EBIN[n.attr]}({a}, {b})"
        return f"{_NP_EBIN[n.attr]}({a}, {b}).astype(float)"
    if n.op is Op.REDUCE:
        return f"{code(ch[0])}.{n.attr[0]}(axis={n.attr[1] - 1}, keepdims=True)"
    if n.op is Op.NORM:
        return f"rt.norm({code(ch[0])}, {n.attr[0]!r}, {n.attr[1]!r})"
    if n.op is Op.DIAG:
        return f"rt.diag({code(ch[0])}, {n.attr!r})"
    if n.op is Op.KRON:
        return f"np.kron({code(ch[0])}, {code(ch[1])})"
    if n.op is Op.CHOL:
        return f'rt.chol({code(ch[0])}, "{label}")'
    if n.op is Op.PINV:
        return f"rt.pinv({code(ch[0])})"
    if n.op is Op.INDEX:
        parts = [":" if sl is None else f"{size_code(sl[0])}:{size_code(sl[1])}"
                 for sl in n.attr]
        return f"{code(ch[0])}[{', '.join(parts)}]"
    raise NotImplementedError(n.op)


def _numpy_loop(n: Node, code, ex) -> str:
    spec: LoopSpec = n.attr
    ind = ex.indent
    names = [ex.names("temp", f"w{ex.count}_{p.lstrip('@')}") for p in spec.placeholders]
    ex.count += 1
    values = [code(c) for c in n.children]
    ex.lines.append(f"{ind}# while loop of line {spec.line}, evaluated as a whole")
    for name, value in zip(names, values, strict=True):
        ex.lines.append(f"{ind}{name} = {value}")
    body: list[str] = []
    inner = type(ex)(ex.names, body, ind + "    ", trigger=False,
                     shared=_shared(list(spec.updates) + [spec.cond]))
    inner.count = 1000 * ex.count
    for p, name in zip(spec.placeholders, names, strict=True):
        inner.names.fixed("view", p, name)
    cond = inner.code(spec.cond)
    body.append(f"{ind}    if not np.all({cond} != 0):")
    body.append(f"{ind}        break")
    news = [inner.code(u) for u in spec.updates]
    carried = names[len(spec.outer):]
    body.append(f"{ind}    {', '.join(carried)} = {', '.join(news)}"
                f"{',' if len(news) == 1 else ''}")
    ex.lines.append(f"{ind}while True:")
    ex.lines += body
    return carried[spec.carried.index(spec.result)]


def _shared(roots):
    from linview.backends.common import shared_nodes

    return shared_nodes(roots)


# ------------------------------------------------------------------ cost
CUBIC = frozenset({Op.CHOL, Op.PINV})


def flops(n: Node, size) -> object:
    """Floating-point operations of ``n`` once (``size`` maps a size to a number)."""
    a = n.children[0]
    if n.op is Op.CHOL:
        return size(a.rows) ** 3 / 3
    if n.op is Op.PINV:  # an SVD
        return 10 * size(a.rows) * size(a.cols) * size(a.cols)
    if n.op is Op.INDEX:
        return 0
    if n.op is Op.KRON:
        return size(n.rows) * size(n.cols)
    return size(a.rows) * size(a.cols)
