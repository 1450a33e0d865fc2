"""Cost model: flops, bytes and memory of re-evaluation and of each trigger strategy.

Counts are sympy expressions in the program's sizes and the update rank ``k`` (symbolic
formulas), evaluated numerically under bound sizes for decisions.  Conventions: a product
(a×b)(b×c) costs 2abc flops, an inverse 2n³, elementwise work one flop per entry, and
applying ``V += P Qᵀ`` costs 2·rows·cols·rank.  Bytes count 8 per float64 read or written
by each operation (inputs read once, result written once).

The per-view strategy chooser (:func:`strategy_chooser`) is greedy in program order:

* an inverse is maintained by Woodbury (INCR) while that is cheaper than re-inverting;
* a view whose delta rank reaches its column count is kept as a dense delta (HYBRID), as
  for thin iterates ``T`` of n×p with small p (thesis §6.4.3, Figure 6.7);
* otherwise the cheapest of INCR, HYBRID and REEVAL by estimated flops.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from linview import ir
from linview.delta import Strategy, Term, _sum_terms
from linview.ir import Node, Op
from linview.optimize import ChainPlanner, Sizes, distribute, push_transposes

SizeFn = Callable[[sp.Expr], object]


def count(n: Node, size: SizeFn, seen: set[int] | None = None) -> tuple[object, object]:
    """``(flops, bytes)`` to evaluate ``n`` once; shared subexpressions count once.
    ``size`` maps a size expression to a number (numeric) or itself (symbolic)."""
    seen = set() if seen is None else seen
    fl, by = 0, 0
    for m in n.walk():
        if id(m) in seen or m.op in ir.LEAVES:
            continue
        seen.add(id(m))
        r, c = size(m.rows), size(m.cols)
        ins = [size(x.rows) * size(x.cols) for x in m.children
               if x.op not in ir.CONSTANT_LEAVES]
        if m.op is Op.MUL:
            a = m.children[0]
            fl += 2 * size(a.rows) * size(a.cols) * c
        elif m.op is Op.INV:
            fl += 2 * r ** 3
        elif m.op is Op.T or m.op is Op.CONCAT:
            pass
        elif m.op in (Op.SUM, Op.TRACE):
            fl += ins[0] if ins else 0
        else:
            fl += r * c
        by += 8 * (sum(ins) + r * c)
    return fl, by


def numeric(sizes: Sizes) -> SizeFn:
    return sizes.value


def symbolic(e):
    return sp.sympify(e)


# ------------------------------------------------------------------ strategy choice
def _plan_terms(terms, sizes: Sizes) -> list[Node]:
    planner = ChainPlanner(sizes)
    out = []
    for t in terms:
        out += [planner.order(distribute(push_transposes(t.P))),
                planner.order(distribute(push_transposes(t.Q)))]
    return out


def strategy_costs(st: ir.Statement, terms: list[Term] | None, sizes: Sizes,
                   size: SizeFn | None = None) -> dict[Strategy, object]:
    """Estimated flops of keeping ``st`` fresh by each applicable strategy."""
    size = size or sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)
    seen: set[int] = set()
    reeval = count(st.expr, size, set())[0]
    out: dict[Strategy, object] = {Strategy.REEVAL: reeval + rows * cols}
    if terms is None:
        return out
    nodes = _plan_terms(terms, sizes)
    work = sum((count(n, size, seen)[0] for n in nodes), 0)
    rank = sum((size(t.rank) for t in terms), 0)
    out[Strategy.INCR] = work + 2 * rows * cols * rank
    dense = ChainPlanner(sizes).order(distribute(push_transposes(_sum_terms(list(terms)))))
    out[Strategy.HYBRID] = count(dense, size, set())[0] + rows * cols
    return out


def strategy_chooser(bindings: dict[str, int], rank: int = 1):
    """The default per-view chooser for :func:`linview.delta.build_trigger`."""
    sizes = Sizes(dict(bindings), rank)

    def choose(st: ir.Statement, terms: list[Term] | None, inverse_of: str) -> Strategy:
        costs = strategy_costs(st, terms, sizes)
        if inverse_of:
            return Strategy.INCR if costs[Strategy.INCR] < costs[Strategy.REEVAL] \
                else Strategy.REEVAL
        r = sum(sizes.value(t.rank) for t in terms)
        cols, rows = sizes.value(st.expr.cols), sizes.value(st.expr.rows)
        if r >= min(cols, rows):
            best = min((Strategy.HYBRID, Strategy.REEVAL), key=lambda s: costs[s])
            return best
        return min(costs, key=lambda s: costs[s])

    return choose


def choose_model(module_ast, source, filename, dims, rank):
    """``--model auto``: lower with each iterative model and keep the cheapest total
    trigger cost (falls back to ``exp``)."""
    from linview.delta import TriggerOptions, build_trigger
    from linview.lower import Options, lower
    from linview.optimize import optimize_program

    sizes = Sizes(dict(dims), rank)
    best = None
    for opts in (Options("exp"), Options("linear"), Options("skip", 2), Options("skip", 4),
                 Options("skip", 8)):
        program = optimize_program(lower(module_ast, source, filename, opts))
        chooser = strategy_chooser(dims, rank)
        total = 0.0
        for x in program.dynamic:
            trig = build_trigger(program, x, TriggerOptions(choose=chooser))
            for vd in trig.deltas[1:]:
                st = program.statement(vd.name)
                total += float(strategy_costs(st, list(vd.terms) if vd.terms else None,
                                              sizes)[vd.strategy])
        if best is None or total < best[0]:
            best = (total, program, opts)
    return best[1], best[2]
