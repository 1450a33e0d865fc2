"""Every operation the compiler knows, one :class:`OpDef` entry per op in :data:`OPS`.

An entry holds all of the compiler's knowledge of its op:

=============  ===========================================================================
``shape``      ``(children, attr) -> (rows, cols)``; raises :class:`~.ir.ShapeMismatch`
``delta``      ``(n, d, new) -> [Term]``: ``Δn`` from the children's deltas ``d[i]`` (lists
               of terms) and their new values ``new[i]``; ``None``: not maintainable (the
               statement is re-evaluated in the trigger, thesis §6.4.3)
``evaluate``   ``(n, *values) -> ndarray``: the reference meaning (dense float64 arrays;
               ``scipy.sparse`` inputs accepted), used by :mod:`.interp`
``text``       ``(n, w) -> str`` in math notation; ``w(i, level)`` prints child ``i``,
               parenthesized when its precedence is below ``level``; ``prec`` is the op's own
``flops``      ``(n, size) -> count`` to evaluate ``n`` once from its children's values
``transpose``  ``(n, t) -> node``: ``nᵀ`` with the transpose pushed into the children
               (``t(c)`` is ``cᵀ`` pushed further); ``None``: ``nᵀ`` stays as it is
``symmetric``  ``(n, sym) -> bool``: a sufficient test that ``n`` is symmetric, given
               ``sym(c)`` for the children; ``None``: never known to be symmetric
=============  ===========================================================================

Leaves (inputs, views, trigger factors, constants, ``eye``/``zeros``/``ones``) are data, not
operations: each layer handles them directly.  Importing this module registers the shape
rules with :mod:`.ir` (``linview.compiler`` imports it first, so every node built anywhere
has them).  Each backend renders ops with its own table (``backends/*/codegen.py``).  How to
add an op, layer by layer, is in ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sps
import sympy as sp

from linview.compiler import ir, ops_octave, ops_solve
from linview.compiler.ir import ONE, Node, Op, ShapeMismatch, same_dim
from linview.errors import NumericalError


@dataclass(frozen=True)
class Term:
    """One summand ``P·Qᵀ`` of a delta; ``P`` is rows×r, ``Q`` is cols×r."""

    P: Node
    Q: Node

    @property
    def rank(self) -> sp.Expr:
        return self.P.cols


@dataclass(frozen=True)
class OpDef:
    """What the compiler knows about one op (see the module docstring for each field)."""

    shape: Callable
    evaluate: Callable
    text: Callable
    prec: int
    flops: Callable
    delta: Callable | None = None
    transpose: Callable | None = None
    symmetric: Callable | None = None


ATOM = 9  # precedence of anything printed as one token: names, calls, transposes


# ------------------------------------------------------------------ shared pieces
def dense(x) -> np.ndarray:
    """``x`` as a dense float64 array (sparse matrices are expanded)."""
    if sps.issparse(x):
        return np.asarray(x.todense(), dtype=float)
    return np.asarray(x, dtype=float)


def inverse(a, what: str = "matrix") -> np.ndarray:
    """``inv(a)`` via LU, refusing singular or numerically singular matrices."""
    a = dense(a)
    try:
        lu, piv = scipy.linalg.lu_factor(a, check_finite=True)
    except (ValueError, np.linalg.LinAlgError) as e:
        raise NumericalError(f"cannot invert {what}: {e}") from None
    diag = np.abs(np.diag(lu))
    if diag.size and (diag.min() == 0 or diag.min() <= diag.max() * 1e-15 * diag.size):
        raise NumericalError(f"cannot invert {what}: it is singular to working precision")
    return scipy.linalg.lu_solve((lu, piv), np.eye(a.shape[0]))


def sum_terms(ts: list[Term]) -> Node:
    """``Σ P Qᵀ`` as one (small or thin) expression."""
    out = None
    for t in ts:
        x = ir.matmul(t.P, ir.transpose(t.Q))
        out = x if out is None else ir.add(out, x)
    return out


def _neg_terms(ts: list[Term]) -> list[Term]:
    return [Term(ir.neg(t.P), t.Q) for t in ts]


def _entries(n: Node, size) -> object:
    return size(n.rows) * size(n.cols)


def _elementwise_flops(n: Node, size) -> object:
    return _entries(n, size)


def _no_flops(n: Node, size) -> object:
    return 0


def _all_symmetric(n: Node, sym) -> bool:
    return all(sym(c) for c in n.children)


def chain_factors(n: Node) -> list[Node]:
    """The factors of a product chain ``A B C`` (nested MULs flattened)."""
    if n.op is Op.MUL:
        return chain_factors(n.children[0]) + chain_factors(n.children[1])
    return [n]


# ------------------------------------------------------------------ shape rules
def _same_shape(children, attr):
    a, b = children
    if same_dim(a.rows, b.rows) and same_dim(a.cols, b.cols):
        return a.shape
    raise ShapeMismatch("operands of +/- must have the same size", a.shape, b.shape)


def _broadcast_shape(children, attr):
    a, b = children
    if a.is_scalar:
        return b.shape
    if b.is_scalar:
        return a.shape
    return _same_shape(children, attr)


def _unary_shape(children, attr):
    return children[0].shape


def _square_shape(children, attr):
    a = children[0]
    if not same_dim(a.rows, a.cols):
        raise ShapeMismatch("the matrix must be square", a.shape)
    return a.shape


# ------------------------------------------------------------------ + - and unary minus
def _add_sub(op: Op, symbol: str) -> OpDef:
    def delta(n, d, new):
        return d[0] + (d[1] if op is Op.ADD else _neg_terms(d[1]))

    return OpDef(
        shape=_same_shape,
        evaluate=(lambda n, a, b: a + b) if op is Op.ADD else (lambda n, a, b: a - b),
        text=lambda n, w: f"{w(0, 0)} {symbol} {w(1, 2)}", prec=1,
        flops=_elementwise_flops,
        delta=delta,
        transpose=lambda n, t: ir.node(op, *(t(c) for c in n.children)),
        symmetric=_all_symmetric,
    )


NEG = OpDef(
    shape=_unary_shape,
    evaluate=lambda n, a: -a,
    text=lambda n, w: f"-{w(0, 3)}", prec=2,
    flops=_elementwise_flops,
    delta=lambda n, d, new: _neg_terms(d[0]),
    transpose=lambda n, t: ir.neg(t(n.children[0])),
    symmetric=_all_symmetric,
)


# ------------------------------------------------------------------ matrix product
def _matmul_shape(children, attr):
    a, b = children
    if same_dim(a.cols, b.rows):
        return (a.rows, b.cols)
    raise ShapeMismatch("inner dimensions of a product must agree", a.shape, b.shape)


def _mul_delta(n, d, new):
    """``Δ(A B) = ΔA B + A' ΔB`` with the *new* ``A' = A + ΔA``: terms ``(Pa, Bᵀ Qa)`` and
    ``(A' Pb, Qb)``; this keeps ranks small (``A^16`` by squaring: ranks 2, 4, 8, 16)."""
    a, b = n.children
    terms = [Term(t.P, ir.matmul(ir.transpose(b), t.Q)) for t in d[0]]
    terms += [Term(ir.matmul(new[0], t.P), t.Q) for t in d[1]]
    return terms


def _mul_symmetric(n, sym):
    """Palindromic chains ``Fᵀ S F`` (with a symmetric middle factor when the length is odd)."""
    fs = chain_factors(n)
    half = len(fs) // 2
    if any(ir.transpose(fs[i]) is not fs[-1 - i] for i in range(half)):
        return False
    return len(fs) % 2 == 0 or sym(fs[half])


MUL = OpDef(
    shape=_matmul_shape,
    evaluate=lambda n, a, b: dense(a @ b),
    text=lambda n, w: f"{w(0, 3)} {w(1, 4)}", prec=3,
    flops=lambda n, size: 2 * size(n.children[0].rows) * size(n.children[0].cols)
    * size(n.cols),
    delta=_mul_delta,
    transpose=lambda n, t: ir.matmul(t(n.children[1]), t(n.children[0])),
    symmetric=_mul_symmetric,
)


# ------------------------------------------------------------------ scaling by a 1x1
def _scale_shape(children, attr):
    s, e = children
    if not s.is_scalar:
        raise ShapeMismatch("a scaling factor must be 1x1", s.shape)
    return e.shape


def _scale_delta(n, d, new):
    s, a = n.children
    terms = []
    if d[0]:  # the scaling factor itself changes: Δs·A = A·(Δs I)
        terms.append(Term(a, ir.scale(sum_terms(d[0]), ir.eye(a.cols))))
    terms += [Term(ir.scale(new[0], t.P), t.Q) for t in d[1]]
    return terms


SCALE = OpDef(
    shape=_scale_shape,
    evaluate=lambda n, s, a: dense(a * float(s[0, 0])),
    text=lambda n, w: f"{w(0, ATOM)}·{w(1, 4)}", prec=3,
    flops=_elementwise_flops,
    delta=_scale_delta,
    transpose=lambda n, t: ir.scale(n.children[0], t(n.children[1])),
    symmetric=lambda n, sym: sym(n.children[1]),
)


# ------------------------------------------------------------------ transpose and inverse
T = OpDef(
    shape=lambda children, attr: (children[0].cols, children[0].rows),
    evaluate=lambda n, a: dense(a.T),
    text=lambda n, w: f"{w(0, ATOM)}ᵀ", prec=ATOM,
    flops=_no_flops,
    delta=lambda n, d, new: [Term(t.Q, t.P) for t in d[0]],
)

INV = OpDef(
    shape=_square_shape,
    evaluate=lambda n, a: inverse(a),
    text=lambda n, w: f"inv({w(0, 0)})", prec=ATOM,
    flops=lambda n, size: 2 * size(n.rows) ** 3,
    # no expression rule: a statement ``W := inv(A)`` is maintained by Woodbury's identity
    # (delta.woodbury_terms); an inverse inside a larger expression is re-evaluated
    delta=None,
    transpose=lambda n, t: ir.node(Op.INV, t(n.children[0])),
    symmetric=_all_symmetric,
)


# ------------------------------------------------------------------ elementwise .* ./
def _emul_evaluate(n, a, b):
    if sps.issparse(a):
        return dense(sps.csr_matrix(a).multiply(b))
    return dense(a * dense(b))


EMUL = OpDef(
    shape=_broadcast_shape,
    evaluate=_emul_evaluate,
    text=lambda n, w: f"{w(0, 3)} .* {w(1, 4)}", prec=3,
    flops=_elementwise_flops,
    symmetric=_all_symmetric,
)

EDIV = OpDef(
    shape=_broadcast_shape,
    evaluate=lambda n, a, b: dense(a) / dense(b),
    text=lambda n, w: f"{w(0, 3)} ./ {w(1, 4)}", prec=3,
    flops=_elementwise_flops,
    symmetric=_all_symmetric,
)


# ------------------------------------------------------------------ sum and trace
def _sum_delta(n, d, new):
    a = n.children[0]
    if n.attr == 1:  # 1ᵀ A
        return [Term(ir.matmul(ir.ones(1, a.rows), t.P), t.Q) for t in d[0]]
    return [Term(t.P, ir.matmul(ir.ones(1, a.cols), t.Q)) for t in d[0]]  # A 1


SUM = OpDef(
    shape=lambda children, attr: ((ONE, children[0].cols) if attr == 1
                                  else (children[0].rows, ONE)),
    evaluate=lambda n, a: np.asarray(a.sum(axis=n.attr - 1), dtype=float).reshape(
        (1, -1) if n.attr == 1 else (-1, 1)),
    text=lambda n, w: f"sum({w(0, 0)}, {n.attr})", prec=ATOM,
    flops=lambda n, size: _entries(n.children[0], size),
    delta=_sum_delta,
)


def _trace_delta(n, d, new):
    """``trace(P Qᵀ) = Σᵢⱼ Pᵢⱼ Qᵢⱼ``."""
    out = []
    for t in d[0]:
        s = ir.node(Op.SUM, ir.node(Op.SUM, ir.node(Op.EMUL, t.P, t.Q), attr=1), attr=2)
        out.append(Term(s, ir.const(1)))
    return out


def _trace_shape(children, attr):
    _square_shape(children, attr)
    return (ONE, ONE)


TRACE = OpDef(
    shape=_trace_shape,
    evaluate=lambda n, a: np.array([[float(a.diagonal().sum())]]),
    text=lambda n, w: f"trace({w(0, 0)})", prec=ATOM,
    flops=lambda n, size: _entries(n.children[0], size),
    delta=_trace_delta,
    symmetric=lambda n, sym: True,
)


# ------------------------------------------------------------------ block concatenation
def _block_rows(n: Node) -> list[tuple[Node, ...]]:
    """The block rows of a CONCAT node (``attr`` holds the number of blocks per row)."""
    rows, i = [], 0
    for k in n.attr:
        rows.append(n.children[i:i + k])
        i += k
    return rows


def _concat_shape(children, attr):
    rows_out: list = []
    cols_out = None
    i = 0
    for k in attr:
        row = children[i:i + k]
        i += k
        height = row[0].rows
        for blk in row[1:]:
            if not same_dim(blk.rows, height):
                raise ShapeMismatch("blocks in one block row must have the same number of "
                                    "rows", row[0].shape, blk.shape)
        width = sp.Add(*[blk.cols for blk in row])
        if cols_out is None:
            cols_out = width
        elif not same_dim(width, cols_out):
            raise ShapeMismatch("block rows must have the same total number of columns",
                                (height, width), (rows_out[-1], cols_out))
        rows_out.append(height)
    return (sp.Add(*rows_out), cols_out)


def _concat_delta(n, d, new):
    """A changing block at row offset r0 and column offset c0 pads its factors with zeros."""
    terms, i, r0 = [], 0, sp.Integer(0)
    for row in _block_rows(n):
        c0 = sp.Integer(0)
        for j, blk in enumerate(row):
            for t in d[i + j]:
                r = t.rank
                P = ir.vstack([ir.zeros(r0, r), t.P, ir.zeros(n.rows - r0 - blk.rows, r)])
                Q = ir.vstack([ir.zeros(c0, r), t.Q, ir.zeros(n.cols - c0 - blk.cols, r)])
                terms.append(Term(P, Q))
            c0 = c0 + blk.cols
        r0 = r0 + row[0].rows
        i += len(row)
    return terms


def _concat_evaluate(n, *xs):
    rows, i = [], 0
    for k in n.attr:
        rows.append([dense(x) for x in xs[i:i + k]])
        i += k
    return np.block(rows)


def _concat_text(n, w):
    rows, i = [], 0
    for k in n.attr:
        rows.append(", ".join(w(j, 0) for j in range(i, i + k)))
        i += k
    return "[" + "; ".join(rows) + "]"


def _concat_transpose(n, t):
    """``[A, B; C, D]ᵀ = [Aᵀ, Cᵀ; Bᵀ, Dᵀ]`` when every block row has as many blocks."""
    per_row = n.attr[0]
    if any(k != per_row for k in n.attr):
        return None
    rows = _block_rows(n)
    cols = [[t(r[j]) for r in rows] for j in range(per_row)]
    return Node(Op.CONCAT, tuple(x for c in cols for x in c), (len(rows),) * per_row)


CONCAT = OpDef(
    shape=_concat_shape,
    evaluate=_concat_evaluate,
    text=_concat_text, prec=ATOM,
    flops=_no_flops,
    delta=_concat_delta,
    transpose=_concat_transpose,
)


# ------------------------------------------------------------------ the table
OPS: dict[Op, OpDef] = {
    Op.ADD: _add_sub(Op.ADD, "+"),
    Op.SUB: _add_sub(Op.SUB, "-"),
    Op.NEG: NEG,
    Op.MUL: MUL,
    Op.SCALE: SCALE,
    Op.T: T,
    Op.INV: INV,
    Op.EMUL: EMUL,
    Op.EDIV: EDIV,
    Op.SUM: SUM,
    Op.TRACE: TRACE,
    Op.CONCAT: CONCAT,
    # A \ B kept as a solve view (linview/solve/); its reference meaning is a direct solve
    **{op: OpDef(**fields) for op, fields in ops_solve.ENTRIES.items()},
    # the wider Octave language: indexing, elementwise functions, reductions, while loops
    **{op: OpDef(**fields) for op, fields in ops_octave.ENTRIES.items()},
}

if any(op not in OPS for op in Op if op not in ir.LEAVES):  # a new op needs its entry here
    raise ImportError("ops without a definition: "
                      + ", ".join(op.name for op in Op if op not in ir.LEAVES and op not in OPS))
ir.SHAPE_RULES.update({op: d.shape for op, d in OPS.items()})
