"""Counting: flops and bytes of evaluating expressions, of re-evaluation and of each trigger
strategy, and the memory views hold.

Counts are sympy expressions in the program's sizes and the update rank ``k`` (symbolic
formulas) or numbers under bound sizes.  Flops per operation are each op's ``flops`` entry
(:data:`.ops.OPS`: a product (a×b)(b×c) costs 2abc, an inverse 2n³, elementwise work one
flop per entry); applying ``V += P Qᵀ`` costs 2·rows·cols·rank.  Bytes count 8 per float64
read or written by each operation (inputs read once, result written once).  The decisions
built on these are in :mod:`.cost` and :mod:`.timemodel`.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from linview.compiler import ir, passes
from linview.compiler.delta import Strategy
from linview.compiler.ir import Node, Op
from linview.compiler.ops import OPS, Term, sum_terms
from linview.compiler.optimize import ChainPlanner, Sizes

SizeFn = Callable[[sp.Expr], object]
#: update factors assumed one-hot when planning: ``U`` of a row update (what ``bench`` and
#: the update helpers for rows and observations produce)
ONE_HOT = frozenset({"U"})


def _leaf_operand(n: Node) -> bool:
    n = n.children[0] if n.op is Op.T else n
    return n.op in (Op.VIEW, Op.INPUT)


def node_counts(m: Node, size: SizeFn, one_hot=ONE_HOT) -> tuple[object, object]:
    """``(flops, bytes)`` of the operation at ``m`` alone (its children already computed):
    the op's ``flops`` entry (:data:`.ops.OPS`), its operands read and its result written
    (constants are free).  A product of a view with a one-hot update factor (a name in
    ``one_hot``: a row update) reads only ``k`` of the view's columns, as ``rt.dot`` does."""
    r, c = size(m.rows), size(m.cols)
    if m.op is Op.MUL:
        a, b = m.children
        if b.op is Op.FACTOR and b.attr in one_hot and _leaf_operand(a):
            k = size(b.cols)
            return 2 * size(a.rows) * k * k, 8 * (size(a.rows) * k + size(b.rows) * k + r * c)
    ins = [size(x.rows) * size(x.cols) for x in m.children
           if x.op not in ir.CONSTANT_LEAVES]
    return OPS[m.op].flops(m, size), 8 * (sum(ins) + r * c)


def count(n: Node, size: SizeFn, seen: set[int] | None = None,
          one_hot=frozenset()) -> tuple[object, object]:
    """``(flops, bytes)`` to evaluate ``n`` once; shared subexpressions count once.
    ``size`` maps a size expression to a number (numeric) or itself (symbolic);
    ``one_hot`` names update factors with one non-zero row per column (a row update), whose
    products with a view read only ``k`` of its columns."""
    seen = set() if seen is None else seen
    fl, by = 0, 0
    for m in n.walk():
        if id(m) in seen or m.op in ir.LEAVES:
            continue
        seen.add(id(m))
        f, b = node_counts(m, size, one_hot)
        fl, by = fl + f, by + b
    return fl, by


def symbolic(e):
    return sp.sympify(e)


def plan_terms(terms, sizes: Sizes) -> list[Node]:
    ctx = passes.Context(sizes, planner=ChainPlanner(sizes))
    return [passes.simplify(x, ctx) for t in terms for x in (t.P, t.Q)]


def with_new_operands(expr: Node, changed) -> Node:
    """``expr`` on the new values ``V + u vᵀ`` of its operands named in ``changed``, as a
    trigger that re-evaluates it has them (rank-1 placeholders for planning)."""
    def new_value(leaf: Node) -> Node | None:
        if leaf.op not in (Op.VIEW, Op.INPUT) or leaf.attr not in changed:
            return None
        u = ir.factor(f"dU_{leaf.attr}", (leaf.rows, 1))
        v = ir.factor(f"dV_{leaf.attr}", (leaf.cols, 1))
        return ir.add(leaf, ir.matmul(u, ir.transpose(v)))

    return ir.map_leaves(expr, new_value)


