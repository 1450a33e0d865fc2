"""Lowering of the wider Octave language (issue 14): built-in functions, indexing reads,
scalar broadcasting, ``.^``, comparisons and compile-time ``if``.

The functions here take the lowerer of :mod:`linview.compiler.lower` (``lw``) and return
IR nodes built from the ops of :mod:`linview.compiler.ops_octave`.  Decisions that depend on a
size (is ``x`` a vector? which dimension does ``max(X)`` reduce?) are taken from the
shapes when they are known; a symbolic size is assumed not to be 1, and the assumption is
checked at load (``NOT_ONE``), where a program whose assumption fails is specialised to
the data's shapes instead.  A decision that cannot be taken without the data raises
:class:`NeedsData`, and the program is then compiled when ``load()`` sees the data.
"""

from __future__ import annotations

import math

import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.ops_octave import OPERATORS, map_attr  # noqa: F401 - used by lower.py
from linview.errors import CompileError, InputError
from linview.frontend import syntax
from linview.frontend.syntax import show

_show = show  # an expression in source form, for messages

#: functions of the wider language: name -> (fewest, most arguments)
FUNCTIONS = {
    "abs": (1, 1), "sqrt": (1, 1), "exp": (1, 1), "log": (1, 1),
    "max": (1, 3), "min": (1, 3), "mean": (1, 2), "norm": (1, 2),
    "diag": (1, 1), "kron": (2, 2), "numel": (1, 1), "rows": (1, 1), "columns": (1, 1),
    "length": (1, 1), "chol": (1, 1), "pinv": (1, 1), "tril": (1, 1), "triu": (1, 1),
}


class NeedsData(CompileError):
    """A compile-time decision depends on sizes that only the data gives; ``compile``
    then leaves the program to be specialised by ``load()``."""


# ------------------------------------------------------------------ the data's shapes
def input_shape(lw, pname: str, shape, scalar: bool, spec) -> tuple:
    """The data's shape of input ``pname``, checked against its pragma and ``dims=``."""
    data = {n: (r, c) for n, r, c in lw.options.shapes}
    if pname not in data:
        return shape
    got = tuple(sp.Integer(v) for v in data[pname])
    if scalar and got != (1, 1):
        raise InputError(f"input {pname} is {got[0]}x{got[1]}, but '%#linview scalar "
                         f"{pname}' declares it 1x1", hint=f"pass a number for {pname}")
    bound = lw.__dict__.setdefault("data_bindings", {})
    given = dict(lw.options.dims)
    for axis, (want, have) in enumerate(zip(shape, got, strict=True)):
        what = ("rows", "columns")[axis]
        if spec is not None and not isinstance(want, sp.Symbol) and want != have:
            raise InputError(f"input {pname} has {have} {what}, but '%#linview dims' "
                             f"declares {pname}({', '.join(map(str, spec.sizes))})")
        if not isinstance(want, sp.Symbol):
            continue
        name = want.name
        if name in given and given[name] != int(have):
            raise InputError(f"input {pname} has {have} {what}, but dims= gives "
                             f"{name} = {given[name]}",
                             hint=f"drop {name} from dims= or pass matching data")
        if name in bound and bound[name][0] != have:
            first, src = bound[name]
            raise InputError(f"input {pname} has {have} {what}, but '%#linview dims' "
                             f"names that size {name}, which is {first} in {src}",
                             hint="sizes with one name must be equal in the data")
        bound.setdefault(name, (have, pname))
    return got


def fresh_size(name: str, declared: set[str]) -> str:
    """The size name of an undeclared input (``rows_X``), unless a pragma took it."""
    while name in declared:
        name += "_"
    return name


# ------------------------------------------------------------------ helpers
def number_value(v) -> sp.Expr | None:
    v = sp.sympify(v)
    return v if v.is_Number else None


def _fold(value) -> Node:
    value = sp.sympify(value)
    if value.is_Number and not value.is_Integer:
        return ir.const(sp.Float(float(value)))
    return ir.const(value)


