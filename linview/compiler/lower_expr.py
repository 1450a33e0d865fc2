"""Lowering of expressions (the ``x_<node>`` methods of the lowering, by syntax node type):
names, literals, operators, block matrices, powers, inverses and function calls.  Mixed
into :class:`linview.compiler.lower._Lowerer`, whose statement-level methods (``build``,
``fresh``, ``materialize``, ``emit``, ``unify``, errors) these call.

``A \\ B`` with a non-square A follows Octave (least squares for a tall A, minimum norm for
a wide one); ``F \\ Y``, ``(F'*F) \\ (F'*Y)`` and ``inv(F'*F) * (F'*Y)`` of inputs F, Y are
one least-squares problem, kept as the options say (``normal``, ``qr``, ``pinv``: see
``docs/language.md`` and :mod:`linview.lstsq`), with a note for ``explain``.
"""

from __future__ import annotations

import sympy as sp

from linview.compiler import designs, ir, lower_functions, lower_language, models
from linview.compiler.ir import Node, Op
from linview.compiler.shapes import Conflict
from linview.frontend import syntax

SUPPORTED_FUNCTIONS = ("eye", "zeros", "ones", "size", "inv", "transpose", "sum", "trace",
                       *lower_language.FUNCTIONS, *lower_functions.FUNCTIONS)