def strategy_counts(st: ir.Statement, terms: list[Term] | None, sizes: Sizes,
                    changed: set[str] = frozenset(), size: SizeFn | None = None,
                    one_hot=frozenset()) -> dict[Strategy, tuple[object, object]]:
    """``{strategy: (flops, bytes)}`` for keeping ``st`` fresh (see :func:`strategy_costs`)."""
    size = size or sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)

    new = with_new_operands(st.expr, changed)
    fl, by = count(passes.simplify(new, passes.Context(sizes)), size, set(), one_hot)
    out = {Strategy.REEVAL: (fl + rows * cols, by + 16 * rows * cols)}
    if terms is None:
        return out
    seen: set[int] = set()
    fl = by = 0
    for n in plan_terms(terms, sizes):
        f, b = count(n, size, seen, one_hot)
        fl, by = fl + f, by + b
    rank = sum((size(t.rank) for t in terms), 0)
    out[Strategy.INCR] = (fl + 2 * rows * cols * rank, by + 16 * rows * cols)
    dense = passes.simplify(sum_terms(list(terms)), passes.Context(sizes))
    f, b = count(dense, size, set(), one_hot)
    out[Strategy.HYBRID] = (f + rows * cols, b + 24 * rows * cols)
    return out


def program_counts(program: ir.Program, size: SizeFn,
                   sizes: Sizes | None = None) -> tuple[object, object]:
    """``(flops, bytes)`` of evaluating every view of ``program`` once, as re-evaluation
    computes it (:func:`.passes.evaluation_order` for ``sizes``)."""
    seen: set[int] = set()
    fl = by = 0
    for _, expr in passes.evaluation_order(program, sizes or Sizes()):
        f, b = count(expr, size, seen)
        fl, by = fl + f, by + b
    return fl, by


def view_memory(program: ir.Program, size: SizeFn, reeval: bool) -> object:
    """Bytes held: inputs and every view (incremental strategies keep them all), or for
    re-evaluation inputs, outputs and the two largest intermediates (thesis §6.4)."""
    inputs = sum((size(d.shape[0]) * size(d.shape[1]) for d in program.inputs), 0)
    views = [size(s.expr.rows) * size(s.expr.cols) for s in program.statements]
    if not reeval:
        return 8 * (inputs + sum(views, 0))
    outs = {n.attr for _, n in program.outputs}
    out_size = sum((size(s.expr.rows) * size(s.expr.cols) for s in program.statements
                    if s.name in outs), 0)
    inter = [size(s.expr.rows) * size(s.expr.cols) for s in program.statements
             if s.name not in outs]
    if size is symbolic:
        return 8 * (inputs + out_size + sum(inter[-2:], 0))
    return 8 * (inputs + out_size + sum(sorted(inter)[-2:], 0))


def held_views(program: ir.Program, bindings) -> dict[str, list[tuple[int, int]]]:
    """``{"inputs": [(rows, cols)], "statements": [(rows, cols)]}`` of every input and
    statement of ``program`` under ``bindings`` (a dict or :class:`Sizes`): what a load
    holds, each a dense float64 matrix unless its input is sparse.  A size left unbound is
    a ``KeyError``.  (:mod:`linview.budget` turns these into bytes before loading.)"""
    from linview.compiler.interp import size_value

    bound = bindings.bindings if isinstance(bindings, Sizes) else dict(bindings)
    memo: dict = {}

    def value(e) -> int:  # most sizes are a literal or one name: no sympy substitution
        if e not in memo:
            if isinstance(e, int | sp.Integer):
                memo[e] = int(e)
            elif isinstance(e, sp.Symbol):
                memo[e] = int(bound[e.name])
            else:
                memo[e] = size_value(e, bound)
        return memo[e]

    def shape(rows, cols) -> tuple[int, int]:
        return value(rows), value(cols)

    return {"inputs": [shape(*d.shape) for d in program.inputs],
            "statements": [shape(st.expr.rows, st.expr.cols) for st in program.statements]}