def assume_not_one(lw, size, what: str, pos) -> None:
    """Record that the program was compiled assuming ``size`` is not 1 (checked at load)."""
    size = lw.uni.resolve(size)
    if size.free_symbols:
        line = pos[0] if pos else 0
        lw.not_one.append((size, f"{what} on line {line} of {lw.filename} was compiled "
                                 f"assuming {size} > 1; the data has {size} = 1"))


def vector_kind(lw, x: Node, what: str, pos) -> str:
    """``scalar``, ``row``, ``col`` or ``matrix``, assuming unknown sizes are not 1."""
    r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
    if r == 1 and c == 1:
        return "scalar"
    if r == 1:
        return "row"
    if c == 1:
        return "col"
    assume_not_one(lw, r, what, pos)
    assume_not_one(lw, c, what, pos)
    return "matrix"


def first_dim(lw, x: Node, what: str, pos) -> int:
    """Octave's default dimension: the first that is not 1 (1 for a 1x1)."""
    if lw.uni.resolve(x.rows) == 1 and lw.uni.resolve(x.cols) != 1:
        return 2
    assume_not_one(lw, x.rows, what, pos)
    return 1


def literal(e: syntax.Expr) -> float | None:
    """The value of a numeric literal (``2``, ``-1``, ``Inf``), else None."""
    if isinstance(e, syntax.Unary) and e.op in "+-":
        v = literal(e.operand)
        return None if v is None else (-v if e.op == "-" else v)
    if isinstance(e, syntax.Num):
        return e.value
    if isinstance(e, syntax.Name) and e.id in ("Inf", "inf"):
        return math.inf
    return None


def dimension_arg(lw, e: syntax.Expr, f: str) -> int:
    d = lw.literal_int(e, f"the dimension argument of {f}()")
    if d not in (1, 2):
        raise lw.parse_error(f"{f}(..., d) needs d = 1 or 2", e.pos)
    return d


# ------------------------------------------------------------------ operators
def broadcast(lw, op: str, a: Node, b: Node, pos) -> Node:
    """``A ± s`` and ``s ± A``: the scalar becomes ``s·ones(r, c)``, so ``Δ(A + s) = ΔA``."""
    if a.is_scalar:
        a = lw.fresh(ir.scale(a, ir.ones(b.rows, b.cols)))
    else:
        b = lw.fresh(ir.scale(b, ir.ones(a.rows, a.cols)))
    return lw.build(Op.ADD if op == "+" else Op.SUB, a, b, pos=pos)


def expand_vectors(lw, a: Node, b: Node, pos) -> tuple[Node, Node]:
    """Octave's broadcasting of a row (1×c) or column (r×1) against a matrix: the vector
    is repeated with a product by ones (``ones(r,1)·m``), which keeps it maintainable."""
    def one(x) -> bool:
        return lw.uni.resolve(x) == 1

    for _ in range(2):
        if one(a.rows) and not one(b.rows) and not (a.is_scalar or b.is_scalar):
            assume_not_one(lw, b.rows, "broadcasting a row", pos)
            a = lw.fresh(ir.matmul(ir.ones(b.rows, 1), a))
        if one(a.cols) and not one(b.cols) and not (a.is_scalar or b.is_scalar):
            assume_not_one(lw, b.cols, "broadcasting a column", pos)
            a = lw.fresh(ir.matmul(a, ir.ones(1, b.cols)))
        a, b = b, a
    return a, b


def elementwise_power(lw, e: syntax.Binary, hint: str, p: float | None = None) -> Node:
    """``E .^ p`` (and ``s ^ p`` for a 1x1 s) with an exponent p known before the data."""
    p = lw.exponent(e.right) if p is None else p
    if p is None or math.isinf(p):
        raise lw.parse_error(f"the exponent of '{e.op}' must be a number literal",
                             getattr(e.right, "pos", e.pos),
                             "write e.g. X .^ 2 or X .^ 0.5")
    base = lw.expr(e.left, hint)
    if base.op is Op.CONST and number_value(base.attr) is not None:
        return _fold(float(base.attr) ** p)
    if p == 1:
        return base
    exponent = sp.Integer(int(p)) if float(p).is_integer() else sp.Float(p)
    return lw.build(Op.MAP, base, pos=e.pos, attr=("power", exponent))