class ExpressionLowering:
    """The expression half of the lowering (see the module docstring)."""

    def expr(self, e: syntax.Expr, hint: str) -> Node:
        kind = "x_" + type(e).__name__.lower()
        method = getattr(self, kind, None)
        if method is None:  # subscripts and strings: linview/lower_language.py
            return self.fresh(getattr(lower_language, kind)(self, e, hint))
        return self.fresh(method(e, hint))

    def x_num(self, e: syntax.Num, hint: str) -> Node:
        return ir.const(sp.Integer(int(e.value)) if float(e.value).is_integer()
                        else sp.Float(e.value))

    def x_name(self, e: syntax.Name, hint: str) -> Node:
        if e.id in self.loop_vars:
            if e.id not in self.loop_values:
                raise self.parse_error(f"the loop variable '{e.id}' has no value here (its "
                                       "loop runs zero times)", e.pos)
            return ir.const(sp.Integer(self.loop_values[e.id]))
        if e.id not in self.env:
            raise self.parse_error(f"undefined variable '{e.id}'", e.pos)
        return self.env[e.id]

    def x_unary(self, e: syntax.Unary, hint: str) -> Node:
        v = self.expr(e.operand, hint)
        if e.op == "!":
            return lower_language.logical_not(self, v, e.pos)
        return ir.neg(v) if e.op == "-" else v

    def x_transpose(self, e: syntax.Transpose, hint: str) -> Node:
        return ir.transpose(self.expr(e.operand, hint))

    def x_matrix(self, e: syntax.Matrix, hint: str) -> Node:
        if not e.rows:
            raise self.parse_error("the empty matrix [] is not supported", e.pos,
                                   "use zeros(r, c) for a matrix of zeros")
        rows = [[self.expr(x, hint) for x in row] for row in e.rows]
        src = lower_language.show(e)
        for i, row in enumerate(rows):
            for j, blk in enumerate(row[1:], 1):
                first, this = e.rows[i][0], e.rows[i][j]
                self.unify(row[0].rows, blk.rows, e.pos,
                           f"{src}: block row {i + 1} has {lower_language.show(first)} "
                           f"({self.show(row[0].shape)}) and {lower_language.show(this)} "
                           f"({self.show(blk.shape)}), which must have the same number of "
                           "rows")
        widths = [sp.Add(*[self.uni.resolve(b.cols) for b in row]) for row in rows]
        for i, w in enumerate(widths[1:], 2):
            self.unify(widths[0], w, e.pos,
                       f"{src}: block row 1 is {self.uni.resolve(widths[0])} columns wide "
                       f"but block row {i} is {self.uni.resolve(w)}")
        flat = [b for row in rows for b in row]
        if len(flat) == 1:
            return flat[0]
        return self.build(Op.CONCAT, *flat, pos=e.pos, attr=tuple(len(r) for r in rows))

    def x_binary(self, e: syntax.Binary, hint: str) -> Node:
        if e.op == "^":
            return self.power(e, hint)
        if e.op == ".^":
            return lower_language.elementwise_power(self, e, hint)
        if e.op in lower_language.OPERATORS:
            return lower_language.compare(self, e, hint)
        lstsq = self.stable_product(e, hint)
        if lstsq is not None:
            return lstsq
        a = self.expr(e.left, hint)
        b = self.expr(e.right, hint)
        op = e.op
        if op in ("+", "-"):
            if a.is_scalar != b.is_scalar:
                return lower_language.broadcast(self, op, a, b, e.pos)
            if a.op is Op.CONST and b.op is Op.CONST:
                return ir.const(a.attr + b.attr if op == "+" else a.attr - b.attr)
            a, b = lower_language.expand_vectors(self, a, b, e.pos)
            self.unify(a.rows, b.rows, e.pos, f"operands of '{op}' must have the same size",
                       a.shape, b.shape)
            self.unify(a.cols, b.cols, e.pos, f"operands of '{op}' must have the same size",
                       a.shape, b.shape)
            return self.build(Op.ADD if op == "+" else Op.SUB, a, b, pos=e.pos)
        if op in ("*", ".*"):
            if a.op is Op.CONST and b.op is Op.CONST:
                return ir.const(a.attr * b.attr)
            if (a.is_scalar and not b.is_scalar) or a.op is Op.CONST:
                return self.fresh(ir.scale(a, b))
            if (b.is_scalar and not a.is_scalar) or b.op is Op.CONST:
                return self.fresh(ir.scale(b, a))
            if op == ".*" or (a.is_scalar and b.is_scalar):
                return self.elementwise(Op.EMUL, a, b, e)
            self.unify(a.cols, b.rows, e.pos, "inner dimensions of '*' must agree",
                       a.shape, b.shape)
            return self.build(Op.MUL, a, b, pos=e.pos)
        if op in ("/", "./"):
            if b.is_scalar:
                if b.op is Op.CONST:
                    if b.attr == 0:
                        raise self.shape_error("division by the constant zero", e.pos)
                    return self.fresh(ir.scale(ir.const(1 / b.attr), a))
                if a.is_scalar:
                    return self.build(Op.EDIV, a, b, pos=e.pos)
                return self.fresh(ir.scale(self.build(Op.EDIV, ir.const(1), b, pos=e.pos), a))
            if op == "./":
                return self.elementwise(Op.EDIV, a, b, e)
            # B / A = B * inv(A)
            self.unify(a.cols, b.cols, e.pos, "in 'B / A', B and A must have the same number "
                       "of columns", a.shape, b.shape)
            if self.squareness(b, e) != "square":  # B / A = (Aᵀ \ Bᵀ)ᵀ
                return ir.transpose(self.least_squares(ir.transpose(b), ir.transpose(a), e,
                                                       hint))
            if self.solve_view(b, ir.transpose(a), e.pos):  # B / A = (Aᵀ \ Bᵀ)ᵀ
                return ir.transpose(self.solve_statement(ir.transpose(b), ir.transpose(a), e,
                                                         hint))
            return self.build(Op.MUL, a, self.inverse(b, e, hint), pos=e.pos)
        if op == "\\":
            if a.is_scalar:
                return self.x_binary(syntax.Binary("/", e.right, e.left, e.pos), hint)
            self.unify(a.rows, b.rows, e.pos, "in 'A \\ B', A and B must have the same number "
                       "of rows", a.shape, b.shape)
            if self.squareness(a, e) != "square":
                return self.least_squares(a, b, e, hint)
            gram = self.gram_solve(a, b, hint, e)  # (F'*F) \ (F'*Y)
            if gram is not None:
                return gram
            if self.solve_view(a, b, e.pos):
                return self.solve_statement(a, b, e, hint)
            return self.build(Op.MUL, self.inverse(a, e, hint), b, pos=e.pos)
        raise self.parse_error(f"operator '{op}' is not supported", e.pos)

    def elementwise(self, op: Op, a: Node, b: Node, e: syntax.Binary) -> Node:
        if not (a.is_scalar or b.is_scalar):
            a, b = lower_language.expand_vectors(self, a, b, e.pos)
            what = f"operands of '{e.op}' must have the same size"
            self.unify(a.rows, b.rows, e.pos, what, a.shape, b.shape)
            self.unify(a.cols, b.cols, e.pos, what, a.shape, b.shape)
        return self.build(op, a, b, pos=e.pos)

    def squareness(self, a: Node, e: syntax.Binary) -> str:
        """``square``, ``tall`` or ``wide``: the sizes decide; open sizes that may be equal
        are taken as equal (as before: a square solve); two declared sizes (never equal)
        need the data."""
        r, c = self.uni.resolve(a.rows), self.uni.resolve(a.cols)
        if r.is_Number and c.is_Number:
            return "square" if r == c else ("tall" if r > c else "wide")
        try:
            self.uni.unify(r, c)
        except Conflict:
            raise lower_language.NeedsData(
                f"'{syntax.show(e)}' of line {e.pos[0]} is a square solve, a least-squares "
                "problem or a minimum-norm one, as the data's sizes say") from None
        return "square"

    def least_squares(self, a: Node, b: Node, e, hint: str) -> Node:
        """``A \\ B`` for a non-square A, as Octave: least squares for a tall A (the normal
        equations ``inv(AᵀA) AᵀB``), the minimum-norm solution for a wide one
        (``Aᵀ inv(AAᵀ) B``); both assume full rank, as the inverse's guards check."""
        if self.options.least_squares == "pinv":  # rank-deficient: Octave's answer
            line = e.pos[0] if e.pos else 0
            self.notes.append(f"line {line}: minimum-norm least squares by pinv, "
                              "re-evaluated on every update")
            return self.build(Op.MUL, self.build(Op.PINV, a, pos=e.pos), b, pos=e.pos)
        at = ir.transpose(a)
        if self.uni.resolve(a.rows) > self.uni.resolve(a.cols):
            if (sw := designs.sqrt_weighted(a, b, {s.name: s.expr for s in self.statements})):
                a, b, w = sw  # (sqrt(w).*F) \ (sqrt(w).*Y): weighted, Fᵀ·diag(w)·F
                at = self.build(Op.MUL, ir.transpose(a), self.build(Op.DIAG, w, attr="tomat"))
            gram = self.build(Op.MUL, at, a, pos=e.pos)
            rhs = self.build(Op.MUL, at, b, pos=e.pos)
            stable = self.gram_solve(gram, rhs, hint, e)
            if stable is not None:
                return stable
            return self.build(Op.MUL, self.inverse(gram, e, hint), rhs, pos=e.pos)
        gram = self.build(Op.MUL, a, at, pos=e.pos)
        solved = self.build(Op.MUL, self.inverse(gram, e, hint), b, pos=e.pos)
        return self.build(Op.MUL, at, solved, pos=e.pos)

    def stable_product(self, e: syntax.Binary, hint: str) -> Node | None:
        """``inv(F'*F) * (F'*Y)`` and ``pinv(F) * Y`` (tall F) as one least-squares problem:
        a note, and the stable form when the options ask for it (else None: the inverse,
        or ``pinv`` of a square or wide F, is kept as written)."""
        left = e.left
        if not (e.op == "*" and isinstance(left, syntax.Call) and left.func in ("inv", "pinv")
                and left.func not in self.env and len(left.args) == 1
                and _plain_product(left.args[0]) and _plain_product(e.right)):
            return None
        if left.func == "pinv":
            return self.pinv_product(left.args[0], e, hint)
        gram, rhs = self.expr(left.args[0], hint), self.expr(e.right, hint)
        return self.gram_solve(gram, rhs, hint, e)

    def pinv_product(self, arg: syntax.Expr, e: syntax.Binary, hint: str) -> Node | None:
        """``pinv(F) * Y`` for a tall F (an input or a design ``[ones(m,1) X]``) and an
        input Y is ``F \\ Y``: least squares, kept as ``F \\ Y`` is (a rank-deficient F
        comes back to ``pinv`` at ``load()``, :mod:`linview.lstsq`)."""
        if not (isinstance(arg, syntax.Name) and isinstance(e.right, syntax.Name)):
            return None
        f, y = self.expr(arg, hint), self.expr(e.right, hint)
        if y.op is not Op.INPUT or self.design(f) is None:
            return None
        r, c = self.uni.resolve(f.rows), self.uni.resolve(f.cols)
        if not (r.is_Number and c.is_Number):
            if r == c:
                return None
            raise lower_language.NeedsData(
                f"'{syntax.show(e)}' of line {e.pos[0]} is a least-squares problem when "
                f"{arg.id} is tall, as the data's sizes say")
        if r <= c:  # square or wide: pinv as written
            return None
        self.unify(f.rows, y.rows, e.pos, "inner dimensions of '*' must agree",
                   (f.cols, f.rows), y.shape)
        return self.least_squares(f, y, e, hint)

    def design(self, f: Node) -> Node | None:
        """The design matrix a least-squares problem may keep by factor updates: an input,
        or a view ``[ones(m,c) X ...]`` (one block row of ones and distinct inputs, e.g.
        an intercept column), returned as its defining expression; else None."""
        if f.op is not Op.VIEW:
            return designs.design_of(f)
        expr = next((st.expr for st in self.statements if st.name == f.attr), None)
        return None if expr is None else designs.design_of(expr)

    def gram_solve(self, gram: Node, rhs: Node, hint: str, e) -> Node | None:
        """``(FᵀF) \\ (FᵀY)`` for an input Y and a design F (:meth:`design`) is a
        least-squares problem: with the ``qr`` option, ``x := solve(FᵀF, FᵀY)`` kept by
        updates of F's triangular factor (the ``cholesky`` solve view, F's definition
        inline); else None, and the normal equations are maintained.  A note says which,
        for ``explain``."""
        if gram.op is not Op.MUL or rhs.op is not Op.MUL:
            return None
        gram, rhs = self.fresh(gram), self.fresh(rhs)  # sizes unified since gram was built
        (ft, f), (gt, y) = gram.children, rhs.children
        weight = designs.weight_node(ft, gt, {st.name: st.expr for st in self.statements})
        if weight is not None:
            ft = gt = ft.children[0]
        if not (ft.op is Op.T and ft.children[0] is f and gt is ft and y.op is Op.INPUT):
            return None
        design = self.design(f)
        if design is None:
            return None
        F, Y, line = f.attr, y.attr, e.pos[0] if e.pos else 0
        what = f"line {line}: least squares of {F} and {Y}"
        if design is not f:
            what += f" ({F} = {designs.show(design)})"
        if weight is not None:
            what += f", weighted by diag({weight.children[0].attr})"
        if self.options.least_squares != "qr":
            self.notes.append(f"{what}: normal equations, inv({F}ᵀ{F}) maintained by Woodbury; "
                              f"load() keeps it by QR updates of {F} instead when their error "
                              "is predicted over 10× lstsq's (the default, least_squares="
                              f"\"auto\") or the condition estimate of {F}ᵀ{F} is over the limit")
            return None
        self.notes.append(f"{what}: the triangular factor R of {F} = QR (the Cholesky "
                          f"factor of {F}ᵀ{F}) kept by rank-1 updates and downdates, solved "
                          "by corrected seminormal equations (O(n²) + O(mn) per row change), "
                          "no inverse")
        dt = ir.transpose(design)
        if weight is not None:
            dt = self.build(Op.MUL, dt, weight)
        node_ = self.build(Op.SOLVE, self.build(Op.MUL, dt, design),
                           self.build(Op.MUL, dt, y), attr=("cholesky", 1e-8))
        return self.materialize(node_, hint)

    def inverse(self, a: Node, e, hint: str) -> Node:
        self.unify(a.rows, a.cols, e.pos, "only square matrices can be inverted", a.shape)
        a = self.fresh(a)
        if a.op is Op.CONST:
            if a.attr == 0:
                raise self.shape_error("inverse of the constant zero", e.pos)
            return ir.const(1 / a.attr)
        if a.is_scalar:
            return self.build(Op.EDIV, ir.const(1), a, pos=e.pos)
        arg = self.materialize(a, f"{hint}_arg")
        return self.materialize(self.build(Op.INV, arg, pos=e.pos), f"{hint}_inv")

    def exponent(self, e: syntax.Expr) -> float | None:
        """The value of an exponent known before the data: a literal, a loop variable, a
        size or arithmetic on those (else None)."""
        v = lower_language.literal(e)
        if v is not None or not _constant_syntax(e, self.loop_vars, self.env):
            return v
        n = self.expr(e, "exponent")
        value = sp.sympify(self.uni.resolve(n.attr)) if n.op is Op.CONST else None
        return float(value) if value is not None and value.is_Number else None

    def power(self, e: syntax.Binary, hint: str) -> Node:
        k = self.exponent(e.right)
        if k is not None and not (float(k).is_integer() and k >= 1) \
                and self.expr(e.left, hint).is_scalar:
            return lower_language.elementwise_power(self, e, hint, k)
        if k is None or not float(k).is_integer():
            raise self.parse_error("the exponent of '^' must be an integer known before the "
                                   "data", getattr(e.right, "pos", e.pos),
                                   "a literal, a loop variable or a size: A^3, A^k, A^(-1)")
        k = int(k)
        base = self.expr(e.left, hint)
        self.unify(base.rows, base.cols, e.pos, "'^' needs a square matrix", base.shape)
        base = self.fresh(base)
        if k == 0:  # A^0 = I, as in Octave
            return ir.eye(base.rows, base.cols)
        if k < 0:  # A^(-k) = inv(A)^k
            base = self.inverse(base, e, hint)
            k = -k
        if k == 1:
            return base
        if base.op is Op.CONST:
            return ir.const(base.attr ** k)
        if base.is_scalar:  # repeated squaring: depth and size O(log k)
            out, square = None, base
            while k:
                if k & 1:
                    out = square if out is None else self.build(Op.EMUL, out, square,
                                                                pos=e.pos)
                k >>= 1
                if k:
                    square = self.build(Op.EMUL, square, square, pos=e.pos)
            return out
        return models.power(self, self.materialize(base, f"{hint}_base"), k, e.pos)

    def x_call(self, e: syntax.Call, hint: str) -> Node:
        f, args = e.func, e.args
        if f in self.loop_vars:
            raise self.parse_error(f"indexing '{f}(...)' with a loop variable is not "
                                   "supported", e.pos, "loops are unrolled")
        if f in self.env:
            return lower_language.index(self, e, hint)
        if f in lower_language.FUNCTIONS:
            return lower_language.call(self, e, hint)
        if f in lower_functions.FUNCTIONS:
            return lower_functions.call(self, e, hint)
        arity = {"eye": (1, 2), "zeros": (1, 2), "ones": (1, 2), "size": (2, 2),
                 "inv": (1, 1), "transpose": (1, 1), "sum": (1, 2), "trace": (1, 1)}
        if f in ("qr", "lu"):
            outs = "[Q, R] = qr(A)" if f == "qr" else "[L, U] = lu(A) or [L, U, P] = lu(A)"
            raise self.parse_error(f"{f}() is supported with several outputs only", e.pos,
                                   f"write {outs} on a line of its own")
        if f not in arity:
            raise self.parse_error(f"unknown function '{f}'", e.pos,
                                   "supported functions: " + ", ".join(SUPPORTED_FUNCTIONS)
                                   + "; [Q, R] = qr(A), [L, U, P] = lu(A)")
        lo, hi = arity[f]
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} or {hi}"
            extra = " (size(X) without a dimension is not supported)" if f == "size" else ""
            raise self.parse_error(f"{f}() takes {want} arguments, got {len(args)}{extra}",
                                   e.pos, "write [r, c] = size(X) or size(X, 1)"
                                   if f == "size" else None)
        if f in ("eye", "zeros", "ones"):
            whole = args[0] if len(args) == 1 else None
            if isinstance(whole, syntax.Call) and whole.func == "size" \
                    and len(whole.args) == 1 and whole.func not in self.env:  # eye(size(P))
                args = (syntax.Call("size", (whole.args[0], syntax.Num(1.0, "1")), whole.pos),
                        syntax.Call("size", (whole.args[0], syntax.Num(2.0, "2")), whole.pos))
            sizes = [self.size_arg(a) for a in args]
            r, c = sizes[0], sizes[-1]
            return {"eye": ir.eye, "zeros": ir.zeros, "ones": ir.ones}[f](r, c)
        if f == "size":
            x = self.expr(args[0], hint)
            d = self.literal_int(args[1], "the dimension argument of size()")
            if d not in (1, 2):
                raise self.parse_error("size(X, d) needs d = 1 or 2", args[1].pos)
            return ir.const(x.shape[d - 1])
        x = self.expr(args[0], hint)
        if f == "inv":
            return self.inverse(x, e, hint)
        if f == "transpose":
            return ir.transpose(x)
        if f == "trace":
            if x.is_scalar:
                return x
            self.unify(x.rows, x.cols, e.pos, "trace() needs a square matrix", x.shape)
            return self.build(Op.TRACE, x, pos=e.pos)
        # sum: along the first non-singleton dimension, as Octave does
        if len(args) == 2:
            d = self.literal_int(args[1], "the dimension argument of sum()")
            if d not in (1, 2):
                raise self.parse_error("sum(X, d) needs d = 1 or 2", args[1].pos)
        else:
            d = 2 if x.rows == 1 else 1
            if d == 1 and not sp.sympify(x.rows).is_Number:
                line = e.pos[0] if e.pos else 0
                self.not_one.append((x.rows, f"sum() on line {line} of {self.filename} was "
                                     f"compiled to sum columns, assuming {x.rows} > 1; for "
                                     "a single row Octave sums the row instead: write "
                                     "sum(X, 1) or sum(X, 2)"))
        if (d == 1 and x.rows == 1) or (d == 2 and x.cols == 1):
            return x
        return self.build(Op.SUM, x, pos=e.pos, attr=d)

    def size_arg(self, a: syntax.Expr) -> sp.Expr:
        v = self.expr(a, "size")
        if v.op is Op.CONST:
            val = self.uni.resolve(v.attr)
            if val.is_Integer and val > 0:
                return val
            if not val.is_Number and val.free_symbols:
                return val
        raise self.parse_error("sizes must be positive integer literals, size(X, d), or "
                               "arithmetic on those", a.pos)


def _constant_syntax(e: syntax.Expr, loop_vars: set[str], env: dict) -> bool:
    """Whether ``e`` is built from numbers, loop variables, constants and size functions
    only (so that lowering it emits nothing and gives a constant)."""
    if isinstance(e, syntax.Num):
        return True
    if isinstance(e, syntax.Name):
        return e.id in loop_vars or (e.id in env and env[e.id].op is Op.CONST)
    if isinstance(e, syntax.Unary):
        return _constant_syntax(e.operand, loop_vars, env)
    if isinstance(e, syntax.Binary):
        return e.op in ("+", "-", "*", "/") and all(
            _constant_syntax(x, loop_vars, env) for x in (e.left, e.right))
    if isinstance(e, syntax.Call):
        return e.func in ("size", "length", "numel", "rows", "columns", "factorial") \
            and e.func not in env
    return False


def _plain_product(e: syntax.Expr) -> bool:
    """Names, transposes and products only (lowering such an expression emits nothing)."""
    if isinstance(e, syntax.Name):
        return True
    if isinstance(e, syntax.Transpose):
        return _plain_product(e.operand)
    return isinstance(e, syntax.Binary) and e.op == "*" and _plain_product(e.left) \
        and _plain_product(e.right)
