"""Iterative models (thesis §6.2.3, Table 6.1): how ``E^k`` and recurrences are lowered.

* ``linear``: one step at a time (``P_i = P_{i-1} A``; ``T_i = A T_{i-1} + B``);
* ``exp``: exponentiation by squaring, ``P_{2i} = P_i P_i``; a recurrence jumps by powers
  of two, ``T_{2i} = P_i T_i + S_i B`` with the sums of powers ``S_{2i} = P_i S_i + S_i``;
* ``skip=s``: squaring up to ``P_s`` (and ``S_s``), then steps of ``s``:
  ``T_{i+s} = P_s T_i + S_s B``;
* ``written``: the program as the user wrote it and Octave runs it: loops step by step,
  ``E^k`` by repeated squaring.  It is the re-evaluation baseline of ``bench`` and
  ``cost``.

Each function here builds IR through the lowering interface :class:`Lowering`
(``materialize`` makes auxiliary views, ``build`` checks shapes), so the models are plain
SSA programs that the rest of the pipeline treats like any other.
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.frontend import syntax

MODELS = ("exp", "linear", "skip", "written")


@dataclass(frozen=True)
class Options:
    """Lowering options: the iterative model for ``E^k`` (``exp``, ``linear``, ``skip``)
    and the skip size for ``skip``."""

    model: str = "exp"
    skip: int = 4
    #: the data's shapes ``((input, rows, cols), ...)``: the program is specialised to them
    shapes: tuple = ()
    #: sizes given by ``dims=`` that the data's shapes must agree with
    dims: tuple = ()
    #: least squares ``(FᵀF) \\ (FᵀY)``, ``F \\ Y`` (tall F), ``inv(FᵀF)*(FᵀY)``:
    #: ``normal`` (the normal equations, ``inv(FᵀF)`` maintained by Woodbury) or ``qr``
    #: (a solve view keeping the triangular factor of F by QR updates); ``pinv``: a
    #: non-square ``A \\ B`` is ``pinv(A) * B`` (minimum norm, for a rank-deficient A)
    least_squares: str = "normal"
    #: non-zeros of sparse inputs ``((input, nnz), ...)`` (``nnz_X`` of ``dims``, counted
    #: from the data at load): what the choice of a solve view is priced by
    nnz: tuple = ()

    def __repr__(self) -> str:  # as before the data's shapes existed: hashes stay stable
        extra = f", shapes={self.shapes!r}, dims={self.dims!r}" if self.shapes else ""
        if self.least_squares != "normal":
            extra += f", least_squares={self.least_squares!r}"
        if self.nnz:
            extra += f", nnz={self.nnz!r}"
        return f"Options(model={self.model!r}, skip={self.skip!r}{extra})"


class Lowering(Protocol):
    """What the models need from the lowering (``compiler.lower``)."""

    options: Options

    def build(self, op: Op, *children: Node, pos=(0, 0), attr=None) -> Node:
        """A node with its shape checked (a shape error names the statement)."""

    def expr(self, e: syntax.Expr, hint: str) -> Node:
        """The IR of a source expression."""

    def emit(self, name: str, value: Node, st: syntax.Assign | None = None) -> Node:
        """A new SSA statement ``name := value``; returns its view."""

    def materialize(self, value: Node, name: str) -> Node:
        """``value`` as a leaf (a new auxiliary view unless it is one)."""

    def unify(self, a, b, pos, what: str, *shapes) -> None:
        """Make two sizes equal, or raise a shape error saying ``what``."""

    def lookup(self, name: str) -> Node:
        """The current value of a program variable."""

    def rebind(self, name: str, value: Node, steps: int) -> None:
        """``name`` now holds ``value``, ``steps`` assignments later."""

    def statement(self, st: syntax.Assign) -> AbstractContextManager:
        """Attribute what is emitted inside to the source statement ``st``."""


def jumps(k: int, model: str, s: int) -> list[int]:
    """Step sizes whose sum is ``k``: ``[1]*k`` (linear), ``1, 1, 2, 4, ...`` then the
    remainder in binary (exp), or the exp sequence up to ``s`` and then steps of ``s``."""
    if model == "linear" or k <= 1:
        return [1] * k
    limit = k if model == "exp" else min(s, k)
    out, done = [1], 1
    while done + done <= limit:
        out.append(done)
        done += done
    step = done if model != "exp" else None
    while step and done + step <= k:
        out.append(step)
        done += step
    rest = k - done
    bit = 1 << max(rest.bit_length() - 1, 0)
    while rest:
        if bit <= rest and bit <= max(out):
            out.append(bit)
            rest -= bit
        else:
            bit >>= 1
    return out


def power(lw: Lowering, b: Node, k: int, pos) -> Node:
    """``b^k`` (``b`` a square leaf, k >= 2) under the lowering's model."""
    model, s = lw.options.model, lw.options.skip
    model = "exp" if model == "written" else model  # as Octave computes it: by squaring
    prefix = str(b.attr)
    mul = lambda x, y: lw.build(Op.MUL, x, y, pos=pos)  # noqa: E731

    def product(parts, done: int) -> Node:
        out = None
        for part, size in parts:
            out = part if out is None else mul(out, part)
            done += size
            if done < k and out.op not in ir.LEAVES:
                out = lw.materialize(out, f"{prefix}_pow{done}")
        return out

    if model == "linear":
        return product(itertools.repeat((b, 1), k), 0)  # lazily: k may be huge
    if model == "skip" and s < k:
        sq = _squares(lw, b, s, prefix, mul)
        top = max(sq)
        steps = itertools.repeat((sq[top], top), k // top)
        rest = k - top * (k // top)
        return product(itertools.chain(steps, [(sq[j], j) for j in _binary(rest)]), 0)
    if k & (k - 1) == 0:  # a power of two: the last squaring is the statement itself
        sq = _squares(lw, b, k // 2, prefix, mul)
        return mul(sq[k // 2], sq[k // 2])
    sq = _squares(lw, b, k, prefix, mul)
    return product([(sq[j], j) for j in _binary(k)], 0)


def _binary(k: int) -> list[int]:
    return [1 << j for j in range(k.bit_length()) if k >> j & 1][::-1]


def _squares(lw: Lowering, b: Node, top: int, prefix: str, mul) -> dict[int, Node]:
    """``{1: b, 2: b², 4: b⁴, ...}`` up to ``top``, each a view."""
    out, j = {1: b}, 1
    while j * 2 <= top:
        out[j * 2] = lw.materialize(mul(out[j], out[j]), f"{prefix}_pow{j * 2}")
        j *= 2
    return out


def match_recurrence(st: syntax.For, env: dict) -> tuple[str, syntax.Expr, syntax.Expr | None,
                                                          bool] | None:
    """``T = X*T + Y`` (or ``Y + X*T``, ``X*T - Y``, ``X*T``) as the whole loop body, with
    X and Y free of T and of the loop variable: ``(T, X, Y, negate_Y)``."""
    if len(st.body) != 1 or not isinstance(st.body[0], syntax.Assign):
        return None
    target, e = st.body[0].target, st.body[0].value
    if target not in env:
        return None

    def is_xt(x):
        return isinstance(x, syntax.Binary) and x.op == "*" and isinstance(x.right, syntax.Name) \
            and x.right.id == target

    if is_xt(e):
        X, Y, neg = e.left, None, False
    elif isinstance(e, syntax.Binary) and e.op in "+-" and is_xt(e.left):
        X, Y, neg = e.left.left, e.right, e.op == "-"
    elif isinstance(e, syntax.Binary) and e.op == "+" and is_xt(e.right):
        X, Y, neg = e.right.left, e.left, False
    else:
        return None
    for part in (X, Y):
        if part is not None and _mentions(part, {target, st.var}):
            return None
    return target, X, Y, neg


def _mentions(e, names: set[str]) -> bool:
    if isinstance(e, syntax.Name):
        return e.id in names
    if isinstance(e, syntax.Call) and e.func in names:
        return True
    kids = []
    for attr in ("operand", "left", "right"):
        if hasattr(e, attr):
            kids.append(getattr(e, attr))
    kids += list(getattr(e, "args", ()))
    kids += [x for row in getattr(e, "rows", ()) for x in row]
    return any(_mentions(k, names) for k in kids)


def recurrence(lw: Lowering, st: syntax.For, match, k: int) -> bool:
    """Lower ``for 1..k: T = X T + Y`` by the exp or skip model (Table 6.1); ``False``
    (nothing emitted) when X turns out to be a scalar, which a plain unrolling handles."""
    target, X, Y, neg = match
    assign = st.body[0]
    with lw.statement(assign):
        a = lw.expr(X, target)
        if a.is_scalar:
            return False
        _recurrence_steps(lw, assign, target, a, Y, neg, k)
    return True


def _recurrence_steps(lw: Lowering, assign: syntax.Assign, target: str, a: Node, Y, neg: bool,
                      k: int) -> None:
    """Emit ``T_k`` of ``T = a T + Y`` by the model's jumps (see :func:`recurrence`)."""
    a = lw.materialize(a, f"{target}_A")
    t0 = lw.lookup(target)
    lw.unify(a.rows, a.cols, assign.pos, "the matrix of a recurrence must be square", a.shape)
    lw.unify(a.cols, t0.rows, assign.pos, "inner dimensions of '*' must agree",
             a.shape, t0.shape)
    b = None
    if Y is not None:
        b = lw.expr(Y, target)
        b = ir.neg(b) if neg else b
        if b.is_scalar and not t0.is_scalar:  # T = A*T + s: s broadcast (Octave)
            b = lw.fresh(ir.scale(b, ir.ones(t0.rows, t0.cols)))
        b = lw.materialize(b, f"{target}_B")
        for x, y in ((b.rows, t0.rows), (b.cols, t0.cols)):
            lw.unify(x, y, assign.pos, "operands of '+' must have the same size",
                     b.shape, t0.shape)
    steps = jumps(k, lw.options.model, lw.options.skip)
    mul = lambda x, y: lw.build(Op.MUL, x, y, pos=assign.pos)  # noqa: E731
    P = _squares(lw, a, max(steps), str(a.attr), mul)
    S: dict[int, Node] = {1: ir.eye(a.rows)}
    j = 1
    while b is not None and j * 2 <= max(steps):
        nxt = lw.build(Op.ADD, mul(P[j], S[j]) if j > 1 else P[j], S[j], pos=assign.pos)
        S[j * 2] = lw.materialize(nxt, f"{a.attr}_sum{j * 2}")
        j *= 2
    t, done = t0, 0
    for step in steps:
        new = mul(P[step], t)
        if b is not None:
            new = lw.build(Op.ADD, new, b if step == 1 else mul(S[step], b), pos=assign.pos)
        done += step
        t = lw.emit(f"{target}_{done}", new, assign)
    lw.rebind(target, t, k)