def compare(lw, e: syntax.Binary, hint: str) -> Node:
    """``< <= > >= == ~= && ||``: 1 or 0, folded when both sides are known."""
    a, b = lw.expr(e.left, hint), lw.expr(e.right, hint)
    fn = OPERATORS[e.op]
    if a.op is Op.CONST and b.op is Op.CONST:
        x, y = lw.uni.resolve(a.attr), lw.uni.resolve(b.attr)
        rel = {"lt": sp.Lt, "le": sp.Le, "gt": sp.Gt, "ge": sp.Ge, "eq": sp.Eq,
               "ne": sp.Ne}.get(fn)
        if rel is not None:
            got = rel(x, y)
        else:
            got = sp.And(sp.Ne(x, 0), sp.Ne(y, 0)) if fn == "and" else \
                sp.Or(sp.Ne(x, 0), sp.Ne(y, 0))
        if got in (sp.true, sp.false):
            return ir.const(1 if got == sp.true else 0)
        raise NeedsData(f"'{_show(e)}' depends on sizes that are not known before the data")
    if not (a.is_scalar or b.is_scalar):
        what = f"operands of '{e.op}' must have the same size"
        lw.unify(a.rows, b.rows, e.pos, what, a.shape, b.shape)
        lw.unify(a.cols, b.cols, e.pos, what, a.shape, b.shape)
    return lw.build(Op.EBIN, a, b, pos=e.pos, attr=fn)


def logical_not(lw, v: Node, pos) -> Node:
    if v.op is Op.CONST and number_value(v.attr) is not None:
        return ir.const(1 if v.attr == 0 else 0)
    return lw.build(Op.MAP, v, pos=pos, attr=("not", None))


# ------------------------------------------------------------------ functions
def call(lw, e: syntax.Call, hint: str) -> Node:
    """Long on purpose: One case per supported function, in one dispatch, so the whole list is
    visible at once."""
    f, args = e.func, e.args
    lo, hi = FUNCTIONS[f]
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise lw.parse_error(f"{f}() takes {want} arguments, got {len(args)}", e.pos)
    if f in ("max", "min") and len(args) == 3:
        if not (isinstance(args[1], syntax.Matrix) and not args[1].rows):
            raise lw.parse_error(f"the second argument of {f}(X, [], d) must be []",
                                 args[1].pos)
        x = lw.expr(args[0], hint)
        return reduce_(lw, f, x, dimension_arg(lw, args[2], f), e.pos)
    x = lw.expr(args[0], hint)
    if f in ("tril", "triu"):
        return x if x.is_scalar else lw.build(Op.MAP, x, pos=e.pos, attr=(f, None))
    if f in ("abs", "sqrt", "exp", "log"):
        if x.op is Op.CONST and number_value(x.attr) is not None:
            value = {"abs": abs, "sqrt": math.sqrt, "exp": math.exp, "log": math.log}[f]
            try:
                return _fold(value(float(x.attr)))
            except ValueError:
                raise lw.parse_error(f"{f}({x.attr}) is not a real number", e.pos) from None
        return lw.build(Op.MAP, x, pos=e.pos, attr=(f, None))
    if f in ("max", "min"):
        if len(args) == 1:
            kind = vector_kind(lw, x, f"{f}()", e.pos)
            if kind == "scalar":
                return x
            d = 2 if kind == "row" else 1
            return reduce_(lw, f, x, d, e.pos)
        y = lw.expr(args[1], hint)
        if not (x.is_scalar or y.is_scalar):
            what = f"the arguments of {f}(A, B) must have the same size (or one be 1x1)"
            lw.unify(x.rows, y.rows, e.pos, what, x.shape, y.shape)
            lw.unify(x.cols, y.cols, e.pos, what, x.shape, y.shape)
        if x.op is Op.CONST and y.op is Op.CONST and number_value(x.attr) and number_value(y.attr):
            return ir.const(max(x.attr, y.attr) if f == "max" else min(x.attr, y.attr))
        return lw.build(Op.EBIN, x, y, pos=e.pos, attr=f)
    if f == "mean":
        d = dimension_arg(lw, args[1], f) if len(args) == 2 else \
            first_dim(lw, x, "mean()", e.pos)
        extent = lw.uni.resolve(x.shape[d - 1])
        total = x if extent == 1 else lw.build(Op.SUM, x, pos=e.pos, attr=d)
        return lw.fresh(ir.scale(ir.const(1 / extent), total))
    if f == "norm":
        p = "2"
        if len(args) == 2 and isinstance(args[1], syntax.Str):
            if args[1].value not in ("fro", "inf", "Inf"):
                raise lw.parse_error(f"norm(X, '{args[1].value}') is not supported",
                                     args[1].pos, "write norm(X, p) with p = 1, 2, Inf or "
                                     "'fro'")
            p = "fro" if args[1].value == "fro" else "inf"
        elif len(args) == 2:
            v = literal(args[1])
            if v not in (1, 2, math.inf):
                raise lw.parse_error("norm(X, p) supports p = 1, 2, Inf or 'fro'",
                                     args[1].pos, "write e.g. norm(X, 1) or norm(X, 'fro')")
            p = "inf" if v == math.inf else str(int(v))
        kind = vector_kind(lw, x, "norm()", e.pos)
        return lw.build(Op.NORM, x, pos=e.pos, attr=(p, kind != "matrix"))
    if f == "diag":
        kind = vector_kind(lw, x, "diag()", e.pos)
        if kind == "scalar":
            return x
        if kind == "matrix":
            r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
            if not (r.is_Number and c.is_Number):
                lw.unify(x.rows, x.cols, e.pos, "diag() of a matrix with symbolic sizes "
                         "needs a square matrix", x.shape)
        return lw.build(Op.DIAG, x, pos=e.pos, attr="tovec" if kind == "matrix" else "tomat")
    if f == "kron":
        y = lw.expr(args[1], hint)
        return lw.build(Op.KRON, x, y, pos=e.pos)
    if f in ("numel", "rows", "columns"):
        r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
        return ir.const({"numel": sp.expand(r * c), "rows": r, "columns": c}[f])
    if f == "length":
        r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
        if r.is_Number and c.is_Number:
            return ir.const(max(r, c))
        if r == 1 or c == 1:
            return ir.const(c if r == 1 else r)
        raise NeedsData(f"length() on line {e.pos[0]} needs the sizes of its argument")
    if f == "chol":
        lw.unify(x.rows, x.cols, e.pos, "chol() needs a square matrix", x.shape)
        return lw.build(Op.CHOL, x, pos=e.pos)
    assert f == "pinv"
    return lw.build(Op.PINV, x, pos=e.pos)


def reduce_(lw, f: str, x: Node, d: int, pos) -> Node:
    if lw.uni.resolve(x.shape[d - 1]) == 1:
        return x
    return lw.build(Op.REDUCE, x, pos=pos, attr=(f, d))


# ------------------------------------------------------------------ indexing
def index(lw, e: syntax.Call, hint: str) -> Node:
    """Indexing reads with literal, size or ``end``-relative ranges: ``X(:, j)``,
    ``X(a:b, :)``, ``X(i, j)``, ``v(i)``."""
    x = lw.env[e.func]
    args = e.args
    if len(args) == 2:
        rows = _slice(lw, args[0], x.rows, e)
        cols = _slice(lw, args[1], x.cols, e)
    elif len(args) == 1:
        r, c = lw.uni.resolve(x.rows), lw.uni.resolve(x.cols)
        if not (r == 1 or c == 1) and (r.free_symbols or c.free_symbols):
            raise NeedsData(f"'{_show(e)}' reads a vector, and only the data says whether "
                            f"{e.func} is one")
        kind = vector_kind(lw, x, "indexing with one subscript", e.pos)
        if kind == "matrix" or isinstance(args[0], syntax.Colon):
            raise lw.parse_error(f"'{e.func}({_show(args[0])})' indexes a matrix as a "
                                 "vector, which is not supported", e.pos,
                                 f"write {e.func}(i, j) with a row and a column index")
        if kind == "row":
            rows, cols = None, _slice(lw, args[0], x.cols, e)
        else:
            rows, cols = _slice(lw, args[0], x.rows, e), None
    else:
        raise lw.parse_error(f"'{e.func}(...)' needs one or two subscripts", e.pos,
                             "write X(i, j), X(:, j) or X(a:b, :)")
    if rows is None and cols is None:
        return x
    return lw.build(Op.INDEX, x, pos=e.pos, attr=(rows, cols))


def _slice(lw, arg: syntax.Expr, extent, e: syntax.Call):
    """``(start, stop)`` zero-based half-open for one subscript, ``(start, stop, step)``
    for a range ``a:s:b`` with s > 1 (literal bounds: the data's shapes when open), or
    None for all."""
    extent = lw.uni.resolve(extent)
    if isinstance(arg, syntax.Colon):
        return None
    step = 1
    if isinstance(arg, syntax.Span):
        lo = _position(lw, arg.start, extent, e)
        hi = _position(lw, arg.stop, extent, e)
        if arg.step is not None:
            step = _position(lw, arg.step, extent, e)
            if not (step.is_Number and step > 0):
                raise lw.parse_error(f"the step of the subscript {_show(arg)} must be a "
                                     "positive integer", arg.pos, "write e.g. X(1:2:end, :)")
    else:
        lo = hi = _position(lw, arg, extent, e)
    if step != 1:
        if not (lo.is_Number and hi.is_Number):
            raise NeedsData(f"'{_show(e)}' takes every {step}th row or column, which the "
                            "data's shapes decide")
        hi = lo + max((hi - lo) // step, -1) * step  # the last index taken
    start, stop = sp.expand(lo - 1), sp.expand(hi)
    if (start.is_Number and start < 0) or (stop.is_Number and extent.is_Number
                                          and stop > extent) \
            or (start.is_Number and stop.is_Number and stop <= start):
        raise lw.shape_error(f"index {_show(arg)} is out of bounds in "
                             f"'{_show(e)}': the extent there is {extent}",
                             getattr(arg, "pos", e.pos))
    if step != 1 and stop - start > 1:
        return (start, stop, sp.Integer(step))
    if start == 0 and sp.expand(stop - extent) == 0:
        return None
    return (start, stop)


def _position(lw, arg: syntax.Expr, extent, e: syntax.Call) -> sp.Expr:
    lw.end_stack.append(extent)
    try:
        v = lw.expr(arg, "index")
    finally:
        lw.end_stack.pop()
    if v.op is Op.CONST:
        val = lw.uni.resolve(v.attr)
        if (val.is_Number and val.is_Integer) or (not val.is_Number and val.free_symbols):
            return val
    raise lw.parse_error(f"the subscript {_show(arg)} of '{e.func}' must be an integer "
                         "literal, 'end' or arithmetic on sizes", getattr(arg, "pos", e.pos),
                         "linview reads fixed parts of matrices: X(:, 1), X(2:end, :)")


# ------------------------------------------------------------------ misplaced syntax
def x_end(lw, e: syntax.End, hint: str) -> Node:
    if not lw.end_stack:
        raise lw.parse_error("'end' is only allowed inside an index", e.pos,
                             "write sizes explicitly, e.g. size(X, 1)")
    return ir.const(lw.end_stack[-1])


def x_str(lw, e: syntax.Str, hint: str) -> Node:
    raise lw.parse_error(f"the string '{e.value}' is not supported here", e.pos,
                         "strings are only supported in norm(X, 'fro') and qr(X, 'econ')")


def x_colon(lw, e: syntax.Colon, hint: str) -> Node:
    raise lw.parse_error("a lone ':' is only allowed as a subscript", e.pos,
                         "write X(:, j) for a column")


def x_span(lw, e: syntax.Span, hint: str) -> Node:
    raise lw.parse_error("a range a:b is only allowed as a subscript or a 'for' range",
                         e.pos, "write X(a:b, :) for rows a to b")
